package fusion

import (
	"fmt"
	"hash/fnv"
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
//   - it is a prediction: what a loss is computed from (below),
//   - it leaves a recurrent step (below): the h and c of each step of an
//     unrolled RNN, the last step's included, which the user carries into
//     the next batch (their gradients are not readable by this rule), or
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
// feed the loss, h and c.
//
// A recurrent step is found by its shared weight: the same product with the
// same weight (h·U) once per step, each depending on the one before
// (statesOf). What one step computes and a later step reads (h_t, c_t) is
// readable, and so is what the last step computes as the earlier steps
// computed their states (h_T and c_T, though only the output's product
// reads them). A recurrence written otherwise (no shared weight, or the
// weight a different node each step) is not seen: the report lists its
// nodes without a value, and WithKeep keeps them.
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
	for i, n := range c.cfg.keep {
		if n == nil {
			return fmt.Errorf("fusion: WithKeep: node %d of %d is nil", i+1, len(c.cfg.keep))
		}
		if c.gr.Lookup(n) == nil {
			return fmt.Errorf("fusion: WithKeep: node %v is not in the graph being compiled (a node of another graph?)", n.Name())
		}
	}
	keep := c.keptByUser()
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
	states := statesOf(c.gr, c.forward)
	base := map[*G.Node]bool{} // by the rules but the gradients'
	for _, n := range c.gr.Nodes {
		g := n.G
		scalar := g.IsScalar() && !stray[n]
		root := len(n.Users) == 0 && !n.FoldedAway() && !stray[n] && (c.forward[n] || len(gradOf[g]) > 0 || scalar)
		base[g] = c.cfg.readAll || root || keep[g] || scalar || !strings.Contains(g.Name(), "(%") || predictions[n]
	}
	c.isRead = map[*G.Node]bool{}
	for _, n := range c.gr.Nodes {
		if n.Info.Kind == ops.Input || isConst(n.G) {
			continue
		}
		read := base[n.G] || states[n]
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
		if len(n.Users) == 0 && !n.FoldedAway() || len(n.Info.Shape) == 0 && training || !training {
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

// statesOf are the values that leave a recurrent step (see above). A
// recurrence is a chain of uses u_1 … u_T (T ≥ 2) of one input (a shared
// weight) by the same product (MatMul, batched or not, the same
// transposes) at the same operand position with the same shape, each
// depending on the one before (h·U of an unrolled RNN; not x_t·W, whose
// uses are independent). Products only: they are few, so that finding
// chains stays linear in practice (a pass over the graph per candidate).
// Chains of one length that run in step with each other (an LSTM's four
// gates' h·U_i, h·U_f, …) are one recurrence. A node's step is the latest use it depends on (0: none).
// The values that leave step t < T are the nodes of step t that a node of
// a later step reads (directly, or through a Concat or reshape: the
// [x_{t+1}, h_t] of a product) and that a later use depends on (h_t, c_t);
// those of
// the last step are its nodes that compute what one of step T−1's leaving
// values computes, by their signatures: op, shape and operands, an operand
// outside the step counting by its shape alone, but an input the steps
// share (a weight) by itself (h_T, c_T, though they feed only the
// output's product).
func statesOf(gr *graphpass.Graph, forward map[*graphpass.Node]bool) map[*graphpass.Node]bool {
	type useKey struct {
		in    *graphpass.Node
		op    string
		pos   int
		shape string
	}
	uses := map[useKey][]*graphpass.Node{}
	var keys []useKey
	for _, n := range gr.Nodes { // operands first: uses in the order they run
		if k := n.Info.Kind; !forward[n] || k != ops.MatMul && k != ops.BatchedMatMul {
			continue
		}
		for pos, in := range n.Inputs {
			if in.Info.Kind != ops.Input || !forward[in] {
				continue
			}
			k := useKey{in, n.G.Op().String(), pos, fmt.Sprint(n.Info.Shape)}
			if len(uses[k]) == 0 {
				keys = append(keys, k)
			}
			uses[k] = append(uses[k], n)
		}
	}
	// steps numbers the forward nodes by the latest use of chains they
	// depend on; ok: every use's operands depend on the use before it
	// (and on no later one) in every chain
	steps := func(chains [][]*graphpass.Node) (step map[*graphpass.Node]int, useOf map[*graphpass.Node]int, ok bool) {
		useOf = map[*graphpass.Node]int{}
		for _, us := range chains {
			for t, u := range us {
				if useOf[u] != 0 && useOf[u] != t+1 {
					return nil, nil, false
				}
				useOf[u] = t + 1
			}
		}
		step = map[*graphpass.Node]int{}
		for _, n := range gr.Nodes {
			if !forward[n] {
				continue
			}
			s := 0
			for _, in := range n.Inputs {
				s = max(s, step[in])
			}
			if t := useOf[n]; t > 0 {
				if s != t-1 {
					return nil, nil, false
				}
				s = t
			}
			step[n] = s
		}
		return step, useOf, true
	}
	// recurrences: chains, those in step with each other together
	var recs [][][]*graphpass.Node
	for _, k := range keys {
		us := uses[k]
		if len(us) < 2 {
			continue
		}
		if _, _, ok := steps([][]*graphpass.Node{us}); !ok {
			continue
		}
		joined := false
		for i, r := range recs {
			if len(r[0]) != len(us) {
				continue
			}
			if _, _, ok := steps(append(slices.Clone(r), us)); ok {
				recs[i], joined = append(r, us), true
				break
			}
		}
		if !joined {
			recs = append(recs, [][]*graphpass.Node{us})
		}
	}
	out := map[*graphpass.Node]bool{}
	for _, r := range recs {
		step, useOf, _ := steps(r)
		T := len(r[0])
		// later: the latest use that depends on the node
		later := map[*graphpass.Node]int{}
		for i := len(gr.Nodes) - 1; i >= 0; i-- {
			n := gr.Nodes[i]
			l := useOf[n]
			for _, u := range n.Users {
				l = max(l, later[u])
			}
			later[n] = l
		}
		// readLater: a node of a step after s reads n, directly or through
		// data movement (a Concat [x_{t+1}, h_t] or a reshape before the
		// next step's product)
		var readLater func(n *graphpass.Node, s int) bool
		readLater = func(n *graphpass.Node, s int) bool {
			for _, u := range n.Users {
				if !forward[u] {
					continue
				}
				if step[u] > s || (u.Info.Kind == ops.Concat || u.Info.Kind == ops.Reshape) && readLater(u, s) {
					return true
				}
			}
			return false
		}
		var leaving []*graphpass.Node
		for _, n := range gr.Nodes {
			s := step[n]
			if s < 1 || s >= T || later[n] <= s || n.Info.Kind == ops.Input || n.Info.Kind == ops.Concat {
				continue // a Concat assembles the next product's operand from the state
			}
			if readLater(n, s) {
				leaving = append(leaving, n)
				out[n] = true
			}
		}
		// the last step's, by signature
		shared := map[*graphpass.Node]bool{} // inputs read in more than one step
		for _, n := range gr.Nodes {
			if n.Info.Kind != ops.Input {
				continue
			}
			first := 0
			for _, u := range n.Users {
				if s := step[u]; forward[u] && s > 0 {
					shared[n] = shared[n] || first > 0 && s != first
					first = s
				}
			}
		}
		sig := map[*graphpass.Node]uint64{}
		var sigOf func(n *graphpass.Node, s int) string
		sigOf = func(n *graphpass.Node, s int) string {
			switch {
			case shared[n]:
				return fmt.Sprintf("shared %p", n)
			case step[n] != s || n.Info.Kind == ops.Input:
				return fmt.Sprintf("outside %v", n.Info.Shape)
			case useOf[n] > 0:
				return "use"
			}
			if v, ok := sig[n]; ok {
				return fmt.Sprintf("%x", v)
			}
			h := fnv.New64a()
			fmt.Fprintf(h, "%v %v", n.G.Op(), n.Info.Shape)
			for _, in := range n.Inputs {
				fmt.Fprintf(h, " (%s)", sigOf(in, s))
			}
			sig[n] = h.Sum64()
			return fmt.Sprintf("%x", sig[n])
		}
		want := map[string]bool{}
		for _, n := range leaving {
			if step[n] == T-1 {
				want[sigOf(n, T-1)] = true
			}
		}
		for _, n := range gr.Nodes {
			if step[n] == T && forward[n] && n.Info.Kind != ops.Input && want[sigOf(n, T)] {
				out[n] = true
			}
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
