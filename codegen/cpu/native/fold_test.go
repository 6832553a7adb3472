package native_test

import (
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestSelectFoldNative: a select whose condition is a mask the unmasked
// loop proves true over the row (an access's mask, or a conjunct of one)
// is its first operand there (fast.go: fold), so the loop computes
// neither the mask's lanes nor the blend (LayerNorm's Where(mask, x -
// mean, 0)); a select on anything else stays. Each kernel runs on poisoned
// outputs with tails in rows and columns (tails not multiples of 16: the
// masked loop; whole rows: the unmasked one), with AVX2 and AVX-512, and
// with the unmasked loops off (native.SetFastRows(false): the masked loop
// everywhere, where the select computes): bit for bit the same, and bit
// for bit the reference interpreter's (every op exact). The number of
// selects folded is checked, so the test fails where none is.
func TestSelectFoldNative(t *testing.T) {
	requireJIT(t)
	const bm, bn = 4, 64
	type env struct {
		b    *tile.Builder
		r, c *tile.Value // [bm,1] and [1,bn] i32 lanes
		M, N *tile.Value
		P    *tile.Value // a free i32 parameter
	}
	for _, c := range []struct {
		name      string
		m, n, p   int
		wantFolds int
		// the kernel: the load's and store's mask, y's value from the loaded x
		body func(e env, x func(mask *tile.Value, other any) *tile.Value) (mask, val *tile.Value)
	}{
		{name: "where on the load's mask", m: 37, n: 150, wantFolds: 1, body: func(e env, x func(*tile.Value, any) *tile.Value) (*tile.Value, *tile.Value) {
			b := e.b
			m := b.And(b.Lt(e.r, e.M), b.Lt(e.c, e.N))
			return m, b.Where(m, b.Sub(b.Mul(x(m, 0.0), 3.0), 1.0), 5.0)
		}},
		{name: "where on a conjunct of it, nested", m: 21, n: 100, wantFolds: 2, body: func(e env, x func(*tile.Value, any) *tile.Value) (*tile.Value, *tile.Value) {
			b := e.b
			inRows, inCols := b.Lt(e.r, e.M), b.Lt(e.c, e.N)
			m := b.And(inRows, inCols)
			v := x(m, -2.0)
			return m, b.Where(inCols, b.Where(inRows, b.Mul(v, v), -1.0), b.Neg(v))
		}},
		{name: "where on the loaded value: kept", m: 37, n: 150, wantFolds: 0, body: func(e env, x func(*tile.Value, any) *tile.Value) (*tile.Value, *tile.Value) {
			b := e.b
			m := b.And(b.Lt(e.r, e.M), b.Lt(e.c, e.N))
			v := x(m, 0.0)
			return m, b.Where(b.Gt(v, 0.25), v, b.Mul(v, 0.5))
		}},
		{name: "where on a comparison no access needs: kept", m: 16, n: 128, p: 70, wantFolds: 0, body: func(e env, x func(*tile.Value, any) *tile.Value) (*tile.Value, *tile.Value) {
			b := e.b
			m := b.And(b.Lt(e.r, e.M), b.Lt(e.c, e.N))
			return m, b.Where(b.Lt(e.c, e.P), x(m, 0.0), 9.0)
		}},
		{name: "both, and a row sum of the folded value (two phases read it)", m: 19, n: 200, wantFolds: 2, body: func(e env, x func(*tile.Value, any) *tile.Value) (*tile.Value, *tile.Value) {
			b := e.b
			m := b.And(b.Lt(e.r, e.M), b.Lt(e.c, e.N))
			v := x(m, 0.0)
			w := b.Where(m, b.Sub(v, 0.5), 0.0)
			// powers of two with few bits: the sum is exact in any order
			s := b.Sum(b.Floor(b.Mul(w, 4.0)), 1, true)
			return m, b.Where(b.Gt(v, 0.0), b.Add(w, s), w)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("select_fold", nil)
			px, py := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
			e := env{b: b, M: b.Param("M", tile.I32), N: b.Param("N", tile.I32), P: b.Param("P", tile.I32)}
			e.r = b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm)), 1)
			e.c = b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), bn), b.Arange(0, bn)), 0)
			off := b.Add(b.Mul(e.r, e.N), e.c)
			x := func(mask *tile.Value, other any) *tile.Value { return b.Load(b.AddPtr(px, off), mask, other) }
			mask, val := c.body(e, x)
			b.Store(b.AddPtr(py, off), val, mask)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			grid := tile.Grid{(c.m + bm - 1) / bm, (c.n + bn - 1) / bn}
			xs := tiletest.Uniform(tiletest.RNG(c.name), c.m*c.n, -4, 4)
			run := func(launch func(args ...any) error) []float32 {
				y := make([]float32, c.m*c.n)
				for i := range y {
					y[i] = float32(math.NaN())
				}
				if err := launch(xs, y, c.m, c.n, c.p); err != nil {
					t.Fatal(err)
				}
				return y
			}
			want := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, grid, args...) })
			for _, isa := range isas(t) {
				native.SetAVX512(isa == "avx512")
				for _, fast := range []bool{true, false} {
					was := native.SetFastRows(fast)
					nk, err := native.Compile(k)
					native.SetFastRows(was)
					if err != nil {
						t.Fatal(err)
					}
					folds := native.Folds(nk)
					got := run(func(args ...any) error { return nk.Launch(grid, args...) })
					nk.Free()
					wantFolds := c.wantFolds
					if !fast {
						wantFolds = 0
					}
					if folds != wantFolds {
						t.Errorf("%s, fast rows %v: %d selects folded, want %d", isa, fast, folds, wantFolds)
					}
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s, fast rows %v: y[%d] = %v, reference %v", isa, fast, i, got[i], want[i])
						}
					}
				}
			}
		})
	}
}

// TestLayerNormFoldNative: kernels.LayerNorm's Where(mask, x - mean, 0)
// folds in its unmasked loops (two phases read it), which then compute
// in zmm pairs where the CPU has AVX-512 (they had i32 lanes before: the
// sum's loops alone were paired; each phase has two unmasked loops, for
// every row and row by row, so 6 pairs where there were 2);
// results bit for bit those of the kernel without unmasked loops, and
// within 1e-5 of the reference (its sums in another order), on poisoned
// outputs, rows of the block and shorter (a tail of 1000 in blocks of
// 1024: the masked loop).
func TestLayerNormFoldNative(t *testing.T) {
	requireJIT(t)
	for _, c := range []struct {
		name            string
		block, n, rows  int
		wantFold        bool
		wantPairsAVX512 int
	}{
		{name: "rows of the block", block: 1024, n: 1024, rows: 9, wantFold: true, wantPairsAVX512: 6},
		{name: "rows of 1000 in blocks of 1024", block: 1024, n: 1000, rows: 7, wantFold: true, wantPairsAVX512: 6},
		{name: "rows of 96 in blocks of 128", block: 128, n: 96, rows: 5, wantFold: true, wantPairsAVX512: 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, run, want := rowCase(t, c.name, "layernorm", c.block, c.rows, c.n)
			for _, isa := range isas(t) {
				native.SetAVX512(isa == "avx512")
				var outs [2][]float32
				for i, fast := range []bool{false, true} {
					was := native.SetFastRows(fast)
					nk, err := native.Compile(k)
					native.SetFastRows(was)
					if err != nil {
						t.Fatal(err)
					}
					if fast {
						if got := native.Folds(nk) > 0; got != c.wantFold {
							t.Errorf("%s: %d selects folded", isa, native.Folds(nk))
						}
						if isa == "avx512" && native.PairLoops(nk) != c.wantPairsAVX512 {
							t.Errorf("%s: %d zmm loops in pairs, want %d", isa, native.PairLoops(nk), c.wantPairsAVX512)
						}
					}
					outs[i] = run(func(args ...any) error { return nk.Launch(tile.Grid{c.rows}, args...) })
					nk.Free()
				}
				for i, v := range outs[1] {
					if math.Float32bits(v) != math.Float32bits(outs[0][i]) {
						t.Fatalf("%s: y[%d] = %v with unmasked loops, %v without", isa, i, v, outs[0][i])
					}
					if d := math.Abs(float64(v) - float64(want[i])); !(d <= 1e-5+1e-5*math.Abs(float64(want[i]))) {
						t.Fatalf("%s: y[%d] = %v, reference %v", isa, i, v, want[i])
					}
				}
			}
		})
	}
}
