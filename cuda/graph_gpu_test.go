//go:build tilefuse_cuda

package cuda

import (
	"math/rand/v2"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/kernels"
)

// TestPackedAndGraphOnGPU: a softmax over 5 rows of 999 launched through
// Launch, through a Packed (and again after Set points it at another
// input), and as a graph of softmax(softmax(x)) with the zeroing of a
// poisoned buffer between them, replayed three times with a new x
// uploaded before each replay: every result is bit-identical to the one of
// plain launches of the same kernel on the same input (the graph reads the
// buffers' memory at each replay), and the zeroed buffer is all zeros.
func TestPackedAndGraphOnGPU(t *testing.T) {
	const rows, cols = 5, 999
	k, err := kernels.Softmax(tile.Meta{"BLOCK": 1024})
	if err != nil {
		t.Fatal(err)
	}
	alloc := func() *Buffer {
		b, err := dev.Alloc(4 * rows * cols)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dev.Free(b) })
		return b
	}
	bx, bx2, by, bz, bw := alloc(), alloc(), alloc(), alloc(), alloc()
	rng := rand.New(rand.NewPCG(21, 2))
	fresh := func() []float32 {
		x := make([]float32, rows*cols)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 3)
		}
		return x
	}
	down := func(b *Buffer) []float32 {
		y := make([]float32, rows*cols)
		if err := dev.Download(y, b); err != nil {
			t.Fatal(err)
		}
		return y
	}
	poison := func(b *Buffer) {
		p := make([]float32, rows*cols)
		for i := range p {
			p[i] = -7
		}
		if err := dev.Upload(b, p); err != nil {
			t.Fatal(err)
		}
	}
	same := func(what string, got, want []float32) {
		t.Helper()
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: [%d] = %v, want %v (plain launches)", what, i, got[i], want[i])
			}
		}
	}
	_, f, err := dev.Compile(k, 4, []any{bx, by, cols, cols})
	if err != nil {
		t.Fatal(err)
	}
	grid := tile.Grid{rows}
	// softmax(src) into dst by a plain launch
	plain := func(src, dst *Buffer) []float32 {
		poison(dst)
		if err := dev.Launch(f, k, grid, src, dst, cols, cols); err != nil {
			t.Fatal(err)
		}
		return down(dst)
	}
	x, x2 := fresh(), fresh()
	if err := dev.Upload(bx, x); err != nil {
		t.Fatal(err)
	}
	if err := dev.Upload(bx2, x2); err != nil {
		t.Fatal(err)
	}
	want := plain(bx, by)
	want2 := plain(bx2, by)

	p, err := dev.Pack(f, k, grid, bx, by, cols, cols)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Free()
	poison(by)
	if err := dev.Run(func(th *Thread) error { return th.LaunchPacked(p) }); err != nil {
		t.Fatal(err)
	}
	same("packed", down(by), want)
	if err := p.Set(0, bx2); err != nil {
		t.Fatal(err)
	}
	poison(by)
	if err := dev.Run(func(th *Thread) error { return th.LaunchPacked(p) }); err != nil {
		t.Fatal(err)
	}
	same("packed after Set", down(by), want2)
	if err := p.Set(0, 1.5); err == nil {
		t.Fatal("Set of a number for a pointer: no error")
	}

	// the graph: y = softmax(x), zero z, w = softmax(y)
	p1, err := dev.Pack(f, k, grid, bx, by, cols, cols)
	if err != nil {
		t.Fatal(err)
	}
	defer p1.Free()
	p2, err := dev.Pack(f, k, grid, by, bw, cols, cols)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Free()
	var g *Graph
	if err := dev.Run(func(th *Thread) error {
		var err error
		g, err = th.NewGraph([]GraphStep{{Launch: p1}, {Zero: bz}, {Launch: p2}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer dev.FreeGraph(g)
	if g.Nodes != 3 {
		t.Fatalf("graph of %d nodes, want 3", g.Nodes)
	}
	p1.Free() // the graph holds the arguments' values
	for rep := range 3 {
		x := fresh()
		if err := dev.Upload(bx, x); err != nil {
			t.Fatal(err)
		}
		wantY := plain(bx, by)
		wantW := plain(by, bw)
		poison(by)
		poison(bz)
		poison(bw)
		if err := dev.Run(func(th *Thread) error { return th.LaunchGraph(g) }); err != nil {
			t.Fatalf("replay %d: %v", rep, err)
		}
		same("graph's y", down(by), wantY)
		same("graph's w", down(bw), wantW)
		for i, v := range down(bz) {
			if v != 0 {
				t.Fatalf("replay %d: zeroed z[%d] = %v", rep, i, v)
			}
		}
	}
	if err := dev.Run(func(th *Thread) error { return th.LaunchPacked(p1) }); err == nil {
		t.Fatal("launch of a freed Packed: no error")
	}

	// SetLaunch: the graph's third step re-pointed at x2 (w = softmax(x2)),
	// its first left as it was (y = softmax(x))
	if err := p2.Set(0, bx2); err != nil {
		t.Fatal(err)
	}
	if err := dev.Run(func(th *Thread) error { return th.SetLaunch(g, 2, p2) }); err != nil {
		t.Fatal(err)
	}
	x = fresh()
	if err := dev.Upload(bx, x); err != nil {
		t.Fatal(err)
	}
	wantY := plain(bx, by)
	poison(by)
	poison(bw)
	if err := dev.Run(func(th *Thread) error { return th.LaunchGraph(g) }); err != nil {
		t.Fatal(err)
	}
	same("graph's y after SetLaunch of step 2", down(by), wantY)
	same("graph's w after SetLaunch of step 2", down(bw), want2)
	for _, c := range []struct {
		name string
		step int
		p    *Packed
	}{
		{"a zeroing step", 1, p2},
		{"a step out of range", 3, p2},
		{"a freed Packed", 0, p1},
	} {
		if err := dev.Run(func(th *Thread) error { return th.SetLaunch(g, c.step, c.p) }); err == nil {
			t.Errorf("SetLaunch of %s: no error", c.name)
		}
	}
}
