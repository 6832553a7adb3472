package tiletest

import (
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// RunOps checks on l each op's values where the conformance table's random
// inputs rarely go: f32 and f64 math at special inputs (zeros, infinities,
// NaN, the edges of exp's range), binary f32 ops, integer arithmetic with
// wrap-around and division by -1, comparisons with NaN, casts, reductions
// along each axis of a rank-3 block, transposes and broadcasts.
func RunOps(t *testing.T, l Launcher) {
	t.Helper()
	for _, c := range []struct {
		name string
		run  func(*testing.T, Launcher)
	}{
		{"UnaryMathF32", opUnaryMathF32},
		{"UnaryMathF64", opUnaryMathF64},
		{"BinaryF32", opBinaryF32},
		{"IntegerOps", opIntegerOps},
		{"ComparisonsWithNaN", opComparisonsWithNaN},
		{"Casts", opCasts},
		{"Rank3Reductions", opRank3Reductions},
		{"TransAndBroadcast", opTransAndBroadcast},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, l) })
	}
}

// specials are inputs where math functions misbehave most often.
var specials = []float64{0, math.Copysign(0, -1), 1, -1, 0.5, -0.5, 2, 10, -10, 88, -88, 89, -104,
	700, -745, 1e-30, -1e-30, 1e30, 1e-7, 3.7, -2.2, math.Pi, math.Inf(1), math.Inf(-1), math.NaN()}

// mapKernel builds y = f(x) over n elements of dtype in → out, one block.
func mapKernel(t *testing.T, in, out tile.DType, f func(b *tile.Builder, x *tile.Value) *tile.Value) *tile.Kernel {
	t.Helper()
	b := tile.NewBuilder("map", nil)
	x, y, n := b.Ptr("x", in), b.Ptr("y", out), b.Param("n", tile.I32)
	r := b.Arange(0, 128)
	m := b.Lt(r, n)
	b.Store(b.AddPtr(y, r), f(b, b.Load(b.AddPtr(x, r), m, nil)), m)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// ulps is the distance between a and b in units of float32 precision.
func ulps(a, b float32) float64 {
	if a == b {
		return 0
	}
	ia, ib := int64(math.Float32bits(a)), int64(math.Float32bits(b))
	if ia < 0x80000000 != (ib < 0x80000000) {
		return math.Inf(1)
	}
	return math.Abs(float64(ia - ib))
}

// sameFloat compares got with the float64 reference: NaN matches NaN,
// otherwise within maxULP units of float32.
func sameFloat(got float32, ref float64, maxULP float64) bool {
	if math.IsNaN(ref) {
		return got != got
	}
	return ulps(got, float32(ref)) <= maxULP
}

func opUnaryMathF32(t *testing.T, l Launcher) {
	ref := map[tile.Op]func(float64) float64{
		tile.OpNeg: func(x float64) float64 { return -x }, tile.OpAbs: math.Abs,
		tile.OpExp: math.Exp, tile.OpExp2: math.Exp2, tile.OpLog: math.Log, tile.OpLog2: math.Log2,
		tile.OpLog1p: math.Log1p, tile.OpExpm1: math.Expm1, tile.OpSqrt: math.Sqrt,
		tile.OpRsqrt: func(x float64) float64 { return 1 / math.Sqrt(x) }, tile.OpTanh: math.Tanh,
		tile.OpErf: math.Erf, tile.OpSigmoid: func(x float64) float64 { return 1 / (1 + math.Exp(-x)) },
		tile.OpSin: math.Sin, tile.OpCos: math.Cos, tile.OpFloor: math.Floor, tile.OpCeil: math.Ceil,
		tile.OpSign: func(x float64) float64 {
			if x > 0 {
				return 1
			} else if x < 0 {
				return -1
			}
			return x
		},
	}
	rng := RNG("unary")
	xs := make([]float32, 0, 128)
	for _, s := range specials {
		xs = append(xs, float32(s))
	}
	for len(xs) < 100 {
		xs = append(xs, float32((rng.Float64()-0.5)*20))
	}
	for op, f := range ref {
		t.Run(op.String(), func(t *testing.T) {
			k := mapKernel(t, tile.F32, tile.F32, func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Unary(op, x) })
			y := Output(len(xs))
			if err := l.Launch(k, tile.Grid{1}, xs, y, len(xs)); err != nil {
				t.Fatal(err)
			}
			for i, x := range xs {
				// the reference sees the f32 input exactly; 1 ulp covers its rounding to f32
				if w := f(float64(x)); !sameFloat(y[i], w, 1) {
					t.Errorf("%v(%g) = %g, want %g", op, x, y[i], w)
				}
			}
		})
	}
}

func opUnaryMathF64(t *testing.T, l Launcher) {
	xs := append([]float64(nil), specials...)
	k := mapKernel(t, tile.F64, tile.F64, func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Tanh(b.Exp(x)) })
	y := make([]float64, len(xs))
	if err := l.Launch(k, tile.Grid{1}, xs, y, len(xs)); err != nil {
		t.Fatal(err)
	}
	for i, x := range xs {
		w := math.Tanh(math.Exp(x))
		if !(y[i] == w || math.IsNaN(w) && math.IsNaN(y[i])) {
			t.Errorf("tanh(exp(%g)) = %g, want %g exactly (f64 ops are Go's math)", x, y[i], w)
		}
	}
}

func opBinaryF32(t *testing.T, l Launcher) {
	pick := []float64{0, math.Copysign(0, -1), 1, -1.5, 7, -3, 1e30, 1e-30, math.Inf(1), math.Inf(-1), math.NaN()}
	var xs, ys []float32
	for _, a := range pick {
		for _, c := range pick {
			xs, ys = append(xs, float32(a)), append(ys, float32(c))
		}
	}
	n := len(xs) // 121
	ref := map[tile.Op]func(a, b float64) float64{
		tile.OpAdd: func(a, b float64) float64 { return a + b },
		tile.OpSub: func(a, b float64) float64 { return a - b },
		tile.OpMul: func(a, b float64) float64 { return a * b },
		tile.OpDiv: func(a, b float64) float64 { return a / b },
		tile.OpRem: math.Mod,
		tile.OpPow: interp.Pow64,
		tile.OpMin: func(a, b float64) float64 {
			if math.IsNaN(a) || math.IsNaN(b) {
				return math.NaN()
			}
			return math.Min(a, b)
		},
		tile.OpMax: func(a, b float64) float64 {
			if math.IsNaN(a) || math.IsNaN(b) {
				return math.NaN()
			}
			return math.Max(a, b)
		},
	}
	for op, f := range ref {
		t.Run(op.String(), func(t *testing.T) {
			b := tile.NewBuilder("bin", nil)
			x, y, z := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32), b.Ptr("z", tile.F32)
			r := b.Arange(0, 128)
			m := b.Lt(r, n)
			b.Store(b.AddPtr(z, r), b.Binary(op, b.Load(b.AddPtr(x, r), m, nil), b.Load(b.AddPtr(y, r), m, nil)), m)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			z0 := Output(n)
			if err := l.Launch(k, tile.Grid{1}, xs, ys, z0); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				w := f(float64(xs[i]), float64(ys[i]))
				if op == tile.OpMin || op == tile.OpMax {
					if w == 0 && z0[i] == 0 {
						continue // the sign of a zero min/max is unspecified
					}
				}
				maxULP := 0.0
				if op == tile.OpPow {
					// an approximation within 2 ulp here (the IR's bound is
					// 2⁻²¹·(1 + |y·log₂x|) relative: more_cases.go), exact
					// where the result is 0, ±∞ or NaN; the reference
					// interpreter and the executor are exact
					maxULP = 2
				}
				if !sameFloat(z0[i], w, maxULP) {
					t.Errorf("%v(%g, %g) = %g, want %g", op, xs[i], ys[i], z0[i], float32(w))
				}
			}
		})
	}
}

func opIntegerOps(t *testing.T, l Launcher) {
	xs := []int32{0, 1, -1, 7, -7, 100, math.MaxInt32, math.MinInt32, 12345, -99}
	ys := []int32{3, -3, 2, -2, 1, 7, -1, 5, 13, 4}
	ref := map[tile.Op]func(a, b int32) int32{
		tile.OpAdd: func(a, b int32) int32 { return a + b },
		tile.OpSub: func(a, b int32) int32 { return a - b },
		tile.OpMul: func(a, b int32) int32 { return a * b },
		tile.OpDiv: func(a, b int32) int32 {
			if b == -1 {
				return -a
			}
			return a / b
		},
		tile.OpRem: func(a, b int32) int32 {
			if b == -1 {
				return 0
			}
			return a % b
		},
		tile.OpMin: func(a, b int32) int32 { return min(a, b) },
		tile.OpMax: func(a, b int32) int32 { return max(a, b) },
		tile.OpAnd: func(a, b int32) int32 { return a & b },
		tile.OpOr:  func(a, b int32) int32 { return a | b },
		tile.OpXor: func(a, b int32) int32 { return a ^ b },
	}
	n := len(xs)
	for op, f := range ref {
		b := tile.NewBuilder("ibin", nil)
		x, y, z := b.Ptr("x", tile.I32), b.Ptr("y", tile.I32), b.Ptr("z", tile.I32)
		r := b.Arange(0, 16)
		m := b.Lt(r, n)
		b.Store(b.AddPtr(z, r), b.Binary(op, b.Load(b.AddPtr(x, r), m, nil), b.Load(b.AddPtr(y, r), m, nil)), m)
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		z0 := make([]int32, n)
		if err := l.Launch(k, tile.Grid{1}, xs, ys, z0); err != nil {
			t.Fatal(op, err)
		}
		for i := range xs {
			if w := f(xs[i], ys[i]); z0[i] != w {
				t.Errorf("%v(%d, %d) = %d, want %d", op, xs[i], ys[i], z0[i], w)
			}
		}
	}
	unary := map[tile.Op]func(a int32) int32{
		tile.OpNeg: func(a int32) int32 { return -a },
		tile.OpNot: func(a int32) int32 { return ^a },
		tile.OpAbs: func(a int32) int32 {
			if a < 0 {
				return -a
			}
			return a
		},
		tile.OpSign: func(a int32) int32 { return int32(min(max(int64(a), -1), 1)) },
	}
	for op, f := range unary {
		k := mapKernel(t, tile.I32, tile.I32, func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Unary(op, x) })
		z0 := make([]int32, n)
		if err := l.Launch(k, tile.Grid{1}, xs, z0, n); err != nil {
			t.Fatal(op, err)
		}
		for i := range xs {
			if w := f(xs[i]); z0[i] != w {
				t.Errorf("%v(%d) = %d, want %d", op, xs[i], z0[i], w)
			}
		}
	}
}

func opComparisonsWithNaN(t *testing.T, l Launcher) {
	nan := float32(math.NaN())
	xs := []float32{1, 2, nan, 1, nan, float32(math.Inf(-1))}
	ys := []float32{2, 2, 1, nan, nan, float32(math.Inf(-1))}
	want := map[tile.Op][]bool{
		tile.OpLt: {true, false, false, false, false, false},
		tile.OpLe: {true, true, false, false, false, true},
		tile.OpGt: {false, false, false, false, false, false},
		tile.OpGe: {false, true, false, false, false, true},
		tile.OpEq: {false, true, false, false, false, true},
		tile.OpNe: {true, false, true, true, true, false},
	}
	for op, w := range want {
		b := tile.NewBuilder("cmp", nil)
		x, y, z := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32), b.Ptr("z", tile.I32)
		r := b.Arange(0, 8)
		m := b.Lt(r, len(xs))
		c := b.Binary(op, b.Load(b.AddPtr(x, r), m, nil), b.Load(b.AddPtr(y, r), m, nil))
		b.Store(b.AddPtr(z, r), b.Cast(c, tile.I32), m)
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		got := make([]int32, len(xs))
		if err := l.Launch(k, tile.Grid{1}, xs, ys, got); err != nil {
			t.Fatal(err)
		}
		for i := range xs {
			if (got[i] == 1) != w[i] {
				t.Errorf("%v(%g, %g) = %d, want %v", op, xs[i], ys[i], got[i], w[i])
			}
		}
	}
}

func opCasts(t *testing.T, l Launcher) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	xs := []float32{1.9, -1.9, 3e9, -3e9, nan, inf, -inf, 0.5, -0.0, 16777217}
	k := mapKernel(t, tile.F32, tile.I32, func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Cast(x, tile.I32) })
	got := make([]int32, len(xs))
	if err := l.Launch(k, tile.Grid{1}, xs, got, len(xs)); err != nil {
		t.Fatal(err)
	}
	want := []int32{1, -1, math.MaxInt32, math.MinInt32, 0, math.MaxInt32, math.MinInt32, 0, 0, 16777216}
	for i := range xs {
		if got[i] != want[i] {
			t.Errorf("cast f32 %g to i32 = %d, want %d (truncate, saturate, NaN→0)", xs[i], got[i], want[i])
		}
	}
	// f32 → i64 → f64 → i1 → i32 and f32 → f64 → f32 round trips
	k = mapKernel(t, tile.F32, tile.I32, func(b *tile.Builder, x *tile.Value) *tile.Value {
		return b.Cast(b.Cast(b.Cast(b.Cast(x, tile.I64), tile.F64), tile.I1), tile.I32)
	})
	if err := l.Launch(k, tile.Grid{1}, xs, got, len(xs)); err != nil {
		t.Fatal(err)
	}
	for i, x := range xs {
		var w int32
		if x != x || int64(math.Trunc(float64(x))) != 0 {
			w = 1
		}
		if x != x {
			w = 0 // NaN → i64 0 → 0.0 → false
		}
		if got[i] != w {
			t.Errorf("chain of casts of %g = %d, want %d", x, got[i], w)
		}
	}
	k = mapKernel(t, tile.F32, tile.F32, func(b *tile.Builder, x *tile.Value) *tile.Value {
		return b.Cast(b.Mul(b.Cast(x, tile.F64), 1.0), tile.F32)
	})
	y := make([]float32, len(xs))
	if err := l.Launch(k, tile.Grid{1}, xs, y, len(xs)); err != nil {
		t.Fatal(err)
	}
	for i := range xs {
		if !(y[i] == xs[i] || y[i] != y[i] && xs[i] != xs[i]) {
			t.Errorf("f32→f64→f32 of %g gave %g", xs[i], y[i])
		}
	}
}

// opRank3Reductions reduces a [2,4,8] block along each axis, with and
// without keep-dims, against a float64 reference.
func opRank3Reductions(t *testing.T, l Launcher) {
	dims := [3]int{2, 4, 8}
	xs := Uniform(RNG("rank3"), 64, -1, 1)
	xs[13] = float32(math.NaN())
	for _, op := range []tile.Op{tile.OpReduceSum, tile.OpReduceMax, tile.OpReduceMin} {
		for axis := 0; axis < 3; axis++ {
			for _, keep := range []bool{false, true} {
				b := tile.NewBuilder("reduce3", nil)
				x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
				offs := b.Reshape(b.Arange(0, 64), 2, 4, 8)
				r := b.Reduce(op, b.Load(b.AddPtr(x, offs), nil, nil), axis, keep)
				rs := r.Type.Shape
				if keep && rs.Rank != 3 || !keep && rs.Rank != 2 {
					t.Fatalf("%v axis %d keep=%v: result %v", op, axis, keep, r.Type)
				}
				b.Store(b.AddPtr(y, b.Reshape(b.Arange(0, rs.Numel()), rs.Slice()...)), r, nil)
				k, err := b.Build()
				if err != nil {
					t.Fatal(err)
				}
				got := Output(rs.Numel())
				if err := l.Launch(k, tile.Grid{1}, xs, got); err != nil {
					t.Fatal(err)
				}
				want := make([]float64, rs.Numel())
				for i := range want {
					want[i] = math.NaN()
				}
				seen := make([]bool, len(want))
				for i := 0; i < 2; i++ {
					for j := 0; j < 4; j++ {
						for l := 0; l < 8; l++ {
							idx := [3]int{i, j, l}
							idx[axis] = 0
							od := dims
							od[axis] = 1
							flat := (idx[0]*od[1]+idx[1])*od[2] + idx[2]
							v := float64(xs[(i*4+j)*8+l])
							switch {
							case !seen[flat]:
								want[flat], seen[flat] = v, true
							case op == tile.OpReduceSum:
								want[flat] += v
							case math.IsNaN(want[flat]) || math.IsNaN(v):
								want[flat] = math.NaN()
							case op == tile.OpReduceMax:
								want[flat] = math.Max(want[flat], v)
							default:
								want[flat] = math.Min(want[flat], v)
							}
						}
					}
				}
				if err := Close(op.String(), got, want, Tol{Abs: 1e-6, Rel: 1e-6}); err != nil {
					t.Errorf("axis %d keep=%v: %v", axis, keep, err)
				}
			}
		}
	}
}

func opTransAndBroadcast(t *testing.T, l Launcher) {
	b := tile.NewBuilder("trans", nil)
	x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
	rm, rn := b.ExpandDims(b.Arange(0, 16), 1), b.ExpandDims(b.Arange(0, 32), 0)
	tl := b.Load(b.AddPtr(x, b.Add(b.Mul(rm, 32), rn)), nil, nil) // [16,32]
	col := b.Load(b.AddPtr(x, b.Mul(rm, 32)), nil, nil)           // [16,1]: x[i,0]
	v := b.Add(b.Trans(tl), b.Trans(b.BroadcastTo(col, tile.Shp(16, 32))))
	// y[j,i] = x[i,j] + x[i,0]
	b.Store(b.AddPtr(y, b.Add(b.Mul(b.ExpandDims(b.Arange(0, 32), 1), 16), b.ExpandDims(b.Arange(0, 16), 0))), v, nil)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	xs := Uniform(RNG("trans"), 512, -1, 1)
	got := Output(512)
	if err := l.Launch(k, tile.Grid{1}, xs, got); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, 512)
	for i := 0; i < 16; i++ {
		for j := 0; j < 32; j++ {
			want[j*16+i] = float64(xs[i*32+j] + xs[i*32])
		}
	}
	if err := Close("y", got, want, Tol{}); err != nil {
		t.Fatal(err)
	}
}
