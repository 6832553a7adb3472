package fusion

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/ops"
)

// guard wraps a Gorgonia op replayed in a fused graph so that a panic in
// its Do becomes an error of RunAll, wherever it runs: the CUDA backend runs
// such ops on the device's thread, and Gorgonia's own tape machine (over
// Compiled().Graph) on a goroutine of its own, where a panic would end the
// program and no recover on the caller's side can stop it. The wrapper keeps
// the optional interfaces machines look for (UsePreallocDo, UnsafeDo); Gorgonia's
// statements (let, read), which its compiler recognises by type, are left
// as they are. A value of the node's size but another shape (Gorgonia's
// slice of a range of one gives a scalar for a node of shape (1), in the
// backward of a Concat) is given the node's shape, which the backends bind
// and kernels read (Gorgonia's own machine does not check it).
func guard(op G.Op, shape tensor.Shape) G.Op {
	if ops.IsStatement(op) {
		return op
	}
	g := guarded{op, shape.Clone()}
	_, pre := op.(G.UsePreallocDoer)
	_, uns := op.(G.UnsafeDoer)
	switch {
	case pre && uns:
		return guardedPreallocUnsafe{guardedPrealloc{g}}
	case pre:
		return guardedPrealloc{g}
	case uns:
		return guardedUnsafe{g}
	}
	return g
}

type guarded struct {
	G.Op
	shape tensor.Shape // the node's
}

// conform gives v the node's shape where it has the node's size but another
// shape (a scalar for (1) or (1, 1), or the reverse).
func (o guarded) conform(v G.Value, err error) (G.Value, error) {
	if err != nil || v == nil {
		return v, err
	}
	got := v.Shape()
	if got.Eq(o.shape) || got.TotalSize() != o.shape.TotalSize() {
		return v, nil
	}
	if o.shape.IsScalar() {
		switch x := v.Data().(type) {
		case []float64:
			return G.NewF64(x[0]), nil
		case []float32:
			return G.NewF32(x[0]), nil
		}
		return v, nil
	}
	switch x := v.(type) {
	case *G.F64:
		return tensor.New(tensor.WithShape(o.shape...), tensor.WithBacking([]float64{float64(*x)})), nil
	case *G.F32:
		return tensor.New(tensor.WithShape(o.shape...), tensor.WithBacking([]float32{float32(*x)})), nil
	case *tensor.Dense:
		d := x.ShallowClone()
		if x.IsView() {
			d = x.Materialize().(*tensor.Dense)
		}
		if err := d.Reshape(o.shape...); err != nil {
			return nil, fmt.Errorf("fusion: %v gave shape %v for a node of shape %v: %w", o.Op, got, o.shape, err)
		}
		return d, nil
	}
	return v, nil
}

// InferShape is the node's shape, as the original graph inferred it. A
// replayed op's operands may be what Gorgonia's own inference cannot read
// the shape from: a SizeOf, replayed as a constant (rewrite.go), is no
// DimSizer, so a Repeat by it (a broadcast's, left to Gorgonia) inferred
// a dimension of 0 and the replay failed.
func (o guarded) InferShape(...G.DimSizer) (tensor.Shape, error) { return o.shape.Clone(), nil }

func recoverOp(err *error, op G.Op) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("fusion: Gorgonia's %v panicked: %v", op, r)
	}
}

func (o guarded) Do(vals ...G.Value) (v G.Value, err error) {
	defer recoverOp(&err, o.Op)
	return o.conform(o.Op.Do(vals...))
}

type guardedPrealloc struct{ guarded }

func (o guardedPrealloc) UsePreallocDo(prealloc G.Value, vals ...G.Value) (v G.Value, err error) {
	defer recoverOp(&err, o.Op)
	return o.conform(o.Op.(G.UsePreallocDoer).UsePreallocDo(prealloc, vals...))
}

type guardedUnsafe struct{ guarded }

func (o guardedUnsafe) UnsafeDo(vals ...G.Value) (v G.Value, err error) {
	defer recoverOp(&err, o.Op)
	return o.conform(o.Op.(G.UnsafeDoer).UnsafeDo(vals...))
}

type guardedPreallocUnsafe struct{ guardedPrealloc }

func (o guardedPreallocUnsafe) UnsafeDo(vals ...G.Value) (v G.Value, err error) {
	defer recoverOp(&err, o.Op)
	return o.conform(o.Op.(G.UnsafeDoer).UnsafeDo(vals...))
}
