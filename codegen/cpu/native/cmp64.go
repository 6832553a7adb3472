package native

import (
	"github.com/tilefuse/tilefuse/tile"
)

// Comparisons of i64 blocks. A kernel that indexes in 64 bits
// (tile.Builder.Index64: graphpass's kernels over tensors past
// graphpass.MaxElements) masks its lanes with comparisons of i64 affine
// blocks, an offset against a bound: x < n with x = pid·BLOCK + arange.
// The lanes are 32-bit here. Such a comparison of x and y is one of their
// difference d = x − y = c + L, c the part every lane shares (a 64-bit
// scalar) and L = Σ coef·q the part that moves with the lane (the rows'
// and the lanes'): x OP y ⟺ L OP −c. A program whose L stays within
// ±2³⁰ (checked at its start, as an i32 offset's wrap is: else it bails
// out, and the executor runs it) compares L's 32-bit lanes with −c
// clamped to the int32 range, which keeps every comparison's result: where
// −c passes the range, L is below (above) both −c and its clamp.

// compare64 plans comparison v of two i64 blocks: both affine, their
// difference kept for the phases (vinfo.cmp64), L's range checked.
func (p *plan) compare64(v *tile.Value) error {
	x, y := p.in(v.Args[0]), p.in(v.Args[1])
	if x.kind != kAffine || y.kind != kAffine || x.aff == nil || y.aff == nil || x.aff.root >= 0 || y.aff.root >= 0 {
		return unsupported(v, "i64 comparisons of values that are not affine in the lanes")
	}
	if x.aff.shape != y.aff.shape {
		return unsupported(v, "i64 comparison of blocks of shapes %v and %v", x.aff.shape, y.aff.shape)
	}
	d := &aff{root: -1, dt: tile.I64, shape: x.aff.shape, c: sAdd(x.aff.c, sNeg(y.aff.c))}
	for i := 0; i < d.shape.Rank; i++ {
		d.coef[i] = sAdd(x.aff.coef[i], sNeg(y.aff.coef[i]))
	}
	// L + 2³⁰ and L − 2³⁰ within int32: L in [−2³⁰, 2³⁰)
	for _, c := range []int64{1 << 30, -1 << 30} {
		w := *d
		w.c = sConst(c)
		p.needWrap = append(p.needWrap, wrapCheck{&w, p.cur})
	}
	p.in(v).cmp64 = d
	return nil
}

// compare64Node is comparison u of i64 blocks at lanes m: L's lanes
// against −c clamped, two integer lane vectors (compare64).
func (pg *phaseGen) compare64Node(u *tile.Value, m lanes) (*node, error) {
	d := pg.g.p.in(u).cmp64
	lanes := *d
	lanes.c = sConst(0)
	pl, err := pg.affPattern(&lanes, -2, m)
	if err != nil {
		return nil, err
	}
	bound := aff{root: -1, dt: tile.I64, shape: d.shape, c: sClamp32(sNeg(d.c))}
	for i := range bound.coef {
		bound.coef[i] = sConst(0)
	}
	pb, err := pg.affPattern(&bound, -2, m)
	if err != nil {
		return nil, err
	}
	if pl.elast < 0 {
		return nil, unsupported(u, "i64 comparison of lanes with a stride that is not constant")
	}
	nl := pg.add(&node{v: u.Args[0], op: opIntVec, pat: pl})
	nb := pg.add(&node{v: u.Args[1], op: opIntVec, pat: pb})
	return pg.add(&node{v: u, op: opCompute, args: []*node{nl, nb}}), nil
}
