package native_test

import (
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestZmmRowsNative: the unmasked loops of phases that compute (math,
// comparisons and selects, i32 lanes, rsqrt, loads at one address, row and
// column reductions, reductions in the frame) and the loops of phases
// without masks run in zmm registers where the CPU has AVX-512, and give
// the ymm loops' results bit for bit: each kernel is compiled with
// native.SetAVX512 off and on (on twice: the zmm loops' two vectors in
// pairs, the default, and one after the other), the number of its phases
// computing in zmm checked (none off, some on; some loops in pairs over
// the cases), both run over the same seeded inputs
// (special values — NaN, ±Inf, ±0, subnormals — among them where the case
// says) with tails in rows and columns (rows past M and columns past N run
// the masked ymm loop, the others the zmm one; rows of one zmm vector, not
// unrolled, too), compared with each other bit for bit and
// with the reference interpreter: bit for bit where the ops are exact,
// else within the case's tolerance (f32 exp, tanh and log within 2 ulp;
// row sums in the executor's order, 2n·u·Σ|x| apart at most: the stated
// tolerances hold that for these inputs). Skipped without AVX-512 (the
// zmm loops are never emitted there).
func TestZmmRowsNative(t *testing.T) {
	requireAVX512(t, "the zmm loops are never emitted")
	const bm = 16
	pairs := 0 // zmm loops emitted in pairs, over the cases
	defer func() {
		if pairs == 0 && !t.Failed() {
			t.Error("no zmm loop was emitted in pairs")
		}
	}()
	type env struct {
		b    *tile.Builder
		r, c *tile.Value // [bm,1] and [1,bn] i32 lanes
		x    *tile.Value // the loaded block
		// the row's first element of x, at one address for the row's lanes
		rowFirst func() *tile.Value
	}
	for _, c := range []struct {
		name     string
		m, n, bn int
		specials bool    // NaN, ±Inf, ±0, subnormals among the inputs
		ties     bool    // NaNs of three payloads (none, one in 300 or one in 6, by row) and ±0 (half the rest) among the inputs
		noMask   bool    // loads and stores without masks (m, n whole blocks)
		lo, hi   float64 // the inputs' range
		rel, abs float64 // tolerance against the reference (0: bit for bit)
		// exact, where set, is every native result bit for bit (the
		// reference's max may be the other zero or another NaN)
		exact func(x []float32, m, n int) []float32
		body  func(e env) *tile.Value
	}{
		{name: "exp, one zmm vector a row", m: 37, n: 40, bn: 16, specials: true, lo: -110, hi: 95, rel: 2.4e-7, abs: 3e-45, body: func(e env) *tile.Value { return e.b.Exp(e.x) }},
		{name: "exp", m: 37, n: 100, bn: 32, specials: true, lo: -110, hi: 95, rel: 2.4e-7, abs: 3e-45, body: func(e env) *tile.Value { return e.b.Exp(e.x) }},
		{name: "tanh", m: 37, n: 100, bn: 32, specials: true, lo: -12, hi: 12, rel: 2.4e-7, body: func(e env) *tile.Value { return e.b.Tanh(e.x) }},
		{name: "log", m: 37, n: 100, bn: 32, specials: true, lo: -1, hi: 1e6, rel: 2.4e-7, abs: 1e-7, body: func(e env) *tile.Value { return e.b.Log(e.x) }},
		{name: "gelu (tanh form), 96-lane rows", m: 40, n: 150, bn: 96, lo: -6, hi: 6, rel: 1e-6, abs: 1e-7, body: func(e env) *tile.Value { return geluTanh(e.b, e.x) }},
		{name: "gelu without masks", m: 32, n: 256, bn: 128, noMask: true, lo: -6, hi: 6, rel: 1e-6, abs: 1e-7, body: func(e env) *tile.Value { return geluTanh(e.b, e.x) }},
		{name: "softmax without masks", m: 32, n: 64, bn: 64, noMask: true, lo: -8, hi: 8, rel: 2e-6, abs: 1e-9, body: func(e env) *tile.Value {
			b := e.b
			z := b.Exp(b.Sub(e.x, b.Max(e.x, 1, true)))
			return b.Div(z, b.Sum(z, 1, true))
		}},
		{name: "a value per row loaded at one address", m: 37, n: 100, bn: 32, specials: true, lo: -3, hi: 3, body: func(e env) *tile.Value {
			return e.b.Mul(e.x, e.rowFirst())
		}},
		{name: "arithmetic", m: 37, n: 100, bn: 32, specials: true, lo: -3, hi: 3, body: func(e env) *tile.Value {
			b, x := e.b, e.x
			y := b.Maximum(b.Minimum(b.Sub(b.Mul(x, x), b.Div(x, 3.0)), 2.5), b.Floor(x))
			return b.Sub(b.Add(b.Add(y, b.Ceil(x)), b.Sqrt(b.Abs(x))), b.Neg(x))
		}},
		{name: "rsqrt", m: 37, n: 100, bn: 32, specials: true, lo: -1, hi: 1e4, body: func(e env) *tile.Value {
			return e.b.Rsqrt(e.x)
		}},
		{name: "min and max with NaN", m: 37, n: 64, bn: 64, specials: true, lo: -2, hi: 2, body: func(e env) *tile.Value {
			b, x := e.b, e.x
			return b.Add(b.Maximum(x, 0.5), b.Minimum(-0.5, x))
		}},
		{name: "comparisons and selects", m: 37, n: 100, bn: 32, specials: true, lo: -2, hi: 2, body: func(e env) *tile.Value {
			b, x := e.b, e.x
			pos := b.And(b.Gt(x, 0.25), b.Ne(x, 1.0))
			neg := b.Or(b.Le(x, -1.0), b.Eq(x, 0.0))
			y := b.Where(pos, x, b.Where(neg, b.Neg(x), b.Mul(x, 2.0)))
			odd := b.Xor(b.Ge(x, 0.0), b.Not(b.Lt(x, 1.5)))
			return b.Add(y, b.Cast(odd, tile.F32))
		}},
		{name: "i32 lanes", m: 37, n: 100, bn: 32, lo: -2, hi: 2, body: func(e env) *tile.Value {
			b, x := e.b, e.x
			rc := b.Add(b.Mul(e.r, 3), e.c)                                   // [bm,bn] i32 lanes
			below := b.Where(b.Lt(e.c, b.Mul(e.r, 2)), x, b.F32(0))           // i32 comparison as a value
			return b.Add(b.Mul(b.Cast(rc, tile.F32), 0.001), b.Add(below, x)) // i32 → f32
		}},
		{name: "row sum", m: 37, n: 256, bn: 256, lo: -3, hi: 3, abs: 1e-4, body: func(e env) *tile.Value {
			return e.b.Sub(e.x, e.b.Sum(e.x, 1, true))
		}},
		{name: "row sum of 16: one zmm vector a row", m: 37, n: 16, bn: 16, lo: -3, hi: 3, abs: 2e-6, body: func(e env) *tile.Value {
			return e.b.Sub(e.x, e.b.Sum(e.x, 1, true))
		}},
		{name: "row max with NaN", m: 37, n: 64, bn: 64, specials: true, lo: -3, hi: 3, body: func(e env) *tile.Value {
			return e.b.Sub(e.x, e.b.Max(e.x, 1, true))
		}},
		// which NaN and which zero a row's max and min give (abs: ±0 may be
		// the reference's other zero; NaNs any NaN), ymm and zmm alike
		{name: "row max and min of NaNs with payloads and signed zeros", m: 37, n: 128, bn: 128, ties: true, lo: -3, hi: 0, abs: 1e-45, body: func(e env) *tile.Value {
			b := e.b
			return b.Where(b.Gt(e.x, -1.5), b.Max(e.x, 1, true), b.Min(e.x, 1, true))
		}, exact: func(x []float32, m, n int) []float32 {
			y := make([]float32, m*n)
			for i := range m {
				row := x[i*n : (i+1)*n]
				hi, lo := laneScan(row, false), laneScan(row, true)
				for j, v := range row {
					y[i*n+j] = lo
					if v > -1.5 {
						y[i*n+j] = hi
					}
				}
			}
			return y
		}},
		{name: "row min", m: 37, n: 128, bn: 128, lo: -3, hi: 3, body: func(e env) *tile.Value {
			return e.b.Sub(e.x, e.b.Min(e.x, 1, true))
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
		{name: "seven row reductions: two in the frame", m: 37, n: 64, bn: 64, lo: -3, hi: 3, abs: 1e-4, body: func(e env) *tile.Value {
			b, x := e.b, e.x
			y := b.Add(b.Sum(x, 1, true), b.Max(x, 1, true))
			y = b.Add(y, b.Min(x, 1, true))
			y = b.Add(y, b.Sum(b.Mul(x, x), 1, true))
			y = b.Add(y, b.Max(b.Neg(x), 1, true))
			y = b.Add(y, b.Sum(b.Abs(x), 1, true))
			y = b.Add(y, b.Min(b.Mul(x, 3.0), 1, true))
			return b.Sub(x, y)
		}},
		{name: "softmax", m: 37, n: 256, bn: 256, lo: -8, hi: 8, rel: 2e-6, abs: 1e-9, body: func(e env) *tile.Value {
			b := e.b
			z := b.Exp(b.Sub(e.x, b.Max(e.x, 1, true)))
			return b.Div(z, b.Sum(z, 1, true))
		}},
		{name: "layernorm", m: 37, n: 64, bn: 64, lo: -3, hi: 3, rel: 1e-5, abs: 1e-5, body: func(e env) *tile.Value {
			b := e.b
			d := b.Sub(e.x, b.Div(b.Sum(e.x, 1, true), 64.0))
			v := b.Div(b.Sum(b.Mul(d, d), 1, true), 64.0)
			return b.Mul(d, b.Rsqrt(b.Add(v, 1e-5)))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("zmm_rows", nil)
			px, py := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
			M, N := b.Param("M", tile.I32), b.Param("N", tile.I32)
			e := env{b: b}
			e.r = b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm)), 1)
			e.c = b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), c.bn), b.Arange(0, c.bn)), 0)
			off := b.Add(b.Mul(e.r, N), e.c)
			mask := b.And(b.Lt(e.r, M), b.Lt(e.c, N))
			if c.noMask {
				mask = nil
			}
			e.rowFirst = func() *tile.Value {
				return b.Load(b.AddPtr(px, b.Mul(e.r, N)), b.Lt(e.r, M), 0.0)
			}
			if mask != nil {
				e.x = b.Load(b.AddPtr(px, off), mask, 0.0)
			} else {
				e.x = b.Load(b.AddPtr(px, off), nil, nil)
			}
			b.Store(b.AddPtr(py, off), c.body(e), mask)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			rng := tiletest.RNG(c.name)
			x := tiletest.Uniform(rng, c.m*c.n, c.lo, c.hi)
			if c.specials {
				sp := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0,
					float32(math.Copysign(0, -1)), 1e-45, -1e-45, 1e-39, -3e-39, math.MaxFloat32, -math.MaxFloat32}
				for i := range x {
					if rng.IntN(9) == 0 {
						x[i] = sp[rng.IntN(len(sp))]
					}
				}
			}
			if c.ties {
				// rows without NaNs (the first of equal zeros), with a few
				// and with several a lane (the last NaN)
				nans := []uint32{0x7fc00001, 0xffc00002, 0x7fc12345}
				for i := range x {
					switch {
					case []bool{false, rng.IntN(300) == 0, rng.IntN(6) == 0}[i/c.n%3]:
						x[i] = math.Float32frombits(nans[rng.IntN(len(nans))])
					case rng.IntN(2) == 0:
						x[i] = float32(math.Copysign(0, float64(rng.IntN(2)*2-1)))
					}
				}
			}
			grid := tile.Grid{(c.m + bm - 1) / bm, (c.n + c.bn - 1) / c.bn}
			run := func(launch func(args ...any) error) []float32 {
				y := make([]float32, c.m*c.n)
				for i := range y {
					y[i] = float32(math.NaN())
				}
				if err := launch(x, y, c.m, c.n); err != nil {
					t.Fatal(err)
				}
				return y
			}
			want := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, grid, args...) })
			got := map[string][]float32{}
			// zmm loops with their two vectors in pairs (the default) and
			// one after the other
			for _, isa := range append(isas(t), "avx512 unpaired") {
				native.SetAVX512(isa != "avx2")
				was := native.SetZmmPairs(isa == "avx512")
				nk, err := native.Compile(k)
				native.SetZmmPairs(was)
				if err != nil {
					t.Fatalf("not compiled natively: %v\n%v", err, k)
				}
				defer nk.Free()
				if n := native.ZmmPhases(nk); (n > 0) != (isa != "avx2") {
					t.Fatalf("%s: %d phases compute in zmm registers", isa, n)
				}
				if n := native.PairLoops(nk); isa != "avx512" && n > 0 {
					t.Fatalf("%s: %d zmm loops in pairs", isa, n)
				}
				pairs += native.PairLoops(nk)
				got[isa] = run(func(args ...any) error { return nk.Launch(grid, args...) })
			}
			if c.exact != nil {
				exact := c.exact(x, c.m, c.n)
				for isa, y := range got {
					for i := range y {
						if math.Float32bits(y[i]) != math.Float32bits(exact[i]) {
							t.Fatalf("%s: y[%d] (row %d) = %v (%#x), want %v (%#x)", isa, i, i/c.n, y[i], math.Float32bits(y[i]), exact[i], math.Float32bits(exact[i]))
						}
					}
				}
			}
			for i := range want {
				y, z, u := got["avx2"][i], got["avx512"][i], got["avx512 unpaired"][i]
				if math.Float32bits(y) != math.Float32bits(z) || math.Float32bits(y) != math.Float32bits(u) {
					t.Fatalf("y[%d] (row %d, column %d; x = %v) = %v (%#x) in ymm, %v (%#x) in zmm, %v (%#x) in zmm unpaired",
						i, i/c.n, i%c.n, x[i], y, math.Float32bits(y), z, math.Float32bits(z), u, math.Float32bits(u))
				}
				w := want[i]
				switch {
				case w != w || z != z:
					if w == w || z == z {
						t.Fatalf("y[%d] (x = %v) = %v natively, %v on the reference", i, x[i], z, w)
					}
				case c.rel == 0 && c.abs == 0:
					if math.Float32bits(z) != math.Float32bits(w) {
						t.Fatalf("y[%d] (x = %v) = %v natively, %v on the reference", i, x[i], z, w)
					}
				case math.IsInf(float64(w), 0) || math.IsInf(float64(z), 0):
					if z != w {
						t.Fatalf("y[%d] (x = %v) = %v natively, %v on the reference", i, x[i], z, w)
					}
				default:
					if d := math.Abs(float64(z) - float64(w)); d > c.rel*math.Abs(float64(w))+c.abs {
						t.Fatalf("y[%d] (x = %v) = %v natively, %v on the reference: %g apart, over %g·|y| + %g",
							i, x[i], z, w, d, c.rel, c.abs)
					}
				}
			}
		})
	}
}

// laneScan is a row's max (min) as the native code defines it for rows
// of 16 lanes or more: lane l (of 16) scans the elements l, l+16, … in
// order, r = (p > r || p != p) ? p : r (< for min), and the lanes are
// combined so in order, lane 0 first.
func laneScan(row []float32, isMin bool) float32 {
	step := func(r, p float32) float32 {
		if p != p || !isMin && p > r || isMin && p < r {
			return p
		}
		return r
	}
	init := float32(math.Inf(-1))
	if isMin {
		init = float32(math.Inf(1))
	}
	var lanes [16]float32
	for l := range lanes {
		lanes[l] = init
	}
	for j, p := range row {
		lanes[j%16] = step(lanes[j%16], p)
	}
	r := lanes[0]
	for _, p := range lanes[1:] {
		r = step(r, p)
	}
	return r
}
