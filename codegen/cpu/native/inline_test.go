package native_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/codegen/cpu/pool"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestLaunchWorkers: a launch asks for the caller alone below the
// threshold of estimated work (30 µs in most cases here), then one worker
// per half of it, up to the pool's size; a
// threshold of 0 asks for every worker (it divided by zero: int(+Inf),
// the caller alone).
func TestLaunchWorkers(t *testing.T) {
	for _, c := range []struct {
		name string
		ns   float64 // the threshold
		work float64
		n    int
		want int
	}{
		{"nothing", 30_000, 0, 16, 1},
		{"just under the threshold", 30_000, 29_999, 16, 1},
		{"at the threshold", 30_000, 30_000, 16, 2},
		{"a small softmax's 90 µs", 30_000, 90_000, 16, 6},
		{"capped by the pool", 30_000, 1e6, 16, 16},
		{"a pool of two", 30_000, 1e6, 2, 2},
		{"a pool of one", 30_000, 1e6, 1, 1},
		{"too much to count", 30_000, math.Inf(1), 16, 16},
		{"a threshold of 1 ns", 1, 5_000, 16, 16},
		{"a threshold of 0", 0, 5_000, 16, 16},
		{"a threshold of 0, nothing to do", 0, 0, 16, 16},
		{"the default's 5 µs: a small LayerNorm's 25 µs", 5_000, 25_000, 16, 10},
		{"the default's 5 µs: under it", 5_000, 4_999, 16, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer native.SetParallelNs(native.SetParallelNs(c.ns))
			if got := native.LaunchWorkers(c.work, c.n); got != c.want {
				t.Fatalf("LaunchWorkers(%v, %d) = %d, want %d", c.work, c.n, got, c.want)
			}
		})
	}
}

// TestParallelNsDefault: without TILEFUSE_PARALLEL_NS a launch splits from
// 5 µs of estimated work (measured on the 16-core host and the 2-core VM:
// kernel.go's parallelNs).
func TestParallelNsDefault(t *testing.T) {
	if v := os.Getenv("TILEFUSE_PARALLEL_NS"); v != "" {
		t.Skipf("TILEFUSE_PARALLEL_NS=%s sets the threshold", v)
	}
	was := native.SetParallelNs(0)
	native.SetParallelNs(was)
	if was != 5_000 {
		t.Fatalf("the default threshold is %v ns, want 5000", was)
	}
}

// goid is the calling goroutine's number (from its stack's header).
func goid() int {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	n, _ := strconv.Atoi(string(b[:bytes.IndexByte(b, ' ')]))
	return n
}

// TestSmallLaunchInline: a launch under the threshold runs on the calling
// goroutine in one Run, waking no worker; one well over it (where the
// pool has workers) is split into chunks. Both against float64 sums,
// outputs poisoned, lengths not a multiple of the block.
func TestSmallLaunchInline(t *testing.T) {
	requireJIT(t)
	const block = 256
	nk := vecAdd(t, block)
	for _, c := range []struct {
		name   string
		n      int
		inline bool
	}{
		{"small", 3*block + 7, true},
		{"large", 1<<22 + 5, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			progs := (c.n + block - 1) / block
			work := float64(progs) * native.Work(nk)
			want := 1
			if !c.inline {
				want = min(pool.Default().Workers(), 2)
			}
			if got := native.LaunchWorkers(work, pool.Default().Workers()); got < want || c.inline && got != 1 {
				t.Fatalf("%d programs, %.0f ns estimated: %d workers asked, want %d", progs, work, got, want)
			}
			rng := tiletest.RNG("inline-" + c.name)
			x, y := tiletest.Uniform(rng, c.n, -1, 1), tiletest.Uniform(rng, c.n, -1, 1)
			out := make([]float32, c.n)
			for i := range out {
				out[i] = float32(math.NaN())
			}
			var mu sync.Mutex
			var ids []int
			me := goid()
			native.SetRunHook(func(w int) {
				mu.Lock()
				ids = append(ids, goid())
				mu.Unlock()
			})
			defer native.SetRunHook(nil)
			if err := nk.Launch(tile.Grid{progs}, x, y, out, c.n); err != nil {
				t.Fatal(err)
			}
			native.SetRunHook(nil)
			for i := range out {
				if want := float64(x[i]) + float64(y[i]); math.Abs(float64(out[i])-want) > 1e-6*(1+math.Abs(want)) {
					t.Fatalf("out[%d] = %v, want %v", i, out[i], want)
				}
			}
			if c.inline && (len(ids) != 1 || ids[0] != me) {
				t.Fatalf("Run calls on goroutines %v, want one on the caller's (%d)", ids, me)
			}
		})
	}
}

// TestLaunchAfterGCAllocs: a launch right after a garbage collection
// allocates nothing: a kernel's tasks, each with its workers' frames, are
// kept on its own free list, which a collection does not empty (a sync.Pool's would be, and
// the bench times each run after a collection). Small (on the caller) and
// large (on the pool's workers, where there are several) launches.
func TestLaunchAfterGCAllocs(t *testing.T) {
	requireJIT(t)
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	const block = 256
	nk := vecAdd(t, block)
	for _, c := range []struct {
		name string
		n    int
	}{
		{"small", 3*block + 7},
		{"large", 1<<20 + 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := tiletest.RNG("aftergc-" + c.name)
			x, y := tiletest.Uniform(rng, c.n, -1, 1), tiletest.Uniform(rng, c.n, -1, 1)
			out := make([]float32, c.n)
			args := []any{x, y, out, c.n}
			grid := tile.Grid{(c.n + block - 1) / block}
			if err := nk.Launch(grid, args...); err != nil {
				t.Fatal(err)
			}
			if native.KeptFrames(nk) == 0 {
				t.Fatal("no frame kept after a launch")
			}
			allocs := testing.AllocsPerRun(10, func() {
				runtime.GC()
				if err := nk.Launch(grid, args...); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Fatalf("%v allocations per launch after a collection, want 0", allocs)
			}
			for i := range out {
				if want := float64(x[i]) + float64(y[i]); math.Abs(float64(out[i])-want) > 1e-6*(1+math.Abs(want)) {
					t.Fatalf("out[%d] = %v, want %v", i, out[i], want)
				}
			}
		})
	}
}

// TestConcurrentLaunches: launches of one kernel from several goroutines
// at once, each over data of its own, large enough to use the pool's
// workers (one launch at a time gets them; the others run on their
// callers): each launch's task and its workers' frames are its own, so
// every output is its own inputs' sum. Outputs poisoned with NaN, a tail
// not a multiple of the block, float64 references, 1e-6 relative.
func TestConcurrentLaunches(t *testing.T) {
	requireJIT(t)
	const block, n, goroutines, reps = 256, 1<<18 + 37, 4, 20
	nk := vecAdd(t, block)
	grid := tile.Grid{(n + block - 1) / block}
	errs := make(chan error, goroutines)
	for g := range goroutines {
		go func() {
			errs <- func() error {
				rng := tiletest.RNG(fmt.Sprintf("concurrent-%d", g))
				x, y := tiletest.Uniform(rng, n, -1, 1), tiletest.Uniform(rng, n, -1, 1)
				out := make([]float32, n)
				for rep := range reps {
					for i := range out {
						out[i] = float32(math.NaN())
					}
					if err := nk.Launch(grid, x, y, out, n); err != nil {
						return err
					}
					for i := range out {
						if want := float64(x[i]) + float64(y[i]); !(math.Abs(float64(out[i])-want) <= 1e-6*(1+math.Abs(want))) {
							return fmt.Errorf("goroutine %d, launch %d: out[%d] = %v, want %v", g, rep, i, out[i], want)
						}
					}
				}
				return nil
			}()
		}()
	}
	for range goroutines {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
