package cpu_test

import (
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/fusion"
)

// TestGeneratedF64KernelsNative runs every kernel the fusion pass
// generates for the bench workloads built in float64 (bench.BuildFloat64,
// size small) that the native code generator supports, as machine code
// and on the executor, from the inputs it had in a fused run: within
// 1e-12 + 1e-12·|x| (products: fused multiply-adds in k order on both,
// blocked differently; every other op the executor's bit for bit, sums
// along the last axis in its four partial sums; measured: the largest
// difference is reported). It reports how many kernels ran natively and
// why the others did not: with AVX-512 (f64 vectors in zmm registers)
// and without (avx2: ymm pairs, where exp, tanh, log, sigmoid and products
// are declined).
func TestGeneratedF64KernelsNative(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no native code here: needs amd64 with AVX2 and FMA")
	}
	was := native.AVX512()
	defer native.SetAVX512(was)
	isas := []string{"avx2"}
	if jit.HasAVX512() {
		isas = append(isas, "avx512")
	}
	for _, isa := range isas {
		t.Run(isa, func(t *testing.T) {
			native.SetAVX512(isa == "avx512")
			testGeneratedF64Kernels(t)
		})
	}
}

func testGeneratedF64Kernels(t *testing.T) {
	ran, total := 0, 0
	why := map[string]int{}
	worst, worstAt := 0.0, ""
	for _, wl := range bench.Workloads {
		t.Run(wl.Name, func(t *testing.T) {
			spec, err := bench.BuildFloat64(wl, "small")
			if err != nil {
				t.Fatal(err)
			}
			generatedKernels(t, spec, why, &total, func(f *fusion.FusedOp, e *cpu.Exec, run func(launch func(args []any) error) []float64) {
				k := f.Kernel()
				ex, err := cpu.NewExec(k, cpu.WithNative(false))
				if err != nil {
					t.Fatal(err)
				}
				got := run(func(args []any) error { return e.Launch(f.Grid(), args...) })
				want := run(func(args []any) error { return ex.Launch(f.Grid(), args...) })
				for i := range want {
					g, w := got[i], want[i]
					if d := math.Abs(g - w); d > worst && !math.IsNaN(d) {
						worst, worstAt = d, k.Name
					}
					if !(g == w || math.IsNaN(g) && math.IsNaN(w) || math.Abs(g-w) <= 1e-12+1e-12*math.Abs(w)) {
						t.Fatalf("%s: output[%d] = %v natively, %v on the executor\n%v", k.Name, i, g, w, k)
					}
				}
				ran++
			})
		})
	}
	var rs []string
	for s, n := range why {
		rs = append(rs, s+": "+itoa(n))
	}
	sort.Strings(rs)
	t.Logf("%d of %d generated float64 kernels ran natively and agree with the executor (largest difference %.3g, %s); not supported:\n  %s",
		ran, total, worst, worstAt, strings.Join(rs, "\n  "))
}
