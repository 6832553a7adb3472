package main

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// TestRowStoresInSimulator: the swapped form's epilogue stored by rows
// (codegen/rowstore.go, row_stores = 1) where the output's rows are not
// 16-byte aligned (N mod 4 = 1, 2, 3): each row's aligned run by one bulk
// copy from the tile the accumulator went into shifted by the row's
// phase, its ends by scalar stores; run in the PTX simulator for sm_90
// (memcheck: no write past the output or outside its tile's columns and
// rows, racecheck and the bulk copies' reads of shared memory, initcheck)
// against peer's float64 check, with the last tile's columns 1 to 5 wide,
// rows past M, 64, 128 and 256 rows, K tails, B's copies realigned or not.
// A product with an epilogue op (gelu) keeps the scalar stores, as does
// one whose rows are 16-byte aligned.
func TestRowStoresInSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds in the simulator")
	}
	for _, c := range []struct {
		m, k, n int
		bm      int
		stages  int
		extra   tile.Meta
		gelu    bool
		rows    bool // stored by rows
	}{
		{130, 64, 129, 128, 3, nil, false, true},
		{130, 64, 130, 128, 3, nil, false, true},
		{130, 64, 131, 128, 3, nil, false, true},
		{128, 64, 133, 128, 3, nil, false, true},
		{195, 33, 197, 128, 3, tile.Meta{"k_tail": 1, "max_registers": 128}, false, true},
		{300, 33, 199, 256, 2, tile.Meta{"k_tail": 1}, false, true},
		{150, 100, 258, 64, 4, tile.Meta{"realign_b": 1}, false, true},
		{300, 200, 203, 256, 4, tile.Meta{"realign_b": 1}, false, true},
		{300, 200, 203, 256, 4, nil, true, false},
		{130, 64, 132, 128, 3, nil, false, false},
	} {
		name := fmt.Sprintf("%dx%dx%d %dx128 %d stages %v gelu=%v", c.m, c.k, c.n, c.bm, c.stages, c.extra, c.gelu)
		t.Run(name, func(t *testing.T) {
			tune := tile.Meta{"wgmma": 2, "epi_smem": 1, "row_stores": 1, "BLOCK_M": c.bm, "BLOCK_N": 128, "num_warps": 8, "num_stages": c.stages}
			for k, v := range c.extra {
				tune[k] = v
			}
			pc := peerCase{name: name, m: c.m, k: c.k, n: c.n, gelu: c.gelu}
			p, err := buildPeer(pc, graphpass.H200, tile.PrecTF32, tune)
			require.NoError(t, err)
			// the output poisoned: an element no store writes stays NaN
			out := p.args[len(p.args)-1]
			for i := range out {
				out[i] = float32(math.NaN())
			}
			args := make([]any, len(p.args))
			for i, a := range p.args {
				args[i] = a
			}
			sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true}
			require.NoError(t, sim.Launch(p.k.Tile, p.k.Grid, args...))
			ptx := sim.Last.PTX
			bulk := strings.Count(ptx, "cp.async.bulk.global.shared::cta.bulk_group")
			if c.rows {
				// one bulk copy a thread and row of the tile's
				require.Equal(t, (c.bm+255)/256, bulk, "bulk copies")
				require.Equal(t, 6*((c.bm+255)/256), strings.Count(ptx, "st.global.f32"), "the rows' ends: 3 + 3 scalar stores")
				require.Contains(t, ptx, "cp.async.bulk.wait_group.read 0")
			} else {
				require.Zero(t, bulk, "bulk copies")
			}
			// every element against float64 (peer's check samples rows)
			tol := peerTol(tile.PrecTF32)
			worst := 0.0
			for r := 0; r < c.m; r++ {
				for j := 0; j < c.n; j++ {
					var ref, mag float64
					for kk := 0; kk < c.k; kk++ {
						x := float64(p.x[r*c.k+kk]) * float64(p.w[kk*c.n+j])
						ref += x
						mag += math.Abs(x)
					}
					if c.gelu {
						ref = gelu64(ref + float64(p.b[j]))
					}
					e := math.Abs(float64(out[r*c.n+j]) - ref)
					require.False(t, math.IsNaN(e) || e > tol*(1+mag), "(%d, %d): %v, want %v", r, j, out[r*c.n+j], ref)
					worst = max(worst, e/(1+mag))
				}
			}
			t.Logf("max error %.2g of 1 + Σ|a·b|", worst)
		})
	}
}
