package tile

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpfAccuracy compares expf with float32(math.Exp) on the whole useful
// range, the edges and a dense sweep: at most 1 ulp apart.
func TestExpfAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	xs := []float32{0, -0.0, 1, -1, 88.72283, 88.72284, 88.7229, -87.33, -103.9, -103.97207, -104, -150, 1e-8, -1e-8, 0.34657359}
	for i := 0; i < 200000; i++ {
		xs = append(xs, float32(rng.Float64()*200-105))
	}
	for _, x := range xs {
		got, want := expf(x), float32(math.Exp(float64(x)))
		if got == want {
			continue
		}
		d := int64(math.Float32bits(got)) - int64(math.Float32bits(want))
		if d > 1 || d < -1 {
			t.Fatalf("expf(%g) = %g, want %g (%d ulp)", x, got, want, d)
		}
	}
	if v := expf(float32(math.NaN())); v == v {
		t.Fatal("expf(NaN) is not NaN")
	}
	if v := expf(float32(math.Inf(1))); !math.IsInf(float64(v), 1) {
		t.Fatal("expf(+Inf) is not +Inf")
	}
	if v := expf(float32(math.Inf(-1))); v != 0 {
		t.Fatal("expf(-Inf) is not 0")
	}
}
