package tiletest

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/kernels"
)

// Tolerances, stated once. f32 elementwise work is within a few ulp of the
// float64 reference; reductions and dot products add the rounding of their
// sums (about sqrt(n)·2⁻²⁴ relative); TF32 products round operands to 11
// significant bits, which the reference reproduces, so only the f32 sums differ.
var (
	TolElementwise = Tol{Abs: 1e-6, Rel: 4e-6}
	TolRow         = Tol{Abs: 1e-7, Rel: 2e-5}
	TolNorm        = Tol{Abs: 2e-5, Rel: 2e-5}
	TolSum         = Tol{Abs: 1e-4, Rel: 1e-5}
	TolDot         = Tol{Abs: 1e-4, Rel: 1e-4}
)

func spec(f func(tile.Meta) (*tile.Kernel, error), m tile.Meta) func() (*tile.Kernel, error) {
	return func() (*tile.Kernel, error) { return f(m) }
}

// Cases is the conformance table.
func Cases() []Case {
	var cs []Case
	for _, c := range []struct{ n, block int }{{1000, 128}, {1 << 16, 1024}, {70001, 512}, {1, 64}} {
		cs = append(cs, vecAdd(c.n, c.block))
	}
	cs = append(cs, geluChain(5000, 256))
	cs = append(cs, copy2D("row_major", 100, 37, false), copy2D("col_major", 100, 37, true))
	for _, c := range []struct {
		rows, n, block int
		scale          float64
		infs           bool
	}{
		{64, 781, 1024, 1, false},   // not a power of two
		{33, 1024, 1024, 1, false},  // exactly one block
		{16, 500, 512, 1e4, false},  // large inputs: a naive exp overflows
		{24, 300, 512, 1, true},     // rows of -inf
		{8, 4096, 4096, 3, false},   // a wide row
		{3, 17, 32, 1, true},        // tiny
		{128, 100, 128, 1e-3, true}, // many rows, tiny values
	} {
		cs = append(cs, softmax(false, c.rows, c.n, c.block, c.scale, c.infs))
	}
	for _, c := range []struct {
		rows, n, block int
		scale          float64
		infs           bool
	}{
		{8, 3000, 512, 1, false},  // rows longer than one block, ragged tail
		{6, 2048, 256, 1e4, true}, // large inputs, -inf rows
		{5, 100, 1024, 1, true},   // shorter than one block
	} {
		cs = append(cs, softmax(true, c.rows, c.n, c.block, c.scale, c.infs))
	}
	cs = append(cs, layerNorm(50, 781, 1024, 1), layerNorm(7, 64, 64, 100), layerNorm(4, 3, 4, 1))
	cs = append(cs, colSum(300, 70, 64, 32), colSum(1, 1, 16, 16))
	cs = append(cs, transComputed(false, 32, 64, 16, tile.PrecIEEE), transComputed(false, 64, 32, 32, tile.PrecTF32),
		transComputed(true, 16, 64, 0, tile.PrecIEEE))
	for _, r := range []int{16, 64} {
		for _, p := range []tile.Precision{tile.PrecTF32, tile.PrecTF32TB, tile.PrecBF16, tile.PrecTF32x3} {
			cs = append(cs, DotSelf(r, p))
		}
	}
	cs = append(cs,
		matmul("130x70x90", 130, 70, 90, false, false, false),
		matmul("130x70x90_transA", 130, 70, 90, true, false, false),
		matmul("130x70x90_transB", 130, 70, 90, false, true, false),
		matmul("130x70x90_tf32", 130, 70, 90, false, false, true),
		matmul("16x16x16", 16, 16, 16, false, false, false),
		matmul("1x1x1", 1, 1, 1, false, false, false),
		// 64×64×64 TF32 tiles stage 51 KB in shared memory: above the 48 KB default
		matmulBlocks("200x136x150_tf32_B64", 200, 136, 150, 64, false, true, true),
		// bfloat16 operands and 3xTF32 (the tensor cores' other precisions)
		matmulPrec("130x70x90_bf16", 130, 70, 90, 32, false, false, tile.PrecBF16),
		matmulPrec("130x70x90_tf32x3", 130, 70, 90, 32, false, false, tile.PrecTF32x3),
		matmulPrec("200x136x150_bf16_B64_transB", 200, 136, 150, 64, false, true, tile.PrecBF16),
		matmulPrec("200x136x150_tf32x3_B64", 200, 136, 150, 64, false, false, tile.PrecTF32x3),
		// Hopper's warpgroup MMA (sm_90; mma.sync elsewhere): 64×64 tiles
		// of 32 k for 4 warps, one warpgroup
		matmulPrec("130x70x90_tf32_wgmma", 130, 70, 90, 64, false, false, tile.PrecTF32, tile.Meta{"BK": 32, "wgmma": 1}),
		// the swapped form (wgmma = 2: Cᵀ = Bᵀ·Aᵀ, a warp per 16 columns):
		// 128×64 tiles for one warpgroup, 4 stages; 256×128 for two; A
		// stored transposed (4-byte copies into the K-major tile)
		matmulPrec("130x70x90_tf32_wgmma2", 130, 70, 90, 64, false, false, tile.PrecTF32, tile.Meta{"BM": 128, "BK": 32, "wgmma": 2, "num_stages": 4}),
		matmulPrec("300x200x100_tf32_wgmma2_256x128_transA", 300, 200, 100, 128, true, false, tile.PrecTF32, tile.Meta{"BM": 256, "BK": 32, "wgmma": 2, "num_stages": 3, "num_warps": 8}),
		// 3xTF32 swapped: each iteration's products summed apart, 3 and 4
		// iterations (the loop leaves after either unrolled half)
		matmulPrec("130x70x90_tf32x3_wgmma2", 130, 70, 90, 64, false, false, tile.PrecTF32x3, tile.Meta{"BK": 32, "wgmma": 2, "num_stages": 4}),
		matmulPrec("200x136x128_tf32x3_wgmma2_128x128", 200, 136, 128, 128, false, false, tile.PrecTF32x3, tile.Meta{"BK": 32, "wgmma": 2, "num_stages": 3, "num_warps": 8}),
		// bf16 swapped: A converted by the copying thread into a bf16 tile
		// (64-byte swizzle), m64nMk16; B stored transposed (4-byte copies)
		matmulPrec("130x70x90_bf16_wgmma2", 130, 70, 90, 64, false, false, tile.PrecBF16, tile.Meta{"BM": 128, "BK": 32, "wgmma": 2, "num_stages": 4}),
		matmulPrec("300x200x100_bf16_wgmma2_256x128_transAB", 300, 200, 100, 128, true, true, tile.PrecBF16, tile.Meta{"BM": 256, "BK": 32, "wgmma": 2, "num_stages": 4, "num_warps": 8}),
		// tiles of 192 rows (three times a power of two: the wave model's
		// 4096×768 in 132 tiles), 430 rows: two tiles and 46 rows
		matmulPrec("430x200x100_tf32_wgmma2_192x128", 430, 200, 100, 128, false, false, tile.PrecTF32, tile.Meta{"BM": 192, "BK": 32, "wgmma": 2, "num_stages": 4, "num_warps": 8}),
		matmulPrec("430x200x100_tf32_wgmma2_192x128_transB", 430, 200, 100, 128, false, true, tile.PrecTF32, tile.Meta{"BM": 192, "BK": 32, "wgmma": 2, "num_stages": 4, "num_warps": 8}),
		matmulPrec("430x200x100_bf16_wgmma2_192x128", 430, 200, 100, 128, false, false, tile.PrecBF16, tile.Meta{"BM": 192, "BK": 32, "wgmma": 2, "num_stages": 4, "num_warps": 8}),
		// store-bound products (graphpass storeBound: 128×128, 3 stages,
		// the epilogue through shared memory) at issue 10's odd shapes
		// scaled down: K = 33 (a step and a 1-wide tail), 50; rows of 197
		// and 129 (scalar stores, lanes along the columns), 130 (8 bytes)
		matmulPrec("195x197x33_tf32_wgmma2_epi_smem", 195, 197, 33, 128, false, false, tile.PrecTF32, tile.Meta{"BK": 32, "wgmma": 2, "epi_smem": 1, "num_stages": 3, "num_warps": 8}),
		matmulPrec("130x129x50_tf32_wgmma2_epi_smem", 130, 129, 50, 128, false, false, tile.PrecTF32, tile.Meta{"BK": 32, "wgmma": 2, "epi_smem": 1, "num_stages": 3, "num_warps": 8}),
		matmulPrec("200x130x50_tf32_wgmma2_epi_smem_transB", 200, 130, 50, 128, false, true, tile.PrecTF32, tile.Meta{"BK": 32, "wgmma": 2, "epi_smem": 1, "num_stages": 3, "num_warps": 8}),
		// and at 256 rows, 4 stages, where the output's rows are an odd
		// number of words (storeBoundOddRows): 300 rows, a tile and 44
		matmulPrec("300x197x33_tf32_wgmma2_256x128_epi_smem", 300, 197, 33, 128, false, false, tile.PrecTF32, tile.Meta{"BM": 256, "BK": 32, "wgmma": 2, "epi_smem": 1, "num_stages": 4, "num_warps": 8}),
	)
	// TF32 truncates A and rounds B: operands whose rounding and truncation
	// differ, sums exact in f32, compared exactly, on every TF32 form
	// (mma.sync fragments in registers; wgmma's A in registers and B
	// transposed into shared memory; the swapped form's A read by the
	// tensor cores as it landed, also Aᵀ staged, and warp-specialised; 16×16
	// tiles, which no warp layout of mma.sync's fits: the dot through shared
	// memory), A's and B's in turn
	for _, side := range []string{"A", "B"} {
		cs = append(cs,
			tf32Operands(side, "40x40x40_16x16", 40, 40, 40, 16, false, false),
			tf32Operands(side, "70x40x96", 70, 40, 96, 32, false, false),
			tf32Operands(side, "70x40x96_transB", 70, 40, 96, 32, false, true),
			tf32Operands(side, "130x70x90_wgmma", 130, 70, 90, 64, false, false, tile.Meta{"BK": 32, "wgmma": 1}),
			tf32Operands(side, "130x70x90_wgmma2", 130, 70, 90, 64, false, false, tile.Meta{"BM": 128, "BK": 32, "wgmma": 2, "num_stages": 4}),
			tf32Operands(side, "300x200x100_wgmma2_256x128_transA", 300, 200, 100, 128, true, false, tile.Meta{"BM": 256, "BK": 32, "wgmma": 2, "num_stages": 3, "num_warps": 8}),
			tf32Operands(side, "300x200x100_wgmma2_192x128_staged_transA", 300, 200, 100, 128, true, false, tile.Meta{"BM": 192, "BK": 32, "wgmma": 2, "wg_stage": 1, "num_stages": 4, "num_warps": 8}),
			tf32Operands(side, "300x200x100_wgmma2_128x64_ws", 300, 200, 100, 64, false, false, tile.Meta{"BM": 128, "BK": 32, "wgmma": 2, "ws": 1, "num_stages": 4}),
		)
	}
	// PrecTF32TB (flash attention's TF32: A rounded, B truncated) the same
	// way: the dot through shared memory (16×16), MMA loops on mma.sync (B
	// truncated in place) and on wgmma (B as it lies), and the forms that
	// PrecTF32 would take (wgmma = 2: not the pipelined forms, whose
	// conversions are PrecTF32's)
	for _, side := range []string{"A", "B"} {
		cs = append(cs,
			tf32OperandsPrec(tile.PrecTF32TB, side, "40x40x40_16x16", 40, 40, 40, 16, false, false),
			tf32OperandsPrec(tile.PrecTF32TB, side, "70x40x96", 70, 40, 96, 32, false, false),
			tf32OperandsPrec(tile.PrecTF32TB, side, "70x40x96_transB", 70, 40, 96, 32, false, true),
			tf32OperandsPrec(tile.PrecTF32TB, side, "130x70x90_wgmma", 130, 70, 90, 64, false, false, tile.Meta{"BK": 32, "wgmma": 1}),
			tf32OperandsPrec(tile.PrecTF32TB, side, "130x70x90_wgmma2", 130, 70, 90, 64, false, false, tile.Meta{"BM": 128, "BK": 32, "wgmma": 2, "num_stages": 4}),
		)
	}
	cs = append(cs, moreCases()...)
	for _, c := range []struct {
		name    string
		m, n, k int
		tf32    bool
	}{{"256x384x512", 256, 384, 512, false}, {"1024x1024x1024", 1024, 1024, 1024, false}, {"512x256x1024_tf32", 512, 256, 1024, true}} {
		big := matmul(c.name, c.m, c.n, c.k, false, false, c.tf32)
		big.Large = true
		cs = append(cs, big)
	}
	return cs
}

func vecAdd(n, block int) Case {
	return Case{
		Name:   fmt.Sprintf("vec_add/n=%d/BLOCK=%d", n, block),
		Kernel: spec(kernels.VecAdd, tile.Meta{"BLOCK": block}),
		Tol:    TolElementwise,
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			x, y, out := Uniform(rng, n, -10, 10), Uniform(rng, n, -10, 10), Output(n)
			return tile.Grid{tile.CDiv(n, block)}, []any{x, y, out, n}, func() error {
				want := make([]float64, n)
				for i := range want {
					want[i] = float64(x[i]) + float64(y[i])
				}
				return Close("out", out, want, TolElementwise)
			}
		},
	}
}

func geluChain(n, block int) Case {
	return Case{
		Name:   fmt.Sprintf("gelu_chain/n=%d/BLOCK=%d", n, block),
		Kernel: spec(kernels.GeluChain, tile.Meta{"BLOCK": block}),
		Tol:    TolElementwise,
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			x, a, b, c := Uniform(rng, n, -4, 4), Uniform(rng, n, -2, 2), Uniform(rng, n, -1, 1), Uniform(rng, n, -2, 2)
			out := Output(n)
			return tile.Grid{tile.CDiv(n, block)}, []any{x, a, b, c, out, n}, func() error {
				want := make([]float64, n)
				for i := range want {
					h := float64(x[i])*float64(a[i]) + float64(b[i])
					want[i] = 0.5 * h * (1 + math.Erf(h/math.Sqrt2)) * float64(c[i])
				}
				return Close("out", out, want, TolElementwise)
			}
		},
	}
}

// copy2D stores an M×N matrix row-major or column-major and copies it out
// row-major through strided tile loads: both layouts give the same matrix.
func copy2D(name string, m, n int, colMajor bool) Case {
	const bm, bn = 32, 16
	return Case{
		Name:   fmt.Sprintf("copy_2d/%s/%dx%d", name, m, n),
		Kernel: spec(kernels.Copy2D, tile.Meta{"BM": bm, "BN": bn}),
		Tol:    Tol{},
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			ref := Uniform(rng, m*n, -1, 1) // row-major contents
			in := make([]float32, m*n)
			sm, sn := n, 1
			if colMajor {
				sm, sn = 1, m
			}
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					in[i*sm+j*sn] = ref[i*n+j]
				}
			}
			out := Output(m * n)
			grid := tile.Grid{tile.CDiv(m, bm), tile.CDiv(n, bn)}
			return grid, []any{in, out, m, n, sm, sn}, func() error {
				want := make([]float64, m*n)
				for i, r := range ref {
					want[i] = float64(r)
				}
				return Close("out", out, want, Tol{})
			}
		},
	}
}

// SoftmaxRef is the float64 row softmax with the kernels' conventions: -inf
// entries give 0, a row of only -inf gives zeros.
func SoftmaxRef(x []float32, rows, n int) []float64 {
	out := make([]float64, rows*n)
	for r := 0; r < rows; r++ {
		row := x[r*n : r*n+n]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, float64(v))
		}
		if math.IsInf(m, -1) {
			continue // zeros
		}
		s := 0.0
		for _, v := range row {
			s += math.Exp(float64(v) - m)
		}
		for j, v := range row {
			out[r*n+j] = math.Exp(float64(v)-m) / s
		}
	}
	return out
}

func softmax(looped bool, rows, n, block int, scale float64, infs bool) Case {
	name, f := "softmax", kernels.Softmax
	if looped {
		name, f = "softmax_looped", kernels.SoftmaxLooped
	}
	return Case{
		Name:   fmt.Sprintf("%s/%dx%d/BLOCK=%d/scale=%g/infs=%v", name, rows, n, block, scale, infs),
		Kernel: spec(f, tile.Meta{"BLOCK": block}),
		Tol:    TolRow,
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			x := Uniform(rng, rows*n, -scale, scale)
			if infs {
				for r := 0; r < rows; r++ {
					switch r % 3 {
					case 0: // a whole row of -inf
						for j := 0; j < n; j++ {
							x[r*n+j] = float32(math.Inf(-1))
						}
					case 1: // a masked prefix, as in causal attention
						for j := 0; j < n/2; j++ {
							x[r*n+j] = float32(math.Inf(-1))
						}
					}
				}
			}
			y := Output(rows * n)
			return tile.Grid{rows}, []any{x, y, n, n}, func() error {
				return Close("y", y, SoftmaxRef(x, rows, n), TolRow)
			}
		},
	}
}

func layerNorm(rows, n, block int, scale float64) Case {
	const eps = 1e-5
	return Case{
		Name:   fmt.Sprintf("layer_norm/%dx%d/BLOCK=%d/scale=%g", rows, n, block, scale),
		Kernel: spec(kernels.LayerNorm, tile.Meta{"BLOCK": block}),
		Tol:    Tol{Abs: 2e-5 * scale, Rel: 2e-5},
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			x := Uniform(rng, rows*n, -scale, scale)
			for i := range x {
				x[i] += float32(scale / 2) // an offset that a one-pass variance would lose
			}
			w, b := Uniform(rng, n, 0.5, 1.5), Uniform(rng, n, -1, 1)
			y, mean, rstd := Output(rows*n), Output(rows), Output(rows)
			return tile.Grid{rows}, []any{x, y, w, b, mean, rstd, n, n, eps}, func() error {
				wy, wm, wr := make([]float64, rows*n), make([]float64, rows), make([]float64, rows)
				for r := 0; r < rows; r++ {
					row := x[r*n : r*n+n]
					mu := 0.0
					for _, v := range row {
						mu += float64(v)
					}
					mu /= float64(n)
					va := 0.0
					for _, v := range row {
						va += (float64(v) - mu) * (float64(v) - mu)
					}
					rs := 1 / math.Sqrt(va/float64(n)+eps)
					wm[r], wr[r] = mu, rs
					for j, v := range row {
						wy[r*n+j] = (float64(v)-mu)*rs*float64(w[j]) + float64(b[j])
					}
				}
				if err := Close("y", y, wy, TolNorm); err != nil {
					return err
				}
				if err := Close("mean", mean, wm, Tol{Abs: 1e-6 * scale, Rel: 1e-5}); err != nil {
					return err
				}
				return Close("rstd", rstd, wr, TolNorm)
			}
		},
	}
}

func colSum(m, n, bm, bn int) Case {
	return Case{
		Name:   fmt.Sprintf("col_sum/%dx%d/BM=%d/BN=%d", m, n, bm, bn),
		Kernel: spec(kernels.ColSum, tile.Meta{"BM": bm, "BN": bn}),
		Tol:    TolSum,
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			x := Uniform(rng, m*n, -1, 1)
			out := Output(n)
			for i := 0; i < n; i++ {
				out[i] = 0 // accumulated into
			}
			return tile.Grid{tile.CDiv(m, bm), tile.CDiv(n, bn)}, []any{x, out, m, n}, func() error {
				want := make([]float64, n)
				for i := 0; i < m; i++ {
					for j := 0; j < n; j++ {
						want[j] += float64(x[i*n+j])
					}
				}
				return Close("out", out, want, TolSum)
			}
		},
	}
}

// MatmulRef is C = A·B in float64 for row-major A (m×k) and B (k×n), with the
// operands first as a TF32 dot sees them when tf32 is set (A truncated,
// B rounded).
func MatmulRef(a, b []float32, m, n, k int, tf32 bool) []float64 {
	if tf32 {
		return MatmulRefPrec(a, b, m, n, k, tile.PrecTF32)
	}
	return MatmulRefPrec(a, b, m, n, k, tile.PrecIEEE)
}

// MatmulRefPrec is C = A·B in float64 with the operands as a dot of
// precision p sees them: TF32 (A truncated, B rounded; PrecTF32TB the
// other way round), bfloat16, or
// (tf32x3) the sum of the products of their TF32 parts a_lo·b_hi +
// a_hi·b_lo + a_hi·b_hi.
func MatmulRefPrec(a, b []float32, m, n, k int, p tile.Precision) []float64 {
	parts := func(x float32, isB bool) (hi, lo float64) {
		if ca, cb := p.Operands(); ca != nil {
			if isB {
				return float64(cb(x)), 0
			}
			return float64(ca(x)), 0
		}
		if p == tile.PrecTF32x3 {
			h, l := tile.SplitTF32(x)
			return float64(h), float64(l)
		}
		return float64(x), 0
	}
	c := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for kk := 0; kk < k; kk++ {
			ah, al := parts(a[i*k+kk], false)
			for j := 0; j < n; j++ {
				bh, bl := parts(b[kk*n+j], true)
				c[i*n+j] += ah*bh + ah*bl + al*bh
			}
		}
	}
	return c
}

// layout stores a row-major r×c matrix row- or column-major, returning the
// buffer and its (row, column) strides.
func layout(x []float32, r, c int, colMajor bool) ([]float32, int, int) {
	if !colMajor {
		return x, c, 1
	}
	t := make([]float32, len(x))
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			t[j*r+i] = x[i*c+j]
		}
	}
	return t, 1, r
}

func matmul(name string, m, n, k int, transA, transB, tf32 bool) Case {
	return matmulBlocks(name, m, n, k, 32, transA, transB, tf32)
}

// matmulBlocks is matmul with bm = bn = bk = bs.
func matmulBlocks(name string, m, n, k, bs int, transA, transB, tf32 bool) Case {
	p := tile.PrecIEEE
	if tf32 {
		p = tile.PrecTF32
	}
	return matmulPrec(name, m, n, k, bs, transA, transB, p)
}

// matmulPrec is matmulBlocks with a dot of precision p; extra
// meta-parameters (BK, wgmma) replace or join the others.
func matmulPrec(name string, m, n, k, bs int, transA, transB bool, p tile.Precision, extra ...tile.Meta) Case {
	uniform := func(rng *rand.Rand) ([]float32, []float32) {
		return Uniform(rng, m*k, -1, 1), Uniform(rng, k*n, -1, 1)
	}
	return matmulData(name, m, n, k, bs, transA, transB, p, uniform, TolDot, extra...)
}

// tf32Operands is a TF32 matmul whose side operand tells truncation from
// rounding (tf32OperandsPrec with tile.PrecTF32). Side A: A's elements are 1 + j·2⁻¹⁰ + 3·2⁻¹² (j < 8), which
// TF32 truncates to 1 + j·2⁻¹⁰ and rounds to 1 + (j+1)·2⁻¹⁰, B's are 2^e
// (|e| ≤ 2), exact in TF32. Side B: B's elements are 2^e·(1 + j·2⁻¹⁰ +
// 3·2⁻¹²) (e ∈ {0, 1}), A's 2^f (f ∈ {−1, 0}). Every product is a multiple
// of 2⁻¹² below 2⁴ and every sum of them below 2¹⁰, so f32 sums them exactly
// in any order: the result is compared exactly with the product of the
// operands as a TF32 dot sees them (PrecTF32: A truncated, B rounded;
// PrecTF32TB the other way round). The other conversion would move each
// element by at least k·2⁻¹² (all positive, nothing cancels).
func tf32Operands(side, name string, m, n, k, bs int, transA, transB bool, extra ...tile.Meta) Case {
	return tf32OperandsPrec(tile.PrecTF32, side, name, m, n, k, bs, transA, transB, extra...)
}

// tf32OperandsPrec is tf32Operands with TF32 precision p (PrecTF32's cases
// are named tf32_A_…, tf32_B_…; PrecTF32TB's tf32tb_A_…).
func tf32OperandsPrec(p tile.Precision, side, name string, m, n, k, bs int, transA, transB bool, extra ...tile.Meta) Case {
	data := func(rng *rand.Rand) ([]float32, []float32) {
		a, b := make([]float32, m*k), make([]float32, k*n)
		odd := func(e int) float32 {
			return float32(math.Ldexp(1+float64(rng.IntN(8))/(1<<10)+3.0/(1<<12), e))
		}
		for i := range a {
			if side == "A" {
				a[i] = odd(0)
			} else {
				a[i] = float32(math.Ldexp(1, -rng.IntN(2)))
			}
		}
		for i := range b {
			if side == "A" {
				b[i] = float32(math.Ldexp(1, rng.IntN(5)-2))
			} else {
				b[i] = odd(rng.IntN(2))
			}
		}
		return a, b
	}
	return matmulData(p.String()+"_"+side+"_"+name, m, n, k, bs, transA, transB, p, data, Tol{}, extra...)
}

// matmulData is matmulPrec with operands from data and tolerance tol.
func matmulData(name string, m, n, k, bs int, transA, transB bool, p tile.Precision, data func(*rand.Rand) ([]float32, []float32), tol Tol, extra ...tile.Meta) Case {
	meta := tile.Meta{"BM": bs, "BN": bs, "BK": bs}
	for _, x := range extra {
		for key, v := range x {
			meta[key] = v
		}
	}
	bm, bn := meta["BM"], meta["BN"]
	switch p {
	case tile.PrecTF32:
		meta["TF32"] = 1
	case tile.PrecBF16, tile.PrecTF32x3, tile.PrecTF32TB:
		meta["PREC"] = int(p)
	}
	return Case{
		Name:   "matmul/" + name,
		Kernel: spec(kernels.Matmul, meta),
		Tol:    tol,
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			a, b := data(rng)
			ab, sam, sak := layout(a, m, k, transA)
			bb, sbk, sbn := layout(b, k, n, transB)
			c := Output(m * n)
			grid := tile.Grid{tile.CDiv(m, bm), tile.CDiv(n, bn)}
			return grid, []any{ab, bb, c, m, n, k, sam, sak, sbk, sbn, n, 1}, func() error {
				return Close("c", c, MatmulRefPrec(a, b, m, n, k, p), tol)
			}
		},
	}
}

// transComputed: y = Mᵀ + ½ for a block M [r, c] the kernel computed, one
// program: a product's result (x[r, k]·w[k, c], a dot at precision p) or,
// with carry, a loop's carried sum of three [r, c] blocks, then read
// through a transpose: on a CPU a frame block read across its rows
// (native: until 2026-12-07 read as contiguous lanes, silently wrong), on
// a GPU an accumulator's layout converted. The operands are small
// integers, so every product and sum is exact at every precision (TF32
// and bf16 hold them) and every backend gives the reference's values
// exactly.
func transComputed(carry bool, r, c, k int, p tile.Precision) Case {
	name := fmt.Sprintf("trans_of_product/%dx%dx%d/%v", r, c, k, p)
	n := r*k + k*c
	if carry {
		name = fmt.Sprintf("trans_of_carry/%dx%d", r, c)
		n = 3 * r * c
	}
	return Case{
		Name: name,
		Tol:  Tol{},
		Kernel: func() (*tile.Kernel, error) {
			b := tile.NewBuilder("trans_computed", nil)
			px, py := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
			block := func(at *tile.Value, rows, cols int) *tile.Value { // rows×cols of x from element at, row-major
				i, j := b.ExpandDims(b.Arange(0, rows), 1), b.ExpandDims(b.Arange(0, cols), 0)
				return b.Load(b.AddPtr(b.AddPtr(px, at), b.Add(b.Mul(i, cols), j)), nil, nil)
			}
			var m *tile.Value
			if carry {
				m = b.For(0, 3, 1, []*tile.Value{b.Zeros(tile.F32, r, c)}, func(it *tile.Value, acc []*tile.Value) []*tile.Value {
					return []*tile.Value{b.Add(acc[0], block(b.Mul(it, r*c), r, c))}
				})[0]
			} else {
				m = b.Dot(block(b.Const(0, tile.I32), r, k), block(b.Const(float64(r*k), tile.I32), k, c), b.Zeros(tile.F32, r, c), p)
			}
			i, j := b.ExpandDims(b.Arange(0, c), 1), b.ExpandDims(b.Arange(0, r), 0)
			b.Store(b.AddPtr(py, b.Add(b.Mul(i, r), j)), b.Add(b.Trans(m), 0.5), nil)
			return b.Build()
		},
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			x := make([]float32, n)
			for q := range x {
				x[q] = float32(rng.IntN(9) - 4)
			}
			y := Output(r * c)
			return tile.Grid{1}, []any{x, y}, func() error {
				want := make([]float64, r*c) // want[j·r + i] = M[i, j] + ½
				for i := 0; i < r; i++ {
					for j := 0; j < c; j++ {
						s := 0.0
						if carry {
							for it := 0; it < 3; it++ {
								s += float64(x[it*r*c+i*c+j])
							}
						} else {
							for q := 0; q < k; q++ {
								s += float64(x[i*k+q]) * float64(x[r*k+q*c+j])
							}
						}
						want[j*r+i] = s + 0.5
					}
				}
				return Close("y", y, want, Tol{})
			}
		},
	}
}

// DotSelf: y = x·x for a square block x (r×r, one program), the one value
// both operands of the dot: it must still see A and B converted as its
// precision says (TF32: A truncated, B rounded; TF32TB the other way
// round). The elements 1 + j·2⁻¹⁰ + 3·2⁻¹² (j < 8) truncate and round to
// TF32 values 2⁻¹⁰ apart, so the wrong conversion moves every element of y
// by at least r·2⁻¹⁰ (all positive: nothing cancels), far past the
// tolerance of f32 sums of r products below 4. (The PTX's product through
// shared memory took a dot's operand as A when it was the same value as
// A, so dot(x, x) truncated both, until 2026-12-07; a random kernel of
// the fuzzers found it.)
func DotSelf(r int, p tile.Precision) Case {
	return Case{
		Name: fmt.Sprintf("dot_self/%dx%d/%v", r, r, p),
		Tol:  Tol{Abs: float64(r) * 4 * 0x1p-22},
		Kernel: func() (*tile.Kernel, error) {
			b := tile.NewBuilder("dot_self", nil)
			px, py := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
			i, j := b.ExpandDims(b.Arange(0, r), 1), b.ExpandDims(b.Arange(0, r), 0)
			off := b.Add(b.Mul(i, r), j)
			x := b.Load(b.AddPtr(px, off), nil, nil)
			b.Store(b.AddPtr(py, off), b.Dot(x, x, nil, p), nil)
			return b.Build()
		},
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			x := make([]float32, r*r)
			for q := range x {
				x[q] = float32(1 + float64(rng.IntN(8))/(1<<10) + 3.0/(1<<12))
			}
			y := Output(r * r)
			return tile.Grid{1}, []any{x, y}, func() error {
				return Close("y", y, MatmulRefPrec(x, x, r, r, r, p), Tol{Abs: float64(r) * 4 * 0x1p-22})
			}
		},
	}
}
