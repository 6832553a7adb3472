//go:build tilefuse_cuda

package fusion_test

import (
	"fmt"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/cuda"
)

// TestSolverOnGPU runs the fused solvers' kernels on the GPU (parameters,
// gradients and state through host buffers: cuda.Launcher), against
// Gorgonia's solver: the MLP's 100 steps of Adam, RMSProp and Momentum
// and the shorter cases, float32 and float64. Tolerances (as in
// TestSolverMatchesGorgonia, max over each tensor): 1e-10 and 1e-4, looser
// than on the CPU because ptxas may contract PTX's mul and add into fused
// multiply-adds, one rounding less per step, which the solvers carry.
func TestSolverOnGPU(t *testing.T) {
	dev, err := cuda.Open(0)
	if err != nil {
		t.Fatalf("no usable GPU: %v", err)
	}
	defer dev.Close()
	gpu := &cuda.Launcher{Dev: dev, NumWarps: 4}
	for _, c := range solverCases() {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			tol := 1e-10
			if dt == tensor.Float32 {
				tol = 1e-4
			}
			t.Run(c.name+"/"+dt.String(), func(t *testing.T) {
				solverAgainstGorgonia(t, c.new, c.steps, dt, tol, gpu)
			})
		}
	}
}

// TestSolverKernelsOnGPU runs every solver kernel shape on the GPU over
// 1, 1000 and 2500 elements (poison past the end), three steps against
// Gorgonia's solver; tolerances 1e-12 and 1e-5 (one step's contraction).
// scripts/gpu-run.sh runs it under compute-sanitizer memcheck too.
func TestSolverKernelsOnGPU(t *testing.T) {
	dev, err := cuda.Open(0)
	if err != nil {
		t.Fatalf("no usable GPU: %v", err)
	}
	defer dev.Close()
	gpu := &cuda.Launcher{Dev: dev, NumWarps: 4}
	for name, mk := range solverConfigs(t) {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			tol := 1e-12
			if dt == tensor.Float32 {
				tol = 1e-5
			}
			for _, n := range []int{1, 1000, 2500} {
				t.Run(fmt.Sprintf("%s/%v/%d", name, dt, n), func(t *testing.T) {
					solverKernelAgainstGorgonia(t, mk, n, dt, tol, gpu)
				})
			}
		}
	}
}
