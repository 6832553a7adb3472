package bench

import (
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/fusion"
)

// BenchmarkFloat64Native runs workloads built in float64 (BuildFloat64,
// at -bench.size) fused on the CPU with the native code generator
// (native) and without it (exec: fusion.WithNativeCPU(false)), side by
// side: go test -run xxx -bench Float64Native -count 5 ./bench -args
// -bench.size large. With -count, the two alternate per workload.
func BenchmarkFloat64Native(b *testing.B) {
	for _, name := range []string{"chain", "softmax", "layernorm", "linear_gelu", "attention"} {
		var wl Workload
		for _, w := range Workloads {
			if w.Name == name {
				wl = w
			}
		}
		for _, mode := range []string{"native", "exec"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				s, err := BuildFloat64(wl, *benchSize)
				if err != nil {
					b.Fatal(err)
				}
				for n, v := range s.Inputs {
					if err := G.Let(n, v); err != nil {
						b.Fatal(err)
					}
				}
				vm := fusion.NewTapeMachine(s.Graph, fusion.WithNativeCPU(mode == "native"), fusion.WithReuseOutputs(true))
				if err := vm.Err(); err != nil {
					b.Fatal(err)
				}
				defer vm.Close()
				if err := vm.RunAll(); err != nil { // compiled and warm before the timer
					b.Fatal(err)
				}
				vm.Reset()
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
