package graphpass

import (
	"slices"

	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
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
// On a CPU, an elementwise group whose every output, its root included,
// can be left so and is exact (moves, comparisons, ReLU: exactOp) is
// dissolved: its readers compute all it wrote, and it is no kernel
// (Node.Recomputed; the groups returned leave it out). Exact: what a
// reader computes again is bit for bit what the group would have written,
// and cheap where a reader computes it once for each window that reads it
// (a tanh would be four times over in a 2×2 max pool's backward). A
// convolution's ReLU after the transpose to NCHW, ReLU(Aᵀ(conv)), read by
// a max pool and by the pool's backward: each reads the convolution's
// output (NHWC) through the transpose instead of a copy in NCHW, and the
// backward's window reads, lanes along the channels, become contiguous.
// Not on a GPU yet: there a reader that computes a transpose again reads
// its operand's lanes uncoalesced (a max pool's lanes along the columns
// of an NHWC image, 64 floats apart), which the transpose's own kernel
// does not; unmeasured.
//
// Only kinds with remat set take part, as producers and as readers; a
// reader that multiplies x in its product reads it (a product's operands
// are loaded tile by tile), and so does a node left to Gorgonia: then x
// stays an output. The readers' values are the same ops on the same values,
// computed again.
func rematerialise(groups []*Group, writeOut func(*Node) bool, maxGroup int, t Target) []*Group {
	readers := groupReaders(groups)
	for _, p := range groups {
		if !groupKinds[p.Kind].remat {
			continue
		}
		var cands []*Node
		for _, x := range p.Extra {
			if leavable(x, p, readers[x], writeOut) {
				cands = append(cands, x)
			}
		}
		if all := append(slices.Clone(cands), p.Root); !t.GPU() && p.Kind == ElementwiseGroup && p.MatMul == nil && len(cands) == len(p.Extra) &&
			leavable(p.Root, p, readers[p.Root], writeOut) && !slices.ContainsFunc(all, func(x *Node) bool { return !exact(x, p) }) &&
			tryRemat(p, all, readers, maxGroup, t) {
			continue // dissolved
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
	return slices.DeleteFunc(groups, func(g *Group) bool { return g.dissolved })
}

// groupReaders maps each value to the groups whose kernels read it.
func groupReaders(groups []*Group) map[*Node][]*Group {
	readers := map[*Node][]*Group{}
	for _, grp := range groups {
		for _, in := range groupInputs(grp) {
			readers[in] = append(readers[in], grp)
		}
	}
	return readers
}

// leavable reports whether x, an output of p, may be left to its readers
// to compute: not one the caller reads, elementwise or injective, and read
// only by groups that can compute it, none of which multiplies it in its
// product.
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
		case u.Info.Kind == ops.Constant || u.dead || u.Group == p || u.recomputed:
			// a recomputed user is computed by x's readers, which read x
		case u.Group == nil || u.Info.Kind.Product():
			return false // left to Gorgonia, or a product's operand
		}
	}
	return !compared(x, p, map[*Node]bool{}) || exact(x, p)
}

// compared reports whether a comparison in a group other than p depends on
// x through that group's members: recomputed there, x could come out an ulp
// from the value a comparison is meant to find equal (a max's gradient
// compares the values with their maximum, computed by another kernel from
// x as p wrote it; GPU fuzz, 2026-12-01), so such a value is not left
// unless it is computed exactly (exact).
func compared(x *Node, p *Group, seen map[*Node]bool) bool {
	for _, u := range x.Users {
		if u.Group == nil && !u.recomputed || u.Group == p || seen[u] {
			continue
		}
		seen[u] = true
		if u.Info.Cmp || compared(u, p, seen) {
			return true
		}
	}
	return false
}

// exact reports whether p computes x from what it reads by ops whose
// results are exact (exactOp): computed again anywhere, on any backend, x
// comes out bit for bit as p would write it, so a comparison may read it.
func exact(x *Node, p *Group) bool {
	seen := map[*Node]bool{}
	var walk func(n *Node) bool
	walk = func(n *Node) bool {
		switch {
		case seen[n] || n.Info.Kind == ops.Constant:
			return true
		case n.Group != p && !slices.Contains(p.Recompute, n):
			return true // read as its own kernel wrote it
		case !exactOp(n):
			return false
		}
		seen[n] = true
		for _, o := range n.Inputs {
			if !walk(o) {
				return false
			}
		}
		return true
	}
	return walk(x)
}

// exactOp reports whether n's value is one of its operands' elements, a
// zero, or a comparison's 0 or 1, whatever the backend: moves (reshapes,
// repeats, slices, concatenations, transposes, im2col), a max pool, a
// comparison, max and min, negation and absolute value, and a product with
// a comparison (x·(x ≥ 0): ReLU as Gorgonia writes it; x·1 and x·0 are
// exact, and so is any sum they are contracted into).
func exactOp(n *Node) bool {
	in := n.Info
	switch in.Kind {
	case ops.Reshape, ops.Repeat, ops.Slice, ops.Concat, ops.Transpose, ops.Im2Col, ops.MaxPool:
		return true
	case ops.Binary:
		switch in.Binary {
		case tile.OpMax, tile.OpMin:
			return true
		case tile.OpMul:
			return isComparison(n.Inputs[0]) || isComparison(n.Inputs[1])
		}
		return in.Cmp
	case ops.Unary:
		return in.Name == "neg" || in.Name == "abs"
	}
	return false
}

// isComparison reports whether n is a comparison (1 or 0 in its dtype).
func isComparison(n *Node) bool { return n.Info.Kind == ops.Binary && n.Info.Cmp }

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
	dissolve := leave[p.Root] // P would write nothing: no kernel
	kept := map[*Node]bool{p.Root: !dissolve}
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
			case n.Group != p && (slices.Contains(p.Recompute, n) || n.recomputed):
				// P computes it again from what it reads (its group
				// left it to P, or was dissolved): no kernel writes it,
				// so c computes it again too (FuzzFusion, 2026-12-03)
			case n.Group != p || kept[n] || promote[n]:
				return true // read: an input or output of P
			case n.Info.Kind.Window():
				// a window op reads a window an element, and its readers
				// may read it over windows again (a max pool recomputed
				// by the next layer's im2col: 36 loads an element for 9);
				// as a window op joins no other's kernel, none is
				// computed again in one
				return false
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
	if dissolve && len(promote) > 0 {
		return false // P would write the promoted values: not dissolved
	}
	groups := append([]*Group{p}, cs...)
	before := traffic(groups)
	p.dissolved = dissolve
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
		if dissolve { // P reads nothing now, and its members are no kernel's
			for _, in := range groupInputs(p) {
				readers[in] = slices.DeleteFunc(readers[in], func(g *Group) bool { return g == p })
			}
			for _, m := range p.Members {
				m.Group, m.recomputed = nil, true
			}
		}
		return true
	}
	p.dissolved = false
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
// once and its outputs written once (a dissolved group none).
func traffic(groups []*Group) int64 {
	var n int64
	for _, grp := range groups {
		if grp.dissolved {
			continue
		}
		for _, in := range groupInputs(grp) {
			n += nodeBytes(in)
		}
		for _, x := range grp.outputs() {
			n += nodeBytes(x)
		}
	}
	return n
}

// nodeBytes is the size of n's value.
func nodeBytes(n *Node) int64 {
	return int64(numel(n.Info.Shape) * max(1, n.Info.DType.Size()))
}
