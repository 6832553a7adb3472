package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// TestRealignedBInSimulator: the swapped TF32 form's realigned copies of
// B (codegen/realign.go) where B's rows are not 16-byte aligned (N mod 4
// = 1, 2, 3), run in the PTX simulator for sm_90 (memcheck: no read past
// B's end; racecheck, initcheck) against peer's float64 check: the last
// tile's columns 1 to 5 wide and 127 (the chunks' counts where the
// group's own columns are all masked but the group before's are not), K
// with a tail (k_tail: the last iteration's copies past its steps left
// out), more iterations than stages, 64, 128 and 256 rows. Where K is a
// multiple of 4 every copy is 16 bytes wide (B's were 4 or 8 before);
// realign_b = 0 keeps the narrow copies.
func TestRealignedBInSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds in the simulator")
	}
	meta := func(bm, stages int, extra tile.Meta) tile.Meta {
		m := tile.Meta{"wgmma": 2, "epi_smem": 1, "BLOCK_M": bm, "BLOCK_N": 128, "num_warps": 8, "num_stages": stages}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, c := range []struct {
		m, k, n int
		bm      int
		stages  int
		extra   tile.Meta
		gelu    bool
	}{
		{130, 64, 129, 128, 3, nil, false},
		{130, 64, 130, 128, 3, nil, false},
		{130, 64, 131, 128, 3, nil, false},
		{130, 64, 133, 128, 3, nil, false},
		{130, 64, 255, 128, 3, nil, false},
		{195, 33, 197, 128, 3, tile.Meta{"k_tail": 1}, false},
		{195, 33, 197, 128, 3, tile.Meta{"k_tail": 1, "max_registers": 128}, false},
		{300, 33, 199, 256, 2, tile.Meta{"k_tail": 1}, false},
		{130, 200, 198, 128, 3, nil, true},
		{150, 100, 131, 64, 4, nil, false},
		{130, 50, 129, 128, 3, tile.Meta{"k_tail": 1}, false},
	} {
		for _, off := range []bool{false, true} {
			name := fmt.Sprintf("%dx%dx%d %dx128 %d stages %v", c.m, c.k, c.n, c.bm, c.stages, c.extra)
			tune := meta(c.bm, c.stages, c.extra)
			if off {
				name += " realign_b=0"
				tune["realign_b"] = 0
			}
			t.Run(name, func(t *testing.T) {
				pc := peerCase{name: name, m: c.m, k: c.k, n: c.n, gelu: c.gelu}
				p, err := buildPeer(pc, graphpass.H200, tile.PrecTF32, tune)
				require.NoError(t, err)
				args := make([]any, len(p.args))
				for i, a := range p.args {
					args[i] = a
				}
				sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true}
				require.NoError(t, sim.Launch(p.k.Tile, p.k.Grid, args...))
				ptx := sim.Last.PTX
				narrow := regexp.MustCompile(`\], [48], %r`).MatchString(ptx)
				// the 33rd chunk a row: a predicated 16-byte copy
				extra := regexp.MustCompile(`@%p\d+ cp\.async\.cg\.shared\.global \[[^]]+\], \[[^]]+\], 16, %r`).MatchString(ptx)
				if off {
					require.True(t, narrow, "realign_b = 0: no narrow copies of B")
					require.False(t, extra, "realign_b = 0: a row's 33rd chunk")
				} else {
					require.True(t, extra, "no 33rd chunk")
					if c.k%4 == 0 {
						require.False(t, narrow, "a copy narrower than 16 bytes")
					}
					require.Contains(t, ptx, "shfl.sync.up.b32", "the chunks' counts")
				}
				maxRel, normRel, bad := p.check(pc, p.args[len(p.args)-1], peerTol(tile.PrecTF32))
				require.Zero(t, bad, "max %.2g norm %.2g", maxRel, normRel)
				t.Logf("max %.2g norm %.2g (%d cp.async)", maxRel, normRel, strings.Count(ptx, "cp.async.c"))
			})
		}
	}
}
