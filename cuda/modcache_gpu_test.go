//go:build tilefuse_cuda

package cuda

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tilefuse/tilefuse/diskcache"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/kernels"
)

// TestModuleCacheOnGPU: a module is linked once and written to the disk
// cache; a second device (another context, as another process would have)
// loads it from there and computes the same; an entry damaged on disk is
// not loaded but linked again; kernels that differ only in name share one
// module in a device.
func TestModuleCacheOnGPU(t *testing.T) {
	dir := t.TempDir()
	c := diskcache.Open(dir)
	k, err := kernels.Softmax(tile.Meta{"BLOCK": 1024})
	if err != nil {
		t.Fatal(err)
	}
	run := func(d *Device) []float32 {
		x := make([]float32, 4*1000)
		for i := range x {
			x[i] = float32(i%37) / 9
		}
		y := make([]float32, len(x))
		bx, err := d.Alloc(4 * int64(len(x)))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Free(bx)
		by, err := d.Alloc(4 * int64(len(y)))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Free(by)
		if err := d.Upload(bx, x); err != nil {
			t.Fatal(err)
		}
		args := []any{bx, by, 1000, 1000}
		_, f, err := d.CompileCached(k, 4, args, c)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Launch(f, k, tile.Grid{4}, args...); err != nil {
			t.Fatal(err)
		}
		if err := d.Download(y, by); err != nil {
			t.Fatal(err)
		}
		return y
	}
	d1, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	want := run(d1)
	d1.Close()
	if d1.Linked != 1 || d1.DiskHits != 0 {
		t.Fatalf("first device: linked %d, from disk %d; want 1 and 0", d1.Linked, d1.DiskHits)
	}
	d2, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	got := run(d2)
	d2.Close()
	if d2.Linked != 0 || d2.DiskHits != 1 {
		t.Fatalf("second device: linked %d, from disk %d; want 0 and 1", d2.Linked, d2.DiskHits)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("y[%d] = %v from the cached module, %v from the linked one", i, got[i], want[i])
		}
	}
	entries, _ := filepath.Glob(filepath.Join(dir, "cubin", "*", "*"))
	if len(entries) != 1 {
		t.Fatalf("%d entries on disk, want 1", len(entries))
	}
	b, err := os.ReadFile(entries[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(entries[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	d3, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	defer d3.Close()
	got = run(d3)
	if d3.Linked != 1 || d3.DiskHits != 0 || c.Corrupt.Load() != 1 {
		t.Fatalf("a damaged entry: linked %d, from disk %d, corrupt %d; want 1, 0, 1", d3.Linked, d3.DiskHits, c.Corrupt.Load())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("y[%d] = %v after relinking, %v before", i, got[i], want[i])
		}
	}
}
