package codegen_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/tile"
)

// TestBF16BothFromSharedMemory: with b_smem = 1 the swapped bf16 loop
// converts B's copies into a bf16 tile of the stage and its wgmmas read
// both operands through descriptors (Bᵀ MN-major, imm-trans-a = 1): no
// ld.shared of B's fragments in the loop. Each kernel runs in the
// simulator with racecheck and initcheck and gives the same bits as the
// form with register fragments (b_smem = 0) and the exact product of
// small integers (exact in bf16 and in f32 sums), at shapes whose K, rows
// and columns are not multiples of the tile, with 3 and 4 stages, and in
// the warp-specialised form (ws = 1: the producer's pass converts B too).
func TestBF16BothFromSharedMemory(t *testing.T) {
	for _, c := range []struct {
		name            string
		m, n, k, bm, bn int
		stages          int
		maskA           string
		ws              int
	}{
		{"256x128, 3 stages", 512, 256, 96, 256, 128, 3, "", 0},
		{"128x128, 4 stages, edges masked", 200, 136, 80, 128, 128, 4, "rows and k", 0},
		{"128x64, 3 stages, one iteration", 128, 64, 32, 128, 64, 3, "", 0},
		{"256x128, 3 stages, warp-specialised", 512, 256, 160, 256, 128, 3, "", 1},
		{"128x128, 4 stages, edges masked, warp-specialised", 200, 136, 80, 128, 128, 4, "rows and k", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			nw := c.bn / 16
			run := func(bss int) []float32 {
				meta := tile.Meta{"wgmma": 2, "num_warps": nw, "num_stages": c.stages, "b_smem": bss, "ws": c.ws}
				kk := tmaProduct(t, c.m, c.n, c.k, c.bm, c.bn, tile.PrecBF16, c.maskA, meta)
				ck, err := codegen.Compile(kk, codegen.Options{NumWarps: nw, Arch: 90, Spec: []int{16, 16, 16}})
				if err != nil {
					t.Fatal(err)
				}
				trans := strings.Contains(ck.PTX, ".bf16.bf16") && strings.Contains(ck.PTX, ", 1, 1, 1, 0;")
				if trans != (bss == 1) || (ck.ProducerWarps > 0) != (c.ws == 1) {
					t.Fatalf("b_smem = %d, ws = %d: wgmmas with Bᵀ from shared memory (imm-trans-a) %v, %d producer warps", bss, c.ws, trans, ck.ProducerWarps)
				}
				rowsGrid := tile.CDiv(c.m, c.bm) * c.bm
				a, b, out := make([]float32, rowsGrid*c.k), make([]float32, c.k*c.n), make([]float32, rowsGrid*c.n)
				for i := range a {
					a[i] = float32(i%7) - 3
				}
				for i := range b {
					b[i] = float32(i%5) - 2
				}
				for i := range out {
					out[i] = float32(math.NaN())
				}
				sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true}
				if err := sim.Launch(kk, tile.Grid{tile.CDiv(c.m, c.bm), tile.CDiv(c.n, c.bn)}, a, b, out); err != nil {
					t.Fatal(err)
				}
				exactProduct(t, fmt.Sprintf("b_smem = %d: ", bss), a, b, out, c.m, c.n, c.k)
				return out[:c.m*c.n]
			}
			got, frags := run(1), run(0)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(frags[i]) {
					t.Fatalf("element %d: %v from shared memory, %v from fragments", i, got[i], frags[i])
				}
			}
		})
	}
}
