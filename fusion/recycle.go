package fusion

import (
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"
)

// A recycler gives the values the user can read (by default, without
// WithReuseOutputs) memory that an earlier run gave such a value and that
// the Go runtime has since proven unreachable, instead of new memory that Go
// zeroes (a large single-kernel graph spent most of its run there: softmax
// large on the 2-core VM, 16% of its samples in runtime.memclrNoHeapPointers
// under stacked and 9% more in the collections those allocations caused).
//
// Why this never overwrites a value the user still reads: a buffer the
// recycler hands out is its own allocation (make of at least minRecycled
// bytes), and a finalizer is set on its first element, which is the start
// of the allocation. The runtime runs that finalizer only once no pointer
// into the allocation is left anywhere: not the tensor, not its Data()
// slice, not a subslice, a view (a reshape, a part of a multi-output
// kernel), an unsafe.Pointer derived from them, an interface, nor anything
// reachable from another object's finalizer. Only then does the buffer go
// to the free list, which holds the only pointer to it until a run takes
// it and sets the finalizer again. What a finalizer cannot see is a pointer
// kept as a uintptr, or in C memory, and Go's rules forbid both (unsafe,
// cgo). The runtime gives the finalizer goroutine a happens-before edge from
// everything before the collection (the race detector models it), and the
// free list is behind a mutex.
//
// A taken buffer holds an old value: it is zeroed where the kernel
// accumulates into it, as the memory WithReuseOutputs reuses is; every other
// kernel, and a GPU download, writes each element.
//
// Memory comes back only when a collection runs, and a collection runs when
// the program allocates enough (GOGC): a run that takes from the free list
// allocates nothing large, so a loop that drops its values alternates
// stretches of recycled runs with stretches of new memory. With
// TILEFUSE_ASKGC=1 (askCollections; off by default since 2026-12-05, below),
// for buffers of askGCBytes or more, the recycler asks for a collection in
// the background (askGC: one at a time in the process, and one more after it
// where asked again while it ran) when a run takes the last buffer of a
// free list (so that what the runs before dropped is back for the next run:
// a loop that drops its values is recycled every run) and when a new
// buffer is allocated, the first time since a buffer last came back and
// then after 2, 4, 8, … such misses (a loop that keeps its values asks a
// few times, not every run). The free list is bounded (limit bytes: recycleLimit, 4 to 128 runs' worth of the machine's readable
// values, found at prepare); what comes back beyond it is left to the
// collector, one collection later than without a finalizer. So that little
// comes back beyond it, a new buffer gets the finalizer only while the free
// list and the buffers out with one (armed) fit the limit, and the others
// are plain memory; where armed buffers stay out for two collections (the
// user keeps them) they are written off, so that keeping values never stops
// recycling for good. close drops the free list; buffers that come back
// after it are left to the collector.
type recycler struct {
	mu     sync.Mutex
	lists  map[int]*recycleList // by size in bytes
	held   int                  // bytes on the free lists
	armed  int                  // bytes out with the finalizer set, as far as known
	limit  int
	closed bool
	// refused: the collections completed when a new buffer was first left
	// without the finalizer since one last came back (0: none was)
	refused uint64
	gcs     [1]metrics.Sample
	// fins: the finalizers queued and run, in the process
	fins [2]metrics.Sample
	// misses: new buffers of askGCBytes or more since a buffer last came
	// back
	misses int
	// counts since the machine was made, of buffers of minRecycled bytes or
	// more: taken from a free list, and allocated anew; asks, the
	// collections asked for
	recycled, allocated, asks int
	recycledBytes             int64
	// uses numbers the buffers handed out with the finalizer set, and
	// lastUse is each such buffer's number while it is out (by address:
	// a uintptr keeps nothing alive), so that a free list is kept in the
	// order the buffers were last handed out and a run takes the one
	// handed out last (recycleList)
	uses    uint64
	lastUse map[uintptr]uint64
}

// askGCBytes is the least a buffer has to be for the recycler to ask for
// collections: zeroing 4 MiB anew and faulting its pages in takes about
// half a millisecond, more than a collection of a small heap costs; at 1
// MiB (the bench's encoder_train large, one value a step) a collection a
// step cost about what it saved (the H200's host, 2026-12-02: wall over
// device 1.37× before, 1.54× with them, both within its run-to-run spread).
var askGCBytes = 4 << 20

// askCollections turns the asks on: TILEFUSE_ASKGC=1, read when the
// process starts, for measuring (tests set it). Off by default since
// 2026-12-05: they were made (2026-12-02) when Go zeroed each new buffer,
// which cost a run about what a collection did; since new buffers are left
// unzeroed (nozero.go) a run in new memory costs little more than a
// recycled one, while each asked collection stops the world twice, and on
// 16 cores each stop waits for every worker in machine code to return
// (0.34 + 0.23 ms on average, r37a). Measured without them (GOMAXPROCS=16
// on the GPU machines' hosts, `tilefuse bench -size large -runs 30 -loop`,
// medians, ms): the GPU backend's training steps (r37d, H100, two calls,
// wall) mlp_train 0.242, 0.231 → 0.218, 0.214, encoder_train 0.681, 0.619
// → 0.61, 0.624, encoder_fwd_bwd 2.36, 2.59 → 2.36, 2.33; the CPU backend
// (r37a, H200's host) LayerNorm 0.626, 0.328, 0.455 → 0.275, 0.332, 0.279,
// the other rows within their spread with ~40 collections a bench process
// instead of ~150, and (r37c, H100's host) the same medians but the worst
// runs of mlp_step and encoder_fwd_bwd 27–40 ms → 3–28; the 2-core VM
// mlp_train 4.9 → 4.31, linear_gelu 5.24, 5.15 → 4.91, 4.9.
var askCollections = os.Getenv("TILEFUSE_ASKGC") == "1"

// gcState is askGC's: 0 no collection of its running, 1 one running, 2
// one running and another asked for since it started.
var gcState atomic.Int32

// askGC starts a collection in the background, or, where one it started is
// still running (it may have begun before the memory the caller wants back
// became unreachable), one more after it: runtime.GC blocks only the
// goroutine that calls it (the collection is concurrent), and the
// finalizers of what it finds unreachable put buffers back on the free
// lists.
func askGC() {
	for {
		switch s := gcState.Load(); s {
		case 0:
			if gcState.CompareAndSwap(0, 1) {
				go func() {
					for {
						runtime.GC()
						if gcState.CompareAndSwap(1, 0) {
							return
						}
						gcState.Store(1) // asked for again while it ran
					}
				}()
				return
			}
		case 1:
			if gcState.CompareAndSwap(1, 2) {
				return
			}
		default:
			return
		}
	}
}

// recycleList is the free list of one size, in the order its buffers were
// last handed out (use: their numbers, ascending): a run takes the one
// handed out last, the likeliest still in the caches. The buffers come
// back only at collections, all those the runs since the last one dropped
// at once, in the order the finalizers happen to run; taken in that order,
// a run's value went to a buffer written up to a collection's worth of
// runs before (128 runs of 256 KiB at the bound: 32 MiB, past the L2
// caches), where the runs right after a collection now write those the
// runs just before it wrote.
type recycleList struct {
	slot *recycleSlot
	free []unsafe.Pointer
	use  []uint64
}

// recycleSlot is what a buffer's finalizer knows: its size and its
// recycler, weakly, so that a machine dropped without Close leaves its
// recycler, free lists and all, to the collector even while its last values
// (armed) live on in the user's graph; fin is the finalizer, made once so
// that setting it allocates nothing.
type recycleSlot struct {
	r     weak.Pointer[recycler]
	bytes int
	fin   func(*byte)
}

// minRecycled is the smallest buffer recycled: smaller ones are cheap to
// zero, and a finalizer costs about as much. (Tests lower it, to recycle
// small graphs' values; never below 16 bytes, the tiny allocator's.)
var minRecycled = 32 << 10

// recycleRuns is how many runs' worth of readable values a machine's free
// list holds at most, or recycleMaxRuns where that much is no more than
// recycleBytes (recycleLimit).
const recycleRuns = 4

// recycleMaxRuns and recycleBytes: small readable values are recycled up
// to recycleMaxRuns runs' worth, within recycleBytes. A loop that drops
// its values recycles about P/(P+k) of its runs (P the bound in runs, k
// the runs between two collections), and each run in new memory costs the
// collector work in proportion to its bytes (assists, more collections):
// softmax small (256 KiB a run) in a loop on the 2-core VM, bounds of 4,
// 16 and 32 runs: 31%, 64%, 78% of the runs recycled under GOMAXPROCS=1
// (24%, 56%, 71% under 2), 231, 120, 74 collections in 3000 runs, the
// collector's CPU 22, 11.5, 7.6 µs a run (40–46, 26–27, 17–18), the median
// run 24.6, 18.6, 19.1 µs (23–24, 16–17, 16–17) against about 18 (10) with
// outputs reused. On 16 cores the collections cost more (each stops the
// workers in machine code), and 32 runs within 8 MiB left the mean run of
// a loop 4–6 times the run with outputs reused; 128 runs within 32 MiB
// (2026-12-06, BenchmarkSmallRunAll "loop", the mean with collections,
// -cpu 16 on the H100 machine's host, two rounds, µs; bounds of 32, 64
// and 128 runs): softmax small 70.8, 51.3 / 38.6, 32.4 / 24.4, 24.8
// (outputs reused 7.5–12.7), LayerNorm 52.8, 40.6 / 33.6, 31.3 / 21.8,
// 23.3, the MLP step 249, 249 / 260, 205 / 210, 214 (120–141); recycled a
// run 0.70 → 0.88 (softmax); on the 2-core VM softmax 40–44 → 27–31,
// LayerNorm 34–40 → 23–26, the MLP step 307–317 → 259–281. The medians of
// `tilefuse bench -loop` (a recycled run's time) did not move.
const (
	recycleMaxRuns = 128
	recycleBytes   = 32 << 20
)

// recycleLimit is the free list's bound in bytes for a machine whose
// readable values take perRun bytes a run: recycleRuns runs' worth, or up
// to recycleMaxRuns runs' worth within recycleBytes.
func recycleLimit(perRun int) int {
	if perRun <= 0 {
		return 0
	}
	return max(recycleRuns*perRun, min(recycleMaxRuns*perRun, recycleBytes))
}

// poisonRecycled (tests) fills every buffer taken from a free list or made
// uninitialized, and not zeroed, with NaN, so that an element a kernel
// does not write shows.
var poisonRecycled bool

func newRecycler(limit int) *recycler {
	r := &recycler{lists: map[int]*recycleList{}, limit: limit, lastUse: map[uintptr]uint64{}}
	r.gcs[0].Name = "/gc/cycles/total:gc-cycles"
	r.fins[0].Name = "/gc/finalizers/queued:finalizers"
	r.fins[1].Name = "/gc/finalizers/executed:finalizers"
	return r
}

// list is the free list of buffers of the given size, made on first use
// (and dropped at once if r is closed). r.mu is held.
func (r *recycler) list(bytes int) *recycleList {
	l := r.lists[bytes]
	if l == nil {
		l = &recycleList{slot: &recycleSlot{r: weak.Make(r), bytes: bytes}}
		l.slot.fin = l.slot.back
		if !r.closed {
			r.lists[bytes] = l
		}
	}
	return l
}

// take pops a buffer of the given size from its free list, or gives nil;
// the slot is what to set its finalizer with, nil where a new buffer is not
// to have one. Where the list is empty while the runtime has finalizers
// queued that have not run, it yields the processor once first
// (runtime.Gosched) and looks again: the finalizer goroutine needs a P,
// and under GOMAXPROCS=1 a caller that runs back to back holds the only
// one, so what collections found unreachable came back only when the
// scheduler preempted the caller (every 10 ms): softmax small in a loop,
// 1 of 80 runs recycled at GOMAXPROCS=1 against 1 of 4 at 2.
func (r *recycler) take(bytes int) (*recycleSlot, unsafe.Pointer) {
	if s, p, pending := r.pop(bytes); p != nil {
		return s, p
	} else if pending {
		runtime.Gosched()
		if s, p, _ := r.pop(bytes); p != nil {
			return s, p
		}
	}
	return r.miss(bytes), nil
}

// pop takes a buffer from the list of the given size (nil where it is
// empty, and then whether finalizers are queued that have not run).
func (r *recycler) pop(bytes int) (_ *recycleSlot, _ unsafe.Pointer, pending bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.list(bytes)
	n := len(l.free)
	if n == 0 {
		metrics.Read(r.fins[:])
		return nil, nil, r.fins[0].Value.Uint64() > r.fins[1].Value.Uint64()
	}
	if n == 1 && bytes >= askGCBytes {
		r.ask() // the list's last: the next run's should be back by then
	}
	r.armed += bytes
	p := l.free[n-1]
	l.free[n-1] = nil
	l.free, l.use = l.free[:n-1], l.use[:n-1]
	r.handedOut(p)
	r.held -= bytes
	r.recycled++
	r.recycledBytes += int64(bytes)
	return l.slot, p, false
}

// miss counts a buffer of the given size allocated anew (the list was
// empty), and gives the slot to set its finalizer with, or nil where the
// buffer is not to have one.
func (r *recycler) miss(bytes int) *recycleSlot {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.list(bytes)
	r.allocated++
	if bytes >= askGCBytes {
		if r.misses&(r.misses-1) == 0 { // 0, 1, 2, 4, …
			r.ask()
		}
		r.misses++
	}
	if r.held+r.armed+bytes > r.limit {
		metrics.Read(r.gcs[:])
		gcs := r.gcs[0].Value.Uint64()
		if r.refused == 0 || gcs < r.refused+2 {
			if r.refused == 0 {
				r.refused = max(gcs, 1)
			}
			return nil
		}
		r.armed, r.refused = 0, 0 // out for two collections: kept
	}
	r.armed += bytes
	return l.slot
}

// ask asks for a collection in the background (askGC). r.mu is held.
func (r *recycler) ask() {
	if askCollections {
		r.asks++
		askGC()
	}
}

// back is the finalizer: the runtime found p's allocation unreachable.
// It runs on the finalizer goroutine.
func (s *recycleSlot) back(p *byte) {
	r := s.r.Value()
	if r == nil {
		return // the machine is gone: left to the collector
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed, r.refused, r.misses = max(0, r.armed-s.bytes), 0, 0
	use, ok := r.lastUse[uintptr(unsafe.Pointer(p))]
	delete(r.lastUse, uintptr(unsafe.Pointer(p)))
	l := r.lists[s.bytes]
	if r.closed || l == nil || r.held+s.bytes > r.limit || !ok {
		return // left to the collector
	}
	i, _ := slices.BinarySearch(l.use, use)
	l.free = slices.Insert(l.free, i, unsafe.Pointer(p))
	l.use = slices.Insert(l.use, i, use)
	r.held += s.bytes
}

// handedOut numbers buffer p, handed out with the finalizer set (a new one
// or one from a free list). r.mu is held.
func (r *recycler) handedOut(p unsafe.Pointer) {
	r.uses++
	r.lastUse[uintptr(p)] = r.uses
}

// armedNew numbers a new buffer handed out with the finalizer set.
func (r *recycler) armedNew(p unsafe.Pointer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handedOut(p)
}

// close drops the free lists: the memory goes back to the collector.
func (r *recycler) close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for _, l := range r.lists {
		clear(l.free)
		l.free, l.use = nil, nil
	}
	r.lists = nil
	r.held = 0
	clear(r.lastUse)
}

// counts are the recycler's counts (zero for nil).
func (r *recycler) counts() (recycled, allocated, asks int, recycledBytes int64) {
	if r == nil {
		return 0, 0, 0, 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.recycled, r.allocated, r.asks, r.recycledBytes
}

// recycledSlice is n elements for a value the user can read: a buffer from
// r's free list or a new one (uninitialized: Go does not zero it), zeroed
// if zero is set, set to come back to r once unreachable; with r nil or
// below minRecycled bytes, new zeroed memory. Taking from the free list
// allocates nothing.
func recycledSlice[T float32 | float64](r *recycler, n int, zero bool) []T {
	var t T
	bytes := n * int(unsafe.Sizeof(t))
	if r == nil || bytes < minRecycled {
		return make([]T, n)
	}
	s, p := r.take(bytes)
	var o []T
	if p != nil {
		o = unsafe.Slice((*T)(p), n)
		switch {
		case zero:
			clear(o)
		case poisonRecycled:
			fill(o, T(math.NaN()))
		}
	} else if zero {
		o = make([]T, n)
	} else {
		o = uninitialized[T](n) // written in full, as a recycled buffer is
		if poisonRecycled {
			fill(o, T(math.NaN()))
		}
	}
	if s != nil {
		if p == nil {
			r.armedNew(unsafe.Pointer(unsafe.SliceData(o)))
		}
		// &o[0] is the start of its allocation (make or mallocgc of more than the tiny
		// allocator's 16 bytes), as SetFinalizer requires
		runtime.SetFinalizer((*byte)(unsafe.Pointer(unsafe.SliceData(o))), s.fin)
	}
	return o
}

func fill[T float32 | float64](o []T, v T) {
	for i := range o {
		o[i] = v
	}
}
