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

func (l *lowerer) expD(w *strings.Builder, x string) string {
	k, hi, lo, r := l.reg("fd"), l.reg("fd"), l.reg("fd"), l.reg("fd")
	emit(w, "mul.f64 %s, %s, %s", k, x, f64Lit(math.Log2E))
	emit(w, "cvt.rni.f64.f64 %s, %s", k, k)
	emit(w, "max.f64 %s, %s, 0dC0A0000000000000", k, k) // clamp k to [-2048, 2048]: the scaling below
	emit(w, "min.f64 %s, %s, 0d40A0000000000000", k, k) // then over- or underflows as it should
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
	emit(w, "setp.eq.f64 %s, %s, 0dFFF0000000000000", sp, x)
	emit(w, "selp.f64 %s, 0d0000000000000000, %s, %s", y, y, sp)
	emit(w, "setp.eq.f64 %s, %s, 0d7FF0000000000000", sp, x)
	emit(w, "selp.f64 %s, %s, %s, %s", y, x, y, sp)
	emit(w, "testp.notanumber.f64 %s, %s", sp, x)
	emit(w, "selp.f64 %s, %s, %s, %s", y, x, y, sp)
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
