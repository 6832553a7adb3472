package graphpass

import (
	"math"
	"strings"

	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// foldConstants computes at import the scalars that depend on constants
// and shapes alone through exactly rounded arithmetic (+, −, ×, ÷ of two
// such scalars, a negation): Mean's divisor SizeOf·SizeOf, its 1/n in the
// backward pass. Each becomes a Constant holding its value, which every
// kernel that reads it writes in as a constant, as it does Gorgonia's own
// constants and SizeOf, instead of a one-element kernel of its own (or,
// for one made of constants directly, a kernel run once at compile time)
// and a load of its value in every kernel that reads it. The value is the
// one a kernel would compute: the operation in the node's dtype, rounded
// once (Go's float32 arithmetic is IEEE single precision), so nothing
// changes but where it is computed (and it is the value Gorgonia's machine
// computes: TestFoldConstants). Ops that are not exactly rounded (exp,
// sqrt, …) are left to a kernel, whose backend's math defines them, and so
// is a value that is not finite (1/0), which no kernel's literal is
// written for.
func foldConstants(gr *Graph) {
	for _, n := range gr.Nodes { // operands first
		if v, ok := foldValue(n); ok && !math.IsInf(v, 0) && !math.IsNaN(v) {
			n.Info.Kind, n.Info.Value, n.Info.Why = ops.Constant, v, ""
		}
	}
}

// foldValue is n's value where n is a scalar computed by exact arithmetic
// from scalar constants.
func foldValue(n *Node) (float64, bool) {
	if len(n.Info.Shape) != 0 || n.Info.DType != tile.F32 && n.Info.DType != tile.F64 {
		return 0, false
	}
	for _, in := range n.Inputs {
		if in.Info.Kind != ops.Constant || len(in.Info.Shape) != 0 {
			return 0, false
		}
	}
	f32 := n.Info.DType == tile.F32
	round := func(x float64) float64 {
		if f32 {
			return float64(float32(x))
		}
		return x
	}
	switch {
	case n.Info.Kind == ops.Unary && n.Info.Name == "neg" && len(n.Inputs) == 1:
		return -round(n.Inputs[0].Info.Value), true
	case n.Info.Kind == ops.Binary && !n.Info.Cmp && len(n.Inputs) == 2:
		a, b := round(n.Inputs[0].Info.Value), round(n.Inputs[1].Info.Value)
		if f32 {
			x, y := float32(a), float32(b)
			switch n.Info.Binary {
			case tile.OpAdd:
				return float64(x + y), true
			case tile.OpSub:
				return float64(x - y), true
			case tile.OpMul:
				return float64(x * y), true
			case tile.OpDiv:
				return float64(x / y), true
			}
			return 0, false
		}
		switch n.Info.Binary {
		case tile.OpAdd:
			return a + b, true
		case tile.OpSub:
			return a - b, true
		case tile.OpMul:
			return a * b, true
		case tile.OpDiv:
			return a / b, true
		}
	}
	return 0, false
}

// FoldTransposedOperands makes each product that becomes a kernel of its
// own (productFuses) read an operand that is a Transpose of its last two
// axes — x·Transpose(w), q ××× Transpose(k, 0, 2, 1) — from the
// transpose's operand, as stored, with its TransA or TransB flipped (the
// kernels read either layout), so that no transposed copy is made. The
// Transpose keeps its other users; with none, and not read by the user, it
// is not computed (fusion's readable stage, which runs after this, where
// Node.FoldedAway tells it from a root of the user's graph). Call
// it only where products become kernels (Options.MatMul): a product left
// to Gorgonia runs on the operands the user gave it. userReads reports
// whether the user reads a node's value (keeps it, reads it with
// gorgonia.Read, reads every value): such a product is not folded into
// its transpose. opt are the options Partition will be given: a product
// it leaves to Gorgonia for its size (on a CPU without the machine code,
// a tensor past opt.MaxElements: markOversized) is not folded either, so
// that Gorgonia runs it on the operands it was given (until 2026-12-07 it
// ran on the folded ones: x·Transpose(w) as x·w, an error where the shapes
// differ and wrong values where they do not). It returns the number of
// operands and transposes folded.
func FoldTransposedOperands(gr *Graph, userReads func(*Node) bool, opt Options) int {
	folded := foldTransposedProducts(gr, userReads, opt)
	for _, mm := range gr.Nodes {
		if !productFuses(mm) || len(mm.Inputs) != 2 || leftForSize(mm, opt) {
			continue
		}
		for i, tr := range mm.Inputs {
			if tr.Info.Kind != ops.Transpose || len(tr.Inputs) != 1 || !swapsLastTwo(tr.Info.Axes) {
				continue
			}
			src := tr.Inputs[0]
			mm.Inputs[i] = src
			for j, u := range tr.Users {
				if u == mm {
					tr.Users = append(tr.Users[:j:j], tr.Users[j+1:]...)
					break
				}
			}
			src.Users = append(src.Users, mm)
			tr.folded = true
			if i == 0 {
				mm.Info.TransA = !mm.Info.TransA
			} else {
				mm.Info.TransB = !mm.Info.TransB
			}
			folded++
		}
	}
	return folded
}

// swapsLastTwo reports whether pattern p swaps the last two axes and keeps
// the others: (1, 0), (0, 2, 1).
func swapsLastTwo(p []int) bool {
	r := len(p)
	if r < 2 || p[r-1] != r-2 || p[r-2] != r-1 {
		return false
	}
	for i := 0; i < r-2; i++ {
		if p[i] != i {
			return false
		}
	}
	return true
}

// foldTransposedProducts turns each Transpose of the last two axes of a
// product that nothing else reads (and that is no node the user named or
// reads: one Gorgonia made, as Grad's weight gradient of x·Transpose(w),
// Transpose(xᵀ·dy)) into the product itself with its operands swapped,
// (op(A)·op(B))ᵀ = op(B)ᵀ·op(A)ᵀ: no transposed copy of its result. The
// product is then read by nothing (FoldedAway). It returns the number of
// transposes folded.
//
// (It runs before the operand folds, so that the swapped operands, where
// they are transposes themselves, fold too.)
func foldTransposedProducts(gr *Graph, userReads func(*Node) bool, opt Options) int {
	folded := 0
	for _, tr := range gr.Nodes {
		if tr.Info.Kind != ops.Transpose || len(tr.Inputs) != 1 || !swapsLastTwo(tr.Info.Axes) {
			continue
		}
		mm := tr.Inputs[0]
		if !productFuses(mm) || len(mm.Inputs) != 2 || len(mm.Users) != 1 || mm.G == nil || !madeByGorgonia(mm) || userReads(mm) || leftForSize(mm, opt) {
			continue
		}
		a, b := mm.Inputs[0], mm.Inputs[1]
		info := mm.Info
		info.Shape, info.Name = tr.Info.Shape, tr.Info.Name
		info.TransA, info.TransB = !mm.Info.TransB, !mm.Info.TransA
		tr.Info = info
		tr.Inputs = []*Node{b, a}
		mm.Users, mm.folded = nil, true // it keeps its operands (not computed: dead)
		for _, in := range tr.Inputs {  // twice for x·xᵀ
			in.Users = append(in.Users, tr)
		}
		folded++
	}
	return folded
}

// madeByGorgonia reports whether n is a node Gorgonia named ("op(%a, %b)"),
// not one the user named (and may read).
func madeByGorgonia(n *Node) bool {
	return strings.Contains(n.G.Name(), "(%")
}
