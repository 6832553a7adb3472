package native_test

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/codegen/cpu/pool"
)

// BenchmarkSplit: a row kernel's launch on the caller alone against the
// same launch split over every worker of the pool (the threshold at 1 ns:
// min(GOMAXPROCS, CPUs) of them), on the same buffers (a
// kernel's speed depends on where its buffers lie, so launches of other
// buffers, or of another process, do not compare), in blocks of 200
// launches alternating, each launch timed: min and median µs of each
// ("alone-us", "split-us") and their ratio of medians ("split/alone").
// Rows of 1024 f32, one row a program; the rows from 4 (a launch far
// under the threshold) to 256. Run it under GOMAXPROCS 2 or more
// (-cpu 2,16): at 1 the split runs alone too.
func BenchmarkSplit(b *testing.B) {
	requireJIT(b)
	const cols = 1024
	for _, wl := range []string{"softmax", "layernorm"} {
		for _, rows := range []int{4, 8, 16, 32, 64, 128, 256} {
			b.Run(fmt.Sprintf("%s/%dx%d", wl, rows, cols), func(b *testing.B) {
				if runtime.GOMAXPROCS(0) < 2 {
					b.Skip("GOMAXPROCS 1: nothing to split over")
				}
				pool.Default().ReadProcs() // -cpu's GOMAXPROCS from the first launch
				launch, l, x, y := rowBench(b, wl, rows, cols)
				defer native.SetParallelNs(native.SetParallelNs(0))
				var times [2][]float64
				const block = 200
				for b.Loop() {
					for mode := range 2 {
						native.SetParallelNs([]float64{1e18, 1}[mode])
						for i := range block + 20 {
							t0 := time.Now()
							if err := launch(l, x, y); err != nil {
								b.Fatal(err)
							}
							if i >= 20 { // the first after a switch wake the workers
								times[mode] = append(times[mode], float64(time.Since(t0).Nanoseconds())/1e3)
							}
						}
					}
				}
				med := func(x []float64) float64 { slices.Sort(x); return x[len(x)/2] }
				a, s := med(times[0]), med(times[1])
				b.ReportMetric(times[0][0], "alone-min-us")
				b.ReportMetric(a, "alone-us")
				b.ReportMetric(times[1][0], "split-min-us")
				b.ReportMetric(s, "split-us")
				b.ReportMetric(s/a, "split/alone")
			})
		}
	}
}
