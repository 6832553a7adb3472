package fusion

import (
	"fmt"
	"slices"
	"sort"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/ops"
)

// rewritten is the graph the rewrite stage replays.
type rewritten struct {
	graph *G.ExprGraph
	// new maps each original node that has a value in the new graph to its
	// node there: inputs, nodes left as they are, and the outputs of groups.
	new map[*G.Node]*G.Node
	// internal maps the values graphpass added (an attention kernel's
	// log-sum-exp) to their nodes in the new graph.
	internal map[*graphpass.Node]*G.Node
	// inputs are the original graph's input nodes, and their new nodes.
	inputs []binding
	// order is every node of the new graph, operands first, in the order
	// they were made: the backends run it in this order and sort nothing.
	order []*G.Node
}

// rewrite is the rewrite stage: it replays the imported graph into a new
// one, each group one FusedOp node (with a PartOp node for each output of
// a group that has several), a group that reads only constants folded into
// a constant by running its kernel now, every other node applied again with
// its own op (guarded, so that a panic in it becomes an error). Nodes inside
// groups have no counterpart.
func rewrite(c *compilation) error {
	g2 := G.NewGraph()
	rw := &rewritten{graph: g2, new: map[*G.Node]*G.Node{}, internal: map[*graphpass.Node]*G.Node{}}
	made := map[*G.Node]bool{}
	add := func(nn *G.Node) *G.Node { // ApplyOp hash-conses: a node may come back
		if !made[nn] {
			made[nn] = true
			rw.order = append(rw.order, nn)
		}
		return nn
	}
	units := c.units // on a cache hit, the entry's
	if units == nil {
		var err error
		if units, err = unitOrder(c.gr, c.groups); err != nil {
			return err
		}
		c.units = units
	}
	for _, n := range units {
		on := c.node(n)
		switch {
		case n.Info.Kind == ops.Input:
			var nn *G.Node
			if on.IsScalar() {
				nn = G.NewScalar(g2, on.Dtype(), G.WithName(on.Name()))
			} else {
				nn = G.NewTensor(g2, on.Dtype(), on.Shape().Dims(), G.WithShape(on.Shape().Clone()...), G.WithName(on.Name()))
			}
			rw.new[on] = add(nn)
			rw.inputs = append(rw.inputs, binding{on, nn})
		case n.Group != nil && n == n.Group.Root: // the group's root stands for the group
			grp := n.Group
			op, err := newFusedOp(grp, c.kernels[grp], c.prepared[grp])
			if err != nil {
				return err
			}
			var nn *G.Node
			folded := len(grp.Inputs) == 0
			if folded { // constants only: evaluate it once, now
				v, err := op.Do()
				if err != nil {
					return fmt.Errorf("folding %v: %w", grp, err)
				}
				nn = G.NewConstant(v, G.WithName(n.String()), G.In(g2))
			} else {
				args, err := rw.values(c, grp.Inputs, grp)
				if err != nil {
					return err
				}
				if nn, err = applyIn(op, args); err != nil {
					return fmt.Errorf("%v: %w", grp, err)
				}
			}
			if !folded {
				add(nn)
			}
			set := func(o *graphpass.Node, v *G.Node) {
				if o.Internal() {
					rw.internal[o] = v
				} else {
					rw.new[c.node(o)] = v
				}
			}
			if grp.Stack != nil { // the whole value, which other kernels index into
				rw.internal[grp.Stack] = nn
			}
			if len(grp.Extra) == 0 {
				set(grp.Root, nn)
				break
			}
			for i, o := range append([]*graphpass.Node{grp.Root}, grp.Extra...) {
				pop, err := newPartOp(grp, c.kernels[grp], i)
				if err != nil {
					return err
				}
				if folded { // each output its own constant, cut from the value now
					v, err := pop.Do(nn.Value())
					if err != nil {
						return fmt.Errorf("folding %v: output %d: %w", grp, i, err)
					}
					set(o, G.NewConstant(v, G.WithName(o.String()), G.In(g2)))
					continue
				}
				pn, err := applyIn(pop, []*G.Node{nn})
				if err != nil {
					return fmt.Errorf("%v: output %d: %w", grp, i, err)
				}
				set(o, add(pn))
			}
		case n.Info.Kind == ops.Constant && !isConst(on):
			// SizeOf: its value is known from the shape; as a constant it
			// needs no operand (which may live inside a kernel now)
			var v any = n.Info.Value
			if on.Dtype() == tensor.Float32 {
				v = float32(n.Info.Value)
			}
			rw.new[on] = G.NewConstant(v, G.WithName(on.Name()), G.In(g2))
		case isConst(on):
			rw.new[on] = G.NewConstant(on.Value(), G.WithName(on.Name()), G.In(g2))
		default:
			args, err := rw.values(c, n.Inputs, n)
			if err != nil {
				return err
			}
			nn, err := applyIn(guard(on.Op(), on.Shape()), args)
			if err != nil {
				return fmt.Errorf("replaying %v: %w", n, err)
			}
			rw.new[on] = add(nn)
		}
	}
	// A constant joins the graph as a clone of its node when an op first
	// reads it (ExprGraph.AddNode), and not at all if none does: the clones
	// read nothing and go first; rw.new keeps the node NewConstant made,
	// which holds the same value.
	var consts []*G.Node
	for _, n := range g2.AllNodes() {
		if !made[n] {
			consts = append(consts, n)
		}
	}
	rw.order = append(consts, rw.order...)
	c.rw = rw
	for _, n := range c.readable {
		if nn := rw.new[c.node(n)]; nn != nil {
			c.back = append(c.back, binding{c.node(n), nn})
		}
	}
	return nil
}

// checkRewrite: the order lists every node of the new graph once, operands
// first; every readable node has a value in the new graph.
func checkRewrite(c *compilation) error {
	rw := c.rw
	at := make(map[*G.Node]int, len(rw.order))
	for i, n := range rw.order {
		if _, dup := at[n]; dup {
			return fmt.Errorf("node %v listed twice", n.Name())
		}
		at[n] = i
	}
	all := rw.graph.AllNodes()
	if len(all) != len(rw.order) {
		return fmt.Errorf("the new graph has %d nodes, the order %d", len(all), len(rw.order))
	}
	for _, n := range all {
		if _, ok := at[n]; !ok {
			return fmt.Errorf("node %v of the new graph is not in the order", n.Name())
		}
	}
	for i, n := range rw.order {
		for _, a := range operands(rw.graph, n) {
			if j, ok := at[a]; !ok || j >= i {
				return fmt.Errorf("%v reads %v, which does not come before it", n.Name(), a.Name())
			}
		}
	}
	if len(c.back) != len(c.readable) {
		for _, n := range c.readable {
			if rw.new[c.node(n)] == nil {
				return fmt.Errorf("%v, which the user reads, has no value in the new graph", n)
			}
		}
	}
	return nil
}

func dumpRewrite(c *compilation) string {
	var sb textBuf
	for i, n := range c.rw.order {
		sb.f("%4d %-40s %v", i, n.Name(), n.Op())
		var args []string
		for _, a := range operands(c.rw.graph, n) {
			args = append(args, a.Name())
		}
		if len(args) > 0 {
			sb.f(" ← %v", args)
		}
		sb.f("\n")
	}
	return sb.String()
}

// values are the new graph's nodes for operands of user (a group or a node).
func (rw *rewritten) values(c *compilation, operands []*graphpass.Node, user fmt.Stringer) ([]*G.Node, error) {
	args := make([]*G.Node, len(operands))
	for i, in := range operands {
		if in.Internal() {
			args[i] = rw.internal[in]
		} else {
			args[i] = rw.new[c.node(in)]
		}
		if args[i] == nil {
			return nil, fmt.Errorf("%v: operand %v has no value in the new graph", user, in)
		}
	}
	return args, nil
}

// unitOrder orders the units of the rewritten graph, each group (stood for
// by its root, which may be an internal value) and each node outside
// groups, so that each comes after every unit it reads from (a group reads
// its Inputs, a node its operands): an extra output may be read before its
// group's root in the original order. Ties keep the original order (a
// group's place is its last member's, or its last input's where it has no
// member).
func unitOrder(gr *graphpass.Graph, groups []*graphpass.Group) ([]*graphpass.Node, error) {
	unit := func(n *graphpass.Node) *graphpass.Node {
		if n.Group != nil {
			return n.Group.Root
		}
		return n
	}
	index := make(map[*graphpass.Node]int, len(gr.Nodes)+len(groups))
	for i, n := range gr.Nodes {
		index[n] = i
	}
	var all []*graphpass.Node
	reads := map[*graphpass.Node][]*graphpass.Node{}
	for _, n := range gr.Nodes {
		if n.Group != nil || n.Dead() || n.Recomputed() {
			continue // a group's unit is its root; what nothing reads is not computed; a dissolved group's member by its readers
		}
		all = append(all, n)
		if n.Info.Kind == ops.Constant {
			continue // SizeOf: replayed as a constant, it reads no operand
		}
		reads[n] = n.Inputs
	}
	for _, grp := range groups {
		at := -1
		for _, m := range grp.Members {
			at = max(at, index[m])
		}
		if at < 0 {
			for _, in := range grp.Inputs {
				at = max(at, index[unit(in)])
			}
		}
		index[grp.Root] = at
		all = append(all, grp.Root)
		reads[grp.Root] = grp.Inputs
	}
	// a group of no members (graphpass's transposed copies, a stack of
	// weights) computes a value for other groups only: its place is its
	// first reader's, so that the value lives no longer than it must and
	// its reader finds it in the L2 (ties go to the group, which its
	// reader depends on)
	for _, grp := range groups {
		if len(grp.Members) > 0 {
			continue
		}
		first := -1
		for _, r := range groups {
			if slices.Contains(r.Inputs, grp.Root) && (first < 0 || index[r.Root] < first) {
				first = index[r.Root]
			}
		}
		if first >= 0 {
			index[grp.Root] = first
		}
	}
	deps := map[*graphpass.Node]int{}
	users := map[*graphpass.Node][]*graphpass.Node{}
	edge := map[[2]*graphpass.Node]bool{}
	for _, u := range all {
		deps[u] += 0
		for _, in := range reads[u] {
			v := unit(in)
			if v == u || edge[[2]*graphpass.Node{v, u}] {
				continue
			}
			edge[[2]*graphpass.Node{v, u}] = true
			deps[u]++
			users[v] = append(users[v], u)
		}
	}
	var ready, order []*graphpass.Node
	for _, u := range all {
		if deps[u] == 0 {
			ready = append(ready, u)
		}
	}
	for len(ready) > 0 {
		sort.SliceStable(ready, func(i, j int) bool { return index[ready[i]] < index[ready[j]] })
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
		return nil, fmt.Errorf("the groups depend on each other in a cycle (%d of %d units ordered)", len(order), len(all))
	}
	return order, nil
}

// applyIn applies op to args in their graph (ApplyOp takes it from them).
func applyIn(op G.Op, args []*G.Node) (*G.Node, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("op %v without operands cannot be replayed", op)
	}
	return G.ApplyOp(op, args...)
}
