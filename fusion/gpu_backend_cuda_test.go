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

// TestRowPatternsOnGPU: softmax and LayerNorm row kernels on the CUDA
// backend, rows within one block and rows walked in blocks.
func TestRowPatternsOnGPU(t *testing.T) {
	for _, sz := range [][2]int{{37, 781}, {6, 10007}} {
		checkSoftmaxPatterns(t, sz[0], sz[1], fusion.WithBackend(fusion.CUDA))
	}
	for _, sz := range [][2]int{{19, 300}, {3, 12289}} {
		checkLayerNorm(t, sz[0], sz[1], fusion.WithBackend(fusion.CUDA))
	}
}

// TestSoftmaxClassifierOnGPU: the classifier's 10 Adam steps on the CUDA
// backend against Gorgonia on the CPU.
func TestSoftmaxClassifierOnGPU(t *testing.T) {
	checkClassifier(t, fusion.WithBackend(fusion.CUDA))
}
