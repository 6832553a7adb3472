package native_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
)

// TestDivFMANative: with TILEFUSE_NATIVE_DIVFMA's switch on
// (native.SetDivFMA), a zmm loop's division by a uniform (here each row's
// b[row], loaded once a row) is a product by the reciprocal and two FMA
// corrections (ops.go: divFMA), and every quotient is Go's float32
// division's, the correctly rounded one, bit for bit, as VDIVPS gives it
// (the switch off: checked too): dividends of random bits (every exponent,
// subnormals, ±0, ±Inf, NaNs) and near the divisor's multiples of
// midpoints (a = RN(b·m), m halfway between two floats: the hardest to
// round), divisors random over [2^-24, 2^24] (both sides of the
// corrections' bounds), powers of two, significands of all ones, 0, ±Inf,
// NaN and subnormals; rows of 1024 (paired loops) and 16 (one vector a
// row); poisoned outputs. Which vectors take the corrections is checked
// too (SetDivSlowPoison: those of a divisor in [2^-20, 2^20] and lanes all
// in [2^-100, 2^100], and no other). The switch is off by default.
func TestDivFMANative(t *testing.T) {
	requireAVX512(t, "no zmm loop")
	if native.SetDivFMA(false) {
		t.Fatal("TILEFUSE_NATIVE_DIVFMA is on in the test's environment: the default is off")
	}
	was := native.SetAVX512(true)
	defer native.SetAVX512(was)
	for _, c := range []struct {
		name        string
		block, rows int
	}{
		{name: "rows of 1024", block: 1024, rows: 2000},
		{name: "rows of 16", block: 16, rows: 4000},
	} {
		t.Run(c.name, func(t *testing.T) {
			bl := tile.NewBuilder("div_uniform", tile.Meta{"BLOCK": c.block})
			px, pb, py := bl.Ptr("x", tile.F32), bl.Ptr("b", tile.F32), bl.Ptr("y", tile.F32)
			row := bl.ProgramID(0)
			off := bl.Add(bl.Mul(row, c.block), bl.Arange(0, c.block))
			bv := bl.Load(bl.AddPtr(pb, row), nil, nil)
			bl.Store(bl.AddPtr(py, off), bl.Div(bl.Load(bl.AddPtr(px, off), nil, nil), bv), nil)
			k, err := bl.Build()
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(16, uint64(c.block)))
			f := math.Float32frombits
			specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
				f(0x7fa00001), f(1), f(0x3fffffff), f(0x4b7fffff), 0x1p-20, 0x1p20, 0x1.fffffep19, 0x1p-21, f(0x00400000), math.MaxFloat32}
			b := make([]float32, c.rows)
			for r := range b {
				switch {
				case r < len(specials):
					b[r] = specials[r]
				case r%3 == 0: // all ones in the significand, or a power of two
					b[r] = f(uint32(rng.IntN(48)+103)<<23 | uint32(rng.IntN(2))*0x7fffff)
				default: // [2^-24, 2^24), either sign
					b[r] = f(uint32(rng.IntN(48*(1<<23))+103<<23) | uint32(rng.IntN(2))<<31)
				}
			}
			// by vector of 16 lanes: kind 0 near multiples of midpoints, 1 the
			// quotients' usual range (both within the corrections' range:
			// no VDIVPS where b is), 2 random bits, 3 the usual range with
			// one special lane (both out of it)
			inRange := func(v float32) bool { a := math.Abs(float64(v)); return a >= 0x1p-100 && a <= 0x1p100 }
			x := make([]float32, c.rows*c.block)
			dividends(rng, x, func(i int) float32 { return b[i/c.block] }, 4, [2]int{12, 230}, [2]int{97, 60}, inRange, specials)
			run := func(on bool) ([]float32, int) {
				native.SetDivFMA(on)
				nk, err := native.Compile(k)
				native.SetDivFMA(false)
				if err != nil {
					t.Fatal(err)
				}
				defer nk.Free()
				y := make([]float32, len(x))
				for i := range y {
					y[i] = f(0x7fc0dead) // poisoned
				}
				if err := nk.Launch(tile.Grid{c.rows}, x, b, y); err != nil {
					t.Fatal(err)
				}
				return y, native.DivFMAs(nk)
			}
			got, n := run(true)
			if n == 0 {
				t.Fatal("no division by FMA corrections in the code")
			}
			div, n0 := run(false)
			if n0 != 0 {
				t.Fatalf("switch off: %d divisions by FMA corrections", n0)
			}
			bad := 0
			for i, v := range got {
				want := x[i] / b[i/c.block]
				same := math.Float32bits(v) == math.Float32bits(want) || v != v && want != want
				if !same || math.Float32bits(v) != math.Float32bits(div[i]) {
					if bad++; bad <= 5 {
						t.Errorf("%v / %v (%#x / %#x) = %#x, Go %#x, VDIVPS %#x", x[i], b[i/c.block], math.Float32bits(x[i]), math.Float32bits(b[i/c.block]), math.Float32bits(v), math.Float32bits(want), math.Float32bits(div[i]))
					}
				}
			}
			if bad > 0 {
				t.Fatalf("%d of %d quotients differ", bad, len(got))
			}
			// which vectors took the corrections: those of a b in
			// [2^-20, 2^20] whose lanes all lie in [2^-100, 2^100]
			native.SetDivSlowPoison(true)
			routed, _ := run(true)
			native.SetDivSlowPoison(false)
			fast := 0
			for v := 0; v < len(x)/16; v++ {
				bb := float64(b[v*16/c.block])
				want := math.Abs(bb) >= 0x1p-20 && math.Abs(bb) <= 0x1p20
				for _, a := range x[v*16 : v*16+16] {
					want = want && inRange(a)
				}
				took := math.Float32bits(routed[v*16]) != native.DivPoison
				if took != want {
					t.Fatalf("vector %d (b %v): corrections %v, want %v", v, bb, took, want)
				}
				if took {
					fast++
				}
			}
			if fast < len(x)/16/3 {
				t.Errorf("only %d of %d vectors took the corrections", fast, len(x)/16)
			}
			t.Logf("%d quotients, %d of %d vectors by the corrections", len(x), fast, len(x)/16)
		})
	}
}
