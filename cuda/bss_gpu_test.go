//go:build tilefuse_cuda

package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/tile"
)

// TestBF16BothFromSharedMemoryOnGPU: the swapped bf16 loop whose wgmmas
// read B from a bf16 tile of the stage through an MN-major descriptor
// (b_smem = 1: the pass over the copies converts B's too) gives, bit for
// bit, what the form with B's fragments in registers gives (the same
// operands rounded the same way, the same wgmmas), within tol of Σ|a||b|
// of the float64 product (outputs poisoned with NaN), at shapes no
// multiple of the tile or of K's 32, in the warp-specialised form too
// (ws = 1: the producer's pass converts B). codegen's
// TestBF16BothFromSharedMemory runs the same form in the simulator.
func TestBF16BothFromSharedMemoryOnGPU(t *testing.T) {
	if dev.Arch < 90 {
		t.Skipf("device %s is sm_%d: the swapped wgmma form needs sm_90a (Hopper)", dev.Name, dev.Arch)
	}
	gpu := &Launcher{Dev: dev}
	refs := map[[3]int][2][]float64{}
	const tol = 1e-2 // bf16: operands rounded to 8 bits
	for _, c := range []struct {
		name   string
		bm, bn int
		meta   tile.Meta
	}{
		{"256x128 8 warps 3 stages", 256, 128, tile.Meta{"num_warps": 8, "num_stages": 3}},
		{"128x128 8 warps 3 stages", 128, 128, tile.Meta{"num_warps": 8, "num_stages": 3}},
		{"128x64 4 warps 4 stages", 128, 64, tile.Meta{"num_warps": 4, "num_stages": 4}},
		{"256x128 8 warps 3 stages ws", 256, 128, tile.Meta{"num_warps": 8, "num_stages": 3, "ws": 1}},
		{"128x128 8 warps 4 stages ws", 128, 128, tile.Meta{"num_warps": 8, "num_stages": 4, "ws": 1}},
	} {
		for _, sh := range [][3]int{{200, 136, 72}, {1000, 1000, 1000}, {4095, 4097, 33}} {
			m, n, k := sh[0], sh[1], sh[2]
			t.Run(fmt.Sprintf("%s/%dx%dx%d", c.name, m, n, k), func(t *testing.T) {
				a, b := seededOperands(m, n, k)
				grid := tile.Grid{tile.CDiv(m, c.bm), tile.CDiv(n, c.bn)}
				run := func(bss int) []float32 {
					meta := withMeta(tile.Meta{"wgmma": 2, "b_smem": bss}, c.meta)
					kern := product(t, fmt.Sprintf("bss_product_b_smem_%d", bss), m, n, k, c.bm, c.bn, tile.PrecBF16, "rows and k", meta)
					ck, err := codegen.Compile(kern, codegen.Options{NumWarps: meta["num_warps"], Arch: dev.Target(), Spec: []int{16, 16, 16}})
					if err != nil {
						t.Fatal(err)
					}
					if got := strings.Contains(ck.PTX, ", 1, 1, 1, 0;"); got != (bss == 1) {
						t.Fatalf("b_smem = %d: Bᵀ read by descriptor %v", bss, got)
					}
					return launchPoisoned(t, gpu, kern, grid, a, b, m, n)
				}
				got := run(1)
				sameBits(t, got, run(0), n, [2]string{"from shared memory", "from fragments"})
				nearFloat64(t, refs, sh, a, b, got, tol)
			})
		}
	}
}
