package cpu

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/analysis"
)

// Exec runs one kernel on the CPU, compiled once (NewExec) into a tree of
// closures over typed slices: program instances run in parallel on Workers
// goroutines, each with its own register file, reused across launches. An
// Exec may be launched from several goroutines at once. Its results are the
// reference interpreter's (tile/interp), bit for bit but where package doc
// says otherwise.
type Exec struct {
	k       *tile.Kernel
	Workers int // goroutines per launch; 0 means GOMAXPROCS

	slots  []slotInfo // by value ID
	launch []instr    // program-invariant values, run once per worker and launch
	code   []instr    // the program
	frames sync.Pool

	native    *native.Kernel // the kernel as machine code, or nil
	nativeErr error          // why not, when native code was asked for
}

// ExecOption configures NewExec.
type ExecOption func(*execConfig)

type execConfig struct{ native bool }

// WithNative(true) makes NewExec also compile the kernel to machine code
// (codegen/cpu/native) where that supports it: Launch then runs the
// machine code, and the executor where a launch falls back (see
// native.ErrFallback). Kernels it does not support run on the executor.
// Off by default.
func WithNative(on bool) ExecOption { return func(c *execConfig) { c.native = on } }

// Native reports whether Launch runs the kernel as machine code. A kernel
// that divides its lanes by a parameter compiles a copy for the values
// each launch passes (native: Specialize); a launch whose copy the code
// generator declines (a block that spans more than the divisor) runs on
// the executor and counts in Fallbacks.
func (e *Exec) Native() bool { return e.native != nil }

// NativeErr is why the kernel does not run as machine code although
// WithNative(true) asked for it (an error wrapping native.ErrUnsupported
// for what is not implemented there), or nil.
func (e *Exec) NativeErr() error { return e.nativeErr }

// slotInfo says how a value is stored in a frame.
type slotInfo struct {
	kind  tile.DType // storage dtype; pointers are stored as i64 element offsets
	numel int
	alias int // -1, or the value ID whose storage this value shares
	used  bool
}

// instr runs one op of one program instance.
type instr func(f *frame) error

// frame is the register file of one worker: vals[id] is a []bool, []int32,
// []int64, []float32 or []float64 of the value's element count.
type frame struct {
	vals  []any
	pid   [3]int32
	nprog [3]int32
	bufs  []any // per parameter: the bound buffer, or nil for scalars
}

func storageKind(t tile.Type) tile.DType {
	if t.Ptr {
		return tile.I64
	}
	return t.DType
}

// NewExec compiles k for the CPU. k must verify.
func NewExec(k *tile.Kernel, opts ...ExecOption) (*Exec, error) {
	var cfg execConfig
	for _, o := range opts {
		o(&cfg)
	}
	if k == nil {
		return nil, fmt.Errorf("cpu: NewExec of a nil kernel")
	}
	if err := k.Verify(); err != nil {
		return nil, err
	}
	e := &Exec{k: k, slots: make([]slotInfo, k.NumValues())}
	for i := range e.slots {
		e.slots[i].alias = -1
	}
	c := &compiler{e: e, roots: analysis.Roots(k), lanes: analysis.Axes(k, nil), invariant: analysis.Invariant(k, analysis.Launch, nil), live: analysis.Live(k)}
	for _, p := range k.Params {
		c.slot(p)
	}
	c.markLane0Only(k)
	code, err := c.block(k.Body, nil)
	if err != nil {
		return nil, err
	}
	e.code, e.launch = code, c.launch
	e.frames.New = func() any { return e.newFrame() }
	if cfg.native {
		e.native, e.nativeErr = native.Compile(k)
	}
	return e, nil
}

// Kernel is the kernel this Exec runs.
func (e *Exec) Kernel() *tile.Kernel { return e.k }

func (e *Exec) newFrame() *frame {
	f := &frame{vals: make([]any, len(e.slots)), bufs: make([]any, len(e.k.Params))}
	for id, s := range e.slots {
		if !s.used || s.alias >= 0 {
			continue
		}
		switch s.kind {
		case tile.I1:
			f.vals[id] = make([]bool, s.numel)
		case tile.I32:
			f.vals[id] = make([]int32, s.numel)
		case tile.I64:
			f.vals[id] = make([]int64, s.numel)
		case tile.F32:
			f.vals[id] = make([]float32, s.numel)
		case tile.F64:
			f.vals[id] = make([]float64, s.numel)
		}
	}
	for id, s := range e.slots {
		if s.used && s.alias >= 0 {
			f.vals[id] = f.vals[e.root(id)]
		}
	}
	// sources that never change: constants and ranges
	e.k.Walk(func(v *tile.Value) {
		switch v.Op {
		case tile.OpConst:
			switch d := f.vals[v.ID].(type) {
			case []bool:
				d[0] = v.Aux != 0
			case []int32:
				d[0] = int32(v.Aux)
			case []int64:
				d[0] = v.Aux
			case []float32:
				d[0] = float32(v.AuxF)
			case []float64:
				d[0] = v.AuxF
			}
		case tile.OpArange:
			d, _ := f.vals[v.ID].([]int32) // nil when dead
			for i := range d {
				d[i] = int32(v.Aux) + int32(i)
			}
		}
	})
	return f
}

func (e *Exec) root(id int) int {
	for e.slots[id].alias >= 0 {
		id = e.slots[id].alias
	}
	return id
}

// fallbacks counts the launches of kernels compiled to machine code that
// ran on the executor instead (Fallbacks).
var fallbacks atomic.Int64

// Fallbacks is the number of launches in this process of kernels compiled
// to machine code that the machine code handed to the executor
// (native.ErrFallback: a fault, which the executor reports; an i32 index
// past its range; buffers that overlap where the kernel stores; a block
// whose lanes cross a multiple of a divisor the kernel divides them by,
// checked as each block starts): each gives the same results, slower.
// Where only some programs bailed out (native.Partial), the executor runs
// just those, and the launch counts here too.
// Tests read it to show that a kernel ran as machine code; LaunchCounting
// counts a caller's own.
func Fallbacks() int64 { return fallbacks.Load() }

// Launch runs the kernel over grid with args, one per parameter in order:
// a []float32, []float64 or []int32 for a pointer to that type (the buffer the
// kernel reads and writes), and a number for a scalar (int, int32 or int64 for
// integers, float32 or float64 for floats; a value that does not fit is an
// error). It returns the first fault any program instance met; the
// instances after it may not have run.
func (e *Exec) Launch(grid tile.Grid, args ...any) error {
	return e.LaunchCounting(nil, grid, args...)
}

// LaunchCounting is Launch, adding one to fell (where not nil) when the
// kernel's machine code hands the launch to the executor, as Fallbacks
// counts them for the process: a caller's count of its own launches (a
// fused graph's machine: fusion.Stats.ExecutorLaunches).
func (e *Exec) LaunchCounting(fell *atomic.Int64, grid tile.Grid, args ...any) error {
	var progs []int // nil: every program
	if e.native != nil {
		err := e.native.Launch(grid, args...)
		if err == nil {
			return nil
		}
		fallbacks.Add(1)
		if fell != nil {
			fell.Add(1)
		}
		// the machine code ran all but these: the executor runs them
		var pe *native.Partial
		if errors.As(err, &pe) {
			progs = pe.Programs
		}
	}
	g, err := grid.Norm()
	if err != nil {
		return &tile.ExecError{Kernel: e.k.Name, Msg: err.Error()}
	}
	bufs, scalars, err := e.k.BindArgs(args)
	if err != nil {
		return err
	}
	total := g[0] * g[1] * g[2]
	if progs != nil {
		total = len(progs)
	}
	workers := e.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, total)
	var (
		next    atomic.Int64
		stop    atomic.Bool
		errOnce sync.Once
		first   error
		wg      sync.WaitGroup
	)
	run := func() {
		defer wg.Done()
		f := e.frames.Get().(*frame)
		defer e.frames.Put(f)
		copy(f.bufs, bufs)
		for i, s := range scalars {
			if s != nil {
				setScalar(f.vals[e.k.Params[i].ID], s)
			}
		}
		f.nprog = [3]int32{int32(g[0]), int32(g[1]), int32(g[2])}
		if err := runCode(e.launch, f); err != nil {
			errOnce.Do(func() { first = e.located(err, f) })
			stop.Store(true)
		}
		for !stop.Load() {
			idx := int(next.Add(1) - 1)
			if idx >= total {
				break
			}
			if progs != nil {
				idx = progs[idx]
			}
			f.pid = [3]int32{int32(idx % g[0]), int32(idx / g[0] % g[1]), int32(idx / (g[0] * g[1]))}
			if err := runCode(e.code, f); err != nil {
				errOnce.Do(func() { first = e.located(err, f) })
				stop.Store(true)
			}
		}
		clear(f.bufs)
	}
	wg.Add(workers)
	for i := 0; i < workers-1; i++ {
		go run()
	}
	run()
	wg.Wait()
	return first
}

// LaunchAll runs launches of the kernel, each a grid and its arguments as
// Launch takes them, which must be independent (no launch's stores reach
// what another reads or writes): as machine code, all of them in one
// dispatch on the worker pool (native's LaunchAll); else one after the
// other as Launch runs them. It returns the first error and the index of
// the launch that met it.
func (e *Exec) LaunchAll(ls []native.Launch1) (int, error) {
	if e.native != nil && e.native.LaunchAll(ls) == nil {
		return 0, nil
	}
	for i, l := range ls {
		if err := e.Launch(l.Grid, l.Args...); err != nil {
			return i, err
		}
	}
	return 0, nil
}

// located fills in the kernel and program of a fault.
func (e *Exec) located(err error, f *frame) error {
	if ee, ok := err.(*tile.ExecError); ok {
		ee.Kernel = e.k.Name
		ee.Program = [3]int{int(f.pid[0]), int(f.pid[1]), int(f.pid[2])}
		return ee
	}
	return err
}

func runCode(code []instr, f *frame) error {
	for _, in := range code {
		if err := in(f); err != nil {
			return err
		}
	}
	return nil
}

// Run runs k once over grid on the CPU (NewExec, then Launch).
func Run(k *tile.Kernel, grid tile.Grid, args ...any) error {
	e, err := NewExec(k)
	if err != nil {
		return err
	}
	return e.Launch(grid, args...)
}

// RunNative runs k once over grid as machine code where the native code
// generator supports it, else on the executor.
func RunNative(k *tile.Kernel, grid tile.Grid, args ...any) error {
	e, err := NewExec(k, WithNative(true))
	if err != nil {
		return err
	}
	return e.Launch(grid, args...)
}

func setScalar(dst any, s any) {
	switch d := dst.(type) {
	case []bool:
		d[0] = s.(bool)
	case []int32:
		d[0] = s.(int32)
	case []int64:
		d[0] = s.(int64)
	case []float32:
		d[0] = s.(float32)
	case []float64:
		d[0] = s.(float64)
	}
}
