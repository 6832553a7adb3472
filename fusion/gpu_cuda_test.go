//go:build tilefuse_cuda

package fusion_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/cuda"
)

// TestGeneratedKernelsOnGPU runs each random graph fused on the CPU, then
// runs every generated kernel again on the GPU, from the same input values,
// and compares the outputs (generatedKernelsAgree).
func TestGeneratedKernelsOnGPU(t *testing.T) {
	dev, err := cuda.Open(0)
	if err != nil {
		t.Fatalf("no usable GPU: %v", err)
	}
	defer dev.Close()
	generatedKernelsAgree(t, &cuda.Launcher{Dev: dev, NumWarps: 4}, 300)
}

// TestIndex64KernelsOnGPU is TestIndex64Kernels on the GPU: the H200's
// kernels that index in 64 bits (the bound lowered) against the CPU's run
// of them.
func TestIndex64KernelsOnGPU(t *testing.T) {
	dev, err := cuda.Open(0)
	if err != nil {
		t.Fatalf("no usable GPU: %v", err)
	}
	defer dev.Close()
	index64KernelsAgree(t, &cuda.Launcher{Dev: dev, NumWarps: 4})
}

// TestFlattenedGridsOnGPU is TestFlattenedGrids on the GPU: the H200's
// kernels with grids flattened onto axis 0 (the bound lowered to 4)
// against the CPU's run of them.
func TestFlattenedGridsOnGPU(t *testing.T) {
	dev, err := cuda.Open(0)
	if err != nil {
		t.Fatalf("no usable GPU: %v", err)
	}
	defer dev.Close()
	flattenedGridsAgree(t, &cuda.Launcher{Dev: dev, NumWarps: 4})
}
