//go:build tilefuse_cuda

package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/tile"
)

// TestClusterProductOnGPU: the swapped TF32 loop with A's tensor copies
// multicast over clusters of 2 CTAs along the output's columns
// (meta-parameter cluster = 2: each CTA copies half of A's tile into
// both, empty mbarriers between the CTAs) gives, bit for bit, what the
// same kernel without clusters gives (the same operands and wgmmas in the
// same order), and is within tol of Σ|a||b| of the float64 product
// (outputs poisoned with NaN), at shapes whose rows are no multiple of
// the tile (A's rows masked: a map of m rows), K of 1 to 32 iterations,
// 3 to 5 stages. A grid whose columns are not whole clusters is refused
// by the launcher with an error.
func TestClusterProductOnGPU(t *testing.T) {
	if dev.Arch < 90 {
		t.Skipf("device %s is sm_%d: clusters and the swapped wgmma form need sm_90a (Hopper)", dev.Name, dev.Arch)
	}
	gpu := &Launcher{Dev: dev}
	refs := map[[3]int][2][]float64{}
	const tol = 2e-3 // TF32: operands rounded to 10 bits
	for _, c := range []struct {
		name   string
		bm, bn int
		meta   tile.Meta
		maskA  string
	}{
		{"256x128 8 warps 4 stages", 256, 128, tile.Meta{"num_warps": 8, "num_stages": 4}, ""},
		{"256x128 8 warps 3 stages rows masked", 256, 128, tile.Meta{"num_warps": 8, "num_stages": 3}, "rows"},
		{"128x128 8 warps 5 stages rows masked", 128, 128, tile.Meta{"num_warps": 8, "num_stages": 5, "tma": 1}, "rows"},
	} {
		for _, sh := range [][3]int{{512, 256, 32}, {1000, 512, 1024}, {300, 768, 96}} {
			m, n, k := sh[0], sh[1], sh[2]
			if c.maskA == "" && m%c.bm != 0 {
				continue
			}
			t.Run(fmt.Sprintf("%s/%dx%dx%d", c.name, m, n, k), func(t *testing.T) {
				a, b := seededOperands(m, n, k)
				grid := tile.Grid{tile.CDiv(m, c.bm), tile.CDiv(n, c.bn)}
				run := func(cluster int) []float32 {
					meta := withMeta(tile.Meta{"wgmma": 2, "cluster": cluster}, c.meta)
					kern := product(t, "cluster_product", m, n, k, c.bm, c.bn, tile.PrecTF32, c.maskA, meta)
					ck, err := codegen.Compile(kern, codegen.Options{NumWarps: meta["num_warps"], Arch: dev.Target(), Spec: []int{16, 16, 16}})
					if err != nil {
						t.Fatal(err)
					}
					multicast := strings.Contains(ck.PTX, ".multicast::cluster")
					if want := cluster == 2; multicast != want || (ck.Cluster != [3]int{}) != want {
						t.Fatalf("cluster = %d: multicast copies %v, Cluster %v", cluster, multicast, ck.Cluster)
					}
					return launchPoisoned(t, gpu, kern, grid, a, b, m, n)
				}
				got := run(2)
				sameBits(t, got, run(0), n, [2]string{"in clusters", "without"})
				nearFloat64(t, refs, sh, a, b, got, tol)
			})
		}
	}
	t.Run("a grid of 3 columns is refused", func(t *testing.T) {
		m, n, k := 256, 384, 64
		a, b := seededOperands(m, n, k)
		kern := product(t, "cluster_product", m, n, k, 256, 128, tile.PrecTF32, "", tile.Meta{"wgmma": 2, "cluster": 2, "num_warps": 8, "num_stages": 4})
		out := make([]float32, m*n)
		err := gpu.Launch(kern, tile.Grid{1, 3}, a, b, out)
		if err == nil || !strings.Contains(err.Error(), "whole clusters") {
			t.Fatalf("a grid of 1×3 CTAs in clusters of 1×2: error %v", err)
		}
	})
}
