package tile_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// roundTripEdges are floats where truncating to i32 and back is
// delicate: NaN, infinities, signed zeros, halves either side of zero,
// int32's bounds and the floats nearest them, subnormals, large values.
var roundTripEdges = []float64{
	math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 0.5, -0.5, 0.99, -0.99, 1.5, -1.5,
	2147483647, 2147483647.5, 2147483648, 2147483520, 2147483904, -2147483648, -2147483648.5, -2147483649,
	-2147483904, 3e9, -3e9, 1e-40, -1e-40, 5e-324, 1e300, -1e300, 123456.75, -98765.25, 16777217,
	// int64's bounds and the floats nearest them (f64's and f32's), 2⁵³ + 2
	0x1p63, -0x1p63, 0x1p63 - 1024, -0x1p63 + 1024, 0x1p63 - 0x1p39, -0x1p63 - 2048, 0x1p63 + 2048, 0x1p53 + 2, -0x1p53 - 2,
}

// TestFoldIntRoundTrips: a kernel that casts a float to i32 and back (in a
// block, as a scalar, inside a loop; f32 and f64) and its copy by
// FoldIntRoundTrips give the same bits in the interpreter at every edge of
// the cast (NaN to 0, truncation toward zero, saturation, −0 to +0); the
// copy reads no i32 cast; where the i32 value is read otherwise (stored
// too) nothing folds.
func TestFoldIntRoundTrips(t *testing.T) {
	const n = 32
	type rt struct {
		name     string
		d        tile.DType // x's
		mid, out tile.DType // the integer's (i32 unless said), the result's (d unless said)
		form     string     // block, scalar, loop, used
		folded   int
	}
	cases := []rt{
		{name: "f32 block", d: tile.F32, form: "block", folded: 1},
		{name: "f64 block", d: tile.F64, form: "block", folded: 1},
		{name: "f32 scalar", d: tile.F32, form: "scalar", folded: 1},
		{name: "f64 scalar", d: tile.F64, form: "scalar", folded: 1},
		{name: "f32 in a loop, x from before it", d: tile.F32, form: "loop", folded: 1},
		{name: "f64 in a loop, x from before it", d: tile.F64, form: "loop", folded: 1},
		{name: "f32, the i32 stored too: not folded", d: tile.F32, form: "used", folded: 0},
	}
	// through i64, and back to the other float type (computed in f64)
	for _, d := range []tile.DType{tile.F32, tile.F64} {
		for _, mid := range []tile.DType{tile.I32, tile.I64} {
			for _, out := range []tile.DType{tile.F32, tile.F64} {
				if mid == tile.I32 && out == d {
					continue // above
				}
				for _, form := range []string{"block", "scalar"} {
					cases = append(cases, rt{fmt.Sprintf("%v → %v → %v %s", d, mid, out, form), d, mid, out, form, 1})
				}
			}
		}
	}
	for _, c := range cases {
		if c.mid == 0 {
			c.mid = tile.I32
		}
		if c.out == 0 {
			c.out = c.d
		}
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("roundtrip", nil)
			x, y, z := b.Ptr("x", c.d), b.Ptr("y", c.out), b.Ptr("z", tile.I32)
			r := b.Arange(0, n)
			switch c.form {
			case "block", "used":
				v := b.Load(b.AddPtr(x, r), nil, nil)
				i := b.Cast(v, c.mid)
				b.Store(b.AddPtr(y, r), b.Cast(i, c.out), nil)
				if c.form == "used" {
					b.Store(b.AddPtr(z, r), i, nil)
				}
			case "scalar":
				p := b.ProgramID(0)
				v := b.Load(b.AddPtr(x, p), nil, nil)
				b.Store(b.AddPtr(y, p), b.Cast(b.Cast(v, c.mid), c.out), nil)
			case "loop":
				v := b.Load(b.AddPtr(x, r), nil, nil)
				res := b.For(0, 2, 1, []*tile.Value{b.Zeros(c.out, n)}, func(iv *tile.Value, cv []*tile.Value) []*tile.Value {
					return []*tile.Value{b.Add(cv[0], b.Cast(b.Cast(v, c.mid), c.out))}
				})
				b.Store(b.AddPtr(y, r), res[0], nil)
			}
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			fk, folded := k.FoldIntRoundTrips()
			if folded != c.folded {
				t.Fatalf("folded %d round trips, want %d", folded, c.folded)
			}
			if err := fk.Verify(); err != nil {
				t.Fatalf("the copy: %v\n%s", err, fk)
			}
			if c.folded > 0 {
				var casts func(b *tile.Block) int
				casts = func(b *tile.Block) int {
					cnt := 0
					for _, v := range b.Values {
						if v.Op == tile.OpCast && v.Type.DType.IsInt() {
							cnt++
						}
						if v.Body != nil {
							cnt += casts(v.Body)
						}
					}
					return cnt
				}
				if got := casts(fk.Body); got != 0 {
					t.Fatalf("%d casts left in the copy:\n%s", got, fk)
				}
			}
			grid := tile.Grid{1}
			if c.form == "scalar" {
				grid = tile.Grid{n}
			}
			for off := 0; off < len(roundTripEdges); off += n {
				in := make([]float64, n)
				for j := range in {
					in[j] = roundTripEdges[(off+j)%len(roundTripEdges)]
				}
				run := func(k *tile.Kernel) (out []uint64) {
					zs := make([]int32, n)
					var xs, ys any
					if c.d == tile.F32 {
						x32 := make([]float32, n)
						for j := range x32 {
							x32[j] = float32(in[j])
						}
						xs = x32
					} else {
						xs = in
					}
					y32, y64 := make([]float32, n), make([]float64, n)
					for j := range y32 {
						y32[j], y64[j] = float32(math.NaN()), math.NaN()
					}
					if ys = y64; c.out == tile.F32 {
						ys = y32
					}
					if err := interp.Interpret(k, grid, xs, ys, zs); err != nil {
						t.Fatal(err)
					}
					for j := range n {
						if c.out == tile.F32 {
							out = append(out, uint64(math.Float32bits(y32[j])))
						} else {
							out = append(out, math.Float64bits(y64[j]))
						}
					}
					return out
				}
				want, got := run(k), run(fk)
				for j := range want {
					if want[j] != got[j] {
						t.Errorf("x = %v: the casts give %#x, the folded copy %#x", in[j], want[j], got[j])
					}
				}
			}
		})
	}
}
