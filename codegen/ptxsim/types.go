package ptxsim

import (
	"math"
	"math/bits"
)

// ptxType is a PTX fundamental type (PTX ISA §5.2.1) or a packed pair.
type ptxType uint8

const (
	tyNone ptxType = iota
	tyPred
	tyB8
	tyB16
	tyB32
	tyB64
	tyB128
	tyU8
	tyU16
	tyU32
	tyU64
	tyS8
	tyS16
	tyS32
	tyS64
	tyF16
	tyF16x2
	tyBF16
	tyBF16x2
	tyTF32
	tyF32
	tyF64
)

var typeNames = map[string]ptxType{
	"pred": tyPred, "b8": tyB8, "b16": tyB16, "b32": tyB32, "b64": tyB64, "b128": tyB128,
	"u8": tyU8, "u16": tyU16, "u32": tyU32, "u64": tyU64,
	"s8": tyS8, "s16": tyS16, "s32": tyS32, "s64": tyS64,
	"f16": tyF16, "f16x2": tyF16x2, "bf16": tyBF16, "bf16x2": tyBF16x2, "tf32": tyTF32,
	"f32": tyF32, "f64": tyF64,
}

func parseType(s string) (ptxType, bool) {
	t, ok := typeNames[s]
	return t, ok
}

func (t ptxType) String() string {
	for k, v := range typeNames {
		if v == t {
			return k
		}
	}
	return "none"
}

// size in bytes (a predicate counts as 1 in state spaces, as in ptxas).
func (t ptxType) size() int {
	switch t {
	case tyPred, tyB8, tyU8, tyS8:
		return 1
	case tyB16, tyU16, tyS16, tyF16, tyBF16:
		return 2
	case tyB32, tyU32, tyS32, tyF32, tyF16x2, tyBF16x2, tyTF32:
		return 4
	case tyB64, tyU64, tyS64, tyF64:
		return 8
	case tyB128:
		return 16
	}
	return 0
}

func (t ptxType) bits() uint { return uint(8 * t.size()) }

func (t ptxType) signed() bool { return t == tyS8 || t == tyS16 || t == tyS32 || t == tyS64 }

func (t ptxType) isFloat() bool {
	switch t {
	case tyF16, tyF16x2, tyBF16, tyBF16x2, tyTF32, tyF32, tyF64:
		return true
	}
	return false
}

func (t ptxType) isInt() bool { return !t.isFloat() && t != tyPred && t != tyNone }

// mask is the low-bits mask of a value of t.
func (t ptxType) mask() uint64 {
	n := t.bits()
	if n >= 64 {
		return ^uint64(0)
	}
	return 1<<n - 1
}

// sext reads the low bits of x as a signed integer of t's width.
func (t ptxType) sext(x uint64) int64 {
	n := t.bits()
	if n >= 64 {
		return int64(x)
	}
	return int64(x<<(64-n)) >> (64 - n)
}

// ival is x as an integer of type t: sign-extended when t is signed.
func (t ptxType) ival(x uint64) uint64 {
	if t.signed() {
		return uint64(t.sext(x))
	}
	return x & t.mask()
}

func f32(x uint64) float32 { return math.Float32frombits(uint32(x)) }
func f64(x uint64) float64 { return math.Float64frombits(x) }
func b32(x float32) uint64 { return uint64(math.Float32bits(x)) }
func b64(x float64) uint64 { return math.Float64bits(x) }
func boolBit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// rounding mode of a floating-point result (PTX ISA §9.7.3: .rn .rz .rm .rp,
// and .rna for conversions to tf32)
type rounding uint8

const (
	rn rounding = iota
	rz
	rm
	rp
	rna
)

// format describes a binary floating-point format with ebits of exponent
// and mbits of explicit mantissa.
type format struct{ ebits, mbits uint }

var (
	fmtF16  = format{5, 10}
	fmtBF16 = format{8, 7}
	fmtTF32 = format{8, 10}
	fmtF32  = format{8, 23}
)

// round rounds x to the format, returning its bits (sign, exponent,
// mantissa, right-aligned), with subnormals, overflow by the rounding mode's
// rule, and NaN kept a (quiet) NaN. x itself is exact, so this is the
// correctly rounded conversion of PTX ISA §9.7.9.21 (cvt).
func (f format) round(x float64, mode rounding) uint64 {
	bias := int(1)<<(f.ebits-1) - 1
	expAll := uint64(1)<<f.ebits - 1
	sign := uint64(0)
	if math.Signbit(x) {
		sign = 1 << (f.ebits + f.mbits)
		x = -x
	}
	if math.IsNaN(x) {
		return expAll<<f.mbits | 1<<(f.mbits-1)
	}
	if math.IsInf(x, 0) {
		return sign | expAll<<f.mbits
	}
	if x == 0 {
		return sign
	}
	// x = m · 2^e with m a 53-bit integer
	fr, e := math.Frexp(x) // x = fr·2^e, fr in [0.5,1)
	m := uint64(math.Ldexp(fr, 53))
	e -= 53
	// the target's unit in the last place for x's binade: value = q·2^(eq)
	ex := e + 52 // exponent of x's leading bit
	eq := ex - int(f.mbits)
	if min := 1 - bias - int(f.mbits); eq < min {
		eq = min // subnormal range
	}
	shift := eq - e
	var q uint64
	var inexact, half, aboveHalf bool
	if shift <= 0 {
		q = m << uint(-shift)
	} else if shift >= 64 {
		q = 0
		inexact = true
	} else {
		q = m >> uint(shift)
		rem := m & (1<<uint(shift) - 1)
		h := uint64(1) << uint(shift-1)
		inexact = rem != 0
		half = rem == h
		aboveHalf = rem > h
	}
	if shift >= 64 {
		// far below the smallest subnormal: only the directed modes round up
		q = 0
	}
	up := false
	if inexact {
		switch mode {
		case rn:
			up = aboveHalf || half && q&1 == 1
		case rna:
			up = aboveHalf || half
		case rz:
		case rm:
			up = sign != 0
		case rp:
			up = sign == 0
		}
	}
	if up {
		q++
	}
	// q·2^eq: normalise into exponent and mantissa fields
	if q == 0 {
		return sign
	}
	lead := 63 - bits.LeadingZeros64(q)
	var expField, mant uint64
	if lead < int(f.mbits) { // subnormal (or rounding left it one)
		expField = 0
		mant = q
	} else {
		// lead is mbits or mbits+1 (a carry out of the mantissa)
		if lead > int(f.mbits) {
			q >>= 1
			eq++
		}
		expField = uint64(eq + int(f.mbits) + bias)
		mant = q & (1<<f.mbits - 1)
	}
	if expField >= expAll { // overflow
		maxFinite := (expAll-1)<<f.mbits | (1<<f.mbits - 1)
		switch {
		case mode == rz, mode == rm && sign == 0, mode == rp && sign != 0:
			return sign | maxFinite
		}
		return sign | expAll<<f.mbits
	}
	return sign | expField<<f.mbits | mant
}

// value decodes bits of the format into a float64 (exact).
func (f format) value(b uint64) float64 {
	bias := int(1)<<(f.ebits-1) - 1
	expAll := uint64(1)<<f.ebits - 1
	sign := b>>(f.ebits+f.mbits)&1 == 1
	e := b >> f.mbits & expAll
	m := b & (1<<f.mbits - 1)
	var v float64
	switch {
	case e == expAll && m != 0:
		return math.NaN()
	case e == expAll:
		v = math.Inf(1)
	case e == 0:
		v = math.Ldexp(float64(m), 1-bias-int(f.mbits))
	default:
		v = math.Ldexp(float64(m|1<<f.mbits), int(e)-bias-int(f.mbits))
	}
	if sign {
		v = -v
	}
	return v
}

// f16/bf16 helpers: halves as the low 16 bits.
func f16val(h uint64) float64  { return fmtF16.value(h & 0xffff) }
func bf16val(h uint64) float64 { return fmtBF16.value(h & 0xffff) }

// tf32 keeps the top 19 bits of an f32 (PTX ISA §9.7.14.5: the mma
// instructions read .tf32 operands ignoring the 13 low mantissa bits).
func tf32val(x uint64) float64 { return float64(f32(x & 0xffffe000)) }

// roundTF32 is cvt.rna.tf32.f32 (PTX ISA §9.7.9.21): to 10 mantissa bits,
// ties away from zero, as a .b32 with the low 13 bits zero.
func roundTF32(x uint64, mode rounding, satfinite bool) uint64 {
	v := f32(x)
	if math.IsNaN(float64(v)) {
		return 0x7fffffff
	}
	if math.IsInf(float64(v), 0) {
		if satfinite {
			return uint64(uint32(x)&0x80000000 | 0x7f7fe000)
		}
		return x & 0xffffffff
	}
	r := fmtTF32.round(float64(v), mode)
	// re-expand 1+8+10 bits into the f32 layout
	sign := r >> 18 & 1
	e := r >> 10 & 0xff
	m := r & 0x3ff
	out := sign<<31 | e<<23 | m<<13
	if satfinite && e == 0xff {
		out = sign<<31 | 0x7f7fe000
	}
	return out
}

// ftz32 flushes a subnormal f32 to a zero of the same sign.
func ftz32(x float32) float32 {
	u := math.Float32bits(x)
	if u&0x7f800000 == 0 && u&0x007fffff != 0 {
		return math.Float32frombits(u & 0x80000000)
	}
	return x
}

// roundF32 rounds an exact float64 to f32 by mode.
func roundF32(x float64, mode rounding) float32 {
	if mode == rn {
		return float32(x)
	}
	return math.Float32frombits(uint32(fmtF32.round(x, mode)))
}
