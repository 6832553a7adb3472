package fusion

import (
	"testing"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// held is what r's free lists hold: bytes and buffers.
func (r *recycler) heldNow() (bytes, bufs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.slots {
		bufs += len(s.free)
	}
	return r.held, bufs
}

// TestRecyclerBound: buffers come back only once unreachable, at most the
// limit's worth; what comes back beyond it, or after close, is left to the
// collector. Cases run in order on one recycler of 4 buffers' room.
func TestRecyclerBound(t *testing.T) {
	const n = 16 << 10 // float32s: 64 KiB a buffer
	const size = 4 * n
	r := newRecycler(4 * size)
	var kept [][]float32
	steps := []struct {
		name string
		do   func()
		// the free lists after a collection
		wantBufs       int
		wantRecycled   int
		wantAllocated  int
		wantSlotsAfter bool
	}{
		{"ten kept by the user: nothing comes back", func() {
			for range 10 {
				kept = append(kept, recycledSlice[float32](r, n, false))
			}
		}, 0, 0, 10, true},
		{"all ten dropped: four come back, the limit", func() { kept = nil }, 4, 0, 10, true},
		{"four taken again, a fifth allocated; a part of one kept", func() {
			for i := range 5 {
				s := recycledSlice[float32](r, n, false)
				if i == 2 {
					kept = append(kept, s[n/2:n/2+1])
				}
			}
		}, 4, 4, 11, true},
		{"closed with four held: the free lists are dropped", func() { r.close() }, 0, 4, 11, false},
		{"the part dropped after close: left to the collector", func() { kept = nil }, 0, 4, 11, false},
	}
	for _, st := range steps {
		st.do()
		WaitFinalizers()
		held, bufs := r.heldNow()
		recycled, allocated, _ := r.counts()
		if bufs != st.wantBufs || held != bufs*size || recycled != st.wantRecycled || allocated != st.wantAllocated || (r.slots != nil) != st.wantSlotsAfter {
			t.Fatalf("%s: %d buffers held (%d bytes), %d recycled, %d allocated, slots %v; want %d, %d, %d, %v",
				st.name, bufs, held, recycled, allocated, r.slots != nil, st.wantBufs, st.wantRecycled, st.wantAllocated, st.wantSlotsAfter)
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
		want    float64
	}{
		{"from the free list", 200, 0},
		{"new", 0, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRecycler(1 << 30)
			for range c.prefill { // as if each had come back
				s := make([]float32, n)
				sl, _ := r.take(4 * n)
				r.allocated--
				sl.back((*byte)(unsafe.Pointer(&s[0])))
			}
			var sink []float32
			allocs := testing.AllocsPerRun(100, func() { sink = recycledSlice[float32](r, n, true) })
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
	if held, bufs := r.heldNow(); held != 0 || bufs != 0 || r.slots != nil || !r.closed {
		t.Fatalf("after Close: %d bytes in %d buffers held, slots %v, closed %v", held, bufs, r.slots != nil, r.closed)
	}
}
