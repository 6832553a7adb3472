package fusion

import (
	"math"
	"runtime"
	"testing"
	"unsafe"
	"weak"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// held is what r's free lists hold: bytes and buffers.
func (r *recycler) heldNow() (bytes, bufs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lists {
		bufs += len(l.free)
	}
	return r.held, bufs
}

// TestRecyclerBound: buffers come back only once unreachable, at most the
// limit's worth; a new buffer gets the finalizer only while the free list
// and the buffers out with it fit the limit, until those stay out for two
// collections (kept); what comes back after close is left to the
// collector. Steps run in order on one recycler of 4 buffers' room, each
// checked after a collection and its finalizers.
func TestRecyclerBound(t *testing.T) {
	const n = 16 << 10 // float32s: 64 KiB a buffer
	const size = 4 * n
	r := newRecycler(4 * size)
	var kept, more [][]float32
	get := func(k int, keep *[][]float32) {
		for range k {
			s := recycledSlice[float32](r, n, false)
			if keep != nil {
				*keep = append(*keep, s)
			}
		}
	}
	steps := []struct {
		name string
		do   func()
		// after a collection: buffers on the free list, bytes armed, counts
		bufs, armed, recycled, allocated int
		slots                            bool
	}{
		{"ten kept by the user: four armed, none back", func() { get(10, &kept) }, 0, 4 * size, 0, 10, true},
		{"all ten dropped: the four armed come back", func() { kept = nil }, 4, 0, 0, 10, true},
		{"four taken again, a fifth new and plain; a part of one of the four kept", func() {
			for i := range 5 {
				s := recycledSlice[float32](r, n, false)
				if i == 2 {
					kept = append(kept, s[n/2:n/2+1])
				}
			}
		}, 3, size, 4, 11, true},
		{"three more taken and kept: the limit armed; a new one plain", func() { get(3, &more); get(1, nil) }, 0, 4 * size, 7, 12, true},
		{"two collections on, one more is armed: the four written off", func() { WaitFinalizers(); get(1, &more) }, 0, size, 7, 13, true},
		{"all dropped: five come back, four kept", func() { kept, more = nil, nil }, 4, 0, 7, 13, true},
		{"closed with four held: the free lists are dropped", func() { get(1, &kept); r.close() }, 0, size, 8, 13, false},
		{"the last dropped after close: left to the collector", func() { kept = nil }, 0, 0, 8, 13, false},
	}
	for _, st := range steps {
		st.do()
		WaitFinalizers()
		held, bufs := r.heldNow()
		r.mu.Lock()
		armed := r.armed
		r.mu.Unlock()
		recycled, allocated, _, _ := r.counts()
		if bufs != st.bufs || held != bufs*size || armed != st.armed || recycled != st.recycled || allocated != st.allocated || (r.lists != nil) != st.slots {
			t.Fatalf("%s: %d buffers held (%d bytes), %d bytes armed, %d recycled, %d allocated, slots %v; want %d, %d, %d, %d, %v",
				st.name, bufs, held, armed, recycled, allocated, r.lists != nil, st.bufs, st.armed, st.recycled, st.allocated, st.slots)
		}
	}
}

// TestRecycledSliceAllocatesNothing: taking a buffer from a free list (and
// setting its finalizer) allocates nothing; a new one allocates.
func TestRecycledSliceAllocatesNothing(t *testing.T) {
	const n = 16 << 10
	cases := []struct {
		name    string
		prefill int
		limit   int
		want    float64
	}{
		{"from the free list", 400, 1 << 30, 0},
		{"new, past the limit (nothing comes back)", 0, 0, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRecycler(c.limit)
			r.mu.Lock()
			sl := r.list(4 * n).slot
			r.mu.Unlock()
			for range c.prefill { // as if each had come back
				s := make([]float32, n)
				sl.back((*byte)(unsafe.Pointer(&s[0])))
			}
			// the least of three counts: AllocsPerRun counts the process's
			// allocations, and other goroutines' (finalizers, workers of
			// earlier tests) land in one now and then (a full package run
			// in CI counted 1 a buffer once, 2026-12-06)
			var sink []float32
			allocs := math.Inf(1)
			for range 3 {
				allocs = min(allocs, testing.AllocsPerRun(100, func() { sink = recycledSlice[float32](r, n, true) }))
			}
			_ = sink
			if allocs != c.want && !raceOn {
				t.Fatalf("%v allocations a buffer, want %v", allocs, c.want)
			}
			t.Logf("%v allocations a buffer", allocs)
		})
	}
}

// TestCloseDropsRecycled: a machine's Close drops what its free list held
// after a few runs whose values the user dropped.
func TestCloseDropsRecycled(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(128, 128), G.WithName("x"))
	G.Must(G.Exp(G.Must(G.Tanh(x))))
	if err := G.Let(x, tensor.New(tensor.WithShape(128, 128), tensor.Of(tensor.Float32))); err != nil {
		t.Fatal(err)
	}
	m := NewTapeMachine(g)
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
	r := m.be.(*cpuBackend).rec
	if r == nil {
		t.Fatal("no recycler")
	}
	for range 4 {
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		WaitFinalizers()
	}
	if held, _ := r.heldNow(); held == 0 {
		t.Fatal("nothing held before Close: the test does not cover it")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if held, bufs := r.heldNow(); held != 0 || bufs != 0 || r.lists != nil || !r.closed {
		t.Fatalf("after Close: %d bytes in %d buffers held, slots %v, closed %v", held, bufs, r.lists != nil, r.closed)
	}
}

// TestDroppedMachineFreesRecycler: a machine dropped without Close leaves
// its recycler and the buffers on its free list to the collector, though
// the user's graph still holds the last run's value, whose finalizer
// names the recycler.
func TestDroppedMachineFreesRecycler(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(128, 128), G.WithName("x"))
	y := G.Must(G.Exp(G.Must(G.Tanh(x))))
	if err := G.Let(x, tensor.New(tensor.WithShape(128, 128), tensor.Of(tensor.Float32))); err != nil {
		t.Fatal(err)
	}
	wr, wb := func() (weak.Pointer[recycler], weak.Pointer[byte]) {
		m := NewTapeMachine(g)
		if err := m.Err(); err != nil {
			t.Fatal(err)
		}
		r := m.be.(*cpuBackend).rec
		for range 4 {
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			WaitFinalizers()
		}
		if held, _ := r.heldNow(); held == 0 {
			t.Fatal("nothing held: the test does not cover a free list")
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, l := range r.lists {
			if len(l.free) > 0 {
				return weak.Make(r), weak.Make((*byte)(l.free[0]))
			}
		}
		t.Fatal("no buffer on a free list")
		return weak.Pointer[recycler]{}, weak.Pointer[byte]{}
	}()
	for range 3 {
		WaitFinalizers()
	}
	if wr.Value() != nil || wb.Value() != nil {
		t.Fatalf("of a dropped machine, still reachable: the recycler %v, a buffer of its free list %v", wr.Value() != nil, wb.Value() != nil)
	}
	if y.Value() == nil {
		t.Fatal("the graph lost its value")
	}
}

// TestRecycleLimit: a machine's free list holds 4 runs' worth of its
// readable values, or up to 128 runs' worth within 32 MiB.
func TestRecycleLimit(t *testing.T) {
	const k, m = 1 << 10, 1 << 20
	for _, c := range []struct {
		name   string
		perRun int
		want   int
	}{
		{"nothing to recycle", 0, 0},
		{"32 KiB: 128 runs", 32 * k, 128 * 32 * k},
		{"256 KiB: 128 runs, 32 MiB", 256 * k, 32 * m},
		{"300 KiB: 32 MiB, 109 runs", 300 * k, 32 * m},
		{"1 MiB: 32 runs", m, 32 * m},
		{"8 MiB: 4 runs", 8 * m, 32 * m},
		{"9 MiB: 4 runs, above 32 MiB", 9 * m, 36 * m},
		{"16 MiB: 4 runs", 16 * m, 64 * m},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := recycleLimit(c.perRun); got != c.want {
				t.Fatalf("recycleLimit(%d) = %d, want %d", c.perRun, got, c.want)
			}
		})
	}
}

// TestNewBuffersZeroedWhereAsked: a buffer the recycler makes anew is
// zeroed where the kernel accumulates into it (zero set) though the heap
// it comes from held NaN (freed buffers of the same size, filled and
// dropped), and under the tests' poisoning NaN where it is not, and of the
// length asked, in both widths.
func TestNewBuffersZeroedWhereAsked(t *testing.T) {
	defer func(p bool) { poisonRecycled = p }(poisonRecycled)
	const n = 1 << 20 // 4 or 8 MiB: large objects, their own spans
	for _, c := range []struct {
		name         string
		zero, poison bool
	}{
		{"zeroed", true, false},
		{"zeroed, poisoning on", true, true},
		{"not zeroed, poisoning on", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			poisonRecycled = c.poison
			for range 4 { // the heap's free pages: NaN
				f, d := make([]float32, n), make([]float64, n)
				fill(f, float32(math.NaN()))
				fill(d, math.NaN())
				runtime.KeepAlive(f)
				runtime.KeepAlive(d)
			}
			runtime.GC()
			r := newRecycler(recycleLimit(12 * n))
			defer r.close()
			f, d := recycledSlice[float32](r, n, c.zero), recycledSlice[float64](r, n, c.zero)
			if len(f) != n || len(d) != n {
				t.Fatalf("lengths %d, %d, want %d", len(f), len(d), n)
			}
			if _, alloc, _, _ := r.counts(); alloc != 2 {
				t.Fatalf("%d buffers made anew, want 2", alloc)
			}
			for i := range n {
				if c.zero && (f[i] != 0 || d[i] != 0) || !c.zero && (!math.IsNaN(float64(f[i])) || !math.IsNaN(d[i])) {
					t.Fatalf("[%d] = %v, %v; zeroed %v", i, f[i], d[i], c.zero)
				}
			}
		})
	}
}

// TestRecycleTakesLastHandedOut: a free list gives back first the buffer
// handed out last (the likeliest in the caches), whatever order the
// finalizers ran in: six buffers handed out, dropped and collected, come
// back in the reverse of the order they went out in, three rounds (each
// round's order the reverse of the one before).
func TestRecycleTakesLastHandedOut(t *testing.T) {
	const n, k = 16 << 10, 6 // float32s: 64 KiB a buffer
	r := newRecycler(k * 4 * n)
	defer r.close()
	round := func() []unsafe.Pointer {
		var out []unsafe.Pointer
		for range k {
			s := recycledSlice[float32](r, n, false)
			out = append(out, unsafe.Pointer(unsafe.SliceData(s)))
		}
		return out // made addresses at once (addrs): nothing keeps the buffers alive
	}
	addrs := func(ps []unsafe.Pointer) []uintptr {
		a := make([]uintptr, len(ps))
		for i, p := range ps {
			a[i] = uintptr(p)
		}
		return a
	}
	last := addrs(round())
	for i := range 3 {
		WaitFinalizers()
		if _, bufs := r.heldNow(); bufs != k {
			t.Fatalf("round %d: %d buffers back, want %d", i, bufs, k)
		}
		got := addrs(round())
		for j := range k {
			if got[j] != last[k-1-j] {
				t.Fatalf("round %d: buffers taken in the order %x, want the reverse of the order handed out before, %x", i, got, last)
			}
		}
		last = got
	}
}
