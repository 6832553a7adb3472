package cpu

import "math"

// expf is e^x for float32, within 1 ulp of float32(math.Exp(x)) (see
// expFMA); it overflows to +Inf above 88.72 and rounds through the f32
// subnormals to 0 below -103.97. The vector kernel (vmath_amd64.s) computes
// the same operations, so that a lane's result does not depend on whether
// it went through the vector body or the scalar tail.
func expf(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > 88.72284:
		return float32(math.Inf(1))
	case x < -103.97208:
		return 0
	}
	return float32(expFMA(float64(x)))
}

// expPoly holds 1/k! for k = 11 down to 0: e^y's Taylor polynomial, Horner
// order.
var expPoly = func() (c [12]float64) {
	f := 1.0
	for k := 1; k <= 11; k++ {
		f *= float64(k)
	}
	for i := range c { // c[i] = 1/(11-i)!
		c[i] = 1 / f
		if k := 11 - i; k > 0 {
			f /= float64(k)
		}
	}
	return c
}()

// expFMA is e^x for x in about [-105, 89] (the f32 range, and ±18.2 for
// tanh), in float64: t = x·log2(e), n = round(t) (ties to even), y =
// (t-n)·ln2 with |y| ≤ 0.347, e^y by its degree-11 Taylor polynomial in
// fused multiply-adds (truncation below 7e-15 relative), scaled by 2^n
// through the exponent bits.
func expFMA(x float64) float64 {
	t := x * math.Log2E
	n := math.RoundToEven(t)
	y := (t - n) * math.Ln2
	p := expPoly[0]
	for _, c := range expPoly[1:] {
		p = math.FMA(p, y, c)
	}
	return p * math.Float64frombits(uint64(int64(n)+1023)<<52)
}

// tanhf is tanh for float32, within 1 ulp of float32(math.Tanh(x)). For
// |x| ≥ 1/256 it is 1 - 2/(e^{2x}+1) with expFMA, of either sign: the
// subtraction cancels as |x| shrinks, by a factor near 1/(2|x|) ≤ 128, which
// leaves below 1e-12 relative, far below an f32 ulp. Below 1/256 it is
// x(1 - x²/3 + 2x⁴/15) (the next term, 17x⁷/315, is below 3e-16 relative),
// which keeps the sign of -0. x is clamped to ±9.1, where tanh rounds to ±1
// in f32, so that e^{2x} stays finite. As with expf, the vector kernel does
// the same operations. (In the scalar form, one test of |x|: the pair
// -c < x && x < c compiles to two branches, the first a coin flip on data of
// either sign, which cost 2× here.)
func tanhf(x float32) float32 {
	a := float64(x)
	if a > 9.1 {
		a = 9.1
	}
	if a < -9.1 {
		a = -9.1
	}
	if math.Abs(a) < 1.0/256 { // false for NaN, which the formula keeps
		s := a * a
		return float32(a * (1 + s*(-1.0/3+s*(2.0/15))))
	}
	return float32(1 - 2/(expFMA(2*a)+1))
}
