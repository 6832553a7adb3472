package main

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tilefuse/tilefuse/codegen"
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
		wide bool // every copy 16 bytes (the strides and sizes are multiples of 4)
	}{
		{peerCase{name: "gelu 300x96x200 swapped 256x128", m: 300, k: 96, n: 200, gelu: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "matmul 130x70x90 swapped 128x64", m: 130, k: 70, n: 90}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}, false},
		{peerCase{name: "gelu 300x96x200 swapped bf16 256x128", m: 300, k: 96, n: 200, gelu: true}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "gelu 150x100x200 swapped 3xTF32 64x128", m: 150, k: 100, n: 200, gelu: true}, tile.PrecTF32x3,
			tile.Meta{"wgmma": 2, "BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8, "num_stages": 6}, false},
		// 3xTF32 at the 4096³ default's tile (one block accumulator), and
		// with x3_blocks = 2 (a block per unrolled iteration)
		{peerCase{name: "matmul 260x160x136 swapped 3xTF32 128x128", m: 260, k: 160, n: 136}, tile.PrecTF32x3,
			tile.Meta{"wgmma": 2, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "matmul 260x160x136 swapped 3xTF32 128x128 x3_blocks 2", m: 260, k: 160, n: 136}, tile.PrecTF32x3,
			tile.Meta{"wgmma": 2, "x3_blocks": 2, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "matmul 260x200x136 swapped 3xTF32 128x128 x3_span 1", m: 260, k: 200, n: 136}, tile.PrecTF32x3,
			tile.Meta{"wgmma": 2, "x3_span": 1, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "gelu 150x300x200 swapped 3xTF32 64x128 x3_span 4 k_tail", m: 150, k: 300, n: 200, gelu: true}, tile.PrecTF32x3,
			tile.Meta{"wgmma": 2, "x3_span": 4, "k_tail": 1, "BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8, "num_stages": 6}, false},
		// transposed operands (kept in shared memory in their memory order,
		// 16-byte copies where the strides allow, 8 or 4 where not)
		{peerCase{name: "Aᵀ·B 196x136x100 128x128", m: 196, k: 100, n: 136, ta: true}, tile.PrecTF32,
			tile.Meta{"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3, "wgmma": 0}, true},
		{peerCase{name: "Aᵀ·B 131x70x90 64x64", m: 131, k: 70, n: 90, ta: true}, tile.PrecTF32,
			tile.Meta{"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3, "wgmma": 0}, false},
		{peerCase{name: "A·Bᵀ 150x200x100 128x128", m: 150, k: 100, n: 200, tb: true}, tile.PrecTF32,
			tile.Meta{"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3, "wgmma": 0}, true},
		{peerCase{name: "A·Bᵀ 150x90x66 64x64", m: 150, k: 66, n: 90, tb: true}, tile.PrecTF32,
			tile.Meta{"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3, "wgmma": 0}, false},
		{peerCase{name: "Aᵀ·Bᵀ bf16 130x72x100 64x64", m: 130, k: 100, n: 72, ta: true, tb: true}, tile.PrecBF16,
			tile.Meta{"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3, "wgmma": 0}, false},
		{peerCase{name: "Aᵀ·Bᵀ 3xTF32 130x72x100 64x64", m: 130, k: 100, n: 72, ta: true, tb: true}, tile.PrecTF32x3,
			tile.Meta{"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3, "wgmma": 0}, false},
		{peerCase{name: "A·Bᵀ 300x200x100 swapped 256x128", m: 300, k: 100, n: 200, tb: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, true},
		// bf16 with B stored [n][k]: B's tile [n][k] by 16-byte copies,
		// its fragments read in pairs of k (one 8-byte load each), 4- and
		// 8-byte copies where k is not a multiple of 4
		{peerCase{name: "A·Bᵀ 300x100x200 swapped bf16 256x128", m: 300, k: 100, n: 200, tb: true}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}, true},
		{peerCase{name: "A·Bᵀ gelu 430x96x200 swapped bf16 192x128", m: 430, k: 96, n: 200, tb: true, gelu: true}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "BLOCK_M": 192, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, true},
		{peerCase{name: "A·Bᵀ 130x70x90 swapped bf16 128x64", m: 130, k: 70, n: 90, tb: true}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}, false},
		{peerCase{name: "A·Bᵀ 130x200x90 swapped bf16 256x128 split 2", m: 130, k: 200, n: 90, tb: true}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3, "SPLIT_K": 2}, false},
		// wgmma's A (Bᵀ's tile) read through a descriptor (wg_ss = 1)
		{peerCase{name: "A·Bᵀ 300x200x100 swapped 256x128 wg_ss", m: 300, k: 100, n: 200, tb: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "wg_ss": 1, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, true},
		{peerCase{name: "A·Bᵀ 130x150x70 swapped 128x64 wg_ss", m: 130, k: 150, n: 70, tb: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "wg_ss": 1, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}, false},
		// the copies of a later stage issued before the wgmmas (early_copies
		// = 1; by default after them)
		{peerCase{name: "matmul 300x200x100 swapped 256x128 early_copies", m: 300, k: 100, n: 200}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "early_copies": 1, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, true},
		{peerCase{name: "gelu 130x150x70 swapped 128x64 early_copies", m: 130, k: 150, n: 70, gelu: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "early_copies": 1, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}, false},
		// A's tile of each stage by one tensor copy (tma = 1) where A's
		// load has no mask; masked, the copies stay cp.async; B's by
		// cp.async (tma_b = 0: TestTensorCopiesOfB has B's tensor copies)
		{peerCase{name: "matmul 512x96x256 swapped 256x128 tma", m: 512, k: 96, n: 256}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "tma": 1, "tma_b": 0, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, true},
		{peerCase{name: "gelu 256x160x128 swapped 128x64 tma", m: 256, k: 160, n: 128, gelu: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "tma": 1, "tma_b": 0, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}, true},
		{peerCase{name: "A·Bᵀ 256x64x200 swapped 256x128 tma", m: 256, k: 64, n: 200, tb: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "tma": 1, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "matmul 300x96x256 swapped 256x128 tma rows masked", m: 300, k: 96, n: 256}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "tma": 1, "tma_b": 0, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, true},
		{peerCase{name: "gelu 200x64x136 swapped 192x128 tma rows masked", m: 200, k: 64, n: 136, gelu: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "tma": 1, "BLOCK_M": 192, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "matmul 300x100x256 swapped 256x128 tma declined (tma_k = 0)", m: 300, k: 100, n: 256}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "tma": 1, "tma_k": 0, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "matmul 300x100x256 swapped 256x128 tma, A masked along k: a map of k columns", m: 300, k: 100, n: 256}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "tma": 1, "tma_b": 0, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		// bf16 with A's tiles by tensor copies (tma = 1, asked): the
		// conversion pass waits for them, then rounds the f32 tile into the
		// stage's bf16 tile; B by cp.async; rows masked, K masked (a map of
		// K columns) and B stored [n][k] (split K keeps cp.async: its
		// parts start where no map bounds them)
		{peerCase{name: "matmul 512x96x256 swapped bf16 256x128 tma", m: 512, k: 96, n: 256}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "tma": 1, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, true},
		{peerCase{name: "gelu 300x100x200 swapped bf16 256x128 tma masked", m: 300, k: 100, n: 200, gelu: true}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "tma": 1, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}, false},
		{peerCase{name: "A·Bᵀ 430x96x200 swapped bf16 192x128 tma", m: 430, k: 96, n: 200, tb: true}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "tma": 1, "BLOCK_M": 192, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, true},
		{peerCase{name: "matmul 130x72x90 swapped bf16 128x64 tma", m: 130, k: 72, n: 90}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "tma": 1, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}, false},
		{peerCase{name: "A·Bᵀ 150x100x200 swapped 3xTF32 64x128", m: 150, k: 100, n: 200, tb: true}, tile.PrecTF32x3,
			tile.Meta{"wgmma": 2, "BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8, "num_stages": 6}, true},
		// K split over program axis 2, the parts added atomically (the
		// last part shorter than the others)
		{peerCase{name: "Aᵀ·B 131x90x200 split 3 128x128", m: 131, k: 200, n: 90, ta: true}, tile.PrecTF32,
			tile.Meta{"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3, "wgmma": 0, "SPLIT_K": 3}, false},
		// the wave model's choices (graphpass/waves.go): the swapped form
		// with K split (the atomic adds from the accumulator of Cᵀ), and
		// its 64×128 tile
		{peerCase{name: "matmul 300x200x200 swapped 256x128 split 3", m: 300, k: 200, n: 200}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4, "SPLIT_K": 3}, true},
		{peerCase{name: "A·Bᵀ 130x200x90 swapped 256x128 split 2", m: 130, k: 200, n: 90, tb: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4, "SPLIT_K": 2}, false},
		{peerCase{name: "matmul 300x136x200 swapped bf16 256x128 split 2", m: 300, k: 136, n: 200}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4, "SPLIT_K": 2}, true},
		// tiles of 192 rows (three times a power of two: 4096×768 in 132
		// tiles), 430 rows: two tiles and 46 rows
		{peerCase{name: "matmul 430x70x200 swapped 192x128", m: 430, k: 70, n: 200}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "BLOCK_M": 192, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "gelu 430x96x200 swapped 192x128", m: 430, k: 96, n: 200, gelu: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "BLOCK_M": 192, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "A·Bᵀ 430x100x200 swapped 192x128", m: 430, k: 100, n: 200, tb: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "BLOCK_M": 192, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, true},
		{peerCase{name: "gelu 430x96x200 swapped bf16 192x128", m: 430, k: 96, n: 200, gelu: true}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "BLOCK_M": 192, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "matmul 430x200x200 swapped 192x128 split 2", m: 430, k: 200, n: 200}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "BLOCK_M": 192, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4, "SPLIT_K": 2}, true},
		{peerCase{name: "matmul 430x70x200 mma.sync 192x128", m: 430, k: 70, n: 200}, tile.PrecTF32,
			tile.Meta{"wgmma": 0, "BLOCK_M": 192, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}, false},
		// (Aᵀ's copies at 192 wide are not all 16 bytes: the wave model
		// does not weigh these)
		{peerCase{name: "Aᵀ·B 430x200x100 mma.sync 192x128", m: 430, k: 100, n: 200, ta: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 0, "BLOCK_M": 192, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}, false},
		{peerCase{name: "Aᵀ·B 200x430x100 mma.sync 128x192", m: 200, k: 100, n: 430, ta: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 0, "BLOCK_M": 128, "BLOCK_N": 192, "num_warps": 8, "num_stages": 3}, false},
		{peerCase{name: "Aᵀ·B 131x90x430 mma.sync 128x192 split 3", m: 131, k: 430, n: 90, ta: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 0, "BLOCK_M": 128, "BLOCK_N": 192, "num_warps": 8, "num_stages": 3, "SPLIT_K": 3}, false},
		{peerCase{name: "Aᵀ·B bf16 430x200x100 mma.sync 192x128", m: 430, k: 100, n: 200, ta: true}, tile.PrecBF16,
			tile.Meta{"wgmma": 0, "BLOCK_M": 192, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}, false},
		{peerCase{name: "matmul 130x70x200 swapped 64x128", m: 130, k: 70, n: 200}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		// the model's choices below a wave of 128×128 tiles (fewTiles):
		// TF32 at 64 columns a CTA (4 warps, 4 stages), the output not
		// whole tiles of columns through shared memory (epi_smem), and
		// bf16 at 64×128 (8 warps, 4 stages)
		{peerCase{name: "gelu 300x150x200 swapped 128x64 epi_smem", m: 300, k: 150, n: 200, gelu: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 4}, false},
		{peerCase{name: "matmul 256x160x192 swapped 128x64", m: 256, k: 160, n: 192}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 4}, true},
		{peerCase{name: "matmul 130x150x200 swapped bf16 64x128 epi_smem", m: 130, k: 150, n: 200}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "gelu 128x96x256 swapped bf16 64x128", m: 128, k: 96, n: 256, gelu: true}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, true},
		// under a quarter wave at TF32: 64×64 at 4 warps; NT at 128×64
		{peerCase{name: "matmul 130x100x150 swapped 64x64", m: 130, k: 100, n: 150}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 4}, false},
		{peerCase{name: "A·Bᵀ 150x100x130 swapped 128x64", m: 150, k: 100, n: 130, tb: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 4}, false},
		// Aᵀ·B in the swapped form with A staged (wg_stage = 1): copied
		// along m, 16 bytes wide where m's stride allows (8 at 130, 4 at
		// 131), and transposed by the copying threads into the K-major tile
		{peerCase{name: "Aᵀ·B 196x100x136 swapped staged 128x128", m: 196, k: 100, n: 136, ta: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "wg_stage": 1, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, true},
		{peerCase{name: "Aᵀ·B gelu 130x70x90 swapped staged 64x64", m: 130, k: 70, n: 90, ta: true, gelu: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "wg_stage": 1, "BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}, false},
		{peerCase{name: "Aᵀ·B 131x200x70 swapped staged 192x128 split 3", m: 131, k: 200, n: 70, ta: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "wg_stage": 1, "BLOCK_M": 192, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3, "SPLIT_K": 3}, false},
		{peerCase{name: "Aᵀ·B gelu 300x96x200 swapped staged bf16 256x128", m: 300, k: 96, n: 200, ta: true, gelu: true}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "wg_stage": 1, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}, true},
		{peerCase{name: "Aᵀ·B 130x100x150 swapped staged 3xTF32 64x128", m: 130, k: 100, n: 150, ta: true}, tile.PrecTF32x3,
			tile.Meta{"wgmma": 2, "wg_stage": 1, "BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		// graphpass's 3xTF32 weight gradients: staged, K in 4 parts; the
		// heads' (64 columns) at 64×64, 6 stages
		{peerCase{name: "Aᵀ·B 130x300x64 swapped staged 3xTF32 64x64", m: 130, k: 300, n: 64, ta: true}, tile.PrecTF32x3,
			tile.Meta{"wgmma": 2, "wg_stage": 1, "BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 6}, false},
		{peerCase{name: "Aᵀ·B 130x600x150 swapped staged 3xTF32 64x128 split 4", m: 130, k: 600, n: 150, ta: true}, tile.PrecTF32x3,
			tile.Meta{"wgmma": 2, "wg_stage": 1, "BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4, "SPLIT_K": 4}, false},
		// the epilogue through shared memory (epi_smem = 1): the
		// accumulator of Cᵀ stored into the stages' memory and read back
		// row-major, 16-byte loads and stores where the columns allow (n a
		// multiple of 4), 8 bytes at n = 90
		{peerCase{name: "gelu 300x96x200 swapped 256x128 epi_smem", m: 300, k: 96, n: 200, gelu: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "gelu 300x96x200 swapped bf16 256x128 epi_smem", m: 300, k: 96, n: 200, gelu: true}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "matmul 130x70x90 swapped 128x64 epi_smem", m: 130, k: 70, n: 90}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}, false},
		{peerCase{name: "A·Bᵀ 430x100x200 swapped 192x128 epi_smem", m: 430, k: 100, n: 200, tb: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "BLOCK_M": 192, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, true},
		{peerCase{name: "gelu 430x96x200 swapped bf16 192x128 epi_smem", m: 430, k: 96, n: 200, gelu: true}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "BLOCK_M": 192, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "matmul 300x200x200 swapped 256x128 split 3 epi_smem", m: 300, k: 200, n: 200}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4, "SPLIT_K": 3}, true},
		{peerCase{name: "gelu 150x100x200 swapped 3xTF32 64x128 epi_smem", m: 150, k: 100, n: 200, gelu: true}, tile.PrecTF32x3,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8, "num_stages": 6}, false},
		{peerCase{name: "Aᵀ·B gelu 130x70x92 swapped staged 64x64 epi_smem", m: 130, k: 70, n: 92, ta: true, gelu: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "wg_stage": 1, "epi_smem": 1, "BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}, false},
		// store-bound products (issue 10's odd shapes scaled down; graphpass
		// storeBound: 128×128, 3 stages, epi_smem): K = 33 is one step of
		// 32 and a 1-wide tail, K = 50 a step and 18; the accumulator read
		// back in runs of 1 (n = 197, 129: lanes along the columns), 2
		// (n = 130) or 4 (n = 196)
		{peerCase{name: "matmul 195x33x197 swapped 128x128 epi_smem", m: 195, k: 33, n: 197}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}, false},
		{peerCase{name: "matmul 130x50x129 swapped 128x128 epi_smem", m: 130, k: 50, n: 129}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}, false},
		{peerCase{name: "matmul 200x50x130 swapped 128x128 epi_smem", m: 200, k: 50, n: 130}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}, false},
		{peerCase{name: "matmul 300x64x196 swapped 128x128 epi_smem", m: 300, k: 64, n: 196}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}, true},
		{peerCase{name: "matmul 195x33x197 swapped 256x128 epi_smem", m: 195, k: 33, n: 197}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "matmul 195x33x197 swapped 64x128 epi_smem", m: 195, k: 33, n: 197}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}, false},
		// where the output's rows are 16-byte aligned the store-bound
		// choice stores from the accumulator (storeBoundDirect), registers
		// capped at 128: K = 33 and 50 under rows of 196 and 132
		{peerCase{name: "matmul 195x33x196 swapped 128x128 capped", m: 195, k: 33, n: 196}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "max_registers": 128, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}, false},
		{peerCase{name: "matmul 130x50x132 swapped 128x128 capped", m: 130, k: 50, n: 132}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "max_registers": 128, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}, false},
		// k_tail = 1: the last iteration's k steps past K skipped (K = 33:
		// one of four; 50: three; 100: one; 3xTF32 and warp-specialised too)
		{peerCase{name: "matmul 195x33x197 swapped 128x128 epi_smem k_tail", m: 195, k: 33, n: 197}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "k_tail": 1, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}, false},
		{peerCase{name: "matmul 130x50x129 swapped 128x128 epi_smem k_tail", m: 130, k: 50, n: 129}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "k_tail": 1, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}, false},
		// the store-bound choices, which take k_tail (graphpass
		// storeBoundMeta): the last iteration's copies past its k steps
		// left out too, K under one step (20) and a step and one (33),
		// from the accumulator and through shared memory at 256 rows
		{peerCase{name: "matmul 195x20x196 swapped 128x128 capped k_tail", m: 195, k: 20, n: 196}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "max_registers": 128, "k_tail": 1, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}, false},
		{peerCase{name: "matmul 195x33x196 swapped 128x128 capped k_tail", m: 195, k: 33, n: 196}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "max_registers": 128, "k_tail": 1, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}, false},
		{peerCase{name: "matmul 300x33x197 swapped 256x128 epi_smem k_tail 2 stages", m: 300, k: 33, n: 197}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "epi_smem": 1, "k_tail": 1, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 2}, false},
		{peerCase{name: "gelu 150x100x200 swapped 3xTF32 64x128 k_tail", m: 150, k: 100, n: 200, gelu: true}, tile.PrecTF32x3,
			tile.Meta{"wgmma": 2, "k_tail": 1, "BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8, "num_stages": 6}, false},
		{peerCase{name: "matmul 200x264x136 swapped ws 256x128 k_tail", m: 200, k: 264, n: 136}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "ws": 1, "k_tail": 1, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		// warp-specialised (ws = 1): a producer of num_warps more warps
		// copies the stages, the consumers run the wgmmas, full and empty
		// mbarriers between them (M, N, K no multiples of the tile; past
		// K = 72 more iterations than stages, so that stages are refilled
		// once their consumers released them)
		{peerCase{name: "matmul 200x72x136 swapped ws 256x128", m: 200, k: 72, n: 136}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "ws": 1, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "matmul 200x264x136 swapped ws 256x128", m: 200, k: 264, n: 136}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "ws": 1, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "matmul 200x72x136 swapped ws bf16 256x128", m: 200, k: 72, n: 136}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "ws": 1, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "matmul 200x264x136 swapped ws bf16 256x128", m: 200, k: 264, n: 136}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "ws": 1, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		// a producer as wide as the consumers (ws_warps = 8), in their layouts
		{peerCase{name: "gelu 200x264x136 swapped ws 8+8 warps 128x128", m: 200, k: 264, n: 136, gelu: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "ws": 1, "ws_warps": 8, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "matmul 200x264x136 swapped ws bf16 8+8 warps 128x128", m: 200, k: 264, n: 136}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "ws": 1, "ws_warps": 8, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, false},
		{peerCase{name: "gelu 300x160x200 swapped ws 128x64", m: 300, k: 160, n: 200, gelu: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "ws": 1, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}, true},
		{peerCase{name: "gelu 430x200x200 swapped ws bf16 192x128 lag 1", m: 430, k: 200, n: 200, gelu: true}, tile.PrecBF16,
			tile.Meta{"wgmma": 2, "ws": 1, "ws_lag": 1, "BLOCK_M": 192, "BLOCK_N": 128, "num_warps": 8, "num_stages": 5}, false},
		{peerCase{name: "A·Bᵀ 150x300x200 swapped ws 3xTF32 64x128", m: 150, k: 300, n: 200, tb: true}, tile.PrecTF32x3,
			tile.Meta{"wgmma": 2, "ws": 1, "BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8, "num_stages": 6}, true},
		{peerCase{name: "Aᵀ·B 196x300x136 swapped ws staged 128x128", m: 196, k: 300, n: 136, ta: true}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "ws": 1, "wg_stage": 1, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}, true},
		{peerCase{name: "matmul 300x600x200 swapped ws 256x128 split 3 epi_smem", m: 300, k: 600, n: 200}, tile.PrecTF32,
			tile.Meta{"wgmma": 2, "ws": 1, "epi_smem": 1, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4, "SPLIT_K": 3}, true},
	} {
		t.Run(c.pc.name, func(t *testing.T) {
			p, sim := simulatePeer(t, c.pc, c.prec, c.tune)
			args := p.anyArgs()
			inst := "mma.sync"
			if c.tune["wgmma"] != 0 {
				inst = "wgmma.mma_async"
			}
			require.True(t, strings.Contains(sim.Last.PTX, inst), "no %s", inst)
			if c.tune["wgmma"] == 2 {
				require.True(t, strings.Contains(sim.Last.PTX, fmt.Sprintf("wgmma.mma_async.sync.aligned.m64n%dk", c.tune["BLOCK_M"])), "no m64n%d", c.tune["BLOCK_M"])
			}
			if c.tune["SPLIT_K"] > 1 {
				require.True(t, p.k.Accumulates && p.k.Grid[2] == c.tune["SPLIT_K"], "grid %v", p.k.Grid)
				require.True(t, strings.Contains(sim.Last.PTX, "atom.global.add.f32"), "no atomic adds")
			}
			if c.wide {
				require.False(t, strings.Contains(sim.Last.PTX, "], 4, %r"), "a 4-byte copy")
				require.False(t, strings.Contains(sim.Last.PTX, "], 8, %r"), "an 8-byte copy")
			}
			if c.tune["wg_stage"] == 1 {
				// Aᵀ staged: no 4-byte copy where m's stride is even (A's
				// copies into the K-major tile were 4 bytes wide), and the
				// stores that transpose them
				if c.pc.m%2 == 0 && c.pc.n%2 == 0 {
					require.False(t, strings.Contains(sim.Last.PTX, "], 4, %r"), "a 4-byte copy")
				}
				st := "st.shared.b32"
				if c.prec == tile.PrecBF16 {
					st = "st.shared.b16"
				}
				require.True(t, strings.Contains(sim.Last.PTX, st), "no %s", st)
				require.True(t, strings.Contains(sim.Last.PTX, ".version 8.0") && strings.Contains(sim.Last.PTX, ".target sm_90a"), "not PTX 8.0 for sm_90a")
				// on sm_80 the kernel keeps mma.sync, which ptxas assembles
				ck, err := codegen.Compile(p.k.Tile, codegen.Options{Arch: 80, NumWarps: c.tune["num_warps"], Spec: ptxsim.Spec(p.k.Tile, args)})
				require.NoError(t, err)
				require.True(t, strings.Contains(ck.PTX, "mma.sync") && !strings.Contains(ck.PTX, "wgmma"), "sm_80: not mma.sync")
				if ptxas, err := exec.LookPath("ptxas"); err == nil {
					assembleSM80(t, ptxas, ck.PTX, p.k.Tile.Name)
				}
			}
			if c.tune["wgmma"] == 2 && c.prec == tile.PrecBF16 && c.pc.tb {
				// B's tile [n][k]: its fragments in pairs of k, one 8-byte
				// load and one conversion each
				require.Contains(t, sim.Last.PTX, "ld.shared.v2.b32", "B's fragments not read in pairs")
				require.Contains(t, sim.Last.PTX, "cvt.rn.bf16x2.f32")
			}
			if c.tune["wg_ss"] == 1 {
				// both of wgmma's operands through descriptors: no fragment loads
				require.Regexp(t, `wgmma\.mma_async\.sync\.aligned\.m64n\d+k8\.f32\.tf32\.tf32 \{[^}]*\}, %rd\d+, %rd\d+,`, sim.Last.PTX)
				require.NotContains(t, sim.Last.PTX, "ldmatrix", "B's fragments loaded into registers")
			}
			if c.tune["wgmma"] == 2 && c.tune["ws"] != 1 && c.tune["wg_stage"] != 1 && c.prec == tile.PrecTF32 {
				// in the loop, each iteration's copies come after its
				// wgmmas' commit_group (before it with early_copies = 1)
				hl := regexp.MustCompile(`\$L_pipe_\d+:`).FindStringIndex(sim.Last.PTX)
				el := regexp.MustCompile(`\$L_pipe_end_\d+:`).FindStringIndex(sim.Last.PTX)
				require.True(t, hl != nil && el != nil && el[0] > hl[0], "no pipelined loop")
				head, end := hl[0], el[0]
				// iterations begin at the CTA barrier, or without one
				// (B's tensor copies, tma_b = 2) at the wait for the
				// stage's copies; their copies are cp.async or tensor copies
				loop := sim.Last.PTX[head:end]
				iters := strings.Split(loop, "bar.sync 0;")[1:]
				if !strings.Contains(loop, "bar.sync") {
					iters = regexp.MustCompile(`\$L_tma_full_\d+:`).Split(loop, -1)[1:]
				}
				require.Len(t, iters, 2, "two iterations unrolled")
				for _, it := range iters {
					cp, w := strings.Index(it, "cp.async.c"), strings.Index(it, "wgmma.commit_group")
					if b := strings.Index(it, "cp.async.bulk.tensor"); b >= 0 && (cp < 0 || b < cp) {
						cp = b
					}
					require.True(t, cp >= 0 && w >= 0, "no copies or no commit in an iteration")
					if c.tune["early_copies"] == 1 {
						require.Less(t, cp, w, "copies after the wgmmas' commit")
					} else {
						require.Greater(t, cp, w, "copies before the wgmmas' commit")
					}
				}
			}
			if c.tune["tma"] == 1 {
				// A's rows 16-byte aligned (k a multiple of 4; masked along
				// k where k is not one of 32, unless tma_k = 0 asks for
				// cp.async there; its rows masked or not): its tiles by
				// tensor copies through the tensor map after the
				// parameters, of m rows where they are masked, of k
				// columns where masked along k
				tmaK, asked := c.tune["tma_k"]
				tensor := c.pc.k%32 == 0 || c.pc.k%4 == 0 && (!asked || tmaK != 0)
				require.Equal(t, tensor, strings.Contains(sim.Last.PTX, "cp.async.bulk.tensor.2d"), "tensor copies where A's rows are 16-byte aligned (and tma_k is not 0)")
				require.Equal(t, tensor, strings.Contains(sim.Last.PTX, ".param .align 64 .b8 tmap_0[128]"), "a tensor map parameter")
				if tensor {
					rows := int64(0)
					if c.pc.m%c.tune["BLOCK_M"] != 0 {
						rows = int64(c.pc.m)
					}
					cols := int64(0)
					if c.pc.k%32 != 0 {
						cols = int64(c.pc.k)
					}
					require.Equal(t, []codegen.TensorMap{{Param: 0, ElemBytes: 4, Inner: int64(c.pc.k), Rows: rows, Cols: cols, Box: [2]int{32, c.tune["BLOCK_M"]}, Swizzle: 128}}, sim.Last.TensorMaps)
				}
			}
			if c.tune["wgmma"] == 2 && c.prec != tile.PrecBF16 && c.tune["wg_ss"] != 1 {
				// B's fragments (3xTF32: both operands' parts) rounded to
				// nearest even: one F2FP each on sm_90, where cvt.rna is a
				// compare and two predicated integer ops
				require.Contains(t, sim.Last.PTX, "cvt.rn.tf32.f32", "B's fragments not rounded to nearest even")
				require.NotContains(t, sim.Last.PTX, "cvt.rna.tf32.f32", "B's fragments rounded with ties away")
			}
			if c.tune["k_tail"] == 1 {
				require.Contains(t, sim.Last.PTX, "$L_wg_ktail_", "no path for the last iteration's k steps")
			}
			if c.tune["ws"] == 1 {
				pw := 4
				if c.tune["ws_warps"] != 0 {
					pw = c.tune["ws_warps"]
				}
				// TF32 (not staged) has no pass over A: its copies complete on full
				requireWarpSpecialised(t, sim.Last, c.tune["num_warps"], pw, c.prec == tile.PrecTF32 && c.tune["wg_stage"] == 0)
			}
			if c.tune["epi_smem"] == 1 {
				// the accumulator goes through shared memory, read back in
				// runs as wide as the stores: 16 bytes where n is a
				// multiple of 4, 8 where it is even, else scalar (atomics
				// are scalar)
				run := map[int]int{0: 4, 2: 2}[c.pc.n%4]
				if run == 0 || c.tune["SPLIT_K"] > 1 {
					run = 1
				}
				read := map[int]string{1: "ld.shared.f32", 2: "ld.shared.v2.f32", 4: "ld.shared.v4.f32"}[run]
				require.True(t, strings.Contains(sim.Last.PTX, read), "no %s of the accumulator's tile", read)
				if c.tune["wg_stage"] == 0 {
					require.Equal(t, run == 4, strings.Contains(sim.Last.PTX, "ld.shared.v4.f32"), "ld.shared.v4.f32 at runs of %d", run)
				}
				if c.tune["SPLIT_K"] <= 1 {
					require.Equal(t, c.pc.n%4 == 0, strings.Contains(sim.Last.PTX, "st.global.v4.f32"), "st.global.v4.f32 where n = %d", c.pc.n)
					require.Equal(t, run == 2, strings.Contains(sim.Last.PTX, "st.global.v2.f32"), "st.global.v2.f32 where n = %d", c.pc.n)
				}
			}
			maxRel, normRel, bad := p.check(c.pc, p.args[len(p.args)-1], peerTol(c.prec))
			require.Zero(t, bad, "max %.2g norm %.2g", maxRel, normRel)
			t.Logf("max %.2g norm %.2g", maxRel, normRel)
		})
	}
}

// compileDumped compiles k for sm_90 at its num_warps with the given
// parameter facts and returns the kernel and its dump of pipelined loops
// (<kernel>.pipe: the plan codegen chose, or why it declined a form).
func compileDumped(t *testing.T, k *tile.Kernel, spec []int) (*codegen.Kernel, string) {
	t.Helper()
	dir := t.TempDir()
	ck, err := codegen.Compile(k, codegen.Options{Arch: 90, NumWarps: k.Meta["num_warps"], Spec: spec, DumpDir: dir})
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, k.Name+".pipe"))
	require.NoError(t, err)
	return ck, string(b)
}

// simulatePeer builds pc's kernel as graphpass writes it for the H200 and
// runs it in ptxsim for sm_90 with racecheck and initcheck.
func simulatePeer(t *testing.T, pc peerCase, prec tile.Precision, tune tile.Meta) (*peerKernel, *ptxsim.Launcher) {
	t.Helper()
	p, err := buildPeer(pc, graphpass.H200, prec, tune)
	require.NoError(t, err)
	sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true}
	require.NoError(t, sim.Launch(p.k.Tile, p.k.Grid, p.anyArgs()...))
	return p, sim
}

// requireWarpSpecialised checks that ck is the warp-specialised form of a
// swapped wgmma loop with nw consumer warps: pw producer warps launched
// beside them, the producer's loop and the consumers' loop
// synchronised by mbarriers only (no bar.sync in either), the producer
// handing stages over by cp.async.mbarrier.arrive.noinc where noinc (no
// pass over the copies), else by mbarrier.arrive after its pass; the
// register split where the launch's share falls short (past 8 warps).
func requireWarpSpecialised(t *testing.T, ck *codegen.Kernel, nw, pw int, noinc bool) {
	t.Helper()
	p := ck.PTX
	require.Equal(t, pw, ck.ProducerWarps, "producer warps")
	require.Equal(t, 32*(nw+pw), ck.Threads(), "threads")
	require.Contains(t, p, fmt.Sprintf(".maxntid %d, 1, 1", 32*(nw+pw)))
	cut := func(from, to string) string {
		// label definitions start their lines
		i, j := strings.Index(p, "\n"+from), strings.Index(p, "\n"+to)
		require.True(t, i >= 0 && j > i, "no %s … %s", from, to)
		return p[i:j]
	}
	prod := cut("$L_ws_produce_", "$L_ws_consumer_")
	cons := cut("$L_ws_consume_", "$L_ws_end_")
	for name, loop := range map[string]string{"producer": prod, "consumer": cons} {
		require.NotContains(t, loop, "bar.sync", "%s loop", name)
		require.Contains(t, loop, "mbarrier.try_wait.parity.shared::cta.b64", "%s loop", name)
	}
	require.NotContains(t, prod, "wgmma")
	require.NotContains(t, cons, "cp.async")
	require.Contains(t, cons, "wgmma.mma_async")
	require.Contains(t, cons, "mbarrier.arrive.shared::cta.b64 _,")
	require.Equal(t, noinc, strings.Contains(prod, "cp.async.mbarrier.arrive.noinc"), "cp.async.mbarrier.arrive.noinc")
	require.Equal(t, !noinc, strings.Contains(p, "mbarrier.arrive.shared::cta.b64 _,") && strings.Contains(prod, "cp.async.wait_group"), "the pass's arrivals")
	require.Equal(t, nw+pw > 8, strings.Contains(p, "setmaxnreg.dec.sync.aligned.u32 ") && strings.Contains(p, "setmaxnreg.inc.sync.aligned.u32 "), "setmaxnreg past 8 warps only")
	require.Contains(t, p, "\texit;")
}

// TestBF16TensorCopiesRandomShapes: bf16 products in the swapped wgmma
// form at the tiles that take A's tensor copies by default (256×128 at 3
// or 4 stages, 192×128 at 4), over seeded random shapes: m and n from 1
// to past two tiles, k a multiple of 4 (the tensor copies, their map
// bounding K where k is no multiple of 32) or not (cp.async), A·B and
// A·Bᵀ, with and without gelu and the epilogue through shared memory.
// Each runs in ptxsim (racecheck, initcheck) against float64 at bf16's
// tolerance, and its PTX has tensor copies exactly where A's rows are
// 16-byte aligned.
func TestBF16TensorCopiesRandomShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds in the simulator")
	}
	rng := rand.New(rand.NewPCG(42, 2026))
	tiles := []tile.Meta{
		{"wgmma": 2, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3},
		{"wgmma": 2, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4},
		{"wgmma": 2, "BLOCK_M": 192, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4},
	}
	for i := range 16 {
		meta := maps.Clone(tiles[i%len(tiles)])
		bm := meta["BLOCK_M"]
		pc := peerCase{m: 1 + rng.IntN(2*bm+40), n: 8 + rng.IntN(300), k: 4 * (1 + rng.IntN(50)), tb: rng.IntN(2) == 0, gelu: rng.IntN(3) == 0}
		if i%5 == 4 {
			pc.k += 1 + rng.IntN(3) // rows not 16-byte aligned: cp.async
		}
		if rng.IntN(3) == 0 {
			meta["epi_smem"] = 1
		}
		pc.name = fmt.Sprintf("%dx%dx%d tb=%v gelu=%v %dx128 %d stages epi_smem=%d", pc.m, pc.k, pc.n, pc.tb, pc.gelu, bm, meta["num_stages"], meta["epi_smem"])
		t.Run(pc.name, func(t *testing.T) {
			p, sim := simulatePeer(t, pc, tile.PrecBF16, meta)
			require.Contains(t, sim.Last.PTX, fmt.Sprintf("wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16", bm))
			require.Equal(t, pc.k%4 == 0, strings.Contains(sim.Last.PTX, "cp.async.bulk.tensor.2d"), "tensor copies where A's rows are 16-byte aligned")
			maxRel, normRel, bad := p.check(pc, p.args[len(p.args)-1], peerTol(tile.PrecBF16))
			require.Zero(t, bad, "max %.2g norm %.2g", maxRel, normRel)
		})
	}
}
