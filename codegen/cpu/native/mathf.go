package native

import (
	"math"
	"math/big"
)

// The f32 exp, tanh and log of native code, in f32 arithmetic on eight
// lanes (ops.go, mathF32): expf32, tanhf32 and logf32 are their scalar
// twins, operation for operation (TestMathTwins checks the generated code
// against them bit for bit). logf32 is Cephes' logf (the mantissa in
// [√½, √2), a degree-8 polynomial of f = m - 1, ln 2 in two parts), with
// subnormals scaled by 2²³ first: within 1 ulp of ln x over every 97th
// positive f32 (TestMathErrors). Their errors against math.Exp and math.Tanh in float64, over
// every 7th f32 of their ranges: expf32 within 0.94 ulp of e^x, tanhf32
// within 1.36 ulp of tanh x (TestMathErrors checks ≤ 1 and ≤ 1.5 ulp over
// every 97th, every 997th with -short). Both are inside the IR's bound for
// f32 math (tile: "the f64
// function rounded to f32, or an approximation within 2 ulp"); the
// executor's expf and tanhf are closer (within 1 ulp of the rounded
// result, computed in float64), at about twice the cost.

const (
	log2e32 = float32(math.Log2E)
	ln2Hi32 = float32(0.693359375) // 9 significant bits: n·ln2Hi is exact
	ln2Lo32 = float32(-2.12194440e-4)
	// expf32's range: above it +Inf, below it 0 (the f32 subnormals end)
	expOverflow32  = float32(88.72284)
	expUnderflow32 = float32(-103.97208)
	// the zmm form's clamp where the CPU has AVX512DQ (ops.go: expCore32)
	expClampZ = float32(128)
	// tanhf32: its Taylor polynomial below tanhSmall32, 1 - 2/(e^{2|x|}+1)
	// above; |x| clamped to tanhClamp32, where tanh rounds to ±1
	tanhSmall32 = float32(0.625)
	tanhClamp32 = float32(9.1)
)

// expTaylor32 holds 1/k! for k = 7 down to 0, Horner order: the degree-7
// Taylor polynomial of e^r, |r| ≤ ln2/2 (truncation below 7e-9 relative).
var expTaylor32 = func() (c [8]float32) {
	f := 1.0
	for k := 1; k <= 7; k++ {
		f *= float64(k)
	}
	for i := range c {
		c[i] = float32(1 / f)
		if k := 7 - i; k > 0 {
			f /= float64(k)
		}
	}
	return c
}()

// tanhTaylor32[k] is the coefficient of x^(2k+1) in tanh's Taylor series,
// 2^(2n)(2^(2n)-1)·B_2n/(2n)! with n = k+1 (B the Bernoulli numbers), for
// k < 10: below 0.625 the series' next term is under 2e-9 relative.
var tanhTaylor32 = func() (c [10]float32) {
	const N = 2 * len(c)
	// Bernoulli numbers by the Akiyama–Tanigawa algorithm (B_1 = +1/2, unused)
	a := make([]*big.Rat, N+1)
	bern := make([]*big.Rat, N+1)
	for m := 0; m <= N; m++ {
		a[m] = big.NewRat(1, int64(m+1))
		for j := m; j >= 1; j-- {
			d := new(big.Rat).Sub(a[j-1], a[j])
			a[j-1] = d.Mul(d, big.NewRat(int64(j), 1))
		}
		bern[m] = new(big.Rat).Set(a[0])
	}
	fact := big.NewInt(1)
	for k := range c {
		n := k + 1
		fact.Mul(fact, big.NewInt(int64(2*n-1)))
		fact.Mul(fact, big.NewInt(int64(2*n)))
		p := new(big.Int).Lsh(big.NewInt(1), uint(2*n))
		q := new(big.Int).Sub(p, big.NewInt(1))
		r := new(big.Rat).SetInt(new(big.Int).Mul(p, q))
		r.Mul(r, bern[2*n])
		r.Quo(r, new(big.Rat).SetInt(fact))
		f, _ := r.Float64()
		c[k] = float32(f)
	}
	return c
}()

// logP are the coefficients of Cephes' logf polynomial, Horner order.
var logP = [...]float32{7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
	1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1}

const (
	sqrt2_32     = float32(math.Sqrt2)
	minNormal32  = float32(0x1p-126)
	subnormScale = float32(0x1p23)
)

// logSpecial32 is a logarithm's value at x where x is NaN, negative, ±0
// or +Inf (ok), the same for ln and log₂.
func logSpecial32(x float32) (y float32, ok bool) {
	switch {
	case x != x:
		return x, true
	case x < 0:
		return float32(math.NaN()), true
	case x == 0:
		return float32(math.Inf(-1)), true
	case x > math.MaxFloat32:
		return x, true
	}
	return 0, false
}

// logf32 is ln x as native code computes it.
func logf32(x float32) float32 {
	if y, ok := logSpecial32(x); ok {
		return y
	}
	return logCoref32(x)
}

func logCoref32(x float32) float32 {
	e, f := logSplit32(x)
	z := f * f
	p := horner32(logP[:], f)
	y := p * f * z
	ef := float32(e)
	y = fma32(ef, ln2Lo32, y)
	y = fma32(z, -0.5, y)
	r := f + y
	return fma32(ef, ln2Hi32, r)
}

// logSplit32 splits a positive finite x as m·2^e, m in [√½, √2)
// (subnormals scaled by 2²³ first), and gives e and f = m - 1 (exact):
// logf32's and log2f32's reduction.
func logSplit32(x float32) (e int32, f float32) {
	bias := int32(127)
	if x < minNormal32 { // a subnormal: scaled into the normal range
		x *= subnormScale
		bias += 23
	}
	bits := math.Float32bits(x)
	e = int32(bits>>23) - bias
	m := math.Float32frombits(bits&0x7fffff | 0x3f800000) // [1, 2)
	if m > sqrt2_32 {
		m *= 0.5
		e++
	}
	return e, m - 1
}

// horner32 is c[0]·x^(n-1) + … + c[n-1] by fused multiply-adds from
// c[0], as the vector code's Horner chains compute it.
func horner32(c []float32, x float32) float32 {
	p := c[0]
	for _, k := range c[1:] {
		p = fma32(p, x, k)
	}
	return p
}

// pow2Steps32 are 2^(n>>1) and 2^(n - (n>>1)) for integral n in [-252,
// 254]: a value times the first, then the second, is its product by 2^n
// rounded once (scale2n in the vector code).
func pow2Steps32(n float32) (s1, s2 float32) {
	ni := int32(n)
	n1 := ni >> 1
	n2 := ni - n1
	return math.Float32frombits(uint32(n1+127) << 23), math.Float32frombits(uint32(n2+127) << 23)
}

func fma32(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }

// expf32 is e^x as native code computes it.
func expf32(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > expOverflow32:
		return float32(math.Inf(1))
	case x < expUnderflow32:
		return 0
	}
	return expCoref32(x)
}

func expCoref32(x float32) float32 {
	x = min(max(x, -104), 89)
	n := float32(math.RoundToEven(float64(x * log2e32)))
	r := fma32(-n, ln2Hi32, x)
	r = fma32(-n, ln2Lo32, r)
	p := horner32(expTaylor32[:], r)
	s1, s2 := pow2Steps32(n)
	return p * s1 * s2
}

// tanhf32 is tanh x as native code computes it.
func tanhf32(x float32) float32 {
	if x != x {
		return x
	}
	a := float32(math.Abs(float64(x)))
	var r float32
	if a < tanhSmall32 {
		x2 := x * x
		p := tanhTaylor32[len(tanhTaylor32)-1]
		for k := len(tanhTaylor32) - 2; k >= 1; k-- {
			p = fma32(p, x2, tanhTaylor32[k])
		}
		r = fma32(x*x2, p, x)
	} else {
		a = min(a, tanhClamp32)
		e := expCoref32(a + a)
		r = 1 - 2/(e+1)
	}
	// x's sign: the second form has none, the first loses it at -0
	return math.Float32frombits(math.Float32bits(r) | math.Float32bits(x)&0x80000000)
}

// The f32 sigmoid, log1p and expm1 of native code, in f32 arithmetic on
// eight (or sixteen) lanes from the pieces above; sigmoidf32, log1pf32 and
// expm1f32 are their scalar twins (TestMathTwins), and TestMathErrors
// states their bounds against the float64 functions.

// sigmoidf32 is 1/(1+e^-x) as native code computes it, within 0.90 ulp
// of the float64 function where the plain forms over expf32 (1/(1+e) and
// e/(1+e), e = e^-|x|) reach 2.4 (an exp within 0.94 ulp, doubled where
// e and the result lie in different binades). e is kept in two parts,
// eh + el (el the rounding error of expCoref32's last step, 1 + q·r, by
// one more fused multiply-add: sigmoidParts32); with d = 1 + eh rounded
// and its error dErr (exact, as |eh| ≤ 1), num the numerator (1, or eh
// where x < 0) and q0 = num/d rounded, the result is q0 + (r0 + numLo -
// q0·(dErr + el))/(1+e), r0 = num - q0·d exactly (a fused
// multiply-add), numLo el where x < 0, and 1/(1+e) taken as q0 (x ≥ 0)
// or 1 - q0 (x < 0): one rounding at the end.
func sigmoidf32(x float32) float32 {
	if x != x {
		return x
	}
	eh, el := sigmoidParts32(math.Float32frombits(math.Float32bits(x) | 0x80000000))
	num, numLo := float32(1), float32(0)
	if x < 0 {
		num, numLo = eh, el
	}
	d := 1 + eh
	dErr := eh - (d - 1)
	q0 := num / d
	r0 := fma32(-q0, d, num)
	t := fma32(-q0, dErr+el, r0+numLo)
	rd := q0 // 1/(1+e)
	if x < 0 {
		rd = 1 - q0
	}
	return fma32(t, rd, q0)
}

// sigmoidParts32 is e^a for a ≤ 0 in two parts, as expCoref32 computes it
// (clamped at -104) but for its last step, p = 1 + q·r, kept as p and
// its rounding error 1 + q·r - p (a fused multiply-add: 1 - p is exact),
// each scaled by 2^n in two steps.
func sigmoidParts32(a float32) (eh, el float32) {
	a = max(a, -104)
	n := float32(math.RoundToEven(float64(a * log2e32)))
	r := fma32(-n, ln2Hi32, a)
	r = fma32(-n, ln2Lo32, r)
	q := horner32(expTaylor32[:len(expTaylor32)-1], r) // all but the last step, + 1
	p := fma32(q, r, 1)
	pl := fma32(q, r, 1-p)
	s1, s2 := pow2Steps32(n)
	return p * s1 * s2, pl * s1 * s2
}

// log1pf32 is ln(1+x) as native code computes it: u = 1+x rounded, c the
// rounding's error (exact: x - (u-1) where |x| ≤ 1, else 1 - (u-x)), and
// ln u by logf32 plus c/u, ln's first-order correction. Where c/u is NaN
// (x = -1, +Inf, NaN, below -1) logf32(u) is the result; below 2⁻²⁴ in
// magnitude x itself (-0 included).
func log1pf32(x float32) float32 {
	if float32(math.Abs(float64(x))) < expm1Tiny32 {
		return x
	}
	u := 1 + x
	c := x - (u - 1)
	if float32(math.Abs(float64(x))) > 1 {
		c = 1 - (u - x)
	}
	q := c / u
	l := logf32(u)
	if q != q {
		return l
	}
	return l + q
}

// expm1Taylor32 holds 1/k! for k = 9 down to 2, Horner order: e^r - 1 =
// r + r²·Σ r^(k-2)/k!, |r| ≤ ln2/2 (the truncation below 6e-10 relative).
var expm1Taylor32 = func() (c [8]float32) {
	for i := range c {
		k := 9 - i
		f := 1.0
		for j := 2; j <= k; j++ {
			f *= float64(j)
		}
		c[i] = float32(1 / f)
	}
	return c
}()

const (
	expm1Low32  = float32(-17.5)   // below it e^x - 1 rounds to -1
	expm1Tiny32 = float32(0x1p-24) // below it (in magnitude) to x, as log1p does
)

// expm1f32 is e^x - 1 as native code computes it: n = round(x·log₂e), r =
// x - n·ln2 in two steps, em = e^r - 1 by its Taylor polynomial, then
// 2^n·em + (2^n - 1) in one fused multiply-add where n ≤ 24 (2^n - 1 is
// exact there but at n = -25), else 2·(2^(n-1)·em + 2^(n-1)) - 1 (2^n
// itself overflows at n = 128, below e^x's own overflow).
func expm1f32(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > expOverflow32:
		return float32(math.Inf(1))
	case x < expm1Low32:
		return -1
	case float32(math.Abs(float64(x))) < expm1Tiny32:
		return x
	}
	xc := min(max(x, expm1Low32), 89)
	n := float32(math.RoundToEven(float64(xc * log2e32)))
	r := fma32(-n, ln2Hi32, xc)
	r = fma32(-n, ln2Lo32, r)
	p := horner32(expm1Taylor32[:], r)
	em := fma32(r*r, p, r)
	ni := int32(n)
	if n > 24 {
		h := math.Float32frombits(uint32(ni+126) << 23)
		h = fma32(h, em, h)
		return (h + h) - 1
	}
	s := math.Float32frombits(uint32(ni+127) << 23)
	return fma32(s, em, s-1)
}

// The f32 erf of native code: erff32 is its scalar twin.
//
// Below erfMid32 in magnitude, erf x = x·(2/√π)·Σ (-1)^n x^(2n)/(n!(2n+1))
// (n ≤ 10: the next term is under 2⁻²⁸ relative there), the leading
// coefficient in two parts so that its rounding does not count: |x|·hi +
// |x|·(lo + z·P(z)), z = x², P the other terms by Horner, and x's sign
// (±0 stay themselves). From erfMid32 to
// erfHigh32, erf x = 1 - e^(-x²)·R(x), R = erfc·e^(x²) (smooth, from 0.39
// to 0.14) a polynomial of degree 12 in u = (x - m)/h over the interval,
// its coefficients those of the Chebyshev interpolant of math.Erfc·math.Exp
// made at start-up (chebyshevMonomial); x² = hi + lo by a fused
// multiply-add, e^(-x²) = e^(-hi)·(1 - lo), and the 1 - e·R in one. At
// erfHigh32 and above ±1 (erfc(3.92) is under half an ulp of 1). Within
// 1.06 ulp of math.Erf over every 3rd f32 below 4 (TestMathErrors checks
// 1.1 over every 97th of all).

const (
	erfMid32  = float32(0.875)
	erfHigh32 = float32(3.92)
)

// erfTaylor32: the Taylor coefficients of erf(x)/x in z = x² for n = 10
// down to 1, Horner order; erfC0Hi32 + erfC0Lo32 is 2/√π (n = 0).
var erfTaylor32 = func() (c [10]float32) {
	for i := range c {
		n := 10 - i
		f := 1.0
		for j := 2; j <= n; j++ {
			f *= float64(j)
		}
		c[i] = float32(2 / math.SqrtPi / (f * float64(2*n+1)))
		if n%2 == 1 {
			c[i] = -c[i]
		}
	}
	return c
}()

var (
	erfC0Hi32 = float32(2 / math.SqrtPi)
	erfC0Lo32 = float32(2/math.SqrtPi - float64(erfC0Hi32))
	// u = x·erfInvH32 + erfU0_32 maps [erfMid32, erfHigh32] onto [-1, 1]
	erfInvH32 = float32(2 / float64(erfHigh32-erfMid32))
	erfU0_32  = float32(-float64(erfHigh32+erfMid32) / float64(erfHigh32-erfMid32))
	// erfcR32: R's polynomial in u, Horner order
	erfcR32 = func() (c [13]float32) {
		m := chebyshevMonomial(func(x float64) float64 { return math.Erfc(x) * math.Exp(x*x) },
			float64(erfMid32), float64(erfHigh32), len(c)-1)
		for i := range c {
			c[i] = float32(m[len(m)-1-i])
		}
		return c
	}()
)

// chebyshevMonomial is the interpolant of f of degree deg at the
// Chebyshev points of [lo, hi], as coefficients of 1, u, u², … in u =
// (2x - lo - hi)/(hi - lo).
func chebyshevMonomial(f func(float64) float64, lo, hi float64, deg int) []float64 {
	n := deg + 1
	cheb := make([]float64, n) // the coefficients of T_0 … T_deg
	for k := range cheb {
		s := 0.0
		for j := range n {
			th := math.Pi * (float64(j) + 0.5) / float64(n)
			s += f((lo+hi)/2+(hi-lo)/2*math.Cos(th)) * math.Cos(float64(k)*th)
		}
		cheb[k] = 2 * s / float64(n)
	}
	cheb[0] /= 2
	mono := make([]float64, n)
	prev, cur := []float64{1}, []float64{0, 1} // T_{k-1}, T_k in monomials
	for k := range n {
		t := prev
		if k == 1 {
			t = cur
		} else if k > 1 { // T_k = 2u·T_{k-1} - T_{k-2}
			next := make([]float64, k+1)
			for i, v := range cur {
				next[i+1] += 2 * v
			}
			for i, v := range prev {
				next[i] -= v
			}
			prev, cur, t = cur, next, next
		}
		for i, v := range t {
			mono[i] += cheb[k] * v
		}
	}
	return mono
}

// erff32 is erf x as native code computes it.
func erff32(x float32) float32 {
	if x != x {
		return x
	}
	sign := math.Float32bits(x) & 0x80000000
	a := float32(math.Abs(float64(x)))
	if a < erfMid32 {
		z := a * a
		p := horner32(erfTaylor32[:], z)
		return math.Float32frombits(math.Float32bits(fma32(a, erfC0Hi32, a*fma32(z, p, erfC0Lo32))) | sign)
	}
	if a >= erfHigh32 {
		return math.Float32frombits(0x3f800000 | sign)
	}
	u := fma32(a, erfInvH32, erfU0_32)
	r := horner32(erfcR32[:], u)
	hi := a * a
	lo := fma32(a, a, -hi)
	e := expCoref32(-hi)
	e = fma32(-e, lo, e)
	return math.Float32frombits(math.Float32bits(fma32(-e, r, 1)) | sign)
}

// The f32 log2 and exp2 of native code: log2f32 and exp2f32 are their
// scalar twins.
//
// log2 x = e + ln(m)·log₂e for x = m·2^e (logCoref32's m in [√½, √2), f =
// m - 1 exact and its polynomial y ≈ ln m - f), with f·log₂e in two parts
// (f·Lh rounded and its error by a fused multiply-add, log₂e = Lh + Ll)
// and e added by a Fast2Sum (|e| ≥ 1 > |f·Lh| where e ≠ 0), so that only
// the last addition rounds much: exact at powers of two; within 1.07 ulp
// of float64 over every 7th positive f32 (TestMathErrors). exp2 x =
// 2^f·2^n, n = round(x), f = x - n exact in [-½, ½], 2^f by the Taylor
// polynomial of e^(f·ln2) (its coefficients ln2^k/k!), 2^n in two steps
// as expCoref32's (x clamped to [-151, 129]: outside, 0 and +∞ by the
// scaling itself): within 0.88 ulp over every 7th f32 (the flushing form,
// Builder.Exp2Flush, is this too).

var (
	log2eHi32 = float32(math.Log2E)
	log2eLo32 = float32(math.Log2E - float64(float32(math.Log2E)))
	// exp2Taylor32: ln2^k/k! for k = 7 down to 0, Horner order
	exp2Taylor32 = func() (c [8]float32) {
		for i := range c {
			k := 7 - i
			f := 1.0
			for j := 2; j <= k; j++ {
				f *= float64(j)
			}
			c[i] = float32(math.Pow(math.Ln2, float64(k)) / f)
		}
		return c
	}()
)

// log2f32 is log₂ x as native code computes it.
func log2f32(x float32) float32 {
	if y, ok := logSpecial32(x); ok {
		return y
	}
	s, t := log2Parts32(x)
	return s + t
}

// log2Parts32 is log₂ x for a positive finite x as two f32, s + t, |t|
// within about an ulp of s: log2f32 is their sum, powf32 multiplies both.
func log2Parts32(x float32) (s, t float32) {
	e, f := logSplit32(x)
	z := f * f
	p := horner32(logP[:], f)
	y := fma32(z, -0.5, p*f*z) // ln m - f
	a := f * log2eHi32
	rest := fma32(f, log2eLo32, fma32(f, log2eHi32, -a))
	rest = fma32(y, log2eHi32, rest)
	ef := float32(e)
	s = ef + a
	return s, (a - (s - ef)) + rest
}

// exp2f32 is 2^x as native code computes it.
func exp2f32(x float32) float32 {
	if x != x {
		return x
	}
	x = min(max(x, -151), 129)
	n := float32(math.RoundToEven(float64(x)))
	f := x - n
	p := horner32(exp2Taylor32[:], f)
	s1, s2 := pow2Steps32(n)
	return p * s1 * s2
}

// The f32 sin and cos of native code: sinf32 and cosf32 are their scalar
// twins for |x| ≤ sinBound32 (and NaN). A vector with a lane beyond the
// bound (∞ included) bails out, and the launch runs on the executor, whose
// float64 sin and cos are right at every argument; below it, k =
// round(x·2/π), r = x - k·π/2 with π/2 in three f32 parts (sinPiHalf32,
// from a 100-digit π: the third part in float64 arithmetic would be off by
// 3.5%, 22 ulp at x = 2023.1857), k·part exact in each fused multiply-add;
// then the Taylor polynomials of sin r (to r¹¹) and cos r (to r¹²) on
// |r| ≤ π/4, chosen and negated by k mod 4. Within 1.46 (sin) and 1.49
// (cos) ulp of float64 over every 7th f32 up to the bound
// (TestMathErrors checks 1.5 over every 97th).

const sinBound32 = float32(1 << 17)

// sinPiHalf32 is π/2 as three f32: the nearest, then the nearest to each
// remainder.
var sinPiHalf32 = func() (c [3]float32) {
	r, _, _ := big.ParseFloat("1.5707963267948966192313216916397514420985846996875529104874722961539082031431044993140174126710585339", 10, 300, big.ToNearestEven)
	for i := range c {
		c[i], _ = r.Float32()
		r.Sub(r, big.NewFloat(float64(c[i])))
	}
	return c
}()

// sinTaylor32: (-1)^k/(2k+1)! for k = 5 down to 1; cosTaylor32:
// (-1)^k/(2k)! for k = 6 down to 1; Horner order in z = r².
var sinTaylor32, cosTaylor32 = func() (s [5]float32, c [6]float32) {
	fact := func(n int) float64 {
		f := 1.0
		for j := 2; j <= n; j++ {
			f *= float64(j)
		}
		return f
	}
	for i := range s {
		k := 5 - i
		s[i] = float32(math.Pow(-1, float64(k)) / fact(2*k+1))
	}
	for i := range c {
		k := 6 - i
		c[i] = float32(math.Pow(-1, float64(k)) / fact(2*k))
	}
	return
}()

const (
	twoOverPi32 = float32(2 / math.Pi)
	sinTiny32   = float32(0x1p-12) // below it sin x rounds to x
)

func sinf32(x float32) float32 { return sincosf32(x, false) }
func cosf32(x float32) float32 { return sincosf32(x, true) }

// sincosf32 is sin x, or cos x, as native code computes it for |x| ≤
// sinBound32.
func sincosf32(x float32, cos bool) float32 {
	k := float32(math.RoundToEven(float64(x * twoOverPi32)))
	r := x
	for _, c := range sinPiHalf32 {
		r = fma32(-k, c, r)
	}
	z := r * r
	p := horner32(sinTaylor32[:], z)
	s := fma32(r*z, p, r)
	q := horner32(cosTaylor32[:], z)
	co := fma32(z, q, 1)
	quad := int32(k)
	if cos {
		quad++
	}
	v := s
	if quad&1 != 0 {
		v = co
	}
	if quad&2 != 0 {
		v = math.Float32frombits(math.Float32bits(v) ^ 0x80000000)
	}
	if !cos && float32(math.Abs(float64(x))) < sinTiny32 {
		return x
	}
	return v
}

// powf32 is x^y as native code computes it: Go's special cases of
// math.Pow in its order (y = 0 or x = 1, y = 1, NaN, x = ±0 or ±∞, y =
// ±∞, y = ½ as √x, a negative x with y not an integer), then 2^(y·log₂|x|)
// with log₂|x| in two parts (log2Parts32) and y·log₂|x| = wh + wl by a
// fused multiply-add for wh's error, n = round(wh + wl) and 2^n·2^f with
// f = (wh - n) + wl (|f| ≤ ½: exp2f32's polynomial), and x's sign where y
// is an odd integer. The error
// grows with |y| (the two parts of log₂|x| are good to about 2⁻²⁷): within
// 1.5 ulp of float64 for |y| ≤ 4 and |y·log₂|x|| ≤ 120, 1 + |y|/4 ulp
// over a wider sample (TestPowErrors); the IR's bound, the GPU's, is
// 2⁻²¹·(1 + |y·log₂x|) relative.
// powClamp32 bounds y·log₂|x| (beyond it the result is 0 or ∞): then n =
// round(wh + wl) is in [-152, 130] and f in [-1, 1] even where |wh + wl|
// is past them, so that 2^f·2^n underflows or overflows as it should.
const powClamp32 = float32(160)

func powf32(x, y float32) float32 {
	inf := float32(math.Inf(1))
	switch {
	case y == 0 || x == 1:
		return 1
	case y == 1:
		return x
	case x != x || y != y:
		return float32(math.NaN())
	}
	ax := float32(math.Abs(float64(x)))
	yInt := float32(math.Trunc(float64(y))) == y
	odd := yInt && math.Abs(float64(y)) < 1<<31 && int32(y)&1 != 0
	sg := uint32(0)
	if odd {
		sg = math.Float32bits(x) & 0x80000000
	}
	switch {
	case ax == 0 || ax == inf:
		if (y < 0) != (ax == inf) {
			return math.Float32frombits(math.Float32bits(inf) | sg)
		}
		return math.Float32frombits(sg)
	case math.Abs(float64(y)) > math.MaxFloat32:
		switch {
		case ax == 1:
			return 1
		case (ax < 1) == (y > 0):
			return 0
		}
		return inf
	case y == 0.5:
		return float32(math.Sqrt(float64(x)))
	case x < 0 && !yInt:
		return float32(math.NaN())
	}
	s, t := log2Parts32(ax)
	wh := y * s
	wl := fma32(y, t, fma32(y, s, -wh))
	if !(float32(math.Abs(float64(wh))) < powClamp32) { // 0 or ∞ either way; wl may be NaN
		wl = 0
	}
	wh = min(max(wh, -powClamp32), powClamp32)
	n := float32(math.RoundToEven(float64(min(max(wh+wl, -152), 130))))
	f := min(max((wh-n)+wl, -1), 1)
	p := horner32(exp2Taylor32[:], f)
	s1, s2 := pow2Steps32(n)
	mag := p * s1 * s2
	return math.Float32frombits(math.Float32bits(mag) ^ sg)
}
