package tile

import "math"

// expf is e^x for float32, within 1 ulp of float32(math.Exp(x)) (see
// expCore); it overflows to +Inf above 88.72 and rounds through the f32
// subnormals to 0 below -103.97.
func expf(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > 88.72284:
		return float32(math.Inf(1))
	case x < -103.97208:
		return 0
	}
	return float32(expCore(float64(x)))
}

// exp2Frac holds 2^(i/32) for i < 32, as float64 bits less i<<47: expCore
// adds back the whole integer k<<47, which puts k/32's integer part into the
// exponent field and cancels the fraction's bits.
var exp2Frac = func() (t [32]uint64) {
	for i := range t {
		t[i] = math.Float64bits(math.Exp2(float64(i)/32)) - uint64(i)<<47
	}
	return t
}()

// expCore is e^x for x in about [-105, 89] (the f32 range, doubled for
// tanh), in float64 to 2e-12 relative: x·32/ln2 = k + r with integer k and
// |r| ≤ ½, e^x = 2^(k/32) · e^y with y = r·ln2/32, |y| ≤ 0.0109; 2^(k/32) is
// a table entry scaled through the exponent bits and e^y its degree-4 Taylor
// polynomial (truncation below 1.3e-12). Four multiply-adds, where a
// polynomial over the whole of |y| ≤ ln2/2 needs seven.
func expCore(x float64) float64 {
	const round = 0x1.8p52 // adding it leaves round(t) in the low mantissa bits
	t := x * (32 / math.Ln2)
	kd := t + round
	ki := math.Float64bits(kd)
	y := (t - (kd - round)) * (math.Ln2 / 32)
	p := 1 + y*(1+y*(1.0/2+y*(1.0/6+y*(1.0/24))))
	return p * math.Float64frombits(exp2Frac[ki&31]+ki<<47)
}

// tanhf is tanh for float32, within 1 ulp of float32(math.Tanh(x)). For
// |x| ≥ 1/256 it is 1 - 2/(e^{2x}+1) with expCore, of either sign: the
// subtraction cancels as |x| shrinks, by a factor near 1/(2|x|) ≤ 128, which
// leaves 3e-10 relative from expCore's 2e-12, far below an f32 ulp. Below
// 1/256 it is x(1 - x²/3 + 2x⁴/15) (the next term, 17x⁷/315, is below 3e-16
// relative), which keeps the sign of -0. The switch point is far from the
// values GELU and friends feed it, so the branch is predictable (one test of
// |x|: the pair -c < x && x < c compiles to two branches, and the first is a
// coin flip on data of either sign, which cost 2× here). x is clamped
// to ±9.1, where tanh rounds to ±1 in f32, so that e^{2x} stays finite.
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
	return float32(1 - 2/(expCore(2*a)+1))
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
