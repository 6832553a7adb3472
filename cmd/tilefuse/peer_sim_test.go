package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// TestPeerKernelsInSimulator: peer's kernels as the H200 runs them under
// the meta-parameters the GPU round measures (the wgmma forms), at small
// shapes that are not multiples of the tiles, run in the PTX simulator for
// sm_90 with racecheck and initcheck, pass peer's float64 check (the gelu
// epilogue runs on the accumulator of Cᵀ in the swapped form).
func TestPeerKernelsInSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds in the simulator")
	}
	for _, c := range []struct {
		pc   peerCase
		prec tile.Precision
		tune tile.Meta
	}{
		{peerCase{"gelu 300x96x200 swapped 256x128", 300, 96, 200, true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}},
		{peerCase{"matmul 130x70x90 swapped 128x64", 130, 70, 90, false}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}},
		{peerCase{"gelu 300x96x200 swapped bf16 256x128", 300, 96, 200, true}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}},
		{peerCase{"gelu 150x100x200 swapped 3xTF32 64x128", 150, 100, 200, true}, tile.PrecTF32x3,
			tile.Meta{"wgmma": 2, "BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8, "num_stages": 6}},
	} {
		t.Run(c.pc.name, func(t *testing.T) {
			p, err := buildPeer(c.pc, graphpass.H200, c.prec, c.tune)
			require.NoError(t, err)
			args := make([]any, len(p.args))
			for i, a := range p.args {
				args[i] = a
			}
			sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true}
			require.NoError(t, sim.Launch(p.k.Tile, p.k.Grid, args...))
			require.Contains(t, sim.Last.PTX, "wgmma.mma_async")
			maxRel, normRel, bad := p.check(c.pc, p.args[len(p.args)-1], peerTol(c.prec))
			require.Zero(t, bad, "max %.2g norm %.2g", maxRel, normRel)
			t.Logf("max %.2g norm %.2g", maxRel, normRel)
		})
	}
}
