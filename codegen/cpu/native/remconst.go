package native

import (
	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
	"github.com/tilefuse/tilefuse/tile"
)

// Remainders of lanes across a vector: rem(x, d) with x an affine i32
// block whose lanes span more than d and d a constant (the mask of a
// kernel that keeps every d-th element, `(i + j) % 3 == 0`) is not affine
// in the lanes (plan.go declines it as an address), but a comparison or a
// cast reads it as a vector: x's lanes (intVec), then each lane's
// remainder, with the sign of x as the reference's truncated one.

// maxPeriod is the largest divisor remConst takes: a quotient |x|/d of
// |x| < 2³¹ that is not an integer lies at least 1/d from one, more than
// the division's rounding error in f64 (at most 2⁻²³ at |x/d| < 2³⁰), so
// truncating it gives the exact quotient.
const maxPeriod = 1 << 20

// periodic reports whether v is such a remainder of an affine i32 block
// (not a pointer's offsets) by a constant in [2, maxPeriod], and the
// constant.
func (p *plan) periodic(v *tile.Value) (int64, bool) {
	if v.Op != tile.OpRem || v.Type.DType != tile.I32 || v.Type.Ptr || v.Type.Shape.IsScalar() {
		return 0, false
	}
	x, y := p.in(v.Args[0]), p.in(v.Args[1])
	if x.kind != kAffine || x.aff == nil || x.aff.root >= 0 || y.kind != kAffine || y.aff == nil || !uniform(y.aff) {
		return 0, false
	}
	if c := y.aff.c; c != nil && c.op == sxConst && c.k >= 2 && c.k <= maxPeriod {
		return c.k, true
	}
	return 0, false
}

// remConst sets dst to the remainders of x's eight i32 lanes by d
// (periodic), through f64: each half's lanes converted exactly, divided
// by d, truncated (the exact quotient q: maxPeriod), x − q·d exact (one
// FMA of integers under 2³¹), converted back exactly. t: three temporary
// registers; dst may be x's register.
func (g *gen) remConst(dst, x amd64.VReg, d int64, t []amd64.VReg) {
	a := g.va()
	dv := g.constF64(float64(d))
	a.VEXTRACTF128(t[0], x, 1)
	a.VCVTDQ2PD(t[1], t[0]) // the high half's lanes
	a.VCVTDQ2PD(t[0], x)    // the low half's
	for _, h := range []amd64.VReg{t[0], t[1]} {
		a.VDIVPD(t[2], h, dv)
		a.VROUNDPD(t[2], t[2], 11) // toward zero, no precision exception
		a.VFNMADD231PD(h, t[2], dv)
		a.VCVTPD2DQ(h, h) // an integer: exact
	}
	a.VINSERTF128(dst, t[0], t[1], 1)
}
