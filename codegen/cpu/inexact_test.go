package cpu_test

import (
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// both runs k on the executor and on the reference interpreter, each on its
// own copy of args, and returns the two copies.
func both(t *testing.T, k *tile.Kernel, grid tile.Grid, args ...any) (got, want []any) {
	t.Helper()
	clone := func() []any {
		c := make([]any, len(args))
		for i, a := range args {
			switch a := a.(type) {
			case []float32:
				c[i] = append([]float32(nil), a...)
			case []float64:
				c[i] = append([]float64(nil), a...)
			default:
				c[i] = a
			}
		}
		return c
	}
	got, want = clone(), clone()
	if err := cpu.Run(k, grid, got...); err != nil {
		t.Fatal(err)
	}
	if err := interp.Interpret(k, grid, want...); err != nil {
		t.Fatal(err)
	}
	return got, want
}

// ulpDiff is the distance between a and b in f32 units in the last place.
func ulpDiff(a, b float32) int64 {
	if a == b || a != a && b != b {
		return 0
	}
	ia, ib := int64(math.Float32bits(a)), int64(math.Float32bits(b))
	if ia&0x80000000 != ib&0x80000000 {
		return math.MaxInt64
	}
	return max(ia-ib, ib-ia)
}

// TestInexactOps checks, op by op, the bound that inexact states between the
// executor and the reference, on seeded inputs: f32 exp and tanh within 1
// ulp; a dot within 2K·2⁻²⁴·Σₖ|aᵢₖbₖⱼ| (each side's error is at most
// K·2⁻²⁴ of that sum); a row sum of n within 2n·u·Σ|x| (u = 2⁻²⁴ for f32,
// 2⁻⁵³ for f64).
func TestInexactOps(t *testing.T) {
	t.Run("exp_tanh_f32", func(t *testing.T) {
		for _, op := range []tile.Op{tile.OpExp, tile.OpTanh} {
			const n = 1 << 14
			b := tile.NewBuilder("map", nil)
			x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
			r := b.Add(b.Mul(b.ProgramID(0), 1024), b.Arange(0, 1024))
			b.Store(b.AddPtr(y, r), b.Unary(op, b.Load(b.AddPtr(x, r), nil, nil)), nil)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			lo, hi := -103.0, 88.0
			if op == tile.OpTanh {
				lo, hi = -10, 10
			}
			xs := tiletest.Uniform(tiletest.RNG(op.String()), n, lo, hi)
			copy(xs, []float32{0, float32(math.Copysign(0, -1)), 1e-6, -1e-6, 88.7, -103.9, 9.1, -9.1, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())})
			got, want := both(t, k, tile.Grid{n / 1024}, xs, make([]float32, n))
			g, w := got[1].([]float32), want[1].([]float32)
			differ := 0
			for i := range g {
				d := ulpDiff(g[i], w[i])
				if d > 1 {
					t.Fatalf("%v(%g): executor %g, reference %g: %d ulp apart, more than 1", op, xs[i], g[i], w[i], d)
				}
				if d == 1 {
					differ++
				}
			}
			t.Logf("%v: %d of %d values 1 ulp apart, the rest equal", op, differ, n)
		}
	})
	t.Run("dot", func(t *testing.T) {
		for _, d := range []tile.DType{tile.F32, tile.F64} {
			const m, kk, n = 32, 64, 32
			b := tile.NewBuilder("dot", nil)
			pa, pb, pc := b.Ptr("a", d), b.Ptr("b", d), b.Ptr("c", d)
			ra, rk, rn := b.Arange(0, m), b.Arange(0, kk), b.Arange(0, n)
			ld := func(p *tile.Value, rows, cols *tile.Value, w int) *tile.Value {
				return b.Load(b.AddPtr(p, b.Add(b.Mul(b.ExpandDims(rows, 1), w), b.ExpandDims(cols, 0))), nil, nil)
			}
			acc := ld(pc, ra, rn, n)
			b.Store(b.AddPtr(pc, b.Add(b.Mul(b.ExpandDims(ra, 1), n), b.ExpandDims(rn, 0))), b.Dot(ld(pa, ra, rk, kk), ld(pb, rk, rn, n), acc, tile.PrecIEEE), nil)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			rng := tiletest.RNG("dot" + d.String())
			a32, b32, c32 := tiletest.Uniform(rng, m*kk, -1, 1), tiletest.Uniform(rng, kk*n, -1, 1), tiletest.Uniform(rng, m*n, -1, 1)
			wide := func(x []float32) []float64 {
				y := make([]float64, len(x))
				for i, v := range x {
					y[i] = float64(v)
				}
				return y
			}
			var args []any
			u := 0x1p-24
			if d == tile.F32 {
				args = []any{a32, b32, c32}
			} else {
				args, u = []any{wide(a32), wide(b32), wide(c32)}, 0x1p-53
			}
			got, want := both(t, k, tile.Grid{1}, args...)
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					abs := math.Abs(float64(c32[i*n+j]))
					for q := 0; q < kk; q++ {
						abs += math.Abs(float64(a32[i*kk+q]) * float64(b32[q*n+j]))
					}
					var g, w float64
					if d == tile.F32 {
						g, w = float64(got[2].([]float32)[i*n+j]), float64(want[2].([]float32)[i*n+j])
					} else {
						g, w = got[2].([]float64)[i*n+j], want[2].([]float64)[i*n+j]
					}
					if bound := 2 * (kk + 1) * u * abs; math.Abs(g-w) > bound {
						t.Fatalf("%v dot [%d,%d]: executor %g, reference %g, apart by more than %g", d, i, j, g, w, bound)
					}
				}
			}
		}
	})
	t.Run("row_sum", func(t *testing.T) {
		for _, d := range []tile.DType{tile.F32, tile.F64} {
			const rows, n = 8, 1024
			b := tile.NewBuilder("rowsum", nil)
			x, y := b.Ptr("x", d), b.Ptr("y", d)
			r, c := b.Arange(0, rows), b.Arange(0, n)
			v := b.Load(b.AddPtr(x, b.Add(b.Mul(b.ExpandDims(r, 1), n), b.ExpandDims(c, 0))), nil, nil)
			b.Store(b.AddPtr(y, r), b.Sum(v, 1), nil)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			xs := tiletest.Uniform(tiletest.RNG("rowsum"+d.String()), rows*n, -1, 1)
			args, u := []any{xs, make([]float32, rows)}, 0x1p-24
			if d == tile.F64 {
				x64 := make([]float64, len(xs))
				for i, v := range xs {
					x64[i] = float64(v) * (1 + 1e-9*float64(i%7)) // not f32 values
				}
				args, u = []any{x64, make([]float64, rows)}, 0x1p-53
			}
			got, want := both(t, k, tile.Grid{1}, args...)
			for i := 0; i < rows; i++ {
				abs := 0.0
				for j := 0; j < n; j++ {
					abs += math.Abs(float64(xs[i*n+j]))
				}
				var g, w float64
				if d == tile.F32 {
					g, w = float64(got[1].([]float32)[i]), float64(want[1].([]float32)[i])
				} else {
					g, w = got[1].([]float64)[i], want[1].([]float64)[i]
				}
				if bound := 2 * n * u * abs; math.Abs(g-w) > bound {
					t.Fatalf("%v row %d: executor %g, reference %g, apart by more than %g", d, i, g, w, bound)
				}
			}
		}
	})
}
