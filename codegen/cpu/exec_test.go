package cpu_test

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/analysis"
	"github.com/tilefuse/tilefuse/tile/kernels"
)

// TestConcurrentLaunches: one Exec launched from several goroutines at once.
func TestConcurrentLaunches(t *testing.T) {
	k, err := kernels.VecAdd(tile.Meta{"BLOCK": 64})
	if err != nil {
		t.Fatal(err)
	}
	e, err := cpu.NewExec(k)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for g := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 1000 + g
			x, y, out := make([]float32, n), make([]float32, n), make([]float32, n)
			for i := range x {
				x[i], y[i] = float32(i), float32(g)
			}
			if err := e.Launch(tile.Grid{tile.CDiv(n, 64)}, x, y, out, n); err != nil {
				errs[g] = err
				return
			}
			for i := range out {
				if out[i] != float32(i+g) {
					errs[g] = errors.New("wrong sum")
					return
				}
			}
		}()
	}
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			t.Errorf("launch %d: %v", g, err)
		}
	}
}

// TestLaneZeroOffsets: offsets used only as contiguous addresses are
// computed for lane 0 alone; the same offsets used also as values, or
// through a chain of integer ops, still give every lane its own.
func TestLaneZeroOffsets(t *testing.T) {
	const n, block = 4096, 256
	cases := []struct {
		name  string
		build func(b *tile.Builder, x, y *tile.Value, offs *tile.Value)
		want  func(i int, x float32) float32
	}{
		{"addresses only", func(b *tile.Builder, x, y, offs *tile.Value) {
			b.Store(b.AddPtr(y, offs), b.Mul(b.Load(b.AddPtr(x, offs), nil, nil), 2.0), nil)
		}, func(i int, x float32) float32 { return 2 * x }},
		{"through a chain of integer ops", func(b *tile.Builder, x, y, offs *tile.Value) {
			o := b.Sub(b.Add(b.Mul(offs, 3), 7), b.Add(b.Mul(offs, 2), 7)) // = offs
			b.Store(b.AddPtr(y, o), b.Load(b.AddPtr(x, o), nil, nil), nil)
		}, func(i int, x float32) float32 { return x }},
		{"also a value", func(b *tile.Builder, x, y, offs *tile.Value) {
			b.Store(b.AddPtr(y, offs), b.Add(b.Load(b.AddPtr(x, offs), nil, nil), b.Cast(offs, tile.F32)), nil)
		}, func(i int, x float32) float32 { return x + float32(i) }},
		{"a part of it a value", func(b *tile.Builder, x, y, offs *tile.Value) {
			r := b.Rem(offs, 16)
			b.Store(b.AddPtr(y, offs), b.Add(b.Load(b.AddPtr(x, offs), nil, nil), b.Cast(r, tile.F32)), nil)
		}, func(i int, x float32) float32 { return x + float32(i%16) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("lane0", nil)
			x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
			offs := b.Add(b.Mul(b.ProgramID(0), block), b.Arange(0, block))
			c.build(b, x, y, offs)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			in, out := make([]float32, n), make([]float32, n)
			for i := range in {
				in[i] = float32(i%7) - 3
				out[i] = float32(math.NaN())
			}
			if err := cpu.Run(k, tile.Grid{n / block}, in, out); err != nil {
				t.Fatal(err)
			}
			for i := range out {
				if w := c.want(i, in[i]); out[i] != w {
					t.Fatalf("y[%d] = %v, want %v", i, out[i], w)
				}
			}
		})
	}
}

// TestRowTiles: a 2-D tile whose rows are contiguous runs of a row-major
// matrix loads and stores row by row; rows partly masked, and a row that
// would read past the buffer, go lane by lane (the fault names its lane).
func TestRowTiles(t *testing.T) {
	const rows, cols = 20, 30 // the matrix; tiles of 8×16 at (r0, c0)
	build := func(masked bool) *tile.Kernel {
		b := tile.NewBuilder("row_tiles", nil)
		x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
		r0, c0 := b.Param("r0", tile.I32), b.Param("c0", tile.I32)
		r := b.ExpandDims(b.Add(b.Arange(0, 8), r0), 1)
		c := b.ExpandDims(b.Add(b.Arange(0, 16), c0), 0)
		off := b.Add(b.Mul(r, cols), c)
		var m *tile.Value
		if masked {
			m = b.And(b.Lt(r, rows), b.Lt(c, cols))
		}
		var v *tile.Value
		if m != nil {
			v = b.Load(b.AddPtr(x, off), m, -1.0)
		} else {
			v = b.Load(b.AddPtr(x, off), nil, nil)
		}
		b.Store(b.AddPtr(y, off), b.Mul(v, 2.0), m)
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	for _, c := range []struct {
		name   string
		masked bool
		r0, c0 int
		fault  string
	}{
		{"whole rows inside", false, 3, 5, ""},
		{"rows cut by the mask at the right edge", true, 4, 20, ""},
		{"rows cut by the mask at the bottom", true, 16, 0, ""},
		{"past the end without a mask", false, 16, 20, "lane"},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := build(c.masked)
			lanes := analysis.Axes(k, nil)
			k.Walk(func(v *tile.Value) {
				if v.Op == tile.OpLoad || v.Op == tile.OpStore {
					if li := lanes[v.Args[0].ID]; !li.RowContiguous() || li.Contiguous {
						t.Fatalf("%v: %+v, want rows contiguous (and not the whole tile)", v, li)
					}
				}
			})
			x, y := make([]float32, rows*cols), make([]float32, rows*cols)
			for i := range x {
				x[i] = float32(i)
				y[i] = -7
			}
			err := cpu.Run(k, tile.Grid{1}, x, y, c.r0, c.c0)
			if c.fault != "" {
				if err == nil || !strings.Contains(err.Error(), c.fault) {
					t.Fatalf("error %v, want a fault naming the %s", err, c.fault)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range y {
				r, cc := i/cols, i%cols
				want := float32(-7)
				if r >= c.r0 && r < c.r0+8 && cc >= c.c0 && cc < c.c0+16 {
					want = 2 * x[i]
				}
				if y[i] != want {
					t.Fatalf("y[%d,%d] = %v, want %v", r, cc, y[i], want)
				}
			}
		})
	}
}

// TestFoldedSplats: integer splats whose users only add them (an add, an
// addptr's offset) are read as scalars and never filled; the results are
// those of the filled splats, in a K loop as a matmul has it, beside a
// splat that another op also uses and an add of two splats.
func TestFoldedSplats(t *testing.T) {
	const rows, cols, steps = 8, 16, 3
	b := tile.NewBuilder("folded", nil)
	x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
	r := b.ExpandDims(b.Arange(0, rows), 1)
	c := b.ExpandDims(b.Arange(0, cols), 0)
	base := b.Add(b.Mul(r, cols*steps), c) // [rows, cols]: rows of x, cols wide
	acc := b.For(0, steps, 1, []*tile.Value{b.Zeros(tile.F32, rows, cols)}, func(k *tile.Value, carried []*tile.Value) []*tile.Value {
		kc := b.Mul(k, cols)
		v := b.Load(b.AddPtr(x, b.Add(base, kc)), nil, nil) // splat(kc): only added
		two := b.Add(b.Splat(k, tile.Shp(rows, cols)), b.Splat(kc, tile.Shp(rows, cols)))
		w := b.Cast(b.Mul(b.Splat(k, tile.Shp(rows, cols)), two), tile.F32) // a splat used by a mul too
		return []*tile.Value{b.Add(carried[0], b.Add(v, w))}
	})[0]
	b.Store(b.AddPtr(y, b.Add(b.Mul(r, cols), c)), acc, nil)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	in := make([]float32, rows*cols*steps)
	for i := range in {
		in[i] = float32(i%13) - 6
	}
	out := make([]float32, rows*cols)
	for i := range out {
		out[i] = float32(math.NaN())
	}
	if err := cpu.Run(k, tile.Grid{1}, in, out); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			want := float32(0)
			for s := 0; s < steps; s++ {
				want += in[i*cols*steps+s*cols+j] + float32(s*(s+s*cols))
			}
			if got := out[i*cols+j]; got != want {
				t.Fatalf("y[%d,%d] = %v, want %v\n%s", i, j, got, want, k)
			}
		}
	}
}
