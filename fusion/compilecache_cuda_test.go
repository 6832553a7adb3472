//go:build tilefuse_cuda

package fusion_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/fusion"
)

// TestCompileCacheOnGPU: TestCompileCacheWorkloads on the CUDA backend (a
// second machine's load takes its buffers in one hand-over and the
// stager's pinned memory from the free list); split sums add atomically,
// in the order their programs finish: within 1e-5 of the uncached
// machine's values.
func TestCompileCacheOnGPU(t *testing.T) {
	checkCacheWorkloads(t, 1e-5, fusion.WithBackend(fusion.CUDA))
}
