package ptxsim_test

import (
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

func TestFlashWgmmaLoop(t *testing.T) {
	for _, c := range []struct {
		name          string
		n, d, bm, bn  int
		warps, stages int
	}{
		{"d64 bn32", 100, 64, 64, 32, 4, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			meta := tile.Meta{"wgmma": 1, "num_warps": c.warps, "num_stages": c.stages}
			k := flashKernel(t, c.n, c.d, c.bm, c.bn, tile.PrecTF32, meta)
			ck, err := codegen.Compile(k, codegen.Options{Arch: 90, Spec: []int{16, 16, 16, 16}, DumpDir: "/tmp/wgdump"})
			if err != nil {
				t.Fatal(err)
			}
			p := ck.PTX
			_ = regexp.MustCompile
			if !strings.Contains(p, "wgmma.mma_async") {
				t.Fatalf("no wgmma")
			}
			rng := tiletest.RNG("flash wg " + c.name)
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
			sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true}
			if err := sim.Launch(k, grid, q, kk, v, got); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				g, w := float64(got[i]), float64(want[i])
				if !(math.Abs(g-w) <= 2e-3+2e-2*math.Abs(w)) {
					t.Fatalf("o[%d] = %v in the simulator, %v in the interpreter", i, g, w)
				}
			}
		})
	}
}
