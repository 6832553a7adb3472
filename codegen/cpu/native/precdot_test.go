package native_test

import (
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestPrecisionDotsNative: f32 products of precision tf32, tf32tb, bf16
// and tf32x3 run natively and give the reference interpreter's results bit
// for bit (their operands' products are exact in f32, so each fused
// multiply-add rounds what the reference's product-then-add rounds): K
// loops in place, loaded accumulators, masked edges, transposed operands,
// on every ISA the CPU has; and each rounding at its edges (ties to even
// both ways, carries into the exponent, the largest finite rounding to
// ∞, subnormals, ±0, NaN and ∞) through products by the identity.
func TestPrecisionDotsNative(t *testing.T) {
	requireJIT(t)
	precs := []tile.Precision{tile.PrecTF32, tile.PrecTF32TB, tile.PrecBF16, tile.PrecTF32x3}
	type dotCase struct {
		name       string
		m, n, k    int
		bm, bn, bk int
		loop       bool
		loadAcc    bool
		tA, tB     bool
	}
	for _, prec := range precs {
		for _, c := range []dotCase{
			{name: "one block, loaded accumulator, masked 50×40×27", m: 50, n: 40, k: 27, bm: 64, bn: 32, bk: 32, loadAcc: true},
			{name: "K loop in place 130×70×90", m: 130, n: 70, k: 90, bm: 32, bn: 32, bk: 32, loop: true},
			{name: "a transposed, K loop 130×70×90", m: 130, n: 70, k: 90, bm: 32, bn: 32, bk: 32, loop: true, tA: true, loadAcc: true},
			{name: "b transposed, K loop 100×200×77", m: 100, n: 200, k: 77, bm: 64, bn: 64, bk: 16, loop: true, tB: true, loadAcc: true},
		} {
			t.Run(prec.String()+"/"+c.name, func(t *testing.T) {
				k := dotKernelPrec(t, tile.F32, prec, c.bm, c.bn, c.bk, c.loop, c.loadAcc, false, c.tA, c.tB)
				rng := tiletest.RNG(c.name)
				a, b := tiletest.Uniform(rng, c.m*c.k, -1, 1), tiletest.Uniform(rng, c.k*c.n, -1, 1)
				c0 := tiletest.Uniform(rng, c.m*c.n, -1, 1)
				grid := tile.Grid{(c.m + c.bm - 1) / c.bm, (c.n + c.bn - 1) / c.bn}
				run := func(launch func(args ...any) error) []float32 {
					out := make([]float32, c.m*c.n)
					for i := range out {
						out[i] = float32(math.NaN())
					}
					if err := launch(a, b, c0, out, c.m, c.n, c.k); err != nil {
						t.Fatal(err)
					}
					return out
				}
				productOnEachISA(t, k, grid, run, func(isa string, got, want []float32) {
					sameBits(t, isa, got, want)
				})
			})
		}
	}
	// the roundings' edges: b's values (and a's, transposed) through the identity
	edges := []uint32{0x3f800000, 0x3f801000, 0x3f803000, 0x3f800fff, 0x3f801001, 0xbf801000, 0xbf803000, // TF32 ties, below, above
		0x3f808000, 0x3f818000, 0x3f807fff, 0xbf818000, 0x3f7fffff, 0x3fffffff, // bf16 ties; carries into the exponent
		0x7f7fffff, 0xff7fffff, 0x7f7ff000, // the largest finite rounds to ∞
		0x00000fff, 0x00001000, 0x00003000, 0x00008000, 0x80018000, 0x007fffff, // subnormals
		0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0x7f802000, 0xffc00001} // ±0, ±∞, NaNs
	const n = 32
	ident, vals := make([]float32, n*n), make([]float32, n*n)
	for i := range n {
		ident[i*n+i] = 1
	}
	for i := range vals {
		vals[i] = math.Float32frombits(edges[i%len(edges)] ^ uint32(i/len(edges))) // the edges, then their neighbours
	}
	for _, prec := range precs {
		for _, side := range []string{"b", "a"} {
			t.Run(prec.String()+"/edges of "+side, func(t *testing.T) {
				k := dotKernelPrec(t, tile.F32, prec, n, n, n, false, false, false, false, false)
				a, b := ident, vals
				if side == "a" {
					a, b = vals, ident
				}
				run := func(launch func(args ...any) error) []float32 {
					out := make([]float32, n*n)
					if err := launch(a, b, make([]float32, n*n), out, n, n, n); err != nil {
						t.Fatal(err)
					}
					return out
				}
				productOnEachISA(t, k, tile.Grid{1, 1}, run, func(isa string, got, want []float32) {
					sameBits(t, isa, got, want)
				})
			})
		}
	}
}

// sameBits fails t unless got and want are the same bit for bit (any NaN
// equal to any NaN).
func sameBits(t *testing.T, isa string, got, want []float32) {
	t.Helper()
	bad := 0
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			if bad++; bad <= 5 {
				t.Errorf("%s: [%d] = %v (%#x), the reference %v (%#x)", isa, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d elements differ", isa, bad, len(got))
	}
}
