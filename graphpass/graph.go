package graphpass

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/ops"
)

// Node is one node of the imported graph.
type Node struct {
	G      *G.Node
	Info   ops.Info
	Inputs []*Node // in operand order
	Users  []*Node
	Group  *Group // nil for nodes left as they are
	index  int    // position in topological order
}

// Graph is an imported Gorgonia graph, nodes in topological order (operands first).
type Graph struct {
	Nodes []*Node
	byG   map[*G.Node]*Node
}

// Lookup returns the imported node of a Gorgonia node.
func (gr *Graph) Lookup(n *G.Node) *Node { return gr.byG[n] }

// Import reads g.
func Import(g *G.ExprGraph) (*Graph, error) {
	if g == nil {
		return nil, fmt.Errorf("graphpass: nil graph")
	}
	sorted, err := G.Sort(g)
	if err != nil {
		return nil, fmt.Errorf("graphpass: sorting the graph: %w", err)
	}
	gr := &Graph{byG: map[*G.Node]*Node{}}
	for i := len(sorted) - 1; i >= 0; i-- { // Sort puts the roots first
		n := sorted[i]
		if _, ok := ops.ReadTarget(n.Op()); ok {
			continue // gorgonia.Read: the machine copies the value out after a run
		}
		nd := &Node{G: n, Info: ops.Classify(n), index: len(gr.Nodes)}
		ch := g.From(n.ID())
		for ch.Next() {
			c, ok := ch.Node().(*G.Node)
			if !ok {
				return nil, fmt.Errorf("graphpass: node %v has an operand of type %T", n, ch.Node())
			}
			in := gr.byG[c]
			if in == nil {
				return nil, fmt.Errorf("graphpass: operand %v of %v comes after it", c, n)
			}
			nd.Inputs = append(nd.Inputs, in)
			in.Users = append(in.Users, nd)
		}
		gr.byG[n] = nd
		gr.Nodes = append(gr.Nodes, nd)
	}
	return gr, nil
}

func (n *Node) String() string { return n.G.Name() }
