package tile_test

import (
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// TestSinkReshapes: kernels that regroup the dimensions of a load or of
// elementwise values (a masked load with a tail, the value also stored as
// it is; a reshape of a reshape; one inside a loop of a value from before
// it; a select and a cast on the way) and their copies by SinkReshapes
// give the same bits in the interpreter on poisoned outputs; the copy
// verifies, moves the reshapes it says it moved, and keeps none on a load
// or an elementwise value. A reshape of an expand_dims is one of its
// operand; a broadcast's, where the reshape only splits dimensions, its
// operand's split and broadcast (a row's max broadcast back, the rows then
// split). A reshape of a reduction's result, or one that merges a
// broadcast's dimensions, is left, and a kernel with nothing to move is
// returned as it is.
func TestSinkReshapes(t *testing.T) {
	const n = 100
	for _, c := range []struct {
		name  string
		moved int
		build func(b *tile.Builder, x, y *tile.Value)
	}{
		{"pair sums of a masked load, the load also stored", 1, func(b *tile.Builder, x, y *tile.Value) {
			offs := b.Arange(0, 128)
			v := b.Load(b.AddPtr(x, offs), b.Lt(offs, n), 0.0)
			b.Store(b.AddPtr(y, offs), v, b.Lt(offs, n))
			s := b.Sum(b.Reshape(v, 64, 2), 1)
			b.Store(b.AddPtr(y, b.Add(b.Arange(0, 64), 128)), s, nil)
		}},
		{"a reshape of a reshape of exp(x)·2", 2, func(b *tile.Builder, x, y *tile.Value) {
			e := b.Mul(b.Exp(b.Load(b.AddPtr(x, b.Arange(0, 64)), nil, nil)), 2.0)
			r := b.Reshape(b.Reshape(e, 4, 16), 8, 8)
			b.Store(b.AddPtr(y, b.Reshape(b.Arange(0, 64), 8, 8)), b.Max(r, 0), nil)
		}},
		{"in a loop, of a value from before it; select and cast", 1, func(b *tile.Builder, x, y *tile.Value) {
			v := b.Load(b.AddPtr(x, b.Arange(0, 64)), nil, nil)
			w := b.Cast(b.Where(b.Lt(v, 0.0), b.Neg(v), b.Cast(b.Cast(v, tile.F64), tile.F32)), tile.F64)
			res := b.For(0, 3, 1, []*tile.Value{b.Zeros(tile.F64, 32)}, func(iv *tile.Value, cv []*tile.Value) []*tile.Value {
				return []*tile.Value{b.Add(cv[0], b.Sum(b.Reshape(w, 32, 2), 1))}
			})
			b.Store(b.AddPtr(y, b.Arange(0, 32)), b.Cast(res[0], tile.F32), nil)
		}},
		{"a row's max broadcast back, the rows split: the max split, broadcast", 1, func(b *tile.Builder, x, y *tile.Value) {
			i, j := b.ExpandDims(b.Arange(0, 16), 1), b.ExpandDims(b.Arange(0, 8), 0)
			v := b.Load(b.AddPtr(x, b.Add(b.Mul(i, 8), j)), nil, nil)
			w := b.Sub(v, b.Max(v, 1, true)) // the max broadcast along the row
			s := b.Sum(b.Reshape(w, 4, 4, 8), 1)
			b.Store(b.AddPtr(y, b.Reshape(b.Arange(0, 32), 4, 8)), s, nil)
		}},
		{"expand_dims of exp(x), regrouped", 1, func(b *tile.Builder, x, y *tile.Value) {
			e := b.ExpandDims(b.Exp(b.Load(b.AddPtr(x, b.Arange(0, 64)), nil, nil)), 0) // [1, 64]
			b.Store(b.AddPtr(y, b.Reshape(b.Arange(0, 64), 8, 8)), b.Reshape(e, 8, 8), nil)
		}},
		{"a broadcast's rows merged: left", 0, func(b *tile.Builder, x, y *tile.Value) {
			i, j := b.ExpandDims(b.Arange(0, 16), 1), b.ExpandDims(b.Arange(0, 8), 0)
			v := b.Load(b.AddPtr(x, b.Add(b.Mul(i, 8), j)), nil, nil)
			m := b.BroadcastTo(b.Max(v, 1, true), tile.Shp(16, 8))
			b.Store(b.AddPtr(y, b.Arange(0, 128)), b.Reshape(m, 128), nil)
		}},
		{"a reduction's result regrouped: left", 0, func(b *tile.Builder, x, y *tile.Value) {
			i, j := b.ExpandDims(b.Arange(0, 16), 1), b.ExpandDims(b.Arange(0, 8), 0)
			s := b.Sum(b.Load(b.AddPtr(x, b.Add(b.Mul(i, 8), j)), nil, nil), 1)
			b.Store(b.AddPtr(y, b.Reshape(b.Arange(0, 16), 4, 4)), b.Reshape(s, 4, 4), nil)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("sink", nil)
			x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
			c.build(b, x, y)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			sk, moved := k.SinkReshapes()
			if moved != c.moved {
				t.Fatalf("moved %d reshapes, want %d\n%v", moved, c.moved, sk)
			}
			if moved == 0 && sk != k {
				t.Fatal("nothing moved, but a copy returned")
			}
			if err := sk.Verify(); err != nil {
				t.Fatalf("the copy does not verify: %v\n%v", err, sk)
			}
			sk.Walk(func(v *tile.Value) {
				if v.Op == tile.OpReshape && !tile.UnitReshape(v.Args[0].Type.Shape, v.Type.Shape) {
					if a := v.Args[0]; a.Op.IsElementwise() || a.Op == tile.OpLoad || a.Op == tile.OpSplat {
						t.Errorf("%%%d reshapes %%%d (%v), left in the copy", v.ID, a.ID, a.Op)
					}
				}
			})
			xs := make([]float32, 128)
			for i := range xs {
				xs[i] = float32(math.Sin(float64(i)*1.7) * 3)
			}
			xs[5] = float32(math.NaN())
			run := func(k *tile.Kernel) []float32 {
				out := make([]float32, 200)
				for i := range out {
					out[i] = float32(math.NaN())
				}
				if err := interp.Interpret(k, tile.Grid{1}, xs, out); err != nil {
					t.Fatal(err)
				}
				return out
			}
			want, got := run(k), run(sk)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("y[%d] = %v after SinkReshapes, %v before", i, got[i], want[i])
				}
			}
		})
	}
}
