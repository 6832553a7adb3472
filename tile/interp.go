package tile

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Grid is the number of program instances along x, y and z. A zero Y or Z
// counts as 1, so Grid{8} is 8×1×1; a zero X launches nothing.
type Grid [3]int

func (g Grid) norm() (Grid, error) {
	for i, n := range g {
		if n < 0 || n > 1<<31-1 {
			return g, fmt.Errorf("grid %v: dimension %d is %d", g, i, n)
		}
	}
	if g[1] == 0 {
		g[1] = 1
	}
	if g[2] == 0 {
		g[2] = 1
	}
	return g, nil
}

// ExecError is a fault while running a kernel: an access outside a buffer,
// a bad argument. (Integer division by zero is defined, see OpDiv.)
type ExecError struct {
	Kernel  string
	Program [3]int // the program instance's coordinates
	Value   string // the op's line in the text dump
	Msg     string
}

func (e *ExecError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("tile: @%s: %s", e.Kernel, e.Msg)
	}
	return fmt.Sprintf("tile: @%s: program (%d,%d,%d): %s: %s", e.Kernel, e.Program[0], e.Program[1], e.Program[2], e.Value, e.Msg)
}

// Exec runs one kernel on the CPU. It is the executable specification of the
// IR: program instances run in parallel on Workers goroutines, each with its
// own register file, reused across launches. An Exec may be launched from
// several goroutines at once.
type Exec struct {
	k       *Kernel
	Workers int // goroutines per launch; 0 means GOMAXPROCS

	slots  []slotInfo // by value ID
	launch []instr    // program-invariant values, run once per worker and launch
	code   []instr    // the program
	frames sync.Pool
}

// slotInfo says how a value is stored in a frame.
type slotInfo struct {
	kind  DType // storage dtype; pointers are stored as i64 element offsets
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

func storageKind(t Type) DType {
	if t.Ptr {
		return I64
	}
	return t.DType
}

// NewExec prepares k for the interpreter. k must verify.
func NewExec(k *Kernel) (*Exec, error) {
	if k == nil {
		return nil, fmt.Errorf("tile: NewExec of a nil kernel")
	}
	if err := k.Verify(); err != nil {
		return nil, err
	}
	e := &Exec{k: k, slots: make([]slotInfo, k.NumValues())}
	for i := range e.slots {
		e.slots[i].alias = -1
	}
	c := &compiler{e: e, roots: map[*Value]*Value{}, lanes: AnalyzeLanes(k), invariant: make([]bool, k.NumValues()), live: liveValues(k)}
	for _, p := range k.Params {
		c.slot(p)
		c.roots[p] = p
		c.invariant[p.ID] = true
	}
	c.markLane0Only(k)
	code, err := c.block(k.Body, nil)
	if err != nil {
		return nil, err
	}
	e.code, e.launch = code, c.launch
	e.frames.New = func() any { return e.newFrame() }
	return e, nil
}

// Kernel is the kernel this Exec runs.
func (e *Exec) Kernel() *Kernel { return e.k }

func (e *Exec) newFrame() *frame {
	f := &frame{vals: make([]any, len(e.slots)), bufs: make([]any, len(e.k.Params))}
	for id, s := range e.slots {
		if !s.used || s.alias >= 0 {
			continue
		}
		switch s.kind {
		case I1:
			f.vals[id] = make([]bool, s.numel)
		case I32:
			f.vals[id] = make([]int32, s.numel)
		case I64:
			f.vals[id] = make([]int64, s.numel)
		case F32:
			f.vals[id] = make([]float32, s.numel)
		case F64:
			f.vals[id] = make([]float64, s.numel)
		}
	}
	for id, s := range e.slots {
		if s.used && s.alias >= 0 {
			f.vals[id] = f.vals[e.root(id)]
		}
	}
	// sources that never change: constants and ranges
	e.k.Walk(func(v *Value) {
		switch v.Op {
		case OpConst:
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
		case OpArange:
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

// Launch runs the kernel over grid with args, one per parameter in order:
// a []float32, []float64 or []int32 for a pointer to that type (the buffer the
// kernel reads and writes), and a number for a scalar (int, int32 or int64 for
// integers, float32 or float64 for floats; a value that does not fit is an
// error). It returns the first fault any program instance met; the
// instances after it may not have run.
func (e *Exec) Launch(grid Grid, args ...any) error {
	g, err := grid.norm()
	if err != nil {
		return &ExecError{Kernel: e.k.Name, Msg: err.Error()}
	}
	bufs, scalars, err := e.bind(args)
	if err != nil {
		return err
	}
	total := g[0] * g[1] * g[2]
	if total == 0 {
		return nil
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

// located fills in the kernel and program of a fault.
func (e *Exec) located(err error, f *frame) error {
	if ee, ok := err.(*ExecError); ok {
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

// Interpret runs k once over grid on the CPU (NewExec, then Launch).
func Interpret(k *Kernel, grid Grid, args ...any) error {
	e, err := NewExec(k)
	if err != nil {
		return err
	}
	return e.Launch(grid, args...)
}

// bind checks args against the parameters.
func (e *Exec) bind(args []any) (bufs []any, scalars []any, err error) {
	ps := e.k.Params
	if len(args) != len(ps) {
		return nil, nil, &ExecError{Kernel: e.k.Name, Msg: fmt.Sprintf("%d arguments for %d parameters", len(args), len(ps))}
	}
	bufs, scalars = make([]any, len(ps)), make([]any, len(ps))
	for i, p := range ps {
		bad := func(want string) error {
			return &ExecError{Kernel: e.k.Name, Msg: fmt.Sprintf("argument %d (%s %v) is %T, want %s", i, p.Name, p.Type, args[i], want)}
		}
		if p.Type.Ptr {
			ok := false
			switch args[i].(type) {
			case []float32:
				ok = p.Type.DType == F32
			case []float64:
				ok = p.Type.DType == F64
			case []int32:
				ok = p.Type.DType == I32
			}
			if !ok {
				return nil, nil, bad("[]" + map[DType]string{F32: "float32", F64: "float64", I32: "int32"}[p.Type.DType])
			}
			bufs[i] = args[i]
			continue
		}
		s, err := ConvertScalar(args[i], p.Type.DType)
		if err != nil {
			return nil, nil, &ExecError{Kernel: e.k.Name, Msg: fmt.Sprintf("argument %d (%s %v): %v", i, p.Name, p.Type, err)}
		}
		scalars[i] = s
	}
	return bufs, scalars, nil
}

// ConvertScalar turns a Go number given for a scalar parameter of dtype d
// into the Go type that holds it (bool, int32, int64, float32, float64): ints
// must fit, floats are not accepted for integers. Every backend takes scalar
// arguments by these rules.
func ConvertScalar(x any, d DType) (any, error) {
	var f float64
	isInt := true
	var n int64
	switch x := x.(type) {
	case int:
		n = int64(x)
	case int32:
		n = int64(x)
	case int64:
		n = x
	case float32:
		f, isInt = float64(x), false
	case float64:
		f, isInt = x, false
	case bool:
		if d != I1 {
			return nil, fmt.Errorf("bool for %v", d)
		}
		return x, nil
	default:
		return nil, fmt.Errorf("%T is not a number", x)
	}
	switch d {
	case I1:
		if !isInt {
			return nil, fmt.Errorf("float for i1")
		}
		return n != 0, nil
	case I32:
		if !isInt {
			return nil, fmt.Errorf("float %v for i32", x)
		}
		if n < -1<<31 || n > 1<<31-1 {
			return nil, fmt.Errorf("%v does not fit i32", x)
		}
		return int32(n), nil
	case I64:
		if !isInt {
			return nil, fmt.Errorf("float %v for i64", x)
		}
		return n, nil
	case F32:
		if isInt {
			f = float64(n)
		}
		return float32(f), nil
	case F64:
		if isInt {
			f = float64(n)
		}
		return f, nil
	}
	return nil, fmt.Errorf("dtype %v", d)
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
