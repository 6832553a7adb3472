package native_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestIntDataNative: i32 blocks that are not affine in the lanes (loaded
// integers, what is computed from them, floats cast to i32) as machine
// code (ints.go), against the reference interpreter bit for bit on
// poisoned outputs with a tail: every binary op at int32's edges (MinInt32
// by −1, division and remainder by 0 and −1, wrapping products), the
// unary ops, casts from f32 (NaN, infinities, 2³¹ and its neighbours,
// halves), from i1 and back to f32, a select by a comparison of data, a
// remainder by a parameter and a sum with lanes (a histogram's bins), and
// a quotient kept in the frame for a phase after a reduction. Each kernel
// was declined before 2026-12-07's fifty-sixth session ("i32 loads").
func TestIntDataNative(t *testing.T) {
	requireJIT(t)
	const n = 203 // 6·32 + 11: a tail
	rng := rand.New(rand.NewPCG(56, 3))
	edges := []int32{0, 1, -1, 2, -2, 7, -7, 100, -99, math.MaxInt32, math.MinInt32, math.MaxInt32 - 1, math.MinInt32 + 1, 12345, 1 << 16}
	xs, ys := make([]int32, n), make([]int32, n)
	for i := range xs {
		switch {
		case i < len(edges)*len(edges) && i < n-16:
			xs[i], ys[i] = edges[i/len(edges)%len(edges)], edges[i%len(edges)]
		default:
			xs[i], ys[i] = int32(rng.Uint32()), int32(rng.IntN(61)-30)
		}
	}
	fs := make([]float32, n)
	for i, f := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0x1p31, -0x1p31, 2147483520, -2147483904,
		0.5, -0.5, 1.5, -1.5, 0.99, -0.99, 1e10, -1e10, 16777217, float32(math.Copysign(0, -1)), 1e-40} {
		fs[i] = f
	}
	for i := 18; i < n; i++ {
		fs[i] = float32(rng.NormFloat64() * 1e5)
	}
	type build func(b *tile.Builder, x, y, f *tile.Value, m, offs *tile.Value) *tile.Value // the i32 block stored
	cases := []struct {
		name  string
		build build
	}{}
	for _, op := range []tile.Op{tile.OpAdd, tile.OpSub, tile.OpMul, tile.OpMin, tile.OpMax, tile.OpAnd, tile.OpOr, tile.OpXor, tile.OpDiv, tile.OpRem} {
		cases = append(cases, struct {
			name  string
			build build
		}{op.String(), func(b *tile.Builder, x, y, f, m, offs *tile.Value) *tile.Value { return b.Binary(op, x, y) }})
	}
	for _, op := range []tile.Op{tile.OpNeg, tile.OpNot, tile.OpAbs, tile.OpSign} {
		cases = append(cases, struct {
			name  string
			build build
		}{op.String(), func(b *tile.Builder, x, y, f, m, offs *tile.Value) *tile.Value { return b.Unary(op, x) }})
	}
	more := []struct {
		name  string
		build build
	}{
		{"cast f32 → i32", func(b *tile.Builder, x, y, f, m, offs *tile.Value) *tile.Value { return b.Cast(f, tile.I32) }},
		{"cast i32 → f32 → i32 of x·3", func(b *tile.Builder, x, y, f, m, offs *tile.Value) *tile.Value {
			return b.Cast(b.Mul(b.Cast(b.Mul(x, int32(3)), tile.F32), 0.25), tile.I32)
		}},
		{"cast i1 → i32 of x > y", func(b *tile.Builder, x, y, f, m, offs *tile.Value) *tile.Value { return b.Cast(b.Gt(x, y), tile.I32) }},
		{"select by x < y", func(b *tile.Builder, x, y, f, m, offs *tile.Value) *tile.Value {
			return b.Where(b.Lt(x, y), x, b.Add(y, offs))
		}},
		{"((x rem bins) + bins) rem bins, bins a parameter", nil},
		{"a quotient kept past a reduction", func(b *tile.Builder, x, y, f, m, offs *tile.Value) *tile.Value {
			q := b.Div(x, b.Add(b.Abs(y), int32(1)))
			qf := b.Where(m, b.Cast(q, tile.F32), 0.0)
			mean := b.Mul(b.Sum(qf, 0), 1.0/n)
			return b.Where(b.Gt(qf, mean), q, b.Neg(q))
		}},
	}
	cases = append(cases, more...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("int_data", nil)
			px, py, pf, pz := b.Ptr("x", tile.I32), b.Ptr("y", tile.I32), b.Ptr("f", tile.F32), b.Ptr("z", tile.I32)
			bins := b.Param("bins", tile.I32)
			offs := b.Arange(0, 256)
			m := b.Lt(offs, n)
			x, y := b.Load(b.AddPtr(px, offs), m, int32(0)), b.Load(b.AddPtr(py, offs), m, int32(1))
			f := b.Load(b.AddPtr(pf, offs), m, 0.0)
			var z *tile.Value
			if c.build == nil {
				bs := b.Splat(bins, tile.Shp(256))
				z = b.Rem(b.Add(b.Rem(x, bs), bs), bs)
			} else {
				z = c.build(b, x, y, f, m, offs)
			}
			b.Store(b.AddPtr(pz, offs), z, m)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			bitsAgainstReference(t, k, tile.Grid{1}, func(launch func(args ...any) error) []uint32 {
				out := make([]int32, n+8)
				for i := range out {
					out[i] = -0x5a5a5a5b
				}
				if err := launch(xs, ys, fs, out, int32(37)); err != nil {
					t.Fatal(err)
				}
				return bitsI32(out)
			})
		})
	}
}

// TestOneHotNative: an i32 data block viewed through expand_dims and
// broadcast (labels [B] against a row of classes [C]: a one-hot mask, a
// cross-entropy's pick as a masked row sum) as machine code, against the
// reference bit for bit on poisoned outputs, rows and classes with tails
// and labels out of range (no class picked). Declined before 2026-12-07's
// fifty-sixth session.
func TestOneHotNative(t *testing.T) {
	requireJIT(t)
	const rows, classes = 37, 10
	rng := rand.New(rand.NewPCG(56, 7))
	b := tile.NewBuilder("one_hot", nil)
	px, pl, po := b.Ptr("logits", tile.F32), b.Ptr("labels", tile.I32), b.Ptr("out", tile.F32)
	r := b.Add(b.Mul(b.ProgramID(0), 16), b.Arange(0, 16))
	c := b.Arange(0, 16)
	rm, cm := b.Lt(r, rows), b.Lt(c, classes)
	ri, ci := b.ExpandDims(r, 1), b.ExpandDims(c, 0)
	m2 := b.And(b.ExpandDims(rm, 1), b.ExpandDims(cm, 0))
	x := b.Load(b.AddPtr(px, b.Add(b.Mul(ri, classes), ci)), m2, 0.0)
	lab := b.ExpandDims(b.Load(b.AddPtr(pl, r), rm, int32(-1)), 1)
	hot := b.And(b.Eq(lab, ci), m2)
	b.Store(b.AddPtr(po, r), b.Neg(b.Sum(b.Where(hot, x, 0.0), 1)), rm)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	logits := tiletest.Uniform(tiletest.RNG("one_hot"), rows*classes, -4, 4)
	labels := make([]int32, rows)
	for i := range labels {
		labels[i] = int32(rng.IntN(classes))
	}
	labels[3], labels[9] = classes, -2 // out of range: no class
	grid := tile.Grid{tile.CDiv(rows, 16)}
	bitsAgainstReference(t, k, grid, func(launch func(args ...any) error) []uint32 {
		out := make([]float32, rows+8)
		for i := range out {
			out[i] = float32(math.NaN())
		}
		if err := launch(logits, labels, out); err != nil {
			t.Fatal(err)
		}
		return bitsF32(out)
	})
}

// TestIntCarriedNative: loop-carried i32 blocks (a count of the rows'
// values past a threshold over a K loop, and two blocks swapped every
// iteration) as machine code, against the reference bit for bit with a
// tail. Declined before 2026-12-07's fifty-sixth session ("a loop-carried
// tensor<…xi32>").
func TestIntCarriedNative(t *testing.T) {
	requireJIT(t)
	const n, iters = 100, 7
	b := tile.NewBuilder("int_carried", nil)
	px, py, pz := b.Ptr("x", tile.F32), b.Ptr("y", tile.I32), b.Ptr("z", tile.I32)
	r := b.Arange(0, 128)
	m := b.Lt(r, n)
	res := b.For(0, iters, 1, []*tile.Value{b.Zeros(tile.I32, 128), b.Load(b.AddPtr(py, r), m, int32(5))}, func(iv *tile.Value, c []*tile.Value) []*tile.Value {
		x := b.Load(b.AddPtr(px, b.Add(b.Mul(iv, int32(n)), r)), m, 0.0)
		hit := b.Cast(b.Gt(x, 0.25), tile.I32)
		return []*tile.Value{b.Add(c[1], hit), b.Mul(c[0], int32(3))}
	})
	b.Store(b.AddPtr(pz, r), b.Sub(res[0], res[1]), m)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	xs := tiletest.Uniform(tiletest.RNG("int_carried"), n*iters, -1, 1)
	ys := make([]int32, n)
	for i := range ys {
		ys[i] = int32(i*7919) - 300000
	}
	bitsAgainstReference(t, k, tile.Grid{1}, func(launch func(args ...any) error) []uint32 {
		out := make([]int32, n+8)
		for i := range out {
			out[i] = -0x5a5a5a5b
		}
		if err := launch(xs, ys, out); err != nil {
			t.Fatal(err)
		}
		return bitsI32(out)
	})
}

// TestIntSelectOnViewConditionNative: i32 lanes (a flat index, affine)
// selected under a condition that is a view — a splat of a scalar
// comparison of the program id, a row mask broadcast along the row — then
// reduced along the rows (the last index a condition holds at, −1 where
// none), natively bit for bit the reference interpreter. Declined before
// the fifty-eighth session ("integer select blocks"): a random kernel of
// tiletest.RandomMore.
func TestIntSelectOnViewConditionNative(t *testing.T) {
	requireJIT(t)
	b := tile.NewBuilder("int_select_view", nil)
	x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.I32)
	pid := b.ProgramID(0)
	i, j := b.ExpandDims(b.Arange(0, 16), 1), b.ExpandDims(b.Arange(0, 8), 0)
	flat := b.Add(b.Mul(i, 8), j)                                               // [16, 8], affine
	rowOK := b.Gt(b.Load(b.AddPtr(x, b.Add(b.Mul(pid, 16), i)), nil, nil), 0.0) // [16, 1]
	first := b.Where(b.Splat(b.Lt(pid, 1), tile.Shp(16, 8)), flat, int32(-1))
	second := b.Where(b.BroadcastTo(rowOK, tile.Shp(16, 8)), b.Sub(flat, 3), int32(-1))
	out := b.Add(b.Mul(b.Max(first, 1), 1000), b.Max(second, 1)) // [16]
	b.Store(b.AddPtr(y, b.Add(b.Mul(pid, 16), b.Arange(0, 16))), out, nil)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	xs := tiletest.Uniform(tiletest.RNG("int select view"), 48, -1, 1)
	bitsAgainstReference(t, k, tile.Grid{3}, func(launch func(args ...any) error) []uint32 {
		o := make([]int32, 48+8)
		for i := range o {
			o[i] = -7
		}
		if err := launch(xs, o); err != nil {
			t.Fatal(err)
		}
		return bitsI32(o)
	})
}
