package graphpass

import (
	"fmt"
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

// Wrapper, if not nil, is given each replayed (unfused) op and returns the
// op the new graph uses in its place.
type Wrapper func(G.Op) G.Op

// Rewritten is the replayed graph.
type Rewritten struct {
	Graph *G.ExprGraph
	// New maps each original node that has a value in the new graph to its
	// node there: inputs, nodes left as they are, and the roots of groups.
	New map[*G.Node]*G.Node
	// Inputs are the original graph's input nodes.
	Inputs []*G.Node
}

// Rewrite replays gr into a new graph, each group one node made by makeOp,
// every other node applied again with its own op (passed through wrap when
// wrap is not nil). Nodes inside groups have no counterpart.
func Rewrite(gr *Graph, groups []*Group, kernels map[*Group]*Kernel, makeOp OpFactory, fold Folder, wrap Wrapper) (*Rewritten, error) {
	g2 := G.NewGraph()
	rw := &Rewritten{Graph: g2, New: map[*G.Node]*G.Node{}}
	for _, n := range gr.Nodes {
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
		case n.Group != nil && n.Group.Root != n:
			// computed inside its group's kernel
		case n.Group != nil && len(n.Group.Inputs) == 0:
			v, err := fold(n.Group, kernels[n.Group])
			if err != nil {
				return nil, fmt.Errorf("graphpass: folding %v: %w", n.Group, err)
			}
			rw.New[on] = G.NewConstant(v, G.WithName(on.Name()), G.In(g2))
		case n.Group != nil:
			grp := n.Group
			op, err := makeOp(grp, kernels[grp])
			if err != nil {
				return nil, err
			}
			args := make([]*G.Node, len(grp.Inputs))
			for i, in := range grp.Inputs {
				a := rw.New[in.G]
				if a == nil {
					return nil, fmt.Errorf("graphpass: %v: input %v has no value in the new graph", grp, in)
				}
				args[i] = a
			}
			nn, err := applyIn(g2, op, args)
			if err != nil {
				return nil, fmt.Errorf("graphpass: %v: %w", grp, err)
			}
			rw.New[on] = nn
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
			args := make([]*G.Node, len(n.Inputs))
			for i, in := range n.Inputs {
				a := rw.New[in.G]
				if a == nil {
					return nil, fmt.Errorf("graphpass: %v: operand %v has no value in the new graph", n, in)
				}
				args[i] = a
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
