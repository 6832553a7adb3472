package fusion_test

import (
	"runtime"
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/fusion"
)

// BenchmarkSmallRunAll is the fixed cost of a small fused graph on the CPU
// backend, as the bench meets it: RunAll of the bench's softmax, LayerNorm
// and MLP step at size small (machine code, the default options, so the
// readable values take fresh or recycled memory), in a loop of runs
// ("loop") and one run after a collection, as bench.Graph times each run
// ("aftergc": the collection is not timed), and in a loop with
// WithReuseOutputs ("reuse": no allocation, the kernels' time and the
// machine's least fixed cost). Profile with
// -cpuprofile; compare GOMAXPROCS with -cpu 1,2,16.
func BenchmarkSmallRunAll(b *testing.B) {
	for _, name := range []string{"softmax", "layernorm", "mlp_step"} {
		w, _ := bench.Lookup(name)
		s, err := w.Build("small")
		if err != nil {
			b.Fatal(err)
		}
		for n, v := range s.Inputs {
			if err := G.Let(n, v); err != nil {
				b.Fatal(err)
			}
		}
		vm := fusion.NewTapeMachine(s.Graph)
		if err := vm.Err(); err != nil {
			b.Fatal(err)
		}
		reused := fusion.NewTapeMachine(s.Graph, fusion.WithReuseOutputs(true))
		if err := reused.Err(); err != nil {
			b.Fatal(err)
		}
		for _, mode := range []string{"loop", "aftergc", "reuse", "reuse-aftergc"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				vm := vm
				if mode == "reuse" || mode == "reuse-aftergc" {
					vm = reused
				}
				b.ReportAllocs()
				for b.Loop() {
					if mode == "aftergc" || mode == "reuse-aftergc" {
						b.StopTimer()
						runtime.GC()
						b.StartTimer()
					}
					if err := vm.RunAll(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		vm.Close()
		reused.Close()
	}
}
