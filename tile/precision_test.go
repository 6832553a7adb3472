package tile_test

import (
	"math"
	"slices"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
)

// TestRoundBF16: to nearest with ties to even, at 8 bits of mantissa, as
// cvt.rn.bf16.f32; overflow to infinity; infinities and NaN pass.
func TestRoundBF16(t *testing.T) {
	p := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	for _, c := range []struct {
		name    string
		in, out float32
	}{
		{"exact", 1.5, 1.5},
		{"below half a step", 1 + p(-9), 1},
		{"above half a step", 1 + p(-8) + p(-20), 1 + p(-7)},
		{"tie to even (down)", 1 + p(-8), 1},
		{"tie to even (up)", 1 + 3*p(-8), 1 + p(-6)},
		{"negative", -(1 + 3*p(-8)), -(1 + p(-6))},
		{"tiny", p(-130), p(-130)},
		{"largest rounds to infinity", math.MaxFloat32, float32(math.Inf(1))},
		{"infinity", float32(math.Inf(-1)), float32(math.Inf(-1))},
	} {
		if got := tile.RoundBF16(c.in); got != c.out {
			t.Errorf("%s: RoundBF16(%g) = %g, want %g", c.name, c.in, got, c.out)
		}
	}
	if got := tile.RoundBF16(float32(math.NaN())); got == got {
		t.Errorf("RoundBF16(NaN) = %g", got)
	}
}

// TestTruncTF32: the 13 low mantissa bits cleared (towards zero, where
// RoundTF32 rounds to nearest), as the tensor cores read f32 operands;
// infinities, zeros and quiet NaNs pass, a NaN whose payload lies only in
// the low bits becomes an infinity of its sign (as and.b32 makes it).
func TestTruncTF32(t *testing.T) {
	p := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	bits := math.Float32frombits
	for _, c := range []struct {
		name    string
		in, out float32
	}{
		{"exact", 1 + p(-10), 1 + p(-10)},
		{"below half a step", 1 + p(-12), 1},
		{"above half a step (RoundTF32 goes up)", 1 + 3*p(-12), 1},
		{"just below the next step", 1 + p(-10) - p(-23), 1},
		{"negative towards zero", -(1 + 3*p(-12)), -1},
		{"largest finite", math.MaxFloat32, bits(0x7f7fe000)},
		{"subnormal", bits(0x00001fff), 0},
		{"negative zero", float32(math.Copysign(0, -1)), float32(math.Copysign(0, -1))},
		{"infinity", float32(math.Inf(-1)), float32(math.Inf(-1))},
		{"NaN with a low payload only", bits(0xff800001), float32(math.Inf(-1))},
	} {
		if got := tile.TruncTF32(c.in); math.Float32bits(got) != math.Float32bits(c.out) {
			t.Errorf("%s: TruncTF32(%g) = %g (%#x), want %g (%#x)", c.name, c.in, got, math.Float32bits(got), c.out, math.Float32bits(c.out))
		}
	}
	if got := tile.TruncTF32(float32(math.NaN())); got == got {
		t.Errorf("TruncTF32(quiet NaN) = %g", got)
	}
	if r := tile.RoundTF32(1 + 3*p(-12)); r != 1+p(-10) {
		t.Errorf("RoundTF32(1 + 3·2⁻¹²) = %g: the cases above assume it rounds up", r)
	}
}

// TestRoundTF32: to nearest, ties to even (cvt.rn.tf32.f32, which ptxsim
// and the H200 run; ties went away from zero before 2026-12-03), as the
// bits: exact values stay, halves go to the even neighbour in either
// direction and for either sign, the largest finite's tie overflows to
// infinity, infinities and NaN pass.
func TestRoundTF32(t *testing.T) {
	p := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	bits := math.Float32frombits
	for _, c := range []struct {
		name    string
		in, out float32
	}{
		{"exact", 1 + p(-10), 1 + p(-10)},
		{"below half a step", 1 + p(-12), 1},
		{"above half a step", 1 + 3*p(-12), 1 + p(-10)},
		{"a tie down to even", 1 + p(-11), 1},
		{"a tie up to even", 1 + 3*p(-11), 1 + 2*p(-10)},
		{"a negative tie down to even", -(1 + p(-11)), -1},
		{"a negative tie up to even", -(1 + 3*p(-11)), -(1 + 2*p(-10))},
		{"the largest finite's tie", bits(0x7f7ff000), float32(math.Inf(1))},
		{"below the largest finite's tie", bits(0x7f7fefff), bits(0x7f7fe000)},
		{"a subnormal tie to even", bits(0x00001000), 0},
		{"infinity", float32(math.Inf(-1)), float32(math.Inf(-1))},
	} {
		if got := tile.RoundTF32(c.in); math.Float32bits(got) != math.Float32bits(c.out) {
			t.Errorf("%s: RoundTF32(%g) = %g (%#x), want %g (%#x)", c.name, c.in, got, math.Float32bits(got), c.out, math.Float32bits(c.out))
		}
	}
	if got := tile.RoundTF32(float32(math.NaN())); got == got {
		t.Errorf("RoundTF32(NaN) = %g", got)
	}
}

// TestSplitTF32: hi + lo carries 21 bits of mantissa where hi alone
// carries 11: |x − (hi+lo)| ≤ 2⁻²¹|x|, and both parts are TF32 values.
func TestSplitTF32(t *testing.T) {
	for _, x := range []float32{1, 1.0000001, float32(math.Pi), -123.456, 1e-30, 3.4e38} {
		hi, lo := tile.SplitTF32(x)
		if tile.RoundTF32(hi) != hi || tile.RoundTF32(lo) != lo {
			t.Errorf("%g: parts %g, %g are not TF32", x, hi, lo)
		}
		if e := math.Abs(float64(x) - float64(hi) - float64(lo)); e > math.Ldexp(math.Abs(float64(x)), -21) {
			t.Errorf("%g: hi+lo off by %g", x, e)
		}
	}
}

// TestPrecisionNames: every precision has a name and is valid; the next
// number is not. The users' precisions are the first four; PrecTF32TB
// (graphpass's, for flash attention) is not among them.
func TestPrecisionNames(t *testing.T) {
	want := []string{"ieee", "tf32", "bf16", "tf32x3"}
	for i, p := range tile.Precisions {
		if p.String() != want[i] || !p.Valid() {
			t.Errorf("precision %d: %q valid=%v", i, p, p.Valid())
		}
	}
	if p := tile.PrecTF32TB; p.String() != "tf32tb" || !p.Valid() || slices.Contains(tile.Precisions, p) {
		t.Errorf("%q: valid=%v, a user precision=%v", p, p.Valid(), slices.Contains(tile.Precisions, p))
	}
	if p := tile.PrecTF32TB + 1; p.Valid() {
		t.Errorf("%v is valid", p)
	}
}

// TestTF32Operands: which operand each TF32 precision truncates (the other
// is rounded), and that Operands, the conversions the interpreter, the CPU
// backend and the tests' references apply, says the same.
func TestTF32Operands(t *testing.T) {
	for _, c := range []struct {
		p          tile.Precision
		tf32, a, b bool // IsTF32, TruncatesA, TruncatesB
	}{
		{tile.PrecIEEE, false, false, false},
		{tile.PrecTF32, true, true, false},
		{tile.PrecTF32TB, true, false, true},
		{tile.PrecBF16, false, false, false},
		{tile.PrecTF32x3, false, false, false},
	} {
		if c.p.IsTF32() != c.tf32 || c.p.TruncatesA() != c.a || c.p.TruncatesB() != c.b {
			t.Errorf("%v: IsTF32 %v TruncatesA %v TruncatesB %v, want %v %v %v", c.p, c.p.IsTF32(), c.p.TruncatesA(), c.p.TruncatesB(), c.tf32, c.a, c.b)
		}
		// Operands agrees: 1 + 3·2⁻¹² truncates to 1 and rounds to 1 + 2⁻¹⁰
		const x = float32(1 + 3.0/(1<<12))
		conv := func(trunc bool) float32 {
			switch {
			case !c.tf32:
				return x
			case trunc:
				return 1
			}
			return 1 + 1.0/(1<<10)
		}
		ca, cb := c.p.Operands()
		if c.tf32 && (ca == nil || ca(x) != conv(c.a) || cb(x) != conv(c.b)) {
			t.Errorf("%v: Operands does not truncate a %v, b %v", c.p, c.a, c.b)
		}
		if (c.p == tile.PrecIEEE || c.p == tile.PrecTF32x3) && (ca != nil || cb != nil) {
			t.Errorf("%v: Operands converts", c.p)
		}
		if c.p == tile.PrecBF16 && (ca == nil || ca(x) != tile.RoundBF16(x) || cb(x) != tile.RoundBF16(x)) {
			t.Errorf("bf16: Operands does not round both to bf16")
		}
	}
}
