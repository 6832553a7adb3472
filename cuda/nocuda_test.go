//go:build !tilefuse_cuda

package cuda

import "testing"

// TestConformanceGPU is the untagged twin of the GPU conformance run.
func TestConformanceGPU(t *testing.T) {
	t.Skip("built without -tags tilefuse_cuda: the GPU conformance run needs the CUDA build and a GPU (see README, scripts/gpu-build.sh)")
}

// TestPackedAndGraphOnGPU is the untagged twin of the packed launches' and
// CUDA graphs' check.
func TestPackedAndGraphOnGPU(t *testing.T) {
	t.Skip("built without -tags tilefuse_cuda: packed launches and CUDA graphs need the CUDA build and a GPU")
}

// TestWarpSpecialisedProductOnGPU is the untagged twin of the check of the
// warp-specialised wgmma product on the device.
func TestWarpSpecialisedProductOnGPU(t *testing.T) {
	t.Skip("built without -tags tilefuse_cuda: the warp-specialised wgmma product needs the CUDA build and an sm_90 GPU (see README, scripts/gpu-build.sh)")
}
