package fusion_test

import (
	"runtime"
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/codegen/cpu/pool"
	"github.com/tilefuse/tilefuse/fusion"
)

// BenchmarkSmallRunAll is the fixed cost of a small fused graph on the CPU
// backend, as the bench meets it: RunAll of the bench's softmax, LayerNorm
// and MLP step at size small (machine code, the default options, so the
// readable values take fresh or recycled memory), in a loop of runs
// ("loop"), one run after a collection, as bench.Graph timed each run
// ("aftergc": the collection is not timed), one run after a collection and
// one untimed run, as the bench times each run now ("aftergc-warm"), and
// the same three with WithReuseOutputs ("reuse", "reuse-aftergc",
// "reuse-aftergc-warm": no allocation, the kernels' time and the machine's
// least fixed cost). recycled/run and new/run are the readable values'
// buffers (Stats.Recycled, Stats.Allocated) per RunAll, untimed ones
// included. Profile with -cpuprofile; compare GOMAXPROCS with -cpu 1,2,16.
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
		for _, mode := range []string{"loop", "aftergc", "aftergc-warm", "reuse", "reuse-aftergc", "reuse-aftergc-warm"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				vm := vm
				if mode == "reuse" || mode == "reuse-aftergc" || mode == "reuse-aftergc-warm" {
					vm = reused
				}
				pool.Default().ReadProcs() // -cpu's GOMAXPROCS from the first run
				b.ReportAllocs()
				s0 := vm.Stats()
				for b.Loop() {
					if mode != "loop" && mode != "reuse" {
						b.StopTimer()
						runtime.GC()
						if mode == "aftergc-warm" || mode == "reuse-aftergc-warm" {
							if err := vm.RunAll(); err != nil {
								b.Fatal(err)
							}
						}
						b.StartTimer()
					}
					if err := vm.RunAll(); err != nil {
						b.Fatal(err)
					}
				}
				s1 := vm.Stats()
				if runs := s1.Runs - s0.Runs; runs > 0 {
					b.ReportMetric(float64(s1.Recycled-s0.Recycled)/float64(runs), "recycled/run")
					b.ReportMetric(float64(s1.Allocated-s0.Allocated)/float64(runs), "new/run")
				}
			})
		}
		vm.Close()
		reused.Close()
	}
}
