package interp_test

import (
	"math"
	"testing"

	. "github.com/tilefuse/tilefuse/tile/interp"
)

// TestMath64Edges pins the cases where Go's amd64 Exp, Log and Log2 are off
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
	}
	for _, c := range cases {
		if math.Abs(c.got-c.want) > c.rel*math.Abs(c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}
