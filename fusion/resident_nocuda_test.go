//go:build !tilefuse_cuda

package fusion_test

import "testing"

const noCUDA = "built without -tags tilefuse_cuda: the CUDA backend's residency needs the tagged build and a GPU (scripts/gpu-build.sh, then .gpu/run.sh on a GPU machine); its host-side rules run here in TestInputVerdicts and TestResidencyWithGorgoniaSolver"

// TestTransfersOnGPU is the untagged twin of the transfer count on the GPU.
func TestTransfersOnGPU(t *testing.T) { t.Skip(noCUDA) }

// TestMemoryAfterCloseOnGPU is the untagged twin of the GPU memory check.
func TestMemoryAfterCloseOnGPU(t *testing.T) { t.Skip(noCUDA) }

// TestCUDAGraphsTrainingOnGPU is the untagged twin of the CUDA graphs' training check.
func TestCUDAGraphsTrainingOnGPU(t *testing.T) { t.Skip(noCUDA) }

// TestCUDAGraphsHostOpOnGPU is the untagged twin of the CUDA graphs' host-op check.
func TestCUDAGraphsHostOpOnGPU(t *testing.T) { t.Skip(noCUDA) }
