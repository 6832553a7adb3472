package native_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/codegen/cpu/pool"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// isas are the instruction sets the native code generator can use here:
// "avx2" always, "avx512" where the CPU has it. Callers pick one with
// native.SetAVX512; the setting is restored at the end of the test.
func isas(tb testing.TB) []string {
	was := native.AVX512()
	tb.Cleanup(func() { native.SetAVX512(was) })
	if jit.HasAVX512() {
		return []string{"avx2", "avx512"}
	}
	return []string{"avx2"}
}

// BenchmarkDot is c = a·b of 1024×1024 f32 matrices through a tiled
// matmul kernel (a K loop of 32, the product accumulating in its carried
// block; 32×32 blocks are what the CPU target gives 1024³), each block size
// with the ymm (avx2) and zmm (avx512) micro-kernels side by side; -cpu
// 1,2 gives one and two cores. It reports GFLOP/s, and those of the
// fastest launch (best-GFLOP/s: on a shared machine the least disturbed).
func BenchmarkDot(b *testing.B) {
	const m, n, k = 1024, 1024, 1024
	rng := tiletest.RNG("BenchmarkDot")
	av, bv := tiletest.Uniform(rng, m*k, -1, 1), tiletest.Uniform(rng, k*n, -1, 1)
	c0, out := make([]float32, m*n), make([]float32, m*n)
	for _, blk := range [][3]int{{32, 32, 32}, {64, 64, 32}, {128, 128, 32}} {
		for _, isa := range isas(b) {
			b.Run(fmt.Sprintf("%dx%dx%d/%s", blk[0], blk[1], blk[2], isa), func(b *testing.B) {
				native.SetAVX512(isa == "avx512")
				kern := dotKernel(b, blk[0], blk[1], blk[2], true, false, false, false, false)
				nk, err := native.Compile(kern)
				if err != nil {
					b.Fatal(err)
				}
				defer nk.Free()
				grid := tile.Grid{m / blk[0], n / blk[1]}
				best := time.Duration(math.MaxInt64)
				pool.Default().ReadProcs() // -cpu's GOMAXPROCS from the first launch
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					t0 := time.Now()
					if err := nk.Launch(grid, av, bv, c0, out, m, n, k); err != nil {
						b.Fatal(err)
					}
					best = min(best, time.Since(t0))
				}
				b.ReportMetric(2*m*n*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				b.ReportMetric(2*m*n*k/best.Seconds()/1e9, "best-GFLOP/s")
			})
		}
	}
}

// BenchmarkProducts: the bench's product shapes (linear_gelu 1024³;
// mlp_step large's x·w1 (A×B over K 784), its weight gradient xᵀ·dh
// (Aᵀ×B, 784×1024 over K 512), and A×Bᵀ over K 1024 and over K 16 (its
// dh = dy·w2ᵀ)) as graphpass writes them for the native CPU target (K
// steps of 64 and a tail step), at 64×64 and 128×128 tiles (what 16 and 2
// cores get). It reports GFLOP/s, and those of the fastest launch
// (best-GFLOP/s); -cpu 1,16 gives one core and sixteen.
func BenchmarkProducts(b *testing.B) {
	for _, c := range []struct {
		name    string
		m, n, k int
		tA, tB  bool
	}{
		{"AB_1024x1024x1024", 1024, 1024, 1024, false, false},
		{"AB_512x1024x784", 512, 1024, 784, false, false},
		{"AtB_784x1024x512", 784, 1024, 512, true, false},
		{"ABt_512x1024x1024", 512, 1024, 1024, false, true},
		{"ABt_512x1024x16", 512, 1024, 16, false, true},
	} {
		rng := tiletest.RNG(c.name)
		av, bv := tiletest.Uniform(rng, c.m*c.k, -1, 1), tiletest.Uniform(rng, c.k*c.n, -1, 1)
		out := make([]float32, c.m*c.n)
		bk := tile.MinDotDim
		for bk < 64 && 2*bk <= c.k {
			bk *= 2
		}
		for _, side := range []int{64, 128} {
			b.Run(fmt.Sprintf("%s/%dx%d", c.name, side, side), func(b *testing.B) {
				benchProduct(b, c.m, c.n, c.k, side, side, bk, c.tA, c.tB, av, bv, out)
			})
		}
	}
}

// BenchmarkProductTiles: the convnet's products whose columns 64-wide
// tiles pad (288, 576), at the tiles of 64 or 128 and at those of three
// times a power of two that pad nothing (graphpass wholeSide), and its
// forward products with a as stored row by row or transposed.
func BenchmarkProductTiles(b *testing.B) {
	for _, c := range []struct {
		m, n, k, bm, bn int
		tA, tB          bool
	}{
		{19600, 288, 64, 128, 64, false, false},
		{19600, 288, 64, 128, 96, false, false},
		{4900, 576, 128, 128, 128, false, false},
		{4900, 576, 128, 128, 64, false, false},
		{4900, 576, 128, 128, 96, false, false},
		{4900, 576, 128, 128, 192, false, false},
		{64, 288, 1280, 64, 64, true, true},
		{64, 288, 1280, 64, 96, true, true},
		// the forward products, a (the patches) as stored row by row and
		// column by column (graphpass columnMajor)
		{19600, 64, 288, 128, 64, false, false},
		{19600, 64, 288, 128, 64, true, false},
		{4900, 128, 576, 128, 128, false, false},
		{4900, 128, 576, 128, 128, true, false},
		// the col2im's products dY·W computed as their transposes Wᵀ·dYᵀ
		// (graphpass transposedProducts), both operands read transposed,
		// beside the row-major forms above (19600×288×64, 4900×576×128)
		{288, 19600, 64, 96, 128, true, true},
		{288, 19600, 64, 96, 256, true, true},
		{288, 19600, 64, 96, 64, true, true},
		{576, 4900, 128, 192, 128, true, true},
		{576, 4900, 128, 128, 128, true, true},
	} {
		name := fmt.Sprintf("%dx%dx%d/%dx%d", c.m, c.n, c.k, c.bm, c.bn)
		if c.tA || c.tB {
			name += fmt.Sprintf("/tA=%v,tB=%v", c.tA, c.tB)
		}
		rng := tiletest.RNG(name)
		av, bv := tiletest.Uniform(rng, c.m*c.k, -1, 1), tiletest.Uniform(rng, c.k*c.n, -1, 1)
		out := make([]float32, c.m*c.n)
		b.Run(name, func(b *testing.B) {
			benchProduct(b, c.m, c.n, c.k, c.bm, c.bn, 64, c.tA, c.tB, av, bv, out)
		})
	}
}

// BenchmarkProductPitch: the encoder's FF1 (1024×1024 over K 256) and
// FF2 (1024×256 over K 1024) products, the same FLOPs, their outputs' rows
// as the shape has them (4 KiB and 1 KiB apart) and 64 bytes farther
// apart: whether rows a multiple of 4 KiB apart (the same L1 sets, many
// rows of a micro-tile at once) cost a product its stores.
func BenchmarkProductPitch(b *testing.B) {
	for _, c := range []struct{ m, n, k, bm, bn int }{
		{1024, 1024, 256, 128, 128},
		{1024, 1024, 256, 64, 64},
		{1024, 256, 1024, 64, 64},
		{1024, 256, 1024, 128, 128},
	} {
		rng := tiletest.RNG("BenchmarkProductPitch")
		av, bv := tiletest.Uniform(rng, c.m*c.k, -1, 1), tiletest.Uniform(rng, c.k*c.n, -1, 1)
		for _, pad := range []int{0, 16} {
			for _, gelu := range []bool{false, true} {
				out := make([]float32, c.m*(c.n+pad))
				var out2 []float32
				name := fmt.Sprintf("%dx%dx%d/%dx%d/ldc=%d", c.m, c.n, c.k, c.bm, c.bn, c.n+pad)
				if gelu {
					out2 = make([]float32, c.m*(c.n+pad))
					name += "/gelu"
				}
				b.Run(name, func(b *testing.B) {
					benchProductPitch(b, c.m, c.n, c.k, c.bm, c.bn, 64, c.n+pad, false, false, av, bv, out, out2)
				})
			}
		}
	}
}

// BenchmarkProductEpilogue: the encoder's FF1 (1024×1024 over K 256 at
// 128×128 tiles) with each epilogue of productKernelPitch — none, GELU's
// tanh form stored beside the product, a bias and GELU's exp form stored
// beside the pre-activation (as graphpass writes the encoder's FF1 in its
// forward+backward) — and its outputs rotating through 1, 8 or 32 sets
// (each written once before: out of the caches from 8 sets, 64 MiB, on
// the hosts' 2 MiB L2s, in DRAM from 32 on a 105 MiB L3), to tell the
// epilogue's arithmetic from its stores. µs a launch.
func BenchmarkProductEpilogue(b *testing.B) {
	const m, n, k, side = 1024, 1024, 256, 128
	rng := tiletest.RNG("BenchmarkProductEpilogue")
	av, bv := tiletest.Uniform(rng, m*k, -1, 1), tiletest.Uniform(rng, k*n, -0.0625, 0.0625)
	bias := tiletest.Uniform(rng, n, -0.1, 0.1)
	outs := make([][2][]float32, 32)
	for i := range outs {
		outs[i] = [2][]float32{make([]float32, m*n), make([]float32, m*n)}
		for j := range outs[i] {
			for q := range outs[i][j] {
				outs[i][j][q] = 1 // its pages faulted in
			}
		}
	}
	for _, e := range []struct {
		name string
		epi  productEpilogue
	}{{"none", epiNone}, {"gelu-tanh", epiGELUTanh}, {"bias-gelu-exp", epiBiasGELU}} {
		for _, sets := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("%s/sets=%d", e.name, sets), func(b *testing.B) {
				nk, err := native.Compile(productKernelPitch(b, m, n, k, side, side, 64, n, false, false, true, e.epi))
				if err != nil {
					b.Fatal(err)
				}
				defer nk.Free()
				grid := tile.Grid{m / side, n / side}
				pool.Default().ReadProcs()
				args := make([][]any, sets)
				for i := range args {
					switch e.epi {
					case epiNone:
						args[i] = []any{av, bv, outs[i][0]}
					case epiGELUTanh:
						args[i] = []any{av, bv, outs[i][0], outs[i][1]}
					default:
						args[i] = []any{av, bv, bias, outs[i][0], outs[i][1]}
					}
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := nk.Launch(grid, args[i%sets]...); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/launch")
			})
		}
	}
}

// benchProduct times productKernel's c = a·b at bm×bn tiles in K steps of
// bk, reporting GFLOP/s and those of the fastest launch (best-GFLOP/s).
func benchProduct(b *testing.B, m, n, k, bm, bn, bk int, tA, tB bool, av, bv, out []float32) {
	benchProductPitch(b, m, n, k, bm, bn, bk, n, tA, tB, av, bv, out, nil)
}

// benchProductPitch is benchProduct with c's rows ldc elements apart, and
// where out2 is not nil its GELU stored there (productKernelPitch).
func benchProductPitch(b *testing.B, m, n, k, bm, bn, bk, ldc int, tA, tB bool, av, bv, out, out2 []float32) {
	epi := epiNone
	if out2 != nil {
		epi = epiGELUTanh
	}
	nk, err := native.Compile(productKernelPitch(b, m, n, k, bm, bn, bk, ldc, tA, tB, true, epi))
	if err != nil {
		b.Fatal(err)
	}
	defer nk.Free()
	grid := tile.Grid{tile.CDiv(m, bm), tile.CDiv(n, bn)}
	best := time.Duration(math.MaxInt64)
	flops := 2 * float64(m) * float64(n) * float64(k)
	// -cpu's GOMAXPROCS from the first launch: the pool reads it every
	// 64 dispatches, and with -cpu 1,16 a case's launches at 16 had run
	// on one core (the H100 machine's host, 2026-12-06: 512×1024×784 at
	// 128×128 102 GFLOP/s "-16")
	pool.Default().ReadProcs()
	args := []any{av, bv, out}
	if out2 != nil {
		args = append(args, out2)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := nk.Launch(grid, args...); err != nil {
			b.Fatal(err)
		}
		best = min(best, time.Since(t0))
	}
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	b.ReportMetric(flops/best.Seconds()/1e9, "best-GFLOP/s")
}

// productKernel is c = a·b as graphpass's emitMatMul writes it for a
// native CPU target: constant sizes, masks only where the blocks do not
// divide them, a transposed a ([K,M] in memory) or b ([N,K]); with
// splitK, K in whole unmasked steps of bk and the rest in one step of its
// own (the smallest power of two, at least 16, that holds it), else one
// loop masked along K where bk does not divide K.
func productKernel(t testing.TB, m, n, k, bm, bn, bk int, tA, tB, splitK bool) *tile.Kernel {
	return productKernelPitch(t, m, n, k, bm, bn, bk, n, tA, tB, splitK, epiNone)
}

// geluTanh is GELU's tanh form of x, as the bench's graphs write it:
// x/2·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
func geluTanh(b *tile.Builder, x *tile.Value) *tile.Value {
	u := b.Mul(b.Add(x, b.Mul(b.Mul(b.Mul(x, x), x), 0.044715)), 0.7978845608)
	return b.Mul(b.Mul(x, 0.5), b.Add(b.Tanh(u), 1.0))
}

// productEpilogue is what a product kernel of productKernelPitch stores.
type productEpilogue int

const (
	epiNone     productEpilogue = iota // c = a·b
	epiGELUTanh                        // c = a·b, and GELU(c) (the tanh form) in c2
	// epiBiasGELU: x = a·b + bias (a row of n, the parameter after b), GELU
	// of x in c and x in c2, GELU as graphpass writes the bench's tanh form
	// (x·2/(1 + e^(x·(−0.0713548·x² − 1.5957692)))/2: its cubic folded, the
	// tanh as a sigmoid), as the encoder's FF1 stores its activation and,
	// for the backward, its pre-activation
	epiBiasGELU
)

// productKernelPitch is productKernel with c's rows ldc elements apart
// and the epilogue epi (c2's rows ldc apart too).
func productKernelPitch(t testing.TB, m, n, k, bm, bn, bk, ldc int, tA, tB, splitK bool, epi productEpilogue) *tile.Kernel {
	b := tile.NewBuilder("product", nil)
	pa, pb := b.Ptr("a", tile.F32), b.Ptr("b", tile.F32)
	var pbias, pc2 *tile.Value
	if epi == epiBiasGELU {
		pbias = b.Ptr("bias", tile.F32)
	}
	pc := b.Ptr("c", tile.F32)
	if epi != epiNone {
		pc2 = b.Ptr("c2", tile.F32)
	}
	sar, sac, sbr, sbc := k, 1, n, 1
	if tA {
		sar, sac = 1, m
	}
	if tB {
		sbr, sbc = 1, k
	}
	mul := func(x *tile.Value, c int) *tile.Value {
		if c == 1 {
			return x
		}
		return b.Mul(x, c)
	}
	rm := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm)), 1)
	rn := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), bn), b.Arange(0, bn)), 0)
	and := func(x, y *tile.Value) *tile.Value {
		switch {
		case x == nil:
			return y
		case y == nil:
			return x
		}
		return b.And(x, y)
	}
	var inM, inN *tile.Value
	if m%bm != 0 {
		inM = b.Lt(rm, m)
	}
	if n%bn != 0 {
		inN = b.Lt(rn, n)
	}
	full := func(x *tile.Value, r, c int) *tile.Value {
		if x == nil {
			return nil
		}
		return b.BroadcastTo(x, tile.Shp(r, c))
	}
	load := func(p *tile.Value, mask *tile.Value) *tile.Value {
		if mask == nil {
			return b.Load(p, nil, nil)
		}
		return b.Load(p, mask, 0.0)
	}
	step := func(bk int, masked bool) func(k0 *tile.Value, c []*tile.Value) []*tile.Value {
		rkRow, rkCol := b.ExpandDims(b.Arange(0, bk), 0), b.ExpandDims(b.Arange(0, bk), 1)
		offA, offB := b.Add(mul(rm, sar), mul(rkRow, sac)), b.Add(mul(rkCol, sbr), mul(rn, sbc))
		return func(k0 *tile.Value, c []*tile.Value) []*tile.Value {
			maskA, maskB := inM, inN
			if masked {
				maskA, maskB = and(inM, b.Lt(b.Add(rkRow, k0), k)), and(b.Lt(b.Add(rkCol, k0), k), inN)
			}
			av := load(b.AddPtr(pa, b.Add(offA, mul(k0, sac))), full(maskA, bm, bk))
			bv := load(b.AddPtr(pb, b.Add(offB, mul(k0, sbr))), full(maskB, bk, bn))
			return []*tile.Value{b.Dot(av, bv, c[0], tile.PrecIEEE)}
		}
	}
	acc := []*tile.Value{b.Zeros(tile.F32, bm, bn)}
	if rest := k % bk; splitK && rest != 0 {
		if k > rest {
			acc = b.For(0, k-rest, bk, acc, step(bk, false))
		}
		bt := tile.MinDotDim
		for bt < rest {
			bt *= 2
		}
		acc = b.For(k-rest, k, bt, acc, step(bt, rest != bt))
	} else {
		acc = b.For(0, k, bk, acc, step(bk, k%bk != 0))
	}
	at, mask := b.Add(b.Mul(rm, ldc), rn), full(and(inM, inN), bm, bn)
	switch epi {
	case epiNone:
		b.Store(b.AddPtr(pc, at), acc[0], mask)
	case epiGELUTanh:
		b.Store(b.AddPtr(pc, at), acc[0], mask)
		b.Store(b.AddPtr(pc2, at), geluTanh(b, acc[0]), mask)
	case epiBiasGELU:
		x := b.Add(acc[0], load(b.AddPtr(pbias, b.BroadcastTo(rn, tile.Shp(bm, bn))), full(inN, bm, bn)))
		z := b.Mul(x, b.Add(b.Mul(b.Mul(x, x), -0.07135481387376785), -1.5957691669464111))
		b.Store(b.AddPtr(pc, at), b.Mul(b.Mul(x, b.Div(2.0, b.Add(b.Exp(z), 1.0))), 0.5), mask)
		b.Store(b.AddPtr(pc2, at), x, mask)
	}
	kern, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return kern
}

// BenchmarkSwappedProducts: products whose operands are both read across
// their rows (a stored [K][M], b stored [N][K]: the convnet's weight
// gradients and its col2im's products computed as their transposes) as
// written, b's tile turned back in the frame every K step, against
// computed as their transpose (graphpass: swapDot), dot(b's tile
// [BN,BK], a's [BK,BM]) with both tiles contiguous along their rows and
// the accumulator stored through a transpose. K a multiple of 64 (the
// convnet's 19,600 and 4,900 rounded down).
func BenchmarkSwappedProducts(b *testing.B) {
	for _, c := range []struct{ m, n, k, bm, bn int }{
		{64, 288, 19584, 64, 96},
		{32, 288, 19584, 32, 96},
		{128, 576, 4864, 64, 96},
		{128, 576, 4864, 128, 96},
		{288, 19584, 64, 96, 128},
		{576, 4864, 128, 192, 128},
	} {
		name := fmt.Sprintf("%dx%dx%d/%dx%d", c.m, c.n, c.k, c.bm, c.bn)
		rng := tiletest.RNG(name)
		av, bv := tiletest.Uniform(rng, c.m*c.k, -1, 1), tiletest.Uniform(rng, c.k*c.n, -1, 1)
		out := make([]float32, c.m*c.n)
		b.Run(name+"/as-written", func(b *testing.B) {
			benchProduct(b, c.m, c.n, c.k, c.bm, c.bn, 64, true, true, av, bv, out)
		})
		b.Run(name+"/swapped", func(b *testing.B) {
			nk, err := native.Compile(swappedProductKernel(b, c.m, c.n, c.k, c.bm, c.bn, 64))
			if err != nil {
				b.Fatal(err)
			}
			defer nk.Free()
			grid := tile.Grid{tile.CDiv(c.m, c.bm), tile.CDiv(c.n, c.bn)}
			flops := 2 * float64(c.m) * float64(c.n) * float64(c.k)
			pool.Default().ReadProcs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := nk.Launch(grid, av, bv, out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// swappedProductKernel is c = a·b for a stored [K][M] and b stored [N][K]
// as graphpass's emitMatMul writes it swapped (swapDot): program (p, q)
// computes dot(b's tile [BN,BK], a's tile [BK,BM]) over K in unmasked
// steps of bk (k a multiple of bk), masked along M and N where the
// tiles do not divide them, and stores its transpose at c's tile.
func swappedProductKernel(t testing.TB, m, n, k, bm, bn, bk int) *tile.Kernel {
	b := tile.NewBuilder("swapped_product", nil)
	pa, pb, pc := b.Ptr("a", tile.F32), b.Ptr("b", tile.F32), b.Ptr("c", tile.F32)
	rm := b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm))
	rn := b.Add(b.Mul(b.ProgramID(1), bn), b.Arange(0, bn))
	rmR, rnC := b.ExpandDims(rm, 0), b.ExpandDims(rn, 1) // [1,BM], [BN,1]
	rkR, rkC := b.ExpandDims(b.Arange(0, bk), 0), b.ExpandDims(b.Arange(0, bk), 1)
	var inM, inN *tile.Value
	if m%bm != 0 {
		inM = b.Lt(rmR, m)
	}
	if n%bn != 0 {
		inN = b.Lt(rnC, n)
	}
	load := func(p, mask *tile.Value, r, c int) *tile.Value {
		if mask == nil {
			return b.Load(p, nil, nil)
		}
		return b.Load(p, b.BroadcastTo(mask, tile.Shp(r, c)), 0.0)
	}
	offX, offY := b.Add(b.Mul(rnC, k), rkR), b.Add(b.Mul(rkC, m), rmR) // b's [BN,BK], a's [BK,BM]
	acc := b.For(0, k, bk, []*tile.Value{b.Zeros(tile.F32, bn, bm)}, func(k0 *tile.Value, c []*tile.Value) []*tile.Value {
		x := load(b.AddPtr(pb, b.Add(offX, k0)), inN, bn, bk)
		y := load(b.AddPtr(pa, b.Add(offY, b.Mul(k0, m))), inM, bk, bm)
		return []*tile.Value{b.Dot(x, y, c[0], tile.PrecIEEE)}
	})
	var mask *tile.Value
	switch {
	case inM != nil && inN != nil:
		mask = b.And(b.Lt(b.ExpandDims(rm, 1), m), b.Lt(b.ExpandDims(rn, 0), n))
	case inM != nil:
		mask = b.Lt(b.ExpandDims(rm, 1), m)
	case inN != nil:
		mask = b.Lt(b.ExpandDims(rn, 0), n)
	}
	at := b.Add(b.Mul(b.ExpandDims(rm, 1), n), b.ExpandDims(rn, 0))
	b.Store(b.AddPtr(pc, at), b.Trans(acc[0]), mask)
	kern, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return kern
}
