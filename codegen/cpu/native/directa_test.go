package native_test

import (
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestDirectANative: products whose a operand is read where it lies
// (dot.go: directA) where its block is in bounds and unmasked, and packed
// where it is not (the row and K tails), in one launch: against the
// reference within checkDot's bound (outputs poisoned with NaN), and bit
// for bit the same as with every a packed (SetDirectA(false)) on each
// instruction set; the kernel reports how many a operands it may read
// where they lie: none where a is stored transposed (packed transposed) or the
// products round their operands (TF32).
func TestDirectANative(t *testing.T) {
	requireJIT(t)
	for _, c := range []struct {
		name       string
		m, n, k    int
		bm, bn, bk int
		tA, tB     bool
		direct     int // a operands the kernel may read where they lie
	}{
		{"A×B, 128×128 tiles, every block in bounds", 256, 256, 256, 128, 128, 64, false, false, 1},
		{"A×B, 64×64 tiles (a's and b's packs in one phase)", 192, 192, 192, 64, 64, 64, false, false, 1},
		{"A×B, row tail and K in 64s and a masked 16", 200, 96, 200, 64, 32, 64, false, false, 2},
		{"A×Bᵀ, K 1030: 32 steps of 32, 6 in 16, a row tail", 40, 64, 1030, 32, 64, 32, false, true, 2},
		{"A×B, 96×96 tiles, row and column tails", 200, 250, 130, 96, 96, 64, false, false, 2},
		{"Aᵀ×B: a packed transposed", 130, 70, 77, 128, 64, 64, true, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := productKernel(t, c.m, c.n, c.k, c.bm, c.bn, c.bk, c.tA, c.tB, true)
			rng := tiletest.RNG(c.name)
			a, b := tiletest.Uniform(rng, c.m*c.k, -1, 1), tiletest.Uniform(rng, c.k*c.n, -1, 1)
			grid := tile.Grid{(c.m + c.bm - 1) / c.bm, (c.n + c.bn - 1) / c.bn}
			run := func(launch func(args ...any) error) []float32 {
				out := make([]float32, c.m*c.n)
				for i := range out {
					out[i] = float32(math.NaN()) // every element is written
				}
				if err := launch(a, b, out); err != nil {
					t.Fatal(err)
				}
				return out
			}
			want := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, grid, args...) })
			was := native.SetDirectA(true)
			defer native.SetDirectA(was)
			for _, isa := range isas(t) {
				native.SetAVX512(isa == "avx512")
				var outs [2][]float32
				for i, on := range []bool{true, false} {
					native.SetDirectA(on)
					nk, err := native.Compile(k)
					if err != nil {
						t.Fatalf("%s: not compiled natively: %v", isa, err)
					}
					n := native.DirectA(nk)
					switch {
					case on && isa == "avx512" && n != c.direct:
						// the packs' loops are zmm moves (movesZ) only with AVX-512
						t.Fatalf("%s: %d a operands read where they lie, want %d", isa, n, c.direct)
					case !on && n != 0:
						t.Fatalf("%s: %d a operands read where they lie with that off", isa, n)
					}
					outs[i] = run(func(args ...any) error { return nk.Launch(grid, args...) })
					nk.Free()
					checkDot(t, isa, c.m, c.n, c.k, false, c.tA, c.tB, a, b, nil, outs[i], want)
				}
				for i := range outs[0] {
					if math.Float32bits(outs[0][i]) != math.Float32bits(outs[1][i]) {
						t.Fatalf("%s: c[%d] = %v with a read where it lies, %v packed", isa, i, outs[0][i], outs[1][i])
					}
				}
			}
		})
	}
}
