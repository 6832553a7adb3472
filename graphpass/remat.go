package graphpass

import (
	"slices"

	"github.com/tilefuse/tilefuse/ops"
)

// maxRecompute bounds the ops a group recomputes of another group's values
// (rematerialise): at most this many elementwise or injective nodes for
// the values it reads from one group (GELU's tanh and 1 + tanh from the
// pre-activation: 6).
const maxRecompute = 8

// rematerialise leaves cheap values to the groups that read them. An extra
// output x of a group P (a value P computes anyway, written out only
// because later groups read it, not one the caller reads: WriteOut) whose
// computation from what P reads or writes otherwise is elementwise or
// injective (no reduction, no product, at most maxRecompute ops) is
// computed again by each group that reads it (Group.Recompute) where
// that moves fewer bytes: P no longer writes x, and its readers read x's
// sources instead, which they often read anyway. The sources are P's
// inputs, P's other outputs, and where x is computed from a product or a
// reduction of P's that is not an output, that value, which P then
// writes instead (promote). GELU in a training graph: the backward's
// product recomputes tanh(c·(z + 0.044715·z³)) and 1 + tanh from the
// pre-activation z, which it reads anyway, instead of reading both from
// the forward's kernel (the BERT layer: 2 × 50 MB fewer written and read).
//
// Only kinds with remat set take part, as producers and as readers; a
// reader that multiplies x in its product reads it (a product's operands
// are loaded tile by tile), and so does a node left to Gorgonia: then x
// stays an output. The readers' values are the same ops on the same values,
// computed again.
func rematerialise(groups []*Group, writeOut func(*Node) bool, maxGroup int, t Target) {
	readers := map[*Node][]*Group{} // the groups whose kernels read each value
	for _, grp := range groups {
		for _, in := range groupInputs(grp) {
			readers[in] = append(readers[in], grp)
		}
	}
	for _, p := range groups {
		if !groupKinds[p.Kind].remat || len(p.Extra) == 0 {
			continue
		}
		var cands []*Node
		for _, x := range p.Extra {
			if leavable(x, p, readers[x], writeOut) {
				cands = append(cands, x)
			}
		}
		if len(cands) == 0 {
			continue
		}
		// all together (their common source may be a value P must write
		// instead of them), else one at a time
		if len(cands) > 1 && tryRemat(p, cands, readers, maxGroup, t) {
			continue
		}
		for _, x := range cands {
			tryRemat(p, []*Node{x}, readers, maxGroup, t)
		}
	}
}

// leavable reports whether x, an extra output of p, may be left to its
// readers to compute: not one the caller reads, elementwise or injective,
// and read only by groups that can compute it, none of which multiplies it
// in its product.
func leavable(x *Node, p *Group, readers []*Group, writeOut func(*Node) bool) bool {
	if x.Internal() || writeOut(x) || !cheap(x) || len(readers) == 0 {
		return false
	}
	for _, c := range readers {
		if !groupKinds[c.Kind].remat || c == p {
			return false
		}
	}
	for _, u := range x.Users {
		switch {
		case u.Info.Kind == ops.Constant || u.dead || u.Group == p:
		case u.Group == nil || u.Info.Kind.Product():
			return false // left to Gorgonia, or a product's operand
		}
	}
	return !compared(x, p, map[*Node]bool{})
}

// compared reports whether a comparison in a group other than p depends on
// x through that group's members: recomputed there, x could come out an ulp
// from the value a comparison is meant to find equal (a max's gradient
// compares the values with their maximum, computed by another kernel from
// x as p wrote it; GPU fuzz, 2026-12-01), so such a value is not left.
func compared(x *Node, p *Group, seen map[*Node]bool) bool {
	for _, u := range x.Users {
		if u.Group == nil || u.Group == p || seen[u] {
			continue
		}
		seen[u] = true
		if u.Info.Cmp || compared(u, p, seen) {
			return true
		}
	}
	return false
}

// cheap reports whether n is computed by the catalogue from its operands
// at its own index: elementwise or injective.
func cheap(n *Node) bool {
	return n.Info.Kind.Writable() && n.Info.Kind != ops.Constant
}

// tryRemat leaves xs, extra outputs of p, to their readers where that
// moves fewer bytes (each kernel's inputs read once, its outputs written
// once), and reports whether it did; otherwise it changes nothing.
func tryRemat(p *Group, xs []*Node, readers map[*Node][]*Group, maxGroup int, t Target) bool {
	leave := map[*Node]bool{}
	var cs []*Group // the readers, each once
	for _, x := range xs {
		leave[x] = true
		for _, c := range readers[x] {
			if !slices.Contains(cs, c) {
				cs = append(cs, c)
			}
		}
	}
	kept := map[*Node]bool{p.Root: true}
	for _, x := range p.Extra {
		kept[x] = !leave[x]
	}
	// each reader's recomputed nodes: from the values it read of xs back
	// to P's inputs and kept outputs; a member that is no such value and
	// not cheap is promoted to an output
	promote := map[*Node]bool{}
	add := map[*Group][]*Node{}
	for _, c := range cs {
		in := map[*Node]bool{}
		for _, n := range groupInputs(c) {
			in[n] = true
		}
		var nodes []*Node
		seen := map[*Node]bool{} // and what c computes again already
		for _, n := range c.Recompute {
			seen[n] = true
		}
		var walk func(n *Node) bool
		walk = func(n *Node) bool {
			switch {
			case seen[n] || n.Info.Kind == ops.Constant:
				return true // computed by c already, or a constant
			case n.Group != p && slices.Contains(p.Recompute, n):
				// P computes it again from what it reads (its group
				// left it to P): no kernel writes it, so c computes it
				// again too (FuzzFusion, 2026-12-03)
			case n.Group != p || kept[n] || promote[n]:
				return true // read: an input or output of P
			case !cheap(n):
				if !promotable(n, p, t) {
					return false
				}
				promote[n] = true
				return true
			}
			seen[n] = true
			nodes = append(nodes, n)
			for _, o := range n.Inputs {
				if !walk(o) {
					return false
				}
			}
			return true
		}
		for _, x := range xs {
			if in[x] && !walk(x) {
				return false
			}
		}
		if len(nodes) > maxRecompute || len(c.Members)+len(c.Recompute)+len(nodes) > maxGroup {
			return false
		}
		add[c] = nodes
	}
	groups := append([]*Group{p}, cs...)
	before := traffic(groups)
	extra, recompute := p.Extra, map[*Group][]*Node{}
	p.Extra = slices.DeleteFunc(slices.Clone(p.Extra), func(x *Node) bool { return leave[x] })
	for n := range promote {
		p.Extra = append(p.Extra, n)
	}
	for _, c := range cs {
		recompute[c] = c.Recompute
		c.Recompute = append(slices.Clone(c.Recompute), add[c]...)
		slices.SortFunc(c.Recompute, func(a, b *Node) int { return a.index - b.index })
	}
	if traffic(groups) < before && (len(promote) == 0 || takesExtras(p, t)) {
		for _, c := range cs { // what the readers read now
			for _, n := range groupInputs(c) {
				if !slices.Contains(readers[n], c) {
					readers[n] = append(readers[n], c)
				}
			}
		}
		for _, x := range xs {
			readers[x] = nil
		}
		return true
	}
	p.Extra = extra
	for _, c := range cs {
		c.Recompute = recompute[c]
	}
	return false
}

// promotable reports whether p can write its member n as an extra output:
// over p's shape, in its root's dtype.
func promotable(n *Node, p *Group, t Target) bool {
	k := n.Info.Kind
	return (k.Writable() || n == p.MatMul) && sameShape(n.Info.Shape, p.Full) && sameShape(p.Full, p.Root.Info.Shape) &&
		n.Info.DType == p.Root.Info.DType && takesExtras(p, t)
}

// traffic is the bytes the kernels of groups move: each one's inputs read
// once and its outputs written once.
func traffic(groups []*Group) int64 {
	var n int64
	for _, grp := range groups {
		for _, in := range groupInputs(grp) {
			n += nodeBytes(in)
		}
		for _, x := range append([]*Node{grp.Root}, grp.Extra...) {
			n += nodeBytes(x)
		}
	}
	return n
}

// nodeBytes is the size of n's value.
func nodeBytes(n *Node) int64 {
	return int64(numel(n.Info.Shape) * max(1, n.Info.DType.Size()))
}
