package tile

import "fmt"

// The launch vocabulary that every backend shares: the grid, how arguments
// bind to parameters, and the error a run reports.

// Grid is the number of program instances along x, y and z. A zero Y or Z
// counts as 1, so Grid{8} is 8×1×1. A launch needs at least one program: a
// zero X, or a negative dimension, is an error (Check).
type Grid [3]int

// maxGridDim bounds each dimension (program ids are i32).
const maxGridDim = 1<<31 - 1

// Check reports why g cannot be launched: a negative or too large
// dimension, or no program at all (X = 0). It returns nil for a grid of one
// program or more.
func (g Grid) Check() error {
	for i, n := range g {
		if n < 0 || n > maxGridDim {
			return fmt.Errorf("grid %v: dimension %s is %d, outside 0..%d", g, axisName(int64(i)), n, maxGridDim)
		}
	}
	if g[0] == 0 {
		return fmt.Errorf("grid %v launches no program: x is 0 (y and z may be 0, meaning 1)", g)
	}
	if n := int64(g[0]) * int64(max(g[1], 1)) * int64(max(g[2], 1)); n > maxGridDim {
		return fmt.Errorf("grid %v has %d programs, more than %d", g, n, maxGridDim)
	}
	return nil
}

// Norm checks g and returns it with a zero Y or Z made 1.
func (g Grid) Norm() (Grid, error) {
	if err := g.Check(); err != nil {
		return g, err
	}
	if g[1] == 0 {
		g[1] = 1
	}
	if g[2] == 0 {
		g[2] = 1
	}
	return g, nil
}

// Programs is the number of program instances g launches: 0 when it
// launches none (a zero or negative X), a zero Y or Z counting as 1.
func (g Grid) Programs() int {
	if g[0] <= 0 || g[1] < 0 || g[2] < 0 {
		return 0
	}
	return g[0] * max(g[1], 1) * max(g[2], 1)
}

// CDiv is ⌈a/b⌉ for positive b: the number of blocks of size b covering a.
func CDiv(a, b int) int { return (a + b - 1) / b }

// ExecError is a fault while running a kernel: an access outside a buffer,
// a bad argument or grid. (Integer division by zero is defined, see OpDiv.)
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

// BindArgs checks launch arguments against k's parameters, one per parameter
// in order: a []float32, []float64 or []int32 for a pointer to that type
// (the buffer the kernel reads and writes), and a number for a scalar (see
// ConvertScalar). It returns, by parameter, the buffers (nil for scalars)
// and the scalars converted to their Go types (nil for pointers).
func (k *Kernel) BindArgs(args []any) (bufs, scalars []any, err error) {
	ps := k.Params
	if len(args) != len(ps) {
		return nil, nil, &ExecError{Kernel: k.Name, Msg: fmt.Sprintf("%d arguments for %d parameters", len(args), len(ps))}
	}
	bufs, scalars = make([]any, len(ps)), make([]any, len(ps))
	for i, p := range ps {
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
				want := map[DType]string{F32: "[]float32", F64: "[]float64", I32: "[]int32"}[p.Type.DType]
				return nil, nil, &ExecError{Kernel: k.Name, Msg: fmt.Sprintf("argument %d (%s %v) is %T, want %s", i, p.Name, p.Type, args[i], want)}
			}
			bufs[i] = args[i]
			continue
		}
		s, err := ConvertScalar(args[i], p.Type.DType)
		if err != nil {
			return nil, nil, &ExecError{Kernel: k.Name, Msg: fmt.Sprintf("argument %d (%s %v): %v", i, p.Name, p.Type, err)}
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
