//go:build tilefuse_cuda

package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/tile"
)

// TestOneBlock3xTF32OnGPU: the swapped 3xTF32 loop with one block
// accumulator (the default: the next stage split and its fragments loaded
// while the wgmmas run) whose block spans one iteration (x3_span = 1:
// each iteration's wgmmas retired before the next one's are issued)
// gives, bit for bit, what the form with a block per unrolled iteration
// (x3_blocks = 2) gives — the same products summed in the same blocks,
// added in the same order — at shapes no multiple of the tile or of K's
// 32 (k_tail too), and is within tol of Σ|a||b| of the float64 product in
// every element (outputs poisoned with NaN); with blocks spanning 2 (the
// default) or 4 iterations within tol likewise.
// cmd/tilefuse's TestPeerKernelsInSimulator runs both under racecheck and
// the simulator's check of registers held by wgmmas in flight.
func TestOneBlock3xTF32OnGPU(t *testing.T) {
	if dev.Arch < 90 {
		t.Skipf("device %s is sm_%d: the swapped wgmma form needs sm_90a (Hopper)", dev.Name, dev.Arch)
	}
	gpu := &Launcher{Dev: dev}
	refs := map[[3]int][2][]float64{}
	const tol = 1e-5
	for _, c := range []struct {
		name   string
		bm, bn int
		meta   tile.Meta
	}{
		{"128x128 8 warps 4 stages span 1", 128, 128, tile.Meta{"num_warps": 8, "num_stages": 4, "x3_span": 1}},
		{"64x128 8 warps 6 stages span 1", 64, 128, tile.Meta{"num_warps": 8, "num_stages": 6, "x3_span": 1}},
		{"128x128 8 warps 4 stages span 1 k_tail", 128, 128, tile.Meta{"num_warps": 8, "num_stages": 4, "x3_span": 1, "k_tail": 1}},
		{"128x128 8 warps 4 stages", 128, 128, tile.Meta{"num_warps": 8, "num_stages": 4}},
		{"64x128 8 warps 6 stages span 4 k_tail", 64, 128, tile.Meta{"num_warps": 8, "num_stages": 6, "x3_span": 4, "k_tail": 1}},
	} {
		for _, sh := range [][3]int{{200, 136, 72}, {1000, 1000, 1000}, {4095, 4097, 33}} {
			m, n, k := sh[0], sh[1], sh[2]
			t.Run(fmt.Sprintf("%s/%dx%dx%d", c.name, m, n, k), func(t *testing.T) {
				a, b := seededOperands(m, n, k)
				grid := tile.Grid{tile.CDiv(m, c.bm), tile.CDiv(n, c.bn)}
				run := func(blocks int) []float32 {
					meta := withMeta(tile.Meta{"wgmma": 2}, c.meta)
					if blocks != 0 {
						meta["x3_blocks"] = blocks
					}
					kern := product(t, "x3_product", m, n, k, c.bm, c.bn, tile.PrecTF32x3, "rows and k", meta)
					ck, err := codegen.Compile(kern, codegen.Options{NumWarps: meta["num_warps"], Arch: dev.Target(), Spec: []int{16, 16, 16}})
					if err != nil {
						t.Fatal(err)
					}
					// one group in flight, except where a block spans
					// iterations (each retires the one before it) or with
					// a block per iteration
					waits := strings.Count(ck.PTX, "wgmma.wait_group.sync.aligned 1")
					if want := blocks == 2 || meta["x3_span"] != 1; want != (waits > 0) {
						t.Fatalf("x3_blocks = %d, x3_span = %d: %d × wgmma.wait_group 1: not the form asked for", blocks, meta["x3_span"], waits)
					}
					return launchPoisoned(t, gpu, kern, grid, a, b, m, n)
				}
				got, two := run(0), run(2)
				if c.meta["x3_span"] == 1 { // else blocks of 64 or 128 k: other sums than two blocks of 32
					sameBits(t, got, two, n, [2]string{"with one block", "with two"})
				}
				nearFloat64(t, refs, sh, a, b, got, tol)
			})
		}
	}
}
