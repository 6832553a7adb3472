package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tilefuse/tilefuse/tile"
)

// TestRealignedBInSimulator: the swapped TF32 form's realigned copies of
// B (codegen/realign.go, realign_b = 1) where B's rows are not 16-byte aligned (N mod 4
// = 1, 2, 3), run in the PTX simulator for sm_90 (memcheck: no read past
// B's end; racecheck, initcheck) against peer's float64 check: the last
// tile's columns 1 to 5 wide and 127 (the chunks' counts where the
// group's own columns are all masked but the group before's are not), K
// with a tail (k_tail: the last iteration's copies past its steps left
// out), more iterations than stages, 64, 128 and 256 rows. Where K is a
// multiple of 4 every copy is 16 bytes wide (B's were 4 or 8 before)
// but for the 33rd chunk's words and a boundary tile's partial chunks,
// which are narrow copies on paths of their own; without realign_b = 1 the
// copies are narrow.
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
		// the wave model's form for vocabulary projections (partialColumns):
		// 256×128, 4 stages, more iterations than stages, gelu's epilogue
		{300, 200, 203, 256, 4, nil, true},
		{300, 200, 202, 256, 4, nil, false},
	} {
		for _, off := range []bool{false, true} {
			name := fmt.Sprintf("%dx%dx%d %dx128 %d stages %v", c.m, c.k, c.n, c.bm, c.stages, c.extra)
			tune := meta(c.bm, c.stages, c.extra)
			if off {
				name += " by default"
			} else {
				tune["realign_b"] = 1
			}
			t.Run(name, func(t *testing.T) {
				pc := peerCase{name: name, m: c.m, k: c.k, n: c.n, gelu: c.gelu}
				p, sim := simulatePeer(t, pc, tile.PrecTF32, tune)
				ptx := sim.Last.PTX
				narrow := regexp.MustCompile(`\], [48], %r`)
				// each copy of B: the fast path (a warp without a partial
				// chunk) issues a 16-byte copy a group and the 33rd chunk's
				// words by predicated 8- and 4-byte copies; the slow path
				// (a boundary tile's warp) comes after it
				fastRe := regexp.MustCompile(`(?s)@%p\d+ bra\.uni (\$L_realign_slow_\d+);\n(.*?)bra\.uni (\$L_realign_done_\d+);\n(.*?)\n(\$L_realign_done_\d+):`)
				paths := fastRe.FindAllStringSubmatch(ptx, -1)
				if off {
					require.True(t, narrow.MatchString(ptx), "by default: no narrow copies of B")
					require.Empty(t, paths, "by default: realigned copies")
					require.NotContains(t, ptx, "vote.sync.any.pred")
				} else {
					require.Len(t, paths, 3, "the prologue's and two iterations' copies of B: fast and slow paths")
					for _, m := range paths {
						require.Equal(t, m[3], m[5], "the slow path's end")
						require.True(t, strings.HasPrefix(m[4], m[1][:len(m[1])]+":"), "the slow path after the fast one")
						fast := m[2]
						require.Equal(t, 4, strings.Count(fast, ", 16, %r"), "16-byte copies a thread on the fast path: 4 rows' groups")
						// from one base register in global memory (the
						// phase taken off once) into two in shared memory
						// (the chunks, the 33rd chunks)
						srcs, dsts := map[string]bool{}, map[string]bool{}
						for _, m := range regexp.MustCompile(`cp\.async\.c[ag]\.shared\.global \[(%r\d+)(?:\+\d+)?\], \[(%rd\d+)(?:\+\d+)?\]`).FindAllStringSubmatch(fast, -1) {
							dsts[m[1]], srcs[m[2]] = true, true
						}
						require.Len(t, srcs, 1, "global base registers of B's copies")
						require.Len(t, dsts, 2, "shared base registers of B's copies")
						for _, line := range strings.Split(fast, "\n") {
							if strings.Contains(line, "cp.async.ca") {
								require.True(t, strings.HasPrefix(strings.TrimSpace(line), "@%p"), "an unpredicated narrow copy on the fast path: %s", line)
							}
						}
					}
					rest := fastRe.ReplaceAllString(ptx, "")
					if c.k%4 == 0 {
						require.False(t, narrow.MatchString(rest), "a copy narrower than 16 bytes outside B's paths")
					}
					require.Contains(t, ptx, "shfl.sync.up.b32", "the chunks' counts")
					require.Contains(t, ptx, "vote.sync.any.pred", "the warp's slow path")
				}
				maxRel, normRel, bad := p.check(pc, p.args[len(p.args)-1], peerTol(tile.PrecTF32))
				require.Zero(t, bad, "max %.2g norm %.2g", maxRel, normRel)
				t.Logf("max %.2g norm %.2g (%d cp.async)", maxRel, normRel, strings.Count(ptx, "cp.async.c"))
			})
		}
	}
}
