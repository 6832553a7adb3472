// Package pool is the CPU backend's persistent worker pool: one goroutine
// per core, started once. A dispatch asks for up to a number of workers
// (the caller included) and cuts a range of work items (a kernel's
// program instances) into chunks, and the chunks into one part per worker
// asked for; the caller opens the dispatch, wakes the others, and takes
// chunks itself. Each worker takes its own part's chunks from the front,
// then the others' from the back (a dispatch of k workers is joined only
// by workers 1 to k-1: one still watching after a larger dispatch leaves
// it alone), so a late worker's part is done by those that came, and the
// caller waits only for workers that joined and are still in a chunk,
// never for one that has not woken yet. A
// dispatch of one worker runs on the caller alone, without waking anyone
// (so does any dispatch while GOMAXPROCS is 1). A worker that finishes a
// dispatch, or that was woken too late to join one, watches for the next
// one for a short while (spinTime) before it parks, so that the kernels
// of a graph, which come one after another, find it awake
// (TILEFUSE_SPIN_US sets that while; 0 parks at once). A dispatch that
// wakes parked workers readies a goroutine that does nothing after them,
// so that none of them waits in the caller's runnext slot (Do). Nothing
// is allocated per dispatch.
//
// One dispatch uses the workers at a time: a dispatch from another
// goroutine while one is in flight runs on its caller alone (it neither
// waits nor fails), so concurrent launches stay correct and the pool
// never deadlocks when a task dispatches again.
package pool

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// procsEvery is how many dispatches pass between two reads of
// GOMAXPROCS.
const procsEvery = 64

// alone runs t over [0, total) on the caller.
func (p *Pool) alone(t Task, total int) {
	if total > 0 {
		t.Run(0, 0, total)
	}
}

// Task is work over a range of items: Run(w, lo, hi) does items [lo, hi)
// as worker w (0 is the caller). Run is called concurrently for disjoint
// ranges, and a worker may be given several ranges of one dispatch.
type Task interface {
	Run(w, lo, hi int)
}

// Pool.state is the dispatch's number (the high 32 bits), the bit open,
// set while it has chunks left, and the workers it asks for (the caller
// included: the want bits).
const (
	open      = 1 << 30
	wantShift = 15
	wantBits  = 1<<wantShift - 1
	wantMask  = wantBits << wantShift
	// maxWorkers bounds a pool's workers: the want bits
	maxWorkers = wantBits
	// maxGrains bounds the chunks of a dispatch: a part's bounds are 16
	// bits each
	maxGrains = 1<<16 - 1
)

// spinTime is how long a worker that finished a dispatch watches for the
// next one before it parks (where the pool has no more workers than the
// machine has CPUs: otherwise a spinning worker takes a core from one that
// has work): 50 µs on a machine of fewer than 8 CPUs, 1 ms on one of 8 or
// more (as OpenMP runtimes spin, so that the kernels of a graph whose host
// work between launches outlasts 50 µs still find the workers awake:
// the H200's 16-core host, 2026-12-02, `tilefuse bench -backend cpu -size
// small`, two rounds, medians ms, 50 µs → 1 ms: mlp_step 0.51–0.55 →
// 0.42–0.43, attention 0.16–0.18 → 0.15, the one-kernel rows within ±5%),
// or TILEFUSE_SPIN_US microseconds (0: park at once), read when the
// process starts, for measuring.
var spinTime = spinFrom(os.Getenv("TILEFUSE_SPIN_US"), runtime.NumCPU())

// spinFrom is the spin time a TILEFUSE_SPIN_US value asks for on a
// machine of cpus CPUs: the default where it is empty or not a count of
// microseconds.
func spinFrom(env string, cpus int) time.Duration {
	if us, err := strconv.Atoi(env); err == nil && us >= 0 {
		return time.Duration(us) * time.Microsecond
	}
	if cpus >= 8 {
		return time.Millisecond
	}
	return 50 * time.Microsecond
}

// Pool is a set of worker goroutines.
//
// What a dispatch writes and what its workers read or write is laid out
// so that few cache lines go from one core to another per dispatch (each
// such trip is 100–200 ns, and a worker's start is a chain of them): the
// caller writes the dispatch's line (state, task, sizes) once; a worker
// takes chunks of its own part (parts[w], a line of its own that no one
// else writes unless it steals at the end); a worker says it joined and
// left on a line of its own (flags[w]), which the caller reads to wait for
// it. Nothing is read-modify-written by every worker: a counter that every
// worker took chunks from, and a state word every worker joined and left
// by CAS, cost a trip per worker each, one after another.
type Pool struct {
	n     int // workers, the caller included
	start sync.Once
	busy  sync.Mutex
	wake  []chan struct{}
	// kick readies a goroutine that does nothing (Do says why)
	kick chan struct{}
	// parked[w] is set by worker w before it blocks on wake[w]; whoever
	// clears it sends the token that wakes it
	parked []atomic.Bool
	spin   bool
	// spinFor is how long a worker watches (spinTime; tests set it
	// before the first dispatch)
	spinFor time.Duration
	seq     uint32 // the number of the last dispatch
	done    chan struct{}
	// procs is GOMAXPROCS as last read, by the dispatch after procsAge
	// reached 0 (each dispatch counts it down)
	procs, procsAge int
	// parts[w] is the chunks of worker w's part of the dispatch in flight,
	// flags[w] what worker w joined and left (the caller's, 0, unused)
	parts []part
	flags []flags
	// wakes counts the tokens dispatches sent to parked workers (tests)
	wakes atomic.Int64

	// the dispatch: its state, which watching workers read all the
	// time, on a line of its own, written once a dispatch (a field beside
	// it that the caller wrote took the line from each watcher, and each
	// watcher took it back before the next field: a trip each, 0.6 µs
	// before the caller's first chunk on the 2-core VM); the rest on the
	// next line, written by the caller before the state and read by the
	// workers after it
	_     [64]byte
	state atomic.Uint64 // the dispatch's number, open, the workers it asks for
	_     [56]byte
	task  Task
	total int // items
	grain int // items a chunk
	k     int // parts (the workers asked for, the caller included)
	_     [64 - 16 - 8 - 8 - 8]byte
	// sleeping is set by a caller that blocks on done until its workers
	// leave; the worker that clears it sends the token
	sleeping atomic.Bool
	_        [63]byte
}

// part is the chunks of one worker's part of a dispatch not yet taken: the
// dispatch's number (the high 32 bits), the first chunk (16 bits) and the
// end (the low 16 bits). A word of another dispatch's number is the part
// untouched, all its chunks left: whoever takes the first chunk of it
// sets it, so that a dispatch writes no part but the caller's own. Its
// owner takes chunks from the front, others (at the end of their own)
// from the back, so that where every worker comes in time each runs the
// same items as in the dispatch before (a row kernel's rows, input and
// output, are still in the caches of the core that ran them last).
type part struct {
	w atomic.Uint64
	_ [56]byte
}

// flags is what worker w said of the dispatches: in, the last it joined
// (before it looks at the dispatch again: the caller waits for a worker
// that joined an open dispatch), out, the last it left.
type flags struct {
	in, out atomic.Uint32
	joins   atomic.Int64 // dispatches it ran chunks of (tests)
	_       [48]byte
}

// New is a pool of n workers, the caller of each dispatch included; n ≤ 0
// means GOMAXPROCS, or the CPUs the process may run on where those are
// fewer (GOMAXPROCS=16 on 2 CPUs: 2 workers, not 16 threads taking turns
// on two cores while the caller waits for the one the OS left out).
func New(n int) *Pool {
	if n <= 0 {
		n = min(runtime.GOMAXPROCS(0), runtime.NumCPU())
	}
	n = min(n, maxWorkers)
	return &Pool{n: n, parts: make([]part, n), flags: make([]flags, n), done: make(chan struct{}, 1), spin: spinTime > 0 && n <= runtime.NumCPU(), spinFor: spinTime}
}

var std = New(0)

// Default is the process's pool, sized when first made (New(0)).
func Default() *Pool { return std }

// Workers is the number of workers, the caller included.
func (p *Pool) Workers() int { return p.n }

// ReadProcs has the next dispatch read GOMAXPROCS again, where otherwise
// up to procsEvery dispatches after a change would ask for as many
// workers as before it: for a caller that has just changed GOMAXPROCS
// (a benchmark run with -cpu 1,16, whose first launches at 16 had run on
// the caller alone). It waits for a dispatch in flight to end.
func (p *Pool) ReadProcs() {
	p.busy.Lock()
	p.procsAge = 0
	p.busy.Unlock()
}

func (p *Pool) startWorkers() {
	p.wake = make([]chan struct{}, p.n)
	p.parked = make([]atomic.Bool, p.n)
	for w := 1; w < p.n; w++ {
		p.wake[w] = make(chan struct{}, 1)
		go p.worker(w)
	}
	p.kick = make(chan struct{})
	go func() {
		for range p.kick {
		}
	}()
}

// kick (TILEFUSE_KICK=0 turns it off, for measuring): a dispatch that
// wakes workers readies the pool's kicker after them (Do).
var kick = os.Getenv("TILEFUSE_KICK") != "0"

func (p *Pool) worker(w int) {
	var last uint32 // the last dispatch this worker joined
	for {
		// park, unless a dispatch it has not joined opened meanwhile and
		// the flag is still its own
		p.parked[w].Store(true)
		if !p.unjoined(w, last) || !p.parked[w].CompareAndSwap(true, false) {
			<-p.wake[w]
		}
		// join, then watch for the next dispatch a while before parking,
		// also where it woke too late for the one that woke it (its
		// caller took every chunk): a worker that parked again at once
		// was woken again, late again, by each of the next dispatches,
		// which ran on their callers alone and paid for the wake-ups
		// (the first runs after anything that outlasts the watch, such
		// as a collection: softmax small with 2 workers on the 2-core
		// VM stayed at its one-worker time run after run)
		for {
			p.join(w, &last)
			if !p.spin || !p.watch(func() bool { return p.unjoined(w, last) }) {
				break
			}
		}
	}
}

// watch calls ready until it is true or spinTime has passed, and reports
// whether it became true. It reads the clock every 64 calls and yields
// the processor (runtime.Gosched) every yieldEvery of them (a few
// microseconds), so that other goroutines waiting for a P (the collector's,
// the finalizers', the user's) are not kept out for the whole while.
// Yielding every 64 calls, as before, sent each watching worker through
// the scheduler's global queue every ~100 ns: in a loop of small runs on
// the 2-core VM a third of the CPU samples were runtime.lock2/unlock2
// under Gosched.
func (p *Pool) watch(ready func() bool) bool {
	t0 := time.Now()
	for i := 1; ; i++ {
		if ready() {
			return true
		}
		if i%64 == 0 {
			if time.Since(t0) > p.spinFor {
				return false
			}
			if yieldEvery > 0 && i%yieldEvery == 0 {
				runtime.Gosched()
			}
		}
	}
}

// yieldEvery is how many watching calls pass between two yields: a
// multiple of 64, about 2–5 µs of atomic loads and clock reads at the
// default 2048, or TILEFUSE_YIELD_EVERY calls (rounded down to a multiple
// of 64, at least 64; 0: never), read when the process starts, for
// measuring: runtime.Gosched goes through the scheduler's global queue and
// its lock, which 15 watching workers on a 16-core machine take often.
var yieldEvery = yieldFrom(os.Getenv("TILEFUSE_YIELD_EVERY"))

// yieldFrom is the yield period a TILEFUSE_YIELD_EVERY value asks for:
// 2048 when it is empty or not a count.
func yieldFrom(env string) int {
	n, err := strconv.Atoi(env)
	switch {
	case err != nil || n < 0:
		return 2048
	case n == 0:
		return 0
	}
	return max(64, n/64*64)
}

// unjoined: a dispatch other than last is open and asks for worker w.
func (p *Pool) unjoined(w int, last uint32) bool {
	return wants(p.state.Load(), w, last)
}

// wants: state s is of an open dispatch other than last that asks for
// worker w (one of the want bits' first workers).
func wants(s uint64, w int, last uint32) bool {
	return s&open != 0 && uint32(s>>32) != last && uint64(w) < s&wantMask>>wantShift
}

// join takes part in the open dispatch, unless there is none, it is last
// (a worker joins a dispatch once) or it does not ask for w: chunks until
// none is left. It reports whether it looked at a dispatch, and sets last
// to it. Only the workers asked for join: where any watching worker did, a
// dispatch of 4 on a 16-core machine had up to 15 workers contending for
// its state's cache line, and its caller waited for each of them to leave.
//
// Joining is a store to the worker's own flags and a second look at the
// state: where it is still open, the caller, which closes it and then
// reads the flags (both sequentially consistent), sees the worker in and
// waits for its out; where it closed meanwhile, the worker takes nothing.
func (p *Pool) join(w int, last *uint32) bool {
	s := p.state.Load()
	if !wants(s, w, *last) {
		return false
	}
	seq := uint32(s >> 32)
	*last = seq
	f := &p.flags[w]
	f.in.Store(seq)
	if p.state.Load() == s {
		f.joins.Add(1)
		p.take(w, seq)
	}
	f.out.Store(seq)
	if p.sleeping.Load() && p.sleeping.CompareAndSwap(true, false) {
		p.done <- struct{}{} // the caller blocks for it (Do)
	}
	return true
}

// take runs chunks of dispatch seq as worker w until none is left: of its
// own part from the front, then of the others' (of workers that came late
// or not at all, or are slower) from the back.
func (p *Pool) take(w int, seq uint32) {
	t, k, total, grain := p.task, p.k, p.total, p.grain
	grains := (total + grain - 1) / grain
	for i := range k {
		j := w + i
		if j >= k {
			j -= k
		}
		for {
			g, ok := p.grab(j, seq, i == 0, grains*j/k, grains*(j+1)/k)
			if !ok {
				break
			}
			t.Run(w, g*grain, min(total, (g+1)*grain))
		}
	}
}

// grab takes a chunk of part j of dispatch seq, whose chunks are [lo, hi)
// where no one took one yet: the first one left where front, else the
// last one left; ok false where none is left.
func (p *Pool) grab(j int, seq uint32, front bool, lo, hi int) (g int, ok bool) {
	pt := &p.parts[j].w
	for {
		v := pt.Load()
		a, b := uint64(lo), uint64(hi)
		if uint32(v>>32) == seq {
			a, b = v>>16&0xffff, v&0xffff
		}
		if a >= b {
			return 0, false
		}
		if front {
			g, a = int(a), a+1
		} else {
			b--
			g = int(b)
		}
		if pt.CompareAndSwap(v, uint64(seq)<<32|a<<16|b) {
			return g, true
		}
	}
}

// Do runs t over items [0, total) on up to workers workers, the caller
// included, in one chunk per worker: DoChunks with chunks of
// total/workers items.
func (p *Pool) Do(t Task, total, workers int) { p.DoChunks(t, total, workers, 0) }

// DoChunks runs t over items [0, total) on up to workers workers, the
// caller included: on the caller alone (one Run of the whole range) when
// workers or total is below 2, the pool has one worker, GOMAXPROCS is 1 or
// another dispatch holds the workers; else in chunks of grain items (0:
// total/k, where k is min(workers, Workers, GOMAXPROCS, total); more where
// there would be more than 65535), the range cut into k parts of whole
// chunks, one per worker, taken by the caller and the workers that wake in
// time (each its own part first; a part whose worker is late is taken by
// the others).
//
// GOMAXPROCS is read again every procsEvery dispatches (it takes the
// scheduler's lock): a pool sized when GOMAXPROCS was 16 that wakes 15
// workers when it is 1 (go test -cpu 1,16) has them take turns with the
// caller on its one P, after the caller's run, or in the middle of its
// next one when the scheduler preempts it.
func (p *Pool) DoChunks(t Task, total, workers, grain int) {
	if workers < 2 || total < 2 || p.n < 2 || !p.busy.TryLock() {
		p.alone(t, total)
		return
	}
	if p.procsAge--; p.procsAge < 0 {
		p.procs, p.procsAge = runtime.GOMAXPROCS(0), procsEvery
	}
	k := min(p.n, total, workers, p.procs)
	if grain <= 0 {
		grain = (total + k - 1) / max(k, 1)
	}
	grain = max(grain, (total+maxGrains-1)/maxGrains)
	k = min(k, (total+grain-1)/grain) // a chunk a worker at least
	if k < 2 {
		p.busy.Unlock()
		p.alone(t, total)
		return
	}
	defer p.busy.Unlock()
	p.start.Do(p.startWorkers)
	p.seq++
	if p.seq == 0 { // 0 is no worker's last dispatch, and of no part
		p.seq = 1
		for j := range p.parts { // a part of number 1 from 2³² dispatches ago is not this one's
			p.parts[j].w.Store(0)
		}
	}
	seq := p.seq
	p.task, p.total, p.grain, p.k = t, total, grain, k
	s := uint64(seq)<<32 | uint64(k)<<wantShift
	p.state.Store(s | open)
	woke := false
	for w := 1; w < k; w++ {
		if p.parked[w].Load() && p.parked[w].CompareAndSwap(true, false) { // a watching worker's flag is left alone: no locked write
			p.wake[w] <- struct{}{} // the flag was set: the buffer is empty
			p.wakes.Add(1)
			woke = true
		}
	}
	if woke && kick {
		// the last goroutine readied waits in the caller's P's runnext
		// slot, which another P steals from only after a sleep (usleep(3),
		// 50-100 µs on Linux with the default timer slack); readying the
		// kicker moves the last worker woken to the P's run queue, where
		// the P that the wake-up started takes it at once (a parked
		// worker woken on the 2-core VM ran 97 µs after the wake-up
		// before, after the three runs that followed it)
		select {
		case p.kick <- struct{}{}:
		default: // the kicker has not run since the last kick
		}
	}
	p.take(0, seq)
	// no chunk is left: close, then wait for the workers that joined
	// (they are in their last chunks), never for one that did not
	p.state.Store(s)
	p.wait(seq, k)
	p.task = nil
}

// wait returns when each of workers 1 to k-1 that joined dispatch seq has
// left it. It watches their flags for up to the spin time before blocking,
// since a caller that blocks must be woken by a worker, a trip through
// the scheduler (and the OS, where its thread went to sleep) that can take
// longer than the chunks themselves.
func (p *Pool) wait(seq uint32, k int) {
	left := func() bool {
		for w := 1; w < k; w++ {
			if f := &p.flags[w]; f.in.Load() == seq && f.out.Load() != seq {
				return false
			}
		}
		return true
	}
	if left() || p.spin && p.watch(left) {
		return
	}
	for {
		p.sleeping.Store(true)
		if left() {
			if !p.sleeping.CompareAndSwap(true, false) {
				<-p.done // a worker cleared it: take its token
			}
			return
		}
		<-p.done // the worker that clears it sends it after its out
		if left() {
			return
		}
	}
}
