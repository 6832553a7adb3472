package main

import (
	"fmt"
	"math"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// TestEpiLateInSimulator: the swapped form with the epilogue's invariant
// values in the prologue (epi_late = 0), asked for right after the loop
// (1) and where the stores ask for them (2), and the kernel's own choice
// (none given), in the PTX simulator for sm_90 (racecheck, initcheck)
// against float64, every element of the output (poisoned with NaN first):
// rows whole tiles and not (the rows' masks), columns not whole tiles,
// through shared memory (epi_smem) and from the accumulator, one and two
// iterations, gelu's epilogue, TF32, bf16 and 3xTF32.
func TestEpiLateInSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds in the simulator")
	}
	for _, c := range []struct {
		m, k, n int
		gelu    bool
		prec    tile.Precision
		meta    tile.Meta
	}{
		{195, 33, 197, false, tile.PrecTF32, tile.Meta{"BLOCK_M": 128, "epi_smem": 1, "k_tail": 1, "num_stages": 3}},
		{256, 32, 197, false, tile.PrecTF32, tile.Meta{"BLOCK_M": 128, "epi_smem": 1, "k_tail": 1, "num_stages": 3}},
		{300, 33, 203, false, tile.PrecTF32, tile.Meta{"BLOCK_M": 256, "epi_smem": 1, "k_tail": 1, "num_stages": 2}},
		{195, 64, 256, true, tile.PrecTF32, tile.Meta{"BLOCK_M": 128, "num_stages": 3}},
		{195, 33, 197, false, tile.PrecBF16, tile.Meta{"BLOCK_M": 128, "num_stages": 3}},
		{256, 64, 197, false, tile.PrecTF32x3, tile.Meta{"BLOCK_M": 128, "num_stages": 3}},
	} {
		for _, late := range []int{-1, 0, 1, 2} {
			name := fmt.Sprintf("%dx%dx%d gelu=%v %v %v epi_late=%d", c.m, c.k, c.n, c.gelu, c.prec, c.meta, late)
			t.Run(name, func(t *testing.T) {
				tune := tile.Meta{"wgmma": 2, "BLOCK_N": 128, "num_warps": 8}
				for k, v := range c.meta {
					tune[k] = v
				}
				if late >= 0 {
					tune["epi_late"] = late
				}
				pc := peerCase{name: name, m: c.m, k: c.k, n: c.n, gelu: c.gelu}
				p, _ := simulatePeer(t, pc, c.prec, tune)
				got := p.args[len(p.args)-1]
				tol := map[tile.Precision]float64{tile.PrecTF32: 1e-2, tile.PrecBF16: 3e-2, tile.PrecTF32x3: 1e-5}[c.prec]
				bad := 0
				for r := 0; r < c.m; r++ {
					for j := 0; j < c.n; j++ {
						var ref float64
						for kk := 0; kk < c.k; kk++ {
							ref += float64(p.x[r*c.k+kk]) * float64(p.w[kk*c.n+j])
						}
						if c.gelu {
							ref = gelu64(ref + float64(p.b[j]))
						}
						if e := math.Abs(float64(got[r*c.n+j]) - ref); !(e <= tol*(1+math.Abs(ref))) {
							if bad < 3 {
								t.Errorf("(%d, %d): %v, want %v", r, j, got[r*c.n+j], ref)
							}
							bad++
						}
					}
				}
				require.Zero(t, bad, "elements wrong or unwritten")
			})
		}
	}
}

// TestEpiLateChoice: codegen's choice of epi_late for graphpass's
// products where no meta-parameter gives it (codegen's chooseEpiLate, as
// the plan's dump says): 1 where the output's rows are whole tiles (the
// store's mask is the same in every row), 2 where they are not and K is
// at most two iterations, none over a longer K with rows not whole tiles.
func TestEpiLateChoice(t *testing.T) {
	re := regexp.MustCompile(`epi_late (\d)`)
	for _, c := range []struct {
		pc   peerCase
		prec tile.Precision
		want string
	}{
		{peerCase{m: 4096, k: 32, n: 4097}, tile.PrecTF32, "1"},
		{peerCase{m: 4096, k: 4096, n: 4096}, tile.PrecTF32, "1"},
		{peerCase{m: 4096, k: 4096, n: 4096, gelu: true}, tile.PrecTF32, "1"},
		{peerCase{m: 4096, k: 768, n: 50257}, tile.PrecBF16, "1"},
		{peerCase{m: 4095, k: 32, n: 4097}, tile.PrecTF32, "2"},
		{peerCase{m: 4095, k: 33, n: 4097}, tile.PrecTF32x3, "2"},
		{peerCase{m: 1000, k: 1000, n: 1000}, tile.PrecTF32, ""},
		{peerCase{m: 4000, k: 768, n: 3072}, tile.PrecTF32, ""},
	} {
		c.pc.name = fmt.Sprintf("%dx%dx%d gelu=%v %v", c.pc.m, c.pc.k, c.pc.n, c.pc.gelu, c.prec)
		t.Run(c.pc.name, func(t *testing.T) {
			p, err := buildPeer(c.pc, graphpass.H200, c.prec, nil)
			require.NoError(t, err)
			spec := make([]int, len(p.k.Tile.Params))
			for i := range spec {
				spec[i] = 16
			}
			_, dump := compileDumped(t, p.k.Tile, spec)
			got := ""
			if m := re.FindStringSubmatch(dump); m != nil {
				got = m[1]
			}
			require.Equal(t, c.want, got, "epi_late chosen for %v", p.k.Tile.Meta)
		})
	}
}
