package native_test

import (
	"fmt"
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

// TestI64RoundTripsAndBoolCastsNative: a float cast to i64 and to a float
// type again (f32 and f64 each way: tile's FoldIntRoundTrips computes it in
// the wider float) and a float cast to i1 and on to i32 (x ≠ 0, NaN
// true; f64 lanes compared with a zeroed register) run as machine code,
// with the interpreter's bits at the casts' edges: NaN, ±Inf, ±0, halves,
// int32's and int64's bounds and the floats nearest them. (Before
// 2026-12-07 both were declined: "cast of a value that is not affine",
// "cast of i1 blocks".)
func TestI64RoundTripsAndBoolCastsNative(t *testing.T) {
	requireJIT(t)
	const n = 37
	edges := []float64{
		math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 0.5, -0.5, 1.5, -1.5,
		2147483647, 2147483648, -2147483649, 3e9, -3e9, 1e-40, 5e-324, 1e300, -1e300, 16777217,
		0x1p63, -0x1p63, 0x1p63 - 1024, -0x1p63 + 1024, 0x1p63 - 0x1p39, -0x1p63 - 2048, 0x1p63 + 2048,
		0x1p53 + 2, -0x1p53 - 2, 123456.75, -98765.25, 7.999, -0.25, 1e-300, 42, -42, 1e19, -1e19,
	}
	for _, d := range []tile.DType{tile.F32, tile.F64} {
		for _, to := range []tile.DType{tile.F32, tile.F64} {
			t.Run(fmt.Sprintf("%v → i64 → %v, %v → i1 → i32", d, to, d), func(t *testing.T) {
				b := tile.NewBuilder("i64_roundtrip", nil)
				x, y, z := b.Ptr("x", d), b.Ptr("y", to), b.Ptr("z", tile.I32)
				r := b.Arange(0, 64)
				mask := b.Lt(r, int32(n))
				v := b.Load(b.AddPtr(x, r), mask, nil)
				b.Store(b.AddPtr(y, r), b.Cast(b.Cast(v, tile.I64), to), mask)
				b.Store(b.AddPtr(z, r), b.Cast(b.Cast(v, tile.I1), tile.I32), mask)
				k, err := b.Build()
				if err != nil {
					t.Fatal(err)
				}
				bitsAgainstReference(t, k, tile.Grid{1}, func(launch func(args ...any) error) []uint32 {
					var xs any = edges[:n]
					if d == tile.F32 {
						x32 := make([]float32, n)
						for i := range x32 {
							x32[i] = float32(edges[i])
						}
						xs = x32
					}
					zs := make([]int32, n+3)
					for i := range zs {
						zs[i] = -0x5a5a5a5b
					}
					var bits []uint32
					if to == tile.F32 {
						ys := make([]float32, n+3)
						for i := range ys {
							ys[i] = float32(math.NaN())
						}
						if err := launch(xs, ys, zs); err != nil {
							t.Fatal(err)
						}
						bits = bitsF32(ys)
					} else {
						ys := make([]float64, n+3)
						for i := range ys {
							ys[i] = math.NaN()
						}
						if err := launch(xs, ys, zs); err != nil {
							t.Fatal(err)
						}
						bits = bitsF64(ys)
					}
					return append(bits, bitsI32(zs)...)
				})
			})
		}
	}
}
