package graphpass

import (
	"fmt"

	"github.com/tilefuse/tilefuse/tile"
)

// The attention kernels' meta-parameters: BLOCK_M queries and BLOCK_N keys
// a score tile; the head dims are padded to powers of two (at least 16),
// their tails masked; BLOCK_R elements a step of the sums' final pass.

// tuneAttention, tuneAttentionDQ, tuneAttentionDKV: on a GPU, score tiles
// of 64×64 for head dims up to 64, 64×32 up to 128, 32×32 above (the
// accumulators and the resident blocks live in registers: at 4 warps a
// 64×128 accumulator is 64 floats a thread), halving the resident block
// where the grid would not fill the SMs once; the backward's resident key
// blocks (dK and dV accumulate in registers) are the smaller. On a CPU,
// 32×32 (the interpreter's dot works on 4×16 blocks; larger tiles were no
// faster).
func tuneAttention(grp *Group, t Target, _ tile.Precision, meta tile.Meta) {
	a := grp.attn
	bm, bn := attnBlocks(a, t)
	if t.GPU() && bm > 32 && tile.CDiv(a.sq, bm)*a.nb < t.SMs {
		bm = 32
	}
	meta["BLOCK_M"], meta["BLOCK_N"] = bm, bn
}

func tuneAttentionDQ(grp *Group, t Target, _ tile.Precision, meta tile.Meta) {
	a := grp.attn
	bm, _ := attnBlocks(a, t)
	if t.GPU() && bm > 32 && tile.CDiv(a.sq, bm)*a.nb < t.SMs {
		bm = 32
	}
	meta["BLOCK_M"], meta["BLOCK_N"] = bm, 32
}

func tuneAttentionDKV(grp *Group, t Target, _ tile.Precision, meta tile.Meta) {
	a := grp.attn
	_, bn := attnBlocks(a, t)
	if t.GPU() && bn > 32 && tile.CDiv(a.sk, bn)*a.nb < t.SMs {
		bn = 32
	}
	meta["BLOCK_M"], meta["BLOCK_N"] = 32, bn
	if len(a.sums) > 0 {
		meta["BLOCK_R"] = t.perThread(8, 1024)
	}
}

func attnBlocks(a *attention, t Target) (bm, bn int) {
	if !t.GPU() {
		return 32, 32
	}
	switch d := max(headBlock(a.hk), headBlock(a.hv)); {
	case d <= 64:
		return 64, 64
	case d <= 128:
		return 64, 32
	}
	return 32, 32
}

// headBlock is a head dim's block: a power of two, at least 16 (a dot's
// least side).
func headBlock(d int) int { return max(tile.MinDotDim, pow2AtLeast(d)) }

// attnEmit is what the three attention kernels share: the pattern, the
// sizes, and the score tile being computed.
type attnEmit struct {
	e        *emitter
	a        *attention
	b        *tile.Builder
	bdk, bdv int
	bat      *tile.Value // the batch (program axis 1)
	// the score tile: its query and key coordinates (a row and a column,
	// either way round), its flat indices into [nb, sq, sk], and whether
	// each lane is in range (nil: every lane)
	qi, kj, idx, valid *tile.Value
	tiles              map[*Node]*tile.Value // the values the kernel computes by blocks
}

func newAttnEmit(e *emitter) (*attnEmit, error) {
	a := e.grp.attn
	if a == nil {
		return nil, fmt.Errorf("graphpass: %v: no attention pattern", e.grp)
	}
	ae := &attnEmit{e: e, a: a, b: e.b, bdk: headBlock(a.hk), bdv: headBlock(a.hv), bat: e.b.ProgramID(1), tiles: map[*Node]*tile.Value{}}
	ss := []int{a.nb, a.sq, a.sk}
	e.space = func(idx *tile.Value, s []int) []*tile.Value {
		if idx != ae.idx || !sameShape(s, ss) {
			return nil
		}
		return []*tile.Value{ae.bat, ae.qi, ae.kj}
	}
	e.member = func(n *Node, idx *tile.Value) (*tile.Value, error) {
		if v := ae.tiles[n]; v != nil && idx == ae.idx {
			return v, nil
		}
		return nil, fmt.Errorf("graphpass: %v: %v %v outside its tile", e.grp, n.Info.Kind, n)
	}
	e.override = func(n *Node) func(idx *tile.Value) (*tile.Value, error) {
		switch {
		case n == a.causalAt && n != nil:
			return func(idx *tile.Value) (*tile.Value, error) {
				dt := n.Info.DType
				return ae.b.Where(ae.b.Gt(ae.kj, ae.qi), ae.b.Const(a.causalMasked, dt), ae.b.Const(a.causalKept, dt)), nil
			}
		case ae.tiles[n] != nil && n == a.scale:
			return func(idx *tile.Value) (*tile.Value, error) { return ae.tiles[n], nil }
		}
		return nil
	}
	return ae, nil
}

// ptr is the kernel's pointer for n (an input or an output).
func (ae *attnEmit) ptr(n *Node, out *tile.Value) (*tile.Value, error) {
	e := ae.e
	if p := e.ptr[n]; p != nil {
		return p, nil
	}
	if n == e.grp.Root {
		return out, nil
	}
	for i, x := range e.grp.Extra {
		if x == n {
			return e.extra[i], nil
		}
	}
	return nil, fmt.Errorf("graphpass: %v: %v is neither an input nor an output of the kernel", e.grp, n)
}

// block is the [len(rows), len(cols)]-shaped block of a [nb, n, d] tensor
// at p: rows r (a column [R,1] of row numbers, or a row [1,R]) and columns
// c of the head dim, laid out as rows×cols where rows is [R,1], or
// transposed ([d,R]) where r is [1,R] and c is [D,1]. Lanes outside n
// or d are not read and give 0.
func (ae *attnEmit) block(p *tile.Value, n, d int, r, c *tile.Value) *tile.Value {
	b := ae.b
	off := b.Add(b.Mul(b.Add(b.Mul(ae.bat, n), r), d), c)
	return ae.e.loadOr0(b.AddPtr(p, off), ae.inRange(r, n, c, d))
}

// inRange is r < n && c < d, leaving out the tests that sizes make true
// (nil: every lane).
func (ae *attnEmit) inRange(r *tile.Value, n int, c *tile.Value, d int) *tile.Value {
	var m *tile.Value
	if !divides(r, n) {
		m = ae.b.Lt(r, n)
	}
	if c != nil && !divides(c, d) {
		m = ae.e.and(m, ae.b.Lt(c, d))
	}
	if m == nil || c == nil {
		return m
	}
	s, err := tile.BroadcastShapes(r.Type.Shape, c.Type.Shape)
	if err != nil {
		return m
	}
	return ae.b.BroadcastTo(m, s)
}

// divides reports whether the coordinates r, a block of numel lanes,
// cover n exactly in whole blocks (no lane is ever out of range): n is a
// multiple of the block.
func divides(r *tile.Value, n int) bool {
	lanes := 1
	for _, d := range r.Type.Shape.Dims[:r.Type.Shape.Rank] {
		lanes *= d
	}
	return n%lanes == 0
}

// rows is a block of n row numbers from start: a column [n,1], or a row
// [1,n] where asRow.
func (ae *attnEmit) rows(start *tile.Value, n int, asRow bool) *tile.Value {
	r := ae.b.Add(ae.b.Arange(0, n), start)
	if asRow {
		return ae.b.ExpandDims(r, 0)
	}
	return ae.b.ExpandDims(r, 1)
}

// setTile makes (qi, kj) the score tile's coordinates and computes the
// tile's flat indices and range mask.
func (ae *attnEmit) setTile(qi, kj *tile.Value) {
	b, a := ae.b, ae.a
	ae.qi, ae.kj = qi, kj
	ae.idx = b.Add(b.Mul(b.Add(b.Mul(ae.bat, a.sq), qi), a.sk), kj)
	ae.valid = ae.e.and(ae.maybeLt(qi, a.sq), ae.maybeLt(kj, a.sk))
	if ae.valid != nil {
		ae.valid = b.BroadcastTo(ae.valid, ae.idx.Type.Shape)
	}
	ae.e.mask = ae.valid
	clear(ae.tiles)
}

func (ae *attnEmit) maybeLt(x *tile.Value, n int) *tile.Value {
	if divides(x, n) {
		return nil
	}
	return ae.b.Lt(x, n)
}

// scores computes f(scores) at the tile, −∞ on keys out of range.
func (ae *attnEmit) scores() (*tile.Value, error) {
	x, err := ae.e.gen(ae.a.sm.Inputs[0], ae.idx)
	if err != nil {
		return nil, err
	}
	if m := ae.maybeLt(ae.kj, ae.a.sk); m != nil {
		x = ae.b.Where(m, x, -inf)
	}
	return x, nil
}

// zeroOut is x on the tile's lanes in range, 0 elsewhere.
func (ae *attnEmit) zeroOut(x *tile.Value) *tile.Value {
	if ae.valid == nil {
		return x
	}
	return ae.b.Where(ae.valid, x, 0.0)
}

// keyEnd is where a block of queries from q0 stops reading keys: all of
// them, or with a causal mask that contributes nothing above the
// diagonal, the keys up to its last query.
func (ae *attnEmit) keyEnd(q0 *tile.Value, bm int) any {
	if !ae.a.skipsBlocks() {
		return ae.a.sk
	}
	return ae.b.Minimum(ae.b.Add(q0, bm), ae.a.sk)
}

// emitAttention: program (i, b) computes rows [i·BM, (i+1)·BM) of batch
// b's output, looping over blocks of keys with an online softmax; in a
// training graph it also writes each row's log-sum-exp.
func emitAttention(e *emitter, out *tile.Value, k *Kernel) error {
	ae, err := newAttnEmit(e)
	if err != nil {
		return err
	}
	b, a := e.b, ae.a
	bm, err := e.param("BLOCK_M")
	if err != nil {
		return err
	}
	bn, err := e.param("BLOCK_N")
	if err != nil {
		return err
	}
	qp, kp, vp := e.ptr[a.q], e.ptr[a.k], e.ptr[a.v]
	if qp == nil || kp == nil || vp == nil {
		return fmt.Errorf("graphpass: %v: q, k and v must be inputs of the kernel", e.grp)
	}
	dt := a.pv.Info.DType
	q0 := b.Mul(b.ProgramID(0), bm)
	rm := ae.rows(q0, bm, false)                                             // [BM,1] queries
	qt := ae.block(qp, a.sq, a.hk, rm, b.ExpandDims(b.Arange(0, ae.bdk), 0)) // [BM,BDK]
	if a.scale != nil {
		qt = b.Mul(qt, b.Const(a.scaleC, dt)) // the scale folded into Q's block
	}
	rdkCol := b.ExpandDims(b.Arange(0, ae.bdk), 1) // [BDK,1]
	rdv := b.ExpandDims(b.Arange(0, ae.bdv), 0)    // [1,BDV]
	init := []*tile.Value{b.Full(-inf, dt, bm, 1), b.Zeros(dt, bm, 1), b.Zeros(dt, bm, ae.bdv)}
	res := b.For(0, ae.keyEnd(q0, bm), bn, init, func(n0 *tile.Value, c []*tile.Value) []*tile.Value {
		mi, li, acc := c[0], c[1], c[2]
		rn := ae.rows(n0, bn, true)                // [1,BN] keys
		kt := ae.block(kp, a.sk, a.hk, rn, rdkCol) // [BDK,BN]
		ae.setTile(rm, rn)
		s := b.Dot(qt, kt, nil, e.prec)
		if a.scale != nil {
			ae.tiles[a.scale] = s
		} else {
			ae.tiles[a.qk] = s
		}
		sv, err := ae.scores()
		if err != nil {
			e.err = err
			return c
		}
		mNew := b.Maximum(mi, b.Max(sv, 1, tile.KeepDims))
		ms := b.Where(b.Eq(mNew, -inf), 0.0, mNew)
		alpha := b.Exp(b.Sub(mi, ms))
		pt := b.Exp(b.Sub(sv, ms))
		rnCol := ae.rows(n0, bn, false)            // [BN,1]
		vt := ae.block(vp, a.sk, a.hv, rnCol, rdv) // [BN,BDV]
		li = b.Add(b.Mul(li, alpha), b.Sum(pt, 1, tile.KeepDims))
		acc = b.Dot(pt, vt, b.Mul(acc, alpha), e.prec)
		return []*tile.Value{mNew, li, acc}
	})
	if e.err != nil {
		return e.err
	}
	// a row whose scores are all −∞ has l = 0 and gives 0/0 = NaN, as
	// softmax followed by the product does
	o := b.Div(res[2], res[1])
	op, err := ae.ptr(a.pv, out)
	if err != nil {
		return err
	}
	rowOff := b.Add(b.Mul(ae.bat, a.sq), rm)
	b.Store(b.AddPtr(op, b.Add(b.Mul(rowOff, a.hv), rdv)), o, ae.inRange(rm, a.sq, rdv, a.hv))
	if a.lse != nil {
		lp, err := ae.ptr(a.lse, out)
		if err != nil {
			return err
		}
		b.Store(b.AddPtr(lp, rowOff), b.Add(res[0], b.Log(res[1])), ae.inRange(rm, a.sq, nil, 0))
	}
	k.Grid = tile.Grid{tile.CDiv(a.sq, bm), a.nb}
	return nil
}

// backwardTiles computes, at the score tile, the probabilities from the
// log-sum-exp, and from dP = dO×Vᵀ the SoftmaxDiff P∘(dP − D) (D =
// rowsum(dO∘O) = rowsum(P∘dP)), and records them with the scores as the
// values the chain to dS is computed from; it returns P and dS, 0 on lanes
// out of range.
func (ae *attnEmit) backwardTiles(s, lse, dp, delta *tile.Value) (p, ds *tile.Value, err error) {
	b, a := ae.b, ae.a
	ae.tiles[a.qk] = s
	x, err := ae.scores()
	if err != nil {
		return nil, nil, err
	}
	p = ae.zeroOut(b.Exp(b.Sub(x, lse)))
	ae.tiles[a.sm] = p
	ae.tiles[a.dp] = dp
	ae.tiles[a.sd] = b.Mul(p, b.Sub(dp, delta))
	if ds, err = ae.e.gen(a.ds, ae.idx); err != nil {
		return nil, nil, err
	}
	return p, ae.zeroOut(ds), nil
}

// emitAttentionDQ: program (i, b) holds batch b's queries [i·BM, (i+1)·BM),
// computes D = rowsum(dO∘O) for them, and loops over blocks of keys:
// scores, P from the log-sum-exp, dP, dS, and dQ += dS×K (and the row sums
// of the Σ outputs' operands). It writes dQ, D and the row sums.
func emitAttentionDQ(e *emitter, out *tile.Value, k *Kernel) error {
	ae, err := newAttnEmit(e)
	if err != nil {
		return err
	}
	b, a := e.b, ae.a
	bm, err := e.param("BLOCK_M")
	if err != nil {
		return err
	}
	bn, err := e.param("BLOCK_N")
	if err != nil {
		return err
	}
	var ptrs [6]*tile.Value // q, k, v, dO, O, lse
	for i, n := range []*Node{a.q, a.k, a.v, a.dO, a.pv, a.lse} {
		if ptrs[i] = e.ptr[n]; ptrs[i] == nil {
			return fmt.Errorf("graphpass: %v: %v is not an input of the kernel", e.grp, n)
		}
	}
	qp, kp, vp, dop, op, lp := ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], ptrs[5]
	dt := a.pv.Info.DType
	q0 := b.Mul(b.ProgramID(0), bm)
	rm := ae.rows(q0, bm, false) // [BM,1] queries
	rdk, rdv := b.ExpandDims(b.Arange(0, ae.bdk), 0), b.ExpandDims(b.Arange(0, ae.bdv), 0)
	rdkCol, rdvCol := b.ExpandDims(b.Arange(0, ae.bdk), 1), b.ExpandDims(b.Arange(0, ae.bdv), 1)
	qt := ae.block(qp, a.sq, a.hk, rm, rdk)   // [BM,BDK]
	dot := ae.block(dop, a.sq, a.hv, rm, rdv) // [BM,BDV]
	ot := ae.block(op, a.sq, a.hv, rm, rdv)   // [BM,BDV]
	delta := b.Sum(b.Mul(dot, ot), 1, tile.KeepDims)
	rowOff := b.Add(b.Mul(ae.bat, a.sq), rm)
	rowMask := ae.inRange(rm, a.sq, nil, 0)
	lse := e.loadOr0(b.AddPtr(lp, rowOff), rowMask)
	init := []*tile.Value{b.Zeros(dt, bm, ae.bdk)}
	for range a.sums {
		init = append(init, b.Zeros(dt, bm, 1))
	}
	res := b.For(0, ae.keyEnd(q0, bm), bn, init, func(n0 *tile.Value, c []*tile.Value) []*tile.Value {
		rn := ae.rows(n0, bn, true)                // [1,BN] keys
		kt := ae.block(kp, a.sk, a.hk, rn, rdkCol) // [BDK,BN]
		vt := ae.block(vp, a.sk, a.hv, rn, rdvCol) // [BDV,BN]
		ae.setTile(rm, rn)
		s := b.Dot(qt, kt, nil, e.prec)
		dp := b.Dot(dot, vt, nil, e.prec)
		_, ds, err := ae.backwardTiles(s, lse, dp, delta)
		if err != nil {
			e.err = err
			return c
		}
		next := []*tile.Value{b.Dot(ds, b.Trans(kt), c[0], e.prec)}
		for i, sum := range a.sums {
			x, err := e.gen(sum.Inputs[0], ae.idx)
			if err != nil {
				e.err = err
				return c
			}
			next = append(next, b.Add(c[1+i], b.Sum(ae.zeroOut(x), 1, tile.KeepDims)))
		}
		return next
	})
	if e.err != nil {
		return e.err
	}
	dqp, err := ae.ptr(a.dq, out)
	if err != nil {
		return err
	}
	b.Store(b.AddPtr(dqp, b.Add(b.Mul(rowOff, a.hk), rdk)), res[0], ae.inRange(rm, a.sq, rdk, a.hk))
	dpp, err := ae.ptr(a.delta, out)
	if err != nil {
		return err
	}
	b.Store(b.AddPtr(dpp, rowOff), delta, rowMask)
	for i, r := range a.rowSums {
		rp, err := ae.ptr(r, out)
		if err != nil {
			return err
		}
		b.Store(b.AddPtr(rp, rowOff), res[1+i], rowMask)
	}
	k.Grid = tile.Grid{tile.CDiv(a.sq, bm), a.nb}
	return nil
}

// emitAttentionDKV: program (j, b) holds batch b's keys [j·BN, (j+1)·BN)
// and their values, and loops over blocks of queries: the scores
// transposed (keys × queries), Pᵀ from the log-sum-exp, dV += Pᵀ×dO, dPᵀ,
// dSᵀ, dK += dSᵀ×Q. Program (0, 0) also adds up the row sums into each Σ
// output.
func emitAttentionDKV(e *emitter, out *tile.Value, k *Kernel) error {
	ae, err := newAttnEmit(e)
	if err != nil {
		return err
	}
	b, a := e.b, ae.a
	bm, err := e.param("BLOCK_M")
	if err != nil {
		return err
	}
	bn, err := e.param("BLOCK_N")
	if err != nil {
		return err
	}
	var ptrs [6]*tile.Value // q, k, v, dO, lse, D
	for i, n := range []*Node{a.q, a.k, a.v, a.dO, a.lse, a.delta} {
		if ptrs[i] = e.ptr[n]; ptrs[i] == nil {
			return fmt.Errorf("graphpass: %v: %v is not an input of the kernel", e.grp, n)
		}
	}
	qp, kp, vp, dop, lp, dlp := ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], ptrs[5]
	dt := a.pv.Info.DType
	k0 := b.Mul(b.ProgramID(0), bn)
	rn := ae.rows(k0, bn, false) // [BN,1] keys
	rdk, rdv := b.ExpandDims(b.Arange(0, ae.bdk), 0), b.ExpandDims(b.Arange(0, ae.bdv), 0)
	rdkCol := b.ExpandDims(b.Arange(0, ae.bdk), 1)
	kt := ae.block(kp, a.sk, a.hk, rn, rdk) // [BN,BDK]
	vt := ae.block(vp, a.sk, a.hv, rn, rdv) // [BN,BDV]
	var lo any = 0
	if a.skipsBlocks() { // the first block of queries with one at or below the diagonal
		lo = b.Mul(b.Div(k0, bm), bm)
	}
	init := []*tile.Value{b.Zeros(dt, bn, ae.bdk), b.Zeros(dt, bn, ae.bdv)}
	res := b.For(lo, a.sq, bm, init, func(m0 *tile.Value, c []*tile.Value) []*tile.Value {
		rmT := ae.rows(m0, bm, true)                 // [1,BM] queries
		rmCol := ae.rows(m0, bm, false)              // [BM,1]
		qT := ae.block(qp, a.sq, a.hk, rmT, rdkCol)  // [BDK,BM]
		dot := ae.block(dop, a.sq, a.hv, rmCol, rdv) // [BM,BDV]
		rowOff := b.Add(b.Mul(ae.bat, a.sq), rmT)
		rowMask := ae.inRange(rmT, a.sq, nil, 0)
		lse := e.loadOr0(b.AddPtr(lp, rowOff), rowMask)
		delta := e.loadOr0(b.AddPtr(dlp, rowOff), rowMask)
		ae.setTile(rmT, rn) // [BN,BM]
		s := b.Dot(kt, qT, nil, e.prec)
		dp := b.Dot(vt, b.Trans(dot), nil, e.prec)
		p, ds, err := ae.backwardTiles(s, lse, dp, delta)
		if err != nil {
			e.err = err
			return c
		}
		return []*tile.Value{b.Dot(ds, b.Trans(qT), c[0], e.prec), b.Dot(p, dot, c[1], e.prec)}
	})
	if e.err != nil {
		return e.err
	}
	keyOff := b.Add(b.Mul(ae.bat, a.sk), rn)
	for i, o := range []*Node{a.dk, a.dv} {
		p, err := ae.ptr(o, out)
		if err != nil {
			return err
		}
		d, cols := a.hk, rdk
		if i == 1 {
			d, cols = a.hv, rdv
		}
		b.Store(b.AddPtr(p, b.Add(b.Mul(keyOff, d), cols)), res[i], ae.inRange(rn, a.sk, cols, d))
	}
	if len(a.sums) > 0 {
		if err := ae.finishSums(out); err != nil {
			return err
		}
	}
	k.Grid = tile.Grid{tile.CDiv(a.sk, bn), a.nb}
	return nil
}

// finishSums: program (0, 0) adds up each Σ output's row sums (the other
// programs' loops run no step); the same order every run.
func (ae *attnEmit) finishSums(out *tile.Value) error {
	b, a, e := ae.b, ae.a, ae.e
	br, err := e.param("BLOCK_R")
	if err != nil {
		return err
	}
	n := a.nb * a.sq
	first := b.And(b.Eq(b.ProgramID(0), 0), b.Eq(ae.bat, 0))
	dt := a.pv.Info.DType
	for i, sum := range a.sums {
		rp := e.ptr[a.rowSums[i]]
		if rp == nil {
			return fmt.Errorf("graphpass: %v: %v is not an input of the kernel", e.grp, a.rowSums[i])
		}
		acc := b.For(0, b.Where(first, n, 0), br, []*tile.Value{b.Zeros(dt, br)}, func(i0 *tile.Value, c []*tile.Value) []*tile.Value {
			off := b.Add(b.Arange(0, br), i0)
			return []*tile.Value{b.Add(c[0], e.loadOr0(b.AddPtr(rp, off), b.Lt(off, n)))}
		})
		sp, err := ae.ptr(sum, out)
		if err != nil {
			return err
		}
		b.Store(sp, b.Sum(acc[0], 0), first)
	}
	return nil
}
