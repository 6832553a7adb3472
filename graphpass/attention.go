package graphpass

import (
	"fmt"

	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// An attention group is out = BatchedMatMul(SoftMax(f(BatchedMatMul(Q, K,
// false, true))), V) with f a chain of elementwise ops (a scale, an additive
// mask), run as one flash-style kernel: an online softmax over blocks of
// keys, so that the score matrix is never written. Only elementwise ops
// join it (a mask's or a scale's producers); it has no extra outputs.
var attentionKind = groupKind{
	name:  "attention",
	claim: findAttention,
	join: func(n *Node, grp *Group, t Target) (GroupKind, bool) {
		k := n.Info.Kind
		return AttentionGroup, k.Elementwise() && !k.Injective()
	},
	// BLOCK_M queries a program, BLOCK_N keys a step: 32×32 score tiles
	// (on the H200 at 4 warps, 8 scores a thread)
	tune: func(grp *Group, t Target, _ tile.Precision, meta tile.Meta) {
		meta["BLOCK_M"], meta["BLOCK_N"] = 32, 32
	},
	emit: emitAttention,
}

// findAttention claims the attention patterns whose inner values nobody else
// reads (in a training graph the backward pass reads the probabilities, and
// the pattern stays as it is), under Options.MatMul. It returns the new
// groups.
func findAttention(gr *Graph, writeOut func(*Node) bool, opt Options) []*Group {
	if !opt.MatMul {
		return nil
	}
	var groups []*Group
	for _, pv := range gr.Nodes {
		if pv.Group != nil || pv.Info.Kind != ops.BatchedMatMul || pv.Info.TransA || pv.Info.TransB {
			continue
		}
		p := pv.Inputs[0]
		if p.Info.Kind != ops.Softmax || p.Info.Log || len(p.Users) != 1 || writeOut(p) {
			continue
		}
		// the chain between the scores and the softmax
		members := map[*Node]bool{pv: true, p: true}
		var qk *Node
		ok := true
		var walk func(n *Node)
		walk = func(n *Node) {
			if !ok || members[n] {
				return
			}
			switch {
			case n.Info.Kind == ops.BatchedMatMul && !n.Info.TransA && n.Info.TransB && qk == nil:
				qk = n
				members[n] = true
				return
			case n.Info.Kind == ops.Unary || n.Info.Kind == ops.Binary:
				members[n] = true
				for _, in := range n.Inputs {
					switch in.Info.Kind {
					case ops.Unary, ops.Binary, ops.BatchedMatMul:
						if sameShape(in.Info.Shape, p.Info.Shape) {
							walk(in) // the score path
						}
					}
					// graph inputs, constants and other ops' results (a mask,
					// a scale) are read from outside
				}
			default:
				ok = false
			}
		}
		walk(p.Inputs[0])
		if !ok || qk == nil {
			continue
		}
		for n := range members { // no one outside reads an inner value
			if n == pv {
				continue
			}
			if writeOut(n) {
				ok = false
			}
			for _, u := range n.Users {
				if !members[u] && u.Info.Kind != ops.Constant {
					ok = false
				}
			}
		}
		qs, vs := qk.Info.Shape, pv.Inputs[1].Info.Shape
		if !ok || len(qs) != 3 || len(vs) != 3 || vs[1] != qs[2] {
			continue
		}
		grp := &Group{Kind: AttentionGroup, Root: pv, Full: qs, MatMul: qk}
		for n := range members {
			n.Group = grp
			grp.Members = append(grp.Members, n)
		}
		groups = append(groups, grp)
	}
	return groups
}

// emitAttention: program (b, i) computes rows [i·BM, (i+1)·BM) of batch
// b's output, looping over blocks of keys.
func emitAttention(e *emitter, out *tile.Value, k *Kernel) error {
	b, grp := e.b, e.grp
	qk, pv := grp.MatMul, grp.Root
	q, kk, v := e.ptr[qk.Inputs[0]], e.ptr[qk.Inputs[1]], e.ptr[pv.Inputs[1]]
	if q == nil || kk == nil || v == nil {
		return fmt.Errorf("graphpass: %v: q, k and v must be inputs of the kernel", grp)
	}
	nb, sq, sk := qk.Info.Shape[0], qk.Info.Shape[1], qk.Info.Shape[2]
	d := pv.Info.Shape[2]
	dq := qk.Inputs[0].Info.Shape[2]
	bm, err := e.param("BLOCK_M")
	if err != nil {
		return err
	}
	bn, err := e.param("BLOCK_N")
	if err != nil {
		return err
	}
	bd, bdq := max(16, pow2AtLeast(d)), max(16, pow2AtLeast(dq))
	dt := pv.Info.DType
	bat := b.ProgramID(0)
	rm := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), bm), b.Arange(0, bm)), 1) // [BM,1] query rows
	rdq := b.ExpandDims(b.Arange(0, bdq), 0)                                 // [1,BDQ]
	qt := b.Load(b.AddPtr(q, b.Add(b.Mul(b.Add(b.Mul(bat, sq), rm), dq), rdq)), b.And(b.Lt(rm, sq), b.Lt(rdq, dq)), 0.0)
	rdqCol := b.ExpandDims(b.Arange(0, bdq), 1) // [BDQ,1]
	rd := b.ExpandDims(b.Arange(0, bd), 0)      // [1,BD]
	init := []*tile.Value{b.Full(-inf, dt, bm, 1), b.Zeros(dt, bm, 1), b.Zeros(dt, bm, bd)}
	res := b.For(0, sk, bn, init, func(n0 *tile.Value, c []*tile.Value) []*tile.Value {
		mi, li, acc := c[0], c[1], c[2]
		rn := b.ExpandDims(b.Add(b.Arange(0, bn), n0), 0)                                                                           // [1,BN] keys
		kt := b.Load(b.AddPtr(kk, b.Add(b.Mul(b.Add(b.Mul(bat, sk), rn), dq), rdqCol)), b.And(b.Lt(rn, sk), b.Lt(rdqCol, dq)), 0.0) // [BDQ,BN]
		e.member = productTile(e, b.Dot(qt, kt, nil, e.prec))                                                                       // [BM,BN] scores
		e.mask = b.And(b.Lt(rm, sq), b.Lt(rn, sk))
		sv, err := e.gen(e.grp.Root.Inputs[0].Inputs[0], b.Add(b.Mul(b.Add(b.Mul(bat, sq), rm), sk), rn))
		if err != nil {
			e.err = err
			return c
		}
		sv = b.Where(b.Lt(rn, sk), sv, -inf)
		mNew := b.Maximum(mi, b.Max(sv, 1, tile.KeepDims))
		ms := b.Where(b.Eq(mNew, -inf), 0.0, mNew)
		alpha := b.Exp(b.Sub(mi, ms))
		pt := b.Exp(b.Sub(sv, ms))
		rnCol := b.ExpandDims(b.Add(b.Arange(0, bn), n0), 1)                                                                   // [BN,1]
		vt := b.Load(b.AddPtr(v, b.Add(b.Mul(b.Add(b.Mul(bat, sk), rnCol), d), rd)), b.And(b.Lt(rnCol, sk), b.Lt(rd, d)), 0.0) // [BN,BD]
		li = b.Add(b.Mul(li, alpha), b.Sum(pt, 1, tile.KeepDims))
		acc = b.Dot(pt, vt, b.Mul(acc, alpha), e.prec)
		return []*tile.Value{mNew, li, acc}
	})
	if e.err != nil {
		return e.err
	}
	// a row whose scores are all -∞ has l = 0 and gives 0/0 = NaN, as
	// softmax followed by the product does
	o := b.Div(res[2], res[1])
	b.Store(b.AddPtr(out, b.Add(b.Mul(b.Add(b.Mul(bat, sq), rm), d), rd)), o, b.And(b.Lt(rm, sq), b.Lt(rd, d)))
	k.Grid = tile.Grid{nb, tile.CDiv(sq, bm)}
	return nil
}
