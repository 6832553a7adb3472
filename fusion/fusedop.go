package fusion

import (
	"fmt"
	"hash"
	"hash/fnv"
	"strings"
	"sync"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// FusedOp is a Gorgonia op that runs one group's tile kernel. Its hash
// covers the kernel's text, so Gorgonia's hash-consing never merges two
// different groups.
type FusedOp struct {
	name   string
	kernel *graphpass.Kernel
	exec   *tile.Exec
	ins    []hm.Type
	out    hm.Type
	ops    []string // the original ops, for String and the report
	text   string   // the kernel's IR
	view   bool     // the group only reshapes: its output shares its input's memory
}

func newFusedOp(grp *graphpass.Group, k *graphpass.Kernel) (*FusedOp, error) {
	text := k.Tile.String()
	e, err := execs.get(text, k.Tile)
	if err != nil {
		return nil, fmt.Errorf("fusion: %v: %w", grp, err)
	}
	op := &FusedOp{name: k.Tile.Name, kernel: k, exec: e, text: text}
	for _, in := range grp.Inputs {
		op.ins = append(op.ins, typeOf(in.G))
	}
	op.out = typeOf(grp.Root.G)
	op.view = len(grp.Inputs) == 1 && len(k.Out) > 0
	for _, m := range grp.Members {
		op.ops = append(op.ops, m.Info.Name)
		op.view = op.view && m.Info.Kind == ops.Reshape
	}
	return op, nil
}

func typeOf(n *G.Node) hm.Type {
	if n.IsScalar() {
		return n.Dtype()
	}
	return G.TensorType{Dims: n.Shape().Dims(), Of: n.Dtype()}
}

func (op *FusedOp) Arity() int { return len(op.ins) }

func (op *FusedOp) Type() hm.Type {
	ts := append(append([]hm.Type(nil), op.ins...), op.out)
	if len(ts) == 1 {
		return ts[0]
	}
	return hm.NewFnType(ts...)
}

func (op *FusedOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	if len(op.kernel.Out) == 0 {
		return tensor.ScalarShape(), nil
	}
	return tensor.Shape(append([]int(nil), op.kernel.Out...)), nil
}

// Do runs the kernel on the CPU over the input values.
func (op *FusedOp) Do(vals ...G.Value) (_ G.Value, err error) {
	defer recoverTo(&err, op.name) // Gorgonia's tape machine calls it on a goroutine of its own
	if len(vals) != len(op.ins) {
		return nil, fmt.Errorf("fusion: %s: %d inputs, want %d", op.name, len(vals), len(op.ins))
	}
	if op.view {
		// a reshape copies nothing (fusion must not raise peak memory): a new
		// header over the same elements, materialised first if the input is a view
		d, err := hostSlice(vals[0])
		if err != nil {
			return nil, fmt.Errorf("fusion: %s: %w", op.name, err)
		}
		return tensor.New(tensor.WithShape(op.kernel.Out...), tensor.WithBacking(d)), nil
	}
	args := make([]any, 0, len(vals)+1)
	for i, v := range vals {
		a, err := hostSlice(v)
		if err != nil {
			return nil, fmt.Errorf("fusion: %s: input %d: %w", op.name, i, err)
		}
		args = append(args, a)
	}
	n := 1
	for _, d := range op.kernel.Out {
		n *= d
	}
	var out any
	if op.kernel.DType == tile.F64 {
		out = make([]float64, n)
	} else {
		out = make([]float32, n)
	}
	if err := op.exec.Launch(op.kernel.Grid, append(args, out)...); err != nil {
		return nil, fmt.Errorf("fusion: %s: %w", op.name, err)
	}
	if len(op.kernel.Out) == 0 {
		if o, ok := out.([]float64); ok {
			return G.NewF64(o[0]), nil
		}
		return G.NewF32(out.([]float32)[0]), nil
	}
	return tensor.New(tensor.WithShape(op.kernel.Out...), tensor.WithBacking(out)), nil
}

// hostSlice gives a value's elements as a Go slice (a scalar as one element).
func hostSlice(v G.Value) (any, error) {
	if t, ok := v.(*tensor.Dense); ok && t.IsMaterializable() {
		v = t.Materialize().(G.Value)
	}
	switch d := v.Data().(type) {
	case []float32:
		return d, nil
	case []float64:
		return d, nil
	case float32:
		return []float32{d}, nil
	case float64:
		return []float64{d}, nil
	}
	return nil, fmt.Errorf("value of type %T", v.Data())
}

func (op *FusedOp) ReturnsPtr() bool     { return op.view }
func (op *FusedOp) CallsExtern() bool    { return false }
func (op *FusedOp) OverwritesInput() int { return -1 }

func (op *FusedOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "tilefuse.FusedOp %s\n%s", op.name, op.text)
}

func (op *FusedOp) Hashcode() uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}

func (op *FusedOp) String() string {
	return fmt.Sprintf("%s{%s}", op.name, strings.Join(op.ops, "; "))
}

// Kernel is the tile kernel the op runs.
func (op *FusedOp) Kernel() *tile.Kernel { return op.kernel.Tile }

// Grid is the grid the kernel is launched over.
func (op *FusedOp) Grid() tile.Grid { return op.kernel.Grid }

// IsView reports whether the op only reshapes: its output is its input's memory.
func (op *FusedOp) IsView() bool { return op.view }

// execCache keeps the interpreter's compiled form of kernels by their IR
// text, so that compiling a graph again (or another graph with the same
// kernels) skips that step. An Exec is safe for concurrent launches.
type execCache struct {
	mu sync.Mutex
	m  map[string]*tile.Exec
}

// maxExecs bounds the cache; when full it starts again.
const maxExecs = 4096

var execs = &execCache{m: map[string]*tile.Exec{}}

func (c *execCache) get(text string, k *tile.Kernel) (*tile.Exec, error) {
	c.mu.Lock()
	e, ok := c.m[text]
	c.mu.Unlock()
	if ok {
		return e, nil
	}
	e, err := tile.NewExec(k)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.m) >= maxExecs {
		clear(c.m)
	}
	c.m[text] = e
	c.mu.Unlock()
	return e, nil
}
