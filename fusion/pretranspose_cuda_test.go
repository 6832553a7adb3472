//go:build tilefuse_cuda

package fusion_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/tile"
)

// TestWeightGradientTransposedOnceOnGPU: TestWeightGradientTransposedOnce
// on the device (an H200: Hopper's shared memory), the transpose kernel
// and the product reading its copy as A·B on wgmma.
func TestWeightGradientTransposedOnceOnGPU(t *testing.T) {
	gpu := []fusion.Option{fusion.WithBackend(fusion.CUDA)}
	checkWeightGradient(t, []weightGradCase{
		{"tf32", append(gpu, fusion.WithPrecision(tile.PrecTF32)), tile.PrecTF32, 1},
		{"tf32x3", append(gpu, fusion.WithPrecision(tile.PrecTF32x3)), tile.PrecTF32x3, 0},
	})
}
