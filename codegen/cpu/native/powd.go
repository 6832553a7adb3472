package native

import (
	"math"

	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
)

// f64 pow: the reference's is interp.Pow64, Go's math.Pow with Log64 for
// its logarithm. powF64 computes Go's general form on every lane — |y| =
// yi + yf, yf folded into (-½, ½], a1 = e^(yf·log x) (expCoreF64 of
// logF64's result: |yf·log x| ≤ 373, where math.Exp is its amd64
// assembly), x = x1·2^xe (Frexp), then |y|'s integer part bit by bit,
// a1 times x1 and ae plus xe at each set bit, x1 squared and renormalised
// to [½, 1) between (a loop of as many iterations as the largest lane's
// bits: at most 64), 1/a1 where y < 0, and Ldexp(a1, ae) — then blends
// Go's special cases over it, the lowest in Pow's order first. Every step
// is an IEEE operation or exact (integers and exponents as exact f64
// values: i >> 1 is ⌊i/2⌋, i & 1 is i - 2⌊i/2⌋), so the lanes are
// Pow64's bit for bit (TestPowF64Native). Without AVX-512 on ymm halves
// (zasm.go).

// powF64: dst = interp.Pow64(x, y) lane by lane. x and y are read before
// dst is written; t holds twelve temporaries.
func (g *gen) powF64(dst, x, y amd64.ZReg, t []amd64.VReg) {
	a := g.za()
	va := g.va()
	c := g.cF64
	tz := func(i int) amd64.ZReg { return z(t[i]) }
	absMask, signMask := g.constI64(1<<63-1).Bcst(), g.constI64(-1<<63).Bcst()
	expField := int64(0x7ff) << 52

	// a1 = e^(yf·log x), 1 where yf = 0; yi = |y|'s integer part, both
	// after the fold (foldY). Where no lane has a fraction (integer
	// exponents, as x² is) the logarithm and e^ are skipped.
	ay, yi, yf, u, a1 := tz(0), tz(1), tz(2), tz(3), tz(4)
	foldY := func() {
		a.VPANDQZ(ay, y, absMask)
		a.VRNDSCALEPDZ(yi, ay, 3)
		a.VSUBPDZ(yf, ay, yi)
		k := va.newK()
		a.VCMPPDZ(k, yf, c(0.5), amd64.CmpGT)
		a.VSUBPDZ(u, yf, c(1))
		a.VBLENDMPDZ(yf, k, yf, u)
		a.VADDPDZ(u, yi, c(1))
		a.VBLENDMPDZ(yi, k, yi, u)
	}
	foldY()
	a.VBROADCASTSDZ(a1, g.constF64(1))
	whole := a.NewLabel()
	k := va.newK()
	a.VCMPPDZ(k, yf, c(0), amd64.CmpNEQ)
	a.KORTESTW(k, k)
	a.Jcc(amd64.CondE, whole)
	l := tz(11)
	g.logF64(l, x, t[:10])
	foldY()
	a.VMULPDZ(u, yf, l)
	g.expCoreF64(a1, u, t[5:9])
	k = va.newK()
	a.VCMPPDZ(k, yf, c(0), amd64.CmpEQ)
	a.VBLENDMPDZ(a1, k, a1, c(1))
	a.Bind(whole)
	foldY()

	// x = x1·2^xe, x1 in [½, 1) with x's sign (subnormals of either sign
	// scaled by 2^54 first)
	xs, xe, x1, ae, i := tz(5), tz(6), tz(7), tz(8), tz(0)
	sub := va.newK()
	a.VPANDQZ(xs, x, absMask)
	a.VCMPPDZ(sub, xs, c(0), amd64.CmpGT)
	a.VCMPPDKZ(sub, sub, xs, c(0x1p-1022), amd64.CmpLT)
	a.VMULPDZ(xe, x, c(0x1p54))
	a.VBLENDMPDZ(xs, sub, x, xe)
	g.exponentF64(xe, xs, 1022)
	a.VSUBPDZ(u, xe, c(54))
	a.VBLENDMPDZ(xe, sub, xe, u)
	a.VPANDQZ(x1, xs, g.constI64(^expField).Bcst())
	a.VPORQZ(x1, x1, g.constI64(0x3fe<<52).Bcst())
	a.VPXORQZ(ae, ae, ae)
	// i = yi below 2^63, else 0 (NaN, ∞ and the large ones: special
	// cases), so that the loop ends for every lane
	k = va.newK()
	a.VCMPPDZ(k, yi, c(0x1p63), amd64.CmpLT)
	a.VPXORQZ(i, i, i)
	a.VBLENDMPDZ(i, k, i, yi)

	h, r := tz(2), tz(3)
	top, done := a.NewLabel(), a.NewLabel()
	a.Bind(top)
	act := va.newK()
	a.VCMPPDZ(act, i, c(0), amd64.CmpNEQ)
	a.KORTESTW(act, act)
	a.Jcc(amd64.CondE, done)
	// xe past ±4096: ae + xe is beyond any float64's exponent; the lane ends
	a.VPANDQZ(h, xe, absMask)
	brk := va.newK()
	a.VCMPPDKZ(brk, act, h, c(4096), amd64.CmpGT)
	a.VADDPDZ(h, ae, xe)
	a.VBLENDMPDZ(ae, brk, ae, h)
	a.VPXORQZ(h, h, h)
	a.VBLENDMPDZ(i, brk, i, h)
	// a set bit: a1·x1, ae + xe
	a.VMULPDZ(h, i, c(0.5))
	a.VRNDSCALEPDZ(h, h, 3)
	a.VSUBPDZ(r, i, h)
	a.VSUBPDZ(r, r, h)
	odd := va.newK()
	a.VCMPPDZ(odd, r, c(0), amd64.CmpNEQ)
	a.VMULPDZ(r, a1, x1)
	a.VBLENDMPDZ(a1, odd, a1, r)
	a.VADDPDZ(r, ae, xe)
	a.VBLENDMPDZ(ae, odd, ae, r)
	// x1², renormalised
	a.VMULPDZ(x1, x1, x1)
	a.VADDPDZ(xe, xe, xe)
	lo := va.newK()
	a.VCMPPDZ(lo, x1, c(0.5), amd64.CmpLT)
	a.VADDPDZ(r, x1, x1)
	a.VBLENDMPDZ(x1, lo, x1, r)
	a.VSUBPDZ(r, xe, c(1))
	a.VBLENDMPDZ(xe, lo, xe, r)
	a.VMOVAPDZ(i, h)
	a.JMP(top)
	a.Bind(done)

	// y < 0: 1/a1, -ae
	k = va.newK()
	a.VCMPPDZ(k, y, c(0), amd64.CmpLT)
	a.VBROADCASTSDZ(r, g.constF64(1))
	a.VDIVPDZ(r, r, a1)
	a.VBLENDMPDZ(a1, k, a1, r)
	a.VPXORQZ(r, ae, signMask)
	a.VBLENDMPDZ(ae, k, ae, r)

	// Ldexp(a1, ae), a1 normal: e = ae + a1's exponent; 0 below -1075,
	// ∞ above 1023, the field e + 53 then × 2^-53 below -1022
	e, ec, res := tz(9), tz(10), tz(11)
	g.exponentF64(e, a1, 1023)
	a.VADDPDZ(e, e, ae)
	den := va.newK()
	a.VCMPPDZ(den, e, c(-1022), amd64.CmpLT)
	a.VADDPDZ(r, e, c(53))
	a.VBLENDMPDZ(ec, den, e, r)
	a.VMAXPDZ(ec, ec, c(-1022))
	a.VMINPDZ(ec, ec, c(1023))
	g.pow2F64(r, ec)
	a.VPANDQZ(res, a1, g.constI64(^expField).Bcst())
	a.VPORQZ(res, res, r)
	a.VMULPDZ(r, res, c(0x1p-53))
	a.VBLENDMPDZ(res, den, res, r)
	sg := tz(10)
	a.VPANDQZ(sg, a1, signMask)
	k = va.newK()
	a.VCMPPDZ(k, e, c(1023), amd64.CmpGT)
	a.VPORQZ(r, sg, c(math.Inf(1)))
	a.VBLENDMPDZ(res, k, res, r)
	k = va.newK()
	a.VCMPPDZ(k, e, c(-1075), amd64.CmpLT)
	a.VBLENDMPDZ(res, k, res, sg)

	// the special cases, the lowest in Pow's order first. |y| = yi + yf
	// again (before the fold); ax = |x|
	ax, big := tz(3), tz(4)
	a.VPANDQZ(ay, y, absMask)
	a.VRNDSCALEPDZ(yi, ay, 3)
	a.VSUBPDZ(yf, ay, yi)
	a.VPANDQZ(ax, x, absMask)
	// yi ≥ 2^63, and y = ±∞: 1 where x = -1, else 0 where |x| < 1 is
	// y > 0, else ∞
	k1, k2 := va.newK(), va.newK()
	a.VCMPPDZ(k1, ax, c(1), amd64.CmpLT)
	a.VCMPPDZ(k2, y, c(0), amd64.CmpGT)
	a.KXORW(k1, k1, k2)
	a.VPXORQZ(big, big, big)
	a.VBLENDMPDZ(big, k1, big, c(math.Inf(1)))
	k = va.newK()
	a.VCMPPDZ(k, x, c(-1), amd64.CmpEQ)
	a.VBLENDMPDZ(big, k, big, c(1))
	k = va.newK()
	a.VCMPPDZ(k, yi, c(0x1p63), amd64.CmpGE)
	a.VBLENDMPDZ(res, k, res, big)
	// a fraction of a negative x: NaN
	nan := c(math.NaN())
	k = va.newK()
	a.VCMPPDZ(k, yf, c(0), amd64.CmpNEQ)
	a.VCMPPDKZ(k, k, x, c(0), amd64.CmpLT)
	a.VBLENDMPDZ(res, k, res, nan)
	// y = ½: √x; y = -½: 1/√x
	q, w := tz(5), tz(6)
	a.VSQRTPDZ(q, x)
	k = va.newK()
	a.VCMPPDZ(k, y, c(0.5), amd64.CmpEQ)
	a.VBLENDMPDZ(res, k, res, q)
	a.VBROADCASTSDZ(w, g.constF64(1))
	a.VDIVPDZ(w, w, q)
	k = va.newK()
	a.VCMPPDZ(k, y, c(-0.5), amd64.CmpEQ)
	a.VBLENDMPDZ(res, k, res, w)
	// x's sign where y is an odd integer (below 2^53)
	a.VMULPDZ(q, yi, c(0.5))
	a.VRNDSCALEPDZ(q, q, 3)
	a.VSUBPDZ(w, yi, q)
	a.VSUBPDZ(w, w, q)
	k = va.newK()
	a.VCMPPDZ(k, w, c(0), amd64.CmpNEQ)
	a.VCMPPDKZ(k, k, yf, c(0), amd64.CmpEQ)
	a.VCMPPDKZ(k, k, ay, c(0x1p53), amd64.CmpLT)
	a.VPANDQZ(w, x, signMask)
	a.VPXORQZ(sg, sg, sg)
	a.VBLENDMPDZ(sg, k, sg, w)
	// x = ±∞: ∞ where y > 0, else 0; with the sign
	a.VPXORQZ(w, w, w)
	k = va.newK()
	a.VCMPPDZ(k, y, c(0), amd64.CmpGT)
	a.VBLENDMPDZ(w, k, w, c(math.Inf(1)))
	a.VPORQZ(w, w, sg)
	k = va.newK()
	a.VCMPPDZ(k, ax, c(math.Inf(1)), amd64.CmpEQ)
	a.VBLENDMPDZ(res, k, res, w)
	// y = ±∞ (after x = ±∞ in Pow's order)
	k = va.newK()
	a.VCMPPDZ(k, ay, c(math.Inf(1)), amd64.CmpEQ)
	a.VBLENDMPDZ(res, k, res, big)
	// x = ±0: ∞ where y < 0, else 0; with the sign
	a.VPXORQZ(w, w, w)
	k = va.newK()
	a.VCMPPDZ(k, y, c(0), amd64.CmpLT)
	a.VBLENDMPDZ(w, k, w, c(math.Inf(1)))
	a.VPORQZ(w, w, sg)
	k = va.newK()
	a.VCMPPDZ(k, x, c(0), amd64.CmpEQ)
	a.VBLENDMPDZ(res, k, res, w)
	// NaN operands: NaN; y = 1: x; y = 0 or x = 1: 1
	k = va.newK()
	a.VCMPPDZ(k, x, y, amd64.CmpUNORD)
	a.VBLENDMPDZ(res, k, res, nan)
	k = va.newK()
	a.VCMPPDZ(k, y, c(1), amd64.CmpEQ)
	a.VBLENDMPDZ(res, k, res, x)
	k1, k2 = va.newK(), va.newK()
	a.VCMPPDZ(k1, y, c(0), amd64.CmpEQ)
	a.VCMPPDZ(k2, x, c(1), amd64.CmpEQ)
	a.KORW(k1, k1, k2)
	a.VBLENDMPDZ(dst, k1, res, c(1))
}
