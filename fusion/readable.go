package fusion

import (
	"fmt"
	"slices"
	"strings"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/ops"
)

// The readable set is the set of the user's nodes that hold their value
// after RunAll. It is decided once, by planReadable; the partitioner writes
// each of its nodes out of its kernel (as the kernel's root or an extra
// output), and both backends write back exactly this set, no more.
//
// The rule is what a user of Gorgonia's machine reads. A node is readable
// when it is not an input or a constant (those hold the values the user
// gave them) and
//   - it is a root of the graph (nothing reads it: an output), but for a
//     tensor of the backward pass that is no node's gradient: Grad
//     differentiates every op with respect to all its operands, and the
//     contributions to the gradient of an operand that is not
//     differentiated (x in x·W when only W's gradient is asked for) are
//     never summed into one, so each is a root (36 products of 4096×768
//     in the BERT-base encoder layer's backward); name or keep such a
//     tensor to read it,
//   - it is the gradient (Deriv, read through w.Grad()) of an input, or of
//     a node that is readable by the other rules. Grad gives every node
//     between the inputs and the cost a gradient of its own; those of values
//     inside kernels have no value either (keeping them all wrote 11–13 %
//     more bytes per run in mlp_step and encoder_fwd_bwd and cost four
//     kernels there; attention's S×S gradients never exist: the backward
//     kernels recompute them),
//   - it is a scalar (a loss or a metric: writing it costs nothing),
//   - the user named it (gorgonia.WithName: Gorgonia's own names have the
//     form "op(%a, %b)"),
//   - a gorgonia.Read statement reads it, or the user kept it (WithKeep),
//   - it is a prediction: what a loss is computed from (below), or
//   - WithReadAll(true) is set: every node is readable.
//
// A prediction is found by walking back from every scalar of the forward
// pass (a loss, a term of one, a metric) through the ops that make a loss
// out of a prediction: scalar arithmetic, reductions (Sum, Mean's Sum and
// division by a size), the one-operand ops losses are made with (Square,
// Log, Neg, Abs, Sqrt: ops.Info.LossLike; an activation such as Sigmoid is
// a prediction),
// reshapes and broadcasts, and two-operand elementwise ops whose other
// operand is data (a constant, or in a training graph an input that has no
// gradient: the targets). The first node on each path that is none of
// these is a prediction: the output of the network (a product, a softmax,
// a sum of two computed values, …). So in Mean(Square(Sub(pred, target)))
// pred is readable, in -Mean(Log(SoftMax(z))·onehot) the softmax, in
// Mean(y) for a block's output y, y, and in an LSTM cell whose h and c both
// feed the loss, h and c. A value the loss does not read and that is not a
// root (the cell state of an unrolled step that only feeds the next) is
// not: the report lists such nodes, and WithKeep keeps them.
//
// The forward pass is what the user wrote: the nodes that a root or a
// scalar of the forward pass is computed from. Gorgonia's Grad makes the
// backward nodes; those that depend on a gradient (a node with DerivOf that
// is not a constant: the gradient of the cost is the constant 1, which
// Gorgonia may share with a constant 1 of the user's) are backward, and so
// is every node that only they read (such as 1 - tanh² in tanh's gradient,
// made from forward values alone).

// planReadable is the readable stage.
func planReadable(c *compilation) error {
	keep := map[*G.Node]bool{}
	for i, n := range c.cfg.keep {
		if n == nil {
			return fmt.Errorf("fusion: WithKeep: node %d of %d is nil", i+1, len(c.cfg.keep))
		}
		if c.gr.Lookup(n) == nil {
			return fmt.Errorf("fusion: WithKeep: node %v is not in the graph being compiled (a node of another graph?)", n.Name())
		}
		keep[n] = true
	}
	for _, r := range c.reads {
		keep[r.n] = true
	}
	gradOf := map[*G.Node][]*graphpass.Node{} // a gradient, and the nodes it is the gradient of
	for _, n := range c.gr.Nodes {
		if d := n.G.Deriv(); d != nil {
			gradOf[d] = append(gradOf[d], n)
		}
		for _, of := range n.G.DerivOf() {
			if o := c.gr.Lookup(of); o != nil {
				gradOf[n.G] = append(gradOf[n.G], o)
			}
		}
	}
	for g, of := range gradOf { // a constant's gradient is nobody's (see strayScalars)
		gradOf[g] = slices.DeleteFunc(of, func(o *graphpass.Node) bool { return o.Info.Kind == ops.Constant && !keep[o.G] })
	}
	c.forward = forwardNodes(c.gr)
	stray := strayScalars(c.gr, gradOf)
	predictions := predictionsOf(c.gr, c.forward, stray)
	base := map[*G.Node]bool{} // by the rules but the gradients'
	for _, n := range c.gr.Nodes {
		g := n.G
		scalar := g.IsScalar() && !stray[n]
		root := len(n.Users) == 0 && !stray[n] && (c.forward[n] || len(gradOf[g]) > 0 || scalar)
		base[g] = c.cfg.readAll || root || keep[g] || scalar || !strings.Contains(g.Name(), "(%") || predictions[n]
	}
	c.isRead = map[*G.Node]bool{}
	for _, n := range c.gr.Nodes {
		if n.Info.Kind == ops.Input || isConst(n.G) {
			continue
		}
		read := base[n.G]
		for _, of := range gradOf[n.G] {
			read = read || of.Info.Kind == ops.Input || base[of.G]
		}
		if read {
			c.isRead[n.G] = true
			c.readable = append(c.readable, n)
		}
	}
	// what nothing reads is not computed: a node that is not readable and
	// whose users are all dead (users first: one pass)
	c.dead = map[*G.Node]bool{}
	for i := len(c.gr.Nodes) - 1; i >= 0; i-- {
		n := c.gr.Nodes[i]
		if c.isRead[n.G] || n.Info.Kind == ops.Input || isConst(n.G) || ops.IsStatement(n.G.Op()) {
			continue
		}
		dead := true
		for _, u := range n.Users {
			dead = dead && c.dead[u.G]
		}
		if dead {
			c.dead[n.G] = true
		}
	}
	return nil
}

// strayScalars are the scalars of the backward pass that Grad computes for
// the gradient of an operand it does not differentiate, and that only
// that computation reads: Grad differentiates every op with respect to
// all its operands, so a Mul(x, 0.5) gets a contribution Σ(x⊙dy) towards
// the constant's gradient, LayerNorm's Mean a chain −(Σ/n)/n·dy towards
// its divisor's (SizeOf), an attention's scale one towards the scale's.
// Gorgonia sums no such contribution into a gradient: Backpropagate sets
// a Deriv only on the nodes between the inputs asked for and the cost,
// and a constant (or a value made of constants alone, or an input not
// asked for) is none of them; a constant the user holds is not even the
// graph's node (ExprGraph.AddNode adds a clone). So no Grad() reads such
// a value, and, unnamed, nothing else can. A stray scalar is one that
// Grad made (ops.MadeByGrad), that is no node's gradient, and that is a
// root, or that has no gradient of its own (Grad gives one to every node
// between the inputs and the cost: the loss is never stray) and is read
// only by stray scalars (the chain's intermediates, which may be made of
// forward values alone: −loss/n·1/n for Mean's divisor). A
// scalar the user computes from a gradient (a gradient norm) is not Grad's,
// and stays readable.
func strayScalars(gr *graphpass.Graph, gradOf map[*G.Node][]*graphpass.Node) map[*graphpass.Node]bool {
	stray := map[*graphpass.Node]bool{}
	for i := len(gr.Nodes) - 1; i >= 0; i-- { // users first
		n := gr.Nodes[i]
		g := n.G
		if !g.IsScalar() || len(gradOf[g]) > 0 || n.Info.Kind == ops.Input || isConst(g) || !strings.Contains(g.Name(), "(%") {
			continue
		}
		if len(n.Users) == 0 {
			stray[n] = ops.MadeByGrad(g)
			continue
		}
		all := g.Deriv() == nil // a value between the inputs and the cost (the loss itself) is the user's
		for _, u := range n.Users {
			all = all && stray[u]
		}
		stray[n] = all
	}
	return stray
}

// forwardNodes is the forward pass (see above).
func forwardNodes(gr *graphpass.Graph) map[*graphpass.Node]bool {
	back := map[*graphpass.Node]bool{} // computed from a gradient
	training := false
	for _, n := range gr.Nodes { // operands first: one pass marks every descendant
		if len(n.G.DerivOf()) > 0 && n.Info.Kind != ops.Constant {
			back[n], training = true, true
			continue
		}
		for _, in := range n.Inputs {
			if back[in] {
				back[n] = true
				break
			}
		}
	}
	fwd := map[*graphpass.Node]bool{}
	for i := len(gr.Nodes) - 1; i >= 0; i-- { // users first: one pass marks every ancestor
		n := gr.Nodes[i]
		if back[n] {
			continue
		}
		if len(n.Users) == 0 || len(n.Info.Shape) == 0 && training || !training {
			fwd[n] = true
		}
		if fwd[n] {
			for _, in := range n.Inputs {
				fwd[in] = true
			}
		}
	}
	return fwd
}

// predictionsOf are the predictions of the forward pass's scalars (see above).
func predictionsOf(gr *graphpass.Graph, forward, stray map[*graphpass.Node]bool) map[*graphpass.Node]bool {
	training := false
	for _, n := range gr.Nodes {
		if !forward[n] {
			training = true
			break
		}
	}
	var isData func(n *graphpass.Node) bool
	isData = func(n *graphpass.Node) bool {
		switch n.Info.Kind {
		case ops.Constant:
			return true
		case ops.Input:
			return !training || n.G.Deriv() == nil
		case ops.Reshape, ops.Repeat:
			return isData(n.Inputs[0])
		}
		return false
	}
	out := map[*graphpass.Node]bool{}
	seen := map[*graphpass.Node]bool{}
	var walk func(n *graphpass.Node)
	walk = func(n *graphpass.Node) {
		if seen[n] || n.Info.Kind == ops.Input || n.Info.Kind == ops.Constant {
			return
		}
		seen[n] = true
		k := n.Info.Kind
		switch {
		case len(n.Info.Shape) == 0, k == ops.Reduce, n.Info.LossLike(), k == ops.Reshape, k == ops.Repeat:
			for _, in := range n.Inputs {
				walk(in)
			}
		case k == ops.Binary && len(n.Inputs) == 2 && isData(n.Inputs[1]):
			walk(n.Inputs[0])
		case k == ops.Binary && len(n.Inputs) == 2 && isData(n.Inputs[0]):
			walk(n.Inputs[1])
		default:
			out[n] = true
		}
	}
	for _, n := range gr.Nodes {
		if len(n.Info.Shape) == 0 && forward[n] && !stray[n] {
			walk(n)
		}
	}
	return out
}

// checkReadable: the set and the list agree, and hold imported nodes only.
func checkReadable(c *compilation) error {
	if len(c.isRead) != len(c.readable) {
		return fmt.Errorf("%d readable nodes listed, %d in the set", len(c.readable), len(c.isRead))
	}
	for _, n := range c.readable {
		if !c.isRead[n.G] || c.gr.Lookup(n.G) != n {
			return fmt.Errorf("readable node %v is not in the imported graph", n)
		}
	}
	return nil
}

func dumpReadable(c *compilation) string {
	var sb textBuf
	sb.f("%d of %d nodes readable after a run\n", len(c.readable), len(c.gr.Nodes))
	for _, n := range c.readable {
		sb.f("  %s\n", n.G.Name())
	}
	return sb.String()
}

// textBuf builds a dump's text.
type textBuf struct{ strings.Builder }

func (b *textBuf) f(format string, args ...any) { fmt.Fprintf(&b.Builder, format, args...) }
