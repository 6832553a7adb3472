package graphpass

import (
	"fmt"
	"sort"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/ops"
)

// OpFactory makes the Gorgonia op a group becomes (package fusion's FusedOp).
type OpFactory func(grp *Group, k *Kernel) (G.Op, error)

// Folder evaluates a group that has no inputs (arithmetic on constants) to
// the value of the constant it becomes.
type Folder func(grp *Group, k *Kernel) (G.Value, error)

// PartFactory makes the op that takes output i (0: the root, then the
// group's Extra) out of a multi-output group's value: all its outputs
// stacked along a new first axis.
type PartFactory func(grp *Group, k *Kernel, i int) (G.Op, error)

// Wrapper, if not nil, is given each replayed (unfused) op and returns the
// op the new graph uses in its place.
type Wrapper func(G.Op) G.Op

// Rewritten is the replayed graph.
type Rewritten struct {
	Graph *G.ExprGraph
	// New maps each original node that has a value in the new graph to its
	// node there: inputs, nodes left as they are, and the outputs of groups.
	New map[*G.Node]*G.Node
	// Inputs are the original graph's input nodes.
	Inputs []*G.Node
}

// Rewrite replays gr into a new graph, each group one node made by makeOp
// (with a node made by part for each output of a group that has several),
// every other node applied again with its own op (passed through wrap when
// wrap is not nil). Nodes inside groups have no counterpart.
func Rewrite(gr *Graph, groups []*Group, kernels map[*Group]*Kernel, makeOp OpFactory, part PartFactory, fold Folder, wrap Wrapper) (*Rewritten, error) {
	g2 := G.NewGraph()
	rw := &Rewritten{Graph: g2, New: map[*G.Node]*G.Node{}}
	units, err := unitOrder(gr)
	if err != nil {
		return nil, err
	}
	for _, n := range units {
		on := n.G
		switch {
		case n.Info.Kind == ops.Input:
			var nn *G.Node
			if on.IsScalar() {
				nn = G.NewScalar(g2, on.Dtype(), G.WithName(on.Name()))
			} else {
				nn = G.NewTensor(g2, on.Dtype(), on.Shape().Dims(), G.WithShape(on.Shape().Clone()...), G.WithName(on.Name()))
			}
			rw.New[on] = nn
			rw.Inputs = append(rw.Inputs, on)
		case n.Group != nil: // the group's root stands for the group
			grp := n.Group
			var nn *G.Node
			if len(grp.Inputs) == 0 {
				v, err := fold(grp, kernels[grp])
				if err != nil {
					return nil, fmt.Errorf("graphpass: folding %v: %w", grp, err)
				}
				nn = G.NewConstant(v, G.WithName(on.Name()), G.In(g2))
			} else {
				op, err := makeOp(grp, kernels[grp])
				if err != nil {
					return nil, err
				}
				args, err := rw.values(grp.Inputs, grp)
				if err != nil {
					return nil, err
				}
				if nn, err = applyIn(g2, op, args); err != nil {
					return nil, fmt.Errorf("graphpass: %v: %w", grp, err)
				}
			}
			if len(grp.Extra) == 0 {
				rw.New[on] = nn
				break
			}
			for i, o := range append([]*Node{grp.Root}, grp.Extra...) {
				pop, err := part(grp, kernels[grp], i)
				if err != nil {
					return nil, err
				}
				if rw.New[o.G], err = applyIn(g2, pop, []*G.Node{nn}); err != nil {
					return nil, fmt.Errorf("graphpass: %v: output %d: %w", grp, i, err)
				}
			}
		case n.Info.Kind == ops.Constant && !isConstant(on):
			// SizeOf: its value is known from the shape; as a constant it
			// needs no operand (which may live inside a kernel now)
			var v interface{} = n.Info.Value
			if on.Dtype() == tensor.Float32 {
				v = float32(n.Info.Value)
			}
			rw.New[on] = G.NewConstant(v, G.WithName(on.Name()), G.In(g2))
		case isConstant(on):
			nn := G.NewConstant(on.Value(), G.WithName(on.Name()), G.In(g2))
			rw.New[on] = nn
		default:
			args, err := rw.values(n.Inputs, n)
			if err != nil {
				return nil, err
			}
			op := on.Op()
			if wrap != nil {
				op = wrap(op)
			}
			nn, err := applyIn(g2, op, args)
			if err != nil {
				return nil, fmt.Errorf("graphpass: replaying %v: %w", n, err)
			}
			rw.New[on] = nn
		}
	}
	return rw, nil
}

// values are the new graph's nodes for operands of user (a group or a node).
func (rw *Rewritten) values(operands []*Node, user fmt.Stringer) ([]*G.Node, error) {
	args := make([]*G.Node, len(operands))
	for i, in := range operands {
		if args[i] = rw.New[in.G]; args[i] == nil {
			return nil, fmt.Errorf("graphpass: %v: operand %v has no value in the new graph", user, in)
		}
	}
	return args, nil
}

// unitOrder orders the units of the rewritten graph, each group (stood for
// by its root) and each node outside groups, so that each comes after every
// unit it reads from: an extra output may be read before its group's root
// in the original order. Ties keep the original order.
func unitOrder(gr *Graph) ([]*Node, error) {
	unit := func(n *Node) *Node {
		if n.Group != nil {
			return n.Group.Root
		}
		return n
	}
	deps := map[*Node]int{}
	users := map[*Node][]*Node{}
	edge := map[[2]*Node]bool{}
	var all []*Node
	for _, n := range gr.Nodes {
		u := unit(n)
		if u == n {
			all = append(all, u)
			deps[u] += 0
		}
		if n.Info.Kind == ops.Constant && n.Group == nil {
			continue // SizeOf: replayed as a constant, it reads no operand
		}
		for _, in := range n.Inputs {
			v := unit(in)
			if v == u || edge[[2]*Node{v, u}] {
				continue
			}
			edge[[2]*Node{v, u}] = true
			deps[u]++
			users[v] = append(users[v], u)
		}
	}
	var ready, order []*Node
	for _, u := range all {
		if deps[u] == 0 {
			ready = append(ready, u)
		}
	}
	for len(ready) > 0 {
		sort.Slice(ready, func(i, j int) bool { return ready[i].index < ready[j].index })
		u := ready[0]
		ready = ready[1:]
		order = append(order, u)
		for _, v := range users[u] {
			if deps[v]--; deps[v] == 0 {
				ready = append(ready, v)
			}
		}
	}
	if len(order) != len(all) {
		return nil, fmt.Errorf("graphpass: the groups depend on each other in a cycle (%d of %d units ordered)", len(order), len(all))
	}
	return order, nil
}

func isConstant(n *G.Node) bool {
	return n.Op() != nil && strings.HasPrefix(n.Op().String(), "const ")
}

// applyIn applies op in g2: ApplyOp takes its graph from the operands, and
// a constant operand (which belongs to none) must not come first.
func applyIn(g2 *G.ExprGraph, op G.Op, args []*G.Node) (*G.Node, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("op %v without operands cannot be replayed", op)
	}
	return G.ApplyOp(op, args...)
}
