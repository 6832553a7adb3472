package graphpass

import (
	"fmt"
	"slices"

	"github.com/tilefuse/tilefuse/ops"
)

// MaxElements is the most elements a tensor that a kernel reads or writes
// may have for its offsets to be 32-bit integers (the tile IR's index
// arithmetic: program ids, aranges, a flat index's coordinates; PTX widens
// an offset to 64 bits only when it adds it to a pointer). Past it they
// would wrap: a wrapped offset passes a mask such as idx < n and reads or
// writes outside the buffer (on a GPU silently; the CPU's reference
// interpreter stops the run with an error after the work before it). The
// bound keeps 2²⁴ below 2³¹ so that an index one block past the last
// element (a tail program's masked lanes, blocks of at most 2²⁴ elements)
// still fits. On a GPU a group that reads or writes a larger tensor, or
// computes over a larger shape, indexes in 64 bits (Group.index64: its
// program ids and aranges i64, every offset from them too; the axis
// analysis sees through the widening casts, so its copies stay 16 bytes
// wide), and a product whose operands fit while its output does not (a
// language model's logits) indexes its output side alone so (Group.out64:
// its K loop the 32-bit one's, tensor copies included). So does a CPU's
// group where its kernels run as machine code (Target.Native: since
// 2026-12-07 the machine code compares i64 lanes, codegen/cpu/native's
// cmp64.go; the 2-core VM, a row sum over 129×2²⁴ float32: 0.34–0.40 s
// against Gorgonia's 1.27–1.33). On another CPU such a node runs as
// Gorgonia runs it (Partition leaves it out of every group: markOversized,
// Oversized): the executor, which runs 64-bit kernels, is slower there
// (2026-12-05: Gorgonia 2.0–2.8 s, the H200's 64-bit kernel on the
// executor 6.9 s).
const MaxElements = 1<<31 - 1<<24

// past reports whether grp's kernel must index in 64 bits: a tensor it
// reads or writes in memory (its inputs, outputs, reads and stack), or the
// shape it computes over, has more than limit elements. Values a claimed
// kernel keeps on chip (flash attention's scores) are not indexed.
func past(grp *Group, limit int) bool {
	big := func(n *Node) bool { return n != nil && numel(n.Info.Shape) > limit }
	if numel(grp.Full) > limit || big(grp.Stack) {
		return true
	}
	for _, x := range slices.Concat(grp.Inputs, grp.outputs(), grp.Reads) {
		if big(x) {
			return true
		}
	}
	return false
}

// maxElements is opt's bound: Options.MaxElements where set and below
// MaxElements, else MaxElements.
func (opt Options) maxElements() int {
	if opt.MaxElements > 0 && opt.MaxElements < MaxElements {
		return opt.MaxElements
	}
	return MaxElements
}

// markOversized (on a CPU without the machine code) leaves every node of
// gr that reads or writes a tensor of more than limit elements to
// Gorgonia: its Kind becomes Opaque and Why says so (Oversized). Inputs and constants hold no kernel and stay as they
// are, and so do the members of a claim's groups (attention), which
// claimIndexable checked: a value such a kernel keeps on chip, as flash
// attention its scores, may be larger.
func markOversized(gr *Graph, limit int) {
	for _, n := range gr.Nodes {
		if n.oversize != nil || n.Group != nil || n.Info.Kind == ops.Input || n.Info.Kind == ops.Constant {
			continue
		}
		biggest, which := numel(n.Info.Shape), "its value"
		for i, in := range n.Inputs {
			if e := numel(in.Info.Shape); e > biggest {
				biggest, which = e, fmt.Sprintf("operand %d (%v)", i, in)
			}
		}
		if biggest <= limit {
			continue
		}
		n.oversize = &oversize{elements: biggest}
		n.Info.Kind = ops.Opaque
		n.Info.Why = fmt.Sprintf("%s has %d elements, more than the %d that tilefuse's kernels index with 32-bit offsets", which, biggest, limit)
	}
}

// leftForSize reports whether Partition under opt leaves n to Gorgonia
// for its size (markOversized's rule, before the folds that would change
// n's operands).
func leftForSize(n *Node, opt Options) bool {
	if opt.Target.GPU() || opt.Target.Native {
		return false
	}
	limit := opt.maxElements()
	if numel(n.Info.Shape) > limit {
		return true
	}
	for _, in := range n.Inputs {
		if numel(in.Info.Shape) > limit {
			return true
		}
	}
	return false
}

// oversize is what markOversized found of a node: the elements of its
// largest tensor.
type oversize struct {
	elements int
}

// Oversized reports whether Partition left n to Gorgonia because it reads
// or writes a tensor of more elements than kernels index (MaxElements, or
// Options.MaxElements), and that tensor's elements.
func Oversized(n *Node) (elements int, ok bool) {
	if n.oversize == nil {
		return 0, false
	}
	return n.oversize.elements, true
}

// productOperandsFit reports whether product group grp's K loop reads
// only buffers of at most limit elements (A, or its transposed or padded
// copy; B, or its padded copy; a batch's whole): then only its output side
// needs 64-bit offsets (Group.out64), as a language model's logits over a
// large batch, x·Wᵀ with x and W far smaller than the logits.
func productOperandsFit(grp *Group, limit int) bool {
	mm := grp.MatMul
	if grp.Kind != MatMulGroup || mm == nil || len(mm.Inputs) != 2 {
		return false
	}
	a, b := mm.Inputs[0], mm.Inputs[1]
	if grp.aT != nil {
		a = grp.aT
	}
	if grp.aPad != nil {
		a = grp.aPad
	}
	if grp.bPad != nil {
		b = grp.bPad
	}
	return numel(a.Info.Shape) <= limit && numel(b.Info.Shape) <= limit
}
