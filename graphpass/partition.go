package graphpass

import (
	"fmt"
	"sort"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// Group is a set of nodes that becomes one kernel.
type Group struct {
	ID      int
	Kind    GroupKind
	Root    *Node   // the group's output
	Extra   []*Node // further outputs, computed over Full like the root (topological order); attention's of any shape
	Members []*Node // topological order, Root last
	Inputs  []*Node // values from outside, in the order the kernel takes them
	Full    []int   // elementwise, row and matmul groups: the shape computed over
	MatMul  *Node   // a matmul group's product
	// Recompute are members of other groups that this group's kernel
	// computes again rather than read (attention's backward kernels
	// recompute the forward's scores and probabilities); Reads are values
	// it reads beyond its members' operands (the forward's output and
	// log-sum-exp). Both are set where the group is claimed.
	Recompute []*Node
	Reads     []*Node
	// OnePointer: the kernel takes one pointer to all its outputs, laid end
	// to end (output i after the i before it), instead of one each, so that
	// a program can choose its output by offset (a head's); Stack, if not
	// nil, is an internal value that stands for that whole value, which
	// other kernels index into (the heads' projections, stacked).
	OnePointer bool
	Stack      *Node
	attn       *attention // the attention pattern an attention kind's group is part of
	heads      *heads     // the multi-head pattern of a heads kind's group
	dw         []*Node    // a heads_grad group's outputs, by part
	aT         *Node      // a product or heads_grad group's A transposed by a transpose group (pretranspose), which it reads instead of A
	from       *Group     // and the backward kernel whose value it reads
	dissolved  bool       // every value it wrote is computed again by its readers (rematerialise): no kernel
	// aPad, bPad: a product group's A and B copied into rows 16-byte
	// aligned by pad groups (padOperands), which its product reads
	// instead
	aPad, bPad *Node
	// index64: the kernel indexes in 64 bits (tile.Builder.Index64), as a
	// tensor it reads or writes, or the shape it computes over, has more
	// than MaxElements elements (on a GPU, and on a CPU whose kernels run
	// as machine code, Target.Native; on another CPU Partition leaves such
	// nodes to Gorgonia: markOversized)
	index64 bool
	// out64: a product group whose operands (as its K loop reads them) fit
	// 32-bit offsets while its output side does not: only the output's
	// coordinates are i64, so that the K loop keeps its 16-byte and
	// tensor copies (productOperandsFit)
	out64 bool
	// freshOut: on a CPU, every output is a value the user reads, written
	// each run into memory of its own (Options.FreshOutputs), and no other
	// node reads it (freshOutputs)
	freshOut bool
}

// copies reports whether g copies a value for a product group, which
// goes after it (a transpose or pad group).
func (g *Group) copies() bool { return g.Kind == TransposeGroup || g.Kind == PadGroup }

// outputs are g's root and extra outputs, in that order.
func (g *Group) outputs() []*Node { return append([]*Node{g.Root}, g.Extra...) }

// transA reports whether product group g reads its A transposed (k×m in
// memory): its product's Aᵀ, unless a transpose group copies it first.
func (g *Group) transA() bool { return g.MatMul != nil && g.MatMul.Info.TransA && g.aT == nil }

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Options control partitioning.
type Options struct {
	// WriteOut holds the nodes whose values must be written out, even where
	// they could fuse: the values the caller reads after a run (package
	// fusion's rule). Such a node ends its group, or is an extra output of
	// one of its users' groups.
	WriteOut map[*G.Node]bool
	// MaxGroup bounds the number of ops in a group (0: 64).
	MaxGroup int
	// Off makes every fusable op its own group (one kernel per op: the
	// honest unfused baseline on the same backend).
	Off bool
	// MatMul fuses matrix products: 2-D ones with their elementwise
	// epilogues, and attention patterns into one kernel (on the GPU; on the
	// CPU Gorgonia's BLAS products are faster).
	MatMul bool
	// Target is the machine the kernels are for (Emit must be given the
	// same): it bounds the rows a row group holds in one block.
	Target Target
	// Dead holds the nodes whose values nobody reads (no user that is not
	// dead, and not written out): they join no group and are not computed
	// (Node.Dead).
	Dead map[*G.Node]bool
	// Precision is the precision of the products the groups' kernels will
	// be emitted at (Emit's): whether a weight gradient's A is transposed
	// by a kernel of its own first depends on it (pretranspose), and
	// whether a product's operands are copied into aligned rows
	// (padOperands).
	Precision tile.Precision
	// PrecisionByGroup: each product group's kernel is emitted at
	// DefaultPrecision's choice for it instead of Precision (package
	// fusion on the GPU without WithPrecision); padOperands asks it.
	PrecisionByGroup bool
	// FreshOutputs: each run writes the values in WriteOut into memory of
	// their own, which no earlier run's stores left in the caches (package
	// fusion's CPU backend without WithReuseOutputs). A CPU group whose
	// every output is such a value that no other node reads is then
	// written past the caches where that pays (freshOut, cpuStream).
	FreshOutputs bool
	// MaxElements bounds the elements of a tensor a kernel reads or
	// writes with 32-bit offsets (0, or more than MaxElements:
	// MaxElements); past it a GPU's kernel, and a CPU's run as machine
	// code (Target.Native), indexes in 64 bits (Group.index64,
	// Group.out64), and another CPU leaves the node to Gorgonia
	// (markOversized). Tests lower it to run those paths on small tensors.
	MaxElements int
}

// Partition assigns fusable nodes to groups and returns the groups in
// topological order of their roots.
func Partition(gr *Graph, opt Options) []*Group {
	maxGroup := opt.MaxGroup
	if maxGroup <= 0 {
		maxGroup = 64
	}
	writeOut := func(n *Node) bool { return opt.WriteOut[n.G] }
	for _, n := range gr.Nodes {
		n.dead = opt.Dead[n.G]
	}
	var groups []*Group
	if !opt.Off { // patterns first (attention)
		for _, kind := range groupKinds {
			if kind.claim != nil {
				groups = append(groups, kind.claim(gr, writeOut, opt)...)
			}
		}
	}
	// then, on a CPU without the machine code, what no claim took and a
	// kernel could not index is left to Gorgonia (a claim checks its own:
	// claimIndexable); a GPU's kernels, and a CPU's as machine code,
	// index such tensors in 64 bits (Group.index64)
	if !opt.Target.GPU() && !opt.Target.Native {
		markOversized(gr, opt.maxElements())
	}
	size := map[*Group]int{}
	for i := len(gr.Nodes) - 1; i >= 0; i-- {
		n := gr.Nodes[i]
		start, fusable := startKind(n, opt)
		if n.Group != nil || !fusable || n.dead {
			continue // already in an attention group, not fusable, or not computed
		}
		if n.Info.Kind == ops.Constant {
			continue // folded into the groups that use it; otherwise left to Gorgonia
		}
		var join *Group
		if !opt.Off && !writeOut(n) {
			// users that only take the node's shape (SizeOf) do not need its value
			first := true
			for _, u := range n.Users {
				if u.Info.Kind == ops.Constant || u.dead {
					continue
				}
				if first {
					join, first = u.Group, false
				} else if u.Group != join {
					join = nil
					break
				}
			}
			if join != nil && size[join] >= maxGroup {
				join = nil
			}
			if join != nil {
				if kind, ok := canJoin(n, join, opt.Target); ok {
					join.Kind = kind
				} else {
					join = nil
				}
			}
		}
		if join == nil && !opt.Off && len(n.Users) > 0 {
			// used by several groups, or read by the user: an extra output of
			// one of its users' groups, where it is computed anyway
			if join = extraOutput(n, maxGroup, size, opt.Target); join != nil {
				join.Extra = append(join.Extra, n)
			}
		}
		if join == nil {
			join = newGroup(start, n)
			groups = append(groups, join)
		}
		n.Group = join
		join.Members = append(join.Members, n)
		size[join]++
	}
	if !opt.Off {
		groups = mergeSiblingReductions(groups, maxGroup)
		groups = rematerialise(groups, writeOut, maxGroup, opt.Target)
		groups = pretranspose(groups, opt.Target, opt.Precision)
		groups = padOperands(groups, opt)
		columnMajor(groups, writeOut, opt.Target)
		transposedProducts(groups, writeOut, opt.Target)
	}
	// order groups and members topologically, find each group's inputs (a
	// transpose or pad group shares its product group's index and goes
	// first)
	sort.Slice(groups, func(i, j int) bool {
		a, b := groups[i], groups[j]
		if a.Root.index != b.Root.index {
			return a.Root.index < b.Root.index
		}
		return a.copies() && !b.copies()
	})
	for id, grp := range groups {
		grp.ID = id
		sort.Slice(grp.Members, func(i, j int) bool { return grp.Members[i].index < grp.Members[j].index })
		sort.Slice(grp.Extra, func(i, j int) bool { return grp.Extra[i].index < grp.Extra[j].index })
		grp.Inputs = groupInputs(grp)
		sort.SliceStable(grp.Inputs, func(i, j int) bool { return grp.Inputs[i].index < grp.Inputs[j].index })
		grp.freshOut = opt.FreshOutputs && !opt.Target.GPU() && freshOutputs(grp, writeOut)
		grp.index64 = past(grp, opt.maxElements())
		if grp.index64 && productOperandsFit(grp, opt.maxElements()) {
			grp.index64, grp.out64 = false, true
		}
	}
	return groups
}

// freshOutputs reports whether every output of grp is written out and read
// by no node outside it that is computed: its values go to the user alone.
func freshOutputs(grp *Group, writeOut func(*Node) bool) bool {
	for _, x := range grp.outputs() {
		if x.Internal() || !writeOut(x) {
			return false
		}
		for _, u := range x.Users {
			if u.Group != grp && !u.dead {
				return false
			}
		}
	}
	return true
}

// groupInputs are the values grp's kernel reads: its members' and
// recomputed nodes' operands that it does not compute (scalar constants are
// written into the kernel), then its Reads; each once.
func groupInputs(grp *Group) []*Node {
	computed := map[*Node]bool{}
	for _, m := range grp.Recompute {
		computed[m] = true
	}
	seen := map[*Node]bool{}
	var ins []*Node
	add := func(in *Node) {
		if in.Group == grp || computed[in] || seen[in] || in.Info.Kind == ops.Constant && in.Group == nil {
			return
		}
		seen[in] = true
		ins = append(ins, in)
	}
	for _, m := range append(append([]*Node(nil), grp.Members...), grp.Recompute...) {
		for i, in := range m.Inputs {
			if grp.attn != nil && grp.attn.skip(in) || grp.heads.skip(in) {
				continue // computed from indices, or read through a stack
			}
			if i == 0 && grp.aT != nil && m.Info.Kind == ops.MatMul && m.Info.TransA {
				continue // a product's Aᵀ, read from its copy (Reads)
			}
			if m == grp.MatMul && (i == 0 && grp.aPad != nil || i == 1 && grp.bPad != nil) {
				continue // an operand read from its padded copy (Reads)
			}
			add(in)
		}
	}
	for _, in := range grp.Reads {
		add(in)
	}
	return ins
}

// extraOutput finds a group among n's users' that can compute n as an extra
// output: one computed over n's own shape (elementwise, row with a row
// that fits one block, matmul epilogue), in n's dtype, with room, that n can
// join, and that would not then depend on itself through n's other users.
func extraOutput(n *Node, maxGroup int, size map[*Group]int, t Target) *Group {
	k := n.Info.Kind
	if len(n.Info.Shape) == 0 || !k.Elementwise() && k != ops.Softmax || k == ops.Constant {
		return nil
	}
	tried := map[*Group]bool{}
	for _, u := range n.Users {
		grp := u.Group
		if grp == nil || tried[grp] {
			continue
		}
		tried[grp] = true
		// a value per row of an elementwise or row group's shape is one
		// too, stored once a row (a LayerNorm's 1/σ, which its backward reads)
		rowValue := (grp.Kind == ElementwiseGroup || grp.Kind == RowGroup) && grp.MatMul == nil &&
			sameShape(grp.Full, grp.Root.Info.Shape) && perRow(n, grp.Full)
		switch {
		case !takesExtras(grp, t),
			!sameShape(n.Info.Shape, grp.Full) && !rowValue, n.Info.DType != grp.Root.Info.DType,
			size[grp] >= maxGroup, reaches(n, grp):
			continue
		}
		kind, ok := canJoin(n, grp, t)
		if !ok {
			continue
		}
		was := grp.Kind
		grp.Kind = kind
		if !takesExtras(grp, t) { // n would make it a kind that writes one output (a looped row)
			grp.Kind = was
			continue
		}
		return grp
	}
	return nil
}

// reaches reports whether a path leaves n through a user outside grp and
// comes back to a member of grp, with every group on the way taken as one
// node (it reads all its members' inputs before writing any output): with n
// inside grp, grp would wait for itself. A constant user (SizeOf) takes
// only its operand's shape, known before anything runs: no path goes
// through one (a broadcast's SizeOf of n is no dependence of the
// broadcast's group on n's value).
func reaches(n *Node, grp *Group) bool {
	var stack []*Node
	for _, u := range n.Users {
		if u.Group != grp {
			stack = append(stack, u)
		}
	}
	return pathTo(stack, grp, nil)
}

// pathTo reports whether a path from one of the nodes of start (constant
// users aside: see reaches) leads to a member of target, every group on
// the way taken as one node: reaching one of its members reaches the
// users of all of them. Users in the group from (where not nil) are no
// path: the walk leaves it and may not come back through it.
func pathTo(start []*Node, target, from *Group) bool {
	seen := map[*Node]bool{}
	groups := map[*Group]bool{}
	if from != nil {
		groups[from] = true
	}
	var stack []*Node
	push := func(us []*Node) {
		for _, u := range us {
			if u.Info.Kind != ops.Constant && (from == nil || u.Group != from) {
				stack = append(stack, u)
			}
		}
	}
	push(start)
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if x.Group == target {
			return true
		}
		if seen[x] {
			continue
		}
		seen[x] = true
		push(x.Users)
		if g := x.Group; g != nil && !groups[g] {
			groups[g] = true
			for _, m := range g.Members {
				push(m.Users)
			}
		}
	}
	return false
}

func (grp *Group) String() string {
	return fmt.Sprintf("group %d (%v, %d ops, root %v)", grp.ID, grp.Kind, len(grp.Members), grp.Root)
}
