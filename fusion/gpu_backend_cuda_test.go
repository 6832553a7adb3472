//go:build tilefuse_cuda

package fusion_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/fusion"
)

// TestMLPTrainingOnGPU trains the MLP with the CUDA backend, values on the
// device for the whole graph, against Gorgonia on the CPU.
func TestMLPTrainingOnGPU(t *testing.T) {
	trainMLPAgainstGorgonia(t, 1e-11, 2e-5, fusion.WithBackend(fusion.CUDA))
}

// TestTransformerEncoderBlockOnGPU: the block forward and backward on the
// CUDA backend, against the float64 block and central differences.
func TestTransformerEncoderBlockOnGPU(t *testing.T) {
	checkEncoder(t, 1e-10, fusion.WithBackend(fusion.CUDA))
}

// TestAttentionOnGPU: the flash-style attention kernel on the CUDA backend
// (float64), against the float64 reference.
func TestAttentionOnGPU(t *testing.T) {
	checkAttention(t, 1e-10, fusion.WithBackend(fusion.CUDA))
}
