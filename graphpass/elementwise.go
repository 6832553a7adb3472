package graphpass

import (
	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// An elementwise group is a DAG of elementwise, injective (broadcast,
// slice, concat) and scalar nodes computed over the output's elements, a
// block of them per program.
var elementwiseKind = groupKind{
	name: "elementwise",
	start: func(n *Node, opt Options) bool {
		return (n.Info.Kind.Elementwise() || n.Info.Kind.Injective()) && KernelOn(n.Info.Kind, opt.Target)
	},
	// Any fusable node joins: a product makes the group a matmul group, a
	// row reduction or softmax over the group's shape a row group.
	join: func(n *Node, grp *Group, t Target) (GroupKind, bool) {
		switch k := n.Info.Kind; {
		case k.Product():
			if !takesProduct(n, grp) {
				return 0, false
			}
			grp.MatMul = n
			return MatMulGroup, true
		case k == ops.Reduce || k.Row():
			if takesRow(n, grp, t) {
				return RowGroup, true
			}
			if reshapeOfReduce(n, grp) { // a reduction stored under the reshape's shape
				grp.Full = nil
				return ReduceGroup, true
			}
			return 0, false
		}
		return ElementwiseGroup, true
	},
	remat:  true,
	extras: func(*Group, Target) bool { return true },
	tune: func(grp *Group, t Target, _ tile.Precision, meta tile.Meta) {
		meta["BLOCK"] = min(t.perThread(8, 1024), pow2AtLeast(numel(grp.Root.Info.Shape)))
	},
	space: elementwiseSpace,
	emit:  emitElementwise,
}

// emitElementwise: program p computes the flat indices [p·BLOCK,
// (p+1)·BLOCK) of the output. BLOCK: on a GPU 8 elements a thread (1024 at
// 4 warps), on the CPU 1024, or the output's size rounded up to a power of
// two if smaller.
func emitElementwise(e *emitter, out *tile.Value, k *Kernel) error {
	b := e.b
	n := numel(e.grp.Root.Info.Shape)
	block, err := e.param("BLOCK")
	if err != nil {
		return err
	}
	bs := &blockSpace{e: e, lanes: b.Arange(0, block), block: block}
	bs.offs = b.Add(b.Mul(b.ProgramID(0), block), bs.lanes)
	e.space = bs.coords
	if n%block != 0 { // else every lane is in range: no mask
		e.mask = b.Lt(bs.offs, n)
	}
	if err := e.store(out, bs.offs); err != nil {
		return err
	}
	k.Grid = tile.Grid{tile.CDiv(n, block)}
	return nil
}

// blockSpace is an elementwise kernel's index space: the block's flat
// indices offs = pid·block + lanes.
type blockSpace struct {
	e           *emitter
	offs, lanes *tile.Value
	block       int
}

// coords splits the block's own indices (nil for others): a coordinate
// whose whole period (its stride times its size) divides the block is the
// same in every program, (lanes/stride) mod size: the interpreter computes
// it once per launch, the GPU from the thread index alone. One whose stride
// divides the block is pid·(block/stride) + lanes/stride, mod its size: a
// scalar times a constant and an add per program. Others divide the flat
// index itself.
func (bs *blockSpace) coords(idx *tile.Value, s []int) []*tile.Value {
	if idx != bs.offs {
		return nil
	}
	b, bl := bs.e.b, bs.block
	div := func(x *tile.Value, d int) *tile.Value {
		if d == 1 {
			return x
		}
		return b.Div(x, d)
	}
	c := make([]*tile.Value, len(s))
	stride := 1
	for i := len(s) - 1; i >= 0; i-- {
		var q *tile.Value
		switch {
		case i > 0 && bl%(stride*s[i]) == 0:
			q = div(bs.lanes, stride)
		case bl%stride == 0:
			q = b.Add(b.Mul(b.ProgramID(0), bl/stride), div(bs.lanes, stride))
		default:
			q = div(bs.offs, stride)
		}
		if i > 0 {
			q = b.Rem(q, s[i])
		}
		c[i] = q
		stride *= s[i]
	}
	return c
}

// KernelOn reports whether ops of kind k become kernels on target t. On a
// CPU a Transpose and an Im2Col do not: their elements' coordinates are
// divisions and remainders of the flat index, which the machine code does
// not take where a block spans more than the divisor, and on the executor
// an im2col ran far slower than Gorgonia's loop (a 3×3 convolution over
// 32×16×32×32 f32: the run 26.9 → 167 ms, the im2col kernel alone 138 ms)
// and a transpose with a ReLU at 0.5–1.5× Gorgonia's time (1M f32: 9.1
// against 20.4 ms NHWC → NCHW, 12.0 against 8.0 a heads split), so
// Gorgonia runs them there, as it did before they were in the catalogue;
// on a GPU they fuse (no copy to the host and back). The same holds for
// the window ops MaxPool, MaxPoolDiff and Col2Im (and MaxPool and its
// backward must move together: Gorgonia's backward reads a mask that its
// forward fills).
func KernelOn(k ops.Kind, t Target) bool {
	switch k {
	case ops.Transpose, ops.Im2Col, ops.MaxPool, ops.MaxPoolDiff, ops.Col2Im:
		return t.GPU()
	}
	return true
}
