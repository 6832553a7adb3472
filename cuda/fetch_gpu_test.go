//go:build tilefuse_cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestFetcherOnGPU downloads buffers of sizes around and across the
// fetcher's pinned memory (each queued behind an upload of its bytes, so
// that a copy read too early would see the poison), into host slices
// poisoned with NaN and a sentinel past the end, and checks every element
// after Finish: copies that fit are staged and land at their offsets, one
// that does not fit in what is left finishes the others first, one larger
// than the memory goes straight to its slice, a copy on the side stream
// waits for the upload queued before it, a side copy whose host slice
// comes only when it is copied out (EnqueueSideLater: from a goroutine,
// as fusion's preallocated memory does) lands there, and nothing past a
// slice's end is written.
func TestFetcherOnGPU(t *testing.T) {
	cases := []struct {
		name  string
		size  int64 // the fetcher's pinned bytes
		sizes []int // float32s
		wait  bool  // Wait before Finish
		side  bool  // every other copy on the side stream (EnqueueSide)
		later bool  // those with their host slice given at the copy out (EnqueueSideLater)
	}{
		{"all fit", 1 << 20, []int{1, 7, 63, 64, 65, 1000, 4097}, false, false, false},
		{"all fit, Wait first", 1 << 20, []int{3, 250, 1025}, true, false, false},
		{"overflow finishes early", 8 << 10, []int{1000, 1000, 1000, 1500, 1, 2047}, false, false, false},
		{"larger than the memory", 4 << 10, []int{10, 5000, 20, 1 << 16, 3}, false, false, false},
		{"side stream", 1 << 20, []int{1, 7, 63, 64, 65, 1000, 4097, 200000}, false, true, false},
		{"side stream, overflow and direct", 8 << 10, []int{1000, 1500, 3000, 1, 2047, 1 << 16}, true, true, false},
		{"side stream, memory later", 1 << 20, []int{1, 7, 63, 64, 65, 1000, 4097, 200000}, false, true, true},
		{"side stream, memory later, overflow and direct", 8 << 10, []int{1000, 1500, 3000, 1, 2047, 1 << 16}, true, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := dev.NewFetcher(c.size)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			up, err := dev.NewStager(512<<10, 3) // asynchronous uploads, in stream order
			if err != nil {
				t.Fatal(err)
			}
			defer up.Close()
			rng := rand.New(rand.NewPCG(7, uint64(len(c.sizes))))
			var bufs []*Buffer
			defer func() {
				for _, b := range bufs {
					dev.Free(b)
				}
			}()
			want := make([][]float32, len(c.sizes))
			got := make([][]float32, len(c.sizes))
			for i, n := range c.sizes {
				b, err := dev.Alloc(int64(4 * n))
				if err != nil {
					t.Fatal(err)
				}
				bufs = append(bufs, b)
				want[i] = make([]float32, n)
				for j := range want[i] {
					want[i][j] = rng.Float32()*2 - 1
				}
				got[i] = make([]float32, n+1) // one sentinel past the end
				for j := range got[i] {
					got[i][j] = float32(math.NaN())
				}
				got[i][n] = 12345
			}
			taken := 0
			err = dev.Run(func(th *Thread) error {
				for i := range c.sizes {
					if err := up.Upload(th, bufs[i], want[i]); err != nil {
						return err
					}
					if c.later && i%2 == 1 {
						ch := make(chan any, 1)
						go func() { ch <- got[i][:c.sizes[i]] }()
						take := func() any { taken++; return <-ch }
						if err := f.EnqueueSideLater(th, bufs[i], 4*int64(c.sizes[i]), take); err != nil {
							return err
						}
						continue
					}
					enq := f.Enqueue
					if c.side && i%2 == 1 { // after the upload before it, beside what follows
						enq = f.EnqueueSide
					}
					if err := enq(th, got[i][:c.sizes[i]], bufs[i]); err != nil {
						return err
					}
				}
				if c.side { // the side copies out as they land, before the rest
					if err := f.CopyLanded(th); err != nil {
						return err
					}
					for i := 1; i < len(c.sizes); i += 2 {
						if n := c.sizes[i]; 4*int64(n) <= f.PinnedBytes() && got[i][0] != want[i][0] {
							return fmt.Errorf("buffer %d: not out after CopyLanded: %v, want %v", i, got[i][0], want[i][0])
						}
					}
				}
				if c.wait {
					if err := f.Wait(th); err != nil {
						return err
					}
				}
				return f.Finish(th)
			})
			if err != nil {
				t.Fatal(err)
			}
			if f.Pending() != 0 {
				t.Errorf("%d copies pending after Finish", f.Pending())
			}
			if want := len(c.sizes) / 2; c.later && taken != want {
				t.Errorf("the host slices of the later copies asked for %d times, want %d", taken, want)
			}
			for i, n := range c.sizes {
				for j := range n {
					if got[i][j] != want[i][j] {
						t.Fatalf("buffer %d (%d floats): element %d is %v, want %v", i, n, j, got[i][j], want[i][j])
					}
				}
				if got[i][n] != 12345 {
					t.Errorf("buffer %d: the element past the end was written: %v", i, got[i][n])
				}
			}
		})
	}
}

// TestFetcherDiscardOnGPU checks that discarded copies never reach their
// host slices and that the fetcher is usable after.
func TestFetcherDiscardOnGPU(t *testing.T) {
	f, err := dev.NewFetcher(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := dev.Alloc(4 * 100)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Free(b)
	src := make([]float32, 100)
	for i := range src {
		src[i] = float32(i) + 0.5
	}
	dropped := make([]float32, 100)
	kept := make([]float32, 100)
	err = dev.Run(func(th *Thread) error {
		if err := th.Upload(b, src); err != nil {
			return err
		}
		if err := f.Enqueue(th, dropped, b); err != nil {
			return err
		}
		f.Discard()
		if err := f.Enqueue(th, kept, b); err != nil {
			return err
		}
		return f.Finish(th)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range src {
		if dropped[i] != 0 {
			t.Fatalf("discarded copy wrote element %d: %v", i, dropped[i])
		}
		if kept[i] != src[i] {
			t.Fatalf("element %d: %v, want %v", i, kept[i], src[i])
		}
	}
}
