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

// logf32 is ln x as native code computes it.
func logf32(x float32) float32 {
	switch {
	case x != x:
		return x
	case x < 0:
		return float32(math.NaN())
	case x == 0:
		return float32(math.Inf(-1))
	case x > math.MaxFloat32:
		return x
	}
	return logCoref32(x)
}

func logCoref32(x float32) float32 {
	bias := int32(127)
	if x < minNormal32 { // a subnormal: scaled into the normal range
		x *= subnormScale
		bias += 23
	}
	bits := math.Float32bits(x)
	e := int32(bits>>23) - bias
	m := math.Float32frombits(bits&0x7fffff | 0x3f800000) // [1, 2)
	if m > sqrt2_32 {
		m *= 0.5
		e++
	}
	f := m - 1
	z := f * f
	p := logP[0]
	for _, c := range logP[1:] {
		p = fma32(p, f, c)
	}
	y := p * f * z
	ef := float32(e)
	y = fma32(ef, ln2Lo32, y)
	y = fma32(z, -0.5, y)
	r := f + y
	return fma32(ef, ln2Hi32, r)
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
	p := expTaylor32[0]
	for _, c := range expTaylor32[1:] {
		p = fma32(p, r, c)
	}
	ni := int32(n)
	n1 := ni >> 1
	n2 := ni - n1
	return p * math.Float32frombits(uint32(n1+127)<<23) * math.Float32frombits(uint32(n2+127)<<23)
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
