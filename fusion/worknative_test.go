package fusion_test

import (
	"regexp"
	"testing"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/fusion"
)

// loneMoves are the unfused mode's kernels that are one Repeat, Slice or
// Concat alone: their flat indices divide the lanes (a broadcast's
// repeated axis, a slice's or a concatenation's rows), which the machine
// code does not do, so they run on the executor. Fused, such ops join
// their readers' kernels (none is alone in any fused workload).
var loneMoves = regexp.MustCompile(`\{(Repeat\d+|T\[[^{}]*\]|Concat\(axis=\d+\))\}$`)

// TestWorkloadKernelsNative: every kernel of every bench workload, at
// both sizes, fused, compiles to machine code on this CPU, and so does
// every kernel of the unfused mode (one kernel an op, the bench's
// baseline) but its lone moves (loneMoves): a kernel the code generator
// declines runs on the executor, several times slower, and nothing else
// would say so (an im2col of 7 × 7 images in blocks along its patch's
// columns, which its arithmetic divides, took a convnet's unfused step
// from 15 to 198 ms on the 2-core VM).
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
					if fused {
						allNative(t, vm)
						return
					}
					kernels, moves := nativeBut(t, vm, func(f *fusion.FusedOp) bool { return loneMoves.MatchString(f.String()) })
					if moves > 0 {
						t.Logf("%d of %d kernels lone moves on the executor", moves, kernels)
					}
				})
			}
		}
	}
}
