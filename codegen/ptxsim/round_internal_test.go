package ptxsim

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// fmaRef is the correctly rounded f32 fma, by math/big.
func fmaRef(a, b, c float32) float32 {
	z := new(big.Float).SetPrec(1000).Mul(new(big.Float).SetFloat64(float64(a)), new(big.Float).SetFloat64(float64(b)))
	z.Add(z, new(big.Float).SetFloat64(float64(c)))
	r, _ := new(big.Float).SetPrec(24).Set(z).Float32()
	return r
}

// TestFma32: the f32 fma is correctly rounded, also where the float64 FMA
// lands exactly halfway between two f32 values and a second rounding would
// go the wrong way.
func TestFma32(t *testing.T) {
	one12 := float32(1 + 0x1p-12)
	cases := [][3]float32{
		{one12, one12, 0x1p-60},  // exact: 1+2⁻¹¹+2⁻²⁴+2⁻⁶⁰, just above a halfway point
		{one12, one12, -0x1p-60}, // just below it
		{one12, one12, 0},        // on it: ties to even
		{-one12, one12, 0x1p-60},
		{1, 1, 0x1p-30},
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < 20000; i++ {
		f := func() float32 { return float32(math.Ldexp(rng.Float64()*2-1, rng.IntN(60)-30)) }
		cases = append(cases, [3]float32{f(), f(), f()})
	}
	for _, c := range cases {
		if got, want := fma32(c[0], c[1], c[2]), fmaRef(c[0], c[1], c[2]); got != want {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", c[0], c[1], c[2], got, want)
		}
	}
	// the first case would be wrong rounded twice
	if naive := float32(math.FMA(float64(one12), float64(one12), 0x1p-60)); naive == fmaRef(one12, one12, 0x1p-60) {
		t.Fatal("the halfway case does not exercise double rounding")
	}
}

// TestFormatRound: rounding an exact float64 to f32 agrees with Go's
// conversion (to nearest) and with math/big in the directed modes,
// subnormals included; f16 and bf16 known values.
func TestFormatRound(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	modes := map[rounding]big.RoundingMode{rz: big.ToZero, rm: big.ToNegativeInf, rp: big.ToPositiveInf}
	for i := 0; i < 20000; i++ {
		x := math.Ldexp(rng.Float64()*2-1, rng.IntN(260)-150)
		if got, want := uint32(fmtF32.round(x, rn)), math.Float32bits(float32(x)); got != want {
			t.Fatalf("round(%g, rn) = %#x, want %#x", x, got, want)
		}
		if math.Abs(x) < 0x1p-126 || math.Abs(x) > math.MaxFloat32 {
			continue // big.Float has no subnormals or overflow
		}
		for m, bm := range modes {
			r, _ := new(big.Float).SetPrec(24).SetMode(bm).SetFloat64(x).Float32()
			if got := uint32(fmtF32.round(x, m)); got != math.Float32bits(r) {
				t.Fatalf("round(%g, %d) = %#x, want %#x", x, m, got, math.Float32bits(r))
			}
		}
	}
	for _, c := range []struct {
		f    format
		x    float64
		mode rounding
		want uint64
	}{
		{fmtF16, 1, rn, 0x3c00}, {fmtF16, 65504, rn, 0x7bff}, {fmtF16, 65520, rn, 0x7c00}, {fmtF16, 65520, rz, 0x7bff},
		{fmtF16, 0x1p-24, rn, 0x0001}, {fmtF16, 0x1p-25, rn, 0}, {fmtF16, 0x1.8p-25, rn, 1}, {fmtF16, -2, rn, 0xc000},
		{fmtF16, 1 + 0x1p-11, rn, 0x3c00}, {fmtF16, 1 + 3*0x1p-11, rn, 0x3c02}, {fmtF16, math.NaN(), rn, 0x7e00},
		{fmtBF16, 1, rn, 0x3f80}, {fmtBF16, 1 + 0x1p-8, rn, 0x3f80}, {fmtBF16, 1 + 3*0x1p-8, rn, 0x3f82}, {fmtBF16, -math.Inf(1), rn, 0xff80},
		{fmtTF32, 1 + 0x1p-11, rna, 127<<10 | 1}, {fmtTF32, 1 + 0x1p-11, rn, 127 << 10},
	} {
		if got := c.f.round(c.x, c.mode); got != c.want {
			t.Errorf("%v.round(%g, %d) = %#x, want %#x", c.f, c.x, c.mode, got, c.want)
		}
		if v := c.f.value(c.want); !math.IsNaN(c.x) && !math.IsInf(v, 0) && c.f.round(v, rn) != c.want {
			t.Errorf("%v: value(%#x) = %g does not round back", c.f, c.want, v)
		}
	}
}
