package native_test

import (
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestF64CarriedScalarsNative: loops that carry f64 scalars — a running
// sum of the induction variable cast to f64 (i64: rounded to nearest, as
// Go's float64(int64), past 2^53 too), of an i32 program id and of an f32
// parameter (exact), of a comparison's i1, two carried values swapped each
// iteration, a carried value splatted into a vector block inside the loop
// and its result read by the vectors after it — natively (AVX2, and
// AVX-512 where the CPU has it) bit for bit the reference interpreter.
// (Before 2026-12-07 a loop-carried f64 and a scalar cast to f64 were
// declined: the executor ran the kernel.)
func TestF64CarriedScalarsNative(t *testing.T) {
	requireJIT(t)
	b := tile.NewBuilder("f64_carry", nil)
	x, out := b.Ptr("x", tile.F64), b.Ptr("out", tile.F64)
	lo, hi := b.Param("lo", tile.I64), b.Param("hi", tile.I64)
	s := b.Param("s", tile.F32)
	pid := b.ProgramID(0)
	r := b.Arange(0, 16)
	xv := b.Load(b.AddPtr(x, r), nil, nil) // [16] f64
	res := b.For(lo, hi, 1, []*tile.Value{b.F64(0.5), b.F64(-1.25), b.F64(3), b.Splat(b.F64(0), tile.Shp(16))},
		func(iv *tile.Value, c []*tile.Value) []*tile.Value {
			sum := b.Add(c[0], b.Mul(b.Cast(iv, tile.F64), b.Cast(s, tile.F64)))
			odd := b.Cast(b.Gt(iv, b.Add(lo, 2)), tile.F64) // i1 → f64
			sum = b.Add(sum, b.Add(b.Cast(pid, tile.F64), odd))
			blk := b.Add(c[3], b.Mul(xv, b.Splat(c[1], tile.Shp(16))))
			return []*tile.Value{sum, c[2], b.Sub(c[1], 0.75), blk} // c[1] and c[2] swapped, one changed
		})
	vals := []*tile.Value{res[0], res[1], res[2]}
	for i, v := range vals {
		b.Store(b.AddPtr(out, b.Add(b.Mul(pid, 64), i)), v, nil)
	}
	y := b.Add(res[3], b.Splat(b.Mul(res[0], res[1]), tile.Shp(16)))
	b.Store(b.AddPtr(out, b.Add(b.Add(r, 16), b.Mul(pid, 64))), y, nil)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	xs := tiletest.Uniform(tiletest.RNG("f64carry"), 16, -2, 2)
	x64 := make([]float64, 16)
	for i := range xs {
		x64[i] = float64(xs[i])
	}
	for _, c := range []struct {
		name   string
		lo, hi int64
		s      float32
	}{
		{"ten iterations", 0, 10, 0.3},
		{"none", 5, 5, 2},
		{"one", -3, -2, -1.5},
		{"past 2^53", 1<<53 - 2, 1<<53 + 3, 1},
		{"negative bounds", -40, -7, 1e-3},
	} {
		t.Run(c.name, func(t *testing.T) {
			bitsAgainstReference(t, k, tile.Grid{3}, func(launch func(args ...any) error) []uint32 {
				o := make([]float64, 3*64)
				for i := range o {
					o[i] = math.NaN()
				}
				if err := launch(x64, o, c.lo, c.hi, c.s); err != nil {
					t.Fatal(err)
				}
				return bitsF64(o)
			})
		})
	}
}
