package native

import (
	"math"

	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
	"github.com/tilefuse/tilefuse/tile"
)

// f64 exp and tanh on eight lanes, bit for bit the reference's.
//
// The reference's f64 exp (tile/interp.Exp64) is Go's math.Exp, with
// e^(x-1)·e for 709 < x < 709.8, where Go's amd64 assembly overflows
// early; on amd64 with FMA (the native code needs FMA) that assembly
// (math/exp_amd64.s, Shibata's method from SLEEF) computes n = round(x·log2
// e) in int32, r = x - n·ln2 in two fused steps, e^(r/16) by a degree-8
// Taylor polynomial in fused multiply-adds, squared four times as
// y·(y+2) (the last with +1 fused), times 2^n (2^(n+1022)·2^-1022 where
// 2^n is subnormal, 0 below 2^-1075, +Inf from 2^1024). Every step is an
// IEEE operation on float64, so eight lanes of it in zmm registers give
// the scalar results exactly: exp64 is that algorithm in Go, its scalar
// twin (TestMathF64: bit for bit Exp64 and the vector code). The
// reference's tanh is Go's math.Tanh (pure Go: a rational function below
// 0.625, 1 - 2/(e^{2|x|}+1) with e^ from math.Exp above it, ±1 past
// 44.01), whose operations the vector code repeats in the same order
// (tanh64, its twin, with explicit conversions so that no compiler fuses
// them). Go documents both as within 1 ulp of the exact result.

const (
	expLog2E    = 1.4426950408889634073599246810018920
	expLn2U     = 0.69314718055966295651160180568695068359375
	expLn2L     = 0.28235290563031577122588448175013436025525412068e-12
	expOverflow = 7.09782712893384e+02
	tanhMaxLog  = 8.8029691931113054295988e+01 // log(2**127), as math.Tanh
	tanhSat     = 0.5 * tanhMaxLog
)

// expTaylor64: the Taylor coefficients of e^r from 1/8! to 1 (Go's
// exprodata, in the order the assembly takes them).
var expTaylor64 = [...]float64{2.4801587301587301587e-5, 1.9841269841269841270e-4,
	1.3888888888888888889e-3, 8.3333333333333333333e-3, 4.1666666666666666667e-2,
	1.6666666666666666667e-1, 0.5, 1.0}

var tanhP64 = [...]float64{-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3}
var tanhQ64 = [...]float64{1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3}

// exp64 is the reference's f64 exp (interp.Exp64 on amd64 with FMA), as
// the vector code computes it.
func exp64(x float64) float64 {
	if x > 709 && x < 709.8 {
		return float64(expArch64(x-1) * math.E)
	}
	return expArch64(x)
}

// expArch64 is Go's amd64 math.Exp (its FMA path).
func expArch64(x float64) float64 {
	switch {
	case x != x:
		return x
	case x > expOverflow:
		return math.Inf(1)
	}
	t := float64(x * expLog2E)
	nf := math.RoundToEven(t) // CVTSD2SL: to nearest, MinInt32 out of range
	if !(nf >= math.MinInt32 && nf <= math.MaxInt32) {
		nf = math.MinInt32
	}
	r := math.FMA(-nf, expLn2U, x)
	r = math.FMA(-nf, expLn2L, r)
	r = float64(r * 0.0625)
	p := expTaylor64[0]
	for _, c := range expTaylor64[1:] {
		p = math.FMA(p, r, c)
	}
	y := float64(r * p)
	for i := 0; i < 3; i++ {
		y = float64(y * float64(y+2))
	}
	y = math.FMA(y, float64(y+2), 1)
	e := nf + 1023
	switch {
	case e < -52:
		return 0
	case e <= 0:
		return float64(float64(y*math.Float64frombits(uint64(e+1022)<<52)) * 0x1p-1022)
	case e >= 0x7ff:
		return math.Inf(1)
	}
	return float64(y * math.Float64frombits(uint64(e)<<52))
}

// tanh64 is Go's math.Tanh, each operation rounded as the Go code
// (without fusion) rounds it.
func tanh64(x float64) float64 {
	z := math.Abs(x)
	switch {
	case z > tanhSat:
		return math.Copysign(1, x)
	case z >= 0.625:
		s := expArch64(float64(2 * z))
		z = float64(1 - float64(2/float64(s+1)))
		if x < 0 {
			z = -z
		}
		return z
	case x == 0:
		return x
	}
	s := float64(x * x)
	p := float64(float64(float64(float64(tanhP64[0]*s)+tanhP64[1])*s) + tanhP64[2])
	q := float64(float64(float64(float64(float64(s+tanhQ64[0])*s)+tanhQ64[1])*s) + tanhQ64[2])
	return float64(x + float64(float64(float64(x*s)*p)/q))
}

// cF64 is float64 constant x as a broadcast operand ({1to8}).
func (g *gen) cF64(x float64) amd64.Mem { return g.constF64(x).Bcst() }

// expCoreF64: y = expArch64(x) for lanes where x is finite and at most
// expOverflow (others: anything). x is read first and stays; y is
// written last; t holds four temporaries.
func (g *gen) expCoreF64(y, x amd64.ZReg, t []amd64.VReg) {
	a := g.za()
	va := g.va()
	nf, r, p, u := z(t[0]), z(t[1]), z(t[2]), z(t[3])
	a.VMULPDZ(nf, x, g.cF64(expLog2E))
	a.VCVTPD2DQZ(nf, nf) // n in the low half
	a.VCVTDQ2PDZ(nf, nf)
	a.VMOVAPDZ(r, x)
	a.VFNMADD231PDZ(r, nf, g.cF64(expLn2U))
	a.VFNMADD231PDZ(r, nf, g.cF64(expLn2L))
	a.VMULPDZ(r, r, g.cF64(0.0625))
	a.VBROADCASTSDZ(p, g.constF64(expTaylor64[0]))
	for _, c := range expTaylor64[1:] {
		a.VFMADD213PDZ(p, r, g.cF64(c))
	}
	a.VMULPDZ(p, r, p) // y
	for i := 0; i < 3; i++ {
		a.VADDPDZ(u, p, g.cF64(2))
		a.VMULPDZ(p, p, u)
	}
	a.VADDPDZ(u, p, g.cF64(2))
	a.VFMADD213PDZ(p, u, g.cF64(1))
	// × 2^n: the exponent field e = n + 1023 (n + 1023 + 1022 where 2^n is
	// subnormal, then × 2^-1022), built by adding 2^52 and shifting its
	// low bits into place
	a.VADDPDZ(r, nf, g.cF64(1023))
	den := va.newK()
	a.VCMPPDZ(den, r, g.cF64(0), amd64.CmpLE)
	a.VADDPDZ(u, r, g.cF64(1022))
	a.VBLENDMPDZ(r, den, r, u)
	a.VADDPDZ(r, r, g.cF64(0x1p52))
	a.VPSLLQZ(r, r, 52)
	a.VMULPDZ(p, p, r)
	// × 2^-1022 where 2^n is subnormal, × 1 elsewhere: a product with a
	// subnormal result costs the CPU far more than one with a normal one
	// (exp of ±4: 2.0 → 1.4 ms over 2M lanes), so none is formed where the
	// lane does not need it
	a.VBROADCASTSDZ(u, g.constF64(1))
	a.VBLENDMPDZ(u, den, u, g.cF64(0x1p-1022))
	a.VMULPDZ(p, p, u)
	k := va.newK()
	a.VCMPPDZ(k, nf, g.cF64(-1075), amd64.CmpLT)
	a.VBLENDMPDZ(p, k, p, g.cF64(0))
	k = va.newK()
	a.VCMPPDZ(k, nf, g.cF64(1024), amd64.CmpGE)
	a.VBLENDMPDZ(y, k, p, g.cF64(math.Inf(1)))
}

// expF64: dst = exp64(x) lane by lane. x is read before dst is written; t
// holds six temporaries.
func (g *gen) expF64(dst, x amd64.ZReg, t []amd64.VReg) {
	a := g.za()
	va := g.va()
	xs, y := z(t[4]), z(t[5])
	// 709 < x < 709.8: e^(x-1)·e
	near := va.newK()
	a.VCMPPDZ(near, x, g.cF64(709), amd64.CmpGT)
	a.VCMPPDKZ(near, near, x, g.cF64(709.8), amd64.CmpLT)
	a.VSUBPDZ(xs, x, g.cF64(1))
	a.VBLENDMPDZ(xs, near, x, xs)
	g.expCoreF64(y, xs, t[:4])
	big := va.newK()
	a.VCMPPDZ(big, xs, g.cF64(expOverflow), amd64.CmpGT) // +Inf too (NaN: false)
	a.VBLENDMPDZ(y, big, y, g.cF64(math.Inf(1)))
	a.VMULPDZ(z(t[0]), y, g.cF64(math.E))
	a.VBLENDMPDZ(y, near, y, z(t[0]))
	nan := va.newK()
	a.VCMPPDZ(nan, x, x, amd64.CmpUNORD)
	a.VBLENDMPDZ(dst, nan, y, x)
}

// tanhF64: dst = tanh64(x) lane by lane. x is read before dst is written;
// t holds ten temporaries.
func (g *gen) tanhF64(dst, x amd64.ZReg, t []amd64.VReg) {
	a := g.za()
	va := g.va()
	zz, s, p, q, res := z(t[4]), z(t[5]), z(t[6]), z(t[7]), z(t[8])
	a.VPANDQZ(zz, x, g.constI64(1<<63-1).Bcst())
	// below 0.625: x + x·s·P(s)/Q(s), s = x²
	a.VMULPDZ(s, x, x)
	a.VMULPDZ(p, s, g.cF64(tanhP64[0]))
	a.VADDPDZ(p, p, g.cF64(tanhP64[1]))
	a.VMULPDZ(p, p, s)
	a.VADDPDZ(p, p, g.cF64(tanhP64[2]))
	a.VADDPDZ(q, s, g.cF64(tanhQ64[0]))
	a.VMULPDZ(q, q, s)
	a.VADDPDZ(q, q, g.cF64(tanhQ64[1]))
	a.VMULPDZ(q, q, s)
	a.VADDPDZ(q, q, g.cF64(tanhQ64[2]))
	a.VMULPDZ(s, x, s)
	a.VMULPDZ(s, s, p)
	a.VDIVPDZ(s, s, q)
	a.VADDPDZ(res, x, s)
	// from 0.625: 1 - 2/(e^{2|x|}+1), x's sign
	a.VADDPDZ(s, zz, zz)
	g.expCoreF64(p, s, t[:4])
	a.VADDPDZ(p, p, g.cF64(1))
	a.VBROADCASTSDZ(q, g.constF64(2))
	a.VDIVPDZ(p, q, p)
	a.VBROADCASTSDZ(q, g.constF64(1))
	a.VSUBPDZ(p, q, p)
	sign := z(t[9])
	a.VPANDQZ(sign, x, g.constI64(-1<<63).Bcst())
	a.VPORQZ(p, p, sign)
	k := va.newK()
	a.VCMPPDZ(k, zz, g.cF64(0.625), amd64.CmpGE)
	a.VBLENDMPDZ(res, k, res, p)
	// past 44.01: ±1
	a.VPORQZ(q, q, sign)
	k = va.newK()
	a.VCMPPDZ(k, zz, g.cF64(tanhSat), amd64.CmpGT)
	a.VBLENDMPDZ(res, k, res, q)
	// ±0: x
	k = va.newK()
	a.VCMPPDZ(k, x, g.cF64(0), amd64.CmpEQ)
	a.VBLENDMPDZ(dst, k, res, x)
}

// mathF64 emits the f64 math function op of x into dst (mathF64Forms),
// each the reference's bit for bit.
func (g *gen) mathF64(op tile.Op, dst, x amd64.VReg, t []amd64.VReg) {
	mathF64Forms[op](g, z(dst), z(x), t)
}

// mathF64Forms are the f64 math functions in zmm registers (x read before
// dst is written; t their temporaries: ten, twelve for log2).
var mathF64Forms = map[tile.Op]func(g *gen, dst, x amd64.ZReg, t []amd64.VReg){
	tile.OpExp:     (*gen).expF64,
	tile.OpTanh:    (*gen).tanhF64,
	tile.OpLog:     (*gen).logF64,
	tile.OpSigmoid: (*gen).sigmoidF64,
	tile.OpLog1p:   (*gen).log1pF64,
	tile.OpExpm1:   (*gen).expm1F64,
	tile.OpErf:     (*gen).erfF64,
	tile.OpExp2:    (*gen).exp2F64,
	tile.OpLog2:    (*gen).log2F64,
	tile.OpSin:     func(g *gen, dst, x amd64.ZReg, t []amd64.VReg) { g.sincosF64(dst, x, t, false) },
	tile.OpCos:     func(g *gen, dst, x amd64.ZReg, t []amd64.VReg) { g.sincosF64(dst, x, t, true) },
}

// f64 log: the reference's Log64 is Go's math.Log (on amd64 its assembly,
// math/log_amd64.s: x = f1·2^k with f1 in [√½, √2) — f1 ≤ √½/… doubled —
// f = f1 - 1, s = f/(2+f), a degree-7 polynomial in s² split in two, k·ln2
// in two parts; no FMA), with subnormal x scaled by 2^54 first (its
// assembly reads their exponent field as if normal). log64 is that in Go,
// the vector code's twin.

const (
	logHSqrt2 = 7.07106781186547524401e-01
	logLn2Hi  = 6.93147180369123816490e-01
	logLn2Lo  = 1.90821492927058770002e-10
	logL1     = 6.666666666666735130e-01
	logL2     = 3.999999999940941908e-01
	logL3     = 2.857142874366239149e-01
	logL4     = 2.222219843214978396e-01
	logL5     = 1.818357216161805012e-01
	logL6     = 1.531383769920937332e-01
	logL7     = 1.479819860511658591e-01
	logSub    = 54 * math.Ln2 // the scaled subnormals' correction, as interp.Log64
)

// log64 is the reference's f64 log (interp.Log64 on amd64).
func log64(x float64) float64 {
	if x > 0 && x < 0x1p-1022 {
		return float64(logArch64(float64(x*0x1p54)) - logSub)
	}
	return logArch64(x)
}

// logArch64 is Go's amd64 math.Log.
func logArch64(x float64) float64 {
	switch {
	case x == 0:
		return math.Inf(-1)
	case math.Signbit(x):
		return math.NaN()
	case x != x || math.IsInf(x, 1):
		return x
	}
	bits := math.Float64bits(x)
	f1 := math.Float64frombits(bits&(1<<52-1) | math.Float64bits(0.5))
	k := float64(int64(bits>>52&0x7ff) - 0x3fe)
	if f1 <= logHSqrt2 {
		k, f1 = k-1, float64(f1*2)
	}
	f := float64(f1 - 1)
	s := float64(f / float64(2+f))
	s2 := float64(s * s)
	s4 := float64(s2 * s2)
	t1 := float64(s2 * float64(logL1+float64(s4*float64(logL3+float64(s4*float64(logL5+float64(s4*logL7)))))))
	t2 := float64(s4 * float64(logL2+float64(s4*float64(logL4+float64(s4*logL6)))))
	r := float64(t1 + t2)
	hfsq := float64(float64(0.5*f) * f)
	return float64(k*logLn2Hi) - float64(float64(hfsq-float64(float64(s*float64(hfsq+r))+float64(k*logLn2Lo)))-f)
}

// logF64: dst = log64(x) lane by lane. x is read before dst is written; t
// holds ten temporaries.
func (g *gen) logF64(dst, x amd64.ZReg, t []amd64.VReg) {
	a := g.za()
	va := g.va()
	xs, f1, k, u, f, s, s2, s4, p, q := z(t[0]), z(t[1]), z(t[2]), z(t[3]), z(t[4]), z(t[5]), z(t[6]), z(t[7]), z(t[8]), z(t[9])
	// subnormals: × 2^54
	sub := g.scaleSubnormalsF64(xs, x, u)
	// f1 = the mantissa in [0.5, 1), k = the exponent (2^52 + e, less 2^52 + 1022)
	a.VPANDQZ(f1, xs, g.constI64(1<<52-1).Bcst())
	a.VPORQZ(f1, f1, g.cF64(0.5))
	g.exponentF64(k, xs, 0x3fe)
	lo := va.newK()
	a.VCMPPDZ(lo, f1, g.cF64(logHSqrt2), amd64.CmpLE)
	a.VSUBPDZ(u, k, g.cF64(1))
	a.VBLENDMPDZ(k, lo, k, u)
	a.VADDPDZ(u, f1, f1)
	a.VBLENDMPDZ(f1, lo, f1, u)
	a.VSUBPDZ(f, f1, g.cF64(1))
	a.VADDPDZ(u, f, g.cF64(2))
	a.VDIVPDZ(s, f, u)
	a.VMULPDZ(s2, s, s)
	a.VMULPDZ(s4, s2, s2)
	a.VMULPDZ(p, s4, g.cF64(logL7))
	a.VADDPDZ(p, p, g.cF64(logL5))
	a.VMULPDZ(p, p, s4)
	a.VADDPDZ(p, p, g.cF64(logL3))
	a.VMULPDZ(p, p, s4)
	a.VADDPDZ(p, p, g.cF64(logL1))
	a.VMULPDZ(p, s2, p) // t1
	a.VMULPDZ(q, s4, g.cF64(logL6))
	a.VADDPDZ(q, q, g.cF64(logL4))
	a.VMULPDZ(q, q, s4)
	a.VADDPDZ(q, q, g.cF64(logL2))
	a.VMULPDZ(q, s4, q) // t2
	a.VADDPDZ(p, p, q)  // R
	a.VMULPDZ(s2, f, g.cF64(0.5))
	a.VMULPDZ(s2, s2, f) // hfsq
	a.VADDPDZ(p, p, s2)  // hfsq + R
	a.VMULPDZ(p, s, p)
	a.VMULPDZ(u, k, g.cF64(logLn2Lo))
	a.VADDPDZ(p, p, u)
	a.VSUBPDZ(u, s2, p)
	a.VSUBPDZ(u, u, f)
	a.VMULPDZ(p, k, g.cF64(logLn2Hi))
	a.VSUBPDZ(p, p, u)
	// subnormals' correction; ±0: -Inf; x < 0: NaN; +Inf, NaN: x
	a.VSUBPDZ(u, p, g.cF64(logSub))
	a.VBLENDMPDZ(p, sub, p, u)
	kz := va.newK()
	a.VCMPPDZ(kz, x, g.cF64(0), amd64.CmpEQ)
	a.VBLENDMPDZ(p, kz, p, g.cF64(math.Inf(-1)))
	kn := va.newK()
	a.VCMPPDZ(kn, x, g.cF64(0), amd64.CmpLT)
	a.VBLENDMPDZ(p, kn, p, g.cF64(math.NaN()))
	kx := va.newK()
	a.VCMPPDZ(kx, x, g.cF64(math.Inf(1)), amd64.CmpEQ)
	a.VBLENDMPDZ(p, kx, p, x)
	kx = va.newK()
	a.VCMPPDZ(kx, x, x, amd64.CmpUNORD)
	a.VBLENDMPDZ(dst, kx, p, x)
}

// sigmoid64 is the reference's f64 sigmoid (tile/interp: 1/(1+e^-x) for
// x ≥ 0, e^x/(1+e^x) below, e^ being Exp64), the vector code's twin.
func sigmoid64(x float64) float64 {
	if x >= 0 {
		return float64(1 / float64(1+exp64(-x)))
	}
	e := exp64(x)
	return float64(e / float64(1+e))
}

// sigmoidF64: dst = sigmoid64(x) lane by lane. x is read before dst is
// written; t holds ten temporaries.
func (g *gen) sigmoidF64(dst, x amd64.ZReg, t []amd64.VReg) {
	a := g.za()
	xs, e, d := z(t[6]), z(t[7]), z(t[8])
	pos := g.va().newK()
	a.VCMPPDZ(pos, x, g.cF64(0), amd64.CmpGE)
	a.VPXORQZ(xs, x, g.constI64(-1<<63).Bcst())
	a.VBLENDMPDZ(xs, pos, x, xs) // -x where x ≥ 0
	g.expF64(e, xs, t[:6])
	a.VADDPDZ(d, e, g.cF64(1))
	a.VBLENDMPDZ(e, pos, e, g.cF64(1)) // the numerator: 1 where x ≥ 0
	a.VDIVPDZ(dst, e, d)
}

// f64 log1p: the reference's is Go's math.Log1p (pure Go on amd64:
// FreeBSD's s_log1p.c — u = 1 + x and its rounding's correction c, u
// normalised to [√½, √2) as 2^k·u', f = u' - 1, s = f/(2 + f) and a
// degree-7 polynomial in s², with a branch for |x| < 2⁻²⁹, one for f
// near 0 and the k = 0 forms). log1pF64 computes every form on every lane
// and blends them as the branches choose, each form's operations in Go's
// order (no fused multiply-add), so its results are math.Log1p's bit for
// bit (TestLog1pF64Native); without AVX-512 on ymm halves (zasm.go).

const (
	log1pSqrt2M1     = 4.142135623730950488017e-01
	log1pSqrt2HalfM1 = -2.928932188134524755992e-01
	log1pLn2Hi       = 6.93147180369123816490e-01
	log1pLn2Lo       = 1.90821492927058770002e-10
)

var log1pLp = [...]float64{6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
	2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01, 1.479819860511658591e-01}

// log1pF64: dst = math.Log1p(x) lane by lane (NaN where it is NaN). x is
// read before dst is written; t holds ten temporaries.
func (g *gen) log1pF64(dst, x amd64.ZReg, t []amd64.VReg) {
	a := g.za()
	va := g.va()
	ax, u, k, c, iu, f, hfsq, s, w, r := z(t[0]), z(t[1]), z(t[2]), z(t[3]), z(t[4]), z(t[5]), z(t[6]), z(t[7]), z(t[8]), z(t[9])
	ones := g.constI64(-1).Bcst()
	a.VPANDQZ(ax, x, g.constI64(1<<63-1).Bcst())
	// u = 1 + x (x itself from 2^53), k its exponent, c the correction
	kBig := va.newK()
	a.VCMPPDZ(kBig, ax, g.cF64(1<<53), amd64.CmpGE)
	a.VADDPDZ(u, x, g.cF64(1))
	a.VBLENDMPDZ(u, kBig, u, x)
	g.exponentF64(k, u, 1023)
	a.VSUBPDZ(c, u, x)
	a.VBROADCASTSDZ(iu, g.constF64(1))
	a.VSUBPDZ(c, iu, c) // 1 - (u - x)
	a.VSUBPDZ(iu, u, g.cF64(1))
	a.VSUBPDZ(iu, x, iu) // x - (u - 1)
	kPos := va.newK()
	a.VCMPPDZ(kPos, k, g.cF64(0), amd64.CmpGT)
	a.VBLENDMPDZ(c, kPos, iu, c)
	a.VDIVPDZ(c, c, u)
	a.VPXORQZ(iu, iu, iu)
	a.VBLENDMPDZ(c, kBig, c, iu) // 0 from 2^53
	// u's mantissa iu (compared as the subnormal doubles its bits are):
	// below √2's, u' = 1.iu; else u' = 0.1iu, k + 1, and iu (2^52 - iu)>>2
	a.VPANDQZ(iu, u, g.constI64(1<<52-1).Bcst())
	kHi := va.newK()
	a.VCMPPDZ(kHi, iu, g.constI64(0x0006a09e667f3bcd).Bcst(), amd64.CmpGE)
	a.VPORQZ(f, iu, g.cF64(1))
	a.VPORQZ(hfsq, iu, g.cF64(0.5))
	a.VBLENDMPDZ(u, kHi, f, hfsq)
	a.VADDPDZ(f, k, g.cF64(1))
	a.VBLENDMPDZ(k, kHi, k, f)
	// iu (as changed) = 0, as a mask of f64 lanes: iu = 0 below √2's
	// mantissa, iu > 2^52 - 4 above it
	kZ0, kZ1 := va.newK(), va.newK()
	a.VCMPPDZ(kZ0, iu, g.cF64(0), amd64.CmpEQ)
	a.VCMPPDZ(kZ1, iu, g.constI64(1<<52-4).Bcst(), amd64.CmpGT)
	a.VPXORQZ(hfsq, hfsq, hfsq)
	a.VBLENDMPDZ(s, kZ0, hfsq, ones)
	a.VBLENDMPDZ(w, kZ1, hfsq, ones)
	a.VBLENDMPDZ(iu, kHi, s, w)
	a.VSUBPDZ(f, u, g.cF64(1))
	// √½ - 1 < x < √2 - 1: k = 0, f = x, iu = 1
	kK0p := va.newK()
	a.VCMPPDZ(kK0p, ax, g.cF64(log1pSqrt2M1), amd64.CmpLT)
	a.VCMPPDKZ(kK0p, kK0p, x, g.cF64(log1pSqrt2HalfM1), amd64.CmpGT)
	a.VBLENDMPDZ(f, kK0p, f, x)
	a.VBLENDMPDZ(k, kK0p, k, hfsq)
	a.VBLENDMPDZ(iu, kK0p, iu, hfsq)
	// the general forms
	a.VMULPDZ(hfsq, f, g.cF64(0.5))
	a.VMULPDZ(hfsq, hfsq, f)
	a.VADDPDZ(s, f, g.cF64(2))
	a.VDIVPDZ(s, f, s)
	a.VMULPDZ(w, s, s) // z
	a.VMULPDZ(r, w, g.cF64(log1pLp[6]))
	for i := 5; i >= 0; i-- {
		a.VADDPDZ(r, r, g.cF64(log1pLp[i]))
		a.VMULPDZ(r, r, w)
	} // R
	a.VADDPDZ(r, hfsq, r)
	a.VMULPDZ(r, s, r) // s·(hfsq + R)
	a.VMULPDZ(s, k, g.cF64(log1pLn2Lo))
	a.VADDPDZ(s, s, c) // k·Ln2Lo + c
	a.VSUBPDZ(w, hfsq, r)
	a.VSUBPDZ(w, f, w) // k = 0: f - (hfsq - s·(hfsq + R))
	a.VADDPDZ(r, r, s)
	a.VSUBPDZ(r, hfsq, r)
	a.VSUBPDZ(r, r, f)
	a.VMULPDZ(c, k, g.cF64(log1pLn2Hi))
	a.VSUBPDZ(r, c, r) // else
	kK0 := va.newK()
	a.VCMPPDZ(kK0, k, g.cF64(0), amd64.CmpEQ)
	a.VBLENDMPDZ(r, kK0, r, w)
	// iu = 0: R1 = hfsq·(1 - ⅔f)
	a.VMULPDZ(w, f, g.cF64(0.66666666666666666))
	a.VBROADCASTSDZ(ax, g.constF64(1))
	a.VSUBPDZ(w, ax, w)
	a.VMULPDZ(w, hfsq, w)
	a.VSUBPDZ(hfsq, f, w) // k = 0: f - R1
	a.VSUBPDZ(w, w, s)
	a.VSUBPDZ(w, w, f)
	a.VSUBPDZ(w, c, w) // else k·Ln2Hi - ((R1 - (k·Ln2Lo + c)) - f)
	a.VBLENDMPDZ(w, kK0, w, hfsq)
	a.VADDPDZ(s, c, s) // f = 0: k·Ln2Hi + (c + k·Ln2Lo), or 0 where k = 0
	a.VPXORQZ(hfsq, hfsq, hfsq)
	a.VBLENDMPDZ(s, kK0, s, hfsq)
	kF0 := va.newK()
	a.VCMPPDZ(kF0, f, g.cF64(0), amd64.CmpEQ)
	a.VBLENDMPDZ(w, kF0, w, s)
	kIz := va.newK()
	a.VCMPPDZ(kIz, iu, g.cF64(0), amd64.CmpNEQ) // all ones (a NaN) ≠ 0
	a.VBLENDMPDZ(r, kIz, r, w)
	// |x| < 2⁻²⁹: x - x·x·½ (x below 2⁻⁵⁴)
	a.VPANDQZ(ax, x, g.constI64(1<<63-1).Bcst())
	a.VMULPDZ(u, x, x)
	a.VMULPDZ(u, u, g.cF64(0.5))
	a.VSUBPDZ(u, x, u)
	kT := va.newK()
	a.VCMPPDZ(kT, ax, g.cF64(0x1p-54), amd64.CmpLT)
	a.VBLENDMPDZ(u, kT, u, x)
	kS := va.newK()
	a.VCMPPDZ(kS, ax, g.cF64(0x1p-29), amd64.CmpLT)
	a.VBLENDMPDZ(r, kS, r, u)
	// x < -1: NaN; -1: -Inf; +Inf, NaN: x
	kN := va.newK()
	a.VCMPPDZ(kN, x, g.cF64(-1), amd64.CmpLT)
	a.VBLENDMPDZ(r, kN, r, g.cF64(math.NaN()))
	kN = va.newK()
	a.VCMPPDZ(kN, x, g.cF64(-1), amd64.CmpEQ)
	a.VBLENDMPDZ(r, kN, r, g.cF64(math.Inf(-1)))
	kN = va.newK()
	a.VCMPPDZ(kN, x, g.cF64(math.Inf(1)), amd64.CmpEQ)
	a.VBLENDMPDZ(r, kN, r, x)
	kN = va.newK()
	a.VCMPPDZ(kN, x, x, amd64.CmpUNORD)
	a.VBLENDMPDZ(dst, kN, r, x)
}

// f64 sin and cos: the reference's are Go's math.Sin and math.Cos (pure
// Go on amd64: Cephes' — j = ⌊|x|·4/π⌋ made even, the octant j mod 8, z =
// ((|x| - y·PI4A) - y·PI4B) - y·PI4C, and the degree-13 sin or degree-14
// cos polynomial in z by the octant, its sign by the octant and x's).
// sincosF64 computes both polynomials on every lane and blends them as
// the branches choose, each in Go's order of operations, so its results
// are math.Sin's and math.Cos's bit for bit (TestSinCosF64Native). From
// 2^29 Go reduces by Payne–Hanek (trigReduce): a vector with such a lane
// (∞ included) bails out and the launch runs on the executor. Without
// AVX-512 on ymm halves (zasm.go).

const (
	sinPI4A        = 7.85398125648498535156e-1
	sinPI4B        = 3.77489470793079817668e-8
	sinPI4C        = 2.69515142907905952645e-15
	sinReduceLimit = 1 << 29 // Go's reduceThreshold
)

var sinP64 = [...]float64{1.58962301576546568060e-10, -2.50507477628578072866e-8, 2.75573136213857245213e-6,
	-1.98412698295895385996e-4, 8.33333333332211858878e-3, -1.66666666666666307295e-1}
var cosP64 = [...]float64{-1.13585365213876817300e-11, 2.08757008419747316778e-9, -2.75573141792967388112e-7,
	2.48015872888517045348e-5, -1.38888888888730564116e-3, 4.16666666666665929218e-2}

// sincosF64: dst = math.Sin(x), or math.Cos(x), lane by lane, after a
// bail-out where any |x| ≥ 2^29. x is read before dst is written; t holds
// ten temporaries.
func (g *gen) sincosF64(dst, x amd64.ZReg, t []amd64.VReg, cos bool) {
	a := g.za()
	va := g.va()
	ax, y, m, sg, r, zz, p, q, u, ones := z(t[0]), z(t[1]), z(t[2]), z(t[3]), z(t[4]), z(t[5]), z(t[6]), z(t[7]), z(t[8]), z(t[9])
	one := g.cF64(1)
	a.VBROADCASTSDZ(ones, g.constF64(1))
	a.VPANDQZ(ax, x, g.constI64(1<<63-1).Bcst())
	kb := va.newK()
	a.VCMPPDZ(kb, ax, g.cF64(sinReduceLimit), amd64.CmpGE) // ∞ too; NaN is not
	a.KORTESTW(kb, kb)
	a.Jcc(amd64.CondNE, g.bail)
	// the sign: x's for sin (1 where negative), none for cos
	a.VPXORQZ(sg, sg, sg)
	if !cos {
		kn := va.newK()
		a.VCMPPDZ(kn, x, g.cF64(0), amd64.CmpLT)
		a.VBLENDMPDZ(sg, kn, sg, one)
	}
	// y = ⌊|x|·4/π⌋, made even; m = y mod 8
	a.VMULPDZ(y, ax, g.cF64(4/math.Pi))
	a.VRNDSCALEPDZ(y, y, 3)
	a.VMULPDZ(u, y, g.cF64(0.5))
	a.VRNDSCALEPDZ(m, u, 3)
	ko := va.newK()
	a.VCMPPDZ(ko, u, m, amd64.CmpNEQ) // odd
	a.VADDPDZ(u, y, one)
	a.VBLENDMPDZ(y, ko, y, u)
	a.VMULPDZ(m, y, g.cF64(0.125))
	a.VRNDSCALEPDZ(m, m, 1)
	a.VMULPDZ(m, m, g.cF64(8))
	a.VSUBPDZ(m, y, m)
	// r = ((|x| - y·PI4A) - y·PI4B) - y·PI4C
	a.VMULPDZ(u, y, g.cF64(sinPI4A))
	a.VSUBPDZ(r, ax, u)
	a.VMULPDZ(u, y, g.cF64(sinPI4B))
	a.VSUBPDZ(r, r, u)
	a.VMULPDZ(u, y, g.cF64(sinPI4C))
	a.VSUBPDZ(r, r, u)
	// m > 3: m - 4, the sign flipped
	k4 := va.newK()
	a.VCMPPDZ(k4, m, g.cF64(3), amd64.CmpGT)
	a.VSUBPDZ(u, m, g.cF64(4))
	a.VBLENDMPDZ(m, k4, m, u)
	a.VSUBPDZ(u, ones, sg)
	a.VBLENDMPDZ(sg, k4, sg, u)
	if cos { // m > 1: the sign flipped again
		k1 := va.newK()
		a.VCMPPDZ(k1, m, one, amd64.CmpGT)
		a.VSUBPDZ(u, ones, sg)
		a.VBLENDMPDZ(sg, k1, sg, u)
	}
	a.VMULPDZ(zz, r, r)
	// sin r: r + r·zz·P(zz)
	g.hornerF64(p, zz, sinP64[:])
	a.VMULPDZ(u, r, zz)
	a.VMULPDZ(p, u, p)
	a.VADDPDZ(p, r, p)
	// cos r: 1 - 0.5·zz + zz·zz·Q(zz)
	g.hornerF64(q, zz, cosP64[:])
	a.VMULPDZ(u, zz, zz)
	a.VMULPDZ(q, u, q)
	a.VMULPDZ(u, zz, g.cF64(0.5))
	a.VSUBPDZ(u, ones, u)
	a.VADDPDZ(q, u, q)
	// the polynomial by the octant: cos r at m = 1, 2 for sin, at m = 0, 3 for cos
	k12 := va.newK()
	a.VCMPPDZ(k12, m, g.cF64(0.5), amd64.CmpGT)
	a.VCMPPDKZ(k12, k12, m, g.cF64(2.5), amd64.CmpLT)
	if cos {
		a.VBLENDMPDZ(p, k12, q, p)
	} else {
		a.VBLENDMPDZ(p, k12, p, q)
	}
	kneg := va.newK()
	a.VCMPPDZ(kneg, sg, g.cF64(0.5), amd64.CmpGT)
	a.VPXORQZ(u, p, g.constI64(-1<<63).Bcst())
	a.VBLENDMPDZ(p, kneg, p, u)
	// sin: ±0 as they are; NaN: NaN
	if !cos {
		kz := va.newK()
		a.VCMPPDZ(kz, x, g.cF64(0), amd64.CmpEQ)
		a.VBLENDMPDZ(p, kz, p, x)
	}
	kx := va.newK()
	a.VCMPPDZ(kx, x, x, amd64.CmpUNORD)
	a.VBLENDMPDZ(dst, kx, p, x)
}

// hornerF64: p = ((c0·z + c1)·z + …)·z + c_last, each product and sum
// rounded, in Go's order.
func (g *gen) hornerF64(p, z amd64.ZReg, c []float64) {
	a := g.za()
	a.VMULPDZ(p, z, g.cF64(c[0]))
	for i, k := range c[1:] {
		a.VADDPDZ(p, p, g.cF64(k))
		if i < len(c)-2 {
			a.VMULPDZ(p, p, z)
		}
	}
}

// f64 exp2 and log2: the reference's exp2 is Go's math.Exp2 (pure Go on
// amd64: k = int(x ± ½), t = x - k, r = t·Ln2Hi - (-t·Ln2Lo), Cephes'
// rational form of e^r and Ldexp(y, k), which rounds y·2^k once: one
// product by 2^k here, 2^k built from k's bits, by steps of 2^54 where it
// is subnormal and of 2 at k = 1024); its log2 is interp.Log2_64: exact at
// powers of two, else Log64(x)·log₂e (logF64, then one product). Both bit
// for bit (TestExp2Log2F64Native); without AVX-512 on ymm halves (zasm.go).

var exp2P64 = [...]float64{4.13813679705723846039e-08, -1.65339022054652515390e-06, 6.61375632143793436117e-05,
	-2.77777777770155933842e-03, 1.66666666666666657415e-01}

// pow2F64: d = 2^k for integral f64 lanes k in [-1022, 1023] (its bits
// (k + 1023) << 52, read from k + 1023 + 2^52's low bits).
func (g *gen) pow2F64(d, k amd64.ZReg) {
	a := g.za()
	a.VADDPDZ(d, k, g.cF64(1023+0x1p52))
	a.VPSLLQZ(d, d, 52)
}

// exp2F64: dst = math.Exp2(x) lane by lane. x is read before dst is
// written; t holds ten temporaries.
func (g *gen) exp2F64(dst, x amd64.ZReg, t []amd64.VReg) {
	a := g.za()
	va := g.va()
	k, u, hi, lo, r, tt, c, y, w, ones := z(t[0]), z(t[1]), z(t[2]), z(t[3]), z(t[4]), z(t[5]), z(t[6]), z(t[7]), z(t[8]), z(t[9])
	a.VBROADCASTSDZ(ones, g.constF64(1))
	// k = int(x + ½) above 0, int(x - ½) below, 0 at ±0 (x clamped to the
	// range: NaN and the ends are blended below)
	a.VMAXPDZ(u, x, g.cF64(-1075))
	a.VMINPDZ(u, u, g.cF64(1025))
	a.VADDPDZ(k, u, g.cF64(0.5))
	a.VSUBPDZ(w, u, g.cF64(0.5))
	kn := va.newK()
	a.VCMPPDZ(kn, u, g.cF64(0), amd64.CmpLT)
	a.VBLENDMPDZ(k, kn, k, w)
	a.VRNDSCALEPDZ(k, k, 3)
	a.VSUBPDZ(tt, u, k)                                   // t = x - k
	a.VMULPDZ(hi, tt, g.cF64(6.93147180369123816490e-01)) // t·Ln2Hi
	a.VPXORQZ(lo, tt, g.constI64(-1<<63).Bcst())
	a.VMULPDZ(lo, lo, g.cF64(1.90821492927058770002e-10)) // -t·Ln2Lo
	// expmulti: r = hi - lo, c = r - t·P(t), t = r², y = 1 - ((lo - r·c/(2 - c)) - hi)
	a.VSUBPDZ(r, hi, lo)
	a.VMULPDZ(tt, r, r)
	a.VMULPDZ(c, tt, g.cF64(exp2P64[0]))
	for _, p := range exp2P64[1:] {
		a.VADDPDZ(c, c, g.cF64(p))
		a.VMULPDZ(c, c, tt)
	}
	a.VSUBPDZ(c, r, c)
	a.VMULPDZ(y, r, c)
	a.VBROADCASTSDZ(w, g.constF64(2))
	a.VSUBPDZ(w, w, c)
	a.VDIVPDZ(y, y, w)
	a.VSUBPDZ(y, lo, y)
	a.VSUBPDZ(y, y, hi)
	a.VSUBPDZ(y, ones, y)
	// Ldexp(y, k): y·2^k rounded once — 2^(k+54)·2^-54 below -1022,
	// 2^1023·2 at 1024
	ks := va.newK()
	a.VCMPPDZ(ks, k, g.cF64(-1022), amd64.CmpLT)
	a.VADDPDZ(w, k, g.cF64(54))
	a.VBLENDMPDZ(w, ks, k, w)
	a.VMINPDZ(w, w, g.cF64(1023))
	g.pow2F64(u, w)
	a.VMULPDZ(y, y, u)
	a.VMULPDZ(u, y, g.cF64(0x1p-54))
	a.VBLENDMPDZ(y, ks, y, u)
	kb := va.newK()
	a.VCMPPDZ(kb, k, g.cF64(1023), amd64.CmpGT)
	a.VADDPDZ(u, y, y)
	a.VBLENDMPDZ(y, kb, y, u)
	// x > Overflow: +Inf; x < Underflow: 0; NaN: x
	kk := va.newK()
	a.VCMPPDZ(kk, x, g.cF64(1.0239999999999999e+03), amd64.CmpGT)
	a.VBLENDMPDZ(y, kk, y, g.cF64(math.Inf(1)))
	kk = va.newK()
	a.VCMPPDZ(kk, x, g.cF64(-1.0740e+03), amd64.CmpLT)
	a.VPXORQZ(u, u, u)
	a.VBLENDMPDZ(y, kk, y, u)
	kk = va.newK()
	a.VCMPPDZ(kk, x, x, amd64.CmpUNORD)
	a.VBLENDMPDZ(dst, kk, y, x)
}

// log2F64: dst = interp.Log2_64(x) lane by lane. x is read before dst is
// written; t holds twelve temporaries (logF64 takes the first ten).
func (g *gen) log2F64(dst, x amd64.ZReg, t []amd64.VReg) {
	a := g.za()
	va := g.va()
	l, e := z(t[10]), z(t[11])
	g.logF64(l, x, t[:10])
	a.VMULPDZ(l, l, g.cF64(math.Log2E))
	// powers of two (subnormal ones scaled by 2^54 first): their exponent
	xs, m := z(t[0]), z(t[1])
	sub := g.scaleSubnormalsF64(xs, x, m)
	g.exponentF64(e, xs, 1023)
	a.VSUBPDZ(m, e, g.cF64(54))
	a.VBLENDMPDZ(e, sub, e, m)
	a.VPANDQZ(m, xs, g.constI64(1<<52-1).Bcst())
	p2 := va.newK()
	a.VCMPPDZ(p2, m, g.cF64(0), amd64.CmpEQ) // mantissa bits 0 (compared as a double)
	a.VCMPPDKZ(p2, p2, x, g.cF64(0), amd64.CmpGT)
	a.VCMPPDKZ(p2, p2, x, g.cF64(math.Inf(1)), amd64.CmpLT)
	a.VBLENDMPDZ(dst, p2, l, e)
}

// scaleSubnormalsF64: xs = x, its positive subnormal lanes times 2^54 (so
// that their exponent field reads as a normal's); the opmask of those
// lanes is returned. u is a temporary.
func (g *gen) scaleSubnormalsF64(xs, x, u amd64.ZReg) amd64.KReg {
	a := g.za()
	sub := g.va().newK()
	a.VCMPPDZ(sub, x, g.cF64(0), amd64.CmpGT)
	a.VCMPPDKZ(sub, sub, x, g.cF64(0x1p-1022), amd64.CmpLT)
	a.VMULPDZ(u, x, g.cF64(0x1p54))
	a.VBLENDMPDZ(xs, sub, x, u)
	return sub
}

// exponentF64: e = x's exponent field less bias, as an f64 (the field
// ORed into 2^52's bits, 2^52 subtracted, then bias: each exact).
func (g *gen) exponentF64(e, x amd64.ZReg, bias float64) {
	a := g.za()
	a.VPSRLQZ(e, x, 52)
	a.VPANDQZ(e, e, g.constI64(0x7ff).Bcst())
	a.VPORQZ(e, e, g.cF64(0x1p52))
	a.VSUBPDZ(e, e, g.cF64(0x1p52))
	a.VSUBPDZ(e, e, g.cF64(bias))
}

// f64 expm1: the reference's is Go's math.Expm1 (pure Go on amd64:
// FreeBSD's s_expm1.c — x = k·ln2 + r with r = hi - lo and its rounding's
// correction c, k = 0 for |x| ≤ ln2/2, ±1 below 3·ln2/2, else int(x/ln2 ±
// ½); a rational form of e^r - 1 in r²/2 (R1 a degree-5 polynomial), then
// one of six forms by k, the last three adding k to y's exponent field).
// expm1F64 computes every form on every lane and blends them as the
// branches choose, each in Go's order (no fused multiply-add). k = 0 and
// k = ±1 are the general reduction with k as it is (x - 0·Ln2Hi is x,
// and c then 0; ±1·Ln2Hi is exact), so one reduction serves every lane.
// Bit for bit (TestExpm1F64Native); without AVX-512 on ymm halves
// (zasm.go).

var expm1Q64 = [...]float64{-2.01099218183624371326e-07, 4.00821782732936239552e-06,
	-7.93650757867487942473e-05, 1.58730158725481460165e-03, -3.33333333333331316428e-02, 1}

// expm1F64: dst = math.Expm1(x) lane by lane. x is read before dst is
// written; t holds ten temporaries.
func (g *gen) expm1F64(dst, x amd64.ZReg, t []amd64.VReg) {
	a := g.za()
	va := g.va()
	c := g.cF64
	ax, k, hi, lo, xr, cr := z(t[0]), z(t[1]), z(t[2]), z(t[3]), z(t[4]), z(t[5])
	a.VPANDQZ(ax, x, g.constI64(1<<63-1).Bcst())
	neg := va.newK()
	a.VCMPPDZ(neg, x, c(0), amd64.CmpLT)
	// k = int(x/ln2 ± ½); ±1 below 3·ln2/2; 0 to ln2/2
	a.VMULPDZ(hi, x, c(1.44269504088896338700e+00))
	a.VADDPDZ(lo, hi, c(0.5))
	a.VSUBPDZ(hi, hi, c(0.5))
	a.VBLENDMPDZ(k, neg, lo, hi)
	a.VRNDSCALEPDZ(k, k, 3)
	a.VBROADCASTSDZ(lo, g.constF64(1))
	a.VBLENDMPDZ(lo, neg, lo, c(-1))
	k1 := va.newK()
	a.VCMPPDZ(k1, ax, c(1.03972077083991796413e+00), amd64.CmpLT)
	a.VBLENDMPDZ(k, k1, k, lo)
	k0 := va.newK()
	a.VCMPPDZ(k0, ax, c(3.46573590279972654709e-01), amd64.CmpLE)
	a.VBLENDMPDZ(k, k0, k, c(0))
	// hi = x - k·Ln2Hi, lo = k·Ln2Lo, xr = hi - lo, cr = (hi - xr) - lo
	a.VMULPDZ(lo, k, c(6.93147180369123816490e-01))
	a.VSUBPDZ(hi, x, lo)
	a.VMULPDZ(lo, k, c(1.90821492927058770002e-10))
	a.VSUBPDZ(xr, hi, lo)
	a.VSUBPDZ(cr, hi, xr)
	a.VSUBPDZ(cr, cr, lo)
	// hfx = xr/2, hxs = xr·hfx, r1 = R1(hxs), tt = 3 - r1·hfx,
	// e = hxs·((r1 - tt)/(6 - xr·tt))
	hfx, hxs, r1, tt, w, v := hi, lo, z(t[6]), z(t[7]), z(t[8]), z(t[9])
	a.VMULPDZ(hfx, xr, c(0.5))
	a.VMULPDZ(hxs, xr, hfx)
	g.hornerF64(r1, hxs, expm1Q64[:])
	a.VMULPDZ(w, r1, hfx)
	a.VBROADCASTSDZ(tt, g.constF64(3))
	a.VSUBPDZ(tt, tt, w)
	a.VSUBPDZ(r1, r1, tt)
	a.VMULPDZ(w, xr, tt)
	a.VBROADCASTSDZ(v, g.constF64(6))
	a.VSUBPDZ(v, v, w)
	a.VDIVPDZ(r1, r1, v)
	e := r1
	a.VMULPDZ(e, hxs, e)
	// k = 0: xr - (xr·e - hxs)
	res := hfx
	a.VMULPDZ(w, xr, e)
	a.VSUBPDZ(w, w, hxs)
	a.VSUBPDZ(res, xr, w)
	// e = (xr·(e - cr) - cr) - hxs
	a.VSUBPDZ(w, e, cr)
	a.VMULPDZ(w, xr, w)
	a.VSUBPDZ(w, w, cr)
	a.VSUBPDZ(e, w, hxs)
	// k = -1: 0.5·(xr - e) - 0.5
	a.VSUBPDZ(w, xr, e)
	a.VMULPDZ(w, w, c(0.5))
	a.VSUBPDZ(w, w, c(0.5))
	kk := va.newK()
	a.VCMPPDZ(kk, k, c(-1), amd64.CmpEQ)
	a.VBLENDMPDZ(res, kk, res, w)
	// k = 1: -2·(e - (xr + 0.5)) where xr < -0.25, else 1 + 2·(xr - e)
	a.VADDPDZ(w, xr, c(0.5))
	a.VSUBPDZ(w, e, w)
	a.VMULPDZ(w, w, c(-2))
	a.VSUBPDZ(v, xr, e)
	a.VMULPDZ(v, v, c(2))
	a.VADDPDZ(v, v, c(1))
	kk = va.newK()
	a.VCMPPDZ(kk, xr, c(-0.25), amd64.CmpLT)
	a.VBLENDMPDZ(v, kk, v, w)
	kk = va.newK()
	a.VCMPPDZ(kk, k, c(1), amd64.CmpEQ)
	a.VBLENDMPDZ(res, kk, res, v)
	// k << 52, to add to an exponent field (k + 1.5·2^52's low bits)
	kb := hxs
	a.VADDPDZ(kb, k, c(0x1.8p52))
	a.VPSLLQZ(kb, kb, 52)
	// k ≤ -2 or k > 56: (1 - (e - xr))·2^k - 1
	a.VSUBPDZ(w, e, xr)
	a.VBROADCASTSDZ(v, g.constF64(1))
	a.VSUBPDZ(w, v, w)
	a.VPADDQZ(w, w, kb)
	a.VSUBPDZ(w, w, c(1))
	ka, kb2 := va.newK(), va.newK()
	a.VCMPPDZ(ka, k, c(-2), amd64.CmpLE)
	a.VCMPPDZ(kb2, k, c(56), amd64.CmpGT)
	a.KORW(ka, ka, kb2)
	a.VBLENDMPDZ(res, ka, res, w)
	// 2^-k for 2 ≤ k ≤ 56 (clamped elsewhere)
	p2 := tt
	a.VMINPDZ(p2, k, c(60))
	a.VMAXPDZ(p2, p2, c(0))
	a.VPXORQZ(p2, p2, g.constI64(-1<<63).Bcst())
	g.pow2F64(p2, p2)
	// 2 ≤ k < 20: ((1 - 2^-k) - (e - xr))·2^k
	a.VSUBPDZ(v, v, p2) // v was 1
	a.VSUBPDZ(w, e, xr)
	a.VSUBPDZ(w, v, w)
	a.VPADDQZ(w, w, kb)
	kk = va.newK()
	a.VCMPPDZ(kk, k, c(2), amd64.CmpGE)
	a.VCMPPDKZ(kk, kk, k, c(20), amd64.CmpLT)
	a.VBLENDMPDZ(res, kk, res, w)
	// 20 ≤ k ≤ 56: ((xr - (e + 2^-k)) + 1)·2^k
	a.VADDPDZ(w, e, p2)
	a.VSUBPDZ(w, xr, w)
	a.VADDPDZ(w, w, c(1))
	a.VPADDQZ(w, w, kb)
	kk = va.newK()
	a.VCMPPDZ(kk, k, c(20), amd64.CmpGE)
	a.VCMPPDKZ(kk, kk, k, c(56), amd64.CmpLE)
	a.VBLENDMPDZ(res, kk, res, w)
	// |x| < 2^-54: x; x ≤ -56·ln2: -1; x ≥ 709.78…: +∞; NaN: x
	kk = va.newK()
	a.VCMPPDZ(kk, ax, c(0x1p-54), amd64.CmpLT)
	a.VBLENDMPDZ(res, kk, res, x)
	kk = va.newK()
	a.VCMPPDZ(kk, x, c(-3.88162421113569373274e+01), amd64.CmpLE)
	a.VBLENDMPDZ(res, kk, res, c(-1))
	kk = va.newK()
	a.VCMPPDZ(kk, x, c(7.09782712893383973096e+02), amd64.CmpGE)
	a.VBLENDMPDZ(res, kk, res, c(math.Inf(1)))
	kk = va.newK()
	a.VCMPPDZ(kk, x, x, amd64.CmpUNORD)
	a.VBLENDMPDZ(dst, kk, res, x)
}

// f64 erf: the reference's is Go's math.Erf (pure Go on amd64: FreeBSD's
// s_erf.c — x + x·R(x²)/S(x²) below 0.84375 (x + x·efx, or 0.125·(8x +
// efx8·x), below 2⁻²⁸), erx + P(s)/Q(s) with s = |x| - 1 below 1.25, below
// 6 1 - e^(-z²-0.5625)·e^((z-|x|)(z+|x|) + R(s)/S(s))/|x| with s = 1/x²,
// z = |x| with its low 32 bits cleared and R, S of one of two sets by
// |x| < 1/0.35, 1 from 6, the sign of x on each; math.Exp being its amd64
// assembly: expCoreF64). erfF64 computes every form on every lane and
// blends them as the branches choose, each in Go's order (no fused
// multiply-add); R and S of the set not chosen are computed and dropped.
// Bit for bit (TestErfF64Native); without AVX-512 on ymm halves (zasm.go).

var (
	erfPP64 = [...]float64{-2.37630166566501626084e-05, -5.77027029648944159157e-03, -2.84817495755985104766e-02,
		-3.25042107247001499370e-01, 1.28379167095512558561e-01}
	erfQQ64 = [...]float64{-3.96022827877536812320e-06, 1.32494738004321644526e-04, 5.08130628187576562776e-03,
		6.50222499887672944485e-02, 3.97917223959155352819e-01, 1}
	erfPA64 = [...]float64{-2.16637559486879084300e-03, 3.54783043256182359371e-02, -1.10894694282396677476e-01,
		3.18346619901161753674e-01, -3.72207876035701323847e-01, 4.14856118683748331666e-01, -2.36211856075265944077e-03}
	erfQA64 = [...]float64{1.19844998467991074170e-02, 1.36370839120290507362e-02, 1.26171219808761642112e-01,
		7.18286544141962662868e-02, 5.40397917702171048937e-01, 1.06420880400844228286e-01, 1}
	erfRA64 = [...]float64{-9.81432934416914548592e+00, -8.12874355063065934246e+01, -1.84605092906711035994e+02,
		-1.62396669462573470355e+02, -6.23753324503260060396e+01, -1.05586262253232909814e+01, -6.93858572707181764372e-01,
		-9.86494403484714822705e-03}
	erfSA64 = [...]float64{-6.04244152148580987438e-02, 6.57024977031928170135e+00, 1.08635005541779435134e+02,
		4.29008140027567833386e+02, 6.45387271733267880336e+02, 4.34565877475229228821e+02, 1.37657754143519042600e+02,
		1.96512716674392571292e+01, 1}
	erfRB64 = [...]float64{-4.83519191608651397019e+02, -1.02509513161107724954e+03, -6.37566443368389627722e+02,
		-1.60636384855821916062e+02, -1.77579549177547519889e+01, -7.99283237680523006574e-01, -9.86494292470009928597e-03}
	erfSB64 = [...]float64{-2.24409524465858183362e+01, 4.74528541206955367215e+02, 2.55305040643316442583e+03,
		3.19985821950859553908e+03, 1.53672958608443695994e+03, 3.25792512996573918826e+02, 3.03380607434824582924e+01, 1}
)

const (
	erfErx  = 8.45062911510467529297e-01
	erfEfx  = 1.28379167095512586316e-01
	erfEfx8 = 1.02703333676410069053e+00
)

// erfF64: dst = math.Erf(x) lane by lane. x is read before dst is written;
// t holds ten temporaries.
func (g *gen) erfF64(dst, x amd64.ZReg, t []amd64.VReg) {
	a := g.za()
	va := g.va()
	c := g.cF64
	tz := func(i int) amd64.ZReg { return z(t[i]) }
	ax := tz(0)
	a.VPANDQZ(ax, x, g.constI64(1<<63-1).Bcst())
	// below 6: 1 - e^(-z²-0.5625)·e^((z-|x|)(z+|x|) + R/S)/|x|, s = 1/x²
	s, ra, sa, rb, sb := tz(1), tz(2), tz(3), tz(4), tz(5)
	a.VMULPDZ(s, ax, ax)
	a.VBROADCASTSDZ(ra, g.constF64(1))
	a.VDIVPDZ(s, ra, s)
	g.hornerF64(ra, s, erfRA64[:])
	g.hornerF64(sa, s, erfSA64[:])
	g.hornerF64(rb, s, erfRB64[:])
	g.hornerF64(sb, s, erfSB64[:])
	k := va.newK()
	a.VCMPPDZ(k, ax, c(1/0.35), amd64.CmpLT)
	a.VBLENDMPDZ(ra, k, rb, ra)
	a.VBLENDMPDZ(sa, k, sb, sa)
	a.VDIVPDZ(ra, ra, sa) // R/S
	zz, u, w := tz(1), tz(3), tz(4)
	a.VPANDQZ(zz, ax, g.constI64(-1<<32).Bcst())
	a.VSUBPDZ(u, zz, ax)
	a.VADDPDZ(w, zz, ax)
	a.VMULPDZ(u, u, w)
	a.VADDPDZ(u, u, ra)
	a.VMULPDZ(w, zz, zz)
	a.VPXORQZ(w, w, g.constI64(-1<<63).Bcst())
	a.VSUBPDZ(w, w, c(0.5625))
	e1, e2 := tz(5), tz(2)
	g.expCoreF64(e1, w, t[6:10])
	g.expCoreF64(e2, u, t[6:10])
	a.VMULPDZ(e1, e1, e2)
	a.VDIVPDZ(e1, e1, ax)
	res := tz(6)
	a.VBROADCASTSDZ(res, g.constF64(1))
	a.VSUBPDZ(res, res, e1)
	// below 1.25: erx + P(s)/Q(s), s = |x| - 1
	p, q := tz(2), tz(3)
	a.VSUBPDZ(s, ax, c(1))
	g.hornerF64(p, s, erfPA64[:])
	g.hornerF64(q, s, erfQA64[:])
	a.VDIVPDZ(p, p, q)
	a.VADDPDZ(p, p, c(erfErx))
	k = va.newK()
	a.VCMPPDZ(k, ax, c(1.25), amd64.CmpLT)
	a.VBLENDMPDZ(res, k, res, p)
	// below 0.84375: |x| + |x|·R(x²)/S(x²); below 2⁻²⁸ |x| + efx·|x|,
	// below 2^-1015 0.125·(8·|x| + efx8·|x|)
	a.VMULPDZ(s, ax, ax)
	g.hornerF64(p, s, erfPP64[:])
	g.hornerF64(q, s, erfQQ64[:])
	a.VDIVPDZ(p, p, q)
	a.VMULPDZ(p, ax, p)
	a.VADDPDZ(p, ax, p)
	tiny, vt, v8 := tz(3), tz(4), tz(5)
	a.VMULPDZ(tiny, ax, c(erfEfx))
	a.VADDPDZ(tiny, ax, tiny)
	a.VMULPDZ(vt, ax, c(8))
	a.VMULPDZ(v8, ax, c(erfEfx8))
	a.VADDPDZ(vt, vt, v8)
	a.VMULPDZ(vt, vt, c(0.125))
	k = va.newK()
	a.VCMPPDZ(k, ax, c(2.848094538889218e-306), amd64.CmpLT)
	a.VBLENDMPDZ(tiny, k, tiny, vt)
	k = va.newK()
	a.VCMPPDZ(k, ax, c(0x1p-28), amd64.CmpLT)
	a.VBLENDMPDZ(p, k, p, tiny)
	k = va.newK()
	a.VCMPPDZ(k, ax, c(0.84375), amd64.CmpLT)
	a.VBLENDMPDZ(res, k, res, p)
	// from 6 (∞ too): 1; then x's sign; NaN: NaN
	k = va.newK()
	a.VCMPPDZ(k, ax, c(6), amd64.CmpGE)
	a.VBLENDMPDZ(res, k, res, c(1))
	a.VPANDQZ(w, x, g.constI64(-1<<63).Bcst())
	a.VPXORQZ(res, res, w)
	k = va.newK()
	a.VCMPPDZ(k, x, x, amd64.CmpUNORD)
	a.VBLENDMPDZ(dst, k, res, c(math.NaN()))
}
