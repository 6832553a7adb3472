//go:build tilefuse_cuda

package fusion_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/tile"
)

// TestPaddedOperandsOnGPU: TestPaddedOperands on the device: the pad
// kernels and the product reading their copies, at TF32, bf16 and the
// default precision (3xTF32 on Hopper, where padOperands asks
// DefaultPrecision), against the float64 reference.
func TestPaddedOperandsOnGPU(t *testing.T) {
	gpu := func(o ...fusion.Option) []fusion.Option {
		return append([]fusion.Option{fusion.WithBackend(fusion.CUDA), fusion.WithMatMulFusion(true)}, o...)
	}
	checkPadded(t, []padCase{
		{"tf32", 1030, 517, 519, gpu(fusion.WithPrecision(tile.PrecTF32)), tile.PrecTF32, 2},
		{"bf16, k aligned", 1030, 516, 519, gpu(fusion.WithPrecision(tile.PrecBF16)), tile.PrecBF16, 1},
		{"default (3xTF32)", 1030, 517, 519, gpu(), tile.PrecTF32x3, 2},
		{"ieee", 1030, 517, 519, gpu(fusion.WithPrecision(tile.PrecIEEE)), tile.PrecIEEE, 0},
	})
}
