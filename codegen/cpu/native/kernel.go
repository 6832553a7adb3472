package native

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/codegen/cpu/pool"
	"github.com/tilefuse/tilefuse/tile"
)

// ErrFallback is returned by Launch when this launch must run on the
// executor instead: arguments it does not take (or of the wrong types: the
// executor reports those), parameters that overlap where one is stored
// to, an access outside a buffer (the executor reports the fault), or i32
// index arithmetic that would wrap, or an f32 sin or cos argument beyond
// sinBound32. Any stores already made are redone by the executor, which
// is safe because a kernel that may bail out part way never reads what it
// stores, but for the in-place kernels checkInPlace admits (one element a
// lane), which hold no sin or cos and bail out only where an i32 index
// over their buffers would wrap (2³¹ elements).
var ErrFallback = errors.New("native: run this launch on the executor")

// Kernel is a tile kernel compiled to native code.
type Kernel struct {
	k            *tile.Kernel
	code         *jit.Code
	frame        int32
	stored       []bool
	unit         []bool // by parameter: an integer the code takes as 1 (Launch runs a specialized copy where it is not: special.go)
	specials     specials
	inplace      bool    // loads from a buffer it stores to (plan.checkInPlace): a bail-out fails the whole launch
	consts       []int   // parameters every launch specializes (divisorParams); then code is nil
	atomics      []int   // parameters the kernel adds to atomically: saved before a launch, restored where it falls back
	work         float64 // estimated nanoseconds per program
	tasks        freeList[task]
	size         int // code bytes
	fast         int // phases with an unmasked row loop (fast.go)
	zmm          int // of which computing in zmm registers (fast.go: zmmOK)
	pairs        int // zmm loops whose two vectors are emitted in pairs (fast.go: pairOK)
	folds        int // selects and Ands the unmasked loops read as another value (fast.go: fold)
	prefetchesL2 int // prefetcht1 hints of strided rows emitted (body.go: prefetch)
	directA      int // products' a operands read where they lie when in bounds (dot.go: directOps)
	directB      int // and b operands
	colLoops     int // carried blocks summed in registers (colloop.go)
	pins         int // uniforms kept in registers in zmm loops (pin.go)
	prefetchesW  int // prefetchw hints of row stores emitted (body.go: prefetchStore)
	ntStores     int // stores past the caches emitted (body.go: ntStore)
	scalefs      int // exps scaled by VSCALEFPS (zmm: ops.go, expCore32)
	ranges       int // exps clamped by VRANGEPS (zmm with AVX512DQ: ops.go, expCore32)
	sum32        int // paired zmm loops summing in 32 partial sums (fast.go: useSum32)
	nanDetects   int // paired zmm max/min loops detecting NaNs first (fast.go: nanDetectOK)
	divFMAs      int // divisions by a uniform by FMA corrections (ops.go: divFMA)
	divNewtons   int // divisions of vectors by Newton's steps (ops.go: divNewton)
	transLoads   int // transposed loads packed and turned back in the frame (trans.go)
	prefixRows   int // phases whose unmasked rows cover a prefix of their lanes (fast.go)
	rowChecked   int // masked accesses of unmasked loops checked once a row (fast.go: rowChecked)
}

// Compile compiles k to native code, or returns an error wrapping
// ErrUnsupported (k uses something not implemented here, or this build or
// CPU cannot run generated code) or describing a failure.
func Compile(k *tile.Kernel) (*Kernel, error) {
	if !jit.Supported() {
		return nil, fmt.Errorf("native: this build or CPU cannot run generated code (amd64 with AVX2 and FMA): %w", ErrUnsupported)
	}
	if k == nil {
		return nil, fmt.Errorf("native: Compile of a nil kernel")
	}
	if err := k.Verify(); err != nil {
		return nil, err
	}
	// a float's round trip through i32 computed in the float (tile's
	// FoldIntRoundTrips: the code's integer blocks are affine in the
	// lanes, with no integer vectors); k stays the kernel Kernel returns
	pk, _ := k.FoldIntRoundTrips()
	// a reshape that regroups dimensions of a load or of elementwise ops
	// made of its operands reshaped (tile's SinkReshapes), down to
	// integer ranges, which the plan reshapes by their coefficients
	pk, _ = pk.SinkReshapes()
	if ps := divisorParams(pk); len(ps) > 0 {
		// compiled for each set of divisors the launches pass (special.go),
		// where it compiles with divisors no block spans (else declined
		// here, for what the code generator does not take)
		vals := map[int]int64{}
		for _, i := range ps {
			vals[i] = 1 << 30
		}
		sk, err := pk.Specialize(vals)
		if err != nil {
			return nil, err
		}
		kc, _ := sk.CSE()
		p, err := newPlan(kc)
		if err != nil {
			return nil, err
		}
		if _, _, err := generate(p); err != nil {
			return nil, err
		}
		return &Kernel{k: k, unit: make([]bool, len(k.Params)), consts: ps}, nil
	}
	// the plan of a copy whose repeated pure values are one value
	// (tile.CSE): each is computed once a vector, not once a repetition
	kc, _ := pk.CSE()
	p, err := newPlan(kc)
	if err != nil {
		return nil, err
	}
	code, frameSize, err := generate(p)
	if err != nil {
		return nil, err
	}
	if dir := os.Getenv("TILEFUSE_NATIVE_DUMP"); dir != "" {
		// the machine code, for objdump -D -b binary -m i386:x86-64; the
		// name with a hash of the code, since kernels compiled by their IR
		// without names share one (fusion's CPU backend)
		os.WriteFile(filepath.Join(dir, dumpName(k.Name, code)), code, 0o644)
	}
	c, err := jit.New(code)
	if err != nil {
		return nil, err
	}
	if m := os.Getenv("TILEFUSE_PERFMAP"); m != "" {
		writePerfMap(m, c.Entry(), len(code), strings.TrimSuffix(dumpName(k.Name, code), ".bin"))
	}
	unit := make([]bool, len(k.Params))
	for i := range unit {
		unit[i] = p.unit[int64(i)]
	}
	var atomics []int
	for i, at := range p.atomics {
		if at {
			atomics = append(atomics, i)
		}
	}
	nk := &Kernel{k: k, code: c, frame: frameSize, stored: p.stored, unit: unit, inplace: len(p.inplace) > 0, atomics: atomics, work: estimate(p), size: len(code), fast: p.fastPhases, zmm: p.zmmPhases, pairs: p.pairLoops, folds: p.folds, prefetchesL2: p.prefetchesL2, directA: p.directA, directB: p.directB, colLoops: p.colLoops, pins: p.pins, prefetchesW: p.prefetchesW, ntStores: p.ntStores, scalefs: p.scalefs, ranges: p.ranges, sum32: p.sum32Loops, nanDetects: p.nanDetects, divFMAs: p.divFMAs, divNewtons: p.divNewtons, transLoads: p.transLoads, prefixRows: p.prefixRows, rowChecked: p.rowChecked}
	nk.tasks.new = func() *task {
		return &task{nk: nk, hdr: make([]byte, hParams+paramSize*len(k.Params)), frames: make([]*frame, pool.Default().Workers())}
	}
	return nk, nil
}

// dumpName is the file TILEFUSE_NATIVE_DUMP writes code of kernel name to:
// the name and 16 hex digits of the code's FNV-1a hash.
func dumpName(name string, code []byte) string {
	h := fnv.New64a()
	h.Write(code)
	return fmt.Sprintf("%s-%016x.bin", name, h.Sum64())
}

// perfMapMu keeps writePerfMap's lines whole where kernels compile on
// several goroutines.
var perfMapMu sync.Mutex

// writePerfMap appends the line "start size name" (hexadecimal) of code at
// entry to Linux perf's map of a process's generated code
// (/tmp/perf-PID.map, where perf report and perf script look) where m is
// "1", else to the file m: a profile then names each kernel's samples by
// the kernel (the name as TILEFUSE_NATIVE_DUMP names its file, without
// .bin, so that a sample's offset can be found in that file's code). A
// failure to write is ignored: the map is a diagnostic.
func writePerfMap(m string, entry uintptr, size int, name string) {
	if m == "1" {
		m = fmt.Sprintf("/tmp/perf-%d.map", os.Getpid())
	}
	perfMapMu.Lock()
	defer perfMapMu.Unlock()
	f, err := os.OpenFile(m, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "%x %x %s\n", entry, size, name)
	f.Close()
}

// Kernel is the kernel compiled.
func (nk *Kernel) Kernel() *tile.Kernel { return nk.k }

// CodeSize is the size of the generated code in bytes.
func (nk *Kernel) CodeSize() int { return nk.size }

// Free releases the code now (else a cleanup does when the Kernel is
// unreachable). No launch may be in flight or follow.
func (nk *Kernel) Free() error {
	err := nk.freeSpecials()
	if nk.code == nil {
		return err
	}
	if e := nk.code.Free(); e != nil {
		return e
	}
	return err
}

// estimate is a rough cost of one program in nanoseconds: the vector
// instructions of its phases (about 0.4 ns each on one core).
func estimate(p *plan) float64 {
	ns := 20.0
	region := func(rg *region) float64 {
		t := 0.0
		for _, ph := range rg.phases {
			vecs := float64(max(1, ph.shape.Numel()/lane))
			t += 0.4 * vecs * float64(4+3*(len(ph.ops)+len(ph.yields)+len(ph.packs)))
		}
		for _, v := range rg.trans { // transposeBlock: about six instructions a vector
			t += 0.4 * 6 * float64(max(1, v.Type.Shape.Numel()/lane))
		}
		for _, d := range rg.dots { // an FMA of eight lanes, with its share of loads, about 0.3 ns
			s := d.Args[0].Type.Shape
			t += 0.3 * float64(s.Dims[0]*s.Dims[1]*d.Args[1].Type.Shape.Dims[1]/lane)
		}
		return t
	}
	var items func(items []item) float64
	items = func(its []item) float64 {
		ns := 0.0
		for _, it := range its {
			if it.rg != nil {
				ns += region(it.rg)
				continue
			}
			trips := 16.0 // bounds known only at run time: a guess
			lo, hi, step := it.loop.v.Args[0], it.loop.v.Args[1], it.loop.v.Args[2]
			switch {
			case lo.Op == tile.OpConst && hi.Op == tile.OpConst && step.Op == tile.OpConst && step.Aux > 0:
				trips = float64(max(0, (hi.Aux-lo.Aux+step.Aux-1)/step.Aux))
			case step.Op == tile.OpConst && step.Aux > 0:
				if n, ok := chunkOf(lo, hi); ok { // a chunk of the range: [lo, min(lo + n, end))
					trips = float64((n + step.Aux - 1) / step.Aux)
				}
			}
			ns += trips * (10 + items(it.loop.items))
		}
		return ns
	}
	ns += items(p.items)
	return ns
}

// chunkOf reports n where hi is min(lo + n, end) or min(end, lo + n) for
// constants n and end: a loop over a program's chunk of a range (a
// reduction split over row chunks), at most n long.
func chunkOf(lo, hi *tile.Value) (int64, bool) {
	if hi.Op != tile.OpMin || len(hi.Args) != 2 {
		return 0, false
	}
	for _, a := range hi.Args {
		if a.Op == tile.OpAdd && len(a.Args) == 2 {
			for i, x := range a.Args {
				if x == lo && a.Args[1-i].Op == tile.OpConst && a.Args[1-i].Aux > 0 {
					return a.Args[1-i].Aux, true
				}
			}
		}
	}
	return 0, false
}

// freeList is a stack of a kernel's tasks (each with its workers'
// frames), kept across garbage collections: a sync.Pool is emptied by
// every collection, after which each launch allocated (and zeroed) its task
// and every worker's frame anew, the bench's timed runs (each after a
// collection) included. It holds as many as were ever in use at once.
type freeList[T any] struct {
	mu   sync.Mutex
	free []*T
	new  func() *T
}

func (l *freeList[T]) get() *T {
	l.mu.Lock()
	if n := len(l.free); n > 0 {
		x := l.free[n-1]
		l.free[n-1] = nil
		l.free = l.free[:n-1]
		l.mu.Unlock()
		return x
	}
	l.mu.Unlock()
	return l.new()
}

func (l *freeList[T]) put(x *T) {
	l.mu.Lock()
	l.free = append(l.free, x)
	l.mu.Unlock()
}

// frame is one worker's frame: the header and everything the generated
// code keeps, 64-byte aligned (blockAlign).
type frame struct {
	buf []byte
	at  unsafe.Pointer
}

func newFrame(size int32) *frame {
	buf := make([]byte, size+blockAlign)
	at := unsafe.Pointer(&buf[0])
	at = unsafe.Add(at, (blockAlign-uintptr(at)%blockAlign)%blockAlign)
	return &frame{buf: buf, at: at}
}

func (f *frame) u64(off int) *uint64 { return (*uint64)(unsafe.Add(f.at, off)) }

// task is one launch as pool work: the header the frames start with.
//
// What the caller writes at every launch (args) is on a cache line apart
// from what the workers read (the rest), and Launch writes those only
// where they change (bind, prepare): each line the caller writes is one the
// workers of the next launch must fetch from its core, one trip after
// another before their first program (a launch of the same kernel over the
// same buffers, the loop of a graph's runs, writes none).
type task struct {
	args []any // a copy of the launch's arguments, while it runs (see Launch)
	_    [64 - 24]byte

	nk    *Kernel
	hdr   []byte
	grid  [3]int
	chunk int // programs per native call at most
	fail  atomic.Bool
	// partial: a program that bails out is recorded in bailed and the
	// others run on (Launch of a kernel without in-place loads), else a
	// bail-out fails the launch
	partial  bool
	bailedMu sync.Mutex
	bailed   []int
	// frames[w] is worker w's frame, made on its first Run and kept with
	// the task: a launch runs each worker on one goroutine, and a task is
	// one launch's at a time. (A free list of frames shared by the
	// workers, as before, had them contend for its mutex at the start and
	// end of every launch: on the 16-core host, 2026-12-02, 47% of
	// task.Run's samples in a loop of small softmax, LayerNorm and column
	// sum runs.)
	frames []*frame
}

// maxCallNs bounds the work of one native call, which the Go runtime
// cannot preempt (a garbage collection waits for it).
const maxCallNs = 200_000

// parallelNs is the work below which a launch runs on the caller alone:
// waking the workers costs a few microseconds. Above it a launch asks for
// one worker per parallelNs/2 of work, up to the pool's size, so that each
// worker woken has work for several times what waking it costs. 5 µs, or
// TILEFUSE_PARALLEL_NS nanoseconds, read when the process starts, for
// measuring. It was 30 µs until 2026-12-02 (twelfth session), from the
// 2-core VM, where the split pays moves with the host between 10 and
// 40 µs of estimated work; since the pool's per-worker dispatch (cpusplit)
// the 16-core GPU host gains at every workload with it lower (`tilefuse
// bench -backend cpu -size small -loop -rotate 1`, GOMAXPROCS=16, medians,
// ms, 30 µs against 4 µs / 10 µs, one call each): softmax 0.0187 →
// 0.0171 / 0.0171, LayerNorm 0.0172 → 0.0124 / 0.0128, colsum 0.0236 →
// 0.0304 / 0.0235, attention 0.175 → 0.115 / 0.092, mlp_step 0.241 →
// 0.213 / 0.219, encoder_fwd_bwd 1.1 → 0.742 / 0.763; at GOMAXPROCS=4
// attention 0.283 → 0.237 / 0.279, encoder_fwd_bwd 1.43 → 1.24 / 1.38; at
// 1 µs colsum small lost (0.0734) and LayerNorm at 16 did not gain; on the
// 2-core VM 5 µs against 30 µs, three calls in turn: within the calls'
// spread or better (softmax 0.011–0.018 against 0.014–0.028, mlp_step
// 0.181–0.273 against 0.180–0.243).
var parallelNs = envInt("TILEFUSE_PARALLEL_NS", 5_000)

// envInt is the non-negative integer the environment variable name holds,
// else def.
func envInt(name string, def int) float64 {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n >= 0 {
		return float64(n)
	}
	return float64(def)
}

// runHook, set by tests alone, is called as each Run starts; chunkHook
// before each native call, with the programs it runs.
var (
	runHook   func(w int)
	chunkHook func(lo, hi int64)
)

// launchWorkers is how many workers (the caller included) a launch of
// work estimated nanoseconds asks of a pool of n: 1 (the caller alone)
// below parallelNs, else one per parallelNs/2, up to n (n where
// parallelNs is 0).
func launchWorkers(work float64, n int) int {
	if work < parallelNs || n < 2 {
		return 1
	}
	if per := parallelNs / 2; per <= 0 || work/per >= float64(n) {
		return n
	}
	return max(1, int(work/(parallelNs/2)))
}

// grabsPerWorker is how many chunks a parallel launch is cut into per
// worker at least: a worker that starts late or shares its core with
// another process does less of the launch, and the others take its
// part's last chunks (codegen/cpu/pool).
const grabsPerWorker = 8

// launchChunks is the programs of a native call (chunk: no more than
// maxCallNs of estimated work) and of the pool's chunks (grain: at least
// grabsPerWorker a worker) for a launch of total programs of work
// estimated nanoseconds each on workers workers.
func launchChunks(total int, work float64, workers int) (chunk, grain int) {
	chunk = max(1, int(maxCallNs/work))
	if workers < 2 {
		return chunk, total
	}
	return chunk, max(1, min(chunk, total/(grabsPerWorker*workers)))
}

// Launch runs the kernel over grid with args as codegen/cpu's Exec.Launch
// takes them. It returns nil, or ErrFallback: then nothing it did counts
// and the caller runs the launch on the executor.
func (nk *Kernel) Launch(grid tile.Grid, args ...any) error {
	g, err := grid.Norm()
	if err != nil || len(args) != len(nk.k.Params) {
		return ErrFallback
	}
	if sk, ok := nk.specialFor(args); ok {
		if sk == nil {
			return ErrFallback
		}
		return sk.Launch(grid, args...)
	} else if nk.code == nil {
		return ErrFallback
	}
	t := nk.tasks.get()
	defer nk.tasks.put(t)
	// held by the task, the arguments escape, so that the compiler puts
	// no caller's array on its goroutine's stack: the header holds raw
	// addresses, and a stack that grows during the launch would move
	// such an array under them (the native code would write the old copy)
	t.args = append(t.args[:0], args...)
	defer func() { clear(t.args); t.args = t.args[:0] }()
	if !t.bind(args) {
		return ErrFallback
	}
	total := g[0] * g[1] * g[2]
	workers := launchWorkers(float64(total)*nk.work, pool.Default().Workers())
	chunk, grain := launchChunks(total, nk.work, workers)
	t.prepare([3]int{g[0], g[1], g[2]}, chunk)
	t.partial, t.bailed = !nk.inplace && len(nk.atomics) == 0, t.bailed[:0]
	saved := nk.save(args)
	pool.Default().DoChunks(t, total, workers, grain)
	t.partial = false
	// the buffers must stay alive until every call has returned
	runtime.KeepAlive(args)
	if t.fail.Load() {
		// the executor adds again what the machine code added
		nk.restore(args, saved)
		return ErrFallback
	}
	if len(t.bailed) > 0 {
		return &Partial{Programs: slices.Sorted(slices.Values(t.bailed))}
	}
	return nil
}

// save copies the buffers a kernel with atomic adds adds to, so that a
// launch that falls back leaves them as they were (nil for other kernels).
func (nk *Kernel) save(args []any) []any {
	if len(nk.atomics) == 0 {
		return nil
	}
	saved := make([]any, len(nk.atomics))
	for j, i := range nk.atomics {
		switch b := args[i].(type) {
		case []float32:
			saved[j] = slices.Clone(b)
		case []float64:
			saved[j] = slices.Clone(b)
		case []int32:
			saved[j] = slices.Clone(b)
		}
	}
	return saved
}

// restore puts back what save copied.
func (nk *Kernel) restore(args, saved []any) {
	for j, i := range nk.atomics {
		switch b := args[i].(type) {
		case []float32:
			copy(b, saved[j].([]float32))
		case []float64:
			copy(b, saved[j].([]float64))
		case []int32:
			copy(b, saved[j].([]int32))
		}
	}
}

// Partial is Launch's error where the machine code ran every program of
// the launch but Programs (linear indices, x fastest, ascending), which
// bailed out before they finished (a block whose lanes straddle a
// multiple of a divisor the kernel divides them by: the last block of
// Triton's offs % M; an i32 index that would wrap; an f32 sin or cos
// argument past sinBound32): the caller runs those programs on the
// executor. A kernel that loads from a buffer it stores to, or adds to one
// atomically, never returns it (ErrFallback: a program's stores would be
// redone over what it stored, its adds added twice). errors.Is(err,
// ErrFallback) holds for it too: rerunning the whole launch on the
// executor gives the same results, since such a kernel reads nothing it
// stores.
type Partial struct {
	Programs []int
}

func (p *Partial) Error() string {
	return fmt.Sprintf("native: %d programs of the launch bailed out; run them on the executor", len(p.Programs))
}

// Is makes errors.Is(err, ErrFallback) hold.
func (p *Partial) Is(target error) bool { return target == ErrFallback }

// Launch1 is one launch of LaunchAll: its grid and arguments, as Launch
// takes them.
type Launch1 struct {
	Grid tile.Grid
	Args []any
}

// LaunchAll runs the launches of the kernel as one dispatch on the pool:
// their programs one after the other in one range the workers share (as
// PyTorch's multi-tensor apply runs an optimizer over many tensors), so
// that launches too small to fill the pool alone (a model's biases and
// heads) pay one wake-up and one join in all, not one each. The launches
// must be independent: no launch's stores may reach what another reads or
// writes (a solver's learnables, each with its own gradient and state).
// It returns nil, or ErrFallback as Launch does, for all of them: then
// the caller runs each on the executor.
func (nk *Kernel) LaunchAll(ls []Launch1) error {
	if len(ls) == 1 {
		return nk.Launch(ls[0].Grid, ls[0].Args...)
	}
	if len(nk.atomics) > 0 {
		return ErrFallback // one launch at a time: each saves what it adds to
	}
	// launches that pass strides other than 1 run on one specialized copy
	// where they pass the same ones, else on the executor
	if sk, ok := nk.specialFor(ls[0].Args); ok {
		for _, l := range ls[1:] {
			if s, ok := nk.specialFor(l.Args); !ok || s != sk {
				return ErrFallback
			}
		}
		if sk == nil {
			return ErrFallback
		}
		return sk.LaunchAll(ls)
	} else if nk.code == nil {
		return ErrFallback
	}
	all := &multiTask{starts: make([]int, len(ls)+1), tasks: make([]*task, 0, len(ls))}
	defer func() {
		for _, t := range all.tasks {
			clear(t.args)
			t.args = t.args[:0]
			nk.tasks.put(t)
		}
	}()
	for i, l := range ls {
		g, err := l.Grid.Norm()
		if err != nil || len(l.Args) != len(nk.k.Params) {
			return ErrFallback
		}
		t := nk.tasks.get()
		all.tasks = append(all.tasks, t)
		t.args = append(t.args[:0], l.Args...) // held: see Launch
		if !t.bind(l.Args) {
			return ErrFallback
		}
		total := g[0] * g[1] * g[2]
		chunk, _ := launchChunks(total, nk.work, 1)
		t.prepare([3]int{g[0], g[1], g[2]}, chunk)
		all.starts[i+1] = all.starts[i] + total
	}
	total := all.starts[len(ls)]
	if total == 0 {
		return nil
	}
	workers := launchWorkers(float64(total)*nk.work, pool.Default().Workers())
	_, grain := launchChunks(total, nk.work, workers)
	pool.Default().DoChunks(all, total, workers, grain)
	runtime.KeepAlive(ls)
	for _, t := range all.tasks {
		if t.fail.Load() {
			return ErrFallback
		}
	}
	return nil
}

// multiTask is LaunchAll's work: launch i's programs are [starts[i],
// starts[i+1]) of the range.
type multiTask struct {
	starts []int
	tasks  []*task
}

// Run runs programs [lo, hi) of the range as worker w, launch by launch.
func (m *multiTask) Run(w, lo, hi int) {
	i, _ := slices.BinarySearch(m.starts, lo+1)
	for i--; i < len(m.tasks) && m.starts[i] < hi; i++ {
		if a, b := max(lo, m.starts[i]), min(hi, m.starts[i+1]); a < b {
			m.tasks[i].Run(w, a-m.starts[i], b-m.starts[i])
		}
	}
}

// bind writes the parameters into the header: buffers as base and end
// addresses, scalars as their values; false when an argument is not of
// the parameter's type or buffers overlap where one is stored to.
func (t *task) bind(args []any) bool {
	h := unsafe.Pointer(&t.hdr[0])
	put := func(off int32, v uint64) { // only where it changes (task)
		if p := (*uint64)(unsafe.Add(h, off)); *p != v {
			*p = v
		}
	}
	for i, p := range t.nk.k.Params {
		if p.Type.Ptr {
			var base, n uintptr
			switch b := args[i].(type) {
			case []float32:
				if p.Type.DType != tile.F32 {
					return false
				}
				base, n = uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(4*len(b))
			case []float64:
				if p.Type.DType != tile.F64 {
					return false
				}
				base, n = uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(8*len(b))
			case []int32:
				if p.Type.DType != tile.I32 {
					return false
				}
				base, n = uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(4*len(b))
			default:
				return false
			}
			put(paramBase(i), uint64(base))
			put(paramEnd(i), uint64(base+n))
			continue
		}
		v, ok := scalarBits(args[i], p.Type.DType)
		if !ok || t.nk.unit[i] && v != 1 {
			return false
		}
		put(paramBase(i), v)
	}
	// stores must not reach what another parameter reads or writes
	for i, p := range t.nk.k.Params {
		if !p.Type.Ptr || !t.nk.stored[i] {
			continue
		}
		lo, hi := *(*uint64)(unsafe.Add(h, paramBase(i))), *(*uint64)(unsafe.Add(h, paramEnd(i)))
		for j, q := range t.nk.k.Params {
			if j == i || !q.Type.Ptr {
				continue
			}
			lo2, hi2 := *(*uint64)(unsafe.Add(h, paramBase(j))), *(*uint64)(unsafe.Add(h, paramEnd(j)))
			if lo < hi2 && lo2 < hi {
				return false
			}
		}
	}
	return true
}

// prepare sets the launch's grid and programs per call, and clears fail,
// writing only what changes (task).
func (t *task) prepare(grid [3]int, chunk int) {
	if t.grid != grid {
		t.grid = grid
	}
	if t.chunk != chunk {
		t.chunk = chunk
	}
	if t.fail.Load() {
		t.fail.Store(false)
	}
}

// scalarBits is a scalar argument as its frame slot holds it: integers
// sign-extended, i1 as 0 or 1, f32 as its bits; ok false where
// tile.ConvertScalar would refuse it (the executor reports why).
func scalarBits(x any, d tile.DType) (uint64, bool) {
	var n int64
	isInt := true
	var f float64
	switch v := x.(type) {
	case int:
		n = int64(v)
	case int32:
		n = int64(v)
	case int64:
		n = v
	case float32:
		f, isInt = float64(v), false
	case float64:
		f, isInt = v, false
	case bool:
		if d != tile.I1 {
			return 0, false
		}
		if v {
			return 1, true
		}
		return 0, true
	default:
		return 0, false
	}
	switch d {
	case tile.I32:
		if !isInt || n < math.MinInt32 || n > math.MaxInt32 {
			return 0, false
		}
		return uint64(n), true
	case tile.I64:
		if !isInt {
			return 0, false
		}
		return uint64(n), true
	case tile.F32:
		if isInt {
			f = float64(n)
		}
		return uint64(math.Float32bits(float32(f))), true
	case tile.F64:
		if isInt {
			f = float64(n)
		}
		return math.Float64bits(f), true
	}
	return 0, false
}

// Run runs programs [lo, hi) as worker w: the header into its frame, then
// native calls of chunk programs at most.
func (t *task) Run(w, lo, hi int) {
	if runHook != nil {
		runHook(w)
	}
	nk := t.nk
	var f *frame
	if w < len(t.frames) {
		if f = t.frames[w]; f == nil {
			f = newFrame(nk.frame)
			t.frames[w] = f
		}
	} else { // a worker beyond the pool's (tests): a frame of its own
		f = newFrame(nk.frame)
	}
	copy(unsafe.Slice((*byte)(f.at), len(t.hdr)), t.hdr)
	*f.u64(hGrid) = uint64(t.grid[0])
	*f.u64(hGrid + 8) = uint64(t.grid[1])
	*f.u64(hGrid + 16) = uint64(t.grid[2])
	for at := lo; at < hi && !t.fail.Load(); at += t.chunk {
		end := min(hi, at+t.chunk)
		if chunkHook != nil {
			chunkHook(int64(at), int64(end))
		}
		for from := at; from < end; {
			*f.u64(hProgLo) = uint64(from)
			*f.u64(hProgHi) = uint64(end)
			r, ok := nk.code.Call(f.at)
			if ok && r == retOK {
				break
			}
			if !ok || r != retBail || !t.partial {
				t.fail.Store(true)
				return
			}
			// the program that bailed out runs on the executor (Partial);
			// the call goes on from the next
			p := int(*f.u64(hLinear))
			t.bailedMu.Lock()
			t.bailed = append(t.bailed, p)
			t.bailedMu.Unlock()
			from = p + 1
		}
	}
}
