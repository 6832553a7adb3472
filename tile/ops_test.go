package tile_test

import (
	"math"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

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

func TestUnaryMathF32(t *testing.T) {
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
	rng := tiletest.RNG("unary")
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
			y := tiletest.Output(len(xs))
			if err := tile.Interpret(k, tile.Grid{1}, xs, y, len(xs)); err != nil {
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

func TestUnaryMathF64(t *testing.T) {
	xs := append([]float64(nil), specials...)
	k := mapKernel(t, tile.F64, tile.F64, func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Tanh(b.Exp(x)) })
	y := make([]float64, len(xs))
	if err := tile.Interpret(k, tile.Grid{1}, xs, y, len(xs)); err != nil {
		t.Fatal(err)
	}
	for i, x := range xs {
		w := math.Tanh(math.Exp(x))
		if !(y[i] == w || math.IsNaN(w) && math.IsNaN(y[i])) {
			t.Errorf("tanh(exp(%g)) = %g, want %g exactly (f64 ops are Go's math)", x, y[i], w)
		}
	}
}

func TestBinaryF32(t *testing.T) {
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
		tile.OpPow: math.Pow,
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
			z0 := tiletest.Output(n)
			if err := tile.Interpret(k, tile.Grid{1}, xs, ys, z0); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				w := f(float64(xs[i]), float64(ys[i]))
				if op == tile.OpMin || op == tile.OpMax {
					if w == 0 && z0[i] == 0 {
						continue // the sign of a zero min/max is unspecified
					}
				}
				if !sameFloat(z0[i], w, 0) {
					t.Errorf("%v(%g, %g) = %g, want %g", op, xs[i], ys[i], z0[i], float32(w))
				}
			}
		})
	}
}

func TestIntegerOps(t *testing.T) {
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
		if err := tile.Interpret(k, tile.Grid{1}, xs, ys, z0); err != nil {
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
		if err := tile.Interpret(k, tile.Grid{1}, xs, z0, n); err != nil {
			t.Fatal(op, err)
		}
		for i := range xs {
			if w := f(xs[i]); z0[i] != w {
				t.Errorf("%v(%d) = %d, want %d", op, xs[i], z0[i], w)
			}
		}
	}
}

func TestComparisonsWithNaN(t *testing.T) {
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
		if err := tile.Interpret(k, tile.Grid{1}, xs, ys, got); err != nil {
			t.Fatal(err)
		}
		for i := range xs {
			if (got[i] == 1) != w[i] {
				t.Errorf("%v(%g, %g) = %d, want %v", op, xs[i], ys[i], got[i], w[i])
			}
		}
	}
}

func TestCasts(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	xs := []float32{1.9, -1.9, 3e9, -3e9, nan, inf, -inf, 0.5, -0.0, 16777217}
	k := mapKernel(t, tile.F32, tile.I32, func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Cast(x, tile.I32) })
	got := make([]int32, len(xs))
	if err := tile.Interpret(k, tile.Grid{1}, xs, got, len(xs)); err != nil {
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
	if err := tile.Interpret(k, tile.Grid{1}, xs, got, len(xs)); err != nil {
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
	if err := tile.Interpret(k, tile.Grid{1}, xs, y, len(xs)); err != nil {
		t.Fatal(err)
	}
	for i := range xs {
		if !(y[i] == xs[i] || y[i] != y[i] && xs[i] != xs[i]) {
			t.Errorf("f32→f64→f32 of %g gave %g", xs[i], y[i])
		}
	}
}

// TestRank3Reductions reduces a [2,4,8] block along each axis, with and
// without keep-dims, against a float64 reference.
func TestRank3Reductions(t *testing.T) {
	dims := [3]int{2, 4, 8}
	xs := tiletest.Uniform(tiletest.RNG("rank3"), 64, -1, 1)
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
				got := tiletest.Output(rs.Numel())
				if err := tile.Interpret(k, tile.Grid{1}, xs, got); err != nil {
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
				if err := tiletest.Close(op.String(), got, want, tiletest.Tol{Abs: 1e-6, Rel: 1e-6}); err != nil {
					t.Errorf("axis %d keep=%v: %v", axis, keep, err)
				}
			}
		}
	}
}

func TestTransAndBroadcast(t *testing.T) {
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
	xs := tiletest.Uniform(tiletest.RNG("trans"), 512, -1, 1)
	got := tiletest.Output(512)
	if err := tile.Interpret(k, tile.Grid{1}, xs, got); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, 512)
	for i := 0; i < 16; i++ {
		for j := 0; j < 32; j++ {
			want[j*16+i] = float64(xs[i*32+j] + xs[i*32])
		}
	}
	if err := tiletest.Close("y", got, want, tiletest.Tol{}); err != nil {
		t.Fatal(err)
	}
}

// TestBuilderErrors: each user mistake is an error naming the kernel, the
// caller's line, the op and what is wrong; the builder never panics.
func TestBuilderErrors(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *tile.Builder)
		want  string
	}{
		{"shapes do not broadcast", func(b *tile.Builder) {
			b.Add(b.Zeros(tile.F32, 128), b.Zeros(tile.F32, 64))
		}, "add: operands tensor<128xf32> and tensor<64xf32>: shapes [128] and [64] do not broadcast"},
		{"[M,1] with [N]", func(b *tile.Builder) {
			b.Mul(b.Zeros(tile.F32, 16, 2), b.Zeros(tile.F32, 4))
		}, "shapes [16,2] and [4] do not broadcast"},
		{"load from a non-pointer", func(b *tile.Builder) {
			b.Load(b.Zeros(tile.F32, 16), nil, nil)
		}, "load from tensor<16xf32>, not a pointer"},
		{"mask not i1", func(b *tile.Builder) {
			p := b.Ptr("p", tile.F32)
			b.Load(b.AddPtr(p, b.Arange(0, 16)), b.Arange(0, 16), nil)
		}, "mask must be i1, is tensor<16xi32>"},
		{"mask shape", func(b *tile.Builder) {
			p := b.Ptr("p", tile.F32)
			b.Load(b.AddPtr(p, b.Arange(0, 16)), b.Lt(b.Arange(0, 32), 3), nil)
		}, "mask tensor<32xi1> does not match pointer shape [16]"},
		{"other without mask", func(b *tile.Builder) {
			p := b.Ptr("p", tile.F32)
			b.Load(p, nil, 1.0)
		}, "other without a mask"},
		{"store of another dtype", func(b *tile.Builder) {
			p := b.Ptr("p", tile.F32)
			b.Store(b.AddPtr(p, b.Arange(0, 16)), b.Arange(0, 16), nil)
		}, "value tensor<16xi32> does not match pointer tensor<16x!tt.ptr<f32>>: cast it first"},
		{"pointer arithmetic with a float", func(b *tile.Builder) {
			b.AddPtr(b.Ptr("p", tile.F32), 1.5)
		}, "offset f32 must be i32 or i64"},
		{"pointer in arithmetic", func(b *tile.Builder) {
			b.Mul(b.Ptr("p", tile.F32), 2)
		}, "is a pointer: use AddPtr"},
		{"exp of an int", func(b *tile.Builder) {
			b.Exp(b.Arange(0, 16))
		}, "exp is not defined on tensor<16xi32>"},
		{"dot inner dimensions", func(b *tile.Builder) {
			b.Dot(b.Zeros(tile.F32, 16, 32), b.Zeros(tile.F32, 16, 16), nil, tile.PrecIEEE)
		}, "inner dimensions 32 and 16 differ"},
		{"dot too small", func(b *tile.Builder) {
			b.Dot(b.Zeros(tile.F32, 8, 16), b.Zeros(tile.F32, 16, 16), nil, tile.PrecIEEE)
		}, "M, N and K must be at least 16"},
		{"loop-carried type changes", func(b *tile.Builder) {
			b.For(0, 4, 1, []*tile.Value{b.Zeros(tile.F32, 16)}, func(_ *tile.Value, c []*tile.Value) []*tile.Value {
				return []*tile.Value{b.Sum(c[0], 0)}
			})
		}, "loop-carried value 0 changes type from tensor<16xf32> to f32"},
		{"loop returns too few", func(b *tile.Builder) {
			b.For(0, 4, 1, []*tile.Value{b.F32(1)}, func(_ *tile.Value, c []*tile.Value) []*tile.Value { return nil })
		}, "loop body returns 0 values, the loop carries 1"},
		{"float loop bounds", func(b *tile.Builder) {
			b.For(0, 4.5, 1, nil, func(_ *tile.Value, c []*tile.Value) []*tile.Value { return nil })
		}, "bounds and step must be scalar integers"},
		{"missing meta", func(b *tile.Builder) { b.BlockSize("BLOCK") }, "meta-parameter BLOCK is not set"},
		{"nil operand", func(b *tile.Builder) { b.Add(nil, 1) }, "add: operand is nil"},
		{"nil value operand", func(b *tile.Builder) { var v *tile.Value; b.Add(v, 1) }, "add: operand 0 is nil"},
		{"Go string operand", func(b *tile.Builder) { b.Add("x", 1) }, "operand of Go type string"},
		{"select on a float condition", func(b *tile.Builder) { b.Where(b.F32(1), 1, 2) }, "condition must be i1"},
		{"reshape changes element count", func(b *tile.Builder) { b.Reshape(b.Arange(0, 16), 4, 8) }, "cannot reshape tensor<16xi32> to [4,8]"},
		{"repeated parameter", func(b *tile.Builder) { b.Ptr("x", tile.F32); b.Param("x", tile.I32) }, `parameter name "x" is empty or already taken`},
		{"pointer to i64", func(b *tile.Builder) { b.Ptr("x", tile.I64) }, "pointers are to f32, f64 or i32"},
		{"reduce axis", func(b *tile.Builder) { b.Sum(b.Zeros(tile.F32, 4, 4), 2) }, "axis 2 of tensor<4x4xf32>"},
		{"expand_dims axis", func(b *tile.Builder) { b.ExpandDims(b.Zeros(tile.F32, 4), 2) }, "axis 2 of tensor<4xf32>"},
		{"rank 4", func(b *tile.Builder) { b.ExpandDims(b.Zeros(tile.F32, 2, 2, 2), 0) }, "rank below 3"},
		{"program_id axis", func(b *tile.Builder) { b.ProgramID(3) }, "axis 3 is outside 0..2"},
		{"i32 constant out of range", func(b *tile.Builder) { b.I32(1 << 40) }, "is not an i32"},
		{"two cache hints", func(b *tile.Builder) {
			p := b.Ptr("p", tile.F32)
			b.Load(p, nil, nil, tile.CacheStreaming, tile.CacheDefault)
		}, "give at most one known hint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("oops", tile.Meta{})
			c.build(b)
			// later calls after an error must not panic
			b.Store(b.Ptr("late", tile.F32), b.Exp(b.Add(b.Zeros(tile.F32, 16), 1.0)), nil)
			_, err := b.Build()
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) {
				t.Fatalf("error %q does not mention %q", msg, c.want)
			}
			if !strings.HasPrefix(msg, "tile: @oops: ops_test.go:") {
				t.Fatalf("error %q does not start with the kernel and the caller's file:line", msg)
			}
		})
	}
}

// TestWeakLiteralPromotion: Go numbers take the other operand's dtype;
// a float literal beside ints makes f32; typed Go numbers keep their dtype.
func TestWeakLiteralPromotion(t *testing.T) {
	b := tile.NewBuilder("promo", nil)
	i := b.Arange(0, 16)
	cases := []struct {
		v    *tile.Value
		want tile.Type
	}{
		{b.Add(i, 1), tile.BlockOf(tile.I32, 16)},
		{b.Mul(i, 0.5), tile.BlockOf(tile.F32, 16)},
		{b.Add(b.Cast(i, tile.F64), 1), tile.BlockOf(tile.F64, 16)},
		{b.Add(i, int64(1)), tile.BlockOf(tile.I64, 16)},
		{b.Add(i, float32(1)), tile.BlockOf(tile.F32, 16)},
		{b.Add(b.Cast(i, tile.F32), b.F64(1)), tile.BlockOf(tile.F64, 16)},
		{b.Lt(i, 3.5), tile.BlockOf(tile.I1, 16)},
		{b.Add(1, 2), tile.ScalarOf(tile.I32)},
		{b.Add(b.ExpandDims(i, 1), b.ExpandDims(i, 0)), tile.BlockOf(tile.I32, 16, 16)},
	}
	if _, err := b.Build(); err != nil {
		t.Fatal(err)
	}
	for n, c := range cases {
		if c.v.Type != c.want {
			t.Errorf("case %d: %v, want %v", n, c.v.Type, c.want)
		}
	}
}
