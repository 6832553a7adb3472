package graphpass

import (
	"fmt"
	"slices"

	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// Weight gradients Aᵀ·B (A stored k×m: the activations a layer read) on
// Hopper's tensor cores. wgmma reads a TF32 operand from shared memory
// only K-major, and in the swapped form that operand is A, which Aᵀ
// stores m-contiguous: the product kernel transposes each stage of it
// through registers (wg_stage = 1). So such a product reads A from a copy
// transposed once by a kernel of its own (a transpose group: its root an
// internal m×k value) and runs as A·B, for 2·m·k·4 bytes more moved. On
// the H200 (2026-12-03, `tilefuse peer -precision tf32 -run bert`) the
// BERT layer's 768×3072 and 3072×768 weight gradients (K = 4096) took
// 0.143 ms staged (135 TFLOP/s) and 0.089 and 0.092 as A·B (218, 209);
// the layer's forward and backward 1.45 → 1.37–1.38 ms with three such
// copies (the second LayerNorm's and the attention's outputs, 4096×768;
// the GELU's output, 4096×3072), and → 1.30 with the heads' weight
// gradients reading a fourth (the layer's input x) on wgmma.

// pretransposed reports whether product group grp reads A from a copy
// transposed by a kernel of its own: a 2-D Aᵀ·B (with its epilogue, if
// any) on a Hopper target (its shared memory) at TF32
// (pretransposePrec), large enough that a copy of A is small beside the
// product (m and n at least 256, k at least 1024).
func pretransposed(grp *Group, t Target, prec tile.Precision) bool {
	mm := grp.MatMul
	if grp.Kind != MatMulGroup || mm == nil || mm.Info.Kind != ops.MatMul || !mm.Info.TransA || mm.Info.TransB ||
		!t.GPU() || !hopperSmem(t) || !pretransposePrec(prec) {
		return false
	}
	a := mm.Inputs[0].Info.Shape // k×m
	if len(a) != 2 || len(mm.Info.Shape) != 2 {
		return false
	}
	k, m, n := a[0], a[1], mm.Info.Shape[1]
	return m >= 256 && n >= 256 && k >= 1024
}

// headsPretransposed reports whether heads_grad group grp reads x (the
// tokens × model input of the heads' projections) from a copy transposed
// once, as pretransposed products do: at TF32 on a Hopper target, and
// then runs on the swapped wgmma form (headsGradKind's tune) where it ran
// on mma.sync reading xᵀ.
func headsPretransposed(grp *Group, t Target, prec tile.Precision) bool {
	hs := grp.heads
	return hs != nil && t.GPU() && hopperSmem(t) && pretransposePrec(prec) && hs.d >= 256 && hs.n >= 1024 && hs.dh%64 == 0
}

// pretransposePrec: the precisions whose products transpose Aᵀ once
// first. TF32 only: on the H200 (2026-12-03, the BERT layer's fwd+bwd)
// 3xTF32's staged products (64×128, K in 4 parts) were faster than a
// transpose and A·B: 3.86 ms staged against 4.17 with the copies.
func pretransposePrec(prec tile.Precision) bool { return prec == tile.PrecTF32 }

// pretranspose gives each product group that reads A transposed once
// (pretransposed), and each heads_grad group that reads x so
// (headsPretransposed), a transpose group before it: its root, an
// internal m×k value, is the group's A (Group.aT). A value two such
// groups read is copied once, before the first of them.
func pretranspose(groups []*Group, t Target, prec tile.Precision) []*Group {
	c := newCopier(groups)
	for _, grp := range groups {
		var a *Node
		switch {
		case grp.Kind == HeadsGradGroup && headsPretransposed(grp, t, prec):
			a = grp.heads.x
		case pretransposed(grp, t, prec):
			a = grp.MatMul.Inputs[0]
		default:
			continue
		}
		grp.aT = c.copyOf(TransposeGroup, a, []int{a.Info.Shape[1], a.Info.Shape[0]}, "T", grp)
		grp.Reads = append(slices.DeleteFunc(slices.Clone(grp.Reads), func(n *Node) bool { return n == a }), grp.aT)
	}
	return c.groups
}

// copier makes the groups that copy a value for product groups
// (pretranspose, padOperands): one a value and shape, ordered just
// before the first group that reads it.
type copier struct {
	groups []*Group // the groups given, then the copies
	copies map[copyKey]*Node
}

type copyKey struct {
	x     *Node
	kind  GroupKind
	shape string
}

func newCopier(groups []*Group) *copier {
	return &copier{groups: groups[:len(groups):len(groups)], copies: map[copyKey]*Node{}}
}

// copyOf is the root of a group of the given kind that copies x into an
// internal value of shape s (named x.suffix), for grp to read: made on
// first use, ordered before grp (its index) and every other reader.
func (c *copier) copyOf(kind GroupKind, x *Node, s []int, suffix string, grp *Group) *Node {
	k := copyKey{x, kind, fmt.Sprint(s)}
	cp, ok := c.copies[k]
	if !ok {
		g := &Group{Kind: kind, Reads: []*Node{x}}
		cp = newInternal(fmt.Sprintf("%v.%s", x, suffix), s, x.Info.DType, g)
		cp.index = grp.Root.index
		g.Root, g.Full = cp, cp.Info.Shape
		c.copies[k] = cp
		c.groups = append(c.groups, g)
	}
	// ordered just before the first group that reads it (Partition)
	cp.index = min(cp.index, grp.Root.index)
	return cp
}

// copySource is the value a copy group's kernel reads, its pointer and
// the kernel's BLOCK_R×BLOCK_C block.
func copySource(e *emitter) (x *Node, px *tile.Value, br, bc int, err error) {
	if len(e.grp.Reads) != 1 {
		return nil, nil, 0, 0, fmt.Errorf("graphpass: %v: a %v reads one value", e.grp, e.grp.Kind)
	}
	x = e.grp.Reads[0]
	if px = e.ptr[x]; px == nil {
		return nil, nil, 0, 0, fmt.Errorf("graphpass: %v: %v is not an input of the kernel", e.grp, x)
	}
	if br, err = e.param("BLOCK_R"); err != nil {
		return nil, nil, 0, 0, err
	}
	bc, err = e.param("BLOCK_C")
	return x, px, br, bc, err
}

// transpose: program (i, j) copies the BLOCK_R×BLOCK_C block (i, j) of
// the k×m value A into the m×k root transposed: loaded along A's rows,
// stored along the root's, through shared memory (codegen's
// coalescedStore).
var transposeKind = groupKind{
	name:    "transpose",
	byClaim: true,
	join:    func(*Node, *Group, Target) (GroupKind, bool) { return TransposeGroup, false },
	tune: func(grp *Group, t Target, _ tile.Precision, meta tile.Meta) {
		meta["BLOCK_R"], meta["BLOCK_C"] = 64, 64
		if !t.GPU() {
			meta["BLOCK_R"], meta["BLOCK_C"] = 32, 32
		}
	},
	emit: emitTranspose,
}

func emitTranspose(e *emitter, out *tile.Value, k *Kernel) error {
	b := e.b
	a, pa, br, bc, err := copySource(e)
	if err != nil {
		return err
	}
	s := a.Info.Shape
	rows, cols := s[0], s[1]
	r := b.Add(b.Mul(b.ProgramID(0), br), b.Arange(0, br))
	c := b.Add(b.Mul(b.ProgramID(1), bc), b.Arange(0, bc))
	r2, c2 := b.ExpandDims(r, 1), b.ExpandDims(c, 0) // [BR,1], [1,BC]
	var in, outMask *tile.Value
	if rows%br != 0 || cols%bc != 0 {
		in = b.And(b.BroadcastTo(b.Lt(r2, rows), tile.Shp(br, bc)), b.BroadcastTo(b.Lt(c2, cols), tile.Shp(br, bc)))
	}
	v := e.loadOr0(b.AddPtr(pa, b.Add(b.Mul(r2, cols), c2)), in)
	cT, rT := b.ExpandDims(c, 1), b.ExpandDims(r, 0) // [BC,1], [1,BR]
	if in != nil {
		outMask = b.And(b.BroadcastTo(b.Lt(cT, cols), tile.Shp(bc, br)), b.BroadcastTo(b.Lt(rT, rows), tile.Shp(bc, br)))
	}
	b.Store(b.AddPtr(out, b.Add(b.Mul(cT, rows), rT)), b.Trans(v), outMask)
	k.Grid = tile.Grid{tile.CDiv(rows, br), tile.CDiv(cols, bc)}
	return nil
}
