package tiletest

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
	"github.com/tilefuse/tilefuse/tile/kernels"
)

// ulp is a relative tolerance of n units of f32 precision.
func ulp(n float64) float64 { return n * 0x1p-23 }

// MathTol is the error bound each f32 math op must meet on every backend,
// against the correctly rounded result. The reference interpreter rounds the
// float64 function once (within 1 ulp); the CPU executor does the same or is
// within 1 ulp of it; the GPU's lowerings (package codegen) state how they
// meet these.
func MathTol(o tile.Op) Tol {
	switch o {
	case tile.OpNeg, tile.OpAbs, tile.OpFloor, tile.OpCeil, tile.OpSign, tile.OpSqrt:
		return Tol{Rel: ulp(1)}
	case tile.OpExp, tile.OpExp2, tile.OpRsqrt:
		return Tol{Rel: ulp(2)}
	case tile.OpLog, tile.OpLog2, tile.OpLog1p:
		return Tol{Abs: 0x1p-22, Rel: ulp(3)}
	case tile.OpExpm1, tile.OpSigmoid:
		return Tol{Abs: 1e-30, Rel: ulp(3)}
	case tile.OpTanh:
		return Tol{Rel: ulp(4)}
	case tile.OpErf:
		return Tol{Abs: 3e-7, Rel: ulp(1)}
	case tile.OpSin, tile.OpCos:
		return Tol{Abs: 5e-7, Rel: ulp(1)}
	}
	return Tol{Rel: ulp(1)}
}

// mathRef is the float64 function each unary op computes.
var mathRef = map[tile.Op]func(float64) float64{
	tile.OpNeg: func(x float64) float64 { return -x }, tile.OpAbs: math.Abs,
	tile.OpFloor: math.Floor, tile.OpCeil: math.Ceil, tile.OpSqrt: math.Sqrt,
	tile.OpSign: func(x float64) float64 {
		switch {
		case x > 0:
			return 1
		case x < 0:
			return -1
		}
		return x
	},
	// Go's amd64 Exp and Log are wrong near overflow and for subnormals, and
	// Log2 near 1: the reference interpreter's versions are right there
	tile.OpExp: interp.Exp64, tile.OpExp2: math.Exp2, tile.OpLog: interp.Log64, tile.OpLog2: interp.Log2_64,
	tile.OpLog1p: math.Log1p, tile.OpExpm1: math.Expm1, tile.OpRsqrt: func(x float64) float64 { return 1 / math.Sqrt(x) },
	tile.OpTanh: math.Tanh, tile.OpErf: math.Erf, tile.OpSin: math.Sin, tile.OpCos: math.Cos,
	tile.OpSigmoid: func(x float64) float64 { return 1 / (1 + interp.Exp64(-x)) },
}

// mathInputs draws inputs over each op's useful domain, with its edge cases.
func mathInputs(rng *rand.Rand, o tile.Op, n int) []float32 {
	logUniform := func(lo, hi float64) float64 {
		return math.Exp(math.Log(lo) + (math.Log(hi)-math.Log(lo))*rng.Float64())
	}
	uniform := func(lo, hi float64) float64 { return lo + (hi-lo)*rng.Float64() }
	inf := math.Inf(1)
	var special []float64
	draw := func() float64 { return uniform(-10, 10) }
	switch o {
	case tile.OpExp:
		draw = func() float64 { return uniform(-87, 88) }
		// past 88.73 e^x overflows (at 1e30 x·log₂e too), NaN stays NaN
		special = []float64{0, -inf, inf, 1e-8, -1e-8, 88.7, -103, 88.73, 89, 100, 1e30, -1e30, math.NaN()}
	case tile.OpExp2:
		draw = func() float64 { return uniform(-125, 127) }
		special = []float64{0, -inf, inf, 0.5}
	case tile.OpLog, tile.OpLog2, tile.OpSqrt, tile.OpRsqrt:
		draw = func() float64 {
			if rng.IntN(4) == 0 {
				return uniform(0.7, 1.6) // near 1, where log loses relative precision
			}
			return logUniform(1e-30, 1e30)
		}
		special = []float64{1, 0, inf, 2, 0.5}
	case tile.OpLog1p:
		draw = func() float64 {
			if rng.IntN(3) == 0 {
				return uniform(-0.3, 0.3)
			}
			return logUniform(1e-6, 1e6) - 0.9
		}
		special = []float64{0, -1, 1e-7, -1e-7, inf}
	case tile.OpExpm1:
		draw = func() float64 {
			if rng.IntN(3) == 0 {
				return uniform(-0.6, 0.6)
			}
			return uniform(-20, 20)
		}
		special = []float64{0, 1e-7, -1e-7, -inf, inf}
	case tile.OpTanh:
		draw = func() float64 {
			if rng.IntN(3) == 0 {
				return uniform(-0.7, 0.7)
			}
			return uniform(-12, 12)
		}
		special = []float64{0, 1e-7, -inf, inf}
	case tile.OpErf:
		draw = func() float64 { return uniform(-5, 5) }
		special = []float64{0, 0.5, -0.5, 1e-6, inf, -inf}
	case tile.OpSigmoid:
		draw = func() float64 { return uniform(-60, 60) }
		special = []float64{0, inf, -inf}
	case tile.OpSin, tile.OpCos:
		draw = func() float64 { return uniform(-100, 100) }
		special = []float64{0, math.Pi, -math.Pi / 2}
	case tile.OpFloor, tile.OpCeil:
		draw = func() float64 { return uniform(-1000, 1000) }
		special = []float64{0, -0.5, 0.5, 2, -2}
	}
	x := make([]float32, n)
	for i := range x {
		if i < len(special) {
			x[i] = float32(special[i])
		} else {
			x[i] = float32(draw())
		}
	}
	return x
}

// MathOps are the f32 unary ops of the math conformance cases.
var MathOps = []tile.Op{tile.OpNeg, tile.OpAbs, tile.OpSign, tile.OpFloor, tile.OpCeil, tile.OpSqrt, tile.OpRsqrt,
	tile.OpExp, tile.OpExp2, tile.OpLog, tile.OpLog2, tile.OpLog1p, tile.OpExpm1, tile.OpTanh, tile.OpErf,
	tile.OpSigmoid, tile.OpSin, tile.OpCos}

func mathCase(o tile.Op) Case {
	const n, block = 5000, 1024
	tol := MathTol(o)
	return Case{
		Name:   "math/" + o.String(),
		Kernel: spec(kernels.Unary(o), tile.Meta{"BLOCK": block}),
		Tol:    Tol{Abs: tol.Abs, Rel: tol.Rel + ulp(1)},
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			x := mathInputs(rng, o, n)
			y := Output(n)
			return tile.Grid{tile.CDiv(n, block)}, []any{x, y, n}, func() error {
				want := make([]float64, n)
				for i, v := range x {
					// the reference rounded to f32 is what the tolerance is measured from
					want[i] = float64(float32(mathRef[o](float64(v))))
				}
				return Close("y", y, want, tol)
			}
		},
	}
}

func softmax2D(rows, n, bm, bn int) Case {
	return Case{
		Name:   fmt.Sprintf("softmax_2d/%dx%d/BM=%d/BN=%d", rows, n, bm, bn),
		Kernel: spec(kernels.Softmax2D, tile.Meta{"BM": bm, "BN": bn}),
		Tol:    TolRow,
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			x := Uniform(rng, rows*n, -5, 5)
			for j := 0; j < n; j++ { // one row of -inf
				x[2*n+j] = float32(math.Inf(-1))
			}
			y := Output(rows * n)
			return tile.Grid{tile.CDiv(rows, bm)}, []any{x, y, rows, n, n}, func() error {
				return Close("y", y, SoftmaxRef(x, rows, n), TolRow)
			}
		},
	}
}

func transpose(m, n, bm, bn int) Case {
	return Case{
		Name:   fmt.Sprintf("transpose/%dx%d/BM=%d/BN=%d", m, n, bm, bn),
		Kernel: spec(kernels.Transpose, tile.Meta{"BM": bm, "BN": bn}),
		Tol:    Tol{},
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			x := Uniform(rng, m*n, -1, 1)
			y := Output(m * n)
			return tile.Grid{tile.CDiv(m, bm), tile.CDiv(n, bn)}, []any{x, y, m, n}, func() error {
				want := make([]float64, m*n)
				for i := 0; i < m; i++ {
					for j := 0; j < n; j++ {
						want[j*m+i] = float64(x[i*n+j])
					}
				}
				return Close("y", y, want, Tol{})
			}
		},
	}
}

func sumSquaresF64(rows, n, block int) Case {
	return Case{
		Name:   fmt.Sprintf("sum_squares_f64/%dx%d/BLOCK=%d", rows, n, block),
		Kernel: spec(kernels.SumSquaresF64, tile.Meta{"BLOCK": block}),
		Tol:    Tol{Rel: 1e-12}, // sums in another order
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			x := make([]float64, rows*n)
			for i := range x {
				x[i] = rng.Float64()*2 - 1
			}
			out := make([]float64, rows+Pad)
			for i := range out {
				out[i] = float64(Poison)
			}
			return tile.Grid{rows}, []any{x, out, n}, func() error {
				for r := 0; r < rows; r++ {
					want := 0.0
					for _, v := range x[r*n : r*n+n] {
						want += v * v
					}
					if math.Abs(out[r]-want) > 1e-12*want {
						return fmt.Errorf("out[%d] = %v, want %v", r, out[r], want)
					}
				}
				for i := rows; i < len(out); i++ {
					if out[i] != float64(Poison) {
						return fmt.Errorf("padding element %d was written", i)
					}
				}
				return nil
			}
		},
	}
}

func histogram(n, bins, block int) Case {
	return Case{
		Name:   fmt.Sprintf("histogram/n=%d/bins=%d", n, bins),
		Kernel: spec(kernels.Histogram, tile.Meta{"BLOCK": block}),
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			x := make([]int32, n)
			for i := range x {
				x[i] = int32(rng.IntN(2001) - 1000)
			}
			counts := make([]int32, bins+Pad)
			return tile.Grid{tile.CDiv(n, block)}, []any{x, counts, n, bins}, func() error {
				want := make([]int32, bins+Pad)
				for _, v := range x {
					want[((v%int32(bins))+int32(bins))%int32(bins)]++
				}
				for i := range want {
					if counts[i] != want[i] {
						return fmt.Errorf("counts[%d] = %d, want %d", i, counts[i], want[i])
					}
				}
				return nil
			}
		},
	}
}

// MathOps64 are the f64 unary ops with GPU lowerings.
var MathOps64 = []tile.Op{tile.OpNeg, tile.OpAbs, tile.OpSign, tile.OpFloor, tile.OpCeil, tile.OpSqrt, tile.OpRsqrt,
	tile.OpExp, tile.OpExp2, tile.OpLog, tile.OpLog2, tile.OpLog1p, tile.OpExpm1, tile.OpTanh, tile.OpSigmoid,
	tile.OpErf, tile.OpSin, tile.OpCos}

// MathTol64 is the error bound of each f64 math op, relative in units of
// 2⁻⁵² (f64 ulps at 1).
func MathTol64(o tile.Op) Tol {
	u := func(n float64) float64 { return n * 0x1p-52 }
	switch o {
	case tile.OpNeg, tile.OpAbs, tile.OpFloor, tile.OpCeil, tile.OpSign, tile.OpSqrt:
		return Tol{}
	case tile.OpRsqrt, tile.OpExp, tile.OpLog:
		return Tol{Rel: u(2)}
	case tile.OpExp2:
		return Tol{Rel: u(2) + 200*0x1p-53} // x·ln2 rounds: |x| ≤ 200 here
	case tile.OpLog2, tile.OpSigmoid:
		return Tol{Rel: u(3)}
	case tile.OpExpm1, tile.OpLog1p:
		return Tol{Rel: u(5)}
	case tile.OpTanh:
		return Tol{Rel: u(6)}
	case tile.OpErf:
		return Tol{Abs: 1e-300, Rel: u(3)}
	case tile.OpSin, tile.OpCos: // |x| ≤ 100: the reduction's error, relative to the result near a zero
		return Tol{Abs: u(4) * 100, Rel: u(3)}
	}
	return Tol{Rel: u(1)}
}

// binaryCase checks pow or rem on f32 or f64 against interp.Pow64 (Go's math.Pow with a logarithm right for subnormals) and math.Mod.
func binaryCase(o tile.Op, d tile.DType) Case {
	const n, block = 3000, 512
	var tol Tol
	switch {
	case o == tile.OpRem:
		tol = Tol{} // exact
	case d == tile.F32: // 2⁻²¹·(1+|y·log₂x|) with |y·log₂x| ≤ 20 here
		tol = Tol{Abs: 1e-37, Rel: 21 * 0x1p-21}
	default: // (|y·ln x| + 4)·2⁻⁵³ with |y·ln x| ≤ 14 here
		tol = Tol{Abs: 1e-300, Rel: 18 * 0x1p-53}
	}
	ref := interp.Pow64
	if o == tile.OpRem {
		ref = math.Mod
	}
	return Case{
		Name:   fmt.Sprintf("math_binary/%v/%v", o, d),
		Kernel: spec(kernels.BinaryOf(o, d), tile.Meta{"BLOCK": block}),
		Tol:    Tol{Abs: 2 * tol.Abs, Rel: 2*tol.Rel + 0x1p-23},
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			xs, ys := make([]float64, n), make([]float64, n)
			for i := range xs {
				switch {
				case o == tile.OpRem:
					xs[i], ys[i] = (rng.Float64()-0.5)*2e3, (rng.Float64()-0.5)*20
					if i%7 == 0 {
						xs[i] = (rng.Float64() - 0.5) * 1e7 // large quotients
					}
				case i%3 == 0: // negative bases with integer exponents
					xs[i], ys[i] = -(0.5 + 3*rng.Float64()), float64(rng.IntN(11)-5)
				default:
					xs[i], ys[i] = 0.05+10*rng.Float64(), (rng.Float64()-0.5)*8
				}
			}
			special := [][2]float64{{0, 2}, {0, -1}, {1, 1e9}, {2, 0}, {math.NaN(), 0}, {2, 10}, {-2, 3}, {7, 0.5}}
			if o == tile.OpRem {
				special = [][2]float64{{5, 3}, {-5, 3}, {5, -3}, {0, 1}, {1, 0}, {math.Inf(1), 2}, {3, math.Inf(1)}, {1e15, 0.3}}
			}
			for i, s := range special {
				xs[i], ys[i] = s[0], s[1]
			}
			if d == tile.F32 {
				x32, y32, z32 := make([]float32, n), make([]float32, n), Output(n)
				for i := range xs {
					x32[i], y32[i] = float32(xs[i]), float32(ys[i])
				}
				return tile.Grid{tile.CDiv(n, block)}, []any{x32, y32, z32, n}, func() error {
					want := make([]float64, n)
					for i := range want {
						want[i] = float64(float32(ref(float64(x32[i]), float64(y32[i]))))
					}
					return Close("z", z32, want, tol)
				}
			}
			z := make([]float64, n+Pad)
			for i := range z {
				z[i] = float64(Poison)
			}
			return tile.Grid{tile.CDiv(n, block)}, []any{xs, ys, z, n}, func() error {
				want := make([]float64, n)
				for i := range want {
					want[i] = ref(xs[i], ys[i])
				}
				return Close64("z", z, want, tol)
			}
		},
	}
}

func mathCase64(o tile.Op) Case {
	const n, block = 4000, 512
	tol := MathTol64(o)
	return Case{
		Name:   "math_f64/" + o.String(),
		Kernel: spec(kernels.UnaryOf(o, tile.F64), tile.Meta{"BLOCK": block}),
		Tol:    Tol{Abs: tol.Abs, Rel: 2*tol.Rel + 0x1p-52},
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			x32 := mathInputs(rng, o, n)
			x := make([]float64, n)
			for i, v := range x32 {
				x[i] = float64(v) * (1 + (rng.Float64()-0.5)*1e-7) // not just f32 values
			}
			switch o {
			case tile.OpExp:
				copy(x, []float64{709.7, -745, -708.5, 1e-300, 0, -746, 710, -1e9, 1e9, -3000, 3000, -1e300})
			case tile.OpExpm1, tile.OpSigmoid, tile.OpTanh: // built on e^x: far out of its range
				copy(x, []float64{-1e9, 1e9, -3000, 3000, -800, 800})
			}
			if o == tile.OpLog || o == tile.OpLog1p {
				copy(x, []float64{5e-324, 1e-310, math.MaxFloat64, 1 + 1e-15})
			}
			y := make([]float64, n+Pad)
			for i := range y {
				y[i] = float64(Poison)
			}
			return tile.Grid{tile.CDiv(n, block)}, []any{x, y, n}, func() error {
				want := make([]float64, n)
				for i, v := range x {
					want[i] = mathRef[o](v)
				}
				return Close64("y", y, want, tol)
			}
		},
	}
}

// Close64 is Close for float64 outputs.
func Close64(what string, got, want []float64, tol Tol) error {
	for i, w := range want {
		g := got[i]
		ok := g == w || math.IsNaN(g) && math.IsNaN(w) || !math.IsInf(w, 0) && math.Abs(g-w) <= tol.Abs+tol.Rel*math.Abs(w)
		if !ok {
			return fmt.Errorf("%s[%d] = %v, want %v (tolerance %+v)", what, i, g, w, tol)
		}
	}
	for i := len(want); i < len(got); i++ {
		if got[i] != float64(Poison) {
			return fmt.Errorf("%s: padding element %d was written", what, i)
		}
	}
	return nil
}

func softmaxPersistent(rows, n, block, programs int) Case {
	return Case{
		Name:   fmt.Sprintf("softmax_persistent/%dx%d/BLOCK=%d/programs=%d", rows, n, block, programs),
		Kernel: spec(kernels.SoftmaxPersistent, tile.Meta{"BLOCK": block}),
		Tol:    TolRow,
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			x := Uniform(rng, rows*n, -8, 8)
			for j := 0; j < n && rows > 1; j++ {
				x[n+j] = float32(math.Inf(-1))
			}
			y := Output(rows * n)
			return tile.Grid{programs}, []any{x, y, rows, n, n}, func() error {
				return Close("y", y, SoftmaxRef(x, rows, n), TolRow)
			}
		},
	}
}

func layerNormPersistent(rows, n, block, programs int) Case {
	c := layerNorm(rows, n, block, 1)
	inner := c.Setup
	c.Name = fmt.Sprintf("layer_norm_persistent/%dx%d/BLOCK=%d/programs=%d", rows, n, block, programs)
	c.Kernel = spec(kernels.LayerNormPersistent, tile.Meta{"BLOCK": block})
	c.Setup = func(rng *rand.Rand) (tile.Grid, []any, func() error) {
		_, args, check := inner(rng)
		// x, y, w, b, mean, rstd, n, row_stride, eps → with R before n
		args = append(args[:6], append([]any{rows}, args[6:]...)...)
		return tile.Grid{programs}, args, check
	}
	return c
}

func layerNorm2D(rows, n, bm, bn int, stream bool) Case {
	c := layerNorm(rows, n, bn, 1)
	inner := c.Setup
	meta := tile.Meta{"BM": bm, "BN": bn}
	if stream {
		meta["STREAM"] = 1
	}
	c.Name = fmt.Sprintf("layer_norm_2d/%dx%d/BM=%d/BN=%d/stream=%v", rows, n, bm, bn, stream)
	c.Kernel = spec(kernels.LayerNorm2D, meta)
	c.Setup = func(rng *rand.Rand) (tile.Grid, []any, func() error) {
		_, args, check := inner(rng)
		args = append(args[:6], append([]any{rows}, args[6:]...)...)
		return tile.Grid{tile.CDiv(rows, bm)}, args, check
	}
	return c
}

func addTransposed(n, bs int) Case {
	return Case{
		Name:   fmt.Sprintf("add_transposed/%dx%d/B=%d", n, n, bs),
		Kernel: spec(kernels.AddTransposed, tile.Meta{"B": bs}),
		Tol:    TolElementwise,
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			x, y := Uniform(rng, n*n, -1, 1), Uniform(rng, n*n, -1, 1)
			z := Output(n * n)
			return tile.Grid{tile.CDiv(n, bs), tile.CDiv(n, bs)}, []any{x, y, z, n}, func() error {
				want := make([]float64, n*n)
				for i := 0; i < n; i++ {
					for j := 0; j < n; j++ {
						want[i*n+j] = float64(x[i*n+j]) + float64(y[j*n+i])
					}
				}
				return Close("z", z, want, TolElementwise)
			}
		},
	}
}

func pairSums(n, block int) Case {
	return Case{
		Name:   fmt.Sprintf("pair_sums/n=%d/BLOCK=%d", n, block),
		Kernel: spec(kernels.PairSums, tile.Meta{"BLOCK": block}),
		Tol:    TolElementwise,
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			x := Uniform(rng, n, -1, 1)
			out := Output(n / 2)
			return tile.Grid{tile.CDiv(n, block)}, []any{x, out, n}, func() error {
				want := make([]float64, n/2)
				for k := range want {
					want[k] = float64(x[2*k]) + float64(x[2*k+1])
				}
				return Close("out", out, want, TolElementwise)
			}
		},
	}
}

// embedding is out[p, :] = 2·table[idx[p], :] over rows of d (a block of
// the next power of two, a tail masked): an index loaded once a program
// and used in the row's addresses, as an embedding's lookup. Indices
// cover the table's first and last rows.
func embedding(rows, d, progs int) Case {
	block := 1
	for block < d {
		block *= 2
	}
	return Case{
		Name: fmt.Sprintf("embedding/rows=%d/d=%d", rows, d),
		Kernel: func() (*tile.Kernel, error) {
			b := tile.NewBuilder("embedding", nil)
			pt, pi, po := b.Ptr("table", tile.F32), b.Ptr("idx", tile.I32), b.Ptr("out", tile.F32)
			p := b.ProgramID(0)
			row := b.Load(b.AddPtr(pi, p), nil, nil)
			c := b.Arange(0, block)
			m := b.Lt(c, d)
			v := b.Load(b.AddPtr(pt, b.Add(b.Mul(row, int32(d)), c)), m, nil)
			b.Store(b.AddPtr(po, b.Add(b.Mul(p, int32(d)), c)), b.Mul(v, 2.0), m)
			return b.Build()
		},
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			table := Uniform(rng, rows*d, -1, 1)
			idx := make([]int32, progs)
			for i := range idx {
				idx[i] = int32(rng.IntN(rows))
			}
			idx[0], idx[progs-1] = 0, int32(rows-1)
			out := Output(progs * d)
			return tile.Grid{progs}, []any{table, idx, out}, func() error {
				want := make([]float64, progs*d)
				for p := range progs {
					for j := range d {
						want[p*d+j] = 2 * float64(table[int(idx[p])*d+j])
					}
				}
				return Close("out", out, want, Tol{})
			}
		},
	}
}

// pickLabels is loss[i] = −logp[i·classes + label[i]] for i < n, BLOCK
// rows a program: a gather at offsets computed from loaded labels (a
// cross-entropy's pick of its label's column).
func pickLabels(n, classes, block int) Case {
	return Case{
		Name: fmt.Sprintf("pick_labels/n=%d/classes=%d", n, classes),
		Kernel: func() (*tile.Kernel, error) {
			b := tile.NewBuilder("pick_labels", tile.Meta{"BLOCK": block})
			pl, plab, po, pn := b.Ptr("logp", tile.F32), b.Ptr("labels", tile.I32), b.Ptr("loss", tile.F32), b.Param("n", tile.I32)
			offs := b.Add(b.Mul(b.ProgramID(0), int32(block)), b.Arange(0, block))
			m := b.Lt(offs, pn)
			lab := b.Load(b.AddPtr(plab, offs), m, int32(0))
			v := b.Load(b.AddPtr(pl, b.Add(b.Mul(offs, int32(classes)), lab)), m, nil)
			b.Store(b.AddPtr(po, offs), b.Neg(v), m)
			return b.Build()
		},
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			logp := Uniform(rng, n*classes, -5, 0)
			labels := make([]int32, n)
			for i := range labels {
				labels[i] = int32(rng.IntN(classes))
			}
			loss := Output(n)
			return tile.Grid{tile.CDiv(n, block)}, []any{logp, labels, loss, n}, func() error {
				want := make([]float64, n)
				for i := range want {
					want[i] = -float64(logp[i*classes+int(labels[i])])
				}
				return Close("loss", loss, want, Tol{})
			}
		},
	}
}

// scatterAdd is out[idx[i]] += x[i] for i < n with f32 atomic adds at
// loaded indices (repeats among them), the values small integers so that
// every order of the adds gives the same sums.
func scatterAdd(n, m, block int) Case {
	return Case{
		Name: fmt.Sprintf("scatter_add/n=%d/m=%d", n, m),
		Kernel: func() (*tile.Kernel, error) {
			b := tile.NewBuilder("scatter_add", tile.Meta{"BLOCK": block})
			px, pi, po, pn := b.Ptr("x", tile.F32), b.Ptr("idx", tile.I32), b.Ptr("out", tile.F32), b.Param("n", tile.I32)
			offs := b.Add(b.Mul(b.ProgramID(0), int32(block)), b.Arange(0, block))
			mask := b.Lt(offs, pn)
			j := b.Load(b.AddPtr(pi, offs), mask, int32(0))
			b.AtomicAdd(b.AddPtr(po, j), b.Load(b.AddPtr(px, offs), mask, nil), mask)
			return b.Build()
		},
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			x := make([]float32, n)
			idx := make([]int32, n)
			for i := range x {
				x[i], idx[i] = float32(rng.IntN(21)-10), int32(rng.IntN(m))
			}
			out := Output(m)
			for i := range m {
				out[i] = 0
			}
			return tile.Grid{tile.CDiv(n, block)}, []any{x, idx, out, n}, func() error {
				want := make([]float64, m)
				for i := range x {
					want[idx[i]] += float64(x[i])
				}
				return Close("out", out, want, Tol{})
			}
		},
	}
}

// argmaxRows is out[r] = the least column c < cols with x[r, c] the row's
// maximum, BM rows of BN columns a program (a tail of rows and of
// columns): an f32 max along the rows, then an i32 min of the columns
// that hold it. The values are small integers, so rows have ties.
func argmaxRows(rows, cols, bm, bn int) Case {
	return Case{
		Name: fmt.Sprintf("argmax_rows/%dx%d/BLOCK=%dx%d", rows, cols, bm, bn),
		Kernel: func() (*tile.Kernel, error) {
			b := tile.NewBuilder("argmax_rows", tile.Meta{"BLOCK_M": bm, "BLOCK_N": bn})
			px, po := b.Ptr("x", tile.F32), b.Ptr("out", tile.I32)
			r := b.Add(b.Mul(b.ProgramID(0), int32(bm)), b.Arange(0, bm))
			rr, cc := b.ExpandDims(r, 1), b.ExpandDims(b.Arange(0, bn), 0)
			m := b.And(b.Lt(rr, int32(rows)), b.Lt(cc, int32(cols)))
			v := b.Load(b.AddPtr(px, b.Add(b.Mul(rr, int32(cols)), cc)), m, math.Inf(-1))
			mx := b.BroadcastTo(b.Reduce(tile.OpReduceMax, v, 1, true), tile.Shp(bm, bn))
			at := b.Where(b.And(m, b.Eq(v, mx)), b.BroadcastTo(cc, tile.Shp(bm, bn)), int32(math.MaxInt32))
			b.Store(b.AddPtr(po, r), b.Reduce(tile.OpReduceMin, at, 1), b.Lt(r, int32(rows)))
			return b.Build()
		},
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			x := make([]float32, rows*cols)
			for i := range x {
				x[i] = float32(rng.IntN(7) - 3)
			}
			out := make([]int32, rows+Pad)
			for i := range out {
				out[i] = -7
			}
			return tile.Grid{tile.CDiv(rows, bm)}, []any{x, out}, func() error {
				for r := range rows {
					best := 0
					for c := 1; c < cols; c++ {
						if x[r*cols+c] > x[r*cols+best] {
							best = c
						}
					}
					if out[r] != int32(best) {
						return fmt.Errorf("out[%d] = %d, want %d", r, out[r], best)
					}
				}
				for i := rows; i < len(out); i++ {
					if out[i] != -7 {
						return fmt.Errorf("padding element %d was written", i)
					}
				}
				return nil
			}
		},
	}
}

// groupSums is out[b, d] = Σ_g x[b, g, d] and out2[b, d] = max_g x[b, g, d]
// for x of batch×groups×d, BB batches a program (a tail of batches): a
// rank-3 block reduced along its middle axis.
func groupSums(batch, groups, d, bb int) Case {
	return Case{
		Name: fmt.Sprintf("group_sums/%dx%dx%d/BB=%d", batch, groups, d, bb),
		Tol:  Tol{Abs: 1e-5, Rel: 1e-5},
		Kernel: func() (*tile.Kernel, error) {
			b := tile.NewBuilder("group_sums", tile.Meta{"BB": bb})
			px, po, pm := b.Ptr("x", tile.F32), b.Ptr("sum", tile.F32), b.Ptr("max", tile.F32)
			bi := b.Add(b.Mul(b.ProgramID(0), int32(bb)), b.Arange(0, bb))
			b3 := b.BroadcastTo(b.ExpandDims(b.ExpandDims(bi, 1), 2), tile.Shp(bb, groups, d))
			g3 := b.BroadcastTo(b.ExpandDims(b.ExpandDims(b.Arange(0, groups), 0), 2), tile.Shp(bb, groups, d))
			d3 := b.BroadcastTo(b.ExpandDims(b.ExpandDims(b.Arange(0, d), 0), 0), tile.Shp(bb, groups, d))
			m3 := b.Lt(b3, int32(batch))
			v := b.Load(b.AddPtr(px, b.Add(b.Mul(b.Add(b.Mul(b3, int32(groups)), g3), int32(d)), d3)), m3, nil)
			bo := b.BroadcastTo(b.ExpandDims(bi, 1), tile.Shp(bb, d))
			do := b.BroadcastTo(b.ExpandDims(b.Arange(0, d), 0), tile.Shp(bb, d))
			off, m2 := b.Add(b.Mul(bo, int32(d)), do), b.Lt(bo, int32(batch))
			b.Store(b.AddPtr(po, off), b.Reduce(tile.OpReduceSum, v, 1), m2)
			b.Store(b.AddPtr(pm, off), b.Reduce(tile.OpReduceMax, v, 1), m2)
			return b.Build()
		},
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			x := Uniform(rng, batch*groups*d, -1, 1)
			sum, mx := Output(batch*d), Output(batch*d)
			return tile.Grid{tile.CDiv(batch, bb)}, []any{x, sum, mx}, func() error {
				ws, wm := make([]float64, batch*d), make([]float64, batch*d)
				for bi := range batch {
					for j := range d {
						wm[bi*d+j] = math.Inf(-1)
						for g := range groups {
							v := float64(x[(bi*groups+g)*d+j])
							ws[bi*d+j] += v
							wm[bi*d+j] = math.Max(wm[bi*d+j], v)
						}
					}
				}
				if err := Close("sum", sum, ws, Tol{Abs: 1e-5, Rel: 1e-5}); err != nil {
					return err
				}
				return Close("max", mx, wm, Tol{})
			}
		},
	}
}

// sumLoopF64 is out[p] = 0.25 + Σ x[p·n : p·n + n] in float64, a program
// a row, its loop over blocks of BLOCK carrying the sum as an f64 scalar
// (and the block count, cast to f64, as another).
func sumLoopF64(rows, n, block int) Case {
	return Case{
		Name: fmt.Sprintf("sum_loop_f64/%dx%d/BLOCK=%d", rows, n, block),
		Tol:  Tol{Abs: 1e-12, Rel: 1e-12}, // sums in another order
		Kernel: func() (*tile.Kernel, error) {
			b := tile.NewBuilder("sum_loop_f64", tile.Meta{"BLOCK": block})
			px, po := b.Ptr("x", tile.F64), b.Ptr("out", tile.F64)
			p := b.ProgramID(0)
			res := b.For(0, int32(tile.CDiv(n, block)), 1, []*tile.Value{b.F64(0.25), b.F64(0)}, func(iv *tile.Value, c []*tile.Value) []*tile.Value {
				offs := b.Add(b.Mul(iv, int32(block)), b.Arange(0, block))
				v := b.Load(b.AddPtr(px, b.Add(b.Mul(p, int32(n)), offs)), b.Lt(offs, int32(n)), nil)
				return []*tile.Value{b.Add(c[0], b.Reduce(tile.OpReduceSum, v, 0)), b.Add(c[1], b.Cast(b.Add(iv, int32(1)), tile.F64))}
			})
			b.Store(b.AddPtr(po, b.Mul(p, int32(2))), res[0], nil)
			b.Store(b.AddPtr(po, b.Add(b.Mul(p, int32(2)), int32(1))), res[1], nil)
			return b.Build()
		},
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			x := make([]float64, rows*n)
			for i := range x {
				x[i] = rng.Float64()*2 - 1
			}
			out := make([]float64, 2*rows+Pad)
			for i := range out {
				out[i] = float64(Poison)
			}
			return tile.Grid{rows}, []any{x, out}, func() error {
				blocks := tile.CDiv(n, block)
				for r := range rows {
					want := 0.25
					for _, v := range x[r*n : r*n+n] {
						want += v
					}
					if math.Abs(out[2*r]-want) > 1e-13*float64(n) {
						return fmt.Errorf("out[%d] = %v, want %v", 2*r, out[2*r], want)
					}
					if wc := float64(blocks * (blocks + 1) / 2); out[2*r+1] != wc {
						return fmt.Errorf("out[%d] = %v, want %v", 2*r+1, out[2*r+1], wc)
					}
				}
				for i := 2 * rows; i < len(out); i++ {
					if out[i] != float64(Poison) {
						return fmt.Errorf("padding element %d was written", i)
					}
				}
				return nil
			}
		},
	}
}

// persistentMatmul is a persistent product (Triton's persistent matmul
// tutorial's loop nest): each of programs programs loops over the output's
// tiles (every programs-th, from its id), a K loop of products nested in
// that loop, the tile's row and column from the tile's number by a
// division and a remainder, the tile stored after its K loop under the
// output's masks: loops nested in loops, on every backend.
func persistentMatmul(m, n, k, bm, bn, bk, programs int) Case {
	tilesN := tile.CDiv(n, bn)
	tiles := tile.CDiv(m, bm) * tilesN
	return Case{
		Name: fmt.Sprintf("persistent_matmul/%dx%dx%d/BLOCK=%dx%dx%d/programs=%d", m, n, k, bm, bn, bk, programs),
		// float64 reference; f32 sums of k products of numbers in [−1, 1]
		Tol: Tol{Abs: 1e-5 * float64(k), Rel: 1e-5},
		Kernel: func() (*tile.Kernel, error) {
			b := tile.NewBuilder("persistent_matmul", tile.Meta{"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk})
			pa, pb, pc := b.Ptr("a", tile.F32), b.Ptr("b", tile.F32), b.Ptr("c", tile.F32)
			b.For(b.ProgramID(0), int32(tiles), int32(programs), nil, func(t *tile.Value, _ []*tile.Value) []*tile.Value {
				rows := b.ExpandDims(b.Add(b.Mul(b.Div(t, int32(tilesN)), int32(bm)), b.Arange(0, bm)), 1)
				cols := b.ExpandDims(b.Add(b.Mul(b.Rem(t, int32(tilesN)), int32(bn)), b.Arange(0, bn)), 0)
				acc := b.For(0, int32(tile.CDiv(k, bk)), 1, []*tile.Value{b.Zeros(tile.F32, bm, bn)}, func(ks *tile.Value, c []*tile.Value) []*tile.Value {
					kc := b.ExpandDims(b.Add(b.Mul(ks, int32(bk)), b.Arange(0, bk)), 0)
					kr := b.ExpandDims(b.Add(b.Mul(ks, int32(bk)), b.Arange(0, bk)), 1)
					av := b.Load(b.AddPtr(pa, b.Add(b.Mul(rows, int32(k)), kc)), b.And(b.Lt(rows, int32(m)), b.Lt(kc, int32(k))), 0.0)
					bv := b.Load(b.AddPtr(pb, b.Add(b.Mul(kr, int32(n)), cols)), b.And(b.Lt(kr, int32(k)), b.Lt(cols, int32(n))), 0.0)
					return []*tile.Value{b.Dot(av, bv, c[0], tile.PrecIEEE)}
				})[0]
				b.Store(b.AddPtr(pc, b.Add(b.Mul(rows, int32(n)), cols)), acc, b.And(b.Lt(rows, int32(m)), b.Lt(cols, int32(n))))
				return nil
			})
			return b.Build()
		},
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			a, bb := Uniform(rng, m*k, -1, 1), Uniform(rng, k*n, -1, 1)
			c := Output(m * n)
			return tile.Grid{programs}, []any{a, bb, c}, func() error {
				want := make([]float64, m*n)
				for i := range m {
					for j := range n {
						for q := range k {
							want[i*n+j] += float64(a[i*k+q]) * float64(bb[q*n+j])
						}
					}
				}
				return Close("c", c, want, Tol{Abs: 1e-5 * float64(k), Rel: 1e-5})
			}
		},
	}
}

// moreCases are the cases that exercise 2-D reductions, transposed blocks,
// f64, i32 atomics and every math op.
func moreCases() []Case {
	cs := []Case{
		softmax2D(37, 100, 8, 128), softmax2D(64, 64, 16, 64), softmax2D(5, 1000, 2, 1024),
		transpose(100, 37, 32, 16), transpose(64, 64, 64, 64),
		sumSquaresF64(5, 3000, 512), sumSquaresF64(3, 10, 16),
		histogram(10000, 37, 1024), histogram(100, 1, 128),
		softmaxPersistent(100, 781, 1024, 7), softmaxPersistent(64, 4096, 4096, 64), softmaxPersistent(3, 50, 64, 8),
		layerNormPersistent(100, 781, 1024, 7), layerNormPersistent(5, 64, 64, 16),
		layerNorm2D(37, 781, 4, 1024, false), layerNorm2D(64, 1024, 8, 1024, true), layerNorm2D(5, 64, 2, 64, false),
		addTransposed(100, 32), addTransposed(64, 16), pairSums(1000, 256), pairSums(4096, 1024),
		embedding(50, 64, 37), embedding(7, 100, 5), pickLabels(300, 10, 64), pickLabels(5, 1000, 128),
		scatterAdd(1000, 37, 128), scatterAdd(5, 2, 64),
		argmaxRows(37, 100, 16, 128), argmaxRows(300, 10, 64, 16), groupSums(37, 8, 32, 4), groupSums(5, 16, 4, 8),
		sumLoopF64(3, 1000, 256), sumLoopF64(7, 64, 64),
		persistentMatmul(100, 70, 50, 32, 32, 16, 3), persistentMatmul(64, 64, 64, 16, 16, 16, 4),
	}
	for _, o := range MathOps {
		cs = append(cs, mathCase(o))
	}
	for _, o := range MathOps64 {
		cs = append(cs, mathCase64(o))
	}
	for _, o := range []tile.Op{tile.OpPow, tile.OpRem} {
		cs = append(cs, binaryCase(o, tile.F32), binaryCase(o, tile.F64))
	}
	return cs
}
