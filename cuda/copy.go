package cuda

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// copyPiece is the least a goroutine of parallelCopy copies: below two of
// them one core copies alone. On the H200's host (16 cores, 2026-12-02,
// BenchmarkParallelCopy) one core copied 1.6 MB in 46 µs (36 GB/s) and
// 2, 4 and 8 goroutines in 125, 79 and 76 µs: starting and waiting for a
// goroutine costs tens of microseconds there, more than a piece of 256
// KiB (the piece until then) takes to copy.
const copyPiece = 2 << 20

// stageWorkers is how many cores a Stager copies a piece with: 4 on a
// machine of 8 or more (a GPU host: the staging copy of a 1.6 MB batch is
// a fifth of a small training step's host time at one core's 6–12 GB/s),
// one below, where the cores are few and others' work would wait for them
// (BenchmarkParallelCopy on a loaded 2-core VM: 2 cores 0.43 ms against 1
// core's 0.27).
func stageWorkers() int {
	if runtime.GOMAXPROCS(0) >= 8 {
		return 4
	}
	return 1
}

// parallelCopy copies src into dst (which must be at least as long) over up
// to workers cores (0: GOMAXPROCS, at most 8), in pieces of at least
// copyPiece bytes; the caller copies the first piece itself and then
// waits for the others by polling, so that a caller on a locked OS thread
// (the device's, copying into the Stager's pinned slots) is not parked
// and woken again for it. It returns the number of goroutines it started.
func parallelCopy(dst, src []byte, workers int) int {
	if workers <= 0 {
		workers = min(runtime.GOMAXPROCS(0), 8)
	}
	n := min(workers, len(src)/copyPiece)
	if n < 2 {
		copy(dst, src)
		return 0
	}
	per := (len(src) + n - 1) / n
	per = (per + 63) &^ 63 // whole cache lines a piece
	var left atomic.Int32
	var wg sync.WaitGroup
	started := 0
	for at := per; at < len(src); at += per {
		end := min(len(src), at+per)
		left.Add(1)
		wg.Add(1)
		started++
		go func() {
			copy(dst[at:end], src[at:end])
			left.Add(-1)
			wg.Done()
		}()
	}
	copy(dst[:per], src[:per])
	for spins := 0; left.Load() > 0; spins++ {
		if spins == 1<<16 { // a worker not scheduled yet (a loaded machine): block
			wg.Wait()
			break
		}
	}
	return started
}
