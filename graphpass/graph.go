package graphpass

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// Node is one node of the imported graph, or a value graphpass adds (an
// internal value: G is nil).
type Node struct {
	G      *G.Node // nil for an internal value
	Info   ops.Info
	Inputs []*Node // in operand order
	Users  []*Node
	Group  *Group // nil for nodes left as they are
	index  int    // position in topological order
	dead   bool   // nobody reads its value: not computed (Options.Dead)
	folded bool   // users of it read its operand instead (FoldTransposedOperands)
	// recomputed: a member of a group that rematerialise dissolved: no
	// kernel writes it, every group that reads it computes it again
	recomputed bool
	// colMajor: a 2-D value stored column by column (element (i, j) of
	// an R×C value at j·R + i): an im2col's patches, which only products
	// read (columnMajor), or a product that only col2im kernels read
	// (transposedProducts), computed as its transpose
	colMajor bool
	// oversize: Partition left it to Gorgonia, as it reads or writes a
	// tensor of more elements than kernels index (markOversized)
	oversize *oversize
}

// Graph is an imported Gorgonia graph, nodes in topological order (operands first).
type Graph struct {
	Nodes []*Node
	byG   map[*G.Node]*Node
}

// Lookup returns the imported node of a Gorgonia node.
func (gr *Graph) Lookup(n *G.Node) *Node { return gr.byG[n] }

// Import reads g; scalars of constants and shapes alone become constants
// (foldConstants).
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
	foldConstants(gr)
	return gr, nil
}

func (n *Node) String() string {
	if n.G == nil {
		return n.Info.Name
	}
	return n.G.Name()
}

// Index is n's position in Graph.Nodes (-1 for an internal value).
func (n *Node) Index() int { return n.index }

// FoldedAway reports whether n has no users because every one of them
// reads its operand instead (FoldTransposedOperands): no root of the
// user's graph, though nothing reads it now.
func (n *Node) FoldedAway() bool { return n.folded && len(n.Users) == 0 }

// Recomputed reports whether n is computed by no kernel of its own: the
// group it was in left every value it wrote to the groups that read them,
// which compute it again (rematerialise), and is gone. Group is nil.
func (n *Node) Recomputed() bool { return n.recomputed }

// ColMajor reports whether n, a 2-D value, is stored column by column
// (element (i, j) of an R×C value at j·R + i; columnMajor).
func (n *Node) ColMajor() bool { return n.colMajor }

// Dead reports whether n is computed by no kernel and left out of the
// rewritten graph, as nobody reads its value (Options.Dead).
func (n *Node) Dead() bool { return n.dead }

// Internal reports whether n is a value that graphpass added, which no node
// of the user's graph holds: one kernel computes it for others (attention's
// log-sum-exp, which its backward kernels read). It is an output of its
// group (in Extra, Group set) and an input of the groups that read it; it is
// in no group's Members and not in Graph.Nodes.
func (n *Node) Internal() bool { return n.G == nil }

// newInternal is an internal value of shape s and dtype d, computed by grp.
func newInternal(name string, s []int, d tile.DType, grp *Group) *Node {
	return &Node{Info: ops.Info{Kind: ops.Opaque, Name: name, DType: d, Shape: s, Why: "computed by a kernel for others"}, Group: grp, index: -1}
}
