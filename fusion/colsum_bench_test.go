package fusion_test

import (
	"fmt"
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
)

// BenchmarkColSum is the bench's colsum (Reshape(Σ[0] dy)) at both sizes
// on the CPU backend, outputs reused (no allocation: the kernel's time and
// RunAll's least fixed cost); "/16" writes the kernels for 16 cores
// (32-column programs, as the 16-core host runs them) and runs them here.
// Compare GOMAXPROCS=1 and 2 in separate processes (the pool is sized once).
func BenchmarkColSum(b *testing.B) {
	w, _ := bench.Lookup("colsum")
	for _, run := range []struct {
		size  string
		cores int
	}{{"small", 0}, {"large", 0}, {"small", 16}, {"large", 16}} {
		size := run.size
		s, err := w.Build(size)
		if err != nil {
			b.Fatal(err)
		}
		for n, v := range s.Inputs {
			if err := G.Let(n, v); err != nil {
				b.Fatal(err)
			}
		}
		opts := []fusion.Option{fusion.WithReuseOutputs(true)}
		name := size
		if run.cores > 0 {
			t := graphpass.CPU(run.cores)
			t.Native = true
			opts = append(opts, fusion.WithTarget(t))
			name = fmt.Sprintf("%s/%d", size, run.cores)
		}
		vm := fusion.NewTapeMachine(s.Graph, opts...)
		if err := vm.Err(); err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if err := vm.RunAll(); err != nil {
					b.Fatal(err)
				}
			}
		})
		vm.Close()
	}
}
