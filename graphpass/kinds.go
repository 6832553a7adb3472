package graphpass

import (
	"fmt"

	"github.com/tilefuse/tilefuse/tile"
)

// GroupKind is the kind of kernel a group becomes.
type GroupKind uint8

const (
	ElementwiseGroup  GroupKind = iota // elementwise.go
	ReduceGroup                        // reduce.go
	RowGroup                           // row.go
	MatMulGroup                        // matmul.go
	AttentionGroup                     // attention.go: the forward
	AttentionDQGroup                   // attention.go: the backward's dQ (training graphs)
	AttentionDKVGroup                  // attention.go: the backward's dK and dV
	HeadsWeightsGroup                  // heads.go: a multi-head pattern's weights, stacked
	HeadsProjGroup                     // heads.go: its projections, one batched product
	HeadsGradGroup                     // heads.go: its weights' gradients, a batched product for q's and one for k's and v's
	TransposeGroup                     // transpose.go: a weight gradient's A, transposed once for its product
	PadGroup                           // pad.go: a product's operand copied into rows 16-byte aligned

	numGroupKinds // the end: groupKinds has one entry per kind
)

// groupKind is what a kind of group does: which nodes start one, which
// join one, whether it can compute extra outputs, and how its kernel is
// written. Each kind's functions live in its own file.
type groupKind struct {
	name string
	// claim, if not nil, finds this kind's patterns before the partition's
	// greedy walk (attention), and returns the groups it made.
	claim func(gr *Graph, writeOut func(*Node) bool, opt Options) []*Group
	// byClaim: another kind's claim makes this kind's groups (attention's
	// backward kernels, by attention's)
	byClaim bool
	// start reports whether n, in no group, roots a new group of this kind
	// (each fusable node starts exactly one kind).
	start func(n *Node, opt Options) bool
	// open sets up a new group of this kind rooted at grp.Root (nil: Full
	// is the root's shape, and nothing more).
	open func(grp *Group)
	// join reports whether n may join grp, a group of this kind that all
	// its users are in, and the kind grp becomes with it (it may record n,
	// as a product).
	join func(n *Node, grp *Group, t Target) (GroupKind, bool)
	// extras reports whether grp computes further outputs over Full beside
	// its root.
	extras func(grp *Group, t Target) bool
	// remat: a group of this kind may compute cheap values of another's
	// again where it reads them (Group.Recompute), and leave its own extra
	// outputs to their readers so (rematerialise); its kernel computes
	// every member but its product and row ops through the emitter's gen.
	remat bool
	// anyShape: the kind's claim sets its groups' outputs, which may differ
	// in shape from the root (attention's log-sum-exp); extraOutput never
	// adds one.
	anyShape bool
	// tune chooses the kernel's meta-parameters for target t and the
	// precision of its products: its block sizes, chunks, splits, stages
	// (nil: none; Emit adds num_warps on a GPU where tune sets none).
	tune func(grp *Group, t Target, prec tile.Precision, meta tile.Meta)
	// space, if not nil, lists alternatives to the meta-parameters def
	// that tune (and the target) chose, for an autotuner to measure
	// (Candidates): each one Emit can write a kernel with.
	space func(grp *Group, t Target, prec tile.Precision, def tile.Meta) []tile.Meta
	// emit writes the kernel's body: the outputs stored at out (and
	// e.extra), its grid in k.
	emit func(e *emitter, out *tile.Value, k *Kernel) error
}

// groupKinds is the table of group kinds, in GroupKind order. Its type
// checks its length: a kind added before numGroupKinds without an entry
// does not compile, and TestGroupKindTable checks that no entry is empty.
var groupKinds = [...]groupKind{
	ElementwiseGroup:  elementwiseKind,
	ReduceGroup:       reduceKind,
	RowGroup:          rowKind,
	MatMulGroup:       matmulKind,
	AttentionGroup:    attentionKind,
	AttentionDQGroup:  attentionDQKind,
	AttentionDKVGroup: attentionDKVKind,
	HeadsWeightsGroup: headsWeightsKind,
	HeadsProjGroup:    headsProjKind,
	HeadsGradGroup:    headsGradKind,
	TransposeGroup:    transposeKind,
	PadGroup:          padKind,
}

var _ [numGroupKinds]groupKind = groupKinds // one entry per kind

func (k GroupKind) String() string {
	if k < numGroupKinds {
		return groupKinds[k].name
	}
	return fmt.Sprintf("group kind(%d)", uint8(k))
}

// startKind is the kind of group n roots when it joins none; ok is false
// where n does not fuse.
func startKind(n *Node, opt Options) (GroupKind, bool) {
	for k := range groupKinds {
		if s := groupKinds[k].start; s != nil && s(n, opt) {
			return GroupKind(k), true
		}
	}
	return 0, false
}

// newGroup is a group of kind k rooted at n.
func newGroup(k GroupKind, n *Node) *Group {
	grp := &Group{Kind: k, Root: n, Full: n.Info.Shape}
	if o := groupKinds[k].open; o != nil {
		o(grp)
	}
	return grp
}

// canJoin reports whether n may join grp, its users' group, and what grp
// becomes.
func canJoin(n *Node, grp *Group, t Target) (GroupKind, bool) {
	for _, u := range n.Users {
		if u.Group == grp && u.Info.Kind.Product() {
			return 0, false // a product's operands live in other index spaces
		}
		if u.Group == grp && n.Info.Kind.Window() && u.Info.Kind.Window() {
			// a window op reads an operand element for several of its own
			// (a max pool's backward reads dy at each of the 4 elements of
			// a 2×2 window), and each of n's elements is itself a window
			// of loads: computed once each, in a kernel of its own (the
			// H200, 2026-12-05, r32c, the convnet's col2im in its max
			// pool's backward: 157 µs fused against 32 + the backward's
			// own apart)
			return 0, false
		}
	}
	if !t.GPU() && n.Info.Kind.Window() && !windowJoins(n, grp) {
		return 0, false
	}
	return groupKinds[grp.Kind].join(n, grp, t)
}

// takesExtras reports whether grp can compute further outputs beside its root.
func takesExtras(grp *Group, t Target) bool {
	x := groupKinds[grp.Kind].extras
	return x != nil && x(grp, t)
}
