package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tilefuse/tilefuse/tile"
)

// TestOutput64ProductsInSimulator: a product whose output is past 32-bit
// offsets while its operands are not (a language model's logits; here the
// bound lowered below m·n) indexes its output in 64 bits and nothing else:
// its K loop is the 32-bit kernel's (the same tensor copies, 16-byte
// copies, wgmmas, epilogue loads and stores), its IR casts only the
// output's coordinates to i64, and in the PTX simulator for sm_90 (with
// racecheck and initcheck) every checked element is right against
// float64: the swapped wgmma form with A by tensor copies, GELU's epilogue
// through shared memory with its bias, A·Bᵀ, K split (atomic adds), bf16,
// and a batch's default tiling.
func TestOutput64ProductsInSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds in the simulator")
	}
	features := []string{"cp.async.bulk.tensor", "], 16, %r", "], 8, %r", "], 4, %r", "wgmma.mma_async", "mma.sync", "ld.shared.v4.f32", "st.global.v4.f32", "atom.global.add.f32"}
	for _, c := range []struct {
		pc   peerCase
		prec tile.Precision
		tune tile.Meta
	}{
		{peerCase{name: "matmul 512x96x256 swapped 256x128 tma", m: 512, k: 96, n: 256}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "tma": 1, "tma_b": 0, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}},
		{peerCase{name: "gelu 300x96x200 swapped 256x128 epi_smem", m: 300, k: 96, n: 200, gelu: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}},
		{peerCase{name: "A·Bᵀ 300x100x200 swapped 256x128", m: 300, k: 100, n: 200, tb: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}},
		{peerCase{name: "matmul 300x100x256 swapped 256x128 split 2", m: 300, k: 100, n: 256}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4, "SPLIT_K": 2}},
		{peerCase{name: "gelu 300x96x200 swapped bf16 256x128", m: 300, k: 96, n: 200, gelu: true}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}},
		{peerCase{name: "A·Bᵀ 130x72x100 mma.sync 64x64", m: 130, k: 72, n: 100, tb: true}, tile.PrecTF32,
			tile.Meta{"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3, "wgmma": 0}},
		{peerCase{name: "matmul 512x64x512 default tiling", m: 512, k: 64, n: 512}, tile.PrecTF32, nil},
	} {
		t.Run(c.pc.name, func(t *testing.T) {
			_, narrow := simulatePeer(t, c.pc, c.prec, c.tune)
			pc := c.pc
			pc.maxElements = pc.m*pc.n - 1 // the output past it, A and B within
			require.Less(t, max(pc.m*pc.k, pc.k*pc.n), pc.maxElements, "the case's operands must fit the bound")
			p, sim := simulatePeer(t, pc, c.prec, c.tune)
			ir := p.k.Tile.String()
			casts := strings.Count(ir, "-> i64") + strings.Count(ir, "xi64>")
			require.Positive(t, casts, "no 64-bit index in\n%s", ir)
			for _, line := range strings.Split(ir, "\n") {
				if strings.Contains(line, "i64") && (strings.Contains(line, "addptr %") && !strings.Contains(line, "%out")) {
					// the operands' pointers take i32 offsets
					require.NotContains(t, line, "%in", "an operand indexed in 64 bits: %s", line)
				}
			}
			for _, f := range features {
				require.Equal(t, strings.Contains(narrow.Last.PTX, f), strings.Contains(sim.Last.PTX, f), "%q in the 32-bit kernel's PTX and the 64-bit one's", f)
			}
			maxRel, normRel, bad := p.check(pc, p.args[len(p.args)-1], peerTol(c.prec))
			require.Zero(t, bad, "max %.2g norm %.2g", maxRel, normRel)
			t.Logf("max %.2g norm %.2g", maxRel, normRel)
		})
	}
}
