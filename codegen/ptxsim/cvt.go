package ptxsim

import (
	"math"
	"math/big"
	"math/bits"
)

// Data movement and conversion (PTX ISA §9.7.9): mov, cvt, cvta, isspacep.

func init() {
	register(decodeMov, "mov")
	register(decodeCvt, "cvt")
	register(decodeCvta, "cvta")
	register(decodeIsspacep, "isspacep")
}

// decodeMov: mov.type d, a; mov.b64 d, {a, b} packs (low first);
// mov.b64 {a, b}, d unpacks.
func decodeMov(d *decoder) error {
	t, err := d.typ()
	if err != nil {
		return err
	}
	if err := d.nargs(2); err != nil {
		return err
	}
	if d.isVec(1) || d.isVec(0) {
		var part ptxType
		switch t {
		case tyB64:
			part = tyB32
		case tyB32:
			part = tyB16
		case tyB128:
			part = tyB64
		default:
			return d.errorf("vector mov of .%v", t)
		}
		n := t.size() / part.size()
		pb := part.bits()
		if d.isVec(1) { // pack
			dst, err := d.dst(0)
			if err != nil {
				return err
			}
			src, err := d.vec(1, part, true)
			if err != nil {
				return err
			}
			if len(src) != n || t == tyB128 {
				return d.errorf("mov.%v packs %d parts", t, n)
			}
			d.in.run = func(w *warp, m uint32) error {
				forLanes(m, func(l int) {
					var v uint64
					for i := range src {
						v |= (w.val(&src[i], l) & part.mask()) << (uint(i) * pb)
					}
					w.set(&dst, l, v)
				})
				return nil
			}
			return nil
		}
		dst, err := d.vec(0, part, false)
		if err != nil {
			return err
		}
		src, err := d.src(1, t)
		if err != nil {
			return err
		}
		if len(dst) != n || t == tyB128 {
			return d.errorf("mov.%v unpacks %d parts", t, n)
		}
		d.in.run = func(w *warp, m uint32) error {
			forLanes(m, func(l int) {
				v := w.val(&src, l)
				for i := range dst {
					w.set(&dst[i], l, v>>(uint(i)*pb)&part.mask())
				}
			})
			return nil
		}
		return nil
	}
	if t == tyPred {
		return op1(d, t, func(a uint64) uint64 { return a & 1 })
	}
	mask := t.mask()
	return op1(d, t, func(a uint64) uint64 { return a & mask })
}

// decodeCvt: cvt{.irnd|.frnd}{.ftz}{.sat}{.relu}{.satfinite}.dtype.atype d, a
// (and the packing forms cvt.rn.{f16x2,bf16x2}.f32 d, a, b).
func decodeCvt(d *decoder) error {
	ts := d.types()
	if len(ts) != 2 {
		return d.errorf("cvt needs a destination and a source type")
	}
	dt, at := ts[0], ts[1]
	ftz, sat, relu, satfinite := d.has("ftz"), d.has("sat"), d.has("relu"), d.has("satfinite")
	mode := roundingOf(d)
	intRound := ""
	for _, r := range []string{"rni", "rzi", "rmi", "rpi"} {
		if d.has(r) {
			intRound = r
		}
	}
	if d.has("rna") {
		mode = rna
	}
	// packing conversions: a goes to the upper half, b to the lower
	if dt == tyF16x2 || dt == tyBF16x2 {
		if at != tyF32 {
			return d.errorf("cvt.%v.%v", dt, at)
		}
		f := fmtF16
		if dt == tyBF16x2 {
			f = fmtBF16
		}
		one := func(x uint64) uint64 {
			v := float64(f32(x))
			if relu && (v < 0 || v != v) {
				if v != v {
					return f.round(v, mode)
				}
				v = 0
			}
			return f.round(v, mode)
		}
		return op2(d, at, at, func(a, b uint64) uint64 { return one(a)<<16 | one(b) })
	}
	if err := d.nargs(2); err != nil {
		return err
	}
	// source value as float64 (exact) or integer
	var toF func(a uint64) float64
	switch at {
	case tyF32:
		toF = func(a uint64) float64 {
			x := f32(a)
			if ftz {
				x = ftz32(x)
			}
			return float64(x)
		}
	case tyF64:
		toF = f64
	case tyF16:
		toF = f16val
	case tyBF16:
		toF = bf16val
	case tyTF32:
		toF = tf32val
	}
	switch {
	case dt.isInt() && at.isInt():
		return op1(d, at, func(a uint64) uint64 { return intToInt(a, at, dt, sat) })
	case dt.isFloat() && at.isInt():
		return op1(d, at, func(a uint64) uint64 {
			var f float64
			var exact bool
			if at.signed() {
				v := at.sext(a)
				f, exact = float64(v), v >= -1<<53 && v <= 1<<53
			} else {
				v := a & at.mask()
				f, exact = float64(v), v <= 1<<53
			}
			if exact {
				return floatTo(f, dt, mode, sat, false, false)
			}
			// a 64-bit integer beyond float64's precision: round it exactly
			var v *big.Float
			if at.signed() {
				v = new(big.Float).SetInt64(at.sext(a))
			} else {
				v = new(big.Float).SetUint64(a & at.mask())
			}
			return floatToBig(v, dt, mode)
		})
	case dt.isInt() && at.isFloat():
		if intRound == "" {
			return d.errorf("float to integer conversion needs .rni, .rzi, .rmi or .rpi")
		}
		return op1(d, at, func(a uint64) uint64 { return floatToInt(toF(a), intRound, dt) })
	case dt.isFloat() && at.isFloat():
		if dt == tyTF32 {
			if at != tyF32 {
				return d.errorf("cvt to .tf32 from .%v", at)
			}
			return op1(d, at, func(a uint64) uint64 { return roundTF32(a, mode, satfinite) })
		}
		if intRound != "" {
			// round to an integral value in the same format
			return op1(d, at, func(a uint64) uint64 {
				x := toF(a)
				var r float64
				switch intRound {
				case "rni":
					r = math.RoundToEven(x)
				case "rzi":
					r = math.Trunc(x)
				case "rmi":
					r = math.Floor(x)
				case "rpi":
					r = math.Ceil(x)
				}
				return floatTo(r, dt, rn, sat, ftz, false)
			})
		}
		return op1(d, at, func(a uint64) uint64 { return floatTo(toF(a), dt, mode, sat, ftz, relu) })
	}
	return d.errorf("cvt.%v.%v is not simulated", dt, at)
}

// floatTo rounds an exact value into float type dt.
func floatTo(x float64, dt ptxType, mode rounding, sat, ftz, relu bool) uint64 {
	if sat {
		x = sat64(x)
	}
	if relu && (x < 0) {
		x = 0
	}
	switch dt {
	case tyF64:
		return b64(x)
	case tyF32:
		r := roundF32(x, mode)
		if ftz {
			r = ftz32(r)
		}
		return b32(r)
	case tyF16:
		return fmtF16.round(x, mode)
	case tyBF16:
		return fmtBF16.round(x, mode)
	}
	return 0
}

func floatToBig(v *big.Float, dt ptxType, mode rounding) uint64 {
	prec := uint(53)
	switch dt {
	case tyF32:
		prec = 24
	case tyF16:
		prec = 11
	case tyBF16:
		prec = 8
	}
	bm := map[rounding]big.RoundingMode{rn: big.ToNearestEven, rz: big.ToZero, rm: big.ToNegativeInf, rp: big.ToPositiveInf, rna: big.ToNearestAway}[mode]
	r := new(big.Float).SetPrec(prec).SetMode(bm).Set(v)
	f, _ := r.Float64()
	return floatTo(f, dt, rn, false, false, false)
}

// floatToInt converts with integer rounding, saturating to dt's range;
// NaN gives 0 (PTX ISA §9.7.9.21).
func floatToInt(x float64, rnd string, dt ptxType) uint64 {
	if x != x {
		return 0
	}
	switch rnd {
	case "rni":
		x = math.RoundToEven(x)
	case "rzi":
		x = math.Trunc(x)
	case "rmi":
		x = math.Floor(x)
	case "rpi":
		x = math.Ceil(x)
	}
	n := dt.bits()
	if dt.signed() {
		lo, hi := -math.Ldexp(1, int(n-1)), math.Ldexp(1, int(n-1))
		switch {
		case x <= lo:
			return uint64(int64(-1)<<(n-1)) & dt.mask()
		case x >= hi:
			return uint64(1)<<(n-1) - 1
		}
		return uint64(int64(x)) & dt.mask()
	}
	hi := math.Ldexp(1, int(n))
	switch {
	case x <= 0:
		return 0
	case x >= hi:
		return dt.mask()
	}
	return uint64(x)
}

// intToInt converts between integer types: sign- or zero-extend by the
// source, truncate to the destination, or clamp with .sat.
func intToInt(a uint64, at, dt ptxType, sat bool) uint64 {
	if !sat {
		return at.ival(a) & dt.mask()
	}
	n := dt.bits()
	if at.signed() {
		v := at.sext(a)
		if dt.signed() {
			lo, hi := int64(-1)<<(n-1), int64(1)<<(n-1)-1
			if n == 64 {
				lo, hi = math.MinInt64, math.MaxInt64
			}
			v = max(lo, min(hi, v))
			return uint64(v) & dt.mask()
		}
		if v < 0 {
			return 0
		}
		if n < 64 && uint64(v) > dt.mask() {
			return dt.mask()
		}
		return uint64(v)
	}
	v := a & at.mask()
	if dt.signed() {
		hi := uint64(1)<<(n-1) - 1
		return min(v, hi)
	}
	return min(v, dt.mask())
}

// decodeCvta: cvta.to.{global,shared}.u64 and cvta.{global,shared}.u64
// (PTX ISA §9.7.9.18): global addresses are the same in both views; a
// shared offset is sharedWindow + offset generically.
func decodeCvta(d *decoder) error {
	t, err := d.typ()
	if err != nil {
		return err
	}
	to := d.has("to")
	switch {
	case d.has("global") || d.has("param"):
		return op1(d, t, func(a uint64) uint64 { return a & t.mask() })
	case d.has("shared") || d.hasSharedCTA():
		if to {
			return op1(d, t, func(a uint64) uint64 { return (a - sharedWindow) & t.mask() })
		}
		return op1(d, t, func(a uint64) uint64 { return (a&0xffffffff + sharedWindow) & t.mask() })
	}
	return d.errorf("cvta on this state space is not simulated")
}

func (d *decoder) hasSharedCTA() bool {
	_, ok := d.hasPrefix("shared::")
	return ok
}

// decodeIsspacep: isspacep.{global,shared} p, a.
func decodeIsspacep(d *decoder) error {
	shared := d.has("shared") || d.hasSharedCTA()
	if !shared && !d.has("global") {
		return d.errorf("isspacep on this state space is not simulated")
	}
	if err := d.nargs(2); err != nil {
		return err
	}
	dst, err := d.dst(0)
	if err != nil {
		return err
	}
	a, err := d.src(1, tyU64)
	if err != nil {
		return err
	}
	d.in.run = func(w *warp, m uint32) error {
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			v := w.val(&a, l)
			in := v >= sharedWindow && v < sharedWindow+windowSize
			w.set(&dst, l, boolBit(in == shared))
		}
		return nil
	}
	return nil
}
