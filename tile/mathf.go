package tile

import "math"

// expf is e^x for float32, computed in float64 by range reduction: x·log₂e =
// n + f with |f| ≤ ½, 2^f = e^y (y = f·ln2, |y| ≤ 0.347) by its degree-7
// Taylor polynomial (truncation error below 6e-9 relative, a tenth of an f32
// ulp), scaled by 2^n through the exponent bits. The result is within 1 ulp
// of float32(math.Exp(x)), overflows to +Inf above 88.72, and rounds through
// the f32 subnormals to 0 below -103.97.
func expf(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > 88.72284:
		return float32(math.Inf(1))
	case x < -103.97208:
		return 0
	}
	const round = 0x1.8p52 // adding and subtracting it rounds |t| < 2⁵¹ to an integer
	return float32(expPoly(float64(x)))
}

// expPoly is e^x for x in about [-105, 89] (the f32 range), to 6e-9 relative:
// the range reduction and polynomial of expf, in float64.
func expPoly(x float64) float64 {
	const round = 0x1.8p52 // adding and subtracting it rounds |t| < 2⁵¹ to an integer
	t := x * math.Log2E
	n := (t + round) - round
	y := (t - n) * math.Ln2
	p := 1 + y*(1+y*(1.0/2+y*(1.0/6+y*(1.0/24+y*(1.0/120+y*(1.0/720+y*(1.0/5040)))))))
	return p * math.Float64frombits(uint64(int64(n)+1023)<<52)
}

// tanhf is tanh for float32, within 1 ulp of float32(math.Tanh(x)): for
// |x| ≥ 0.625 it is 1 - 2/(e^{2|x|}+1) with expPoly (relative error below
// 4e-9 there); below, where that cancels, math.Tanh itself.
func tanhf(x float32) float32 {
	ax := math.Abs(float64(x))
	switch {
	case ax < 0.625 || ax != ax:
		return float32(math.Tanh(float64(x)))
	case ax > 9.1: // tanh rounds to ±1 in f32
		return float32(math.Copysign(1, float64(x)))
	}
	t := 1 - 2/(expPoly(2*ax)+1)
	return float32(math.Copysign(t, float64(x)))
}

func tanhSlice32(d, a []float32) {
	a = a[:len(d)]
	for i, x := range a {
		d[i] = tanhf(x)
	}
}

func expSlice32(d, a []float32) {
	a = a[:len(d)]
	for i, x := range a {
		d[i] = expf(x)
	}
}

// Exp64 is e^x, right where Go's amd64 math.Exp is not: that assembly
// returns +Inf from about x = 709.1, while e^x stays finite up to 709.78.
func Exp64(x float64) float64 {
	if x > 709 && x < 709.8 {
		return math.Exp(x-1) * math.E // within 2 ulp
	}
	return math.Exp(x)
}

// Log64 is log(x), right for subnormal x, where Go's amd64 math.Log is not.
func Log64(x float64) float64 {
	if x > 0 && x < 0x1p-1022 {
		return math.Log(x*0x1p54) - 54*math.Ln2
	}
	return math.Log(x)
}

// Log2_64 is log₂(x): exact at powers of two, and accurate near 1, where
// Go's math.Log2 (frexp, then a sum that cancels) loses digits.
func Log2_64(x float64) float64 {
	frac, exp := math.Frexp(x)
	switch {
	case frac == 0.5:
		return float64(exp - 1)
	case x > 0.5 && x < 2:
		return Log64(x) * math.Log2E
	}
	return Log64(x) * math.Log2E
}
