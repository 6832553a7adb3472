package native_test

import (
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestNestedLoopsNative: kernels with loops nested in loops run as machine
// code (declined before the fifty-eighth session, 2026-12-07: "nested
// loops"), bit for bit the reference interpreter on poisoned outputs:
//   - a persistent product: each program loops over its tiles (every
//     second one), a K loop of products inside, the tile stored after it
//     under a row mask (integers, so that every sum is exact in any order);
//   - a triangular loop: the inner bounds the outer counter's (no trips at
//     first), a block and an i32 count carried through both loops, the
//     outer's block read by the inner body, a store in the inner body;
//   - three levels, the innermost reading the outermost's carried block
//     transposed and an f64 scalar carried through all three, each level's
//     yield written after the level below ran.
func TestNestedLoopsNative(t *testing.T) {
	requireJIT(t)
	rng := tiletest.RNG("nested loops")
	ints := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.IntN(7) - 3)
		}
		return x
	}
	poisoned := func(n int) []float32 {
		y := make([]float32, n)
		for i := range y {
			y[i] = float32(math.NaN())
		}
		return y
	}
	type kase struct {
		name  string
		grid  tile.Grid
		build func(b *tile.Builder)
		args  func() []any // fresh inputs and poisoned outputs (the last arguments: the outputs)
		outs  int          // how many of the last arguments are outputs
	}
	const m, kk, n = 72, 48, 16 // the persistent product: [72, 48] · [48, 16], tiles of 16 rows
	for _, c := range []kase{
		{"persistent tiles, a K loop in each", tile.Grid{2}, func(b *tile.Builder) {
			a, bm, y := b.Ptr("a", tile.F32), b.Ptr("b", tile.F32), b.Ptr("y", tile.F32)
			tiles := (m + 15) / 16
			b.For(b.ProgramID(0), tiles, 2, nil, func(tl *tile.Value, _ []*tile.Value) []*tile.Value {
				i, j := b.ExpandDims(b.Arange(0, 16), 1), b.ExpandDims(b.Arange(0, 16), 0)
				rows := b.Add(b.Mul(tl, 16), i)
				acc := b.For(0, kk/16, 1, []*tile.Value{b.Zeros(tile.F32, 16, 16)}, func(ks *tile.Value, c []*tile.Value) []*tile.Value {
					col := b.Add(b.Mul(ks, 16), j)
					av := b.Load(b.AddPtr(a, b.Add(b.Mul(rows, kk), col)), b.Lt(rows, m), 0.0)
					kr := b.Add(b.Mul(ks, 16), i)
					bv := b.Load(b.AddPtr(bm, b.Add(b.Mul(kr, n), j)), nil, nil)
					return []*tile.Value{b.Dot(av, bv, c[0], tile.PrecIEEE)}
				})[0]
				b.Store(b.AddPtr(y, b.Add(b.Mul(rows, n), j)), b.Add(acc, b.Cast(tl, tile.F32)), b.Lt(rows, m))
				return nil
			})
		}, func() []any { return []any{ints(m * kk), ints(kk * n), poisoned(m*n + 8)} }, 1},
		{"triangular: the inner bounds the outer counter's", tile.Grid{3}, func(b *tile.Builder) {
			x, nn := b.Ptr("x", tile.F32), b.Param("n", tile.I32)
			y, z, cnt := b.Ptr("y", tile.F32), b.Ptr("z", tile.F32), b.Ptr("cnt", tile.I32)
			pid := b.ProgramID(0)
			r := b.Arange(0, 8)
			res := b.For(0, nn, 1, []*tile.Value{b.Zeros(tile.F32, 8), b.I32(0)}, func(i *tile.Value, co []*tile.Value) []*tile.Value {
				in := b.For(0, i, 1, []*tile.Value{b.Mul(co[0], 0.5), co[1]}, func(j *tile.Value, ci []*tile.Value) []*tile.Value {
					xv := b.Load(b.AddPtr(x, b.Add(b.Mul(b.Add(j, pid), 8), r)), nil, nil)
					b.Store(b.AddPtr(z, b.Add(b.Mul(b.Add(b.Mul(pid, 64), b.Add(b.Mul(i, 8), j)), 8), r)), b.Add(xv, co[0]), nil)
					return []*tile.Value{b.Add(ci[0], b.Maximum(xv, co[0])), b.Add(ci[1], 1)}
				})
				return []*tile.Value{b.Add(in[0], b.Cast(i, tile.F32)), in[1]}
			})
			b.Store(b.AddPtr(y, b.Add(b.Mul(pid, 8), r)), res[0], nil)
			b.Store(b.AddPtr(cnt, pid), res[1], nil)
		}, func() []any {
			zs := poisoned(3 * 64 * 8)
			cs := []int32{-7, -7, -7, -7}
			return []any{ints(16 * 8), 6, poisoned(3*8 + 8), zs, cs}
		}, 3},
		{"three levels, the innermost reading the outermost's block transposed", tile.Grid{2}, func(b *tile.Builder) {
			x, y, s := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32), b.Ptr("s", tile.F64)
			pid := b.ProgramID(0)
			i, j := b.ExpandDims(b.Arange(0, 8), 1), b.ExpandDims(b.Arange(0, 8), 0)
			x0 := b.Load(b.AddPtr(x, b.Add(b.Mul(i, 8), j)), nil, nil)
			res := b.For(0, 3, 1, []*tile.Value{x0, b.F64(0.25)}, func(p *tile.Value, c1 []*tile.Value) []*tile.Value {
				r2 := b.For(1, 3, 1, []*tile.Value{b.Zeros(tile.F32, 8, 8), c1[1]}, func(q *tile.Value, c2 []*tile.Value) []*tile.Value {
					r3 := b.For(0, q, 1, []*tile.Value{c2[0], c2[1]}, func(u *tile.Value, c3 []*tile.Value) []*tile.Value {
						off := b.Add(b.Mul(b.Add(b.Add(p, q), b.Add(u, pid)), 64), b.Add(b.Mul(i, 8), j))
						xv := b.Load(b.AddPtr(x, off), nil, nil)
						blk := b.Add(c3[0], b.Mul(xv, b.Trans(c1[0])))
						return []*tile.Value{blk, b.Add(c3[1], b.Cast(b.Add(b.Mul(p, 9), b.Add(b.Mul(q, 3), u)), tile.F64))}
					})
					return []*tile.Value{b.Mul(r3[0], 0.5), b.Mul(r3[1], 1.5)}
				})
				return []*tile.Value{b.Add(b.Mul(c1[0], 0.25), r2[0]), r2[1]}
			})
			b.Store(b.AddPtr(y, b.Add(b.Mul(pid, 64), b.Add(b.Mul(i, 8), j))), res[0], nil)
			b.Store(b.AddPtr(s, pid), res[1], nil)
		}, func() []any {
			ss := []float64{math.NaN(), math.NaN(), math.NaN()}
			return []any{ints(12 * 64), poisoned(2*64 + 8), ss}
		}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("nested", nil)
			c.build(b)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			args := c.args()
			bitsAgainstReference(t, k, c.grid, func(launch func(args ...any) error) []uint32 {
				fresh := make([]any, len(args))
				for i, a := range args {
					switch a := a.(type) {
					case []float32:
						fresh[i] = append([]float32(nil), a...)
					case []float64:
						fresh[i] = append([]float64(nil), a...)
					case []int32:
						fresh[i] = append([]int32(nil), a...)
					default:
						fresh[i] = a
					}
				}
				if err := launch(fresh...); err != nil {
					t.Fatal(err)
				}
				var bits []uint32
				for _, o := range fresh[len(fresh)-c.outs:] {
					switch o := o.(type) {
					case []float32:
						bits = append(bits, bitsF32(o)...)
					case []float64:
						bits = append(bits, bitsF64(o)...)
					case []int32:
						bits = append(bits, bitsI32(o)...)
					}
				}
				return bits
			})
		})
	}
}
