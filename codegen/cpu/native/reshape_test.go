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
// Reshapes of values held in frame blocks — a reduction's result (f32, and
// an i32 argmax), a product's, a loop-carried block in the loop and after
// it — read the block at the new shape (plan.go: regroupFrame; declined
// before the fifty-eighth session), and a row's maximum broadcast back
// and then regrouped is the maximum regrouped and broadcast (tile's
// SinkReshapes). A reshape the code cannot take as either (rows 17
// apart merged, a product's transpose flattened) is still declined,
// saying so.
func TestRegroupingReshapesNative(t *testing.T) {
	requireJIT(t)
	type kernel func(b *tile.Builder, x, y *tile.Value, n *tile.Value)
	for _, c := range []struct {
		name    string
		n, ylen int
		grid    int
		build   kernel
		decline string  // what Compile's error says, where it declines
		tol     float64 // |native − reference| ≤ tol·max(1, |reference|): products' sums in another order, exp within its ulps (else bit for bit)
	}{
		{"pair sums [256] → [128, 2], a tail", 1000, 500, 4, func(b *tile.Builder, x, y, n *tile.Value) {
			offs := b.Add(b.Mul(b.ProgramID(0), 256), b.Arange(0, 256))
			v := b.Load(b.AddPtr(x, offs), b.Lt(offs, n), 0.0)
			s := b.Sum(b.Reshape(v, 128, 2), 1)
			k := b.Add(b.Mul(b.ProgramID(0), 128), b.Arange(0, 128))
			b.Store(b.AddPtr(y, k), s, b.Lt(k, b.Div(n, 2)))
		}, "", 0},
		{"max of fours of √|x/2| [64] → [16, 4]", 128, 32, 2, func(b *tile.Builder, x, y, n *tile.Value) {
			offs := b.Add(b.Mul(b.ProgramID(0), 64), b.Arange(0, 64))
			e := b.Sqrt(b.Abs(b.Mul(b.Load(b.AddPtr(x, offs), nil, nil), 0.5)))
			m := b.Max(b.Reshape(e, 16, 4), 1)
			b.Store(b.AddPtr(y, b.Add(b.Mul(b.ProgramID(0), 16), b.Arange(0, 16))), m, nil)
		}, "", 0},
		{"[64] → [2, 4, 8] summed along the last axis", 64, 8, 1, func(b *tile.Builder, x, y, n *tile.Value) {
			v := b.Load(b.AddPtr(x, b.Reshape(b.Arange(0, 64), 2, 4, 8)), nil, nil)
			s := b.Sum(v, 2) // [2, 4]
			b.Store(b.AddPtr(y, b.Reshape(b.Arange(0, 8), 2, 4)), s, nil)
		}, "", 0},
		{"[8, 16] rows 16 apart merged into [128]", 128, 128, 1, func(b *tile.Builder, x, y, n *tile.Value) {
			i, j := b.ExpandDims(b.Arange(0, 8), 1), b.ExpandDims(b.Arange(0, 16), 0)
			v := b.Load(b.AddPtr(x, b.Add(b.Mul(i, 16), j)), nil, nil)
			w := b.Reshape(b.Add(b.Mul(v, v), 1.0), 128)
			b.Store(b.AddPtr(y, b.Arange(0, 128)), w, nil)
		}, "", 0},
		{"[8, 16] rows 17 apart merged: declined", 8 * 17, 128, 1, func(b *tile.Builder, x, y, n *tile.Value) {
			i, j := b.ExpandDims(b.Arange(0, 8), 1), b.ExpandDims(b.Arange(0, 16), 0)
			v := b.Load(b.AddPtr(x, b.Add(b.Mul(i, 17), j)), nil, nil)
			b.Store(b.AddPtr(y, b.Arange(0, 128)), b.Reshape(v, 128), nil)
		}, "reshape [8,16] → [128]", 0},
		{"a reduction's result regrouped [16] → [4, 4]", 128, 16, 1, func(b *tile.Builder, x, y, n *tile.Value) {
			i, j := b.ExpandDims(b.Arange(0, 16), 1), b.ExpandDims(b.Arange(0, 8), 0)
			s := b.Sum(b.Load(b.AddPtr(x, b.Add(b.Mul(i, 8), j)), nil, nil), 1) // [16]
			b.Store(b.AddPtr(y, b.Reshape(b.Arange(0, 16), 4, 4)), b.Reshape(s, 4, 4), nil)
		}, "", 0},
		{"a product's rows split [2, 8, 16], summed along each part", 256, 64, 1, func(b *tile.Builder, x, y, n *tile.Value) {
			i, j := b.ExpandDims(b.Arange(0, 16), 1), b.ExpandDims(b.Arange(0, 16), 0)
			a := b.Load(b.AddPtr(x, b.Add(b.Mul(i, 16), j)), nil, nil)
			d := b.Reshape(b.Dot(a, b.Trans(a), nil, tile.PrecIEEE), 2, 8, 16)
			s0, s1 := b.Sum(d, 0), b.Max(d, 1) // [8, 16], [2, 16]
			i8, i2 := b.ExpandDims(b.Arange(0, 8), 1), b.ExpandDims(b.Arange(0, 2), 1)
			b.Store(b.AddPtr(y, b.Add(b.Mul(i8, 4), b.Reshape(b.Arange(0, 16), 1, 16))), s0, b.Lt(j, 4))
			b.Store(b.AddPtr(y, b.Add(b.Add(b.Mul(i2, 16), j), 32)), s1, nil)
		}, "", 1e-4},
		{"a loop-carried block's columns split [16, 2, 4], in the loop and after it", 256, 48, 1, func(b *tile.Builder, x, y, n *tile.Value) {
			i, j := b.ExpandDims(b.Arange(0, 16), 1), b.ExpandDims(b.Arange(0, 8), 0)
			res := b.For(0, 3, 1, []*tile.Value{b.Zeros(tile.F32, 16, 8)}, func(iv *tile.Value, c []*tile.Value) []*tile.Value {
				v := b.Load(b.AddPtr(x, b.Add(b.Mul(i, 8), b.Add(j, b.Mul(iv, 128)))), b.Lt(b.Add(j, b.Mul(iv, 128)), n), 0.0)
				m := b.Max(b.Reshape(c[0], 16, 2, 4), 1) // [16, 4]: the larger of columns 4 apart
				return []*tile.Value{b.Add(b.Mul(c[0], 0.5), b.Add(v, b.Sum(m, 1, true)))}
			})
			s := b.Sum(b.Reshape(res[0], 16, 2, 4), 2) // [16, 2]
			i16, j2 := b.ExpandDims(b.Arange(0, 16), 1), b.ExpandDims(b.Arange(0, 2), 0)
			b.Store(b.AddPtr(y, b.Add(b.Mul(i16, 2), j2)), s, nil)
		}, "", 0},
		{"a loop-carried block read regrouped [8, 16] and transposed in its own yield", 512, 128, 1, func(b *tile.Builder, x, y, n *tile.Value) {
			i, j := b.ExpandDims(b.Arange(0, 16), 1), b.ExpandDims(b.Arange(0, 8), 0)
			init := b.Load(b.AddPtr(x, b.Add(b.Mul(i, 8), j)), nil, nil)
			res := b.For(1, 4, 1, []*tile.Value{init}, func(iv *tile.Value, c []*tile.Value) []*tile.Value {
				v := b.Load(b.AddPtr(x, b.Add(b.Add(b.Mul(i, 8), j), b.Mul(iv, 128))), nil, nil)
				return []*tile.Value{b.Add(b.Add(b.Mul(c[0], 0.5), v), b.Trans(b.Reshape(c[0], 8, 16)))}
			})
			b.Store(b.AddPtr(y, b.Add(b.Mul(i, 8), j)), res[0], nil)
		}, "", 0},
		{"a row's max broadcast back, the rows split [4, 4, 8] and summed", 128, 32, 1, func(b *tile.Builder, x, y, n *tile.Value) {
			i, j := b.ExpandDims(b.Arange(0, 16), 1), b.ExpandDims(b.Arange(0, 8), 0)
			v := b.Load(b.AddPtr(x, b.Add(b.Mul(i, 8), j)), nil, nil)
			w := b.Sub(v, b.Max(v, 1, true))            // [16, 8]: the max broadcast along the row
			s := b.Sum(b.Reshape(b.Exp(w), 4, 4, 8), 1) // [4, 8]
			b.Store(b.AddPtr(y, b.Reshape(b.Arange(0, 32), 4, 8)), s, nil)
		}, "", 1e-6},
		{"a row's argmax (i32) regrouped [16] → [4, 4], the larger of each column", 128, 4, 1, func(b *tile.Builder, x, y, n *tile.Value) {
			i, j := b.ExpandDims(b.Arange(0, 16), 1), b.ExpandDims(b.Arange(0, 8), 0)
			v := b.Load(b.AddPtr(x, b.Add(b.Mul(i, 8), j)), nil, nil)
			at := b.Where(b.Eq(v, b.Max(v, 1, true)), b.BroadcastTo(j, tile.Shp(16, 8)), int32(99))
			arg := b.Min(at, 1) // [16] i32
			b.Store(b.AddPtr(y, b.Arange(0, 4)), b.Cast(b.Max(b.Reshape(arg, 4, 4), 0), tile.F32), nil)
		}, "", 0},
		{"a product's transpose regrouped: declined", 256, 256, 1, func(b *tile.Builder, x, y, n *tile.Value) {
			i, j := b.ExpandDims(b.Arange(0, 16), 1), b.ExpandDims(b.Arange(0, 16), 0)
			a := b.Load(b.AddPtr(x, b.Add(b.Mul(i, 16), j)), nil, nil)
			d := b.Trans(b.Dot(a, a, nil, tile.PrecIEEE))
			b.Store(b.AddPtr(y, b.Arange(0, 256)), b.Reshape(d, 256), nil)
		}, "reshape [16,16] → [256]", 0},
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
					if c.tol > 0 && i < c.ylen && math.Abs(float64(got[i]-want[i])) <= c.tol*math.Max(1, math.Abs(float64(want[i]))) {
						continue
					}
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
