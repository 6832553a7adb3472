package native_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestRank3ReductionsNative: sums, maxima and minima of a rank-3 block
// along its axis 0 or 1 (with and without kept dimensions), its
// elements masked past a bound along the reduced axis, with NaN, ±Inf and
// ±0 among them; the result stored, and subtracted from the block (read
// back in a later phase, broadcast along the reduced axis) and stored
// again. Natively (AVX2, and AVX-512 where the CPU has it) bit for bit the
// reference interpreter: the result block accumulates the rows along the
// axis in the reference's order. Rows narrower than a vector (the last
// dimension 1, 2 or 4) lie next to each other in the result block and are
// read and written under the row's lane mask.
// (Before 2026-12-07 every such reduction was declined: the executor ran
// the kernel.)
func TestRank3ReductionsNative(t *testing.T) {
	requireJIT(t)
	shapes := [][3]int{{2, 4, 8}, {4, 8, 32}, {8, 3 * 32, 16}, {16, 4, 64}, {4, 8, 4}, {8, 2, 2}, {2, 16, 1}}
	for _, d := range []tile.DType{tile.F32, tile.F64} {
		for _, op := range []tile.Op{tile.OpReduceSum, tile.OpReduceMax, tile.OpReduceMin} {
			for axis := 0; axis < 2; axis++ {
				for _, s := range shapes {
					for _, keep := range []bool{false, true} {
						name := fmt.Sprintf("%v/%v/axis=%d/%dx%dx%d/keep=%v", d, op, axis, s[0], s[1], s[2], keep)
						t.Run(name, func(t *testing.T) {
							rank3Reduction(t, d, op, axis, s, keep)
						})
					}
				}
			}
		}
	}
}

func rank3Reduction(t *testing.T, d tile.DType, op tile.Op, axis int, s [3]int, keep bool) {
	b := tile.NewBuilder("rank3_reduce", nil)
	x, out := b.Ptr("x", d), b.Ptr("out", d)
	n := s[0] * s[1] * s[2]
	offs := b.Reshape(b.Arange(0, n), s[0], s[1], s[2])
	// the rows along the axis past its last but one masked off (other:
	// the reduction's identity)
	idx := b.Arange(0, s[axis])
	idx = b.ExpandDims(idx, 1-axis) // [s0,1] or [1,s1]
	idx = b.BroadcastTo(b.ExpandDims(idx, 2), tile.Shp(s[0], s[1], 1))
	idx = b.BroadcastTo(idx, tile.Shp(s[0], s[1], s[2]))
	in := b.Lt(idx, max(1, s[axis]-1))
	other := 0.0
	switch op {
	case tile.OpReduceMax:
		other = math.Inf(-1)
	case tile.OpReduceMin:
		other = math.Inf(1)
	}
	v := b.Load(b.AddPtr(x, offs), in, other)
	v = b.Add(b.Mul(v, 2.0), 0.5) // computed in the reduction's phase
	r := b.Reduce(op, v, axis, keep)
	rs := r.Type.Shape
	b.Store(b.AddPtr(out, b.Reshape(b.Arange(0, rs.Numel()), rs.Slice()...)), r, nil)
	// the block less its reduction, broadcast back along the axis
	back := r
	if !keep {
		back = b.ExpandDims(r, axis)
	}
	diff := b.Sub(v, b.BroadcastTo(back, tile.Shp(s[0], s[1], s[2])))
	b.Store(b.AddPtr(out, b.Add(offs, rs.Numel())), diff, nil)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rng := tiletest.RNG(fmt.Sprint(d, op, axis, s, keep))
	xs := tiletest.Uniform(rng, n, -3, 3)
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1))}
	for i, sp := range specials {
		if j := 7*i + 3; j < n && n >= 64 {
			xs[j] = sp
		}
	}
	m := rs.Numel() + n
	bitsAgainstReference(t, k, tile.Grid{1}, func(launch func(args ...any) error) []uint32 {
		if d == tile.F32 {
			o := make([]float32, m+3)
			for i := range o {
				o[i] = float32(math.NaN())
			}
			if err := launch(xs, o); err != nil {
				t.Fatal(err)
			}
			return bitsF32(o)
		}
		x64 := make([]float64, n)
		for i := range xs {
			x64[i] = float64(xs[i])
		}
		o := make([]float64, m+3)
		for i := range o {
			o[i] = math.NaN()
		}
		if err := launch(x64, o); err != nil {
			t.Fatal(err)
		}
		return bitsF64(o)
	})
}

// FuzzRank3Reductions: rank3Reduction over shapes of powers of two (1 to
// 32 on each axis), f32 and f64, sum, max and min, axis 0 or 1, kept
// dimensions or not, from the fuzzer's bytes: natively bit for bit the
// interpreter.
func FuzzRank3Reductions(f *testing.F) {
	requireJIT(f)
	f.Add(uint8(1), uint8(2), uint8(3), uint8(0), uint8(0))
	f.Add(uint8(3), uint8(0), uint8(1), uint8(5), uint8(1))
	f.Add(uint8(5), uint8(4), uint8(5), uint8(10), uint8(0))
	f.Add(uint8(0), uint8(5), uint8(2), uint8(7), uint8(1))
	f.Fuzz(func(t *testing.T, a, b, c, sel, keep uint8) {
		s := [3]int{1 << (a % 6), 1 << (b % 6), 1 << (c % 6)}
		d := []tile.DType{tile.F32, tile.F64}[sel%2]
		op := []tile.Op{tile.OpReduceSum, tile.OpReduceMax, tile.OpReduceMin}[sel/2%3]
		axis := int(sel / 6 % 2)
		rank3Reduction(t, d, op, axis, s, keep%2 == 1)
	})
}
