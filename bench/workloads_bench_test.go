package bench

import (
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/fusion"
)

// BenchmarkWorkloads runs each standard workload at its small size in
// Gorgonia's tape machine and fused on the CPU, for profiling
// (go test -run xxx -bench Workloads/layernorm -cpuprofile cpu.out ./bench).
// Numbers go through the bench CLI, not this.
func BenchmarkWorkloads(b *testing.B) {
	for _, w := range Workloads {
		for _, mode := range []string{Gorgonia, Fused} {
			b.Run(w.Name+"/"+mode, func(b *testing.B) {
				s, err := w.Build("small")
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
			})
		}
	}
}
