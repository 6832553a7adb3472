// Package pool is the CPU backend's persistent worker pool: one goroutine
// per core, started once, woken once per dispatch. A dispatch splits a
// range of work items (a kernel's program instances) into one static chunk
// per worker, runs the first chunk on the caller's goroutine and waits for
// the rest; small work runs on the caller alone, without waking anyone.
// Nothing is allocated per dispatch.
//
// One dispatch uses the workers at a time: a dispatch from another
// goroutine while one is in flight runs on its caller alone (it neither
// waits nor fails), so concurrent launches stay correct and the pool
// never deadlocks when a task dispatches again.
package pool

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Task is work over a range of items: Run(w, lo, hi) does items [lo, hi)
// as worker w (0 is the caller). Run is called concurrently for disjoint
// ranges.
type Task interface {
	Run(w, lo, hi int)
}

// Pool is a set of worker goroutines.
type Pool struct {
	n     int // workers, the caller included
	start sync.Once
	busy  sync.Mutex
	wake  []chan struct{}

	// the dispatch in flight
	task    Task
	chunks  []int // chunk w is [chunks[w], chunks[w+1])
	pending atomic.Int32
	done    chan struct{}
}

// New is a pool of n workers, the caller of each dispatch included; n ≤ 0
// means GOMAXPROCS.
func New(n int) *Pool {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	return &Pool{n: n, chunks: make([]int, n+1), done: make(chan struct{}, 1)}
}

var std = New(0)

// Default is the process's pool, sized to GOMAXPROCS when first made.
func Default() *Pool { return std }

// Workers is the number of workers, the caller included.
func (p *Pool) Workers() int { return p.n }

func (p *Pool) startWorkers() {
	p.wake = make([]chan struct{}, p.n)
	for w := 1; w < p.n; w++ {
		p.wake[w] = make(chan struct{}, 1)
		go p.worker(w)
	}
}

func (p *Pool) worker(w int) {
	for range p.wake[w] {
		p.task.Run(w, p.chunks[w], p.chunks[w+1])
		if p.pending.Add(-1) == 0 {
			p.done <- struct{}{}
		}
	}
}

// Do runs t over items [0, total): on the caller alone when parallel is
// false, total is below 2, the pool has one worker or another dispatch
// holds the workers; else in up to Workers static chunks of equal size,
// the first on the caller.
func (p *Pool) Do(t Task, total int, parallel bool) {
	if !parallel || total < 2 || p.n < 2 || !p.busy.TryLock() {
		if total > 0 {
			t.Run(0, 0, total)
		}
		return
	}
	defer p.busy.Unlock()
	p.start.Do(p.startWorkers)
	k := min(p.n, total)
	for w := 0; w <= k; w++ {
		p.chunks[w] = total * w / k
	}
	p.task = t
	p.pending.Store(int32(k - 1))
	for w := 1; w < k; w++ {
		p.wake[w] <- struct{}{}
	}
	t.Run(0, p.chunks[0], p.chunks[1])
	if k > 1 {
		<-p.done
	}
	p.task = nil
}
