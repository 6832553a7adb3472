package graphpass

import (
	"fmt"
	"slices"

	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// Multi-head attention as Gorgonia users write it (the bench's encoder):
// per head h, q_h = Reshape(x·Wq_h), likewise k_h and v_h, an attention
// pattern, o_h = Reshape(its output) and one Concat of the o_h along the
// columns; in training, each head's dO is a Reshape of a column Slice of the
// Concat's gradient. Such heads become one set of kernels with the heads as
// a grid dimension:
//
//   - heads_weights: the 3H weights stacked [3H, d, dh] (q's, k's, v's), a
//     copy kernel (the weights are the user's separate tensors);
//   - heads_proj: every projection as one batched product x·W_p into the
//     stack [3H, n, dh] (an internal value: no per-head value is written);
//   - attention (forward), attention_dq, attention_dkv over all heads
//     (program axis 2), reading q, k and v from the stack, each head's dO and
//     O from the Concat's gradient and the Concat itself (row stride H·dh),
//     writing the Concat directly; the slices and reshapes around attention
//     are members: no kernel of theirs is left.
//
// All heads' patterns must be alike (the same ops, the same scale and mask
// values, masks read from the same nodes): the kernels compute head 0's
// chain for every head.
type heads struct {
	h, n, d, dh int // heads, rows (batch·sequence), the model dim (x's columns), the head dim
	x           *Node
	pats        []*attention
	w, proj     []*Node // the 3H weights and products x·W, q's then k's then v's
	qkv         []*Node // the 3H reshapes of the products: each head's q, k and v
	outs        []*Node // Reshape(o_h), the Concat's operands
	concat      *Node
	// training: the Concat's gradient, its column slices and their reshapes
	// (each head's dO)
	dm          *Node
	slices, dos []*Node
	doCol       []int // each head's dO's first column in dm
	// internal values: the stacked weights and projections
	wst, stack *Node
	read       map[*Node]bool // nodes kernels read through a stack or the Concat's gradient
	// training: the backward kernels' groups, and the weights' gradients
	// x_ᵀ×dP_p (by stack part) where every one is there
	bq, bkv *Group
	dw      []*Node
}

// skip reports whether in, an operand of a node a kernel computes, is read
// through a stack (or the Concat's gradient) instead of by itself.
func (hs *heads) skip(in *Node) bool { return hs != nil && hs.read[in] }

// matchHeads finds the multi-head pattern whose Concat is c, of matched
// attention patterns (by their output product), all of one mode; nil if
// there is none.
func matchHeads(c *Node, byPV map[*Node]*attention, writeOut func(*Node) bool) *heads {
	s := c.Info.Shape
	if c.Info.Kind != ops.Concat || c.Group != nil || len(c.Inputs) < 2 || len(s) != 2 || len(c.Info.Axes) != 1 || c.Info.Axes[0] != 1 {
		return nil
	}
	hs := &heads{h: len(c.Inputs), n: s[0], concat: c, read: map[*Node]bool{}}
	if s[1]%hs.h != 0 {
		return nil
	}
	hs.dh = s[1] / hs.h
	for _, o := range c.Inputs {
		if o.Info.Kind != ops.Reshape || o.Group != nil || writeOut(o) || len(users(o)) != 1 || !sameShape(o.Info.Shape, []int{hs.n, hs.dh}) {
			return nil
		}
		a := byPV[o.Inputs[0]]
		if a == nil || slices.Contains(hs.pats, a) || a.nb*a.sq != hs.n || a.sq != a.sk || a.hk != hs.dh || a.hv != hs.dh {
			return nil
		}
		hs.outs, hs.pats = append(hs.outs, o), append(hs.pats, a)
	}
	a0 := hs.pats[0]
	for _, a := range hs.pats[1:] {
		if a.training() != a0.training() || !alike(a0, a) {
			return nil
		}
	}
	// the projections: one x, a weight each
	hs.w, hs.proj, hs.qkv = make([]*Node, 3*hs.h), make([]*Node, 3*hs.h), make([]*Node, 3*hs.h)
	for i, a := range hs.pats {
		for j, r := range []*Node{a.q, a.k, a.v} {
			p := j*hs.h + i
			if r.Info.Kind != ops.Reshape || r.Group != nil || writeOut(r) || len(r.Inputs) != 1 || slices.Contains(hs.qkv, r) {
				return nil
			}
			for _, u := range users(r) {
				if !a.score[u] && u != a.pv && u != a.dq && u != a.dk && u != a.dv {
					return nil
				}
			}
			pr := r.Inputs[0]
			if pr.Info.Kind != ops.MatMul || pr.Info.TransA || pr.Info.TransB || pr.Group != nil || writeOut(pr) || len(users(pr)) != 1 {
				return nil
			}
			if hs.x == nil {
				hs.x = pr.Inputs[0]
			}
			w := pr.Inputs[1]
			if pr.Inputs[0] != hs.x || !sameShape(w.Info.Shape, []int{hs.x.Info.Shape[1], hs.dh}) || !sameShape(pr.Info.Shape, []int{hs.n, hs.dh}) {
				return nil
			}
			hs.w[p], hs.proj[p], hs.qkv[p] = w, pr, r
		}
	}
	hs.d = hs.x.Info.Shape[1]
	if a0.training() { // each head's dO: a reshaped column slice of one gradient
		readers := map[*Node]bool{} // of a dO
		for _, a := range hs.pats {
			readers[a.dp], readers[a.dv] = true, true
		}
		for _, a := range hs.pats {
			r := a.dO
			if r.Info.Kind != ops.Reshape || r.Group != nil || writeOut(r) || len(r.Inputs) != 1 {
				return nil
			}
			for _, u := range users(r) {
				if !readers[u] {
					return nil
				}
			}
			sl := r.Inputs[0]
			if sl.Info.Kind != ops.Slice || sl.Group != nil || writeOut(sl) || len(sl.Info.Axes) != 1 || sl.Info.Axes[0] != 1 || sl.Info.End-sl.Info.Start != hs.dh {
				return nil
			}
			if hs.dm == nil {
				hs.dm = sl.Inputs[0]
			}
			if sl.Inputs[0] != hs.dm || !sameShape(hs.dm.Info.Shape, c.Info.Shape) {
				return nil
			}
			// the column the head's dO starts at: the head's own in the
			// Concat's gradient, but Gorgonia may have given two heads one
			// slice node (see DESIGN.md: its slices' hash)
			hs.doCol = append(hs.doCol, sl.Info.Start)
			if !slices.Contains(hs.dos, r) {
				hs.dos = append(hs.dos, r)
			}
			if !slices.Contains(hs.slices, sl) {
				hs.slices = append(hs.slices, sl)
			}
		}
		for _, sl := range hs.slices {
			for _, u := range users(sl) {
				if !slices.Contains(hs.dos, u) {
					return nil
				}
			}
		}
	}
	for _, n := range slices.Concat(hs.w, hs.qkv, hs.slices, hs.dos) {
		hs.read[n] = true
	}
	return hs
}

// alike reports whether attention patterns a and b compute alike: the same
// ops in the same places between their products, the same constants, and
// the same nodes (a mask) read from outside.
func alike(a, b *attention) bool {
	same := func(x, y float64) bool { return x == y || x != x && y != y }
	if len(a.sums) != len(b.sums) || !same(a.scaleC, b.scaleC) || (a.scale == nil) != (b.scale == nil) || (a.causal == nil) != (b.causal == nil) ||
		!same(a.causalKept, b.causalKept) || !same(a.causalMasked, b.causalMasked) || len(a.score) != len(b.score) || len(a.leaves) != len(b.leaves) {
		return false
	}
	anchor := map[*Node]*Node{a.qk: b.qk, a.sm: b.sm, a.pv: b.pv}
	if a.training() {
		for x, y := range map[*Node]*Node{a.dp: b.dp, a.sd: b.sd, a.ds: b.ds, a.dq: b.dq, a.dk: b.dk, a.dv: b.dv} {
			anchor[x] = y
		}
	}
	var eq func(x, y *Node) bool
	eq = func(x, y *Node) bool {
		if x == y {
			return true
		}
		if z, ok := anchor[x]; ok {
			return z == y
		}
		inX, inY := a.score[x] || a.leaves[x], b.score[y] || b.leaves[y]
		switch {
		case inX != inY:
			return false
		case !inX: // read from outside: one node, or constants of one value
			return x.Info.Kind == ops.Constant && y.Info.Kind == ops.Constant && x.Info.Value == y.Info.Value && x.Info.DType == y.Info.DType
		}
		if x.Info.Kind != y.Info.Kind || x.Info.Name != y.Info.Name || !sameShape(x.Info.Shape, y.Info.Shape) || len(x.Inputs) != len(y.Inputs) {
			return false
		}
		for i := range x.Inputs {
			if !eq(x.Inputs[i], y.Inputs[i]) {
				return false
			}
		}
		return true
	}
	if !eq(a.sm.Inputs[0], b.sm.Inputs[0]) || a.training() && !eq(a.ds, b.ds) {
		return false
	}
	for i := range a.sums {
		if !eq(a.sums[i].Inputs[0], b.sums[i].Inputs[0]) {
			return false
		}
	}
	return true
}

// groups are the heads' kernels' groups: the weights' stack, the
// projections, and the attention kernels over every head.
func (hs *heads) groups(writeOut func(*Node) bool) []*Group {
	dt := hs.concat.Info.DType
	wg := &Group{Kind: HeadsWeightsGroup, heads: hs, Reads: hs.w}
	hs.wst = newInternal(fmt.Sprintf("%v.weights", hs.concat), []int{3 * hs.h, hs.d, hs.dh}, dt, wg)
	wg.Root, wg.Full = hs.wst, hs.wst.Info.Shape
	pg := &Group{Kind: HeadsProjGroup, heads: hs, Reads: []*Node{hs.x, hs.wst}}
	hs.stack = newInternal(fmt.Sprintf("%v.qkv", hs.concat), []int{3 * hs.h, hs.n, hs.dh}, dt, pg)
	pg.Root, pg.Full = hs.stack, hs.stack.Info.Shape
	for _, n := range slices.Concat(hs.proj, hs.qkv) {
		n.Group = pg
		pg.Members = append(pg.Members, n)
	}
	hs.wst.index, hs.stack.index = maxIndex(hs.w), maxIndex(slices.Concat(hs.proj, hs.qkv))
	a0 := hs.pats[0]
	rows := []int{hs.h, a0.nb, a0.sq}
	fwd := &Group{Kind: AttentionGroup, Root: hs.concat, Full: hs.concat.Info.Shape, attn: a0, heads: hs, Reads: []*Node{hs.stack}}
	for _, a := range hs.pats {
		a.fwd = fwd
	}
	if !a0.training() {
		for _, a := range hs.pats {
			for n := range union(union(a.score, a.leaves), map[*Node]bool{a.pv: true}) {
				n.Group = fwd
				fwd.Members = append(fwd.Members, n)
			}
		}
		for _, n := range append(slices.Clone(hs.outs), hs.concat) {
			n.Group = fwd
			fwd.Members = append(fwd.Members, n)
		}
		return []*Group{wg, pg, fwd}
	}
	bq := &Group{Kind: AttentionDQGroup, attn: a0, heads: hs, OnePointer: true}
	bkv := &Group{Kind: AttentionDKVGroup, attn: a0, heads: hs, OnePointer: true}
	var all []*Node // every head's score-space and leaf nodes
	var dqs, kvOuts []*Node
	for _, a := range hs.pats {
		a.fwd, a.bq, a.bkv = fwd, bq, bkv
		in := union(a.score, a.leaves)
		fwdOf, dqOf := ancestors(a.pv, in), ancestors(a.dq, in)
		for n := range in {
			switch {
			case fwdOf[n]:
				n.Group = fwd
			case dqOf[n]:
				n.Group = bq
			default:
				n.Group = bkv
			}
			n.Group.Members = append(n.Group.Members, n)
			all = append(all, n)
		}
		for _, n := range []*Node{a.pv} {
			n.Group = fwd
			fwd.Members = append(fwd.Members, n)
		}
		dqs = append(dqs, a.dq)
		kvOuts = append(kvOuts, a.dk, a.dv)
		kvOuts = append(kvOuts, a.sums...)
	}
	for _, n := range append(slices.Clone(hs.outs), hs.concat) {
		n.Group = fwd
		fwd.Members = append(fwd.Members, n)
	}
	for _, n := range slices.Concat(dqs, hs.slices, hs.dos) {
		n.Group = bq
		bq.Members = append(bq.Members, n)
	}
	for _, n := range kvOuts {
		n.Group = bkv
		bkv.Members = append(bkv.Members, n)
	}
	byIndex := func(x, y *Node) int { return x.index - y.index }
	slices.SortFunc(dqs, byIndex)
	slices.SortFunc(kvOuts, byIndex)
	bq.Root, bq.Extra, bq.Full = dqs[len(dqs)-1], dqs[:len(dqs)-1], dqs[len(dqs)-1].Info.Shape
	bkv.Root, bkv.Extra, bkv.Full = kvOuts[len(kvOuts)-1], kvOuts[:len(kvOuts)-1], kvOuts[len(kvOuts)-1].Info.Shape
	lse := newInternal(hs.concat.String()+".lse", rows, dt, fwd)
	fwd.Extra = []*Node{lse}
	delta := newInternal(hs.concat.String()+".delta", rows, dt, bq)
	bq.Extra = append(slices.Clone(bq.Extra), delta)
	var rowSums []*Node
	for i := range a0.sums {
		r := newInternal(fmt.Sprintf("%v.rowsum%d", hs.concat, i), rows, dt, bq)
		rowSums = append(rowSums, r)
		bq.Extra = append(bq.Extra, r)
	}
	for _, a := range hs.pats { // head 0's kernels find them through a0
		a.lse, a.delta, a.rowSums = lse, delta, rowSums
	}
	for _, n := range all {
		if n.Group != bq {
			bq.Recompute = append(bq.Recompute, n)
		}
		if n.Group != bkv {
			bkv.Recompute = append(bkv.Recompute, n)
		}
	}
	slices.SortFunc(bq.Recompute, byIndex)
	slices.SortFunc(bkv.Recompute, byIndex)
	bq.Reads = []*Node{hs.stack, hs.dm, hs.concat, lse}
	bkv.Reads = append([]*Node{hs.stack, hs.dm, lse, delta}, rowSums...)
	hs.bq, hs.bkv = bq, bkv
	return append([]*Group{wg, pg, fwd, bq, bkv}, hs.weightGradients(writeOut)...)
}

// weightGradients are the groups of the weights' gradients, where each is
// xᵀ×Reshape(its projection's gradient) (gorgonia.Grad's for x·W): one
// batched product over the q parts (from the dQ kernel's outputs) and one
// over the k and v parts (from the dK/dV kernel's), each reading its
// kernel's whole value at the parts' offsets.
func (hs *heads) weightGradients(writeOut func(*Node) bool) []*Group {
	hs.dw = make([]*Node, 3*hs.h)
	for p := range hs.dw {
		a := hs.pats[p%hs.h]
		grad := []*Node{a.dq, a.dk, a.dv}[p/hs.h] // of the head's q, k or v
		for _, r := range users(grad) {
			if r.Info.Kind != ops.Reshape || r.Group != nil || !sameShape(r.Info.Shape, []int{hs.n, hs.dh}) {
				continue
			}
			for _, u := range users(r) {
				if u.Info.Kind == ops.MatMul && u.Info.TransA && !u.Info.TransB && u.Group == nil && u.Inputs[0] == hs.x && u.Inputs[1] == r && sameShape(u.Info.Shape, []int{hs.d, hs.dh}) {
					hs.dw[p] = u
				}
			}
		}
		if hs.dw[p] == nil {
			return nil // the graph does not allow it: the products stay as they are
		}
	}
	var groups []*Group
	for _, part := range []struct {
		from   *Group
		dw     []*Node
		suffix string
	}{
		{from: hs.bq, dw: hs.dw[:hs.h], suffix: "dq"},
		{from: hs.bkv, dw: hs.dw[hs.h:], suffix: "dkv"},
	} {
		part.from.OnePointer = true
		if part.from.Stack == nil {
			// the value of the group's outputs laid end to end: as many
			// elements as they have (what the compile report counts the
			// heads' backward as reading, and the tuner allocates)
			n := 0
			for _, o := range part.from.outputs() {
				n += max(1, numel(o.Info.Shape))
			}
			part.from.Stack = newInternal(fmt.Sprintf("%v.%s", hs.concat, part.suffix), []int{n}, hs.concat.Info.DType, part.from)
		}
		g := &Group{Kind: HeadsGradGroup, heads: hs, Reads: []*Node{hs.x, part.from.Stack}, OnePointer: true}
		outs := slices.Clone(part.dw)
		for _, n := range outs {
			// the reshape of the projection's gradient, where only this
			// product reads it: a member (the kernel reads the stack)
			if r := n.Inputs[1]; len(users(r)) == 1 && !writeOut(r) {
				r.Group = g
				g.Members = append(g.Members, r)
				hs.read[r] = true
			}
			n.Group = g
			g.Members = append(g.Members, n)
		}
		slices.SortFunc(g.Members, func(x, y *Node) int { return x.index - y.index })
		slices.SortFunc(outs, func(x, y *Node) int { return x.index - y.index })
		g.Root, g.Extra, g.Full = outs[len(outs)-1], outs[:len(outs)-1], outs[len(outs)-1].Info.Shape
		g.dw, g.from = part.dw, part.from
		groups = append(groups, g)
	}
	return groups
}

// heads_grad: program (i, j, p) computes the BM×BN tile (i, j) of
// xᵀ×dP_p, the gradient of the part's weight p, reading dP_p (the gradient
// of projection p: head p's dQ, or dK, dV) in the backward kernel's value.
var headsGradKind = groupKind{
	name:    "heads_grad",
	byClaim: true,
	join:    func(*Node, *Group, Target) (GroupKind, bool) { return HeadsGradGroup, false },
	tune: func(grp *Group, t Target, prec tile.Precision, meta tile.Meta) {
		hs := grp.heads
		tuneMatMul(&Group{MatMul: &Node{Info: ops.Info{Shape: []int{len(grp.dw), hs.d, hs.dh}, DType: grp.Root.Info.DType}}}, t, prec, meta)
		// 3xTF32 over a long K: xᵀ staged in the swapped form (wg_stage =
		// 1), as the weight gradients of products are (tuneMatMul), 64×64
		// at 4 warps (BLOCK_N is the head dim, 16 a warp), 6 stages of 32
		// KiB
		if t.GPU() && prec == tile.PrecTF32x3 && grp.Root.Info.DType == tile.F32 && hs.dh == 64 && hs.n >= 1024 &&
			t.SharedMemory >= 6*4*32*(3*64+64) {
			meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"] = 64, 64, 32
			meta["num_warps"], meta["num_stages"], meta["wgmma"], meta["wg_stage"] = 4, 6, 2, 1
		}
		if grp.aT != nil {
			// x transposed once (pretranspose): A·B on the swapped wgmma
			// form, 64 columns (a head) at 4 warps
			meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"] = 128, 64, 32
			meta["num_warps"], meta["num_stages"], meta["wgmma"] = 4, 4, 2
		}
		if s := headsSplit(grp, t, prec, meta); s > 1 {
			meta["SPLIT_K"] = s
		}
	},
	space: func(grp *Group, t Target, prec tile.Precision, def tile.Meta) []tile.Meta {
		if grp.aT == nil {
			return nil
		}
		var out []tile.Meta
		for _, bm := range []int{64, 128, 256} {
			for _, split := range []int{1, 2} {
				if c := with(with(def, "BLOCK_M", bm), "SPLIT_K", split); c.String() != def.String() {
					out = append(out, c)
				}
			}
		}
		return out
	},
	anyShape: true,
	emit:     emitHeadsGrad,
}

// headsSplit is SPLIT_K for a heads_grad group on a GPU at 3xTF32: its K
// (the tokens) split into parts, each program adding its part into the
// zeroed outputs, so that the programs are at least four for every SM
// while each part keeps 8 steps of BLOCK_K or more. The BERT layer's
// (768×64 per weight, K = 4096 tokens, 12 or 24 weights) run 144 or 288
// programs of 4 warps for 132 SMs. Measured on the H200 (2026-12-03, the
// BERT layer's forward+backward, device time): 3xTF32 3.91 → 3.85 ms; at
// TF32 the two kernels alone went 77.6 → 54.6 and 115.2 → 94.0 µs (62 →
// 88 and 84 → 103 TFLOP/s) but the layer 1.45 → 1.47–1.49 ms in four
// passes over two calls (not understood yet), so TF32 keeps one part.
func headsSplit(grp *Group, t Target, prec tile.Precision, meta tile.Meta) int {
	hs := grp.heads
	if !t.GPU() || prec != tile.PrecTF32x3 || meta["BLOCK_M"] < 1 || meta["BLOCK_N"] < 1 || meta["BLOCK_K"] < 1 {
		return 1
	}
	progs := tile.CDiv(hs.d, meta["BLOCK_M"]) * tile.CDiv(hs.dh, meta["BLOCK_N"]) * len(grp.dw)
	split := 1
	for progs*split < 4*t.SMs && hs.n/(2*split*meta["BLOCK_K"]) >= 8 {
		split *= 2
	}
	return split
}

// outputOffset is where output n of grp lies in its outputs laid end to end.
func outputOffset(grp *Group, n *Node) (int, error) {
	at := 0
	for _, x := range grp.outputs() {
		if x == n {
			return at, nil
		}
		at += numel(x.Info.Shape)
	}
	return 0, fmt.Errorf("graphpass: %v: %v is not an output of it", grp, n)
}

// choose is the offsets at[p] for the program's p: a chain of selects.
func choose(b *tile.Builder, p *tile.Value, at []int) *tile.Value {
	v := b.I32(at[0])
	for i, x := range at[1:] {
		v = b.Where(b.Eq(p, i+1), x, v)
	}
	return v
}

func emitHeadsGrad(e *emitter, out *tile.Value, k *Kernel) error {
	hs, b, grp := e.grp.heads, e.b, e.grp
	var bl [3]int
	for i, name := range []string{"BLOCK_M", "BLOCK_N", "BLOCK_K"} {
		v, err := e.param(name)
		if err != nil {
			return err
		}
		bl[i] = v
	}
	bm, bn, bk := bl[0], bl[1], bl[2]
	m, n, kk := hs.d, hs.dh, hs.n
	px, ps := e.ptr[hs.x], e.ptr[grp.from.Stack]
	if grp.aT != nil {
		px = e.ptr[grp.aT]
	}
	if px == nil || ps == nil {
		return fmt.Errorf("graphpass: %v: x and the backward kernel's value must be inputs of the kernel", grp)
	}
	var in, outAt []int
	for _, dw := range grp.dw {
		src := dw.Inputs[1].Inputs[0] // Reshape(the projection's gradient)
		off, err := outputOffset(grp.from, src)
		if err != nil {
			return err
		}
		at, err := e.outOffset(dw)
		if err != nil {
			return err
		}
		in, outAt = append(in, off), append(outAt, at)
	}
	// SPLIT_K = s > 1: program axis 2 is p + len(dw)·part, each part
	// s-th of K added atomically into the zeroed outputs
	// (Kernel.Accumulates)
	p := b.ProgramID(2)
	var lo, hi any = 0, kk
	split := 1
	if s, ok := e.meta["SPLIT_K"]; ok && s > 1 {
		split = s
		nw := b.I32(len(grp.dw))
		part := b.Div(p, nw)
		p = b.Rem(p, nw)
		lo, hi = kPart(b, part, kk, bk, split)
	}
	pb := b.AddPtr(ps, choose(b, p, in))
	rm := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm)), 1) // [BM,1] rows of xᵀ
	rn := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), bn), b.Arange(0, bn)), 0) // [1,BN]
	rkRow, rkCol := b.ExpandDims(b.Arange(0, bk), 0), b.ExpandDims(b.Arange(0, bk), 1)
	offA, offB := b.Add(rm, b.Mul(rkRow, m)), b.Add(b.Mul(rkCol, n), rn) // xᵀ(r, c) = x[c, r]
	stepA := m                                                           // along K: a row of x
	if grp.aT != nil {                                                   // x's copy, transposed: xᵀ(r, c) = copy[r, c]
		offA, stepA = b.Add(b.Mul(rm, kk), rkRow), 1
	}
	var inM, inN *tile.Value
	if m%bm != 0 {
		inM = b.Lt(rm, m)
	}
	if n%bn != 0 {
		inN = b.Lt(rn, n)
	}
	acc := b.For(lo, hi, bk, []*tile.Value{b.Zeros(grp.Root.Info.DType, bm, bn)}, func(k0 *tile.Value, c []*tile.Value) []*tile.Value {
		maskA, maskB := inM, inN
		if kk%bk != 0 {
			maskA, maskB = e.and(inM, b.Lt(b.Add(rkRow, k0), kk)), e.and(b.Lt(b.Add(rkCol, k0), kk), inN)
		}
		av := e.loadOr0(b.AddPtr(px, b.Add(offA, mulBy(b, k0, stepA))), e.fullMask(maskA, bm, bk))
		bv := e.loadOr0(b.AddPtr(pb, b.Add(offB, b.Mul(k0, n))), e.fullMask(maskB, bk, bn))
		return []*tile.Value{b.Dot(av, bv, c[0], e.prec)}
	})
	op := b.AddPtr(out, choose(b, p, outAt))
	k.Grid = tile.Grid{tile.CDiv(m, bm), tile.CDiv(n, bn), len(grp.dw) * split}
	if split > 1 {
		b.AtomicAdd(b.AddPtr(op, b.Add(b.Mul(rm, n), rn)), acc[0], e.fullMask(e.and(inM, inN), bm, bn))
		k.Accumulates = true
		return nil
	}
	b.Store(b.AddPtr(op, b.Add(b.Mul(rm, n), rn)), acc[0], e.fullMask(e.and(inM, inN), bm, bn))
	return nil
}

func maxIndex(ns []*Node) int {
	at := -1
	for _, n := range ns {
		at = max(at, n.index)
	}
	return at
}

// heads_weights: program (i, p) copies block i of weight p into the stack
// (the weights are separate tensors: each program loads from every one of
// them under a mask that only its own passes). On a CPU (EACH = 1) program
// i copies block i of every weight, one load and one store each, at
// least two programs a core where the weights allow (BLOCK down to 256):
// the masked form had each program test all 3H masks a vector, 24 times
// the copy's work (the bench's encoder large, 24 weights of 256 × 32: 302
// µs on the 2-core VM).
var headsWeightsKind = groupKind{
	name:    "heads_weights",
	byClaim: true,
	join:    func(*Node, *Group, Target) (GroupKind, bool) { return HeadsWeightsGroup, false },
	tune: func(grp *Group, t Target, _ tile.Precision, meta tile.Meta) {
		size := grp.heads.d * grp.heads.dh
		bs := min(t.perThread(8, 1024), pow2AtLeast(size))
		if !t.GPU() {
			for bs > 256 && tile.CDiv(size, bs) < 2*t.Cores {
				bs /= 2
			}
			meta["EACH"] = 1
		}
		meta["BLOCK"] = bs
	},
	emit: emitHeadsWeights,
}

func emitHeadsWeights(e *emitter, out *tile.Value, k *Kernel) error {
	hs, b := e.grp.heads, e.b
	bs, err := e.param("BLOCK")
	if err != nil {
		return err
	}
	each, err := e.optParam("EACH", 0)
	if err != nil {
		return err
	}
	size := hs.d * hs.dh
	off := b.Add(b.Mul(b.ProgramID(0), bs), b.Arange(0, bs))
	switch each {
	case 0:
	case 1:
		return emitHeadsWeightsEach(e, out, k, off, size)
	default:
		return fmt.Errorf("graphpass: %v: EACH = %d: want 0 (a program a weight's block) or 1 (every weight's block)", e.grp, each)
	}
	p := b.ProgramID(1)
	var inRange *tile.Value
	if size%bs != 0 {
		inRange = b.Lt(off, size)
	}
	var v *tile.Value
	for i, w := range hs.w {
		wp := e.ptr[w]
		if wp == nil {
			return fmt.Errorf("graphpass: %v: weight %v is not an input of the kernel", e.grp, w)
		}
		mine := b.Eq(p, i)
		x := b.Load(b.AddPtr(wp, off), b.BroadcastTo(e.and(inRange, mine), tile.Shp(bs)), 0.0)
		if v == nil {
			v = x
		} else {
			v = b.Where(mine, x, v)
		}
	}
	b.Store(b.AddPtr(out, b.Add(b.Mul(p, size), off)), v, inRange)
	k.Grid = tile.Grid{tile.CDiv(size, bs), len(hs.w)}
	return nil
}

// emitHeadsWeightsEach: program i copies block off of every weight into
// the stack (EACH = 1).
func emitHeadsWeightsEach(e *emitter, out *tile.Value, k *Kernel, off *tile.Value, size int) error {
	hs, b := e.grp.heads, e.b
	bs := off.Type.Shape.Dims[0]
	var inRange *tile.Value
	var other any
	if size%bs != 0 {
		inRange, other = b.Lt(off, size), 0.0
	}
	for i, w := range hs.w {
		wp := e.ptr[w]
		if wp == nil {
			return fmt.Errorf("graphpass: %v: weight %v is not an input of the kernel", e.grp, w)
		}
		x := b.Load(b.AddPtr(wp, off), inRange, other)
		b.Store(b.AddPtr(out, b.Add(off, i*size)), x, inRange)
	}
	k.Grid = tile.Grid{tile.CDiv(size, bs)}
	return nil
}

// heads_proj: program (i, j, p) computes the BM×BN tile (i, j) of x·W_p
// into the stack, W_p read from the weights' stack.
var headsProjKind = groupKind{
	name:    "heads_proj",
	byClaim: true,
	join:    func(*Node, *Group, Target) (GroupKind, bool) { return HeadsProjGroup, false },
	tune: func(grp *Group, t Target, prec tile.Precision, meta tile.Meta) {
		hs := grp.heads
		tuneMatMul(&Group{MatMul: &Node{Info: ops.Info{Shape: []int{3 * hs.h, hs.n, hs.dh}, DType: grp.Root.Info.DType}}}, t, prec, meta)
		if t.GPU() && hopperSmem(t) && prec == tile.PrecTF32 && grp.Root.Info.DType == tile.F32 && hs.dh == 64 && hs.n >= 256 {
			// TF32 on Hopper: the swapped wgmma form, a head's 64
			// columns at 4 warps (tuneMatMul's TF32 rule asks for 128
			// columns; 3xTF32's takes 64)
			meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"] = 128, 64, 32
			meta["num_warps"], meta["num_stages"], meta["wgmma"] = 4, 4, 2
		}
	},
	space: func(grp *Group, t Target, prec tile.Precision, def tile.Meta) []tile.Meta {
		if def["wgmma"] != 2 || prec != tile.PrecTF32 {
			return nil
		}
		var out []tile.Meta
		for _, bm := range []int{64, 256} {
			out = append(out, with(def, "BLOCK_M", bm))
		}
		return out
	},
	emit: emitHeadsProj,
}

func emitHeadsProj(e *emitter, out *tile.Value, k *Kernel) error {
	hs, b := e.grp.heads, e.b
	var bl [3]int
	for i, name := range []string{"BLOCK_M", "BLOCK_N", "BLOCK_K"} {
		v, err := e.param(name)
		if err != nil {
			return err
		}
		bl[i] = v
	}
	bm, bn, bk := bl[0], bl[1], bl[2]
	m, n, kk := hs.n, hs.dh, hs.d
	pa, pw := e.ptr[hs.x], e.ptr[hs.wst]
	if pa == nil || pw == nil {
		return fmt.Errorf("graphpass: %v: x and the weights' stack must be inputs of the kernel", e.grp)
	}
	p := b.ProgramID(2)
	pb := b.AddPtr(pw, b.Mul(p, kk*n))
	rm := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm)), 1) // [BM,1]
	rn := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), bn), b.Arange(0, bn)), 0) // [1,BN]
	rkRow, rkCol := b.ExpandDims(b.Arange(0, bk), 0), b.ExpandDims(b.Arange(0, bk), 1)
	offA, offB := b.Add(b.Mul(rm, kk), rkRow), b.Add(b.Mul(rkCol, n), rn)
	var inM, inN *tile.Value
	if m%bm != 0 {
		inM = b.Lt(rm, m)
	}
	if n%bn != 0 {
		inN = b.Lt(rn, n)
	}
	acc := b.For(0, kk, bk, []*tile.Value{b.Zeros(hs.stack.Info.DType, bm, bn)}, func(k0 *tile.Value, c []*tile.Value) []*tile.Value {
		maskA, maskB := inM, inN
		if kk%bk != 0 {
			maskA, maskB = e.and(inM, b.Lt(b.Add(rkRow, k0), kk)), e.and(b.Lt(b.Add(rkCol, k0), kk), inN)
		}
		av := e.loadOr0(b.AddPtr(pa, b.Add(offA, k0)), e.fullMask(maskA, bm, bk))
		bv := e.loadOr0(b.AddPtr(pb, b.Add(offB, b.Mul(k0, n))), e.fullMask(maskB, bk, bn))
		return []*tile.Value{b.Dot(av, bv, c[0], e.prec)}
	})
	idx := b.Add(b.Add(b.Mul(rm, n), rn), b.Mul(p, m*n))
	b.Store(b.AddPtr(out, idx), acc[0], e.fullMask(e.and(inM, inN), bm, bn))
	k.Grid = tile.Grid{tile.CDiv(m, bm), tile.CDiv(n, bn), len(hs.w)}
	return nil
}

// mulBy is x·c, x itself where c is 1.
func mulBy(b *tile.Builder, x *tile.Value, c int) *tile.Value {
	if c == 1 {
		return x
	}
	return b.Mul(x, c)
}
