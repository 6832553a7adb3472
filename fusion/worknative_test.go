package fusion_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/fusion"
)

// TestWorkloadKernelsNative: every kernel of every bench workload, at
// both sizes, fused, compiles to machine code on this CPU, and so does
// every kernel of the unfused mode (one kernel an op, the bench's
// baseline): a kernel the code generator declines runs on the executor,
// several times slower, and nothing else would say so (an im2col of 7 × 7
// images in blocks along its patch's columns, which its arithmetic
// divides, took a convnet's unfused step from 15 to 198 ms on the 2-core
// VM; the unfused mode's lone Repeat, Slice and Concat kernels, whose
// flat blocks divided their lanes, ran there until 2026-12-06: graphpass
// moveLanes).
func TestWorkloadKernelsNative(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no machine code in this build (not amd64 with AVX2 and FMA, or -tags purego)")
	}
	for _, wl := range bench.Workloads {
		for _, size := range []string{"small", "large"} {
			for _, fused := range []bool{true, false} {
				name := wl.Name + "/" + size + "/unfused"
				if fused {
					name = wl.Name + "/" + size + "/fused"
				}
				t.Run(name, func(t *testing.T) {
					spec, err := wl.Build(size)
					if err != nil {
						t.Fatal(err)
					}
					vm := fusion.NewTapeMachine(spec.Graph, fusion.WithFusion(fused))
					defer vm.Close()
					if err := vm.Err(); err != nil {
						t.Fatal(err)
					}
					allNative(t, vm)
				})
			}
		}
	}
}
