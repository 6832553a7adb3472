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
