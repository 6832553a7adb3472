//go:build tilefuse_cuda

package cuda

import (
	"errors"
	"os"
	"strconv"
	"testing"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestRandomKernelsGPU runs tiletest's random kernels on the GPU and on
// the reference interpreter from the same inputs: their outputs agree
// within each kernel's error bound (tiletest.Random), as the PTX
// simulator's and the CPU backends' tests check the same kernels.
// Each runs at 4, 1, 8 or 2 warps in turn where it does not ask for its own. TILEFUSE_RANDOM_KERNELS sets
// how many (default 1000; -short 200).
func TestRandomKernelsGPU(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200
	}
	if s := os.Getenv("TILEFUSE_RANDOM_KERNELS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	bad, refused := 0, 0
	for i, d := range tiletest.RandomData(n, 128) {
		gpu := &Launcher{Dev: dev, NumWarps: tiletest.RandomWarps(tiletest.Random(d), i)}
		err := tiletest.CompareRandom(gpu, d)
		if errors.Is(err, codegen.ErrSharedMemory) {
			refused++
			continue
		}
		if err != nil {
			if bad++; bad <= 10 {
				t.Errorf("num_warps %d: %v", gpu.NumWarps, err)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d random kernels disagree on %s", bad, n, dev.Name)
	}
	t.Logf("%d random kernels agree on %s, %d refused by Compile (more shared memory than it has)", n-refused, dev.Name, refused)
	if refused > n/20 {
		t.Fatalf("%d of %d random kernels refused", refused, n)
	}
}
