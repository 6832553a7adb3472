package ptxsim

import (
	"math"
	"math/big"

	"github.com/tilefuse/tilefuse/tile/interp"
)

// Floating-point arithmetic (PTX ISA §9.7.3 single and double precision,
// §9.7.4 half precision). .rn results are Go's (correctly rounded) float32
// and float64 operations; the directed roundings .rz .rm .rp are computed
// exactly with math/big. The .approx instructions (ex2, lg2, rcp, rsqrt,
// sqrt, sin, cos, tanh, div.approx/full) are evaluated to within an ulp of
// the exact result, more accurately than the GPU's: a kernel that relies
// on the hardware's specific approximation error is not checked for it.
// Half types (.f16, .bf16 and their x2 pairs) are computed in float64 and
// rounded once.

func init() {
	register(decodeFma, "fma")
	register(decodeMath, "sqrt", "rsqrt", "rcp", "ex2", "lg2", "sin", "cos", "tanh")
	register(decodeCopysign, "copysign")
	register(decodeTestp, "testp")
}

func roundingOf(d *decoder) rounding {
	switch {
	case d.has("rz"):
		return rz
	case d.has("rm"):
		return rm
	case d.has("rp"):
		return rp
	}
	return rn
}

// bigOp computes op exactly and rounds it to f32 (prec 24) or f64 (prec
// 53) by a directed mode. For f32 the exact result is first rounded to 53
// bits toward zero with the lowest bit set when inexact (round to odd),
// which a second rounding to 24 bits turns into the correct result,
// subnormals and overflow included.
func bigOp(prec uint, mode rounding, op byte, xs ...float64) float64 {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			// specials need no rounding: float64 arithmetic gives them
			switch op {
			case '+':
				return xs[0] + xs[1]
			case '-':
				return xs[0] - xs[1]
			case '*':
				return xs[0] * xs[1]
			case '/':
				return xs[0] / xs[1]
			case 'f':
				return xs[0]*xs[1] + xs[2]
			}
		}
	}
	if op == '/' && xs[1] == 0 {
		return xs[0] / xs[1]
	}
	z := new(big.Float).SetPrec(53)
	if prec == 24 {
		z.SetMode(big.ToZero)
	} else {
		z.SetMode(map[rounding]big.RoundingMode{rn: big.ToNearestEven, rz: big.ToZero, rm: big.ToNegativeInf, rp: big.ToPositiveInf}[mode])
	}
	a := new(big.Float).SetFloat64(xs[0])
	b := new(big.Float).SetFloat64(xs[1])
	switch op {
	case '+':
		z.Add(a, b)
	case '-':
		z.Sub(a, b)
	case '*':
		z.Mul(a, b)
	case '/':
		z.Quo(a, b)
	case 'f':
		p := new(big.Float).SetPrec(106).Mul(a, b) // exact
		z.Add(p, new(big.Float).SetFloat64(xs[2]))
	}
	r, _ := z.Float64()
	if prec == 24 {
		if z.Acc() != big.Exact {
			r = math.Float64frombits(math.Float64bits(r) | 1)
		}
		return float64(math.Float32frombits(uint32(fmtF32.round(r, mode))))
	}
	if r == 0 && z.Sign() != 0 || math.IsInf(r, 0) {
		// beyond float64's range: the directed mode's limit
		return float64(math.Float32frombits(0)) + r
	}
	return r
}

// fma32 is the correctly rounded f32 fused multiply-add: the product is
// exact in float64; the sum is rounded once, with a correction where the
// float64 sum sits exactly on an f32 rounding boundary.
func fma32(a, b, c float32) float32 {
	// fast path: the float64 FMA is one rounding of the exact result; a
	// second rounding to f32 is wrong only when that lands exactly halfway
	// between two f32 values (low 29 bits 1<<28) or in the subnormal range
	r := math.FMA(float64(a), float64(b), float64(c))
	if r != r || r == 0 || math.IsInf(r, 0) {
		return float32(r)
	}
	if math.Float64bits(r)&(1<<29-1) != 1<<28 && math.Abs(r) >= 0x1p-126 {
		return float32(r)
	}
	return fma32Slow(a, b, c)
}

func fma32Slow(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	s := p + float64(c)
	if math.IsInf(s, 0) || math.IsNaN(s) || s == 0 {
		return float32(math.FMA(float64(a), float64(b), float64(c)))
	}
	// the error of the float64 sum (TwoSum)
	bb := s - p
	err := (p - (s - bb)) + (float64(c) - bb)
	if err == 0 {
		return float32(s)
	}
	r := float32(s)
	// s is within half a float64 ulp of the exact sum: rounding s to f32 is
	// right unless s is exactly halfway between two f32 values
	lo, hi := r, r
	if float64(r) < s {
		hi = math.Nextafter32(r, float32(math.Inf(1)))
	} else if float64(r) > s {
		lo = math.Nextafter32(r, float32(math.Inf(-1)))
	}
	if lo != hi && (float64(lo)+float64(hi))/2 == s {
		if err > 0 {
			return hi
		}
		return lo
	}
	return r
}

func sat32(x float32) float32 {
	switch {
	case x != x:
		return 0
	case x < 0:
		return 0
	case x > 1:
		return 1
	}
	return x
}

func sat64(x float64) float64 {
	switch {
	case x != x:
		return 0
	case x < 0:
		return 0
	case x > 1:
		return 1
	}
	return x
}

// halfFormat returns the format of a half type (and whether it is a pair).
func halfFormat(t ptxType) (format, bool, bool) {
	switch t {
	case tyF16:
		return fmtF16, false, true
	case tyF16x2:
		return fmtF16, true, true
	case tyBF16:
		return fmtBF16, false, true
	case tyBF16x2:
		return fmtBF16, true, true
	}
	return format{}, false, false
}

// halfOp lifts a float64 operation to a half type (pairs lane-wise).
func halfOp(f format, pair bool, mode rounding, op func(xs ...float64) float64) func(xs ...uint64) uint64 {
	one := func(shift uint, xs []uint64) uint64 {
		vs := make([]float64, len(xs))
		for i, x := range xs {
			vs[i] = f.value(x >> shift & 0xffff)
		}
		return f.round(op(vs...), mode) << shift
	}
	return func(xs ...uint64) uint64 {
		r := one(0, xs)
		if pair {
			r |= one(16, xs)
		}
		return r
	}
}

// decodeFloatArith: add, sub, mul, div on float types.
func decodeFloatArith(d *decoder, t ptxType) error {
	mode := roundingOf(d)
	ftz, sat := d.has("ftz"), d.has("sat")
	op := map[string]byte{"add": '+', "sub": '-', "mul": '*', "div": '/'}[d.base]
	if f, pair, ok := halfFormat(t); ok {
		if op == '/' {
			return d.errorf("div on half types is not a PTX instruction")
		}
		h := halfOp(f, pair, mode, func(xs ...float64) float64 {
			var r float64
			switch op {
			case '+':
				r = xs[0] + xs[1]
			case '-':
				r = xs[0] - xs[1]
			default:
				r = xs[0] * xs[1]
			}
			if sat {
				r = sat64(r)
			}
			return r
		})
		return op2(d, t, t, func(a, b uint64) uint64 { return h(a, b) })
	}
	switch t {
	case tyF32:
		return op2(d, t, t, func(a, b uint64) uint64 {
			x, y := f32(a), f32(b)
			if ftz {
				x, y = ftz32(x), ftz32(y)
			}
			var r float32
			if mode == rn {
				switch op {
				case '+':
					r = x + y
				case '-':
					r = x - y
				case '*':
					r = x * y
				default:
					r = x / y
				}
			} else {
				r = float32(bigOp(24, mode, op, float64(x), float64(y)))
			}
			if ftz {
				r = ftz32(r)
			}
			if sat {
				r = sat32(r)
			}
			return b32(r)
		})
	case tyF64:
		return op2(d, t, t, func(a, b uint64) uint64 {
			x, y := f64(a), f64(b)
			var r float64
			if mode == rn {
				switch op {
				case '+':
					r = x + y
				case '-':
					r = x - y
				case '*':
					r = x * y
				default:
					r = x / y
				}
			} else {
				r = bigOp(53, mode, op, x, y)
			}
			if sat {
				r = sat64(r)
			}
			return b64(r)
		})
	}
	return d.errorf("%s on .%v is not simulated", d.base, t)
}

// decodeFma: fma and mad on floats (mad.f32 is fma on every target the
// simulator knows, PTX ISA §9.7.3.6).
func decodeFma(d *decoder) error {
	t, err := d.typ()
	if err != nil {
		return err
	}
	mode := roundingOf(d)
	ftz, sat := d.has("ftz"), d.has("sat")
	if f, pair, ok := halfFormat(t); ok {
		h := halfOp(f, pair, mode, func(xs ...float64) float64 {
			r := math.FMA(xs[0], xs[1], xs[2]) // exact product and sum of halves fit a float64 but for extreme exponents
			if sat {
				r = sat64(r)
			}
			return r
		})
		return op3(d, t, t, t, func(a, b, c uint64) uint64 { return h(a, b, c) })
	}
	switch t {
	case tyF32:
		return op3(d, t, t, t, func(a, b, c uint64) uint64 {
			x, y, z := f32(a), f32(b), f32(c)
			if ftz {
				x, y, z = ftz32(x), ftz32(y), ftz32(z)
			}
			var r float32
			if mode == rn {
				r = fma32(x, y, z)
			} else {
				r = float32(bigOp(24, mode, 'f', float64(x), float64(y), float64(z)))
			}
			if ftz {
				r = ftz32(r)
			}
			if sat {
				r = sat32(r)
			}
			return b32(r)
		})
	case tyF64:
		return op3(d, t, t, t, func(a, b, c uint64) uint64 {
			var r float64
			if mode == rn {
				r = math.FMA(f64(a), f64(b), f64(c))
			} else {
				r = bigOp(53, mode, 'f', f64(a), f64(b), f64(c))
			}
			if sat {
				r = sat64(r)
			}
			return b64(r)
		})
	}
	return d.errorf("%s on .%v is not simulated", d.base, t)
}

// less orders floats with -0 below +0 (PTX min/max, §9.7.3.10).
func less(x, y float64) bool {
	if x == 0 && y == 0 {
		return math.Signbit(x) && !math.Signbit(y)
	}
	return x < y
}

func decodeFloatMinMax(d *decoder, t ptxType) error {
	isMax := d.base == "max"
	nanProp := d.has("NaN")
	if d.has("xorsign") {
		return d.errorf(".xorsign is not simulated")
	}
	ftz := d.has("ftz")
	pick := func(x, y float64) float64 {
		switch {
		case x != x && y != y:
			return math.NaN()
		case x != x || y != y:
			if nanProp {
				return math.NaN()
			}
			if x != x {
				return y
			}
			return x
		}
		if less(x, y) == isMax {
			return y
		}
		return x
	}
	if f, pair, ok := halfFormat(t); ok {
		h := halfOp(f, pair, rn, func(xs ...float64) float64 { return pick(xs[0], xs[1]) })
		return op2(d, t, t, func(a, b uint64) uint64 { return h(a, b) })
	}
	switch t {
	case tyF32:
		return op2(d, t, t, func(a, b uint64) uint64 {
			x, y := f32(a), f32(b)
			if ftz {
				x, y = ftz32(x), ftz32(y)
			}
			r := pick(float64(x), float64(y))
			if r != r {
				return 0x7fffffff
			}
			return b32(float32(r))
		})
	case tyF64:
		return op2(d, t, t, func(a, b uint64) uint64 {
			r := pick(f64(a), f64(b))
			if r != r {
				return 0x7fffffffffffffff
			}
			return b64(r)
		})
	}
	return d.errorf("%s on .%v is not simulated", d.base, t)
}

// decodeFloatUnary: abs and neg (sign-bit operations).
func decodeFloatUnary(d *decoder, t ptxType) error {
	ftz := d.has("ftz")
	var sign uint64
	switch t {
	case tyF32:
		sign = 1 << 31
	case tyF64:
		sign = 1 << 63
	case tyF16, tyBF16:
		sign = 1 << 15
	case tyF16x2, tyBF16x2:
		sign = 1<<31 | 1<<15
	default:
		return d.errorf("%s on .%v is not simulated", d.base, t)
	}
	neg := d.base == "neg"
	return op1(d, t, func(a uint64) uint64 {
		if ftz && t == tyF32 {
			a = b32(ftz32(f32(a)))
		}
		if neg {
			return a ^ sign
		}
		return a &^ sign
	})
}

// decodeMath: sqrt, rsqrt, rcp, ex2, lg2, sin, cos, tanh.
func decodeMath(d *decoder) error {
	t, err := d.typ()
	if err != nil {
		return err
	}
	approx := d.has("approx")
	mode := roundingOf(d)
	ftz := d.has("ftz")
	var f func(x float64) float64
	switch d.base {
	case "sqrt":
		f = math.Sqrt
	case "rsqrt":
		f = func(x float64) float64 { return 1 / math.Sqrt(x) }
	case "rcp":
		f = func(x float64) float64 { return 1 / x }
	case "ex2":
		f = math.Exp2
	case "lg2":
		f = interp.Log2_64
	case "sin":
		f = math.Sin
	case "cos":
		f = math.Cos
	case "tanh":
		f = math.Tanh
	}
	switch d.base {
	case "ex2", "lg2", "sin", "cos", "tanh", "rsqrt":
		if !approx {
			return d.errorf("%s exists only as .approx", d.base)
		}
	case "sqrt", "rcp":
		if !approx && !d.has("rn") && !d.has("rz") && !d.has("rm") && !d.has("rp") {
			return d.errorf("%s needs .approx or a rounding modifier", d.base)
		}
	}
	if fm, pair, ok := halfFormat(t); ok {
		h := halfOp(fm, pair, rn, func(xs ...float64) float64 { return f(xs[0]) })
		return op1(d, t, func(a uint64) uint64 { return h(a) })
	}
	switch t {
	case tyF32:
		return op1(d, t, func(a uint64) uint64 {
			x := f32(a)
			if ftz {
				x = ftz32(x)
			}
			var r float32
			switch {
			case d.base == "rcp" && mode != rn && !approx:
				r = float32(bigOp(24, mode, '/', 1, float64(x)))
			case d.base == "sqrt" && mode != rn && !approx:
				r = roundF32(sqrtDirected(float64(x), 24, mode), mode)
			default:
				r = float32(f(float64(x)))
			}
			if ftz {
				r = ftz32(r)
			}
			return b32(r)
		})
	case tyF64:
		return op1(d, t, func(a uint64) uint64 {
			x := f64(a)
			switch {
			case d.base == "rcp" && mode != rn && !approx:
				return b64(bigOp(53, mode, '/', 1, x))
			case d.base == "sqrt" && mode != rn && !approx:
				return b64(sqrtDirected(x, 53, mode))
			}
			return b64(f(x))
		})
	}
	return d.errorf("%s on .%v is not simulated", d.base, t)
}

// sqrtDirected is sqrt rounded to prec bits by a directed mode.
func sqrtDirected(x float64, prec uint, mode rounding) float64 {
	if x < 0 || x != x || math.IsInf(x, 0) || x == 0 {
		return math.Sqrt(x)
	}
	bm := map[rounding]big.RoundingMode{rz: big.ToZero, rm: big.ToNegativeInf, rp: big.ToPositiveInf}[mode]
	z := new(big.Float).SetPrec(prec).SetMode(bm)
	z.Sqrt(new(big.Float).SetFloat64(x))
	r, _ := z.Float64()
	return r
}

// decodeCopysign: copysign.type d, a, b gives b with a's sign (PTX ISA §9.7.3.3).
func decodeCopysign(d *decoder) error {
	t, err := d.typ()
	if err != nil {
		return err
	}
	var sign uint64
	switch t {
	case tyF32:
		sign = 1 << 31
	case tyF64:
		sign = 1 << 63
	default:
		return d.errorf("copysign on .%v", t)
	}
	return op2(d, t, t, func(a, b uint64) uint64 { return b&^sign | a&sign })
}

// decodeTestp: testp.op.type p, a (PTX ISA §9.7.3.2).
func decodeTestp(d *decoder) error {
	t, err := d.typ()
	if err != nil {
		return err
	}
	var val func(uint64) float64
	var minNormal float64
	switch t {
	case tyF32:
		val, minNormal = func(a uint64) float64 { return float64(f32(a)) }, 0x1p-126
	case tyF64:
		val, minNormal = f64, 0x1p-1022
	default:
		return d.errorf("testp on .%v", t)
	}
	var f func(x float64) bool
	switch {
	case d.has("finite"):
		f = func(x float64) bool { return !math.IsInf(x, 0) && x == x }
	case d.has("infinite"):
		f = func(x float64) bool { return math.IsInf(x, 0) }
	case d.has("number"):
		f = func(x float64) bool { return x == x }
	case d.has("notanumber"):
		f = func(x float64) bool { return x != x }
	case d.has("normal"):
		f = func(x float64) bool { return x == x && !math.IsInf(x, 0) && math.Abs(x) >= minNormal }
	case d.has("subnormal"):
		f = func(x float64) bool { return x != 0 && math.Abs(x) < minNormal }
	default:
		return d.errorf("testp: unknown test")
	}
	return op1(d, t, func(a uint64) uint64 { return boolBit(f(val(a))) })
}
