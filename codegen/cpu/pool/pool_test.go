package pool

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// counter marks each item it runs; a second visit is an error.
type counter struct {
	seen    []atomic.Int32
	workers [64]atomic.Int32
}

func (c *counter) Run(w, lo, hi int) {
	c.workers[w].Add(1)
	for i := lo; i < hi; i++ {
		c.seen[i].Add(1)
	}
}

func check(t *testing.T, c *counter, total int) {
	t.Helper()
	for i := 0; i < total; i++ {
		if n := c.seen[i].Load(); n != 1 {
			t.Fatalf("item %d ran %d times", i, n)
		}
	}
}

// TestDo: every item runs once, on the caller alone where the dispatch
// asks for one worker or has one item, and on at most the workers asked
// for otherwise (the caller or workers that woke in time: a worker
// still watching after the last dispatch may take every chunk first).
func TestDo(t *testing.T) {
	cases := []struct {
		name    string
		workers int // the pool's
		total   int
		ask     int // workers the dispatch asks for
	}{
		{"inline small", 4, 1, 4},
		{"inline by request", 4, 100, 1},
		{"inline by request of zero", 4, 100, 0},
		{"one worker", 1, 100, 4},
		{"fewer items than workers", 8, 3, 8},
		{"fewer asked than workers", 8, 1000, 3},
		{"more asked than workers", 3, 1001, 16},
		{"uneven", 3, 1001, 3},
		{"many", 4, 100000, 4},
		{"empty", 4, 0, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := New(tc.workers)
			for rep := 0; rep < 3; rep++ {
				c := &counter{seen: make([]atomic.Int32, tc.total)}
				p.Do(c, tc.total, tc.ask)
				check(t, c, tc.total)
				inline := tc.ask < 2 || tc.total < 2 || tc.workers < 2
				if inline && tc.total > 0 && c.workers[0].Load() != 1 {
					t.Fatalf("on the caller alone: the caller ran %d ranges, want 1", c.workers[0].Load())
				}
				used := 0
				for w := range c.workers {
					if c.workers[w].Load() > 0 {
						used++
					}
				}
				most := min(tc.workers, tc.total, max(tc.ask, 1))
				if used > most {
					t.Fatalf("%d workers ran, want at most %d", used, most)
				}
			}
			if tc.ask < 2 || tc.total < 2 || tc.workers < 2 {
				if p.wake != nil { // no worker goroutine exists
					t.Fatalf("a dispatch on the caller alone started the workers")
				}
			}
		})
	}
}

// TestLateWorkersNotAwaited: a dispatch's caller takes every chunk that
// no worker has taken and returns without waiting for workers that have
// not woken: here the workers never do (their goroutines are not
// started), and each dispatch must still finish, on the caller alone.
// (GOMAXPROCS 4 at least, so that the dispatch asks for all 4.)
func TestLateWorkersNotAwaited(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(4, runtime.GOMAXPROCS(0))))
	p := New(4)
	p.start.Do(func() { // the workers' channels and flags, but no goroutines
		p.wake = make([]chan struct{}, p.n)
		p.parked = make([]atomic.Bool, p.n)
		for w := 1; w < p.n; w++ {
			p.wake[w] = make(chan struct{}, 1)
			p.parked[w].Store(true)
		}
	})
	finished := make(chan *counter)
	go func() {
		for range 3 {
			c := &counter{seen: make([]atomic.Int32, 1000)}
			p.Do(c, 1000, 4)
			finished <- c
		}
	}()
	for i := range 3 {
		select {
		case c := <-finished:
			check(t, c, 1000)
			if n := c.workers[0].Load(); n != 4 {
				t.Fatalf("dispatch %d: the caller ran %d chunks, want all 4", i, n)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("dispatch %d waits for workers that never woke", i)
		}
	}
}

// TestWorkersJoin: with its workers running, a pool's dispatches are
// joined by them (over many dispatches of long chunks, at least once).
func TestWorkersJoin(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0)))) // at 1 a dispatch asks for the caller alone
	p := New(2)
	c := &slow{}
	for i := 0; i < 200 && joined(p) == 0; i++ {
		p.Do(c, 2, 2)
	}
	if joined(p) == 0 {
		t.Fatal("no worker joined any of 200 dispatches")
	}
}

// joined is how many dispatches the workers of p ran chunks of, together.
func joined(p *Pool) (n int64) {
	for w := range p.flags {
		n += p.flags[w].joins.Load()
	}
	return n
}

// slow spins about 100 µs an item.
type slow struct{ sink atomic.Int64 }

func (s *slow) Run(w, lo, hi int) {
	for i := lo; i < hi; i++ {
		for t0 := time.Now(); time.Since(t0) < 100*time.Microsecond; {
			s.sink.Add(1)
		}
	}
}

// nested dispatches from inside a task run inline instead of deadlocking.
type nested struct {
	p   *Pool
	bad atomic.Int32
}

func (n *nested) Run(w, lo, hi int) {
	for i := lo; i < hi; i++ {
		c := &counter{seen: make([]atomic.Int32, 10)}
		n.p.Do(c, 10, 4)
		for j := range c.seen {
			if c.seen[j].Load() != 1 {
				n.bad.Add(1)
			}
		}
	}
}

func TestConcurrentAndNested(t *testing.T) {
	p := New(4)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				c := &counter{seen: make([]atomic.Int32, 37)}
				p.Do(c, 37, 4)
				check(t, c, 37)
			}
		}()
	}
	wg.Wait()
	n := &nested{p: p}
	p.Do(n, 8, 4)
	if n.bad.Load() != 0 {
		t.Fatalf("%d items of nested dispatches ran other than once", n.bad.Load())
	}
}

func TestNoAllocs(t *testing.T) {
	p := New(4)
	c := &counter{seen: make([]atomic.Int32, 1000)}
	p.Do(c, 1000, 4) // start the workers
	allocs := testing.AllocsPerRun(100, func() { p.Do(c, 1000, 4) })
	if allocs != 0 {
		t.Fatalf("%v allocations per dispatch", allocs)
	}
}

func BenchmarkDispatch(b *testing.B) {
	p := Default()
	c := &counter{seen: make([]atomic.Int32, 64)}
	for i := 0; i < b.N; i++ {
		p.Do(c, 64, p.Workers())
	}
}

// TestSizedToCPUs: a pool of New(0) has a worker per GOMAXPROCS, but no
// more than the CPUs the process may run on.
func TestSizedToCPUs(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(was)
	cpus := runtime.NumCPU()
	for _, c := range []struct {
		name       string
		gomaxprocs int
		want       int
	}{
		{"one", 1, 1},
		{"as many as CPUs", cpus, cpus},
		{"oversubscribed", 8 * cpus, cpus},
	} {
		t.Run(c.name, func(t *testing.T) {
			runtime.GOMAXPROCS(c.gomaxprocs)
			if got := New(0).Workers(); got != c.want {
				t.Fatalf("GOMAXPROCS %d on %d CPUs: %d workers, want %d", c.gomaxprocs, cpus, got, c.want)
			}
		})
	}
}

// TestSpinFrom: TILEFUSE_SPIN_US is a count of microseconds; anything
// else leaves the default, 50 µs under 8 CPUs and 1 ms from 8.
func TestSpinFrom(t *testing.T) {
	for _, c := range []struct {
		name string
		env  string
		cpus int
		want time.Duration
	}{
		{"default 2 cpus", "", 2, 50 * time.Microsecond},
		{"default 7 cpus", "", 7, 50 * time.Microsecond},
		{"default 8 cpus", "", 8, time.Millisecond},
		{"default 16 cpus", "", 16, time.Millisecond},
		{"zero", "0", 16, 0},
		{"200", "200", 2, 200 * time.Microsecond},
		{"200 on 16", "200", 16, 200 * time.Microsecond},
		{"negative", "-3", 2, 50 * time.Microsecond},
		{"not a count", "1ms", 16, time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := spinFrom(c.env, c.cpus); got != c.want {
				t.Fatalf("spinFrom(%q, %d) = %v, want %v", c.env, c.cpus, got, c.want)
			}
		})
	}
}

// TestYieldFrom: TILEFUSE_YIELD_EVERY is a count of watching calls,
// rounded down to a multiple of 64 (the clock is read every 64), at least
// 64; 0 never yields; anything else leaves the default.
func TestYieldFrom(t *testing.T) {
	for _, c := range []struct {
		env  string
		want int
	}{
		{"", 2048},
		{"0", 0},
		{"16384", 16384},
		{"100", 64},
		{"10", 64},
		{"-1", 2048},
		{"1k", 2048},
	} {
		t.Run(c.env, func(t *testing.T) {
			if got := yieldFrom(c.env); got != c.want {
				t.Fatalf("yieldFrom(%q) = %v, want %v", c.env, got, c.want)
			}
		})
	}
}

// TestOnlyAskedWorkersJoin: a dispatch of k workers is run by the caller
// and workers 1 to k-1 alone, even while other workers watch for work
// after a larger dispatch (spinning forced on: the pool is larger than
// this machine may be, and GOMAXPROCS 4 at least, so that a dispatch
// asks for all 4); and the want bits of the state say so.
func TestOnlyAskedWorkersJoin(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(4, runtime.GOMAXPROCS(0))))
	p := New(4)
	p.spin = true
	for rep := range 20 {
		big := &slowCounter{counter: counter{seen: make([]atomic.Int32, 4)}}
		p.Do(big, 4, 4) // every worker joins, then watches
		check(t, &big.counter, 4)
		small := &slowCounter{counter: counter{seen: make([]atomic.Int32, 2)}}
		p.Do(small, 2, 2)
		check(t, &small.counter, 2)
		for w := 2; w < 4; w++ {
			if n := small.workers[w].Load(); n != 0 {
				t.Fatalf("rep %d: worker %d ran %d chunks of a dispatch of 2 workers", rep, w, n)
			}
		}
	}
	for _, c := range []struct {
		name string
		w    int
		want uint64
		open bool
		last uint32
		join bool
	}{
		{"asked", 1, 2, true, 0, true},
		{"beyond the asked", 2, 2, true, 0, false},
		{"the last asked of all", 3, 4, true, 0, true},
		{"closed", 1, 2, false, 0, false},
		{"joined already", 1, 2, true, 7, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := uint64(7)<<32 | c.want<<wantShift
			if c.open {
				s |= open
			}
			if got := wants(s, c.w, c.last); got != c.join {
				t.Fatalf("wants(%#x, %d, %d) = %v, want %v", s, c.w, c.last, got, c.join)
			}
		})
	}
}

// slowCounter is a counter whose items take about 200 µs each.
type slowCounter struct {
	counter
}

func (c *slowCounter) Run(w, lo, hi int) {
	for t0 := time.Now(); time.Since(t0) < time.Duration(hi-lo)*200*time.Microsecond; {
	}
	c.counter.Run(w, lo, hi)
}

// TestLateWokenWorkerWatches: a worker woken for a dispatch whose caller
// took every chunk first (two tiny chunks: the caller takes both within
// a microsecond, long before the worker runs) watches for the next
// dispatch as one that joined does, so the next dispatch finds it awake
// and sends no wake-up. Parking again at once had every dispatch after
// an idle while (a collection) wake it, late, again.
func TestLateWokenWorkerWatches(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0))))
	p := New(2)
	p.spin, p.spinFor = true, 300*time.Millisecond
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for t0 := time.Now(); !cond(); time.Sleep(time.Millisecond) {
			if time.Since(t0) > 10*time.Second {
				t.Fatalf("no %s after 10 s", what)
			}
		}
	}
	woken := 0 // rounds whose first dispatch woke the worker
	for round := range 3 {
		c := &counter{seen: make([]atomic.Int32, 2)}
		if round == 0 {
			p.Do(c, 2, 2) // starts the worker
			check(t, c, 2)
			c = &counter{seen: make([]atomic.Int32, 2)}
		}
		waitFor("parked worker", func() bool { return p.parked[1].Load() })
		w0 := p.wakes.Load()
		p.Do(c, 2, 2)
		check(t, c, 2)
		w1 := p.wakes.Load()
		if w1 > w0 { // else the worker, between its flag and its channel, saw the dispatch first
			woken++
		}
		waitFor("wake-up taken", func() bool { return len(p.wake[1]) == 0 })
		time.Sleep(5 * time.Millisecond) // well within the watch: parked again if it does not watch
		c = &counter{seen: make([]atomic.Int32, 2)}
		p.Do(c, 2, 2)
		check(t, c, 2)
		if got := p.wakes.Load() - w1; got != 0 {
			t.Fatalf("round %d: the dispatch 5 ms after a wake-up sent %d more: the worker parked instead of watching", round, got)
		}
	}
	if woken == 0 {
		t.Fatal("no round's first dispatch woke the parked worker")
	}
}

// TestDispatchFollowsGOMAXPROCS: a pool sized for more workers than
// GOMAXPROCS asks for no more than GOMAXPROCS (at 1, the caller alone,
// and no worker goroutine is started), read again within procsEvery
// dispatches of a change, or at the next one after ReadProcs.
func TestDispatchFollowsGOMAXPROCS(t *testing.T) {
	was := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(was)
	p := New(4)
	ranges := func(c *counter) (n int32) {
		for w := range c.workers {
			n += c.workers[w].Load()
		}
		return n
	}
	for i := range 3 * procsEvery {
		c := &counter{seen: make([]atomic.Int32, 100)}
		p.Do(c, 100, 4)
		check(t, c, 100)
		if n := ranges(c); n != 1 || c.workers[0].Load() != 1 {
			t.Fatalf("GOMAXPROCS 1, dispatch %d: %d ranges, the caller %d, want the caller's one", i, n, c.workers[0].Load())
		}
	}
	if p.wake != nil {
		t.Fatal("dispatches at GOMAXPROCS 1 started the workers")
	}
	runtime.GOMAXPROCS(4)
	for i := 0; ; i++ {
		c := &counter{seen: make([]atomic.Int32, 100)}
		p.Do(c, 100, 4)
		check(t, c, 100)
		if ranges(c) == 4 {
			break
		}
		if i > procsEvery {
			t.Fatalf("GOMAXPROCS 4: still %d ranges after %d dispatches, want 4", ranges(c), i+1)
		}
	}
	// ReadProcs: the dispatch right after a change follows it
	for _, c := range []struct {
		procs, want int32
	}{{1, 1}, {4, 4}, {2, 2}, {4, 4}} {
		runtime.GOMAXPROCS(int(c.procs))
		p.ReadProcs()
		cnt := &counter{seen: make([]atomic.Int32, 100)}
		p.Do(cnt, 100, 4)
		check(t, cnt, 100)
		if n := ranges(cnt); n != c.want {
			t.Fatalf("GOMAXPROCS %d then ReadProcs: the next dispatch ran %d ranges, want %d", c.procs, n, c.want)
		}
	}
}

// recorder records which worker ran which items, in order.
type recorder struct {
	mu   sync.Mutex
	runs [][3]int // worker, lo, hi
}

func (r *recorder) Run(w, lo, hi int) {
	r.mu.Lock()
	r.runs = append(r.runs, [3]int{w, lo, hi})
	r.mu.Unlock()
}

// TestChunksAssigned: a dispatch's items are cut into k parts of whole
// chunks, one a worker; a worker takes its own part's chunks from the
// front and, when none is left, the others' from the back; every item
// runs once, in chunks of the grain (the last one of the range shorter).
// Each case calls take as the workers listed, one after another, on a
// dispatch opened by hand (no worker goroutine runs), so the order is
// known: worker 0 alone takes its part front to back and then worker 1's
// back to front, the worker after it finds nothing; a part its owner has
// begun is finished by another from the back.
func TestChunksAssigned(t *testing.T) {
	for _, c := range []struct {
		name         string
		total, grain int
		k            int
		takers       []int
		want         [][3]int
	}{
		{"the caller alone", 10, 3, 2, []int{0, 1},
			[][3]int{{0, 0, 3}, {0, 3, 6}, {0, 9, 10}, {0, 6, 9}}},
		{"the second first", 10, 3, 2, []int{1, 0},
			[][3]int{{1, 6, 9}, {1, 9, 10}, {1, 3, 6}, {1, 0, 3}}},
		{"three parts, the last taker takes from the back of the first", 12, 2, 3, []int{2, 1},
			[][3]int{{2, 8, 10}, {2, 10, 12}, {2, 2, 4}, {2, 0, 2}, {2, 6, 8}, {2, 4, 6}}},
		{"one item a chunk", 4, 1, 4, []int{3, 0, 1, 2},
			[][3]int{{3, 3, 4}, {3, 0, 1}, {3, 1, 2}, {3, 2, 3}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := New(4)
			r := &recorder{}
			p.seq = 5
			p.task, p.total, p.grain, p.k = r, c.total, c.grain, c.k
			for _, w := range c.takers {
				p.take(w, p.seq)
			}
			if len(r.runs) != len(c.want) {
				t.Fatalf("runs %v, want %v", r.runs, c.want)
			}
			for i := range c.want {
				if r.runs[i] != c.want[i] {
					t.Fatalf("runs %v, want %v", r.runs, c.want)
				}
			}
		})
	}
	t.Run("a part begun by its owner", func(t *testing.T) {
		p := New(2)
		r := &recorder{}
		p.seq = 9
		p.task, p.total, p.grain, p.k = r, 8, 2, 2
		// worker 1 took its first chunk, then stopped (preempted)
		if g, ok := p.grab(1, 9, true, 2, 4); !ok || g != 2 {
			t.Fatalf("worker 1's first grab: %d %v, want chunk 2", g, ok)
		}
		p.take(0, 9)
		want := [][3]int{{0, 0, 2}, {0, 2, 4}, {0, 6, 8}}
		if len(r.runs) != len(want) {
			t.Fatalf("runs %v, want %v", r.runs, want)
		}
		for i := range want {
			if r.runs[i] != want[i] {
				t.Fatalf("runs %v, want %v", r.runs, want)
			}
		}
	})
	t.Run("parts of another dispatch are whole", func(t *testing.T) {
		p := New(2)
		r := &recorder{}
		p.task, p.total, p.grain, p.k = r, 4, 1, 2
		p.seq = 1
		p.take(0, 1) // takes all 4 of dispatch 1
		r.runs = nil
		p.seq = 2
		p.take(1, 2) // dispatch 2: the words of dispatch 1 are not its parts
		if len(r.runs) != 4 {
			t.Fatalf("dispatch 2 ran %v, want all 4 items", r.runs)
		}
	})
}
