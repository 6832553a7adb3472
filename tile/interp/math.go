package interp

import (
	"math"

	"github.com/tilefuse/tilefuse/tile"
)

// Func64 is the float64 function that defines float math op o (exp, log,
// tanh, erf, sigmoid, ...): an f64 value is the function's result, an f32
// value the function of the f32 operand widened to f64, rounded to f32. It
// reports false for ops that are not float math functions of one operand.
func Func64(o tile.Op) (func(float64) float64, bool) {
	f, ok := func64[o]
	return f, ok
}

var func64 = map[tile.Op]func(float64) float64{
	tile.OpExp:   Exp64,
	tile.OpExp2:  math.Exp2,
	tile.OpLog:   Log64,
	tile.OpLog2:  Log2_64,
	tile.OpLog1p: math.Log1p,
	tile.OpExpm1: math.Expm1,
	tile.OpSqrt:  math.Sqrt,
	tile.OpRsqrt: func(x float64) float64 { return 1 / math.Sqrt(x) },
	tile.OpTanh:  math.Tanh,
	tile.OpErf:   math.Erf,
	tile.OpSin:   math.Sin,
	tile.OpCos:   math.Cos,
	tile.OpFloor: math.Floor,
	tile.OpCeil:  math.Ceil,
	tile.OpAbs:   math.Abs,
	// 1/(1+e^-x), written so that neither form overflows: for x < 0,
	// e^x/(1+e^x) keeps the small results that 1/(1+Inf) would lose
	tile.OpSigmoid: func(x float64) float64 {
		if x >= 0 {
			return 1 / (1 + Exp64(-x))
		}
		e := Exp64(x)
		return e / (1 + e)
	},
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
	if frac, exp := math.Frexp(x); frac == 0.5 {
		return float64(exp - 1)
	}
	return Log64(x) * math.Log2E
}

// Pow64 is x^y: Go's math.Pow (Go's own algorithm on every architecture:
// its special cases in their order, |y|'s fraction yf folded into
// (-½, ½] as e^(yf·log x), |y|'s integer part by repeated squaring of
// x's mantissa with the powers of two kept apart, Ldexp last) with its
// logarithm taken by Log64, where math.Pow's is math.Log: on amd64 that
// gives math.Pow(2⁻¹⁰⁷⁰, 0.25) = 1.03e-77 where x^y is 1.1e-81. Elsewhere
// Pow64 is math.Pow bit for bit (TestPow64).
func Pow64(x, y float64) float64 {
	switch {
	case y == 0 || x == 1:
		return 1
	case y == 1:
		return x
	case math.IsNaN(x) || math.IsNaN(y):
		return math.NaN()
	case x == 0, math.IsInf(y, 0), math.IsInf(x, 0), y == 0.5, y == -0.5:
		return math.Pow(x, y) // no logarithm taken
	}
	yi, yf := math.Modf(math.Abs(y))
	if yf != 0 && x < 0 {
		return math.NaN()
	}
	if yi >= 1<<63 {
		return math.Pow(x, y) // no logarithm taken
	}
	a1, ae := 1.0, 0
	if yf != 0 {
		if yf > 0.5 {
			yf--
			yi++
		}
		a1 = math.Exp(yf * Log64(x))
	}
	x1, xe := math.Frexp(x)
	for i := int64(yi); i != 0; i >>= 1 {
		if xe < -1<<12 || 1<<12 < xe { // ae past any float64's exponent: 0 or ∞
			ae += xe
			break
		}
		if i&1 == 1 {
			a1 *= x1
			ae += xe
		}
		x1 *= x1
		xe <<= 1
		if x1 < .5 {
			x1 += x1
			xe--
		}
	}
	if y < 0 {
		a1 = 1 / a1
		ae = -ae
	}
	return math.Ldexp(a1, ae)
}
