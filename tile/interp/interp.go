package interp

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/tilefuse/tilefuse/tile"
)

// Interpret runs k over grid with args, one per parameter in order: a
// []float32, []float64 or []int32 for a pointer to that type (the buffer
// the kernel reads and writes) and a number for a scalar (tile.ConvertScalar).
// k must verify; the grid must launch at least one program (tile.Grid.Check).
// It returns a *tile.ExecError for a fault.
func Interpret(k *tile.Kernel, grid tile.Grid, args ...any) error {
	if k == nil {
		return fmt.Errorf("interp: Interpret of a nil kernel")
	}
	if err := k.Verify(); err != nil {
		return err
	}
	g, err := grid.Norm()
	if err != nil {
		return &tile.ExecError{Kernel: k.Name, Msg: err.Error()}
	}
	bufs, scalars, err := k.BindArgs(args)
	if err != nil {
		return err
	}
	total := g[0] * g[1] * g[2]
	var (
		next   atomic.Int64
		failed atomic.Int64 // the lowest faulting program's number, or total
		mu     sync.Mutex
		first  error
		wg     sync.WaitGroup
	)
	failed.Store(int64(total))
	worker := func() {
		defer wg.Done()
		for {
			idx := next.Add(1) - 1
			if idx >= failed.Load() {
				return
			}
			p := &program{
				k: k, bufs: bufs, scalars: scalars,
				pid:   [3]int32{int32(int(idx) % g[0]), int32(int(idx) / g[0] % g[1]), int32(int(idx) / (g[0] * g[1]))},
				nprog: [3]int32{int32(g[0]), int32(g[1]), int32(g[2])},
				vals:  make([]any, k.NumValues()),
			}
			for _, param := range k.Params {
				p.vals[param.ID] = p.param(param)
			}
			if err := p.block(k.Body); err != nil {
				mu.Lock()
				if idx < failed.Load() {
					failed.Store(idx)
					first = p.located(err)
				}
				mu.Unlock()
			}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), total)
	wg.Add(workers)
	for range workers - 1 {
		go worker()
	}
	worker()
	wg.Wait()
	return first
}

// program is the state of one program instance: the value of every op so
// far, by value ID. A value is a []bool, []int32, []int64, []float32 or
// []float64 of its element count (one for a scalar), or a ptrs.
type program struct {
	k       *tile.Kernel
	bufs    []any // by parameter: the bound buffer, nil for scalars
	scalars []any // by parameter: the scalar argument, nil for pointers
	pid     [3]int32
	nprog   [3]int32
	vals    []any
}

// ptrs is a block of pointers into the buffer of parameter param: element
// offsets, one per lane.
type ptrs struct {
	param int
	off   []int64
}

// fault is an error of one op, located by the program (located).
func fault(v *tile.Value, format string, args ...any) error {
	return &tile.ExecError{Value: v.String(), Msg: fmt.Sprintf(format, args...)}
}

func (p *program) located(err error) error {
	if e, ok := err.(*tile.ExecError); ok {
		e.Kernel = p.k.Name
		e.Program = [3]int{int(p.pid[0]), int(p.pid[1]), int(p.pid[2])}
	}
	return err
}

// block runs the values of b in order.
func (p *program) block(b *tile.Block) error {
	for _, v := range b.Values {
		r, err := p.eval(v)
		if err != nil {
			return err
		}
		p.vals[v.ID] = r
	}
	return nil
}

func (p *program) arg(v *tile.Value, i int) any { return p.vals[v.Args[i].ID] }

// eval computes one op's value (nil for ops without one).
func (p *program) eval(v *tile.Value) (any, error) {
	switch {
	case v.Op == tile.OpConst:
		return constant(v), nil
	case v.Op == tile.OpProgramID:
		return []int32{p.pid[v.Aux]}, nil
	case v.Op == tile.OpNumPrograms:
		return []int32{p.nprog[v.Aux]}, nil
	case v.Op == tile.OpArange:
		r := make([]int32, v.Aux2-v.Aux)
		for i := range r {
			r[i] = int32(v.Aux) + int32(i)
		}
		return r, nil
	case v.Op == tile.OpSplat, v.Op == tile.OpBroadcast, v.Op == tile.OpExpandDims, v.Op == tile.OpReshape, v.Op == tile.OpTrans:
		return shape(v, p.arg(v, 0))
	case v.Op == tile.OpAddPtr:
		return addPtr(v, p.arg(v, 0).(ptrs), p.arg(v, 1))
	case v.Op == tile.OpLoad:
		return p.load(v)
	case v.Op == tile.OpStore:
		return nil, p.store(v)
	case v.Op == tile.OpAtomicAdd:
		return p.atomicAdd(v)
	case v.Op.IsBinary():
		return binary(v, p.arg(v, 0), p.arg(v, 1))
	case v.Op.IsCompare():
		return compare(v, p.arg(v, 0), p.arg(v, 1))
	case v.Op.IsUnary():
		return unary(v, p.arg(v, 0))
	case v.Op == tile.OpSelect:
		return selectOp(v, p.arg(v, 0).([]bool), p.arg(v, 1), p.arg(v, 2))
	case v.Op == tile.OpCast:
		return cast(v, p.arg(v, 0))
	case v.Op.IsReduce():
		return reduce(v, p.arg(v, 0))
	case v.Op == tile.OpDot:
		return dot(v, p.arg(v, 0), p.arg(v, 1), p.arg(v, 2))
	case v.Op == tile.OpFor:
		return p.forLoop(v)
	case v.Op == tile.OpForResult:
		return p.arg(v, 0).([]any)[v.Aux], nil
	case v.Op == tile.OpYield:
		return nil, nil // read by the loop
	}
	return nil, fault(v, "the interpreter has no rule for %v", v.Op)
}

func (p *program) param(v *tile.Value) any {
	if v.Type.Ptr {
		return ptrs{param: int(v.Aux), off: []int64{0}}
	}
	switch s := p.scalars[v.Aux].(type) {
	case bool:
		return []bool{s}
	case int32:
		return []int32{s}
	case int64:
		return []int64{s}
	case float32:
		return []float32{s}
	case float64:
		return []float64{s}
	}
	return nil
}

func constant(v *tile.Value) any {
	switch v.Type.DType {
	case tile.I1:
		return []bool{v.Aux != 0}
	case tile.I32:
		return []int32{int32(v.Aux)}
	case tile.I64:
		return []int64{v.Aux}
	case tile.F32:
		return []float32{float32(v.AuxF)}
	case tile.F64:
		return []float64{v.AuxF}
	}
	return nil
}

// forLoop runs a counted loop; its value is the final carried values, which
// its OpForResult values read.
func (p *program) forLoop(v *tile.Value) (any, error) {
	lo, hi, step := scalarInt(p.arg(v, 0)), scalarInt(p.arg(v, 1)), scalarInt(p.arg(v, 2))
	if step <= 0 && lo < hi {
		return nil, fault(v, "step %d is not positive", step)
	}
	args := v.Body.Args
	carried := make([]any, len(v.Args)-3)
	for i := range carried {
		carried[i] = p.arg(v, 3+i)
	}
	yield := v.Body.Values[len(v.Body.Values)-1]
	is64 := args[0].Type.DType == tile.I64
	for iv := lo; iv < hi; iv += step {
		if is64 {
			p.vals[args[0].ID] = []int64{iv}
		} else {
			p.vals[args[0].ID] = []int32{int32(iv)}
		}
		for i, c := range carried {
			p.vals[args[i+1].ID] = c
		}
		if err := p.block(v.Body); err != nil {
			return nil, err
		}
		for i, y := range yield.Args {
			carried[i] = p.vals[y.ID] // every value is a new slice: no copy needed
		}
	}
	return carried, nil
}

func scalarInt(x any) int64 {
	switch x := x.(type) {
	case []int32:
		return int64(x[0])
	case []int64:
		return x[0]
	}
	return 0
}
