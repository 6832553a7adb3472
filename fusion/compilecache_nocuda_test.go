//go:build !tilefuse_cuda

package fusion_test

import "testing"

// TestCompileCacheOnGPU is the untagged twin of the front-end cache's check
// on the CUDA backend.
func TestCompileCacheOnGPU(t *testing.T) { t.Skip(noCUDA) }
