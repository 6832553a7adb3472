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

// TestUploadKeptOnGPU uploads from the same host memory run after run,
// rewriting it in place between runs, as a training loop refills its batch:
// the second upload from a range of 256 KiB or more locks it and later
// ones go straight from it (Stager.Direct counts them); every run's bytes
// arrive, including a subslice sharing a page with a locked range (the
// driver refuses to lock it: staged) and the uploads after a bound small
// enough to unlock ranges (pinPolicy); LockRepeated(false) and Close unlock
// everything.
func TestUploadKeptOnGPU(t *testing.T) {
	s, err := dev.NewStager(64<<10, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 300_001 // float32s: 1.2 MB, not a multiple of a page
	big := make([]float32, 3*n)
	hosts := map[string][]float32{
		"batch a":        big[:n],
		"batch b":        big[n+1024 : 2*n+1024], // shares pages with a and c: refused or staged
		"batch c":        big[2*n+2048:],
		"own memory":     make([]float32, n),
		"small (64 KiB)": make([]float32, 16<<10),
		"another own":    make([]float32, 2*n),
	}
	names := []string{"batch a", "batch b", "batch c", "own memory", "small (64 KiB)", "another own"}
	bufs := map[string]*Buffer{}
	for _, name := range names {
		b, err := dev.Alloc(int64(4 * len(hosts[name])))
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Free(b)
		bufs[name] = b
	}
	rng := rand.New(rand.NewPCG(21, 2))
	for rep := range 6 {
		switch rep {
		case 3: // new memory: staged now, locked next run
			hosts["own memory"] = make([]float32, n)
		case 4: // and room for little more than it: the others unlocked first
			s.pins.max = 5 << 20 / 2
		}
		want := map[string][]float32{}
		err := dev.Run(func(th *Thread) error {
			for _, name := range names {
				h := hosts[name]
				for i := range h {
					h[i] = rng.Float32() + float32(rep)
				}
				want[name] = append([]float32(nil), h...)
				if err := s.UploadKept(th, bufs[name], h); err != nil {
					return err
				}
			}
			return th.Sync()
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			got := make([]float32, len(want[name]))
			if err := dev.Download(got, bufs[name]); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if got[i] != want[name][i] {
					t.Fatalf("run %d, %s: element %d is %v, uploaded %v", rep, name, i, got[i], want[name][i])
				}
			}
		}
		if rep == 0 && s.Direct != 0 {
			t.Errorf("run 0: %d bytes sent straight from memory never uploaded from before", s.Direct)
		}
		if rep == 2 && s.Direct < int64(4*3*n) {
			t.Errorf("run 2: %d bytes sent straight from locked memory, want at least the three large ranges' %d", s.Direct, 4*3*n)
		}
	}
	if s.pins.evictions == 0 || len(s.pins.locked) == 0 {
		t.Errorf("after six runs: %d ranges unlocked for room, %d locked; want some of each", s.pins.evictions, len(s.pins.locked))
	}
	if err := s.LockRepeated(false); err != nil {
		t.Fatal(err)
	}
	if s.pins != nil {
		t.Error("LockRepeated(false) kept its ranges")
	}
}
