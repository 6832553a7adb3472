//go:build tilefuse_cuda

package cuda

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

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
	randomOnGPU(t, 1000, tiletest.Random, tiletest.CompareRandom)
}

// TestRandomMoreKernelsGPU is TestRandomKernelsGPU for RandomMore's
// kernels (rank-3 reductions, integer reductions, nested loops; default
// 300, -short 200).
func TestRandomMoreKernelsGPU(t *testing.T) {
	randomOnGPU(t, 300, tiletest.RandomMore, tiletest.CompareRandomMore)
}

func randomOnGPU(t *testing.T, n int, gen func([]byte) tiletest.Case, compare func(tiletest.Launcher, []byte) error) {
	if testing.Short() {
		n = min(n, 200)
	}
	if s := os.Getenv("TILEFUSE_RANDOM_KERNELS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	from := 0 // TILEFUSE_RANDOM_FROM: the first kernel run (a round split over calls)
	if s := os.Getenv("TILEFUSE_RANDOM_FROM"); s != "" {
		from, _ = strconv.Atoi(s)
	}
	bad, refused := 0, 0
	// A kernel that does not finish (a barrier no warp reaches) would
	// leave the test silent until its timeout: the watchdog names it.
	var cur atomic.Pointer[string]
	var since atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if p := cur.Load(); p != nil && time.Since(time.Unix(0, since.Load())) > 30*time.Second {
					fmt.Fprintf(os.Stderr, "random kernel still running after 30 s: %s\n", *p)
				}
			}
		}
	}()
	start := time.Now()
	for i, d := range tiletest.RandomData(n, 128) {
		if i < from {
			continue
		}
		c := gen(d)
		gpu := &Launcher{Dev: dev, NumWarps: tiletest.RandomWarps(c, i)}
		name := fmt.Sprintf("#%d %s num_warps %d (data %x)", i, c.Name, gpu.NumWarps, d)
		cur.Store(&name)
		since.Store(time.Now().UnixNano())
		err := compare(gpu, d)
		if i%100 == 99 {
			t.Logf("%d kernels in %v", i+1, time.Since(start).Round(time.Millisecond))
		}
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
	t.Logf("%d random kernels agree on %s, %d refused by Compile (more shared memory than it has)", n-from-refused, dev.Name, refused)
	if refused > n/20 {
		t.Fatalf("%d of %d random kernels refused", refused, n)
	}
}
