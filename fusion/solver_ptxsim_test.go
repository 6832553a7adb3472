package fusion_test

import (
	"fmt"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
)

// TestSolverOnPTXSim runs the fused solvers' PTX, as codegen lowers it for
// the GPU, in the PTX simulator: the MLP's training against Gorgonia's
// solver (every case of TestSolverMatchesGorgonia, at most 20 steps) and
// every kernel shape over 2500 elements (three programs, the last partly
// masked, poison past the end), sm_80 and sm_90 in turn, at the CPU
// tests' tolerances. The simulator runs PTX's mul and add as written; a GPU
// may contract them into fused multiply-adds (TestSolverOnGPU's tolerance).
func TestSolverOnPTXSim(t *testing.T) {
	arch := 80
	next := func() *ptxsim.Launcher {
		arch = 170 - arch // 80, 90, 80, …
		return &ptxsim.Launcher{Arch: arch}
	}
	for _, c := range solverCases() {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			tol := 1e-13
			if dt == tensor.Float32 {
				tol = 1e-5
			}
			t.Run("mlp/"+c.name+"/"+dt.String(), func(t *testing.T) {
				solverAgainstGorgonia(t, c.new, min(c.steps, 20), dt, tol, next())
			})
		}
	}
	if testing.Short() {
		t.Skip("-short: the MLP cases only; the full run simulates every kernel shape")
	}
	for name, mk := range solverConfigs(t) {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			tol := 1e-13
			if dt == tensor.Float32 {
				tol = 1e-5
			}
			t.Run(fmt.Sprintf("kernel/%s/%v", name, dt), func(t *testing.T) {
				solverKernelAgainstGorgonia(t, mk, 2500, dt, tol, next())
			})
		}
	}
}
