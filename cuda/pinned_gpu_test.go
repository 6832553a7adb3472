//go:build tilefuse_cuda

package cuda

import (
	"math/rand/v2"
	"testing"
)

// TestStagerOnGPU uploads tensors of sizes around and across the slot size
// through a stager of three slots (small ones copied by one core; 1 MiB
// ones, each piece copied by 4 cores), back to back without waiting,
// overwriting each host slice as soon as Upload returns, and checks every
// buffer's bytes afterwards: no copy reads a slot the host has reused, and
// pieces land at their offsets.
func TestStagerOnGPU(t *testing.T) {
	cases := []struct {
		name    string
		slot    int64 // bytes
		workers int   // cores copying a piece (parallelCopy)
		sizes   []int // float32s
	}{
		// slots not a multiple of 4 bytes, so float32s straddle them
		{"small slots", 1000, 1, []int{1, 7, 249, 250, 251, 500, 751, 1000, 2503, 20000}},
		{"1 MiB slots on 4 cores", 1<<20 + 3, 4, []int{1, 131072, 262145, 400000, 900001}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { stagerCase(t, c.slot, c.workers, c.sizes) })
	}
}

func stagerCase(t *testing.T, slot int64, workers int, sizes []int) {
	s, err := dev.NewStager(slot, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Workers = workers
	rng := rand.New(rand.NewPCG(13, 1))
	var bufs []*Buffer
	var want [][]float32
	defer func() {
		for _, b := range bufs {
			dev.Free(b)
		}
	}()
	for _, n := range sizes {
		b, err := dev.Alloc(int64(4 * n))
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
		w := make([]float32, n)
		for i := range w {
			w[i] = rng.Float32()
		}
		want = append(want, w)
	}
	var total int64
	err = dev.Run(func(th *Thread) error {
		for rep := 0; rep < 3; rep++ { // three rounds: slots wrap around many times
			for i, w := range want {
				host := append([]float32(nil), w...)
				if rep < 2 { // earlier rounds upload something else first
					for j := range host {
						host[j] = -1
					}
				}
				if err := s.Upload(th, bufs[i], host); err != nil {
					return err
				}
				total += int64(4 * len(host))
				for j := range host { // the host may change at once
					host[j] = 1e9
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		got := make([]float32, len(w))
		if err := dev.Download(got, bufs[i]); err != nil {
			t.Fatal(err)
		}
		for j := range w {
			if got[j] != w[j] {
				t.Fatalf("%d floats: element %d is %v, uploaded %v", len(w), j, got[j], w[j])
			}
		}
	}
	if s.Bytes != total {
		t.Errorf("stager counted %d bytes, %d uploaded", s.Bytes, total)
	}
	if _, err := dev.NewStager(0, 2); err == nil {
		t.Error("a stager of empty slots: no error")
	}
}

// TestMemInfoOnGPU: the free memory drops by an allocation of 256 MiB and
// comes back when it is freed and the free list trimmed (within the
// driver's page granularity, 2 MiB).
func TestMemInfoOnGPU(t *testing.T) {
	if err := dev.Trim(); err != nil { // what earlier tests left in the free list
		t.Fatal(err)
	}
	free0, total, err := dev.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if free0 <= 0 || free0 > total {
		t.Fatalf("free %d of %d bytes", free0, total)
	}
	const n = 256 << 20
	b, err := dev.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	free1, _, err := dev.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Free(b); err != nil { // into the free list
		t.Fatal(err)
	}
	if err := dev.Trim(); err != nil { // back to the driver
		t.Fatal(err)
	}
	free2, _, err := dev.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if free0-free1 < n {
		t.Errorf("allocating %d bytes took %d from the free memory", n, free0-free1)
	}
	if d := free0 - free2; d > 2<<20 || d < -(2<<20) {
		t.Errorf("free memory %d before, %d after freeing again", free0, free2)
	}
}
