package native_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestDirectOperandsNative: products whose a and b operands are read where
// they lie (dot.go: directOps) where their blocks are in bounds and
// unmasked, and packed where they are not (the row, column and K tails),
// in one launch: against the reference within checkDot's bound (outputs
// poisoned with NaN), and bit for bit the same as with every operand
// packed, or only a or only b read where it lies, on each instruction set;
// the kernel reports how many operands it may read so: stored transposed
// too (a's pack phase runs over the transpose; b stored [N,K] is turned
// into the frame from where it lies).
func TestDirectOperandsNative(t *testing.T) {
	requireJIT(t)
	for _, c := range []struct {
		name       string
		m, n, k    int
		bm, bn, bk int
		tA, tB     bool
		da, db     int // a and b operands the kernel may read where they lie
	}{
		{"A×B, 128×128 tiles, every block in bounds", 256, 256, 256, 128, 128, 64, false, false, 1, 1},
		{"A×B, 64×64 tiles (a's and b's packs in one phase)", 192, 192, 192, 64, 64, 64, false, false, 1, 1},
		{"A×B, row tail and K in 64s and a masked 16", 200, 96, 200, 64, 32, 64, false, false, 2, 2},
		{"A×B, column tail", 64, 200, 128, 64, 64, 64, false, false, 1, 1},
		{"A×Bᵀ, K 1030: 32 steps of 32, 6 in 16, a row tail", 40, 64, 1030, 32, 64, 32, false, true, 2, 2},
		{"A×Bᵀ, 256×256 over K 128, 128×128 tiles, a column tail", 256, 200, 128, 128, 128, 64, false, true, 1, 1},
		{"A×B, 96×96 tiles, row and column tails", 200, 250, 130, 96, 96, 64, false, false, 2, 2},
		{"Aᵀ×B, rows 130 of 128-row tiles, K 77: 64, then 13 in 16", 130, 70, 77, 128, 64, 64, true, false, 2, 2},
		{"Aᵀ×B, 392×256 over K 256, 128×128 tiles, a row tail", 392, 256, 256, 128, 128, 64, true, false, 1, 1},
		{"both transposed, 96×64 tiles, K 1225: 19 steps of 64, 9 in a masked 16", 288, 64, 1225, 96, 64, 64, true, true, 2, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := productKernel(t, c.m, c.n, c.k, c.bm, c.bn, c.bk, c.tA, c.tB, true)
			a, b, grid, run := productCase(t, c.name, c.m, c.n, c.k, c.bm, c.bn)
			want := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, grid, args...) })
			wasA, wasB := native.SetDirect(true, true)
			defer native.SetDirect(wasA, wasB)
			for _, isa := range isas(t) {
				native.SetAVX512(isa == "avx512")
				var packed []float32
				for _, on := range [][2]bool{{false, false}, {true, true}, {true, false}, {false, true}} {
					native.SetDirect(on[0], on[1])
					nk, err := native.Compile(k)
					if err != nil {
						t.Fatalf("%s: not compiled natively: %v", isa, err)
					}
					da, db := native.Direct(nk)
					wa, wb := c.da, c.db
					if !on[0] {
						wa = 0
					}
					if !on[1] {
						wb = 0
					}
					// the packs' loops are zmm moves (movesZ) only with AVX-512
					if isa == "avx512" && (da != wa || db != wb) || isa != "avx512" && (da != 0 || db != 0) {
						t.Fatalf("%s, direct %v: a and b read where they lie %d and %d times, want %d and %d", isa, on, da, db, wa, wb)
					}
					got := run(func(args ...any) error { return nk.Launch(grid, args...) })
					nk.Free()
					what := fmt.Sprintf("%s, direct %v", isa, on)
					checkDot(t, what, c.m, c.n, c.k, false, c.tA, c.tB, a, b, nil, got, want)
					if packed == nil {
						packed = got
						continue
					}
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(packed[i]) {
							t.Fatalf("%s: c[%d] = %v, %v with both packed", what, i, got[i], packed[i])
						}
					}
				}
			}
		})
	}
}
