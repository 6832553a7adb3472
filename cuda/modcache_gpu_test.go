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

// TestCompileManyOnGPU: kernels compiled together (codegen and the linker
// in parallel) give one function per distinct kernel (a repeated one
// shares it), each linked once and written to the disk cache, and each
// computes what it computes when compiled alone.
func TestCompileManyOnGPU(t *testing.T) {
	c := diskcache.Open(t.TempDir())
	d, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const n = 5000
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i), float32(2*i)
	}
	bufs := make([]*Buffer, 3)
	for i := range bufs {
		if bufs[i], err = d.Alloc(4 * n); err != nil {
			t.Fatal(err)
		}
		defer d.Free(bufs[i])
	}
	if err := d.Upload(bufs[0], x); err != nil {
		t.Fatal(err)
	}
	if err := d.Upload(bufs[1], y); err != nil {
		t.Fatal(err)
	}
	args := []any{bufs[0], bufs[1], bufs[2], n}
	var jobs []Job
	for _, block := range []int{256, 512, 1024, 256} {
		k, err := kernels.VecAdd(tile.Meta{"BLOCK": block})
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, Job{Kernel: k, NumWarps: 4, Args: args})
	}
	fs, err := d.CompileMany(jobs, c)
	if err != nil {
		t.Fatal(err)
	}
	if fs[0] != fs[3] || fs[0] == fs[1] || fs[1] == fs[2] {
		t.Fatal("a repeated kernel has its own function, or distinct kernels share one")
	}
	if d.Linked != 3 {
		t.Fatalf("linked %d modules, want 3", d.Linked)
	}
	if u, err := c.Usage(); err != nil || u.Kinds["cubin"] != 3 {
		t.Fatalf("%v entries on disk (%v), want 3 cubins", u.Kinds, err)
	}
	for i, f := range fs {
		out := make([]float32, n)
		if err := d.Upload(bufs[2], out); err != nil {
			t.Fatal(err)
		}
		k := jobs[i].Kernel
		if err := d.Launch(f, k, tile.Grid{tile.CDiv(n, k.Meta["BLOCK"])}, args...); err != nil {
			t.Fatal(err)
		}
		if err := d.Download(out, bufs[2]); err != nil {
			t.Fatal(err)
		}
		for j := range out {
			if out[j] != x[j]+y[j] {
				t.Fatalf("kernel %d: out[%d] = %v, want %v", i, j, out[j], x[j]+y[j])
			}
		}
	}
}
