package native_test

import (
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
)

// TestIntRoundTripsNative: a float cast to i32 and back (tile's
// FoldIntRoundTrips; declined before: "cast of a value that is not
// affine") runs as machine code, f32 and f64, in a row of 37 lanes (a
// tail past the vectors) and inside a loop, with the same bits as the
// interpreter at the casts' edges: NaN to 0, truncation toward zero,
// saturation at int32's bounds, −0 to +0. Kernel still returns the
// kernel as written.
func TestIntRoundTripsNative(t *testing.T) {
	requireJIT(t)
	const n = 37
	edges := []float64{
		math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 0.5, -0.5, 0.99, -0.99, 1.5, -1.5,
		2147483647, 2147483647.5, 2147483648, 2147483520, 2147483904, -2147483648, -2147483648.5,
		-2147483649, -2147483904, 3e9, -3e9, 1e-40, -1e-40, 1e300, -1e300, 123456.75, -98765.25, 16777217,
		7.999, -7.999, 1e9 + 0.5, -1e9 - 0.5, 42, -42, 0.25, -1e-300,
	}
	for _, d := range []tile.DType{tile.F32, tile.F64} {
		for _, loop := range []bool{false, true} {
			name := d.String()
			if loop {
				name += " in a loop"
			}
			t.Run(name, func(t *testing.T) {
				b := tile.NewBuilder("roundtrip", nil)
				x, y := b.Ptr("x", d), b.Ptr("y", d)
				r := b.Arange(0, 64)
				mask := b.Lt(r, b.Splat(b.Const(n, tile.I32), tile.Shp(64)))
				v := b.Load(b.AddPtr(x, r), mask, nil)
				out := b.Cast(b.Cast(v, tile.I32), d)
				if loop {
					res := b.For(0, 3, 1, []*tile.Value{b.Zeros(d, 64)}, func(iv *tile.Value, cv []*tile.Value) []*tile.Value {
						half := b.Splat(b.Const(0.5, d), v.Type.Shape)
						return []*tile.Value{b.Add(cv[0], b.Cast(b.Cast(b.Add(v, b.Mul(cv[0], half)), tile.I32), d))}
					})
					out = res[0]
				}
				b.Store(b.AddPtr(y, r), out, mask)
				for _, isa := range isas(t) {
					k, err := b.Build()
					if err != nil {
						t.Fatal(err)
					}
					nk := compileFor(t, isa, k)
					if nk.Kernel() != k {
						t.Fatalf("%s: Kernel is not the kernel compiled", isa)
					}
					run := func(launch func(args ...any) error) ([]float64, error) {
						return launchIn(d, edges[:n], n, n, launch)
					}
					got, want, _ := againstReference(t, isa, nk, k, tile.Grid{1}, false, run)
					sameBits64(t, isa, got, want, n)
				}
			})
		}
	}
}
