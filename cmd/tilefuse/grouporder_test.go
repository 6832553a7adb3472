package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// TestGroupedTileOrder: products whose tiles are taken in groups of
// GROUP_M rows (one axis of programs) against float64, the output
// poisoned with NaN: in the reference interpreter at tile counts that
// leave a short last group, masked rows and columns, an epilogue, and
// GROUP_M at or past the rows of tiles (the 2-D grid kept); and in ptxsim
// (racecheck, initcheck) in the H200's swapped form, where the tensor
// copies' tile origins come from the grouped order.
func TestGroupedTileOrder(t *testing.T) {
	small := tile.Meta{"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16, "num_warps": 4}
	for _, c := range []struct {
		pc   peerCase
		tune tile.Meta
		flat bool // a grid of one axis
	}{
		{peerCase{name: "300x40x200 GROUP_M 3", m: 300, k: 40, n: 200}, metaWith(small, "GROUP_M", 3), true},
		{peerCase{name: "gelu 300x40x200 GROUP_M 4", m: 300, k: 40, n: 200, gelu: true}, metaWith(small, "GROUP_M", 4), true},
		{peerCase{name: "256x33x96 GROUP_M 2", m: 256, k: 33, n: 96}, metaWith(small, "GROUP_M", 2), true},
		{peerCase{name: "96x32x64 GROUP_M 3 (the rows)", m: 96, k: 32, n: 64}, metaWith(small, "GROUP_M", 3), false},
		{peerCase{name: "96x32x64 GROUP_M 1", m: 96, k: 32, n: 64}, metaWith(small, "GROUP_M", 1), false},
	} {
		t.Run(c.pc.name, func(t *testing.T) {
			p, err := buildPeer(c.pc, graphpass.CPU(2), tile.PrecIEEE, c.tune)
			require.NoError(t, err)
			gm, gn := tile.CDiv(c.pc.m, 32), tile.CDiv(c.pc.n, 32)
			if c.flat {
				require.Equal(t, tile.Grid{gm * gn, 1}, p.k.Grid)
			} else {
				require.Equal(t, tile.Grid{gm, gn}, p.k.Grid)
			}
			require.NoError(t, interp.Interpret(p.k.Tile, p.k.Grid, p.anyArgs()...))
			maxRel, normRel, bad := p.check(c.pc, p.args[len(p.args)-1], 1e-5)
			require.Zero(t, bad, "max %.2g norm %.2g", maxRel, normRel)
		})
	}
	// GROUP_M under 1 is an error of the kernel's writing, not a silent
	// default
	_, err := buildPeer(peerCase{name: "GROUP_M 0", m: 96, k: 32, n: 64}, graphpass.CPU(2), tile.PrecIEEE, metaWith(small, "GROUP_M", 0))
	require.ErrorContains(t, err, "GROUP_M = 0")
	if testing.Short() {
		t.Skip("the simulator's cases take seconds")
	}
	big := tile.Meta{"wgmma": 2, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4, "GROUP_M": 3}
	for _, pc := range []peerCase{
		{name: "sim 1024x96x256 GROUP_M 3", m: 1024, k: 96, n: 256},
		{name: "sim gelu 1000x96x384 GROUP_M 3", m: 1000, k: 96, n: 384, gelu: true},
	} {
		t.Run(pc.name, func(t *testing.T) {
			p, err := buildPeer(pc, graphpass.H200, tile.PrecTF32, big)
			require.NoError(t, err)
			require.Equal(t, tile.Grid{tile.CDiv(pc.m, 256) * tile.CDiv(pc.n, 128), 1}, p.k.Grid)
			args := p.anyArgs()
			_, dump := compileDumped(t, p.k.Tile, ptxsim.Spec(p.k.Tile, args))
			require.True(t, strings.Contains(dump, "A by one tensor copy") && strings.Contains(dump, "B by one tensor copy"), "the tensor copies in the grouped order:\n%s", dump)
			sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true}
			require.NoError(t, sim.Launch(p.k.Tile, p.k.Grid, args...))
			maxRel, normRel, bad := p.check(pc, p.args[len(p.args)-1], peerTol(tile.PrecTF32))
			require.Zero(t, bad, "max %.2g norm %.2g", maxRel, normRel)
		})
	}
}
