package native_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestNarrowColumnReductionsNative: sums, maxima and minima down the
// columns of a rows×cols block whose rows are narrower than a vector (1,
// 2, 4 or 6 columns; f32 and f64), its rows masked past m, a value
// computed from the result stored beside it, run as machine code and give
// the interpreter's values (sums within their bound; max and min exactly).
// (Before 2026-12-07 the code generator declined such reductions: its
// vector of partial results would have run past the result's frame block.)
func TestNarrowColumnReductionsNative(t *testing.T) {
	requireJIT(t)
	for _, d := range []tile.DType{tile.F32, tile.F64} {
		for _, op := range []tile.Op{tile.OpReduceSum, tile.OpReduceMax, tile.OpReduceMin} {
			for _, cols := range []int{1, 2, 4, 6} {
				name := fmt.Sprintf("%v/%v/cols=%d", d, op, cols)
				t.Run(name, func(t *testing.T) {
					const rows, m = 32, 29
					b := tile.NewBuilder("narrow_cols", nil)
					x, out := b.Ptr("x", d), b.Ptr("out", d)
					w := 1
					for w < cols {
						w *= 2
					}
					r, c := b.ExpandDims(b.Arange(0, rows), 1), b.ExpandDims(b.Arange(0, w), 0)
					in := b.And(b.Lt(r, m), b.Lt(c, cols))
					other := 0.0
					if op == tile.OpReduceMax {
						other = math.Inf(-1)
					} else if op == tile.OpReduceMin {
						other = math.Inf(1)
					}
					v := b.Load(b.AddPtr(x, b.Add(b.Mul(r, cols), c)), in, other)
					red := b.Reduce(op, v, 0) // [w]
					cs := b.Arange(0, w)
					b.Store(b.AddPtr(out, cs), red, b.Lt(cs, cols))
					b.Store(b.AddPtr(out, b.Add(cs, cols)), b.Mul(red, 2.0), b.Lt(cs, cols))
					k, nk := buildNative(t, b)
					defer nk.Free()
					rng := tiletest.RNG(name)
					xs := tiletest.Uniform(rng, m*cols, -2, 2)
					run := func(f func(args ...any) error) []float64 {
						var res []float64
						if d == tile.F32 {
							o := make([]float32, 2*cols+3)
							for i := range o {
								o[i] = float32(math.NaN())
							}
							if err := f(xs, o); err != nil {
								t.Fatal(err)
							}
							for _, e := range o {
								res = append(res, float64(e))
							}
							return res
						}
						x64 := make([]float64, len(xs))
						for i := range xs {
							x64[i] = float64(xs[i])
						}
						o := make([]float64, 2*cols+3)
						for i := range o {
							o[i] = math.NaN()
						}
						if err := f(x64, o); err != nil {
							t.Fatal(err)
						}
						return o
					}
					got := run(func(args ...any) error { return nk.Launch(tile.Grid{1}, args...) })
					want := run(func(args ...any) error { return interp.Interpret(k, tile.Grid{1}, args...) })
					for i := range want {
						tol := 0.0
						if op == tile.OpReduceSum && i < 2*cols {
							tol = 4 * float64(m) * 0x1p-24 * 2 * 2 * float64(m)
						}
						if i >= 2*cols {
							if !math.IsNaN(got[i]) {
								t.Fatalf("out[%d] = %v past the outputs, want it untouched (NaN)", i, got[i])
							}
							continue
						}
						if !(math.Abs(got[i]-want[i]) <= tol) {
							t.Fatalf("out[%d] = %v, interpreter %v (±%.3g)", i, got[i], want[i], tol)
						}
					}
				})
			}
		}
	}
}
