package ptxsim

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// TMA (PTX ISA §9.7.9.25, cp.async.bulk.tensor): a copy of a box of a
// tensor in global memory into shared memory, described by a tensor map
// that the driver encodes (cuTensorMapEncodeTiled) into 128 opaque bytes.
// The simulator reads its own encoding of those bytes (EncodeTensorMap),
// which its callers put where a GPU launch puts the driver's: in a kernel
// parameter of 128 bytes (.param .align 64 .b8 name[128], addressed by
// mov.b64 %rd, name then cvta.param.u64) or in global memory.
//
// Simulated: tile mode, 1 to 5 dimensions, element strides of 1, no
// interleave; the box lands row after row (the innermost dimension
// contiguous) at a 128-byte aligned shared address, its elements outside
// the tensor filled with zeros, the 32-, 64- or 128-byte swizzle applied to
// the shared address (bits [4, 4+b) XOR bits [7, 7+b), b = 1, 2, 3, as the
// wgmma descriptors' swizzles read them); the box's bytes, zeros included,
// complete transactions on the mbarrier when they land. Tensor stores,
// shared → global (tmastore.go), likewise in tile mode. Not simulated:
// im2col mode, multicast, cache hints, reductions to global.

// paramWindow is where generic addresses see the kernel's parameters (the
// address mov gives a parameter, which cvta.param keeps): parameter byte o
// is paramWindow+o.
const paramWindow = 0x0000_7d00_0000_0000

// tensorMapMagic tags the simulator's encoding of a tensor map.
const tensorMapMagic = 0x4d544654 // "TFTM"

// TensorMap is a tiled tensor map as the simulator models it: Addr the
// global address of element 0, ElemBytes its elements' size, Dims the
// tensor's extents in elements (Dims[0] innermost, contiguous), Strides the
// bytes between consecutive indices of dimensions 1.. (Strides[i-1] for
// dimension i; multiples of 16), Box the box's extents in elements, and
// Swizzle 0, 32, 64 or 128 (bytes).
type TensorMap struct {
	Addr      uint64
	ElemBytes int
	Dims      []uint64
	Strides   []uint64
	Box       []uint32
	Swizzle   int
}

// EncodeTensorMap encodes m into the 128 bytes a kernel parameter (or a
// global buffer) gives the simulator's cp.async.bulk.tensor; it checks what
// cuTensorMapEncodeTiled checks of the same fields.
func EncodeTensorMap(m TensorMap) ([]byte, error) {
	rank := len(m.Dims)
	switch {
	case rank < 1 || rank > 5:
		return nil, fmt.Errorf("ptxsim: tensor map of rank %d: 1 to 5", rank)
	case len(m.Box) != rank || len(m.Strides) != rank-1:
		return nil, fmt.Errorf("ptxsim: tensor map of rank %d with %d box extents and %d strides", rank, len(m.Box), len(m.Strides))
	case m.ElemBytes != 1 && m.ElemBytes != 2 && m.ElemBytes != 4 && m.ElemBytes != 8:
		return nil, fmt.Errorf("ptxsim: tensor map elements of %d bytes", m.ElemBytes)
	case m.Addr%16 != 0:
		return nil, fmt.Errorf("ptxsim: tensor map address %#x: not 16-byte aligned", m.Addr)
	case m.Swizzle != 0 && m.Swizzle != 32 && m.Swizzle != 64 && m.Swizzle != 128:
		return nil, fmt.Errorf("ptxsim: tensor map swizzle %d: 0, 32, 64 or 128", m.Swizzle)
	}
	for i, b := range m.Box {
		if b == 0 || b > 256 {
			return nil, fmt.Errorf("ptxsim: tensor map box extent %d of dimension %d: 1 to 256", b, i)
		}
	}
	if inner := int(m.Box[0]) * m.ElemBytes; inner%16 != 0 || m.Swizzle != 0 && inner > m.Swizzle {
		return nil, fmt.Errorf("ptxsim: tensor map box rows of %d bytes: a multiple of 16, at most the swizzle's %d", inner, m.Swizzle)
	}
	for i, s := range m.Strides {
		if s%16 != 0 {
			return nil, fmt.Errorf("ptxsim: tensor map stride %d of dimension %d: not a multiple of 16", s, i+1)
		}
	}
	b := make([]byte, 128)
	le := binary.LittleEndian
	le.PutUint32(b[0:], tensorMapMagic)
	le.PutUint32(b[4:], uint32(m.ElemBytes))
	le.PutUint32(b[8:], uint32(rank))
	le.PutUint32(b[12:], uint32(m.Swizzle))
	le.PutUint64(b[16:], m.Addr)
	for i, d := range m.Dims {
		le.PutUint64(b[24+8*i:], d)
	}
	for i, s := range m.Strides {
		le.PutUint64(b[64+8*i:], s)
	}
	for i, x := range m.Box {
		le.PutUint32(b[96+4*i:], x)
	}
	return b, nil
}

// decodeTensorMap reads a map EncodeTensorMap wrote.
func decodeTensorMap(b []byte) (TensorMap, bool) {
	le := binary.LittleEndian
	if len(b) < 128 || le.Uint32(b) != tensorMapMagic {
		return TensorMap{}, false
	}
	rank := int(le.Uint32(b[8:]))
	if rank < 1 || rank > 5 {
		return TensorMap{}, false
	}
	m := TensorMap{ElemBytes: int(le.Uint32(b[4:])), Swizzle: int(le.Uint32(b[12:])), Addr: le.Uint64(b[16:])}
	for i := range rank {
		m.Dims = append(m.Dims, le.Uint64(b[24+8*i:]))
		m.Box = append(m.Box, le.Uint32(b[96+4*i:]))
		if i > 0 {
			m.Strides = append(m.Strides, le.Uint64(b[64+8*(i-1):]))
		}
	}
	return m, true
}

// swizzleOff applies a tensor map's swizzle (bytes) to shared offset o.
func swizzleOff(o uint64, swizzle int) uint64 {
	if swizzle == 0 {
		return o
	}
	b := uint64(bits.TrailingZeros(uint(swizzle)) - 4) // 32 → 1, 64 → 2, 128 → 3
	return o ^ ((o >> 7) & (1<<b - 1) << 4)
}

// decodeCpAsyncBulkTensor: cp.async.bulk.tensor.Nd.shared::cluster.global
// {.tile}.mbarrier::complete_tx::bytes [dst], [tmap, {c0, …}], [mbar].
func decodeCpAsyncBulkTensor(d *decoder) error {
	rank := 0
	for _, m := range d.mods {
		if len(m) == 2 && m[1] == 'd' && m[0] >= '1' && m[0] <= '5' {
			rank = int(m[0] - '0')
		}
	}
	if rank == 0 {
		return d.errorf("%s: the dimension (.1d to .5d) is missing", d.raw.op)
	}
	if d.has("bulk_group") {
		return decodeTensorStore(d, rank)
	}
	if _, ok := d.hasPrefix("mbarrier::complete_tx"); !ok || !d.has("global") || d.has("im2col") ||
		d.has("multicast::cluster") || d.has("L2::cache_hint") {
		return d.errorf("of the tensor copies only global → shared in tile mode with mbarrier::complete_tx::bytes is simulated")
	}
	if err := d.nargs(3); err != nil {
		return err
	}
	dst, err := d.address(0)
	if err != nil {
		return err
	}
	tmap, coords, err := tensorOperand(d, 1, rank)
	if err != nil {
		return err
	}
	mb, err := d.address(2)
	if err != nil {
		return err
	}
	pc := d.in.pc
	d.in.run = func(w *warp, m uint32) error {
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			tm, origin, err := w.tensorMapAt(&tmap, coords, rank, l)
			if err != nil {
				return err
			}
			data, err := tm.box(w, l, origin)
			if err != nil {
				return err
			}
			da := w.addr(&dst, l)
			if da >= sharedWindow {
				da -= sharedWindow
			}
			da &= 0xffffffff
			if da%128 != 0 {
				return w.faultAddr(l, "memcheck", da, "cp.async.bulk.tensor to shared %#x: not 128-byte aligned", da)
			}
			if da+uint64(len(data)) > uint64(w.c.l.sharedSize) {
				return w.faultAddr(l, "memcheck", da, "cp.async.bulk.tensor writes %d bytes at shared offset %#x: the CTA has %d", len(data), da, w.c.l.sharedSize)
			}
			if tm.Swizzle != 0 {
				sw := make([]byte, len(data))
				for o := 0; o < len(data); o += 16 {
					t := swizzleOff(da+uint64(o), tm.Swizzle) - da
					if t+16 > uint64(len(sw)) {
						return w.faultAddr(l, "memcheck", da, "cp.async.bulk.tensor: a %d-byte swizzle takes the box of %d bytes at %#x out of itself (box rows × 8 must fill whole swizzle atoms)", tm.Swizzle, len(data), da)
					}
					copy(sw[t:t+16], data[o:o+16])
				}
				data = sw
			}
			b, _, err := w.mbarAt(spShared, &mb, l, false)
			if err != nil {
				return err
			}
			if err := w.bulkOnto(b, l, da, data, pc); err != nil {
				return err
			}
		}
		return nil
	}
	return nil
}

// tensorOperand parses operand i of a tensor copy, [tmap, {c0, …}], with
// rank coordinates.
func tensorOperand(d *decoder, i, rank int) (operand, []operand, error) {
	ts := d.arg(i)
	if len(ts) < 5 || ts[0].s != "[" || ts[len(ts)-1].s != "]" || ts[2].s != "," || ts[3].s != "{" || ts[len(ts)-2].s != "}" {
		return operand{}, nil, d.errorf("[tensor map, {coordinates}] expected, found %q", joinToks(ts))
	}
	tmap, err := d.operand(ts[1:2], tyU64)
	if err != nil {
		return operand{}, nil, err
	}
	var coords []operand
	var cur []token
	for _, t := range ts[4 : len(ts)-2] {
		if t.s == "," {
			c, err := d.operand(cur, tyS32)
			if err != nil {
				return operand{}, nil, err
			}
			coords, cur = append(coords, c), nil
			continue
		}
		cur = append(cur, t)
	}
	c, err := d.operand(cur, tyS32)
	if err != nil {
		return operand{}, nil, err
	}
	if coords = append(coords, c); len(coords) != rank {
		return operand{}, nil, d.errorf("%d coordinates for a %dd copy", len(coords), rank)
	}
	return tmap, coords, nil
}

// tensorMapAt is lane l's tensor map (in a parameter or global memory) and
// the box's origin from its coordinates.
func (w *warp) tensorMapAt(tmap *operand, coords []operand, rank, l int) (TensorMap, []int64, error) {
	at := w.val(tmap, l)
	var raw []byte
	if at >= paramWindow && at < paramWindow+uint64(len(w.c.l.params)) {
		raw = w.c.l.params[at-paramWindow:]
	} else {
		g, err := w.globalBytesAligned(at, 128, l, "tensor map read")
		if err != nil {
			return TensorMap{}, nil, err
		}
		raw = g
	}
	tm, ok := decodeTensorMap(raw)
	if !ok {
		return TensorMap{}, nil, w.faultAddr(l, "memcheck", at, "cp.async.bulk.tensor: no tensor map at %#x (the simulator reads EncodeTensorMap's bytes)", at)
	}
	if len(tm.Dims) != rank {
		return TensorMap{}, nil, w.faultAddr(l, "memcheck", at, "cp.async.bulk.tensor.%dd with a tensor map of rank %d", rank, len(tm.Dims))
	}
	origin := make([]int64, rank)
	for i := range coords {
		origin[i] = int64(int32(uint32(w.val(&coords[i], l))))
	}
	return tm, origin, nil
}

// rows calls f for each row of the box at origin that lies in the tensor
// (rows of dimensions 1.. in order, r counting every row of the box):
// its global address and the part of it inside the tensor, elements lo to
// hi of dimension 0 (relative to the tensor's start).
func (m TensorMap) rows(origin []int64, f func(r int, addr uint64, lo, hi int64) error) error {
	rank := len(m.Dims)
	rows := 1
	for _, b := range m.Box[1:] {
		rows *= int(b)
	}
	idx := make([]int64, rank) // the row's index in the box, dimensions 1..
	for r := range rows {
		in := true
		addr := m.Addr
		for i := 1; i < rank; i++ {
			g := origin[i] + idx[i]
			if g < 0 || g >= int64(m.Dims[i]) {
				in = false
			}
			addr += uint64(g) * m.Strides[i-1]
		}
		if in {
			lo, hi := max(origin[0], 0), min(origin[0]+int64(m.Box[0]), int64(m.Dims[0]))
			if lo < hi {
				if err := f(r, addr, lo, hi); err != nil {
					return err
				}
			}
		}
		for i := 1; i < rank; i++ {
			if idx[i]++; idx[i] < int64(m.Box[i]) {
				break
			}
			idx[i] = 0
		}
	}
	return nil
}

// box reads the box at origin (elements, innermost first) row after row,
// zeros outside the tensor.
func (m TensorMap) box(w *warp, l int, origin []int64) ([]byte, error) {
	inner := int(m.Box[0]) * m.ElemBytes
	rows := 1
	for _, b := range m.Box[1:] {
		rows *= int(b)
	}
	data := make([]byte, rows*inner)
	err := m.rows(origin, func(r int, addr uint64, lo, hi int64) error {
		n := int(hi-lo) * m.ElemBytes
		src := addr + uint64(lo)*uint64(m.ElemBytes)
		g, off, err := w.c.l.mem.find(src, n)
		if err != nil {
			return w.faultAddr(l, "memcheck", src, "cp.async.bulk.tensor reads %d bytes of box row %d: %v", n, r, err)
		}
		copy(data[r*inner+int(lo-origin[0])*m.ElemBytes:], g.data[off:off+n])
		return nil
	})
	return data, err
}
