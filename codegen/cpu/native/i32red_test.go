package native_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
)

// TestI32ReductionsNative: sums (wrapping, as int32 does), maxima and
// minima of i32 blocks as machine code, bit for bit the reference
// interpreter on poisoned outputs: along the rows of loaded integers
// (rows of 4, 8, 16 and 100 in blocks of 128, masked past the edge, with
// int32's extremes among them), down the columns, along axes 0 and 1 of a
// rank-3 block, a row's argmax (the least column holding the row's
// maximum: an f32 max, then an i32 min), and a count of positives over a
// 1-D block (a scalar) added back into the block. (Before 2026-12-07 the
// code generator declined reductions of i32 blocks: the executor ran the
// kernel.)
func TestI32ReductionsNative(t *testing.T) {
	requireJIT(t)
	const rows = 37
	rng := rand.New(rand.NewPCG(57, 32))
	xi := make([]int32, rows*100+64)
	for i := range xi {
		switch rng.IntN(6) {
		case 0:
			xi[i] = math.MaxInt32 - int32(rng.IntN(3))
		case 1:
			xi[i] = math.MinInt32 + int32(rng.IntN(3))
		default:
			xi[i] = int32(rng.Uint32()) >> uint(rng.IntN(31))
		}
	}
	xf := make([]float32, len(xi))
	for i := range xf {
		xf[i] = float32(rng.IntN(9) - 4) // ties for the argmax
	}
	ops := []tile.Op{tile.OpReduceSum, tile.OpReduceMax, tile.OpReduceMin}
	type tcase struct {
		name  string
		grid  tile.Grid
		outN  int
		build func(b *tile.Builder, xi, xf, out *tile.Value)
	}
	var cases []tcase
	for _, op := range ops {
		other := map[tile.Op]int32{tile.OpReduceSum: 0, tile.OpReduceMax: math.MinInt32, tile.OpReduceMin: math.MaxInt32}[op]
		for _, cols := range []int{4, 8, 16, 100} {
			bn := 4
			for bn < cols {
				bn *= 2
			}
			if cols == 100 {
				bn = 128
			}
			cases = append(cases, tcase{fmt.Sprintf("%v of rows of %d", op, cols), tile.Grid{tile.CDiv(rows, 16)}, rows, func(b *tile.Builder, xi, _, out *tile.Value) {
				r := b.Add(b.Mul(b.ProgramID(0), 16), b.Arange(0, 16))
				c := b.Arange(0, bn)
				rr, cc := b.ExpandDims(r, 1), b.ExpandDims(c, 0)
				m := b.And(b.Lt(rr, rows), b.Lt(cc, cols))
				v := b.Load(b.AddPtr(xi, b.Add(b.Mul(rr, cols), cc)), m, other)
				b.Store(b.AddPtr(out, r), b.Reduce(op, v, 1), b.Lt(r, rows))
			}})
			// every element of a row below (max) or above (min) the
			// reduction's start: the result is one of them
			sign := map[tile.Op]int32{tile.OpReduceSum: 1, tile.OpReduceMax: -1, tile.OpReduceMin: 1}[op]
			cases = append(cases, tcase{fmt.Sprintf("%v of rows of %d of one sign", op, cols), tile.Grid{tile.CDiv(rows, 16)}, rows, func(b *tile.Builder, xi, _, out *tile.Value) {
				r := b.Add(b.Mul(b.ProgramID(0), 16), b.Arange(0, 16))
				c := b.Arange(0, bn)
				rr, cc := b.ExpandDims(r, 1), b.ExpandDims(c, 0)
				m := b.And(b.Lt(rr, rows), b.Lt(cc, cols))
				v := b.Load(b.AddPtr(xi, b.Add(b.Mul(rr, cols), cc)), m, int32(0))
				v = b.Mul(b.Add(b.And(v, int32(0x7fff)), int32(5)), sign) // ±[5, 32772]
				v = b.Where(m, v, other)
				b.Store(b.AddPtr(out, r), b.Reduce(op, v, 1), b.Lt(r, rows))
			}})
		}
		cases = append(cases, tcase{fmt.Sprintf("%v down 16 columns", op), tile.Grid{1}, 16, func(b *tile.Builder, xi, _, out *tile.Value) {
			rr, cc := b.ExpandDims(b.Arange(0, 64), 1), b.ExpandDims(b.Arange(0, 16), 0)
			v := b.Load(b.AddPtr(xi, b.Add(b.Mul(rr, 16), cc)), b.Lt(rr, rows), other)
			b.Store(b.AddPtr(out, b.Arange(0, 16)), b.Add(b.Reduce(op, v, 0), int32(3)), nil)
		}})
		for axis := 0; axis < 2; axis++ {
			for _, last := range []int{4, 16} {
				cases = append(cases, tcase{fmt.Sprintf("%v along axis %d of 4×8×%d", op, axis, last), tile.Grid{1}, 8 * 4 * last / []int{4, 8}[axis], func(b *tile.Builder, xi, _, out *tile.Value) {
					offs := b.Reshape(b.Arange(0, 32*last), 4, 8, last)
					red := b.Reduce(op, b.Load(b.AddPtr(xi, offs), nil, nil), axis)
					rs := red.Type.Shape
					b.Store(b.AddPtr(out, b.Reshape(b.Arange(0, rs.Numel()), rs.Slice()...)), red, nil)
				}})
			}
		}
	}
	cases = append(cases,
		tcase{"argmax of rows of 100", tile.Grid{tile.CDiv(rows, 16)}, rows, func(b *tile.Builder, _, xf, out *tile.Value) {
			r := b.Add(b.Mul(b.ProgramID(0), 16), b.Arange(0, 16))
			c := b.Arange(0, 128)
			rr, cc := b.ExpandDims(r, 1), b.ExpandDims(c, 0)
			m := b.And(b.Lt(rr, rows), b.Lt(cc, 100))
			v := b.Load(b.AddPtr(xf, b.Add(b.Mul(rr, 100), cc)), m, math.Inf(-1))
			mx := b.ExpandDims(b.Reduce(tile.OpReduceMax, v, 1), 1)
			at := b.Where(b.And(m, b.Eq(v, b.BroadcastTo(mx, tile.Shp(16, 128)))), b.BroadcastTo(cc, tile.Shp(16, 128)), int32(1<<30))
			b.Store(b.AddPtr(out, r), b.Reduce(tile.OpReduceMin, at, 1), b.Lt(r, rows))
		}},
		tcase{"a count of positives added back", tile.Grid{3}, 3 * 64, func(b *tile.Builder, _, xf, out *tile.Value) {
			offs := b.Add(b.Mul(b.ProgramID(0), 64), b.Arange(0, 64))
			v := b.Load(b.AddPtr(xf, offs), nil, nil)
			n := b.Reduce(tile.OpReduceSum, b.Cast(b.Gt(v, 0.0), tile.I32), 0)
			b.Store(b.AddPtr(out, offs), b.Add(b.Cast(v, tile.I32), b.Splat(n, tile.Shp(64))), nil)
		}},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("i32_reduce", nil)
			pi, pf, po := b.Ptr("xi", tile.I32), b.Ptr("xf", tile.F32), b.Ptr("out", tile.I32)
			c.build(b, pi, pf, po)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			bitsAgainstReference(t, k, c.grid, func(launch func(args ...any) error) []uint32 {
				out := make([]int32, c.outN+8)
				for i := range out {
					out[i] = -0x5a5a5a5b
				}
				if err := launch(xi, xf, out); err != nil {
					t.Fatal(err)
				}
				return bitsI32(out)
			})
		})
	}
}
