package pool

import (
	"sync"
	"sync/atomic"
	"testing"
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

func TestDo(t *testing.T) {
	cases := []struct {
		name     string
		workers  int
		total    int
		parallel bool
	}{
		{"inline small", 4, 1, true},
		{"inline by request", 4, 100, false},
		{"one worker", 1, 100, true},
		{"fewer items than workers", 8, 3, true},
		{"uneven", 3, 1001, true},
		{"many", 4, 100000, true},
		{"empty", 4, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := New(tc.workers)
			for rep := 0; rep < 3; rep++ {
				c := &counter{seen: make([]atomic.Int32, tc.total)}
				p.Do(c, tc.total, tc.parallel)
				check(t, c, tc.total)
				used := 0
				for w := range c.workers {
					if c.workers[w].Load() > 0 {
						used++
					}
				}
				want := min(tc.workers, tc.total)
				if !tc.parallel || tc.total < 2 {
					want = min(1, tc.total)
				}
				if used != want {
					t.Fatalf("%d workers ran, want %d", used, want)
				}
			}
		})
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
		n.p.Do(c, 10, true)
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
				p.Do(c, 37, true)
				check(t, c, 37)
			}
		}()
	}
	wg.Wait()
	n := &nested{p: p}
	p.Do(n, 8, true)
	if n.bad.Load() != 0 {
		t.Fatalf("%d items of nested dispatches ran other than once", n.bad.Load())
	}
}

func TestNoAllocs(t *testing.T) {
	p := New(4)
	c := &counter{seen: make([]atomic.Int32, 1000)}
	p.Do(c, 1000, true) // start the workers
	allocs := testing.AllocsPerRun(100, func() { p.Do(c, 1000, true) })
	if allocs != 0 {
		t.Fatalf("%v allocations per dispatch", allocs)
	}
}

func BenchmarkDispatch(b *testing.B) {
	p := Default()
	c := &counter{seen: make([]atomic.Int32, 64)}
	for i := 0; i < b.N; i++ {
		p.Do(c, 64, true)
	}
}
