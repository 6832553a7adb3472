package native_test

import (
	"errors"
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestCompare64Native: kernels that index in 64 bits (tile.Builder.Index64,
// as graphpass writes kernels over tensors past graphpass.MaxElements)
// run as machine code, bit for bit the reference interpreter on poisoned
// outputs: a masked tail whose offsets and bound are past 2³¹ (a base
// added to both, up to 2⁶², and below −2⁴⁰), and all six comparisons of
// a 2-D block's flat i64 index with a bound, at bounds inside the block,
// past it either way by far (−c clamped to int32: every lane true or
// false), and at the int32 range's edges; a transposed load whose row
// stride is an i32 parameter widened to i64. Declined before the
// fifty-eighth session (2026-12-07: "i64 comparisons"); graphpass left
// such nodes to Gorgonia on a CPU.
func TestCompare64Native(t *testing.T) {
	requireJIT(t)
	t.Run("a masked tail past 2³¹", func(t *testing.T) {
		b := tile.NewBuilder("tail64", nil)
		b.Index64()
		x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
		base, n := b.Param("base", tile.I64), b.Param("n", tile.I64)
		offs := b.Add(base, b.Add(b.Mul(b.ProgramID(0), 256), b.Arange(0, 256))) // base + pid·256 + lane
		m := b.Lt(offs, b.Add(base, n))
		at := b.Sub(offs, base)
		b.Store(b.AddPtr(y, at), b.Add(b.Mul(b.Load(b.AddPtr(x, at), m, 0.0), 2.0), 1.0), m)
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		xs := tiletest.Uniform(tiletest.RNG("tail64"), 1024, -2, 2)
		for _, base := range []int64{0, 1<<31 - 100, 1<<33 + 7, -1 << 40, 1 << 62} {
			bitsAgainstReference(t, k, tile.Grid{4}, func(launch func(args ...any) error) []uint32 {
				out := tiletest.Output(1024)
				if err := launch(xs, out, base, int64(1000)); err != nil {
					t.Fatalf("base %d: %v", base, err)
				}
				return bitsF32(out)
			})
		}
	})
	t.Run("six comparisons of a 2-D block's flat index", func(t *testing.T) {
		b := tile.NewBuilder("cmp64", nil)
		b.Index64()
		y := b.Ptr("y", tile.F32)
		base, bound := b.Param("base", tile.I64), b.Param("bound", tile.I64)
		i, j := b.ExpandDims(b.Arange(0, 16), 1), b.ExpandDims(b.Arange(0, 16), 0)
		rows := b.Add(b.Add(base, b.Mul(b.ProgramID(0), 16)), i)
		flat := b.Add(b.Mul(rows, 16), j) // base·16 + (pid·16 + i)·16 + j
		at := b.Sub(flat, b.Mul(base, 16))
		lim := b.Add(b.Mul(base, 16), bound)
		for q, c := range []func(x, y any) *tile.Value{b.Lt, b.Le, b.Gt, b.Ge, b.Eq, b.Ne} {
			b.Store(b.AddPtr(y, b.Add(at, q*512)), b.Cast(c(flat, lim), tile.F32), nil)
		}
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			base, bound int64
		}{
			{0, 37}, {0, 256}, {1 << 33, 300}, {-1 << 40, 5}, {1 << 33, 1 << 35}, {1 << 33, -1 << 35},
			{0, math.MaxInt32}, {0, math.MinInt32}, {0, math.MaxInt32 + 1}, {0, math.MinInt32 - 1}, {0, -1},
		} {
			bitsAgainstReference(t, k, tile.Grid{2}, func(launch func(args ...any) error) []uint32 {
				out := tiletest.Output(6 * 512)
				if err := launch(out, c.base, c.bound); err != nil {
					t.Fatalf("base %d, bound %d: %v", c.base, c.bound, err)
				}
				return bitsF32(out)
			})
		}
	})
	t.Run("a transposed load with a row stride parameter", func(t *testing.T) {
		// an f64 block read down x's columns, the stride between its lanes
		// an i32 parameter widened to i64
		b := tile.NewBuilder("trans64", nil)
		b.Index64()
		x, y, n := b.Ptr("x", tile.F64), b.Ptr("y", tile.F64), b.Param("n", tile.I32)
		i, j := b.ExpandDims(b.Arange(0, 16), 1), b.ExpandDims(b.Arange(0, 8), 0)
		rows := b.Add(b.Mul(b.ProgramID(0), 16), i)
		v := b.Load(b.AddPtr(x, b.Add(b.Mul(j, n), rows)), b.Lt(rows, n), 0.0) // x[j][rows]: down x's columns
		b.Store(b.AddPtr(y, b.Add(b.Mul(rows, 8), j)), b.Mul(v, 3.0), b.Lt(rows, n))
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		xs := make([]float64, 8*40)
		for i, v := range tiletest.Uniform(tiletest.RNG("trans64"), len(xs), -2, 2) {
			xs[i] = float64(v) / 3
		}
		bitsAgainstReference(t, k, tile.Grid{3}, func(launch func(args ...any) error) []uint32 {
			out := make([]float64, 48*8+8)
			for i := range out {
				out[i] = math.NaN()
			}
			if err := launch(xs, out, 40); err != nil {
				t.Fatal(err)
			}
			return bitsF64(out)
		})
	})
	t.Run("lanes spanning past 2³⁰: the program bails out", func(t *testing.T) {
		b := tile.NewBuilder("span64", nil)
		b.Index64()
		y := b.Ptr("y", tile.F32)
		stride, bound := b.Param("stride", tile.I64), b.Param("bound", tile.I64)
		i, j := b.ExpandDims(b.Arange(0, 4), 1), b.ExpandDims(b.Arange(0, 8), 0)
		v := b.Add(b.Mul(i, stride), j) // rows stride apart: i·stride + j
		b.Store(b.AddPtr(y, b.Add(b.Mul(i, 8), j)), b.Cast(b.Lt(v, bound), tile.F32), nil)
		k, nk := buildNative(t, b)
		defer nk.Free()
		for _, c := range []struct {
			stride, bound int64
			bails         bool
		}{{1 << 20, 2<<20 + 3, false}, {1 << 29, 2<<29 + 3, true}, {1 << 40, 2<<40 + 3, true}} {
			out := tiletest.Output(32)
			err := nk.Launch(tile.Grid{1}, out, c.stride, c.bound)
			var pe *native.Partial
			if bailed := errors.As(err, &pe) || errors.Is(err, native.ErrFallback); bailed != c.bails || err != nil && !bailed {
				t.Fatalf("stride %d: Launch %v, want it to bail out %v", c.stride, err, c.bails)
			}
			want, got := tiletest.Output(32), tiletest.Output(32)
			if err := (tiletest.Interp{}).Launch(k, tile.Grid{1}, want, c.stride, c.bound); err != nil {
				t.Fatal(err)
			}
			if err := cpu.RunNative(k, tile.Grid{1}, got, c.stride, c.bound); err != nil {
				t.Fatal(err)
			}
			for q := range want {
				if math.Float32bits(got[q]) != math.Float32bits(want[q]) || (q < 19) != (want[q] == 1) {
					t.Fatalf("stride %d: y[%d] = %v, the reference %v", c.stride, q, got[q], want[q])
				}
			}
		}
	})
}
