package fusion

import (
	"fmt"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
)

// TestSolverKernelsNative: every solver kernel (each kind, with and
// without clipping, L1 and L2, f32 and f64) is machine code on a CPU that
// runs generated code: the f64 ones went to the executor until 2026-12-07
// (their learn rates and betas are f64 scalar parameters, which the code
// generator declined). TestSolverKernels checks their values against
// Gorgonia's solvers.
func TestSolverKernelsNative(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no native code here: needs amd64 with AVX2 and FMA")
	}
	for kind := solverVanilla; kind <= solverAdaGrad; kind++ {
		for bits := range 8 {
			c := solverConfig{kind: kind, eta: 0.1, eps: 1e-8, beta1: 0.9, beta2: 0.999, decay: 0.9, momentum: 0.9,
				clip: 5, l1reg: 0.01, l2reg: 0.01, batch: 2, useClip: bits&1 != 0, useL1: bits&2 != 0, useL2: bits&4 != 0}
			for _, d := range []tile.DType{tile.F32, tile.F64} {
				t.Run(fmt.Sprintf("%v/%v/%03b", kind, d, bits), func(t *testing.T) {
					k, err := buildSolverKernel(c, d)
					if err != nil {
						t.Fatal(err)
					}
					nk, err := native.Compile(k)
					if err != nil {
						t.Fatalf("not machine code: %v", err)
					}
					nk.Free()
				})
			}
		}
	}
}
