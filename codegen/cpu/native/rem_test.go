package native_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
)

// TestRem32Native: x rem y of f32 blocks as machine code (rem.go) against
// float32(math.Mod(float64(x), float64(y))), the reference's, bit for bit
// (NaN's bits too): every pair of edge values (signed zeros, subnormals,
// the largest float, infinities, NaN, values a unit apart, exponents far
// apart, so that the reduction takes its six steps), then random bit
// patterns, with a tail of five lanes on poisoned outputs; and a divisor
// that is a kernel parameter (a uniform operand in memory); scalars (one
// a program, computed between phases). Declined
// before 2026-12-07's fifty-sixth session ("f32 rem").
func TestRem32Native(t *testing.T) {
	requireJIT(t)
	edges := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 1.5, -2.5, 3, 7, 0.1, -0.3, 1e-45, -1e-45, 1e-40, 1.17549435e-38,
		3.4028235e38, -3.4028235e38, 1e30, -1e30, 1e-30, 16777216, 16777217, 33554430, 8388609, 2.0000002, 0.99999994,
		6.2831855, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	var xs, ys []float32
	for _, a := range edges {
		for _, b := range edges {
			xs, ys = append(xs, a), append(ys, b)
		}
	}
	rng := rand.New(rand.NewPCG(56, 1))
	for range 4000 {
		xs = append(xs, math.Float32frombits(rng.Uint32()))
		ys = append(ys, math.Float32frombits(rng.Uint32()))
	}
	for range 1000 { // exponents within a few of each other: the common case
		x := float32(rng.NormFloat64() * 100)
		xs, ys = append(xs, x), append(ys, float32(rng.NormFloat64()*3))
	}
	for len(xs)%8 != 5 {
		xs, ys = append(xs, 5), append(ys, 3)
	}
	n := len(xs)
	want := func(x, y float32) float32 { return float32(math.Mod(float64(x), float64(y))) }
	same := func(got, w float32) bool { return math.Float32bits(got) == math.Float32bits(w) }

	t.Run("blocks", func(t *testing.T) {
		k := remKernel(t, tile.F32, 64)
		for _, isa := range isas(t) {
			nk := compileFor(t, isa, k)
			z := make([]float32, n+8)
			for i := range z {
				z[i] = float32(math.NaN())
			}
			if err := nk.Launch(tile.Grid{tile.CDiv(n, 64)}, xs, ys, z, n); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				if w := want(xs[i], ys[i]); !same(z[i], w) {
					t.Fatalf("%s: %v rem %v = %v (%#x), want %v (%#x)", isa, xs[i], ys[i], z[i], math.Float32bits(z[i]), w, math.Float32bits(w))
				}
			}
			for i := n; i < len(z); i++ {
				if !math.IsNaN(float64(z[i])) {
					t.Fatalf("%s: z[%d] = %v past the output", isa, i, z[i])
				}
			}
		}
	})
	t.Run("by a parameter", func(t *testing.T) {
		b := tile.NewBuilder("rem32_param", nil)
		px, pz, pd, pn := b.Ptr("x", tile.F32), b.Ptr("z", tile.F32), b.Param("d", tile.F32), b.Param("n", tile.I32)
		offs := b.Add(b.Mul(b.ProgramID(0), 64), b.Arange(0, 64))
		m := b.Lt(offs, pn)
		x := b.Load(b.AddPtr(px, offs), m, 0.0)
		b.Store(b.AddPtr(pz, offs), b.Rem(x, b.Splat(pd, tile.Shp(64))), m)
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		for _, isa := range isas(t) {
			nk := compileFor(t, isa, k)
			for _, d := range []float32{0.7, -3, 1e-40, 1e30, float32(math.Inf(1)), 0} {
				z := make([]float32, n)
				if err := nk.Launch(tile.Grid{tile.CDiv(n, 64)}, xs, z, d, n); err != nil {
					t.Fatal(err)
				}
				for i := range n {
					if w := want(xs[i], d); !same(z[i], w) {
						t.Fatalf("%s: %v rem %v = %v, want %v", isa, xs[i], d, z[i], w)
					}
				}
			}
		}
	})
	t.Run("scalars", func(t *testing.T) {
		b := tile.NewBuilder("rem32_scalar", nil)
		px, py, pz := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32), b.Ptr("z", tile.F32)
		p := b.ProgramID(0)
		b.Store(b.AddPtr(pz, p), b.Rem(b.Load(b.AddPtr(px, p), nil, nil), b.Load(b.AddPtr(py, p), nil, nil)), nil)
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		for _, isa := range isas(t) {
			nk := compileFor(t, isa, k)
			z := make([]float32, n)
			if err := nk.Launch(tile.Grid{n}, xs, ys, z); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				if w := want(xs[i], ys[i]); !same(z[i], w) {
					t.Fatalf("%s: %v rem %v = %v, want %v", isa, xs[i], ys[i], z[i], w)
				}
			}
		}
	})
}

// TestRemF64Native: x rem y of f64 blocks as machine code (rem.go: remF64;
// without AVX-512 on ymm halves) against math.Mod, bit for bit (NaN's bits
// too): every pair of edge values (signed zeros, the least subnormal and
// others, the least normal, the largest float, infinities, NaN, exponents
// 2098 apart, so that y' is three factors and the loop runs its ~41
// steps), then random bit patterns, a tail of three lanes on poisoned
// outputs. Declined before 2026-12-07's fifty-sixth session ("f64 rem").
func TestRemF64Native(t *testing.T) {
	requireJIT(t)
	edges := []float64{0, math.Copysign(0, -1), 1, -1, 1.5, -2.5, 3, 7, 0.1, -0.3, 5e-324, -5e-324, 1e-310, 2.2250738585072014e-308,
		math.MaxFloat64, -math.MaxFloat64, 1e300, -1e300, 1e-300, 1 << 53, 1<<53 + 2, 1<<52 + 1, 4503599627370497.5, 0.9999999999999999,
		1.0000000000000002, 2 * math.Pi, math.Inf(1), math.Inf(-1), math.NaN()}
	var xs, ys []float64
	for _, a := range edges {
		for _, b := range edges {
			xs, ys = append(xs, a), append(ys, b)
		}
	}
	rng := rand.New(rand.NewPCG(56, 2))
	for range 3000 {
		xs = append(xs, math.Float64frombits(rng.Uint64()))
		ys = append(ys, math.Float64frombits(rng.Uint64()))
	}
	for range 1000 {
		xs, ys = append(xs, rng.NormFloat64()*100), append(ys, rng.NormFloat64()*3)
	}
	for len(xs)%8 != 3 {
		xs, ys = append(xs, 5), append(ys, 3)
	}
	n := len(xs)
	k := remKernel(t, tile.F64, 32)
	for _, isa := range isas(t) {
		nk := compileFor(t, isa, k)
		z := make([]float64, n+8)
		for i := range z {
			z[i] = math.NaN()
		}
		if err := nk.Launch(tile.Grid{tile.CDiv(n, 32)}, xs, ys, z, n); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if w := math.Mod(xs[i], ys[i]); math.Float64bits(z[i]) != math.Float64bits(w) {
				t.Fatalf("%s: %v rem %v = %v (%#x), want %v (%#x)", isa, xs[i], ys[i], z[i], math.Float64bits(z[i]), w, math.Float64bits(w))
			}
		}
		for i := n; i < len(z); i++ {
			if !math.IsNaN(z[i]) {
				t.Fatalf("%s: z[%d] = %v past the output", isa, i, z[i])
			}
		}
	}
}

// remKernel is z = x rem y over n elements of dt, block a program, masked
// (masked-off lanes load 0 rem 1).
func remKernel(t *testing.T, dt tile.DType, block int) *tile.Kernel {
	t.Helper()
	b := tile.NewBuilder("rem", nil)
	px, py, pz, pn := b.Ptr("x", dt), b.Ptr("y", dt), b.Ptr("z", dt), b.Param("n", tile.I32)
	offs := b.Add(b.Mul(b.ProgramID(0), int32(block)), b.Arange(0, block))
	m := b.Lt(offs, pn)
	x, y := b.Load(b.AddPtr(px, offs), m, 0.0), b.Load(b.AddPtr(py, offs), m, 1.0)
	b.Store(b.AddPtr(pz, offs), b.Rem(x, y), m)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
