package native_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestF64Native: kernels with f64 values run natively (Compile accepts
// them where the CPU has AVX-512; with AVX2 only it declines them with
// ErrUnsupported) and give the reference interpreter's results bit for
// bit (every op is exact or rounded once as the reference rounds; NaN
// where the reference has NaN): masked rows with tails in rows and
// columns, rows narrower than eight lanes, rows without masks (the
// unmasked loop), one-address loads under a mask, loads with another
// value for masked-off lanes, comparisons and selects, casts f32 ↔ f64,
// i32 and i1 → f64, rsqrt and sign, exp and tanh (mathd.go), softmax,
// LayerNorm and GELU, row and column reductions (sums bit for bit the
// executor's, against the reference within 1e-12), an f64 value kept in
// the frame for a
// later phase (after an f32 row max), and more live f64 values than
// registers (spills of 64 bytes). Inputs are seeded, with special values
// (NaN, ±Inf, ±0, subnormals, the largest finite) where the case says;
// outputs are poisoned with NaN first.
func TestF64Native(t *testing.T) {
	requireJIT(t)
	const bm = 16
	type env struct {
		b    *tile.Builder
		r, c *tile.Value // [bm,1] and [1,bn] i32 lanes
		x    *tile.Value // the loaded f64 block
		mask *tile.Value // the block's mask (nil without)
		// the row's first element of x, at one address for the row's lanes
		rowFirst func() *tile.Value
		ptr      *tile.Value // x's pointer block
	}
	for _, c := range []struct {
		name     string
		m, n, bn int
		specials bool
		noMask   bool
		// declined without AVX-512 (f64y.go) for this reason: a sum, a
		// max and a min of rows are more than the ymm pairs' accumulator
		// registers
		avx2Why string
		out     tile.DType // the output's type (F64 unless said)
		lo, hi  float64
		// sums along the last axis: bit for bit the executor's (four
		// partial sums), within tol·(1 + |y|) of the reference's in-order sum
		tol  float64
		body func(e env) *tile.Value
	}{
		{name: "arithmetic", m: 37, n: 100, bn: 32, specials: true, lo: -3, hi: 3, body: func(e env) *tile.Value {
			b, x := e.b, e.x
			y := b.Maximum(b.Minimum(b.Sub(b.Mul(x, x), b.Div(x, 3.0)), 2.5), b.Floor(x))
			return b.Sub(b.Add(b.Add(y, b.Ceil(x)), b.Sqrt(b.Abs(x))), b.Neg(x))
		}},
		{name: "arithmetic, rows of five (4-lane blocks)", m: 37, n: 5, bn: 4, specials: true, lo: -3, hi: 3, body: func(e env) *tile.Value {
			b, x := e.b, e.x
			return b.Add(b.Mul(x, 1.0/3), b.Div(1.0, x))
		}},
		{name: "arithmetic without masks", m: 32, n: 256, bn: 128, noMask: true, specials: true, lo: -3, hi: 3, body: func(e env) *tile.Value {
			b, x := e.b, e.x
			return b.Add(b.Mul(b.Sub(x, 0.25), x), b.Sqrt(b.Abs(x)))
		}},
		{name: "min and max with NaN", m: 37, n: 64, bn: 64, specials: true, lo: -2, hi: 2, body: func(e env) *tile.Value {
			b, x := e.b, e.x
			return b.Add(b.Maximum(x, 0.5), b.Minimum(-0.5, x))
		}},
		{name: "rsqrt and sign", m: 37, n: 100, bn: 32, specials: true, lo: -1, hi: 1e4, body: func(e env) *tile.Value {
			b, x := e.b, e.x
			return b.Add(b.Rsqrt(x), b.Sign(x))
		}},
		{name: "sign of ±0 and NaN", m: 20, n: 40, bn: 16, specials: true, lo: -1e-300, hi: 1e-300, body: func(e env) *tile.Value {
			return e.b.Sign(e.x)
		}},
		{name: "comparisons and selects", m: 37, n: 100, bn: 32, specials: true, lo: -2, hi: 2, body: func(e env) *tile.Value {
			b, x := e.b, e.x
			pos := b.And(b.Gt(x, 0.25), b.Ne(x, 1.0))
			neg := b.Or(b.Le(x, -1.0), b.Eq(x, 0.0))
			y := b.Where(pos, x, b.Where(neg, b.Neg(x), b.Mul(x, 2.0)))
			odd := b.Xor(b.Ge(x, 0.0), b.Not(b.Lt(x, 1.5)))
			return b.Add(y, b.Cast(odd, tile.F64))
		}},
		{name: "casts f32 ↔ f64 and i32 → f64", m: 37, n: 100, bn: 32, specials: true, lo: -1e40, hi: 1e40, body: func(e env) *tile.Value {
			b, x := e.b, e.x
			x32 := b.Cast(x, tile.F32) // rounded to nearest; overflow to ±Inf
			rc := b.Add(b.Mul(e.r, 100003), e.c)
			return b.Add(b.Sub(x, b.Cast(x32, tile.F64)), b.Cast(rc, tile.F64))
		}},
		{name: "f64 → f32 output", m: 37, n: 100, bn: 32, specials: true, out: tile.F32, lo: -1e39, hi: 1e39, body: func(e env) *tile.Value {
			b, x := e.b, e.x
			return b.Cast(b.Mul(x, 1.0000001), tile.F32)
		}},
		{name: "f32 lanes widened", m: 37, n: 100, bn: 32, specials: true, lo: -3, hi: 3, body: func(e env) *tile.Value {
			b, x := e.b, e.x
			y := b.Mul(b.Cast(x, tile.F32), b.F32(1.5)) // an f32 product
			return b.Div(b.Cast(y, tile.F64), x)
		}},
		{name: "a value per row loaded at one address", m: 37, n: 100, bn: 32, specials: true, lo: -3, hi: 3, body: func(e env) *tile.Value {
			return e.b.Mul(e.x, e.rowFirst())
		}},
		{name: "masked-off lanes take another value", m: 37, n: 100, bn: 32, lo: -3, hi: 3, body: func(e env) *tile.Value {
			b := e.b
			// x's element one column on: the row's last lane reads other
			next := b.Load(b.AddPtr(e.ptr, 1), b.And(e.mask, b.Lt(b.Add(e.c, 1), b.Param("N1", tile.I32))), 2.5)
			return b.Sub(next, e.x)
		}},
		{name: "kept in the frame for a later phase", m: 37, n: 100, bn: 32, lo: 0, hi: 9, body: func(e env) *tile.Value {
			b, x := e.b, e.x
			u := b.Div(b.Sqrt(x), 7.0)               // not a formula: kept, read after the max
			s := b.Max(b.Cast(x, tile.F32), 1, true) // (an f32 sum's order is not the reference's)
			return b.Add(b.Mul(u, b.Cast(s, tile.F64)), u)
		}},
		{name: "more live values than registers", m: 37, n: 100, bn: 32, specials: true, lo: -3, hi: 3, body: func(e env) *tile.Value {
			b, x := e.b, e.x
			var vs []*tile.Value
			for i := 0; i < 20; i++ {
				vs = append(vs, b.Div(x, float64(i)+1.5))
			}
			y := vs[len(vs)-1]
			for i := len(vs) - 2; i >= 0; i-- {
				y = b.Sub(vs[i], b.Mul(y, 0.5))
			}
			return y
		}},
		{name: "row sum", m: 37, n: 256, bn: 256, lo: -3, hi: 3, tol: 1e-12, body: func(e env) *tile.Value {
			return e.b.Sub(e.x, e.b.Sum(e.x, 1, true))
		}},
		{name: "row sum with tails", m: 37, n: 100, bn: 128, lo: -3, hi: 3, tol: 1e-12, body: func(e env) *tile.Value {
			return e.b.Add(e.x, e.b.Sum(e.b.Mul(e.x, e.x), 1, true))
		}},
		{name: "row sum of eight", m: 37, n: 8, bn: 8, lo: -3, hi: 3, tol: 1e-12, body: func(e env) *tile.Value {
			return e.b.Sub(e.x, e.b.Sum(e.x, 1, true))
		}},
		{name: "row sum of four", m: 37, n: 7, bn: 4, lo: -3, hi: 3, tol: 1e-12, body: func(e env) *tile.Value {
			return e.b.Sub(e.x, e.b.Sum(e.x, 1, true))
		}},
		// rows of one and two lanes: the vector's other lanes (here
		// x + 1 = 1 past the mask) are left out of the sum
		{name: "row sum of one", m: 37, n: 1, bn: 1, specials: true, lo: -3, hi: 3, tol: 1e-12, body: func(e env) *tile.Value {
			return e.b.Sub(e.x, e.b.Sum(e.b.Add(e.x, 1.0), 1, true))
		}},
		{name: "row sum of two with tails", m: 37, n: 3, bn: 2, specials: true, lo: -3, hi: 3, tol: 1e-12, body: func(e env) *tile.Value {
			return e.b.Sub(e.x, e.b.Sum(e.b.Add(e.x, 1.0), 1, true))
		}},
		// −0 + −0 in order is −0, the executor's sum +0 (its partial
		// sums start at +0)
		{name: "row sum of two of −0", m: 32, n: 2, bn: 2, lo: 0, hi: 0, noMask: true, tol: 1e-12, body: func(e env) *tile.Value {
			return e.b.Sum(e.b.Mul(e.x, -1.0), 1, true)
		}},
		{name: "row max with NaN", m: 37, n: 64, bn: 64, specials: true, lo: -3, hi: 3, body: func(e env) *tile.Value {
			return e.b.Sub(e.x, e.b.Max(e.x, 1, true))
		}},
		{name: "row min with tails", m: 37, n: 100, bn: 128, lo: -3, hi: 3, body: func(e env) *tile.Value {
			return e.b.Sub(e.x, e.b.Min(e.b.Where(e.mask, e.x, math.Inf(1)), 1, true))
		}},
		{name: "row max of four", m: 37, n: 7, bn: 4, specials: true, lo: -3, hi: 3, body: func(e env) *tile.Value {
			return e.b.Sub(e.x, e.b.Max(e.x, 1, true))
		}},
		{name: "column sum", m: 37, n: 100, bn: 32, lo: -3, hi: 3, body: func(e env) *tile.Value {
			return e.b.Sub(e.x, e.b.Sum(e.x, 0, true))
		}},
		{name: "column max with NaN", m: 37, n: 100, bn: 32, specials: true, lo: -3, hi: 3, body: func(e env) *tile.Value {
			return e.b.Sub(e.x, e.b.Max(e.x, 0, true))
		}},
		{name: "column min", m: 37, n: 64, bn: 64, lo: -3, hi: 3, body: func(e env) *tile.Value {
			return e.b.Sub(e.x, e.b.Min(e.x, 0, true))
		}},
		{name: "three row reductions", avx2Why: "past the accumulator registers", m: 37, n: 64, bn: 64, lo: -3, hi: 3, tol: 1e-12, body: func(e env) *tile.Value {
			b, x := e.b, e.x
			return b.Sub(x, b.Add(b.Add(b.Sum(x, 1, true), b.Max(x, 1, true)), b.Min(b.Mul(x, 3.0), 1, true)))
		}},
		{name: "f32 row reductions past the registers beside f64", m: 37, n: 64, bn: 64, lo: -3, hi: 3, tol: 1e-5, body: func(e env) *tile.Value {
			// four f32 reductions (two in registers, two in the frame: with
			// ymm pairs their row ends read them into Y8, Y9) in a phase
			// with f64 values
			b := e.b
			y := b.Cast(e.x, tile.F32)
			s := b.Add(b.Add(b.Sum(y, 1, true), b.Max(y, 1, true)), b.Add(b.Min(y, 1, true), b.Sum(b.Mul(y, y), 1, true)))
			return b.Sub(e.x, b.Cast(s, tile.F64))
		}},
		{name: "layernorm", m: 37, n: 64, bn: 64, noMask: false, lo: -3, hi: 3, tol: 1e-11, body: func(e env) *tile.Value {
			b := e.b
			d := b.Sub(e.x, b.Div(b.Sum(e.x, 1, true), 64.0))
			v := b.Div(b.Sum(b.Mul(d, d), 1, true), 64.0)
			return b.Mul(d, b.Rsqrt(b.Add(v, 1e-5)))
		}},
		{name: "layernorm without masks", m: 32, n: 256, bn: 256, noMask: true, lo: -3, hi: 3, tol: 1e-11, body: func(e env) *tile.Value {
			b := e.b
			d := b.Sub(e.x, b.Div(b.Sum(e.x, 1, true), 256.0))
			v := b.Div(b.Sum(b.Mul(d, d), 1, true), 256.0)
			return b.Mul(d, b.Rsqrt(b.Add(v, 1e-5)))
		}},
		{name: "exp and tanh", m: 37, n: 100, bn: 32, specials: true, lo: -800, hi: 800, body: func(e env) *tile.Value {
			return e.b.Add(e.b.Exp(e.x), e.b.Tanh(e.x))
		}},
		{name: "log", m: 37, n: 100, bn: 32, specials: true, lo: -1, hi: 1e6, body: func(e env) *tile.Value {
			return e.b.Log(e.x)
		}},
		{name: "softmax", m: 37, n: 256, bn: 256, lo: -8, hi: 8, tol: 1e-12, body: func(e env) *tile.Value {
			b := e.b
			z := b.Exp(b.Sub(e.x, b.Max(e.x, 1, true)))
			return b.Div(z, b.Sum(z, 1, true))
		}},
		{name: "softmax with tails", m: 37, n: 100, bn: 128, lo: -8, hi: 8, tol: 1e-12, body: func(e env) *tile.Value {
			b := e.b
			x := b.Where(e.mask, e.x, math.Inf(-1))
			z := b.Exp(b.Sub(x, b.Max(x, 1, true)))
			return b.Div(z, b.Sum(z, 1, true))
		}},
		{name: "gelu (tanh form)", m: 40, n: 150, bn: 64, lo: -6, hi: 6, body: func(e env) *tile.Value {
			b, x := e.b, e.x
			u := b.Mul(b.Add(x, b.Mul(b.Mul(b.Mul(x, x), x), 0.044715)), 0.7978845608028654)
			return b.Mul(b.Mul(x, 0.5), b.Add(b.Tanh(u), 1.0))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := c.out
			if out == 0 {
				out = tile.F64
			}
			b := tile.NewBuilder("f64_rows", nil)
			px, py := b.Ptr("x", tile.F64), b.Ptr("y", out)
			M, N := b.Param("M", tile.I32), b.Param("N", tile.I32)
			e := env{b: b}
			e.r = b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm)), 1)
			e.c = b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), c.bn), b.Arange(0, c.bn)), 0)
			off := b.Add(b.Mul(e.r, N), e.c)
			if !c.noMask {
				e.mask = b.And(b.Lt(e.r, M), b.Lt(e.c, N))
			}
			e.rowFirst = func() *tile.Value {
				return b.Load(b.AddPtr(px, b.Mul(e.r, N)), b.Lt(e.r, M), 0.0)
			}
			e.ptr = b.AddPtr(px, off)
			if e.mask != nil {
				e.x = b.Load(e.ptr, e.mask, 0.0)
			} else {
				e.x = b.Load(e.ptr, nil, nil)
			}
			b.Store(b.AddPtr(py, off), c.body(e), e.mask)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			rng := tiletest.RNG(c.name)
			x := make([]float64, c.m*c.n)
			for i, v := range tiletest.Uniform(rng, c.m*c.n, 0, 1) {
				x[i] = c.lo + (c.hi-c.lo)*(float64(v)+rng.Float64()*1e-7)
			}
			if c.specials {
				sp := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1),
					5e-324, -5e-324, 1e-310, -3e-308, math.MaxFloat64, -math.MaxFloat64, 1e39, -1e-46}
				for i := range x {
					if rng.IntN(9) == 0 {
						x[i] = sp[rng.IntN(len(sp))]
					}
				}
			}
			grid := tile.Grid{(c.m + bm - 1) / bm, (c.n + c.bn - 1) / c.bn}
			run := func(launch func(args ...any) error) []float64 {
				var y any
				if out == tile.F64 {
					y64 := make([]float64, c.m*c.n)
					for i := range y64 {
						y64[i] = math.NaN()
					}
					y = y64
				} else {
					y32 := make([]float32, c.m*c.n)
					for i := range y32 {
						y32[i] = float32(math.NaN())
					}
					y = y32
				}
				args := []any{x, y, c.m, c.n}
				if len(k.Params) == 5 {
					args = append(args, c.n)
				}
				if err := launch(args...); err != nil {
					t.Fatal(err)
				}
				if y64, ok := y.([]float64); ok {
					return y64
				}
				r := make([]float64, c.m*c.n)
				for i, v := range y.([]float32) {
					r[i] = float64(v)
				}
				return r
			}
			want := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, grid, args...) })
			if c.tol != 0 {
				// the reference's sums are in order: within tol of them, and
				// bit for bit the executor's below
				ex, err := cpu.NewExec(k, cpu.WithNative(false))
				if err != nil {
					t.Fatal(err)
				}
				ref := want
				want = run(func(args ...any) error { return ex.Launch(grid, args...) })
				for i := range want {
					if w, r := want[i], ref[i]; math.Abs(w-r) > c.tol*(1+math.Abs(r)) {
						t.Fatalf("executor: y[%d] = %v, reference %v: over the tolerance", i, w, r)
					}
				}
			}
			ran := false
			for _, isa := range isas(t) {
				native.SetAVX512(isa == "avx512")
				nk, err := native.Compile(k)
				if isa == "avx2" && c.avx2Why != "" {
					if !errors.Is(err, native.ErrUnsupported) || !strings.Contains(err.Error(), c.avx2Why) {
						t.Fatalf("avx2: got %v, want a decline: %s", err, c.avx2Why)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: not compiled natively: %v\n%v", isa, err, k)
				}
				defer nk.Free()
				got := run(func(args ...any) error { return nk.Launch(grid, args...) })
				ran = true
				for i := range want {
					w, z := want[i], got[i]
					if w != w && z != z {
						continue
					}
					if math.Float64bits(z) != math.Float64bits(w) {
						t.Fatalf("%s: y[%d] (row %d, column %d; x = %v) = %v (%#x) natively, %v (%#x) on the reference",
							isa, i, i/c.n, i%c.n, x[i], z, math.Float64bits(z), w, math.Float64bits(w))
					}
				}
			}
			if !ran {
				t.Skip("no AVX-512 here: declined (checked): " + c.avx2Why)
			}
		})
	}
}

// TestF64Declined: what f64 kernels still run on the executor says why,
// with AVX-512 and without.
func TestF64Declined(t *testing.T) {
	requireJIT(t)
	for _, c := range []struct {
		name, why string
		body      func(b *tile.Builder, x *tile.Value) *tile.Value
	}{
		// f64 rem runs since 2026-12-07's fifty-sixth session (rem.go,
		// TestRemF64Native)
		{"tf32 product", "products of precision", func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Dot(x, x, nil, tile.PrecTF32) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("f64_declined", nil)
			px, py := b.Ptr("x", tile.F64), b.Ptr("y", tile.F64)
			off := b.Add(b.Mul(b.ExpandDims(b.Arange(0, 32), 1), 32), b.ExpandDims(b.Arange(0, 32), 0))
			b.Store(b.AddPtr(py, off), c.body(b, b.Load(b.AddPtr(px, off), nil, nil)), nil)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			for _, isa := range isas(t) {
				native.SetAVX512(isa == "avx512")
				_, err = native.Compile(k)
				if !errors.Is(err, native.ErrUnsupported) || !strings.Contains(err.Error(), c.why) {
					t.Fatalf("%s: got %v, want a decline for %s", isa, err, c.why)
				}
			}
		})
	}
}

// TestDotF64Native: f64 products (fused multiply-adds in k order: dotZ64,
// eight lanes a zmm register, and without AVX-512 dotY64, four lanes a
// ymm register) over masked rows, columns and k, a K loop accumulating in
// place or not, transposed operands, row blocks past the micro-kernels'
// twelve and six rows: within 2(K+1)·2⁻⁵³·(|c0| + Σ|a·b|) of the
// reference, element by element, and the two kernels bit for bit.
func TestDotF64Native(t *testing.T) {
	requireJIT(t)
	for _, c := range []struct {
		name       string
		m, n, k    int
		bm, bn, bk int
		loop       bool
		loadAcc    bool
		notYield   bool
		tA, tB     bool
	}{
		{name: "one block 16×16×16", m: 16, n: 16, k: 16, bm: 16, bn: 16, bk: 16},
		{name: "one block, loaded accumulator, masked 50×40×27", m: 50, n: 40, k: 27, bm: 64, bn: 32, bk: 32, loadAcc: true},
		{name: "K loop in place 130×70×90", m: 130, n: 70, k: 90, bm: 32, bn: 32, bk: 32, loop: true},
		{name: "K loop, yield not the product, 45×33×70", m: 45, n: 33, k: 70, bm: 16, bn: 32, bk: 32, loop: true, notYield: true},
		{name: "a transposed, K loop 130×70×90", m: 130, n: 70, k: 90, bm: 32, bn: 32, bk: 32, loop: true, tA: true},
		{name: "K loop 64×64 blocks 150×100×70", m: 150, n: 100, k: 70, bm: 64, bn: 64, bk: 32, loop: true, loadAcc: true},
		{name: "b transposed, K loop 100×200×77", m: 100, n: 200, k: 77, bm: 64, bn: 64, bk: 16, loop: true, tB: true, loadAcc: true},
		{name: "both transposed, one block 50×40×27", m: 50, n: 40, k: 27, bm: 64, bn: 64, bk: 32, tA: true, tB: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := dotKernelOf(t, tile.F64, c.bm, c.bn, c.bk, c.loop, c.loadAcc, c.notYield, c.tA, c.tB)
			rng := tiletest.RNG(c.name)
			uni := func(n int) []float64 {
				x := make([]float64, n)
				for i := range x {
					x[i] = rng.Float64()*2 - 1
				}
				return x
			}
			a, bm, c0 := uni(c.m*c.k), uni(c.k*c.n), uni(c.m*c.n)
			grid := tile.Grid{(c.m + c.bm - 1) / c.bm, (c.n + c.bn - 1) / c.bn}
			run := func(launch func(args ...any) error) []float64 {
				out := make([]float64, c.m*c.n)
				for i := range out {
					out[i] = math.NaN()
				}
				if err := launch(a, bm, c0, out, c.m, c.n, c.k); err != nil {
					t.Fatal(err)
				}
				return out
			}
			want := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, grid, args...) })
			var prev []float64
			for _, isa := range isas(t) {
				nk := compileFor(t, isa, k)
				got := run(func(args ...any) error { return nk.Launch(grid, args...) })
				checkDotF64(t, isa, c.m, c.n, c.k, c.loadAcc, c.tA, c.tB, a, bm, c0, got, want)
				if prev != nil {
					for i := range got {
						if math.Float64bits(got[i]) != math.Float64bits(prev[i]) {
							t.Fatalf("c[%d] = %v with %s, %v with avx2", i, got[i], isa, prev[i])
						}
					}
				}
				prev = got
			}
		})
	}
}

// checkDotF64 checks f64 product got against the reference's want:
// within 2(K+1)·2⁻⁵³·(|c0| + Σ|a·b|) element by element.
func checkDotF64(t *testing.T, isa string, m, n, k int, loadAcc, tA, tB bool, a, b, c0, got, want []float64) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			abs := 0.0
			if loadAcc {
				abs = math.Abs(c0[i*n+j])
			}
			for q := 0; q < k; q++ {
				ai := i*k + q
				if tA {
					ai = q*m + i
				}
				bi := q*n + j
				if tB {
					bi = j*k + q
				}
				abs += math.Abs(a[ai] * b[bi])
			}
			g, w := got[i*n+j], want[i*n+j]
			if bound := 2 * float64(k+1) * 0x1p-53 * abs; !(math.Abs(g-w) <= bound) {
				t.Fatalf("%s: c[%d,%d] = %v natively, %v on the reference: apart by more than %g", isa, i, j, g, w, bound)
			}
		}
	}
}

// TestF64ScalarsNative: f64 scalars (a sum of a 1-D block, a scalar
// quotient, a scalar load under a mask with another value, comparisons
// and selects of scalars, exp and tanh of a scalar) read as splats and stored, natively: bit for bit the executor's (its row
// sum's order), within 1e-12 of the reference.
func TestF64ScalarsNative(t *testing.T) {
	requireJIT(t)
	const block = 256
	b := tile.NewBuilder("f64_scalars", nil)
	px, py, pm, n := b.Ptr("x", tile.F64), b.Ptr("y", tile.F64), b.Ptr("m", tile.F64), b.Param("n", tile.I32)
	offs := b.Add(b.Mul(b.ProgramID(0), block), b.Arange(0, block))
	mask := b.Lt(offs, n)
	x := b.Load(b.AddPtr(px, offs), mask, 0.0)
	mean := b.Div(b.Sum(x, 0, false), float64(block))
	first := b.Load(px, b.Gt(n, b.I32(1000)), 1.5) // x[0] where n > 1000, else 1.5
	scale := b.Where(b.Gt(n, b.I32(500)), first, b.Neg(first))
	scale = b.Where(b.Lt(mean, 0.1), scale, b.Mul(scale, 2.0)) // an f64 comparison of scalars
	scale = b.Mul(scale, b.Exp(b.Tanh(mean)))                  // scalar math
	b.Store(b.AddPtr(py, offs), b.Sub(b.Mul(x, scale), mean), mask)
	b.Store(b.AddPtr(pm, b.ProgramID(0)), mean, nil) // a scalar store
	k, ex := buildWithExecutor(t, b)
	for _, isa := range isas(t) {
		nk := compileFor(t, isa, k)
		testF64Scalars(t, isa, k, nk, ex)
	}
}

func testF64Scalars(t *testing.T, isa string, k *tile.Kernel, nk *native.Kernel, ex *cpu.Exec) {
	const block = 256
	for _, size := range []int{1000, 1001, 77} {
		rng := tiletest.RNG("f64 scalars")
		xs := make([]float64, size)
		for i := range xs {
			xs[i] = rng.Float64()*2 - 0.9
		}
		grid := tile.Grid{(size + block - 1) / block}
		run := func(launch func(args ...any) error) []float64 {
			y := make([]float64, size+grid[0]) // y, then the means
			for i := range y {
				y[i] = math.NaN()
			}
			if err := launch(xs, y[:size], y[size:], size); err != nil {
				t.Fatal(err)
			}
			return y
		}
		agreeF64(t, fmt.Sprintf("%s, n=%d", isa, size), k, nk, ex, grid, run)
	}
}

// agreeF64 runs a launch of k over grid natively, on the executor and on
// the reference (run makes the arguments, calls launch with them and
// returns the outputs): the machine code's outputs bit for bit the
// executor's, the executor's within 1e-12 of the reference's.
func agreeF64(t *testing.T, label string, k *tile.Kernel, nk *native.Kernel, ex *cpu.Exec, grid tile.Grid, run func(launch func(args ...any) error) []float64) {
	t.Helper()
	got := run(func(args ...any) error { return nk.Launch(grid, args...) })
	want := run(func(args ...any) error { return ex.Launch(grid, args...) })
	ref := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, grid, args...) })
	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			t.Fatalf("%s: y[%d] = %v natively, %v on the executor", label, i, got[i], want[i])
		}
		if math.Abs(want[i]-ref[i]) > 1e-12*(1+math.Abs(ref[i])) {
			t.Fatalf("%s: y[%d] = %v on the executor, %v on the reference", label, i, want[i], ref[i])
		}
	}
}

// TestF64ParamsNative: f64 scalar parameters run natively (they went to
// the executor until 2026-12-07: "scalar f64", a tenth of the random
// kernels): as vector operands, in scalar arithmetic and comparisons, and
// an integer given for one; bit for bit the executor's, within 1e-12 of the
// reference.
func TestF64ParamsNative(t *testing.T) {
	requireJIT(t)
	const block = 256
	b := tile.NewBuilder("f64_params", nil)
	px, py := b.Ptr("x", tile.F64), b.Ptr("y", tile.F64)
	alpha, beta, n := b.Param("alpha", tile.F64), b.Param("beta", tile.F64), b.Param("n", tile.I32)
	offs := b.Add(b.Mul(b.ProgramID(0), block), b.Arange(0, block))
	mask := b.Lt(offs, n)
	x := b.Load(b.AddPtr(px, offs), mask, 0.0)
	ab := b.Where(b.Gt(alpha, beta), b.Mul(alpha, beta), b.Sub(beta, alpha)) // scalar math and a comparison
	y := b.Add(b.Mul(x, alpha), beta)
	y = b.Where(b.Gt(x, alpha), y, b.Mul(x, ab))
	b.Store(b.AddPtr(py, offs), y, mask)
	k, ex := buildWithExecutor(t, b)
	for _, isa := range isas(t) {
		nk := compileFor(t, isa, k)
		for _, c := range []struct {
			alpha, beta any
			size        int
		}{{0.3, -1.25, 1000}, {-0.7, 2.5, 77}, {2, 0.5, 1001}} {
			rng := tiletest.RNG("f64 params")
			xs := make([]float64, c.size)
			for i := range xs {
				xs[i] = rng.Float64()*2 - 1
			}
			grid := tile.Grid{(c.size + block - 1) / block}
			run := func(launch func(args ...any) error) []float64 {
				y := make([]float64, c.size)
				for i := range y {
					y[i] = math.NaN()
				}
				if err := launch(xs, y, c.alpha, c.beta, c.size); err != nil {
					t.Fatal(err)
				}
				return y
			}
			agreeF64(t, fmt.Sprintf("%s, alpha %v, n=%d", isa, c.alpha, c.size), k, nk, ex, grid, run)
		}
	}
}

// TestF64OneAddressStoreNative: an f64 block stored with every lane of a
// row at one address (a value per row) stores the last active lane's
// value, the reference's last write: masked (rows past M, columns past
// N) and not.
func TestF64OneAddressStoreNative(t *testing.T) {
	requireJIT(t)
	const bm, bn = 16, 32
	for _, c := range []struct {
		name   string
		m, n   int
		masked bool
	}{{"masked", 37, 27, true}, {"unmasked", 32, 32, false}} {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("f64_one_address", nil)
			px, py := b.Ptr("x", tile.F64), b.Ptr("y", tile.F64)
			M, N := b.Param("M", tile.I32), b.Param("N", tile.I32)
			r := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm)), 1)
			col := b.ExpandDims(b.Arange(0, bn), 0)
			var mask *tile.Value
			if c.masked {
				mask = b.And(b.Lt(r, M), b.Lt(col, N))
			}
			var x *tile.Value
			if mask != nil {
				x = b.Load(b.AddPtr(px, b.Add(b.Mul(r, N), col)), mask, 0.0)
			} else {
				x = b.Load(b.AddPtr(px, b.Add(b.Mul(r, N), col)), nil, nil)
			}
			b.Store(b.AddPtr(py, b.Add(r, b.Mul(col, 0))), b.Mul(x, 3.0), mask)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			for _, isa := range isas(t) {
				nk := compileFor(t, isa, k)
				testF64OneAddress(t, isa, k, nk, c.name, c.m, c.n, bm)
			}
		})
	}
}

// testF64OneAddress runs one-address store kernel nk (m rows of n) and
// compares it with the reference bit for bit.
func testF64OneAddress(t *testing.T, isa string, k *tile.Kernel, nk *native.Kernel, name string, m, n, bm int) {
	rng := tiletest.RNG(name)
	xs := make([]float64, m*n)
	for i := range xs {
		xs[i] = rng.Float64()*2 - 1
	}
	grid := tile.Grid{(m + bm - 1) / bm}
	run := func(launch func(args ...any) error) []float64 {
		y := make([]float64, m)
		for i := range y {
			y[i] = math.NaN()
		}
		if err := launch(xs, y, m, n); err != nil {
			t.Fatal(err)
		}
		return y
	}
	got := run(func(args ...any) error { return nk.Launch(grid, args...) })
	want := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, grid, args...) })
	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			t.Fatalf("%s: y[%d] = %v natively, %v on the reference", isa, i, got[i], want[i])
		}
	}
}

// TestF64GatherNative: unmasked f64 loads whose lanes lie a constant
// stride of more than one element apart (y[r, c] = 2·x[c·s + r]) run
// natively, bit for bit the reference's, for rows of 2 to 64 lanes; a
// read past the buffer's end falls back (ErrFallback).
func TestF64GatherNative(t *testing.T) {
	requireJIT(t)
	for _, c := range []struct {
		name          string
		rows, cols, s int
		programs      int
		short         bool
	}{
		{"2 lanes", 16, 2, 16, 3, false},
		{"4 lanes", 8, 4, 9, 2, false},
		{"8 lanes", 4, 8, 5, 1, false},
		{"16 lanes", 32, 16, 40, 2, false},
		{"64 lanes", 16, 64, 16, 1, false},
		{"past the end", 16, 16, 16, 2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("gather64", nil)
			px, py := b.Ptr("x", tile.F64), b.Ptr("y", tile.F64)
			r := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), c.rows), b.Arange(0, c.rows)), 1)
			col := b.ExpandDims(b.Arange(0, c.cols), 0)
			v := b.Load(b.AddPtr(px, b.Add(b.Mul(col, c.s), r)), nil, nil)
			b.Store(b.AddPtr(py, b.Add(b.Mul(r, c.cols), col)), b.Mul(v, 2.0), nil)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			for _, isa := range isas(t) {
				nk := compileFor(t, isa, k)
				testF64Gather(t, isa, k, nk, c.rows, c.cols, c.s, c.programs, c.short, c.name)
			}
		})
	}
}

// testF64Gather runs gather kernel nk and compares it with the reference
// bit for bit (short: x one element short, the launch must fall back).
func testF64Gather(t *testing.T, isa string, k *tile.Kernel, nk *native.Kernel, rows, cols, s, programs int, short bool, name string) {
	xlen := (cols-1)*s + rows*programs
	if short {
		xlen--
	}
	rng := tiletest.RNG(name)
	x := make([]float64, xlen)
	for i := range x {
		x[i] = rng.Float64()*2 - 1
	}
	run := func(launch func(args ...any) error) ([]float64, error) {
		y := make([]float64, rows*programs*cols)
		for i := range y {
			y[i] = math.NaN()
		}
		return y, launch(x, y)
	}
	grid := tile.Grid{programs}
	got, err := run(func(args ...any) error { return nk.Launch(grid, args...) })
	if short {
		if !errors.Is(err, native.ErrFallback) {
			t.Fatalf("%s: a read past the end: got %v, want ErrFallback", isa, err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	want, err := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, grid, args...) })
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			t.Fatalf("%s: y[%d] = %v natively, %v on the reference", isa, i, got[i], want[i])
		}
	}
}

// buildWithExecutor builds b's kernel and its executor form (the machine
// code's reference in the f64 tests), failing the test where either fails.
func buildWithExecutor(t *testing.T, b *tile.Builder) (*tile.Kernel, *cpu.Exec) {
	t.Helper()
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	ex, err := cpu.NewExec(k, cpu.WithNative(false))
	if err != nil {
		t.Fatal(err)
	}
	return k, ex
}
