package interp_test

import (
	"math"
	"math/rand/v2"
	"testing"

	. "github.com/tilefuse/tilefuse/tile/interp"
)

// TestMath64Edges pins the cases where Go's amd64 Exp, Log, Log2 and Pow are off
// (expected values from the C library through Python).
func TestMath64Edges(t *testing.T) {
	cases := []struct {
		name      string
		got, want float64
		rel       float64
	}{
		{"exp(709.7) is finite", Exp64(709.7), 1.6549840276802644e+308, 4e-16},
		{"exp(709.78)", Exp64(709.78), 1.7928227943945155e+308, 4e-16},
		{"log of the smallest subnormal", Log64(5e-324), -744.4400719213812, 2e-16},
		{"log(1e-310)", Log64(1e-310), -713.8013788281542, 2e-16},
		{"log2 near 1", Log2_64(1.0214), 0.030547964162966627, 3e-16},
		{"log2(8)", Log2_64(8), 3, 0},
		{"log2(0.25)", Log2_64(0.25), -2, 0},
		{"pow of a subnormal", Pow64(0x1p-1070, 0.25), 2.981783861707671e-81, 3e-14},
		{"pow(1e-310, 0.75)", Pow64(1e-310, 0.75), 3.1622776601683793e-233, 3e-14},
		{"pow of a subnormal, y < 0", Pow64(0x1p-1060, -0.25), 5.928554968950589e+79, 3e-14},
	}
	// (pow: within Go's pow's own bound, (|y·ln x| + 4)·2⁻⁵³; math.Pow is
	// off by 10⁴ there)
	for _, c := range cases {
		if math.Abs(c.got-c.want) > c.rel*math.Abs(c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}

// TestPow64 checks that Pow64 is math.Pow bit for bit where x is not
// subnormal: over every pair of special values and seeded random pairs
// (integer exponents, halves, fractions, large ones).
func TestPow64(t *testing.T) {
	sp := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, -0.5, 2, -2, 3, -3, 0.25, 1.5, -1.5, 1e-300, 1e300,
		math.Inf(1), math.Inf(-1), math.NaN(), 1 << 53, 1<<53 + 2, -(1 << 53) - 1, 1 << 63, 1 << 64, -(1 << 64),
		0.9999999999999999, 1.0000000000000002, math.MaxFloat64, 0x1p-1022, 7.5, -7}
	n := 0
	check := func(x, y float64) {
		n++
		got, want := Pow64(x, y), math.Pow(x, y)
		if math.Float64bits(got) != math.Float64bits(want) && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("Pow64(%v, %v) = %v, math.Pow %v", x, y, got, want)
		}
	}
	for _, x := range sp {
		for _, y := range sp {
			check(x, y)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		x := math.Ldexp(r.Float64()+0.5, r.IntN(2000)-1000) // normal
		if r.IntN(4) == 0 {
			x = -x
		}
		var y float64
		switch r.IntN(4) {
		case 0:
			y = float64(r.IntN(200) - 100)
		case 1:
			y = float64(r.IntN(40)-20) + 0.5
		case 2:
			y = (r.Float64() - 0.5) * 40
		default:
			y = math.Ldexp(r.Float64()-0.5, r.IntN(80))
		}
		check(x, y)
	}
	t.Logf("%d pairs", n)
}
