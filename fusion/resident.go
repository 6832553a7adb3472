package fusion

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/zeebo/xxh3"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Residency (the CUDA backend; the bookkeeping is here, untagged, so that
// it is tested without a GPU).
//
// The device keeps every graph input it was given (parameters, constants,
// batches) from one run to the next, and a run uploads an input only when
// the user changed it since the device took its copy:
//   - the node holds another value than the one the copy came from (a
//     gorgonia.Let of a new tensor, or a tensor whose memory was replaced),
//   - Machine.Touch named the node, or
//   - (CheckContents, the default) the bytes of the value differ from what
//     they were then: a write into the tensor's memory, as Gorgonia's own
//     solvers make. Each run hashes the bytes of every input it would not
//     upload otherwise (xxh3, 64 bits, in parallel over the cores); a
//     change goes unseen only if the two contents hash alike, with chance
//     about 2⁻⁶⁴ for contents not built to collide. A value seen for the
//     first time is uploaded without hashing and hashed at the next run
//     that finds it in the node again (so a batch let anew at every step
//     is never hashed), and uploaded once more then. The GPU's run hashes
//     the inputs it would keep on other goroutines while its device thread
//     launches the compute on the guess that they did not change, and
//     settles the guess before anything comes down: a changed one goes up
//     and the compute runs again (a run with host ops, which read values
//     mid-run, hashes first).
//
// An input a fused solver steps on the device (solver_cuda.go) is the
// device's between a Step and the next Machine.Sync: its host tensor is
// stale then, is not hashed, and a write into it is not seen (it could only
// mix new values into stale ones); a Let of a new tensor or Touch still
// wins over the device's steps, and after Sync the host tensor is current
// and watched as any other.
//
// With WithInputCheck(CheckLet) only the first two count: no hashing, and
// a write into a bound tensor's memory reaches the device only after
// Machine.Touch (or a Let). Views (tensors that are not contiguous) are
// uploaded at every run. Constants of the graph go up once, when the
// machine is made: they are part of the compiled graph.
//
// Values come down only where the user reads them (the readable set, and
// the host values Machine.Sync brings up to date), and a value whose host
// copy is current (nothing on the device wrote it since it came down) is not
// copied again (memVersions).

// InputCheck is how the CUDA backend tells that the host value of a graph
// input changed since it uploaded it (see WithInputCheck).
type InputCheck uint8

const (
	// CheckContents (the default): a new value (Let), Machine.Touch, or
	// different bytes (a 64-bit hash of each input's memory at each run).
	CheckContents InputCheck = iota
	// CheckLet: a new value (Let) or Machine.Touch only; no hashing.
	CheckLet
)

func (c InputCheck) String() string {
	switch c {
	case CheckContents:
		return "CheckContents"
	case CheckLet:
		return "CheckLet"
	}
	return fmt.Sprintf("InputCheck(%d)", uint8(c))
}

// WithInputCheck sets how the CUDA backend tells that an input the device
// holds has changed on the host, and so goes up again: CheckContents (the
// default) sees a Let of a new tensor, Machine.Touch and any write into the
// tensor's memory (Gorgonia's own solvers step their parameters in place),
// at the cost of hashing every held input at each run (BenchmarkInputCheck:
// 0.1–0.3 ms for the 4–5 MB of the bench's large MLP and encoder on a
// loaded 2-core VM; a fused solver's learnables and a batch let anew at
// every step are not hashed); CheckLet sees
// only a Let of a new tensor and Machine.Touch, and costs nothing. The CPU
// backend reads the host values at every run and ignores it.
func WithInputCheck(c InputCheck) Option {
	return func(cfg *config) {
		if c != CheckContents && c != CheckLet {
			cfg.errs = append(cfg.errs, fmt.Errorf("fusion: WithInputCheck(%v): no such check (fusion.CheckContents or fusion.CheckLet)", c))
		}
		cfg.inCheck = c
	}
}

// toucher is a backend that holds input values (the GPU backend).
type toucher interface {
	touch(n *G.Node) error
}

// Touch tells the machine that the host values of input nodes ns changed
// (a write into their tensors' memory): the next run uploads them. Under
// the default CheckContents the machine sees such writes itself and Touch
// only saves it nothing; under CheckLet it is how a write reaches the
// device. A node that is not an input of the machine's graph is an error.
// On the CPU backend, which reads the host values at every run, it checks
// the nodes and does nothing else.
func (m *Machine) Touch(ns ...*G.Node) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	if m.c == nil || m.be == nil {
		return fmt.Errorf("fusion: Touch after Close")
	}
	isInput := make(map[*G.Node]bool, len(m.c.rw.inputs))
	for _, in := range m.c.rw.inputs {
		isInput[in.orig] = true
	}
	tb, _ := m.be.(toucher)
	for i, n := range ns {
		switch {
		case n == nil:
			return fmt.Errorf("fusion: Touch: node %d of %d is nil", i+1, len(ns))
		case !isInput[n]:
			return fmt.Errorf("fusion: Touch: %v is not an input of the machine's graph (only inputs are uploaded)", n.Name())
		}
		if tb != nil {
			if err := tb.touch(n); err != nil {
				return err
			}
		}
	}
	return nil
}

// held is what the device's copy of one input stands for: the host value it
// was uploaded from or synced into, that value's memory, and (CheckContents)
// a hash of its bytes then.
type held struct {
	ok      bool    // the device holds a copy
	v       G.Value // the user's value then
	data    unsafe.Pointer
	bytes   int
	sum     uint64
	hashed  bool // sum is the hash of the bytes then
	touched bool // Machine.Touch since
	// stepped: a fused solver steps this input on the device, so its
	// bytes are hashed whenever it goes up (under CheckContents), and an
	// unchanged host value is told apart from a changed one without an
	// upload, which would undo the device's steps
	stepped bool
	dirty   bool // the device's copy is newer than the host's (stepped)
}

// verdict is what a run does with one input.
type verdict uint8

const (
	keep     verdict = iota // the device's copy stands
	upload                  // the value goes up
	hashThen                // keep if the bytes hash as before, else upload
)

// judge is the verdict for host value v under check c; b is v's bytes
// (valueBytes).
func (h *held) judge(v G.Value, b []byte, contiguous bool, c InputCheck) verdict {
	switch {
	case !h.ok || h.touched || v != h.v || !contiguous:
		return upload
	case len(b) != h.bytes || (len(b) > 0 && unsafe.Pointer(unsafe.SliceData(b)) != h.data):
		return upload // the tensor's memory was replaced
	case c == CheckLet, h.dirty:
		return keep // (dirty: the host's copy is stale, the device's stands)
	case !h.hashed:
		return upload // seen once: now hashed, kept from the next run on
	}
	return hashThen
}

// took records that the device's copy now equals host value v (an upload,
// or a sync into v's memory); sum is the hash of b if hashed.
func (h *held) took(v G.Value, b []byte, sum uint64, hashed bool) {
	*h = held{ok: true, v: v, bytes: len(b), sum: sum, hashed: hashed, stepped: h.stepped}
	if len(b) > 0 {
		h.data = unsafe.Pointer(unsafe.SliceData(b))
	}
}

// valueBytes is v's host memory as bytes: a contiguous float32 or float64
// tensor's data, or a scalar's. contiguous is false for anything else
// (views of other tensors, other types): such a value goes up every run.
func valueBytes(v G.Value) (b []byte, contiguous bool) {
	switch x := v.(type) {
	case *tensor.Dense:
		if x.IsMaterializable() {
			return nil, false
		}
		if x.IsScalar() {
			return nil, false // as Data, which gives a scalar's element, not a slice
		}
		// the backing array's typed view (storage.Header's, promoted), not
		// Data: that builds the slice through reflect and allocates, half
		// of a training step's look at its inputs
		switch x.Dtype() {
		case tensor.Float32:
			d := x.Float32s()
			return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(d))), 4*len(d)), true
		case tensor.Float64:
			d := x.Float64s()
			return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(d))), 8*len(d)), true
		}
	case *G.F32:
		return unsafe.Slice((*byte)(unsafe.Pointer(x)), 4), true
	case *G.F64:
		return unsafe.Slice((*byte)(unsafe.Pointer(x)), 8), true
	}
	return nil, false
}

// hashChunk is the piece of memory one worker hashes at a time.
const hashChunk = 64 << 10

// contentHash is the hash of b that residency compares: xxh3 of b up to a
// chunk, else xxh3 of the chunks' xxh3s in order (so that chunks hash in
// parallel).
func contentHash(b []byte) uint64 {
	if len(b) <= hashChunk {
		return xxh3.Hash(b)
	}
	sums := make([]byte, 8*chunks(len(b)))
	for i := range chunks(len(b)) {
		binary.LittleEndian.PutUint64(sums[8*i:], xxh3.Hash(chunkOf(b, i)))
	}
	return xxh3.Hash(sums)
}

func chunks(n int) int { return (n + hashChunk - 1) / hashChunk }

func chunkOf(b []byte, i int) []byte { return b[i*hashChunk : min(len(b), (i+1)*hashChunk)] }

// hashAll is contentHash of each of bs, the chunks spread over the cores
// when there is more than hashParallel bytes in all: the caller hashes
// chunks too, from the first, and waits for the helpers by polling (a
// helper not scheduled yet costs it nothing; parking and waking the caller
// would cost more than a chunk).
func hashAll(bs [][]byte) []uint64 {
	out := make([]uint64, len(bs))
	total := 0
	for _, b := range bs {
		total += len(b)
	}
	workers := min(runtime.GOMAXPROCS(0), 8, (total+hashChunk-1)/hashChunk)
	if total < hashParallel || workers < 2 {
		for i, b := range bs {
			out[i] = contentHash(b)
		}
		return out
	}
	type job struct{ b, c int } // buffer, chunk
	var jobs []job
	part := make([][]byte, len(bs)) // per buffer: its chunks' sums, or nil
	for i, b := range bs {
		if len(b) <= hashChunk {
			jobs = append(jobs, job{i, -1})
			continue
		}
		part[i] = make([]byte, 8*chunks(len(b)))
		for c := range chunks(len(b)) {
			jobs = append(jobs, job{i, c})
		}
	}
	var next, done atomic.Int64
	work := func() {
		for {
			k := int(next.Add(1)) - 1
			if k >= len(jobs) {
				return
			}
			j := jobs[k]
			if j.c < 0 {
				out[j.b] = xxh3.Hash(bs[j.b])
			} else {
				binary.LittleEndian.PutUint64(part[j.b][8*j.c:], xxh3.Hash(chunkOf(bs[j.b], j.c)))
			}
			done.Add(1)
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	for spins := 0; done.Load() < int64(len(jobs)); spins++ {
		if spins == 1<<16 { // a helper holding a job and descheduled: block
			wg.Wait()
			break
		}
	}
	for i, p := range part {
		if p != nil {
			out[i] = xxh3.Hash(p)
		}
	}
	return out
}

// hashParallel is the least total hashAll spreads over the cores.
const hashParallel = 256 << 10

// inputPlan decides a run's uploads: per input its verdict, and the hashes
// of CheckContents, computed together (hashAll).
type inputPlan struct {
	up      []bool   // per input: it goes up
	sums    []uint64 // per input: its bytes' hash, where hashed
	hashed  []bool
	bytes   [][]byte // per input: its host bytes (contiguous values)
	hashedB int64    // bytes hashed
	// later (planInputsLater): the inputs kept if their bytes hash as
	// before, not hashed yet; settle decides them
	later []int
}

// planInputs judges every input's host value against what the device holds.
func planInputs(hs []held, vals []G.Value, c InputCheck) inputPlan {
	p := planInputsLater(hs, vals, c)
	p.settle(hs, hashAll(p.laterBytes()))
	return p
}

// planInputsLater is planInputs but for the inputs it would keep if their
// bytes hash as before (hashThen): those are left in p.later, kept for
// now, for the caller to hash (hashAll of p.laterBytes, on another
// goroutine while the device works) and settle.
func planInputsLater(hs []held, vals []G.Value, c InputCheck) inputPlan {
	p := inputPlan{up: make([]bool, len(hs)), sums: make([]uint64, len(hs)), hashed: make([]bool, len(hs)), bytes: make([][]byte, len(hs))}
	var toHash [][]byte
	var at []int
	for i := range hs {
		b, contiguous := valueBytes(vals[i])
		p.bytes[i] = b
		v := hs[i].judge(vals[i], b, contiguous, c)
		// a value seen before but never hashed is hashed now as it goes up,
		// so that the next run can keep it; so is one a solver steps
		again := contiguous && c == CheckContents && (hs[i].stepped || hs[i].ok && vals[i] == hs[i].v)
		switch {
		case v == hashThen:
			p.later = append(p.later, i)
		case v == upload && again:
			toHash = append(toHash, b)
			at = append(at, i)
		}
		p.up[i] = v == upload
	}
	for k, s := range hashAll(toHash) {
		i := at[k]
		p.sums[i], p.hashed[i] = s, true
		p.hashedB += int64(len(toHash[k]))
	}
	return p
}

// laterBytes are the bytes of the inputs in p.later, in order.
func (p *inputPlan) laterBytes() [][]byte {
	bs := make([][]byte, len(p.later))
	for k, i := range p.later {
		bs[k] = p.bytes[i]
	}
	return bs
}

// settle decides the inputs in p.later from their hashes (sums, in order):
// one whose bytes hash otherwise than when the device took its copy goes
// up. It returns those, and empties p.later.
func (p *inputPlan) settle(hs []held, sums []uint64) []int {
	var changed []int
	for k, i := range p.later {
		p.sums[i], p.hashed[i] = sums[k], true
		p.hashedB += int64(len(p.bytes[i]))
		if sums[k] != hs[i].sum {
			p.up[i] = true // written into since the device took it
			changed = append(changed, i)
		}
	}
	p.later = nil
	return changed
}

// memVersions tracks which host copies of device values are current. Each
// device memory (a node's buffer; views and parts of a multi-output kernel
// share their kernel's) has a version that goes up whenever something
// writes it: an upload, a kernel, a solver step. A host copy remembers the
// version it was made at; it is current while they agree.
type memVersions struct {
	mem  map[any]int // a node (or any key) → its memory
	ver  []uint64
	copy map[any]uint64 // key → the version its host copy was made at
}

func newMemVersions() *memVersions {
	return &memVersions{mem: map[any]int{}, copy: map[any]uint64{}}
}

// add gives key a memory of its own, or alias's if alias is not nil.
func (m *memVersions) add(key, alias any) {
	if alias != nil {
		if i, ok := m.mem[alias]; ok {
			m.mem[key] = i
			return
		}
	}
	m.mem[key] = len(m.ver)
	m.ver = append(m.ver, 1)
}

// wrote records that key's memory changed on the device.
func (m *memVersions) wrote(key any) {
	if i, ok := m.mem[key]; ok {
		m.ver[i]++
	}
}

// current says whether key's host copy is still what the device holds.
func (m *memVersions) current(key any) bool {
	i, ok := m.mem[key]
	if !ok {
		return false
	}
	v, ok := m.copy[key]
	return ok && v == m.ver[i]
}

// copied records that key's host copy now equals the device's.
func (m *memVersions) copied(key any) {
	if i, ok := m.mem[key]; ok {
		m.copy[key] = m.ver[i]
	}
}

// opKey is the memVersions key of a node's host copy made for a host op's
// operand, as against the copy written back to the user (the node itself).
type opKey struct{ n *G.Node }

// forget drops key's host copy (the user's node holds another value).
func (m *memVersions) forget(key any) { delete(m.copy, key) }
