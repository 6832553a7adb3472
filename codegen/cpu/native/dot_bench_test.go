package native_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/codegen/cpu/native"
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
