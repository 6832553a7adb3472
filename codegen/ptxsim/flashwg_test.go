package ptxsim_test

import (
	"math"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestFlashWgmmaLoop: the hand-written flash forward pass (flashKernel)
// with the meta-parameter wgmma = 1 runs its MMA loop on wgmma for sm_90a
// at TF32, bf16 and 3xTF32 (checkWgmmaForm: m64nNk8 or k16 per k step, three
// a step at 3xTF32; one fence and commit a product; K copied 16 bytes wide
// and V 4 bytes wide into K-major tiles, bf16 converted by the copying
// threads, 3xTF32's low parts in views of their own; fence.proxy.async
// and one barrier an iteration) and agrees with the interpreter in the
// simulator under racecheck, initcheck and the wgmma hazard check, at
// lengths that are no multiple of the key block; for sm_80 the same kernel
// keeps the mma.sync form (.version 7.8, which ptxas 11.8 assembles) and
// agrees too. Without the k permutation of V's tile (P is handed over in
// the accumulator layout, k permuted within each 8) or with Q in the
// mma.sync form's permuted layout, the products are wrong.
func TestFlashWgmmaLoop(t *testing.T) {
	for _, c := range []struct {
		name          string
		n, d, bm, bn  int
		warps, stages int
	}{
		{"d64, 64×32, 4 warps", 100, 64, 64, 32, 4, 2},
		{"d128, 128×32, 8 warps, 3 stages", 150, 128, 128, 32, 8, 3},
		{"d32, 64×64", 70, 32, 64, 64, 4, 2},
	} {
		for _, prec := range []tile.Precision{tile.PrecTF32, tile.PrecTF32TB, tile.PrecBF16, tile.PrecTF32x3} {
			t.Run(c.name+"/"+prec.String(), func(t *testing.T) {
				if testing.Short() && c.d >= 128 {
					t.Skip("-short: the large head dim")
				}
				tol := tiletest.Tol{Abs: 2e-3, Rel: 2e-2}
				switch prec {
				case tile.PrecBF16:
					tol = tiletest.Tol{Abs: 2e-2, Rel: 5e-2}
				case tile.PrecTF32x3:
					tol = tiletest.Tol{Abs: 2e-5, Rel: 2e-4}
				}
				meta := tile.Meta{"wgmma": 1, "num_warps": c.warps, "num_stages": c.stages}
				k := flashKernel(t, c.n, c.d, c.bm, c.bn, prec, meta)
				for _, arch := range []int{90, 80} {
					ck, err := codegen.Compile(k, codegen.Options{Arch: arch, NumWarps: c.warps, Spec: []int{16, 16, 16, 16}})
					if err != nil {
						t.Fatal(err)
					}
					if arch == 90 {
						checkWgmmaForm(t, ck.PTX, prec, c.bn, c.d, c.d, false)
					} else {
						if strings.Contains(ck.PTX, "wgmma") || !strings.Contains(ck.PTX, ".version 7.8") || !strings.Contains(ck.PTX, "mma.sync") {
							t.Error("sm_80: not the mma.sync form")
						}
						ptxasCheck(t, ck.PTX)
					}
					rng := tiletest.RNG("flash wgmma " + c.name)
					in := func(size int) []float32 {
						x := make([]float32, size)
						for i := range x {
							x[i] = float32(rng.Float64()*2 - 1)
						}
						return x
					}
					n, d := c.n, c.d
					q, kk, v := in(n*d), in(n*d), in(n*d)
					want, got := make([]float32, n*d), make([]float32, n*d)
					for i := range got {
						got[i] = float32(math.NaN())
					}
					grid := tile.Grid{tile.CDiv(n, c.bm)}
					if err := interp.Interpret(k, grid, q, kk, v, want); err != nil {
						t.Fatal(err)
					}
					sim := &ptxsim.Launcher{Arch: arch, Racecheck: true, Initcheck: true, NumWarps: c.warps}
					if err := sim.Launch(k, grid, q, kk, v, got); err != nil {
						t.Fatal(err)
					}
					for i := range want {
						g, w := float64(got[i]), float64(want[i])
						if !(math.Abs(g-w) <= tol.Abs+tol.Rel*math.Abs(w)) {
							t.Fatalf("sm_%d: o[%d] = %v in the simulator, %v in the interpreter (tolerance %+v)", arch, i, g, w, tol)
						}
					}
				}
			})
		}
	}
}
