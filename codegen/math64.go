package codegen

import (
	"math"
	"strings"

	"github.com/tilefuse/tilefuse/tile"
)

// f64 math in software: PTX has no f64 transcendental instructions. exp and
// log follow FreeBSD's e_exp.c and e_log.c (as Go's math package does):
// argument reduction, then their minimax polynomials, in f64 throughout;
// both are within 1 ulp. The rest derive from them with Kahan's formulas
// where cancellation would lose accuracy:
//
//	op       lowering                                      error (ulp, f64)
//	exp      r = x - k·ln2, e^r by the Remez rational, ×2^k      1
//	log      x = 2^k·(1+f), log(1+f) by the series in s = f/(2+f)  1
//	exp2     exp(x·ln2)                                     1 + |x|·2⁻⁵³ relative
//	log2     log(x)·log₂e                                   2
//	expm1    u = e^x; (u-1)·x/log(u) (Kahan)                 4
//	log1p    u = 1+x; log(u)·x/(u-1) (Kahan)                 4
//	tanh     expm1(2|x|)/(expm1(2|x|)+2), signed             5
//	sigmoid  1/(1+exp(-x))                                  3
//	erf      FreeBSD s_erf.c's four rational approximations  2
//	sin cos  Cephes: π/4 reduction in three parts, octant polynomials  2, for |x| < 2²⁹
//	pow      exp(y·log|x|), IEEE special cases              (|y·log x| + 4)·2⁻⁵³ relative
//	rem      a - trunc(a/b)·b, the quotient corrected by one  exact while |a/b| < 2⁵²

func (l *lowerer) polyD(w *strings.Builder, x string, c []float64) string {
	r := l.reg("fd")
	emit(w, "mov.f64 %s, %s", r, f64Lit(c[len(c)-1]))
	for i := len(c) - 2; i >= 0; i-- {
		emit(w, "fma.rn.f64 %s, %s, %s, %s", r, r, x, f64Lit(c[i]))
	}
	return r
}

// pow2D sets r = 2^k for an integer-valued f64 register k in [-1022, 1023].
func (l *lowerer) pow2D(w *strings.Builder, k string) string {
	ki, bits, r := l.reg("rd"), l.reg("rd"), l.reg("fd")
	emit(w, "cvt.rzi.s64.f64 %s, %s", ki, k)
	emit(w, "add.s64 %s, %s, 1023", bits, ki)
	emit(w, "shl.b64 %s, %s, 52", bits, bits)
	emit(w, "mov.b64 %s, %s", r, bits)
	return r
}

const (
	ln2Hi = 6.93147180369123816490e-01
	ln2Lo = 1.90821492927058770002e-10
)

func (l *lowerer) expD(w *strings.Builder, x0 string) string {
	k, hi, lo, r := l.reg("fd"), l.reg("fd"), l.reg("fd"), l.reg("fd")
	// clamp x to [-746, 710], where e^x is already 0 or ∞ in float64: the
	// reduction needs |x - k·ln2| ≤ ln2/2 and the two-step scaling needs
	// |k/2| < 1022 (e^-1e9 came out NaN when k alone was clamped)
	x := l.reg("fd")
	emit(w, "max.f64 %s, %s, 0dC087500000000000", x, x0) // -746
	emit(w, "min.f64 %s, %s, 0d4086300000000000", x, x)  // 710
	emit(w, "mul.f64 %s, %s, %s", k, x, f64Lit(math.Log2E))
	emit(w, "cvt.rni.f64.f64 %s, %s", k, k)
	emit(w, "neg.f64 %s, %s", hi, k)
	emit(w, "fma.rn.f64 %s, %s, %s, %s", hi, hi, f64Lit(ln2Hi), x)
	emit(w, "mul.f64 %s, %s, %s", lo, k, f64Lit(ln2Lo))
	emit(w, "sub.f64 %s, %s, %s", r, hi, lo)
	t := l.reg("fd")
	emit(w, "mul.f64 %s, %s, %s", t, r, r)
	p := l.polyD(w, t, []float64{1.66666666666666657415e-01, -2.77777777770155933842e-03,
		6.61375632143793436117e-05, -1.65339022054652515390e-06, 4.13813679705723846039e-08})
	c := l.reg("fd")
	emit(w, "mul.f64 %s, %s, %s", p, p, t)
	emit(w, "sub.f64 %s, %s, %s", c, r, p) // c = r - t·P(t)
	num, den, q, y := l.reg("fd"), l.reg("fd"), l.reg("fd"), l.reg("fd")
	emit(w, "mul.f64 %s, %s, %s", num, r, c)
	emit(w, "sub.f64 %s, 0d4000000000000000, %s", den, c)
	emit(w, "div.rn.f64 %s, %s, %s", q, num, den)
	emit(w, "sub.f64 %s, %s, %s", y, lo, q)
	emit(w, "sub.f64 %s, %s, %s", y, y, hi)
	emit(w, "sub.f64 %s, 0d3FF0000000000000, %s", y, y) // y = 1 - ((lo - r·c/(2-c)) - hi)
	// y·2^k in two steps, so that results near overflow and in the subnormals come out right
	k1, k2 := l.reg("fd"), l.reg("fd")
	emit(w, "mul.f64 %s, %s, 0d3FE0000000000000", k1, k)
	emit(w, "cvt.rzi.f64.f64 %s, %s", k1, k1)
	emit(w, "sub.f64 %s, %s, %s", k2, k, k1)
	emit(w, "mul.f64 %s, %s, %s", y, y, l.pow2D(w, k1))
	emit(w, "mul.f64 %s, %s, %s", y, y, l.pow2D(w, k2))
	// e^-∞ = 0, e^∞ = ∞, NaN stays NaN (the reduction above would give NaN for all three)
	sp := l.reg("p")
	emit(w, "setp.eq.f64 %s, %s, 0dFFF0000000000000", sp, x0)
	emit(w, "selp.f64 %s, 0d0000000000000000, %s, %s", y, y, sp)
	emit(w, "setp.eq.f64 %s, %s, 0d7FF0000000000000", sp, x0)
	emit(w, "selp.f64 %s, %s, %s, %s", y, x0, y, sp)
	emit(w, "testp.notanumber.f64 %s, %s", sp, x0)
	emit(w, "selp.f64 %s, %s, %s, %s", y, x0, y, sp)
	return y
}

func (l *lowerer) logD(w *strings.Builder, x string) string {
	// scale subnormals up by 2^54
	sub, xs, kadj := l.reg("p"), l.reg("fd"), l.reg("fd")
	emit(w, "setp.lt.f64 %s, %s, 0d0010000000000000", sub, x)
	emit(w, "mul.f64 %s, %s, 0d4350000000000000", xs, x)
	emit(w, "selp.f64 %s, %s, %s, %s", xs, xs, x, sub)
	emit(w, "selp.f64 %s, 0dC04B000000000000, 0d0000000000000000, %s", kadj, sub) // -54
	bits, e, m := l.reg("rd"), l.reg("rd"), l.reg("rd")
	emit(w, "mov.b64 %s, %s", bits, xs)
	emit(w, "shr.u64 %s, %s, 52", e, bits)
	emit(w, "and.b64 %s, %s, 2047", e, e)
	emit(w, "and.b64 %s, %s, 0x000FFFFFFFFFFFFF", m, bits)
	emit(w, "or.b64 %s, %s, 0x3FE0000000000000", m, m) // f1 in [0.5, 1)
	f1, k := l.reg("fd"), l.reg("fd")
	emit(w, "mov.b64 %s, %s", f1, m)
	emit(w, "sub.s64 %s, %s, 1022", e, e)
	emit(w, "cvt.rn.f64.s64 %s, %s", k, e)
	emit(w, "add.f64 %s, %s, %s", k, k, kadj)
	lowp := l.reg("p")
	emit(w, "setp.lt.f64 %s, %s, %s", lowp, f1, f64Lit(math.Sqrt2/2))
	f2, k2 := l.reg("fd"), l.reg("fd")
	emit(w, "add.f64 %s, %s, %s", f2, f1, f1)
	emit(w, "selp.f64 %s, %s, %s, %s", f1, f2, f1, lowp)
	emit(w, "sub.f64 %s, %s, 0d3FF0000000000000", k2, k)
	emit(w, "selp.f64 %s, %s, %s, %s", k, k2, k, lowp)
	f := l.reg("fd")
	emit(w, "sub.f64 %s, %s, 0d3FF0000000000000", f, f1)
	s, s2, s4, den := l.reg("fd"), l.reg("fd"), l.reg("fd"), l.reg("fd")
	emit(w, "add.f64 %s, %s, 0d4000000000000000", den, f)
	emit(w, "div.rn.f64 %s, %s, %s", s, f, den)
	emit(w, "mul.f64 %s, %s, %s", s2, s, s)
	emit(w, "mul.f64 %s, %s, %s", s4, s2, s2)
	t1 := l.polyD(w, s4, []float64{6.666666666666735130e-01, 2.857142874366239149e-01, 1.818357216161805012e-01, 1.479819860511658591e-01})
	emit(w, "mul.f64 %s, %s, %s", t1, t1, s2)
	t2 := l.polyD(w, s4, []float64{3.999999999940941908e-01, 2.222219843214978396e-01, 1.531383769920937332e-01})
	emit(w, "mul.f64 %s, %s, %s", t2, t2, s4)
	R, hfsq := l.reg("fd"), l.reg("fd")
	emit(w, "add.f64 %s, %s, %s", R, t1, t2)
	emit(w, "mul.f64 %s, %s, %s", hfsq, f, f)
	emit(w, "mul.f64 %s, %s, 0d3FE0000000000000", hfsq, hfsq)
	acc := l.reg("fd")
	emit(w, "add.f64 %s, %s, %s", acc, hfsq, R)
	emit(w, "mul.f64 %s, %s, %s", acc, acc, s)
	emit(w, "fma.rn.f64 %s, %s, %s, %s", acc, k, f64Lit(ln2Lo), acc) // s·(hfsq+R) + k·ln2lo
	emit(w, "sub.f64 %s, %s, %s", acc, hfsq, acc)
	emit(w, "sub.f64 %s, %s, %s", acc, acc, f)
	r := l.reg("fd")
	emit(w, "mul.f64 %s, %s, %s", r, k, f64Lit(ln2Hi))
	emit(w, "sub.f64 %s, %s, %s", r, r, acc) // k·ln2hi - ((hfsq - (s·(hfsq+R) + k·ln2lo)) - f)
	// special cases: x = 0 → -inf, x < 0 or NaN → NaN, x = +inf → +inf
	p := l.reg("p")
	emit(w, "setp.eq.f64 %s, %s, 0d0000000000000000", p, x)
	emit(w, "selp.f64 %s, 0dFFF0000000000000, %s, %s", r, r, p)
	emit(w, "setp.lt.f64 %s, %s, 0d0000000000000000", p, x)
	emit(w, "selp.f64 %s, 0d7FF8000000000000, %s, %s", r, r, p)
	emit(w, "setp.eq.f64 %s, %s, 0d7FF0000000000000", p, x)
	emit(w, "selp.f64 %s, %s, %s, %s", r, x, r, p)
	emit(w, "testp.notanumber.f64 %s, %s", p, x)
	emit(w, "selp.f64 %s, %s, %s, %s", r, x, r, p)
	return r
}

// expm1D is Kahan's expm1: with u = e^x, (u-1)·x/log(u), exact at u = 1.
func (l *lowerer) expm1D(w *strings.Builder, x string) string {
	u := l.expD(w, x)
	um1, lg, r, p := l.reg("fd"), l.logD(w, u), l.reg("fd"), l.reg("p")
	emit(w, "sub.f64 %s, %s, 0d3FF0000000000000", um1, u)
	emit(w, "div.rn.f64 %s, %s, %s", r, x, lg)
	emit(w, "mul.f64 %s, %s, %s", r, r, um1)
	emit(w, "setp.eq.f64 %s, %s, 0d3FF0000000000000", p, u) // u == 1: x itself
	emit(w, "selp.f64 %s, %s, %s, %s", r, x, r, p)
	emit(w, "setp.eq.f64 %s, %s, 0dBFF0000000000000", p, um1) // e^x underflowed: -1
	emit(w, "selp.f64 %s, %s, %s, %s", r, um1, r, p)
	emit(w, "setp.eq.f64 %s, %s, 0d7FF0000000000000", p, u) // overflow: +inf
	emit(w, "selp.f64 %s, %s, %s, %s", r, u, r, p)
	return r
}

// log1pD is Kahan's log1p: with u = 1+x, log(u)·x/(u-1), exact at u = 1.
func (l *lowerer) log1pD(w *strings.Builder, x string) string {
	u := l.reg("fd")
	emit(w, "add.f64 %s, %s, 0d3FF0000000000000", u, x)
	lg := l.logD(w, u)
	um1, r, p := l.reg("fd"), l.reg("fd"), l.reg("p")
	emit(w, "sub.f64 %s, %s, 0d3FF0000000000000", um1, u)
	emit(w, "div.rn.f64 %s, %s, %s", r, x, um1) // x/(u-1) first: x·log(u) can overflow
	emit(w, "mul.f64 %s, %s, %s", r, r, lg)
	emit(w, "setp.eq.f64 %s, %s, 0d3FF0000000000000", p, u)
	emit(w, "selp.f64 %s, %s, %s, %s", r, x, r, p)
	emit(w, "testp.infinite.f64 %s, %s", p, lg) // u = 0 or +inf: log(u) itself
	emit(w, "selp.f64 %s, %s, %s, %s", r, lg, r, p)
	return r
}

func (l *lowerer) tanhD(w *strings.Builder, x string) string {
	ax, two := l.reg("fd"), l.reg("fd")
	emit(w, "abs.f64 %s, %s", ax, x)
	emit(w, "add.f64 %s, %s, %s", two, ax, ax)
	e := l.expm1D(w, two)
	den, r := l.reg("fd"), l.reg("fd")
	emit(w, "add.f64 %s, %s, 0d4000000000000000", den, e)
	emit(w, "div.rn.f64 %s, %s, %s", r, e, den)
	p := l.reg("p")
	emit(w, "setp.gt.f64 %s, %s, 0d4036000000000000", p, ax) // |x| > 22: ±1
	emit(w, "selp.f64 %s, 0d3FF0000000000000, %s, %s", r, r, p)
	emit(w, "copysign.f64 %s, %s, %s", r, x, r)
	emit(w, "testp.notanumber.f64 %s, %s", p, x)
	emit(w, "selp.f64 %s, %s, %s, %s", r, x, r, p)
	return r
}

// unaryF64Math lowers the f64 transcendental ops; ok is false for the ones
// not written yet.
func (l *lowerer) unaryF64Math(w *strings.Builder, op tile.Op, a string) (string, bool) {
	switch op {
	case tile.OpExp:
		return l.expD(w, a), true
	case tile.OpExp2:
		t := l.reg("fd")
		emit(w, "mul.f64 %s, %s, %s", t, a, f64Lit(math.Ln2))
		return l.expD(w, t), true
	case tile.OpLog:
		return l.logD(w, a), true
	case tile.OpLog2:
		r := l.logD(w, a)
		emit(w, "mul.f64 %s, %s, %s", r, r, f64Lit(math.Log2E))
		return r, true
	case tile.OpExpm1:
		return l.expm1D(w, a), true
	case tile.OpLog1p:
		return l.log1pD(w, a), true
	case tile.OpTanh:
		return l.tanhD(w, a), true
	case tile.OpErf:
		return l.erfD(w, a), true
	case tile.OpSin, tile.OpCos:
		return l.sinCosD(w, op, a), true
	case tile.OpSigmoid:
		n := l.reg("fd")
		emit(w, "neg.f64 %s, %s", n, a)
		e := l.expD(w, n)
		r := l.reg("fd")
		emit(w, "add.f64 %s, %s, 0d3FF0000000000000", e, e)
		emit(w, "rcp.rn.f64 %s, %s", r, e)
		return r, true
	}
	return "", false
}

// erfD follows FreeBSD's s_erf.c (as Go's math.Erf does): four ranges of |x|,
// each a rational approximation (coefficients from that file); all four are
// computed and the right one selected, as threads of a warp may differ.
func (l *lowerer) erfD(w *strings.Builder, x string) string {
	ax := l.reg("fd")
	emit(w, "abs.f64 %s, %s", ax, x)
	ratio := func(num, den []float64, t string) string {
		p := l.polyD(w, t, num)
		q := l.polyD(w, t, den)
		emit(w, "div.rn.f64 %s, %s, %s", p, p, q)
		return p
	}
	// |x| < 0.84375: x + x·P(x²)/Q(x²)
	z := l.reg("fd")
	emit(w, "mul.f64 %s, %s, %s", z, ax, ax)
	ra := ratio([]float64{1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02, -5.77027029648944159157e-03, -2.37630166566501626084e-05},
		[]float64{1, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03, 1.32494738004321644526e-04, -3.96022827877536812320e-06}, z)
	emit(w, "fma.rn.f64 %s, %s, %s, %s", ra, ax, ra, ax)
	// [0.84375, 1.25): erx + P1(s)/Q1(s), s = |x| - 1
	s := l.reg("fd")
	emit(w, "sub.f64 %s, %s, 0d3FF0000000000000", s, ax)
	rb := ratio([]float64{-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01, 3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02, -2.16637559486879084300e-03},
		[]float64{1, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02, 1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02}, s)
	emit(w, "add.f64 %s, %s, %s", rb, rb, f64Lit(8.45062911510467529297e-01))
	// [1.25, 6): 1 - exp(-z·z - 0.5625)·exp((z-|x|)(z+|x|) + R/S)/|x|, z = |x| with its low word cleared
	t := l.reg("fd")
	emit(w, "mul.f64 %s, %s, %s", t, ax, ax)
	emit(w, "rcp.rn.f64 %s, %s", t, t)
	r1 := ratio([]float64{-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01, -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02, -8.12874355063065934246e+01, -9.81432934416914548592e+00},
		[]float64{1, 1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02, 6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02, 6.57024977031928170135e+00, -6.04244152148580987438e-02}, t)
	r2 := ratio([]float64{-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01, -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03, -4.83519191608651397019e+02},
		[]float64{1, 3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03, 3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02, -2.24409524465858183362e+01}, t)
	mid := l.reg("p")
	emit(w, "setp.lt.f64 %s, %s, %s", mid, ax, f64Lit(1/0.35))
	emit(w, "selp.f64 %s, %s, %s, %s", r1, r1, r2, mid)
	bits, zz := l.reg("rd"), l.reg("fd")
	emit(w, "mov.b64 %s, %s", bits, ax)
	emit(w, "and.b64 %s, %s, 0xFFFFFFFF00000000", bits, bits)
	emit(w, "mov.b64 %s, %s", zz, bits)
	e1, e2 := l.reg("fd"), l.reg("fd")
	emit(w, "mul.f64 %s, %s, %s", e1, zz, zz)
	emit(w, "neg.f64 %s, %s", e1, e1)
	emit(w, "sub.f64 %s, %s, 0d3FE2000000000000", e1, e1) // -z·z - 0.5625
	d1, d2 := l.reg("fd"), l.reg("fd")
	emit(w, "sub.f64 %s, %s, %s", d1, zz, ax)
	emit(w, "add.f64 %s, %s, %s", d2, zz, ax)
	emit(w, "fma.rn.f64 %s, %s, %s, %s", e2, d1, d2, r1)
	x1, x2 := l.expD(w, e1), l.expD(w, e2)
	rc := l.reg("fd")
	emit(w, "mul.f64 %s, %s, %s", rc, x1, x2)
	emit(w, "div.rn.f64 %s, %s, %s", rc, rc, ax)
	emit(w, "sub.f64 %s, 0d3FF0000000000000, %s", rc, rc)
	// pick the range, then the sign
	r, p := l.reg("fd"), l.reg("p")
	emit(w, "setp.lt.f64 %s, %s, 0d4018000000000000", p, ax) // 6
	emit(w, "selp.f64 %s, %s, 0d3FF0000000000000, %s", r, rc, p)
	emit(w, "setp.lt.f64 %s, %s, 0d3FF4000000000000", p, ax) // 1.25
	emit(w, "selp.f64 %s, %s, %s, %s", r, rb, r, p)
	emit(w, "setp.lt.f64 %s, %s, 0d3FEB000000000000", p, ax) // 0.84375
	emit(w, "selp.f64 %s, %s, %s, %s", r, ra, r, p)
	emit(w, "copysign.f64 %s, %s, %s", r, x, r)
	emit(w, "testp.notanumber.f64 %s, %s", p, x)
	emit(w, "selp.f64 %s, %s, %s, %s", r, x, r, p)
	return r
}

// sinCosD follows Cephes' sin.c and cos.c (as Go's math.Sin and math.Cos
// do): reduction by π/4 in three parts, then the sine or the cosine
// polynomial by octant. Accurate for |x| < 2²⁹ (Go switches to a
// Payne–Hanek reduction beyond; this does not).
func (l *lowerer) sinCosD(w *strings.Builder, op tile.Op, x string) string {
	ax, y := l.reg("fd"), l.reg("fd")
	j, odd := l.reg("rd"), l.reg("rd")
	emit(w, "abs.f64 %s, %s", ax, x)
	emit(w, "mul.f64 %s, %s, %s", y, ax, f64Lit(4/math.Pi))
	emit(w, "cvt.rzi.u64.f64 %s, %s", j, y)
	emit(w, "and.b64 %s, %s, 1", odd, j)
	emit(w, "add.u64 %s, %s, %s", j, j, odd) // map zeros to the origin
	emit(w, "cvt.rn.f64.u64 %s, %s", y, j)
	emit(w, "and.b64 %s, %s, 7", j, j)
	z := l.reg("fd")
	emit(w, "neg.f64 %s, %s", y, y)
	emit(w, "fma.rn.f64 %s, %s, %s, %s", z, y, f64Lit(7.85398125648498535156e-1), ax)
	emit(w, "fma.rn.f64 %s, %s, %s, %s", z, y, f64Lit(3.77489470793079817668e-8), z)
	emit(w, "fma.rn.f64 %s, %s, %s, %s", z, y, f64Lit(2.69515142907905952645e-15), z)
	zz := l.reg("fd")
	emit(w, "mul.f64 %s, %s, %s", zz, z, z)
	sp := l.polyD(w, zz, []float64{-1.66666666666666307295e-1, 8.33333333332211858878e-3, -1.98412698295895385996e-4, 2.75573136213857245213e-6, -2.50507477628578072866e-8, 1.58962301576546568060e-10})
	emit(w, "mul.f64 %s, %s, %s", sp, sp, zz)
	emit(w, "fma.rn.f64 %s, %s, %s, %s", sp, sp, z, z) // z + z·zz·P
	cp := l.polyD(w, zz, []float64{4.16666666666665929218e-2, -1.38888888888730564116e-3, 2.48015872888517045348e-5, -2.75573141792967388112e-7, 2.08757008419747316778e-9, -1.13585365213876817300e-11})
	z4 := l.reg("fd")
	emit(w, "mul.f64 %s, %s, %s", z4, zz, zz)
	emit(w, "mul.f64 %s, %s, %s", cp, cp, z4)
	emit(w, "fma.rn.f64 %s, %s, 0dBFE0000000000000, %s", z4, zz, cp) // cp - 0.5·zz
	emit(w, "add.f64 %s, %s, 0d3FF0000000000000", cp, z4)
	// octant: j > 3 flips the sign and subtracts 4; cos also flips for j > 1
	hi, flip, mid := l.reg("p"), l.reg("p"), l.reg("p")
	emit(w, "setp.gt.u64 %s, %s, 3", hi, j)
	jm := l.reg("rd")
	emit(w, "sub.u64 %s, %s, 4", jm, j)
	emit(w, "selp.b64 %s, %s, %s, %s", j, jm, j, hi)
	emit(w, "setp.eq.u64 %s, %s, 1", mid, j)
	t := l.reg("p")
	emit(w, "setp.eq.u64 %s, %s, 2", t, j)
	emit(w, "or.pred %s, %s, %s", mid, mid, t) // j is 1 or 2
	r := l.reg("fd")
	if op == tile.OpSin {
		emit(w, "selp.f64 %s, %s, %s, %s", r, cp, sp, mid)
		neg := l.reg("p")
		emit(w, "setp.lt.f64 %s, %s, 0d0000000000000000", neg, x)
		emit(w, "xor.pred %s, %s, %s", flip, neg, hi)
	} else {
		emit(w, "selp.f64 %s, %s, %s, %s", r, sp, cp, mid)
		gt1 := l.reg("p")
		emit(w, "setp.gt.u64 %s, %s, 1", gt1, j)
		emit(w, "xor.pred %s, %s, %s", flip, hi, gt1)
	}
	nr := l.reg("fd")
	emit(w, "neg.f64 %s, %s", nr, r)
	emit(w, "selp.f64 %s, %s, %s, %s", r, nr, r, flip)
	p := l.reg("p")
	if op == tile.OpSin {
		emit(w, "setp.eq.f64 %s, %s, 0d0000000000000000", p, x) // sin(±0) = ±0
		emit(w, "selp.f64 %s, %s, %s, %s", r, x, r, p)
	}
	emit(w, "testp.finite.f64 %s, %s", p, x) // ±inf and NaN give NaN
	emit(w, "selp.f64 %s, %s, 0d7FF8000000000000, %s", r, r, p)
	return r
}

// powD is exp(y·log|x|) with pow's special cases (as the f32 lowering):
// relative error about (|y·log x| + 4)·2⁻⁵³.
func (l *lowerer) powD(w *strings.Builder, x, y string) string {
	ax := l.reg("fd")
	emit(w, "abs.f64 %s, %s", ax, x)
	lg := l.logD(w, ax)
	emit(w, "mul.f64 %s, %s, %s", lg, lg, y)
	return l.powSpecial(w, "f64", x, y, l.expD(w, lg))
}

// fmodD is a - q·b with q = trunc(a/b), q corrected by one where the
// division rounded across an integer: exact while |a/b| < 2⁵².
func (l *lowerer) fmodD(w *strings.Builder, a, b string) string {
	q, r := l.reg("fd"), l.reg("fd")
	emit(w, "div.rn.f64 %s, %s, %s", q, a, b)
	emit(w, "cvt.rzi.f64.f64 %s, %s", q, q)
	nq := l.reg("fd")
	emit(w, "neg.f64 %s, %s", nq, q)
	emit(w, "fma.rn.f64 %s, %s, %s, %s", r, nq, b, a)
	// r must have a's sign (or be 0) and be smaller than |b|
	ab, ar, sb := l.reg("fd"), l.reg("fd"), l.reg("fd")
	emit(w, "abs.f64 %s, %s", ab, b)
	emit(w, "copysign.f64 %s, %s, %s", sb, a, ab) // |b| with a's sign
	wrong, big := l.reg("p"), l.reg("p")
	emit(w, "mul.f64 %s, %s, %s", ar, r, a)
	emit(w, "setp.lt.f64 %s, %s, 0d0000000000000000", wrong, ar) // r and a differ in sign
	fix := l.reg("fd")
	emit(w, "add.f64 %s, %s, %s", fix, r, sb)
	emit(w, "selp.f64 %s, %s, %s, %s", r, fix, r, wrong)
	emit(w, "abs.f64 %s, %s", ar, r)
	emit(w, "setp.ge.f64 %s, %s, %s", big, ar, ab)
	emit(w, "sub.f64 %s, %s, %s", fix, r, sb)
	emit(w, "selp.f64 %s, %s, %s, %s", r, fix, r, big)
	// a finite a modulo an infinite b is a (the quotient 0 times ∞ would give NaN)
	binf, afin := l.reg("p"), l.reg("p")
	emit(w, "testp.infinite.f64 %s, %s", binf, b)
	emit(w, "testp.finite.f64 %s, %s", afin, a)
	emit(w, "and.pred %s, %s, %s", binf, binf, afin)
	emit(w, "selp.f64 %s, %s, %s, %s", r, a, r, binf)
	return r
}
