package graphpass

import (
	"fmt"
	"sort"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/ops"
)

// GroupKind is the kind of kernel a group becomes.
type GroupKind uint8

const (
	ElementwiseGroup GroupKind = iota
	ReduceGroup
	RowGroup    // one program per row: reductions along the last axis broadcast back over their rows
	MatMulGroup // a matrix product (2-D or batched) and its elementwise epilogue, one output tile per program
)

func (k GroupKind) String() string {
	switch k {
	case ReduceGroup:
		return "reduction"
	case RowGroup:
		return "row"
	case MatMulGroup:
		return "matmul"
	case AttentionGroup:
		return "attention"
	}
	return "elementwise"
}

// MaxRow is the longest row a row group holds in one block; longer rows are
// walked in blocks, once per reduction (see rowLooped).
const MaxRow = 8192

// looped reports whether rows of the shape full are walked in blocks
// (longer than MaxRow): such a row group writes one output and computes no
// softmax backward.
func looped(full []int) bool { return len(full) > 0 && full[len(full)-1] > MaxRow }

// Group is a set of nodes that becomes one kernel.
type Group struct {
	ID      int
	Kind    GroupKind
	Root    *Node   // the group's output
	Extra   []*Node // further outputs, computed over Full like the root (topological order)
	Members []*Node // topological order, Root last
	Inputs  []*Node // values from outside, in the order the kernel takes them
	Full    []int   // elementwise, row and matmul groups: the shape computed over
	MatMul  *Node   // a matmul group's product
}

// rowReduce reports whether n reduces only the last axis of its input.
func rowReduce(n *Node) bool {
	in := n.Inputs[0].Info.Shape
	return n.Info.Kind == ops.Reduce && len(n.Info.Axes) == 1 && len(in) > 0 && n.Info.Axes[0] == len(in)-1
}

// canJoin reports whether n may join grp, its users' group, and what grp becomes.
func canJoin(n *Node, grp *Group) (GroupKind, bool) {
	for _, u := range n.Users {
		if u.Group == grp && (u.Info.Kind == ops.MatMul || u.Info.Kind == ops.BatchedMatMul) {
			return 0, false // a product's operands live in other index spaces
		}
	}
	if grp.Kind == AttentionGroup && (!n.Info.Kind.Elementwise() || n.Info.Kind.Injective()) {
		return 0, false
	}
	switch n.Info.Kind {
	case ops.MatMul, ops.BatchedMatMul:
		if grp.Kind != ElementwiseGroup || grp.MatMul != nil || !sameShape(n.Info.Shape, grp.Full) || !productFuses(n) {
			return 0, false
		}
		grp.MatMul = n
		return MatMulGroup, true
	case ops.Reduce, ops.Softmax, ops.SoftmaxGrad:
		if grp.Kind == ReduceGroup || grp.Kind == MatMulGroup {
			return 0, false
		}
		full := n.Info.Shape
		if n.Info.Kind == ops.Reduce {
			if !rowReduce(n) {
				return 0, false
			}
			full = n.Inputs[0].Info.Shape
		}
		if !sameShape(full, grp.Full) || len(grp.Extra) > 0 && looped(full) {
			return 0, false
		}
		return RowGroup, true
	}
	return grp.Kind, true
}

// productFuses reports whether n is a product a matmul group computes: a
// 2-D one, or a batched one over 3-D operands of one batch size.
func productFuses(n *Node) bool {
	switch n.Info.Kind {
	case ops.MatMul:
		return true
	case ops.BatchedMatMul:
		a, b := n.Inputs[0].Info.Shape, n.Inputs[1].Info.Shape
		return len(a) == 3 && len(b) == 3 && a[0] == b[0] && len(n.Info.Shape) == 3
	}
	return false
}

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
}

// Partition assigns fusable nodes to groups and returns the groups in
// topological order of their roots.
func Partition(gr *Graph, opt Options) []*Group {
	maxGroup := opt.MaxGroup
	if maxGroup <= 0 {
		maxGroup = 64
	}
	writeOut := func(n *Node) bool { return opt.WriteOut[n.G] }
	var groups []*Group
	if !opt.Off && opt.MatMul {
		groups = findAttention(gr, writeOut)
	}
	size := map[*Group]int{}
	for i := len(gr.Nodes) - 1; i >= 0; i-- {
		n := gr.Nodes[i]
		k := n.Info.Kind
		fusable := k.Elementwise() || k.Injective() || k == ops.Reduce || k == ops.Softmax || opt.MatMul && productFuses(n) ||
			k == ops.SoftmaxGrad && !looped(n.Info.Shape)
		if n.Group != nil || !fusable {
			continue // already in an attention group, or not fusable
		}
		if k == ops.Constant {
			continue // folded into the groups that use it; otherwise left to Gorgonia
		}
		var join *Group
		if !opt.Off && !writeOut(n) {
			// users that only take the node's shape (SizeOf) do not need its value
			first := true
			for _, u := range n.Users {
				if u.Info.Kind == ops.Constant {
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
				if kind, ok := canJoin(n, join); ok {
					join.Kind = kind
				} else {
					join = nil
				}
			}
		}
		if join == nil && !opt.Off && len(n.Users) > 0 {
			// used by several groups, or read by the user: an extra output of
			// one of its users' groups, where it is computed anyway
			if join = extraOutput(n, maxGroup, size); join != nil {
				join.Extra = append(join.Extra, n)
			}
		}
		if join == nil {
			join = &Group{Kind: ElementwiseGroup, Root: n, Full: n.Info.Shape}
			switch k {
			case ops.Reduce:
				join.Kind, join.Full = ReduceGroup, nil
			case ops.Softmax, ops.SoftmaxGrad:
				join.Kind = RowGroup
			case ops.MatMul, ops.BatchedMatMul:
				join.Kind, join.MatMul = MatMulGroup, n
			}
			groups = append(groups, join)
		}
		n.Group = join
		join.Members = append(join.Members, n)
		size[join]++
	}
	// order groups and members topologically, find each group's inputs
	sort.Slice(groups, func(i, j int) bool { return groups[i].Root.index < groups[j].Root.index })
	for id, grp := range groups {
		grp.ID = id
		sort.Slice(grp.Members, func(i, j int) bool { return grp.Members[i].index < grp.Members[j].index })
		sort.Slice(grp.Extra, func(i, j int) bool { return grp.Extra[i].index < grp.Extra[j].index })
		seen := map[*Node]bool{}
		for _, m := range grp.Members {
			for _, in := range m.Inputs {
				if in.Group == grp || seen[in] || in.Info.Kind == ops.Constant && in.Group == nil {
					continue
				}
				seen[in] = true
				grp.Inputs = append(grp.Inputs, in)
			}
		}
		sort.Slice(grp.Inputs, func(i, j int) bool { return grp.Inputs[i].index < grp.Inputs[j].index })
	}
	return groups
}

// extraOutput finds a group among n's users' that can compute n as an extra
// output: one computed over n's own shape (elementwise, row with a row
// that fits one block, matmul epilogue), in n's dtype, with room, that n can
// join, and that would not then depend on itself through n's other users.
func extraOutput(n *Node, maxGroup int, size map[*Group]int) *Group {
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
		switch {
		case grp.Kind != ElementwiseGroup && grp.Kind != RowGroup && grp.Kind != MatMulGroup,
			grp.Kind == RowGroup && looped(grp.Full),
			!sameShape(n.Info.Shape, grp.Full), n.Info.DType != grp.Root.Info.DType,
			size[grp] >= maxGroup, reaches(n, grp):
			continue
		}
		kind, ok := canJoin(n, grp)
		if !ok {
			continue
		}
		grp.Kind = kind
		return grp
	}
	return nil
}

// reaches reports whether a path leaves n through a user outside grp and
// comes back to a member of grp, with every group on the way taken as one
// node (it reads all its members' inputs before writing any output): with n
// inside grp, grp would wait for itself.
func reaches(n *Node, grp *Group) bool {
	seen := map[*Node]bool{}
	groups := map[*Group]bool{}
	var stack []*Node
	for _, u := range n.Users {
		if u.Group != grp {
			stack = append(stack, u)
		}
	}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if x.Group == grp {
			return true
		}
		if seen[x] {
			continue
		}
		seen[x] = true
		stack = append(stack, x.Users...)
		if g := x.Group; g != nil && !groups[g] {
			groups[g] = true
			for _, m := range g.Members {
				stack = append(stack, m.Users...)
			}
		}
	}
	return false
}

func (grp *Group) String() string {
	return fmt.Sprintf("group %d (%v, %d ops, root %v)", grp.ID, grp.Kind, len(grp.Members), grp.Root)
}
