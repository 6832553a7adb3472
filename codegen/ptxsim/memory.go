package ptxsim

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"sync"
)

// Global addresses start here; each buffer is aligned to 256 bytes and
// followed by at least 256 unmapped bytes, so that an access just past
// the end of one buffer never lands in the next.
const (
	globalBase = 0x0000_1000_0000_0000
	bufAlign   = 256
	guardBytes = 256
	// sharedWindow is where generic addresses see a CTA's shared memory
	// (cvta.shared, PTX ISA §6.4.1.1): shared offset s is generic
	// sharedWindow+s.
	sharedWindow = 0x0000_7e00_0000_0000
	windowSize   = 1 << 32
)

// Memory is the device's global memory: buffers at fixed addresses. Every
// load, store and atomic is checked against them; one outside every buffer,
// or misaligned, is a Fault.
type Memory struct {
	bufs []*buffer // by base address
	next uint64
	atom sync.Mutex // atomics on global memory are serialised
}

type buffer struct {
	name string
	base uint64
	data []byte
}

// NewMemory returns an empty global memory.
func NewMemory() *Memory { return &Memory{next: globalBase} }

// Alloc reserves size zeroed bytes and returns their address.
func (m *Memory) Alloc(name string, size int) uint64 {
	b := &buffer{name: name, base: m.next, data: make([]byte, size)}
	m.bufs = append(m.bufs, b)
	m.next = (b.base + uint64(size) + guardBytes + bufAlign - 1) / bufAlign * bufAlign
	return b.base
}

// AllocCopy allocates a buffer holding the contents of a slice of fixed-size
// numbers ([]float32, []float64, []int32, []uint32, []int64, []uint64,
// []uint16, []int16, []byte) and returns its address.
func (m *Memory) AllocCopy(name string, s any) (uint64, error) {
	n, err := sliceBytes(s)
	if err != nil {
		return 0, err
	}
	addr := m.Alloc(name, n)
	return addr, m.Write(addr, s)
}

// Write copies a slice (as AllocCopy takes) into memory at addr.
func (m *Memory) Write(addr uint64, s any) error {
	n, err := sliceBytes(s)
	if err != nil {
		return err
	}
	b, off, err := m.find(addr, n)
	if err != nil {
		return err
	}
	_, err = binary.Encode(b.data[off:off+n], binary.LittleEndian, s)
	return err
}

// Read copies memory at addr into a slice (as AllocCopy takes).
func (m *Memory) Read(addr uint64, s any) error {
	n, err := sliceBytes(s)
	if err != nil {
		return err
	}
	b, off, err := m.find(addr, n)
	if err != nil {
		return err
	}
	_, err = binary.Decode(b.data[off:off+n], binary.LittleEndian, s)
	return err
}

func sliceBytes(s any) (int, error) {
	switch s := s.(type) {
	case []float32:
		return 4 * len(s), nil
	case []float64:
		return 8 * len(s), nil
	case []int32:
		return 4 * len(s), nil
	case []uint32:
		return 4 * len(s), nil
	case []int64:
		return 8 * len(s), nil
	case []uint64:
		return 8 * len(s), nil
	case []int16:
		return 2 * len(s), nil
	case []uint16:
		return 2 * len(s), nil
	case []byte:
		return len(s), nil
	}
	return 0, fmt.Errorf("ptxsim: %T is not a slice of fixed-size numbers", s)
}

// find locates [addr, addr+n) inside one buffer.
func (m *Memory) find(addr uint64, n int) (*buffer, int, error) {
	i := sort.Search(len(m.bufs), func(i int) bool { return m.bufs[i].base > addr }) - 1
	if i >= 0 {
		b := m.bufs[i]
		if addr+uint64(n) <= b.base+uint64(len(b.data)) {
			return b, int(addr - b.base), nil
		}
	}
	return nil, 0, m.oob(addr, n, i)
}

// oob explains an access outside every buffer by the nearest one.
func (m *Memory) oob(addr uint64, n, i int) error {
	var near *buffer
	var dist uint64 = math.MaxUint64
	for _, j := range []int{i, i + 1} {
		if j < 0 || j >= len(m.bufs) {
			continue
		}
		b := m.bufs[j]
		end := b.base + uint64(len(b.data))
		var d uint64
		switch {
		case addr >= end:
			d = addr - end
		case addr+uint64(n) <= b.base:
			d = b.base - addr
		}
		if d < dist {
			near, dist = b, d
		}
	}
	if near == nil {
		return fmt.Errorf("%d-byte access at %#x is outside global memory (no buffers)", n, addr)
	}
	end := near.base + uint64(len(near.data))
	switch {
	case addr >= end:
		return fmt.Errorf("%d-byte access at %#x is out of bounds: %d bytes past the end of buffer %s [%#x, %#x) (%d bytes)",
			n, addr, addr-end, near.name, near.base, end, len(near.data))
	case addr < near.base:
		return fmt.Errorf("%d-byte access at %#x is out of bounds: %d bytes before buffer %s [%#x, %#x) (%d bytes)",
			n, addr, near.base-addr, near.name, near.base, end, len(near.data))
	}
	return fmt.Errorf("%d-byte access at %#x runs %d bytes past the end of buffer %s [%#x, %#x) (%d bytes)",
		n, addr, addr+uint64(n)-end, near.name, near.base, end, len(near.data))
}

// space is a PTX state space (PTX ISA §5.1).
type space uint8

const (
	spGeneric space = iota
	spGlobal
	spShared
	spParam
)

func (s space) String() string {
	return [...]string{"generic", "global", "shared", "param"}[s]
}

func le(b []byte, n int) uint64 {
	switch n {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	}
	return binary.LittleEndian.Uint64(b)
}

func putLE(b []byte, n int, v uint64) {
	switch n {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	default:
		binary.LittleEndian.PutUint64(b, v)
	}
}
