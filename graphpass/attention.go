package graphpass

import (
	"math"
	"slices"

	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// Attention is out = BatchedMatMul(SoftMax(f(BatchedMatMul(Q, K, false,
// true))), V) with f a chain of elementwise ops (a scale, an additive mask,
// a causal mask), written FlashAttention-2 style so that no S×S score
// matrix is ever in memory:
//
//   - attention (forward): a program holds a block of queries and streams
//     blocks of keys and values through an online softmax; one
//     normalisation at the end. In a training graph it also writes the
//     rows' log-sum-exp (an internal value, [batch, queries]).
//   - attention_dq (backward, training graphs): a program holds a block of
//     queries, recomputes the probabilities from the log-sum-exp block by
//     block, and writes dQ; it also writes D = rowsum(dO∘O), which
//     SoftmaxDiff's row sum is, and the row sums of any Σ over a score-space
//     value (Gorgonia's gradient of a constant scale).
//   - attention_dkv (backward): a program holds a block of keys and values,
//     streams the queries, and writes dK and dV (and, in program 0, the Σ
//     of those row sums). dQ has its own kernel rather than atomics: the
//     same bits run after run, and no zeroed buffer.
//
// The backward is recognised from what gorgonia.Grad writes for the
// pattern: dV = Pᵀ×dO, dP = dO×Vᵀ, SoftmaxDiff(x, P, dP), the chain of
// f's derivative down to dS, then dQ = dS×K and dK = dSᵀ×Q. Every node in
// between (scores, probabilities and their gradients, all S×S) stays
// inside the kernels; the extra memory is O(batch·queries).
var attentionKind = groupKind{
	name:  "attention",
	claim: findAttention,
	// in an inference graph, elementwise producers of the chain's operands
	// (a mask's, a scale's) join; a training pattern claims its own
	join: func(n *Node, grp *Group, t Target) (GroupKind, bool) {
		k := n.Info.Kind
		return AttentionGroup, grp.attn != nil && !grp.attn.training() && k.Elementwise() && !k.Injective()
	},
	anyShape: true,
	tune:     tuneAttention,
	space:    attentionSpace,
	emit:     emitAttention,
}

var attentionDQKind = groupKind{
	name:     "attention_dq",
	byClaim:  true,
	join:     func(*Node, *Group, Target) (GroupKind, bool) { return AttentionDQGroup, false },
	anyShape: true,
	tune:     tuneAttentionDQ,
	space:    attentionSpace,
	emit:     emitAttentionDQ,
}

var attentionDKVKind = groupKind{
	name:     "attention_dkv",
	byClaim:  true,
	join:     func(*Node, *Group, Target) (GroupKind, bool) { return AttentionDKVGroup, false },
	anyShape: true,
	tune:     tuneAttentionDKV,
	space:    attentionSpace,
	emit:     emitAttentionDKV,
}

// attention is one attention pattern: its nodes, and the groups it became.
type attention struct {
	qk, sm, pv *Node // the scores' product, the softmax, the output's product
	q, k, v    *Node
	// batch, queries, keys, the head dims of q/k and of v
	nb, sq, sk, hk, hv int
	// score are the score-space nodes (shape [nb, sq, sk]) computed in the
	// kernels: the forward's chain between qk and sm, and in training the
	// backward's; leaves are nodes of other shapes computed in the kernels
	// too (a mask's broadcast), read only by the pattern.
	score, leaves map[*Node]bool
	// scale: a Mul of qk by the constant scaleC first in the chain (the
	// forward folds it into Q's block)
	scale  *Node
	scaleC float64
	// causal: a constant lower-triangular mask (kept on and below the
	// diagonal, masked above), computed from indices; the forward and
	// backward skip the key blocks above the diagonal when masked is −∞
	causal, causalAt         *Node // the constant, and the score chain's operand computed from it
	causalKept, causalMasked float64

	// training graphs: dO, and the gradient nodes
	dO, dp, sd, ds *Node
	dq, dk, dv     *Node
	sums           []*Node // Σ over every element of a score-space value
	// internal values: the forward's log-sum-exp, D, the sums' row sums
	lse, delta   *Node
	rowSums      []*Node
	fwd, bq, bkv *Group
}

func (a *attention) training() bool { return a.dO != nil }

// skip reports whether in, an operand of a node a kernel computes, is
// computed from indices rather than read.
func (a *attention) skip(in *Node) bool { return in == a.causal }

// skipsBlocks reports whether the kernels skip key blocks above the
// diagonal: they contribute exactly nothing.
func (a *attention) skipsBlocks() bool {
	return a.causal != nil && math.IsInf(a.causalMasked, -1) && !math.IsInf(a.causalKept, -1)
}

// findAttention claims the attention patterns under Options.MatMul: an
// inference pattern (nobody outside reads an inner value) as one forward
// kernel; a training pattern (the backward that gorgonia.Grad wrote reads
// the probabilities) as a forward and two backward kernels. Other
// patterns stay as they are (batched products around a row softmax).
func findAttention(gr *Graph, writeOut func(*Node) bool, opt Options) []*Group {
	if !opt.MatMul {
		return nil
	}
	var pats []*attention
	byPV := map[*Node]*attention{}
	for _, pv := range gr.Nodes {
		a := matchForward(pv, writeOut)
		if a == nil || !a.inferenceOnly(writeOut) && !a.matchBackward(writeOut) {
			continue
		}
		pats = append(pats, a)
		byPV[pv] = a
	}
	// heads, where their projections and Concat make one pattern
	var groups []*Group
	merged := map[*attention]bool{}
	limit := opt.maxElements()
	for _, c := range gr.Nodes {
		if hs := matchHeads(c, byPV, writeOut); hs != nil {
			gs := hs.groups(writeOut)
			if !claimIndexable(gs, writeOut, limit) {
				unclaim(gs)
				continue
			}
			groups = append(groups, gs...)
			for _, a := range hs.pats {
				merged[a] = true
			}
		}
	}
	for _, a := range pats {
		var gs []*Group
		switch {
		case merged[a]:
			continue
		case a.training():
			gs = a.trainingGroups()
		default:
			gs = []*Group{a.inferenceGroup()}
		}
		if !claimIndexable(gs, writeOut, limit) {
			unclaim(gs)
			continue
		}
		groups = append(groups, gs...)
	}
	return groups
}

// claimIndexable reports whether the kernels of one claim (an attention
// pattern's groups, or the heads') touch no tensor in memory of more than
// limit elements (MaxElements): what their members read from outside the
// claim, what of theirs is read outside it or by the caller (writeOut),
// and the values its kernels make for each other (a log-sum-exp, the
// heads' stacks). Values inside the claim that no kernel stores, such as
// the scores of a long sequence's flash attention, do not count.
func claimIndexable(gs []*Group, writeOut func(*Node) bool, limit int) bool {
	in := map[*Node]bool{}
	for _, g := range gs {
		for _, m := range g.Members {
			in[m] = true
		}
	}
	big := func(n *Node) bool { return n != nil && numel(n.Info.Shape) > limit }
	for _, g := range gs {
		if big(g.Root) || big(g.Stack) {
			return false
		}
		for _, x := range slices.Concat(g.Extra, g.Reads) {
			if big(x) {
				return false
			}
		}
		for _, m := range g.Members {
			for _, x := range m.Inputs {
				if !in[x] && big(x) {
					return false
				}
			}
			if !big(m) {
				continue
			}
			if writeOut(m) {
				return false
			}
			for _, u := range users(m) {
				if !in[u] {
					return false
				}
			}
		}
	}
	return true
}

// unclaim undoes a claim's groups: their members belong to no group again
// (markOversized and the other kinds take them).
func unclaim(gs []*Group) {
	for _, g := range gs {
		for _, m := range g.Members {
			if m.Group == g {
				m.Group = nil
			}
		}
	}
}

// users are n's users that read its value (SizeOf reads only its shape;
// a dead node is not computed).
func users(n *Node) []*Node {
	var us []*Node
	for _, u := range n.Users {
		if u.Info.Kind != ops.Constant && !u.dead {
			us = append(us, u)
		}
	}
	return us
}

func isBMM(n *Node, ta, tb bool) bool {
	return n.Info.Kind == ops.BatchedMatMul && n.Info.TransA == ta && n.Info.TransB == tb && n.Group == nil
}

func isElementwiseOp(n *Node) bool { return n.Info.Kind == ops.Unary || n.Info.Kind == ops.Binary }

// matchForward finds the forward pattern rooted at pv (nil if there is none).
func matchForward(pv *Node, writeOut func(*Node) bool) *attention {
	if !isBMM(pv, false, false) {
		return nil
	}
	sm := pv.Inputs[0]
	if sm.Info.Kind != ops.Softmax || sm.Info.Log || sm.Group != nil || writeOut(sm) {
		return nil
	}
	a := &attention{sm: sm, pv: pv, v: pv.Inputs[1], score: map[*Node]bool{}, leaves: map[*Node]bool{}}
	ss := sm.Info.Shape
	ok := true
	seen := map[*Node]bool{}
	var walk func(n *Node)
	walk = func(n *Node) {
		if !ok || seen[n] {
			return
		}
		seen[n] = true
		switch {
		case isBMM(n, false, true) && a.qk == nil:
			a.qk = n
		case isElementwiseOp(n) && n.Group == nil:
			for _, in := range n.Inputs {
				switch in.Info.Kind {
				case ops.Unary, ops.Binary, ops.BatchedMatMul:
					if sameShape(in.Info.Shape, ss) {
						walk(in) // the score path, or a mask computed alike
					}
				}
				// graph inputs, constants and other ops' results (a mask,
				// a scale) are read from outside, or are leaves
			}
		case n.Info.Kind == ops.BatchedMatMul:
			// a product of the scores' shape that is not q·kᵀ: read
		default:
			ok = false
		}
	}
	walk(sm.Inputs[0])
	if !ok || a.qk == nil {
		return nil
	}
	// the score path is what lies between qk and the softmax; the other
	// nodes the walk saw compute a mask, and are leaves or read
	var mark func(n *Node)
	mark = func(n *Node) {
		a.score[n] = true
		for _, u := range n.Users {
			if seen[u] && !a.score[u] && u != a.qk {
				mark(u)
			}
		}
	}
	mark(a.qk)
	if !a.score[sm.Inputs[0]] {
		return nil
	}
	a.q, a.k = a.qk.Inputs[0], a.qk.Inputs[1]
	qs, ks, vs := a.q.Info.Shape, a.k.Info.Shape, a.v.Info.Shape
	if len(qs) != 3 || len(ks) != 3 || len(vs) != 3 || ks[0] != qs[0] || vs[0] != qs[0] || vs[1] != ks[1] || ks[2] != qs[2] {
		return nil
	}
	a.nb, a.sq, a.sk, a.hk, a.hv = qs[0], qs[1], ks[1], qs[2], vs[2]
	if a.hk < 1 || a.hv < 1 || a.sq < 1 || a.sk < 1 {
		return nil
	}
	a.score[sm] = true
	a.findScale()
	return a
}

// findScale finds a Mul of the scores by a constant, first in the chain.
func (a *attention) findScale() {
	for _, u := range users(a.qk) {
		if !a.score[u] || u.Info.Kind != ops.Binary || u.Info.Binary != tile.OpMul || len(u.Inputs) != 2 {
			continue
		}
		other := u.Inputs[1]
		if u.Inputs[1] == a.qk {
			other = u.Inputs[0]
		}
		if other.Info.Kind != ops.Constant || len(other.Info.Shape) != 0 {
			continue
		}
		alone := true // the forward chain reads qk only through the scale
		for _, w := range users(a.qk) {
			alone = alone && (w == u || !a.score[w])
		}
		if alone {
			a.scale, a.scaleC = u, other.Info.Value
		}
	}
}

// inside reports whether every user of every score-space node is in the
// pattern (or one of its outputs), and none is written out.
func (a *attention) closed(writeOut func(*Node) bool, outputs map[*Node]bool) bool {
	for n := range a.score {
		if writeOut(n) {
			return false
		}
		for _, u := range users(n) {
			if !a.score[u] && !outputs[u] {
				return false
			}
		}
	}
	return true
}

// inferenceOnly reports whether only the output reads the pattern's inner
// values; it then takes its leaves.
func (a *attention) inferenceOnly(writeOut func(*Node) bool) bool {
	if !a.closed(writeOut, map[*Node]bool{a.pv: true}) {
		return false
	}
	a.findLeaves(writeOut, map[*Node]bool{a.pv: true})
	return true
}

// findLeaves takes the leaf chains: elementwise or broadcasting nodes of
// other shapes that only the pattern reads (a mask's Reshape and Repeat),
// computed in the kernels rather than written out; and recognises a
// causal mask among the score chain's operands.
func (a *attention) findLeaves(writeOut func(*Node) bool, outputs map[*Node]bool) {
	in := func(n *Node) bool { return a.score[n] || a.leaves[n] || outputs[n] }
	for changed := true; changed; {
		changed = false
		for n := range union(a.score, a.leaves) {
			if n.Info.Kind.Product() {
				continue // its operands are read by blocks
			}
			for _, l := range n.Inputs {
				if in(l) || l.Group != nil || writeOut(l) || !l.Info.Kind.Writable() || l.Info.Kind == ops.Constant {
					continue
				}
				all := true
				for _, u := range users(l) {
					all = all && in(u)
				}
				if all {
					a.leaves[l], changed = true, true
				}
			}
		}
	}
	for n := range a.score {
		if n.Info.Kind != ops.Binary || n.Info.Binary != tile.OpAdd || a.causal != nil {
			continue
		}
		for _, l := range n.Inputs {
			if c, kept, masked, ok := a.causalLeaf(l); ok {
				a.causal, a.causalAt, a.causalKept, a.causalMasked = c, l, kept, masked
			}
		}
	}
}

func union(x, y map[*Node]bool) map[*Node]bool {
	u := make(map[*Node]bool, len(x)+len(y))
	for n := range x {
		u[n] = true
	}
	for n := range y {
		u[n] = true
	}
	return u
}

// causalLeaf reports whether n, an operand of a score-space Add, is a
// constant tensor whose element (…, i, j) is kept for j ≤ i and masked for
// j > i, reached through leaves that keep the last two coordinates (a
// Reshape adding leading dimensions, a Repeat along the batch).
func (a *attention) causalLeaf(n *Node) (c *Node, kept, masked float64, ok bool) {
	for a.leaves[n] {
		s := n.Info.Shape
		if len(s) < 2 || s[len(s)-2] != a.sq || s[len(s)-1] != a.sk || len(n.Inputs) == 0 {
			return nil, 0, 0, false
		}
		switch n.Info.Kind {
		case ops.Repeat:
			if ax := n.Info.Axes[0]; ax >= len(s)-2 {
				return nil, 0, 0, false
			}
		case ops.Reshape:
		default:
			return nil, 0, 0, false
		}
		n = n.Inputs[0]
	}
	s := n.Info.Shape
	if a.sq < 2 || a.sk < 2 || len(s) < 2 || s[len(s)-2] != a.sq || s[len(s)-1] != a.sk || n.G == nil || !ops.IsConst(n.G.Op()) {
		return nil, 0, 0, false
	}
	for _, u := range users(n) {
		if !a.score[u] && !a.leaves[u] {
			return nil, 0, 0, false // read elsewhere: it stays a value
		}
	}
	t, isDense := n.G.Value().(*tensor.Dense)
	if !isDense {
		return nil, 0, 0, false
	}
	var vals []float64
	switch d := t.Data().(type) {
	case []float32:
		for _, x := range d {
			vals = append(vals, float64(x))
		}
	case []float64:
		vals = d
	default:
		return nil, 0, 0, false
	}
	if len(vals) != numel(s) {
		return nil, 0, 0, false
	}
	kept, masked = vals[0], vals[1]
	same := func(x, y float64) bool { return x == y || math.IsNaN(x) && math.IsNaN(y) }
	for p := range vals {
		i, j := p/a.sk%a.sq, p%a.sk
		want := kept
		if j > i {
			want = masked
		}
		if !same(vals[p], want) {
			return nil, 0, 0, false
		}
	}
	if same(kept, masked) {
		return nil, 0, 0, false
	}
	return n, kept, masked, true
}

// inferenceGroup is the forward's one group.
func (a *attention) inferenceGroup() *Group {
	grp := &Group{Kind: AttentionGroup, Root: a.pv, Full: a.pv.Info.Shape, MatMul: a.qk, attn: a}
	for n := range union(a.score, a.leaves) {
		n.Group = grp
		grp.Members = append(grp.Members, n)
	}
	a.pv.Group = grp
	grp.Members = append(grp.Members, a.pv)
	a.fwd = grp
	return grp
}

// matchBackward finds the backward gorgonia.Grad wrote for the pattern
// (see attentionKind), and reports whether it is all there: dV, dP, the
// SoftmaxDiff, a chain of elementwise score-space ops down to dS, dQ and dK;
// other users of score-space values may only be sums over all of them.
func (a *attention) matchBackward(writeOut func(*Node) bool) bool {
	ss := a.sm.Info.Shape
	for _, u := range users(a.sm) {
		switch {
		case u == a.pv:
		case isBMM(u, true, false) && u.Inputs[0] == a.sm && a.dv == nil:
			a.dv, a.dO = u, u.Inputs[1]
		case u.Info.Kind == ops.SoftmaxGrad && !u.Info.Log && len(u.Inputs) == 3 && u.Inputs[0] == a.sm.Inputs[0] && u.Inputs[1] == a.sm && a.sd == nil && u.Group == nil:
			a.sd = u
		default:
			return false
		}
	}
	if a.dv == nil || a.sd == nil {
		return false
	}
	a.dp = a.sd.Inputs[2]
	if !isBMM(a.dp, false, true) || a.dp.Inputs[0] != a.dO || a.dp.Inputs[1] != a.v || !sameShape(a.dO.Info.Shape, a.pv.Info.Shape) {
		return false
	}
	// dQ = dS×K and dK = dSᵀ×Q, of one dS
	for _, u := range users(a.k) {
		if isBMM(u, false, false) && u.Inputs[1] == a.k && sameShape(u.Inputs[0].Info.Shape, ss) {
			a.dq, a.ds = u, u.Inputs[0]
		}
	}
	for _, u := range users(a.q) {
		if isBMM(u, true, false) && u.Inputs[1] == a.q && u.Inputs[0] == a.ds {
			a.dk = u
		}
	}
	if a.dq == nil || a.dk == nil || a.dq == a.dk {
		return false
	}
	// the score space: grow from the forward's nodes, dP and the SoftmaxDiff
	// through elementwise users of the score shape; sums over all of a
	// score-space value are outputs
	a.score[a.dp], a.score[a.sd] = true, true
	outputs := map[*Node]bool{a.pv: true, a.dq: true, a.dk: true, a.dv: true}
	work := slices.Collect(func(yield func(*Node) bool) {
		for n := range a.score {
			if !yield(n) {
				return
			}
		}
	})
	for len(work) > 0 {
		n := work[len(work)-1]
		work = work[:len(work)-1]
		for _, u := range users(n) {
			switch {
			case a.score[u] || outputs[u]:
			case u.Group != nil:
				return false
			case isElementwiseOp(u) && sameShape(u.Info.Shape, ss):
				a.score[u] = true
				work = append(work, u)
			case u.Info.Kind == ops.Reduce && u.Info.Reduce == tile.OpReduceSum && len(u.Info.Shape) == 0 && len(u.Info.Axes) == len(ss) && len(u.Inputs) == 1:
				outputs[u] = true
				a.sums = append(a.sums, u)
			default:
				return false
			}
		}
	}
	if !a.score[a.ds] || !a.closed(writeOut, outputs) {
		return false
	}
	for _, o := range []*Node{a.dq, a.dk, a.dv} {
		if o.Group != nil {
			return false
		}
	}
	slices.SortFunc(a.sums, func(x, y *Node) int { return x.index - y.index })
	a.findLeaves(writeOut, outputs)
	return true
}

// ancestors are the nodes of set that n is computed from (n excluded).
func ancestors(n *Node, set map[*Node]bool) map[*Node]bool {
	anc := map[*Node]bool{}
	var walk func(n *Node)
	walk = func(n *Node) {
		for _, in := range n.Inputs {
			if set[in] && !anc[in] {
				anc[in] = true
				walk(in)
			}
		}
	}
	walk(n)
	return anc
}

// trainingGroups are the forward's and the two backward kernels' groups.
// Each score-space or leaf node is a member of the first group whose
// outputs it is computed for (its members come before its root), and the
// other kernels that need it recompute it.
func (a *attention) trainingGroups() []*Group {
	all := union(a.score, a.leaves)
	fwd := &Group{Kind: AttentionGroup, Root: a.pv, Full: a.pv.Info.Shape, MatMul: a.qk, attn: a}
	bq := &Group{Kind: AttentionDQGroup, Root: a.dq, Full: a.dq.Info.Shape, attn: a}
	bkv := &Group{Kind: AttentionDKVGroup, attn: a}
	a.fwd, a.bq, a.bkv = fwd, bq, bkv
	fwdOf, dqOf := ancestors(a.pv, all), ancestors(a.dq, all)
	for n := range all {
		switch {
		case fwdOf[n]:
			n.Group = fwd
		case dqOf[n]:
			n.Group = bq
		default:
			n.Group = bkv
		}
		n.Group.Members = append(n.Group.Members, n)
	}
	outs := append([]*Node{a.dk, a.dv}, a.sums...)
	slices.SortFunc(outs, func(x, y *Node) int { return x.index - y.index })
	bkv.Root, bkv.Extra = outs[len(outs)-1], outs[:len(outs)-1]
	bkv.Full = bkv.Root.Info.Shape
	for _, o := range outs {
		o.Group = bkv
		bkv.Members = append(bkv.Members, o)
	}
	a.pv.Group, a.dq.Group = fwd, bq
	fwd.Members = append(fwd.Members, a.pv)
	bq.Members = append(bq.Members, a.dq)
	rows := []int{a.nb, a.sq}
	dt := a.pv.Info.DType
	a.lse = newInternal(a.pv.String()+".lse", rows, dt, fwd)
	fwd.Extra = []*Node{a.lse}
	a.delta = newInternal(a.dq.String()+".delta", rows, dt, bq)
	bq.Extra = []*Node{a.delta}
	for i := range a.sums {
		r := newInternal(a.dq.String()+".rowsum"+string(rune('0'+i)), rows, dt, bq)
		a.rowSums = append(a.rowSums, r)
		bq.Extra = append(bq.Extra, r)
	}
	// what each backward kernel computes again, and reads
	for n := range all {
		if n.Group != bq {
			bq.Recompute = append(bq.Recompute, n)
		}
		if n.Group != bkv {
			bkv.Recompute = append(bkv.Recompute, n)
		}
	}
	byIndex := func(x, y *Node) int { return x.index - y.index }
	slices.SortFunc(bq.Recompute, byIndex)
	slices.SortFunc(bkv.Recompute, byIndex)
	bq.Reads = []*Node{a.pv, a.lse}
	bkv.Reads = append([]*Node{a.lse, a.delta}, a.rowSums...)
	return []*Group{fwd, bq, bkv}
}
