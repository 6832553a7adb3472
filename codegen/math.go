package codegen

import (
	"fmt"
	"math"
	"strings"

	"github.com/tilefuse/tilefuse/tile"
)

// Math on the GPU. Each op is exact (IEEE) where PTX has an exact
// instruction, and otherwise built from the hardware approximations with the
// error bound stated here; tiletest.MathTol holds the same bounds, and the
// conformance suite checks every op against them on the GPU. f64 has only
// exact ops and the software functions of math64.go.
//
//	op        f32 lowering                                        error vs the correctly rounded result
//	neg abs floor ceil sign sqrt     exact instructions            exact
//	exp       ex2.approx(x·log₂e) corrected for the rounding of x·log₂e   2 ulp
//	exp2      ex2.approx                                           2 ulp
//	log log2  lg2.approx; near 1 a series in s = (x-1)/(x+1)       3 ulp, or 2⁻²² absolute
//	log1p     series in s = x/(2+x) for |x| < ¼, else log(1+x)     3 ulp, or 2⁻²² absolute
//	expm1     Taylor series for |x| < ½, else exp(x) - 1            3 ulp
//	rsqrt     rsqrt.approx                                         2 ulp
//	tanh      odd polynomial for |x| < 0.625 (Cephes), else 1 - 2/(e^{2|x|}+1)   4 ulp
//	erf       odd Taylor series for |x| < ½, else 1 - erfc by a Chebyshev fit   3e-7 absolute
//	sigmoid   1/(1 + exp(-x))                                      3 ulp
//	sin cos   reduction by 2π in three parts, then sin/cos.approx  5e-7 absolute for |x| < 1e5
//	pow       ex2.approx(y·lg2.approx|x|) with IEEE special cases  2⁻²¹·(1+|y·log₂|x||) relative
//	rem       in f64: a - trunc(a/b)·b, quotient corrected by one  exact

func f32Lit(x float64) string { return fmt.Sprintf("0f%08X", math.Float32bits(float32(x))) }
func f64Lit(x float64) string { return fmt.Sprintf("0d%016X", math.Float64bits(x)) }

// floatOneInstr are the float unary ops that are one instruction of the
// same form in f32 and f64 (%[1]s: the type).
var floatOneInstr = map[tile.Op]string{
	tile.OpNeg:   "neg.%[1]s",
	tile.OpAbs:   "abs.%[1]s",
	tile.OpFloor: "cvt.rmi.%[1]s.%[1]s",
	tile.OpCeil:  "cvt.rpi.%[1]s.%[1]s",
	tile.OpSqrt:  "sqrt.rn.%[1]s",
}

func (l *lowerer) unary(w *strings.Builder, op tile.Op, d tile.DType, a string) (string, error) {
	switch {
	case d == tile.I1:
		r := l.reg("p")
		emit(w, "not.pred %s, %s", r, a)
		return r, nil
	case d.IsInt():
		return l.unaryInt(w, op, d, a)
	case d == tile.F64:
		return l.unaryF64(w, op, a)
	}
	r := l.reg("f")
	if form, ok := floatOneInstr[op]; ok {
		emit(w, fmt.Sprintf(form, "f32")+" %s, %s", r, a)
		return r, nil
	}
	switch op {
	case tile.OpRsqrt:
		emit(w, "rsqrt.approx.f32 %s, %s", r, a)
	case tile.OpSign:
		return l.signF(w, "f32", a), nil
	case tile.OpExp:
		return l.expf(w, a), nil
	case tile.OpExp2:
		emit(w, "ex2.approx.f32 %s, %s", r, a)
	case tile.OpLog:
		return l.logf(w, a, false), nil
	case tile.OpLog2:
		return l.logf(w, a, true), nil
	case tile.OpLog1p:
		return l.log1pf(w, a), nil
	case tile.OpExpm1:
		return l.expm1f(w, a), nil
	case tile.OpTanh:
		return l.tanhf(w, a), nil
	case tile.OpErf:
		return l.erff(w, a), nil
	case tile.OpSigmoid:
		n := l.reg("f")
		emit(w, "neg.f32 %s, %s", n, a)
		e := l.expf(w, n)
		emit(w, "add.f32 %s, %s, 0f3F800000", e, e) // d = 1 + e^−a ≥ 1, +∞ or NaN
		// 1/d as rcp.approx (within an ulp) and one Newton step (within
		// half an ulp and a little, as rcp.rn), without rcp.rn's branch to
		// a slow path: in a product's epilogue, 128 such branches a thread
		// kept ptxas from scheduling across them (the H200, 2026-12-04,
		// r27c: gelu(x·W+b) 4096³ as x·sigmoid 310 → 260 TFLOP/s, 254 →
		// 162 registers). d = +∞ (a ≤ −88.7) keeps rcp.approx's 0 (the
		// step would make it NaN), NaN stays NaN; rcp.approx's result for
		// d past 2¹²⁶ (a subnormal or 0) is within the absolute bound
		raw, nd, t := l.reg("f"), l.reg("f"), l.reg("f")
		emit(w, "rcp.approx.f32 %s, %s", raw, e)
		emit(w, "neg.f32 %s, %s", nd, e)
		emit(w, "fma.rn.f32 %s, %s, %s, 0f3F800000", t, nd, raw) // 1 − d·r
		emit(w, "fma.rn.f32 %s, %s, %s, %s", r, raw, t, raw)
		fin := l.reg("p")
		emit(w, "setp.lt.f32 %s, %s, 0f7F800000", fin, e)
		emit(w, "selp.f32 %s, %s, %s, %s", r, r, raw, fin)
	case tile.OpSin, tile.OpCos:
		return l.sincosf(w, op, a), nil
	default:
		return "", fmt.Errorf("%v on f32 has no GPU lowering", op)
	}
	return r, nil
}

// unaryOf emits the unary op v on the register a: unary's lowering, or
// where v is an f32 exp2 that may flush subnormal results (Exp2Flush) or
// whose subnormal results no user can tell from 0 (exp2FlushFree),
// ex2.approx.ftz, which the H200's ptxas emits as the one MUFU.EX2 where
// the plain form adds a compare and two predicated multiplies for them (3
// more instructions an element: GELU's sum in a TF32 product's epilogue,
// flash attention's P).
func (l *lowerer) unaryOf(w *strings.Builder, v *tile.Value, a string) (string, error) {
	if v.Op == tile.OpExp2 && v.Type.DType == tile.F32 && (v.Aux == 1 || l.exp2FlushFree(v)) {
		r := l.reg("f")
		emit(w, "ex2.approx.ftz.f32 %s, %s", r, a)
		return r, nil
	}
	return l.unary(w, v.Op, v.Type.DType, a)
}

// flushFreeAddend is the smallest magnitude of a constant c to which a
// subnormal y (|y| < 2⁻¹²⁶) adds nothing: half an ulp of c is at least
// 2⁻¹²⁴, so c + y rounds to c.
const flushFreeAddend = 0x1p-100

// exp2FlushFree reports whether every user of v, an exp2, adds to it a
// constant of magnitude at least flushFreeAddend (GELU's 1 + 2^t): then a
// subnormal 2^t and the 0 that .ftz makes of it give the same sums, and
// .ftz's reading of a subnormal t as 0 gives 2⁰ = 1, which 2^t rounds to.
func (l *lowerer) exp2FlushFree(v *tile.Value) bool {
	us := l.users[v.ID]
	if len(us) == 0 {
		return false
	}
	for _, u := range us {
		if u.Op != tile.OpAdd || len(u.Args) != 2 {
			return false
		}
		c := u.Args[0]
		if c == v {
			c = u.Args[1]
		}
		c = stripShape(c)
		if c == v || c.Op != tile.OpConst || !c.Type.DType.IsFloat() || !(math.Abs(c.AuxF) >= flushFreeAddend) {
			return false
		}
	}
	return true
}

func (l *lowerer) unaryInt(w *strings.Builder, op tile.Op, d tile.DType, a string) (string, error) {
	r := l.reg(regClass(tile.ScalarOf(d)))
	t, bits := ptxInt(d), "b32"
	if d == tile.I64 {
		bits = "b64"
	}
	switch op {
	case tile.OpNeg:
		emit(w, "neg.%s %s, %s", t, r, a)
	case tile.OpNot:
		emit(w, "not.%s %s, %s", bits, r, a)
	case tile.OpAbs:
		emit(w, "abs.%s %s, %s", t, r, a)
	case tile.OpSign:
		pos, neg := l.reg("p"), l.reg("p")
		emit(w, "setp.gt.%s %s, %s, 0", t, pos, a)
		emit(w, "setp.lt.%s %s, %s, 0", t, neg, a)
		emit(w, "selp.%s %s, 1, 0, %s", t, r, pos)
		emit(w, "selp.%s %s, -1, %s, %s", t, r, r, neg)
	default:
		return "", fmt.Errorf("%v on %v", op, d)
	}
	return r, nil
}

func (l *lowerer) unaryF64(w *strings.Builder, op tile.Op, a string) (string, error) {
	r := l.reg("fd")
	if form, ok := floatOneInstr[op]; ok {
		emit(w, fmt.Sprintf(form, "f64")+" %s, %s", r, a)
		return r, nil
	}
	switch op {
	case tile.OpRsqrt:
		s := l.reg("fd")
		emit(w, "sqrt.rn.f64 %s, %s", s, a)
		emit(w, "rcp.rn.f64 %s, %s", r, s)
	case tile.OpSign:
		return l.signF(w, "f64", a), nil
	default:
		if r, ok := l.unaryF64Math(w, op, a); ok {
			return r, nil
		}
		return "", fmt.Errorf("%v on f64 has no GPU lowering yet", op)
	}
	return r, nil
}

func (l *lowerer) signF(w *strings.Builder, t, a string) string {
	class := "f"
	one, mone, zero := "0f3F800000", "0fBF800000", "0f00000000"
	if t == "f64" {
		class, one, mone, zero = "fd", "0d3FF0000000000000", "0dBFF0000000000000", "0d0000000000000000"
	}
	pos, neg, r := l.reg("p"), l.reg("p"), l.reg(class)
	emit(w, "setp.gt.%s %s, %s, %s", t, pos, a, zero)
	emit(w, "setp.lt.%s %s, %s, %s", t, neg, a, zero)
	emit(w, "selp.%s %s, %s, %s, %s", t, r, one, a, pos)
	emit(w, "selp.%s %s, %s, %s, %s", t, r, mone, r, neg)
	return r
}

// poly evaluates c[0] + x·(c[1] + x·(…)) with FMAs.
func (l *lowerer) poly(w *strings.Builder, x string, c []float64) string {
	r := l.reg("f")
	emit(w, "mov.f32 %s, %s", r, f32Lit(c[len(c)-1]))
	for i := len(c) - 2; i >= 0; i-- {
		emit(w, "fma.rn.f32 %s, %s, %s, %s", r, r, x, f32Lit(c[i]))
	}
	return r
}

// expf: e^x = 2^t·e^d with t = x·log₂e rounded and d = x − t·ln2 (the
// rounding error of t, scaled back: two FMAs against ln2 split in a high
// and a low part, each result small, so that d is accurate to an ulp of
// its own), e^d ≈ 1 + d (|d| < 2⁻¹⁷: d²/2 is below an ulp): r·(1 + d) in
// one FMA. Where that FMA is NaN the result is ex2's own: x = ±∞ (d is
// NaN: 0 or ∞), x NaN, and 2^t overflowed (∞·d + ∞ with d ≤ 0). Seven
// instructions and ex2's; the form before (d as (x·log₂e − t)·ln2, two
// finiteness tests) took eleven: softmax's kernel at 1024 wide, 8
// exponentials a thread, 312 SASS instructions → 280 (ptxas 11.8), and
// on the H200 (2026-12-04, r23c, bench graphs in turn) softmax 4096×32768
// 0.2655 → 0.263 ms, 1151×8192 0.0219 → 0.0214; the others within the
// calls' spread. Triton's ex2.approx(x·log₂e) alone, without the
// correction, measured no faster than this form there.
func (l *lowerer) expf(w *strings.Builder, a string) string {
	t, nt, d, r, c, p := l.reg("f"), l.reg("f"), l.reg("f"), l.reg("f"), l.reg("f"), l.reg("p")
	emit(w, "mul.rn.f32 %s, %s, %s", t, a, f32Lit(math.Log2E))
	emit(w, "neg.f32 %s, %s", nt, t)
	emit(w, "fma.rn.f32 %s, %s, %s, %s", d, nt, f32Lit(math.Ln2), a)
	emit(w, "fma.rn.f32 %s, %s, %s, %s", d, nt, f32Lit(ln2LoF32), d)
	emit(w, "ex2.approx.f32 %s, %s", r, t)
	emit(w, "fma.rn.f32 %s, %s, %s, %s", c, r, d, r)
	emit(w, "setp.nan.f32 %s, %s, %s", p, c, c)
	emit(w, "selp.f32 %s, %s, %s, %s", r, r, c, p)
	return r
}

// ln2LoF32 is ln 2 less its float32 rounding (expf's second FMA).
var ln2LoF32 = math.Ln2 - float64(float32(math.Ln2))

// logf: lg2.approx (scaled by ln2 for log), except for x in [0.75, 1.5)
// where 2·atanh(s), s = (x-1)/(x+1), keeps the relative error small.
func (l *lowerer) logf(w *strings.Builder, a string, base2 bool) string {
	r, near := l.reg("f"), l.reg("p")
	emit(w, "lg2.approx.f32 %s, %s", r, a)
	if !base2 {
		emit(w, "mul.f32 %s, %s, %s", r, r, f32Lit(math.Ln2))
	}
	lo, hi := l.reg("p"), l.reg("p")
	emit(w, "setp.ge.f32 %s, %s, 0f3F400000", lo, a) // 0.75
	emit(w, "setp.lt.f32 %s, %s, 0f3FC00000", hi, a) // 1.5
	emit(w, "and.pred %s, %s, %s", near, lo, hi)
	x1 := l.reg("f")
	emit(w, "sub.f32 %s, %s, 0f3F800000", x1, a) // exact (Sterbenz)
	s := l.atanhSeries(w, x1)
	if base2 {
		emit(w, "mul.f32 %s, %s, %s", s, s, f32Lit(math.Log2E))
	}
	emit(w, "selp.f32 %s, %s, %s, %s", r, s, r, near)
	return r
}

// atanhSeries returns log1p(u) = 2·atanh(s), s = u/(2+u), for |u| ≤ ½.
func (l *lowerer) atanhSeries(w *strings.Builder, u string) string {
	den, s, s2 := l.reg("f"), l.reg("f"), l.reg("f")
	emit(w, "add.f32 %s, %s, 0f40000000", den, u)
	emit(w, "div.rn.f32 %s, %s, %s", s, u, den)
	emit(w, "mul.f32 %s, %s, %s", s2, s, s)
	p := l.poly(w, s2, []float64{2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11})
	emit(w, "mul.f32 %s, %s, %s", p, p, s2)
	emit(w, "mul.f32 %s, %s, %s", p, p, s)
	r := l.reg("f")
	emit(w, "fma.rn.f32 %s, %s, 0f40000000, %s", r, s, p)
	return r
}

func (l *lowerer) log1pf(w *strings.Builder, a string) string {
	u, lg, small := l.reg("f"), l.reg("f"), l.reg("p")
	emit(w, "add.f32 %s, %s, 0f3F800000", u, a)
	emit(w, "lg2.approx.f32 %s, %s", lg, u)
	emit(w, "mul.f32 %s, %s, %s", lg, lg, f32Lit(math.Ln2))
	ab := l.reg("f")
	emit(w, "abs.f32 %s, %s", ab, a)
	emit(w, "setp.lt.f32 %s, %s, 0f3E800000", small, ab) // 0.25
	s := l.atanhSeries(w, a)
	emit(w, "selp.f32 %s, %s, %s, %s", lg, s, lg, small)
	return lg
}

func (l *lowerer) expm1f(w *strings.Builder, a string) string {
	e := l.expf(w, a)
	emit(w, "sub.f32 %s, %s, 0f3F800000", e, e)
	c := []float64{1, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320, 1.0 / 362880}
	p := l.poly(w, a, c)
	emit(w, "mul.f32 %s, %s, %s", p, p, a)
	ab, small := l.reg("f"), l.reg("p")
	emit(w, "abs.f32 %s, %s", ab, a)
	emit(w, "setp.lt.f32 %s, %s, 0f3F000000", small, ab)
	emit(w, "selp.f32 %s, %s, %s, %s", e, p, e, small)
	return e
}

// tanhf follows Cephes' tanhf.
func (l *lowerer) tanhf(w *strings.Builder, a string) string {
	ab, two, big := l.reg("f"), l.reg("f"), l.reg("f")
	emit(w, "abs.f32 %s, %s", ab, a)
	emit(w, "add.f32 %s, %s, %s", two, ab, ab)
	e := l.expf(w, two)
	emit(w, "add.f32 %s, %s, 0f3F800000", e, e)
	// rcp.approx (one MUFU.RCP, within an ulp; rcp.rn adds a check and
	// a branch to a slow path, which in a product's epilogue split the
	// code into blocks ptxas did not schedule across). The branch taken
	// only for |a| ≥ 0.625: e+1 ≥ 4.49, so 2/(e+1) ≤ 0.445 and its ulp of
	// error moves 1 − 2/(e+1), in [0.554, 1), by at most half an ulp;
	// for e = ∞, 1/∞ = 0 gives 1
	emit(w, "rcp.approx.f32 %s, %s", big, e)
	emit(w, "fma.rn.f32 %s, %s, 0fC0000000, 0f3F800000", big, big) // 1 - 2/(e+1)
	emit(w, "copysign.f32 %s, %s, %s", big, a, big)
	z := l.reg("f")
	emit(w, "mul.f32 %s, %s, %s", z, a, a)
	p := l.poly(w, z, []float64{-3.33332819422e-1, 1.33314422036e-1, -5.37397155531e-2, 2.06390887954e-2, -5.70498872745e-3})
	emit(w, "mul.f32 %s, %s, %s", p, p, z)
	emit(w, "fma.rn.f32 %s, %s, %s, %s", p, p, a, a)
	small := l.reg("p")
	emit(w, "setp.lt.f32 %s, %s, 0f3F200000", small, ab) // 0.625
	emit(w, "selp.f32 %s, %s, %s, %s", p, p, big, small)
	return p
}

// erff: for |x| < ½ the odd Taylor series of erf; otherwise 1 - erfc(|x|)
// by the Chebyshev fit of Numerical Recipes (fractional error < 1.2e-7),
// with the sign of x.
func (l *lowerer) erff(w *strings.Builder, a string) string {
	z := l.reg("f")
	emit(w, "abs.f32 %s, %s", z, a)
	t, den := l.reg("f"), l.reg("f")
	emit(w, "fma.rn.f32 %s, %s, 0f3F000000, 0f3F800000", den, z) // 1 + z/2
	emit(w, "rcp.rn.f32 %s, %s", t, den)
	q := l.poly(w, t, []float64{-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277})
	z2 := l.reg("f")
	emit(w, "mul.f32 %s, %s, %s", z2, z, z)
	emit(w, "sub.f32 %s, %s, %s", q, q, z2)
	e := l.expf(w, q)
	emit(w, "mul.f32 %s, %s, %s", e, e, t) // erfc(z)
	big := l.reg("f")
	emit(w, "sub.f32 %s, 0f3F800000, %s", big, e)
	emit(w, "copysign.f32 %s, %s, %s", big, a, big)
	x2 := l.reg("f")
	emit(w, "mul.f32 %s, %s, %s", x2, a, a)
	c := []float64{1, -1.0 / 3, 1.0 / 10, -1.0 / 42, 1.0 / 216, -1.0 / 1320, 1.0 / 9360}
	p := l.poly(w, x2, c)
	emit(w, "mul.f32 %s, %s, %s", p, p, a)
	emit(w, "mul.f32 %s, %s, %s", p, p, f32Lit(2/math.SqrtPi))
	small := l.reg("p")
	emit(w, "setp.lt.f32 %s, %s, 0f3F000000", small, z)
	emit(w, "selp.f32 %s, %s, %s, %s", p, p, big, small)
	return p
}

// sincosf reduces x by multiples of 2π (split in three parts so that the
// products are exact) into [-π, π], where sin.approx and cos.approx are
// accurate to 2⁻²⁰·⁹ absolute.
func (l *lowerer) sincosf(w *strings.Builder, op tile.Op, a string) string {
	const c1, c2 = 6.28125, 0.0019353071795864769
	c3 := 2*math.Pi - c1 - c2
	k, r := l.reg("f"), l.reg("f")
	emit(w, "mul.f32 %s, %s, %s", k, a, f32Lit(1/(2*math.Pi)))
	emit(w, "cvt.rni.f32.f32 %s, %s", k, k)
	emit(w, "fma.rn.f32 %s, %s, %s, %s", r, k, f32Lit(-c1), a)
	emit(w, "fma.rn.f32 %s, %s, %s, %s", r, k, f32Lit(-c2), r)
	emit(w, "fma.rn.f32 %s, %s, %s, %s", r, k, f32Lit(-c3), r)
	out := l.reg("f")
	if op == tile.OpSin {
		emit(w, "sin.approx.f32 %s, %s", out, r)
	} else {
		emit(w, "cos.approx.f32 %s, %s", out, r)
	}
	return out
}

// frem is fmod: on f32 through the exact f64 fmod of math64.go.
func (l *lowerer) frem(w *strings.Builder, d tile.DType, a, b string) (string, error) {
	if d == tile.F64 {
		return l.fmodD(w, a, b), nil
	}
	ad, bd, r := l.reg("fd"), l.reg("fd"), l.reg("f")
	emit(w, "cvt.f64.f32 %s, %s", ad, a)
	emit(w, "cvt.f64.f32 %s, %s", bd, b)
	emit(w, "cvt.rn.f32.f64 %s, %s", r, l.fmodD(w, ad, bd))
	return r, nil
}

// pow on f32: ex2(y·lg2|x|), negated for a negative x and odd integer y,
// NaN for a negative x and non-integer y; pow(x, 0) = pow(1, y) = 1.
func (l *lowerer) pow(w *strings.Builder, d tile.DType, x, y string) (string, error) {
	if d == tile.F64 {
		return l.powD(w, x, y), nil
	}
	ax, lg, r := l.reg("f"), l.reg("f"), l.reg("f")
	emit(w, "abs.f32 %s, %s", ax, x)
	emit(w, "lg2.approx.f32 %s, %s", lg, ax)
	emit(w, "mul.f32 %s, %s, %s", lg, lg, y)
	emit(w, "ex2.approx.f32 %s, %s", r, lg)
	return l.powSpecial(w, "f32", x, y, r), nil
}

// powSpecial applies pow's IEEE cases to r = |x|^y computed by exp and log:
// negated for a negative x and odd integer y, NaN for a negative x and
// non-integer y, 1 for y = 0 or x = 1. t is "f32" or "f64".
func (l *lowerer) powSpecial(w *strings.Builder, t, x, y, r string) string {
	class, lit := "f", f32Lit
	if t == "f64" {
		class, lit = "fd", f64Lit
	}
	yi, half, hi := l.reg(class), l.reg(class), l.reg(class)
	isInt, odd, neg, p := l.reg("p"), l.reg("p"), l.reg("p"), l.reg("p")
	emit(w, "cvt.rzi.%s.%s %s, %s", t, t, yi, y)
	emit(w, "setp.eq.%s %s, %s, %s", t, isInt, yi, y)
	emit(w, "mul.%s %s, %s, %s", t, half, y, lit(0.5))
	emit(w, "cvt.rzi.%s.%s %s, %s", t, t, hi, half)
	emit(w, "setp.ne.and.%s %s, %s, %s, %s", t, odd, hi, half, isInt)
	emit(w, "setp.lt.%s %s, %s, %s", t, neg, x, lit(0))
	nr := l.reg(class)
	emit(w, "neg.%s %s, %s", t, nr, r)
	emit(w, "and.pred %s, %s, %s", p, neg, odd)
	emit(w, "selp.%s %s, %s, %s, %s", t, r, nr, r, p)
	emit(w, "not.pred %s, %s", p, isInt)
	emit(w, "and.pred %s, %s, %s", p, p, neg)
	emit(w, "selp.%s %s, %s, %s, %s", t, r, lit(math.NaN()), r, p)
	one := l.reg("p")
	emit(w, "setp.eq.%s %s, %s, %s", t, one, y, lit(0))
	emit(w, "setp.eq.or.%s %s, %s, %s, %s", t, one, x, lit(1), one)
	emit(w, "selp.%s %s, %s, %s, %s", t, r, lit(1), r, one)
	return r
}
