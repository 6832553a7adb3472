package cpu

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

// TestTanhfAccuracy: tanhf is within 1 ulp of float32(math.Tanh) on a dense sweep.
func TestTanhfAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	xs := []float32{0, -0.0, 0.625, -0.625, 0.62499997, 9.1, 9.2, -9.2, 20, 1e-8}
	for i := 0; i < 200000; i++ {
		xs = append(xs, float32(rng.Float64()*24-12), float32(rng.Float64()*1.4-0.7), // around the 0.1 switch
			float32(math.Copysign(math.Exp(-rng.Float64()*90), rng.Float64()-0.5))) // tiny, subnormal
	}
	xs = append(xs, 0.1, -0.1, 0.099999994, 0.10000001, 1e-45)
	for _, x := range xs {
		got, want := tanhf(x), float32(math.Tanh(float64(x)))
		if math.Signbit(float64(got)) != math.Signbit(float64(want)) {
			t.Fatalf("tanhf(%g) = %g, want %g (sign)", x, got, want)
		}
		d := int64(math.Float32bits(got)) - int64(math.Float32bits(want))
		if d > 1 || d < -1 {
			t.Fatalf("tanhf(%g) = %g, want %g (%d ulp)", x, got, want, d)
		}
	}
	if v := tanhf(float32(math.NaN())); v == v {
		t.Fatal("tanhf(NaN) is not NaN")
	}
}
