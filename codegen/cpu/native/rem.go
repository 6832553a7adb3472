package native

import (
	"math"

	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
)

// f32 rem: fmod, as the reference computes it (float32(math.Mod(float64(x),
// float64(y))): exact, so the result is the remainder itself, bit for bit).
//
// Eight lanes in ymm (the op has no zmm form: fast.go's zmmOp), each half
// of four in float64, where |x| < 2¹²⁸ and |y| ≥ 2⁻¹⁴⁹ are normal and
// their quotient finite. The remainder r of |x| by |y| is reduced in steps:
// with y' = |y|·2^k, k = max(0, e(r) − e(|y|) − 52) (e the exponent), q =
// trunc(r/y') is below 2⁵³, so an integer and at most one more than
// ⌊r/y'⌋ (the division rounds up at most across one integer); r − q·y',
// a multiple of y's last place smaller than y' in magnitude, is exact in a
// fused multiply-add, and y' added back where it is negative; r mod y' mod
// |y| = r mod |y| since y' is a multiple of |y|. Each step takes 52 of the
// exponents' difference (at most 277 for f32 operands), so the loop runs
// until no lane has r ≥ |y|, at most six times. Go's special cases: NaN
// where y = 0, x is ±∞ or either is NaN (math.NaN's bits, as float32 makes
// them: 0x7fc00000), x where y is ±∞; the result has x's sign (−0 from
// −0). Those lanes are reduced as 0 by 1 and take their values after.

// rem32Temps is how many temporaries an f32 rem takes (tempsFor): rem32's
// ten and two for operands in memory (floatOp).
const rem32Temps = 12

// rem32: dst = x rem y of eight f32 lanes. x and y are read before dst is
// written and stay; t holds ten temporaries.
func (g *gen) rem32(dst, x, y amd64.VReg, t []amd64.VReg) {
	a := g.va()
	raw := a.Asm
	abs := g.constVec(0x7fffffff)
	inf := g.constF32(float32(math.Inf(1)))
	r0, r1, b0, b1, e0, e1, u, v, w, ok := t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9]
	// ok: 0 < |y| < ∞ and |x| < ∞ (ordered: NaN fails)
	raw.VANDPS(u, x, abs)
	raw.VANDPS(v, y, abs)
	raw.VCMPPS(ok, u, inf, amd64.CmpLT)
	raw.VCMPPS(w, v, inf, amd64.CmpLT)
	raw.VANDPS(ok, ok, w)
	raw.VCMPPS(w, v, g.constF32(0), amd64.CmpGT)
	raw.VANDPS(ok, ok, w)
	// the other lanes reduce 0 by 1
	raw.VANDPS(u, u, ok)
	raw.VMOVUPS(w, g.constF32(1))
	raw.VBLENDVPS(v, w, v, ok)
	raw.VCVTPS2PD(r0, u)
	raw.VEXTRACTF128(u, u, 1)
	raw.VCVTPS2PD(r1, u)
	raw.VCVTPS2PD(b0, v)
	raw.VEXTRACTF128(v, v, 1)
	raw.VCVTPS2PD(b1, v)
	// e(|y|) + 52, as a float64 integer
	exp := func(d, s amd64.VReg) { // the biased exponent field, as a float64
		raw.VPSRLQ(d, s, 52)
		raw.VPOR(d, d, g.constI64(0x4330000000000000))
		raw.VSUBPD(d, d, g.constF64(0x1p52))
	}
	exp(e0, b0)
	raw.VADDPD(e0, e0, g.constF64(52))
	exp(e1, b1)
	raw.VADDPD(e1, e1, g.constF64(52))
	loop := raw.NewLabel()
	raw.Bind(loop)
	for h := 0; h < 2; h++ {
		r, b, e := r0, b0, e0
		if h == 1 {
			r, b, e = r1, b1, e1
		}
		exp(u, r)
		raw.VSUBPD(u, u, e)
		raw.VMAXPD(u, u, g.constF64(0)) // k
		raw.VADDPD(u, u, g.constF64(0x1p52+1023))
		raw.VPSLLQ(u, u, 52)  // 2^k
		raw.VMULPD(u, u, b)   // y'
		raw.VDIVPD(v, r, u)   //
		raw.VROUNDPD(v, v, 3) // q
		raw.VFNMADD231PD(r, v, u)
		raw.VCMPPD(w, r, g.constF64(0), amd64.CmpLT)
		raw.VANDPD(w, w, u)
		raw.VADDPD(r, r, w)
	}
	raw.VCMPPD(u, r0, b0, amd64.CmpGE)
	raw.VCMPPD(v, r1, b1, amd64.CmpGE)
	raw.VORPS(u, u, v)
	raw.VTESTPS(u, u)
	raw.Jcc(amd64.CondNE, loop)
	raw.VCVTPD2PS(r0, r0)
	raw.VCVTPD2PS(r1, r1)
	raw.VINSERTF128(u, r0, r1, 1)
	raw.VANDPS(v, x, g.constVec(0x80000000))
	raw.VORPS(u, u, v) // x's sign
	// y = ±∞, x finite: x
	raw.VANDPS(v, y, abs)
	raw.VCMPPS(v, v, inf, amd64.CmpEQ)
	raw.VANDPS(w, x, abs)
	raw.VCMPPS(w, w, inf, amd64.CmpLT)
	raw.VANDPS(v, v, w)
	raw.VBLENDVPS(u, u, x, v)
	// NaN where not ok and not that
	raw.VORPS(v, v, ok)
	raw.VMOVUPS(w, g.constVec(0x7fc00000))
	raw.VBLENDVPS(dst, w, u, v)
}

// f64 rem: math.Mod(x, y), the reference's, bit for bit, by the same
// steps in float64 itself (remF64): e is subnormal-aware (a subnormal's
// exponent read after scaling it by 2⁵⁴), and 2^k, k up to 2098 (the
// largest float by the least subnormal), is three factors of at most 2¹⁰⁰⁰
// (each product exact: y' ≤ r is finite, and scaling a subnormal up loses
// nothing); the loop runs at most 41 times. NaN is math.NaN()'s bits.
// Written once for zmm registers (zasm); without AVX-512 on ymm halves
// (zasm.go: mathF64Pairs).

// remF64: dst = math.Mod(x, y) lane by lane. x and y are read before dst
// is written; t holds twelve temporaries.
func (g *gen) remF64(dst, x, y amd64.ZReg, t []amd64.VReg) {
	a := g.za()
	va := g.va()
	c := g.cF64
	tz := func(i int) amd64.ZReg { return z(t[i]) }
	absMask := g.constI64(1<<63 - 1).Bcst()
	r, b, eb, u, v, w, s := tz(0), tz(1), tz(2), tz(3), tz(4), tz(5), tz(6)
	// ok: 0 < |y| < ∞ and |x| < ∞; the other lanes reduce 0 by 1
	ok := func() amd64.KReg {
		k := va.newK()
		a.VPANDQZ(u, x, absMask)
		a.VPANDQZ(v, y, absMask)
		a.VCMPPDZ(k, u, c(math.Inf(1)), amd64.CmpLT)
		a.VCMPPDKZ(k, k, v, c(math.Inf(1)), amd64.CmpLT)
		a.VCMPPDKZ(k, k, v, c(0), amd64.CmpGT)
		return k
	}
	k := ok()
	a.VPXORQZ(r, r, r)
	a.VBLENDMPDZ(r, k, r, u)
	a.VBROADCASTSDZ(b, g.constF64(1))
	a.VBLENDMPDZ(b, k, b, v)
	// e(x) + bias: subnormals scaled by 2⁵⁴ first
	expo := func(e, x amd64.ZReg, bias float64) {
		sub := g.scaleSubnormalsF64(s, x, e)
		g.exponentF64(e, s, bias)
		a.VSUBPDZ(s, e, c(54))
		a.VBLENDMPDZ(e, sub, e, s)
	}
	expo(eb, b, -52) // e(|y|) + 52
	loop := a.NewLabel()
	a.Bind(loop)
	expo(u, r, 0)
	a.VSUBPDZ(u, u, eb)
	a.VMAXPDZ(u, u, c(0)) // k
	a.VMOVAPDZ(w, b)
	for range 3 { // y' = |y|·2^k in factors of at most 2¹⁰⁰⁰
		a.VMINPDZ(v, u, c(1000))
		a.VSUBPDZ(u, u, v)
		a.VADDPDZ(v, v, c(0x1p52+1023))
		a.VPSLLQZ(v, v, 52)
		a.VMULPDZ(w, w, v)
	}
	a.VDIVPDZ(v, r, w)
	a.VRNDSCALEPDZ(v, v, 3) // q
	a.VFNMADD231PDZ(r, v, w)
	kn := va.newK()
	a.VCMPPDZ(kn, r, c(0), amd64.CmpLT)
	a.VADDPDZ(v, r, w)
	a.VBLENDMPDZ(r, kn, r, v)
	kl := va.newK()
	a.VCMPPDZ(kl, r, b, amd64.CmpGE)
	a.KORTESTW(kl, kl)
	a.Jcc(amd64.CondNE, loop)
	// x's sign; x where y = ±∞ and x is finite; NaN where neither
	a.VPANDQZ(u, x, g.constI64(-1<<63).Bcst())
	a.VPORQZ(r, r, u)
	k = ok()
	ki := va.newK()
	a.VCMPPDZ(ki, v, c(math.Inf(1)), amd64.CmpEQ) // v: |y|
	a.VCMPPDKZ(ki, ki, u, c(math.Inf(1)), amd64.CmpLT)
	a.VBLENDMPDZ(r, ki, r, x)
	a.KORW(k, k, ki)
	a.VBROADCASTSDZ(u, g.constI64(int64(math.Float64bits(math.NaN()))))
	a.VBLENDMPDZ(dst, k, u, r)
}
