package native_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestRegroupingReshapesNative: kernels that reshape a load or values
// computed from one into other dimensions (Triton's pairwise sums, a row
// of 64 as [2, 4, 8], a contiguous [8, 16] block as [128]) run as machine
// code (Compile plans tile's SinkReshapes copy, and the plan reshapes
// integer ranges by their coefficients), with the reference's results bit
// for bit on poisoned outputs, tails masked; all of them were declined
// before 2026-12-07's fifty-sixth session ("reshape [256] → [128,2]").
// A reshape the code cannot take as an affine one (rows 17 apart merged,
// a reduction's result regrouped) is still declined, saying so.
func TestRegroupingReshapesNative(t *testing.T) {
	requireJIT(t)
	type kernel func(b *tile.Builder, x, y *tile.Value, n *tile.Value)
	for _, c := range []struct {
		name    string
		n, ylen int
		grid    int
		build   kernel
		decline string // what Compile's error says, where it declines
	}{
		{"pair sums [256] → [128, 2], a tail", 1000, 500, 4, func(b *tile.Builder, x, y, n *tile.Value) {
			offs := b.Add(b.Mul(b.ProgramID(0), 256), b.Arange(0, 256))
			v := b.Load(b.AddPtr(x, offs), b.Lt(offs, n), 0.0)
			s := b.Sum(b.Reshape(v, 128, 2), 1)
			k := b.Add(b.Mul(b.ProgramID(0), 128), b.Arange(0, 128))
			b.Store(b.AddPtr(y, k), s, b.Lt(k, b.Div(n, 2)))
		}, ""},
		{"max of fours of √|x/2| [64] → [16, 4]", 128, 32, 2, func(b *tile.Builder, x, y, n *tile.Value) {
			offs := b.Add(b.Mul(b.ProgramID(0), 64), b.Arange(0, 64))
			e := b.Sqrt(b.Abs(b.Mul(b.Load(b.AddPtr(x, offs), nil, nil), 0.5)))
			m := b.Max(b.Reshape(e, 16, 4), 1)
			b.Store(b.AddPtr(y, b.Add(b.Mul(b.ProgramID(0), 16), b.Arange(0, 16))), m, nil)
		}, ""},
		{"[64] → [2, 4, 8] summed along the last axis", 64, 8, 1, func(b *tile.Builder, x, y, n *tile.Value) {
			v := b.Load(b.AddPtr(x, b.Reshape(b.Arange(0, 64), 2, 4, 8)), nil, nil)
			s := b.Sum(v, 2) // [2, 4]
			b.Store(b.AddPtr(y, b.Reshape(b.Arange(0, 8), 2, 4)), s, nil)
		}, ""},
		{"[8, 16] rows 16 apart merged into [128]", 128, 128, 1, func(b *tile.Builder, x, y, n *tile.Value) {
			i, j := b.ExpandDims(b.Arange(0, 8), 1), b.ExpandDims(b.Arange(0, 16), 0)
			v := b.Load(b.AddPtr(x, b.Add(b.Mul(i, 16), j)), nil, nil)
			w := b.Reshape(b.Add(b.Mul(v, v), 1.0), 128)
			b.Store(b.AddPtr(y, b.Arange(0, 128)), w, nil)
		}, ""},
		{"[8, 16] rows 17 apart merged: declined", 8 * 17, 128, 1, func(b *tile.Builder, x, y, n *tile.Value) {
			i, j := b.ExpandDims(b.Arange(0, 8), 1), b.ExpandDims(b.Arange(0, 16), 0)
			v := b.Load(b.AddPtr(x, b.Add(b.Mul(i, 17), j)), nil, nil)
			b.Store(b.AddPtr(y, b.Arange(0, 128)), b.Reshape(v, 128), nil)
		}, "reshape [8,16] → [128]"},
		{"a reduction's result regrouped: declined", 128, 16, 1, func(b *tile.Builder, x, y, n *tile.Value) {
			i, j := b.ExpandDims(b.Arange(0, 16), 1), b.ExpandDims(b.Arange(0, 8), 0)
			s := b.Sum(b.Load(b.AddPtr(x, b.Add(b.Mul(i, 8), j)), nil, nil), 1) // [16]
			b.Store(b.AddPtr(y, b.Reshape(b.Arange(0, 16), 4, 4)), b.Reshape(s, 4, 4), nil)
		}, "reshape [16] → [4,4]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("regroup", nil)
			x, y, n := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32), b.Param("n", tile.I32)
			c.build(b, x, y, n)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			if c.decline != "" {
				_, err := native.Compile(k)
				if !errors.Is(err, native.ErrUnsupported) || !strings.Contains(err.Error(), c.decline) {
					t.Fatalf("Compile: %v; want it declined with %q", err, c.decline)
				}
				return
			}
			xs := tiletest.Uniform(tiletest.RNG(c.name), c.n, -3, 3)
			grid := tile.Grid{c.grid}
			for _, isa := range isas(t) {
				nk := compileFor(t, isa, k)
				run := func(launch func(args ...any) error) ([]float32, error) {
					out := make([]float32, c.ylen+8)
					for i := range out {
						out[i] = float32(math.NaN())
					}
					return out, launch(xs, out, c.n)
				}
				got, gerr := run(func(args ...any) error { return nk.Launch(grid, args...) })
				want, werr := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, grid, args...) })
				if gerr != nil || werr != nil {
					t.Fatalf("%s: native %v, reference %v", isa, gerr, werr)
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s: y[%d] = %v natively, %v on the reference", isa, i, got[i], want[i])
					}
				}
				for i := c.ylen; i < len(got); i++ {
					if !math.IsNaN(float64(got[i])) {
						t.Fatalf("%s: y[%d] = %v past the output", isa, i, got[i])
					}
				}
			}
		})
	}
}
