package graphpass

import (
	"slices"

	"github.com/tilefuse/tilefuse/ops"
)

// columnMajor stores column by column, on a CPU whose kernels are machine
// code, each 2-D root of an elementwise group that holds an im2col (a
// convolution's patches, [N·OH·OW, C·KH·KW]) and that only products read,
// as an operand (Node.ColMajor): the im2col's lanes run along an image's
// columns, and its rows, a patch's C·KH·KW elements, were stored that many
// elements apart each; stored column by column a block's lanes are
// contiguous, and the products read the operand as its transpose (their
// packs take transposed operands).
func columnMajor(groups []*Group, writeOut func(*Node) bool, t Target) {
	if t.GPU() || !t.Native {
		return
	}
	readers := groupReaders(groups)
	for _, p := range groups {
		x := p.Root
		if p.Kind != ElementwiseGroup || len(p.Extra) > 0 || len(x.Info.Shape) != 2 || writeOut(x) || x.Internal() ||
			!slices.ContainsFunc(p.Members, func(n *Node) bool { return n.Info.Kind == ops.Im2Col }) {
			continue
		}
		ok := len(readers[x]) > 0 && onlyKernelsRead(x)
		for _, c := range readers[x] {
			mm := c.MatMul
			ok = ok && c.Kind == MatMulGroup && mm != nil && mm.Info.Kind == ops.MatMul && c.aT == nil &&
				!slices.ContainsFunc(c.Members, func(n *Node) bool { return n != mm && slices.Contains(n.Inputs, x) }) &&
				!slices.ContainsFunc(c.Recompute, func(n *Node) bool { return slices.Contains(n.Inputs, x) })
		}
		if ok {
			x.colMajor = true
		}
	}
}

// transposedProducts stores column by column, on a CPU whose kernels are
// machine code, each bare 2-D product (a product group of nothing but the
// product, its root) that only elementwise groups holding a col2im read:
// a convolution's patches' gradient dY·W, [N·OH·OW, C·KH·KW], which the
// col2im reads a patch's length apart at each of its taps (a gather an
// element, its lanes along an image's columns); stored column by column,
// as the product Wᵀ·dYᵀ that emitMatMul computes for it, those reads are
// contiguous. The product's operands are read as they are stored (no
// copies of them: pretranspose and padOperands make none on a CPU); a
// split of K stores and adds its parts in the transpose's order. Not on
// a GPU (its tiles store rows as they are).
func transposedProducts(groups []*Group, writeOut func(*Node) bool, t Target) {
	if t.GPU() || !t.Native {
		return
	}
	readers := groupReaders(groups)
	for _, p := range groups {
		mm := p.MatMul
		if p.Kind != MatMulGroup || mm == nil || p.Root != mm || mm.Info.Kind != ops.MatMul || len(p.Members) != 1 ||
			len(p.Extra) > 0 || len(mm.Info.Shape) != 2 || p.aT != nil || p.aPad != nil || p.bPad != nil ||
			writeOut(mm) || mm.Internal() || !onlyKernelsRead(mm) || len(readers[mm]) == 0 {
			continue
		}
		ok := true
		for _, c := range readers[mm] {
			ok = ok && c.Kind == ElementwiseGroup &&
				slices.ContainsFunc(c.Members, func(n *Node) bool { return n.Info.Kind == ops.Col2Im })
		}
		if ok {
			mm.colMajor = true
		}
	}
}

// onlyKernelsRead reports whether every node that reads x is in a group
// (or computed again by groups), none left to Gorgonia, which would read
// it as stored in its own shape.
func onlyKernelsRead(x *Node) bool {
	for _, u := range x.Users {
		if !u.dead && u.Info.Kind != ops.Constant && u.Group == nil && !u.recomputed {
			return false
		}
	}
	return true
}
