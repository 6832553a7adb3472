package bench

import (
	"flag"
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/fusion"
)

// benchSize is the size BenchmarkWorkloads builds its workloads at.
var benchSize = flag.String("bench.size", "small", "the workloads' size in BenchmarkWorkloads (small, large)")

// BenchmarkWorkloads runs each standard workload at -bench.size (small by
// default) in Gorgonia's tape machine and fused on the CPU, for profiling
// (go test -run xxx -bench Workloads/layernorm -cpuprofile cpu.out ./bench,
// -args -bench.size large). Numbers go through the bench CLI, not this.
func BenchmarkWorkloads(b *testing.B) {
	for _, w := range Workloads {
		for _, mode := range []string{Gorgonia, Fused} {
			b.Run(w.Name+"/"+mode, func(b *testing.B) {
				s, err := w.Build(*benchSize)
				if err != nil {
					b.Fatal(err)
				}
				for n, v := range s.Inputs {
					if err := G.Let(n, v); err != nil {
						b.Fatal(err)
					}
				}
				var vm machine
				if mode == Gorgonia {
					vm = G.NewTapeMachine(s.Graph)
				} else {
					m := fusion.NewTapeMachine(s.Graph)
					if err := m.Err(); err != nil {
						b.Fatal(err)
					}
					vm = m
				}
				defer vm.Close()
				for b.Loop() {
					if err := vm.RunAll(); err != nil {
						b.Fatal(err)
					}
					vm.Reset()
				}
				if m, ok := vm.(*fusion.Machine); ok && b.N > 0 {
					// a loop of runs as a user writes it (no collection
					// between them): how often a readable value's memory
					// was new (zeroed, its pages faulted in) and how often
					// recycled
					st := m.Stats()
					b.ReportMetric(float64(st.Allocated)/float64(b.N), "new-buffers/op")
					b.ReportMetric(float64(st.Recycled)/float64(b.N), "recycled/op")
				}
			})
		}
	}
}
