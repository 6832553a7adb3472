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
		if s := grp.Root.Info.Shape; !t.GPU() && len(s) >= 2 && transposes(grp) {
			meta["BLOCK_C"] = min(1024, pow2AtLeast(s[len(s)-1]))
			return
		}
		meta["BLOCK"] = min(t.perThread(8, 1024), pow2AtLeast(numel(grp.Root.Info.Shape)))
	},
	space: elementwiseSpace,
	emit:  emitElementwise,
}

// emitElementwise: program p computes the flat indices [p·BLOCK,
// (p+1)·BLOCK) of the output. BLOCK: on a GPU 8 elements a thread (1024 at
// 4 warps), on the CPU 1024, or the output's size rounded up to a power of
// two if smaller. On the CPU a group with a transpose is written over rows
// instead (BLOCK_C: emitRows).
func emitElementwise(e *emitter, out *tile.Value, k *Kernel) error {
	if _, ok := e.meta["BLOCK_C"]; ok {
		return emitRows(e, out, k)
	}
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

// transposes reports whether group grp has a member that permutes axes.
func transposes(grp *Group) bool {
	for _, n := range grp.Members {
		if n.Info.Kind == ops.Transpose && movesElements(n) {
			return true
		}
	}
	return false
}

// emitRows: program (r, j) computes columns [j·BLOCK_C, (j+1)·BLOCK_C) of
// row r of the output (its last axis; BLOCK_C the row's length rounded up
// to a power of two, at most 1024). Each lane's coordinates are the row's
// (scalars: the program's) and its column, so that a transpose's reads are
// the lanes of an affine address, a constant stride apart (ops merges the
// transpose's axes first: NHWC → NCHW reads each row of HW a stride of C
// apart), which the CPU's machine code loads lane by lane; in the flat
// form (emitElementwise) they are divisions of the lanes' flat indices,
// which it does not take.
func emitRows(e *emitter, out *tile.Value, k *Kernel) error {
	b := e.b
	s := e.grp.Root.Info.Shape
	c := s[len(s)-1]
	bc, err := e.param("BLOCK_C")
	if err != nil {
		return err
	}
	rs := &lineSpace{e: e, row: b.ProgramID(0), col: b.Arange(0, bc), c: c}
	tiles := tile.CDiv(c, bc)
	if tiles > 1 {
		rs.col = b.Add(b.Mul(b.ProgramID(1), bc), rs.col)
	}
	rs.offs = b.Add(b.Mul(rs.row, c), rs.col)
	e.space = rs.coords
	if c%bc != 0 {
		e.mask = b.Lt(rs.col, c)
	}
	if err := e.store(out, rs.offs); err != nil {
		return err
	}
	k.Grid = tile.Grid{numel(s) / c, tiles}
	return nil
}

// lineSpace is emitRows' index space: offs = row·c + col.
type lineSpace struct {
	e              *emitter
	offs, row, col *tile.Value
	c              int
}

// coords splits the space's own indices into coordinates of shape s
// whose last axis is m rows of the space's (m·c long): the last
// coordinate (row mod m)·c + col, the others the row's, row / m split
// (scalars). Nil for other indices and shapes.
func (rs *lineSpace) coords(idx *tile.Value, s []int) []*tile.Value {
	n := len(s)
	if idx != rs.offs || n == 0 || s[n-1]%rs.c != 0 {
		return nil
	}
	b := rs.e.b
	row, last := rs.row, rs.col
	if m := s[n-1] / rs.c; m > 1 {
		last = b.Add(b.Mul(b.Rem(row, m), rs.c), last)
		row = b.Div(row, m)
	}
	if n == 1 {
		return []*tile.Value{b.Add(b.Mul(row, s[0]), last)}
	}
	return append(rs.e.split(row, s[:n-1]), last)
}

// KernelOn reports whether ops of kind k become kernels on target t. On a
// GPU every kind does (no copy to the host and back). On a CPU a
// Transpose does where kernels run as machine code (Target.Native), which
// takes its reads over rows (emitRows); on the executor a transpose with a
// ReLU ran at 0.5–1.5× Gorgonia's time (1M f32: 9.1 against 20.4 ms NHWC →
// NCHW, 12.0 against 8.0 a heads split), so Gorgonia runs it there. An
// Im2Col does not: its columns' coordinates are divisions and remainders
// by the window's size, which the machine code does not take where a
// block spans more than the divisor, and on the executor an im2col ran
// far slower than Gorgonia's loop (a 3×3 convolution over 32×16×32×32
// f32: the run 26.9 → 167 ms, the im2col kernel alone 138 ms). Nor do the
// window ops MaxPool, MaxPoolDiff and Col2Im (MaxPool and its backward
// must move together: Gorgonia's backward reads a mask that its forward
// fills).
func KernelOn(k ops.Kind, t Target) bool {
	switch {
	case k == ops.Transpose:
		return t.GPU() || t.Native
	case k.Window():
		return t.GPU()
	}
	return true
}
