package interp

import (
	"math"

	"github.com/tilefuse/tilefuse/tile"
)

type integer interface{ ~int32 | ~int64 }
type float interface{ ~float32 | ~float64 }
type number interface{ integer | float }

// ---- shape ops: they move elements, never change them ----

func shape(v *tile.Value, x any) (any, error) {
	if p, ok := x.(ptrs); ok {
		r, err := shape(v, p.off)
		if err != nil {
			return nil, err
		}
		return ptrs{param: p.param, off: r.([]int64)}, nil
	}
	switch x := x.(type) {
	case []bool:
		return move(v, x), nil
	case []int32:
		return move(v, x), nil
	case []int64:
		return move(v, x), nil
	case []float32:
		return move(v, x), nil
	case []float64:
		return move(v, x), nil
	}
	return nil, fault(v, "operand of type %T", x)
}

// move computes a shape op's result: result lane i takes operand lane src(i).
func move[T any](v *tile.Value, x []T) []T {
	d := make([]T, v.Type.Shape.Numel())
	switch v.Op {
	case tile.OpSplat:
		for i := range d {
			d[i] = x[0]
		}
	case tile.OpExpandDims, tile.OpReshape: // row-major order is unchanged
		copy(d, x)
	case tile.OpBroadcast:
		in, out := pad3(v.Args[0].Type.Shape), pad3(v.Type.Shape)
		i := 0
		for a := 0; a < out[0]; a++ {
			for b := 0; b < out[1]; b++ {
				for c := 0; c < out[2]; c++ {
					// a dimension of size 1 repeats: its index is 0
					d[i] = x[(a%in[0]*in[1]+b%in[1])*in[2]+c%in[2]]
					i++
				}
			}
		}
	case tile.OpTrans:
		m, n := v.Args[0].Type.Shape.Dims[0], v.Args[0].Type.Shape.Dims[1]
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				d[j*m+i] = x[i*n+j]
			}
		}
	}
	return d
}

// pad3 writes s as three dimensions, leading ones of size 1.
func pad3(s tile.Shape) [3]int {
	out := [3]int{1, 1, 1}
	for i := 0; i < s.Rank; i++ {
		out[3-s.Rank+i] = s.Dims[i]
	}
	return out
}

// ---- elementwise ops ----

func map1[T, R any](x []T, f func(T) R) []R {
	d := make([]R, len(x))
	for i, a := range x {
		d[i] = f(a)
	}
	return d
}

func map2[T, U, R any](x []T, y []U, f func(T, U) R) []R {
	d := make([]R, len(x))
	for i, a := range x {
		d[i] = f(a, y[i])
	}
	return d
}

func binary(v *tile.Value, x, y any) (any, error) {
	switch x := x.(type) {
	case []float32:
		if f := floatBinary[float32](v.Op); f != nil {
			return map2(x, y.([]float32), f), nil
		}
	case []float64:
		if f := floatBinary[float64](v.Op); f != nil {
			return map2(x, y.([]float64), f), nil
		}
	case []int32:
		if f := intBinary[int32](v.Op); f != nil {
			return map2(x, y.([]int32), f), nil
		}
	case []int64:
		if f := intBinary[int64](v.Op); f != nil {
			return map2(x, y.([]int64), f), nil
		}
	case []bool:
		if f := boolBinary(v.Op); f != nil {
			return map2(x, y.([]bool), f), nil
		}
	}
	return nil, fault(v, "%v on %v", v.Op, v.Args[0].Type)
}

func floatBinary[T float](o tile.Op) func(a, b T) T {
	switch o {
	case tile.OpAdd:
		return func(a, b T) T { return a + b }
	case tile.OpSub:
		return func(a, b T) T { return a - b }
	case tile.OpMul:
		return func(a, b T) T { return a * b }
	case tile.OpDiv:
		return func(a, b T) T { return a / b }
	case tile.OpRem: // fmod is exact, so the f64 one is the f32 one
		return func(a, b T) T { return T(math.Mod(float64(a), float64(b))) }
	case tile.OpMin: // NaN if either is NaN
		return func(a, b T) T {
			if a != a || a < b {
				return a
			}
			return b
		}
	case tile.OpMax:
		return func(a, b T) T {
			if a != a || a > b {
				return a
			}
			return b
		}
	case tile.OpPow:
		return func(a, b T) T { return T(Pow64(float64(a), float64(b))) }
	}
	return nil
}

func intBinary[T integer](o tile.Op) func(a, b T) T {
	switch o {
	case tile.OpAdd: // wraps
		return func(a, b T) T { return a + b }
	case tile.OpSub:
		return func(a, b T) T { return a - b }
	case tile.OpMul:
		return func(a, b T) T { return a * b }
	case tile.OpDiv:
		return func(a, b T) T {
			switch b {
			case 0:
				return -1 // defined here; unspecified on the GPU
			case -1:
				return -a // MinInt / -1 wraps, as on the GPU (Go's / would trap)
			}
			return a / b
		}
	case tile.OpRem:
		return func(a, b T) T {
			switch b {
			case 0:
				return a
			case -1:
				return 0
			}
			return a % b
		}
	case tile.OpMin:
		return func(a, b T) T { return min(a, b) }
	case tile.OpMax:
		return func(a, b T) T { return max(a, b) }
	case tile.OpAnd:
		return func(a, b T) T { return a & b }
	case tile.OpOr:
		return func(a, b T) T { return a | b }
	case tile.OpXor:
		return func(a, b T) T { return a ^ b }
	}
	return nil
}

func boolBinary(o tile.Op) func(a, b bool) bool {
	switch o {
	case tile.OpAnd:
		return func(a, b bool) bool { return a && b }
	case tile.OpOr:
		return func(a, b bool) bool { return a || b }
	case tile.OpXor:
		return func(a, b bool) bool { return a != b }
	}
	return nil
}

func compare(v *tile.Value, x, y any) (any, error) {
	switch x := x.(type) {
	case []float32:
		return cmp(v.Op, x, y.([]float32)), nil
	case []float64:
		return cmp(v.Op, x, y.([]float64)), nil
	case []int32:
		return cmp(v.Op, x, y.([]int32)), nil
	case []int64:
		return cmp(v.Op, x, y.([]int64)), nil
	case []bool:
		switch v.Op {
		case tile.OpEq:
			return map2(x, y.([]bool), func(a, b bool) bool { return a == b }), nil
		case tile.OpNe:
			return map2(x, y.([]bool), func(a, b bool) bool { return a != b }), nil
		}
	}
	return nil, fault(v, "%v on %v", v.Op, v.Args[0].Type)
}

// cmp compares as Go does: false where a float operand is NaN, except Ne.
func cmp[T number](o tile.Op, x, y []T) []bool {
	var f func(a, b T) bool
	switch o {
	case tile.OpEq:
		f = func(a, b T) bool { return a == b }
	case tile.OpNe:
		f = func(a, b T) bool { return a != b }
	case tile.OpLt:
		f = func(a, b T) bool { return a < b }
	case tile.OpLe:
		f = func(a, b T) bool { return a <= b }
	case tile.OpGt:
		f = func(a, b T) bool { return a > b }
	case tile.OpGe:
		f = func(a, b T) bool { return a >= b }
	}
	return map2(x, y, f)
}

func unary(v *tile.Value, x any) (any, error) {
	switch x := x.(type) {
	case []float32:
		if f := floatUnary[float32](v.Op); f != nil {
			return map1(x, f), nil
		}
	case []float64:
		if f := floatUnary[float64](v.Op); f != nil {
			return map1(x, f), nil
		}
	case []int32:
		if f := intUnary[int32](v.Op); f != nil {
			return map1(x, f), nil
		}
	case []int64:
		if f := intUnary[int64](v.Op); f != nil {
			return map1(x, f), nil
		}
	case []bool:
		if v.Op == tile.OpNot {
			return map1(x, func(a bool) bool { return !a }), nil
		}
	}
	return nil, fault(v, "%v on %v", v.Op, v.Args[0].Type)
}

// floatUnary is op o on floats: the float64 function (Func64) rounded once
// to T.
func floatUnary[T float](o tile.Op) func(T) T {
	switch o {
	case tile.OpNeg:
		return func(a T) T { return -a }
	case tile.OpSign:
		return func(a T) T {
			switch {
			case a > 0:
				return 1
			case a < 0:
				return -1
			}
			return a // ±0 and NaN
		}
	}
	if f, ok := Func64(o); ok {
		return func(a T) T { return T(f(float64(a))) }
	}
	return nil
}

func intUnary[T integer](o tile.Op) func(T) T {
	switch o {
	case tile.OpNeg:
		return func(a T) T { return -a }
	case tile.OpNot:
		return func(a T) T { return ^a }
	case tile.OpAbs:
		return func(a T) T {
			if a < 0 {
				return -a
			}
			return a
		}
	case tile.OpSign:
		return func(a T) T {
			switch {
			case a > 0:
				return 1
			case a < 0:
				return -1
			}
			return 0
		}
	}
	return nil
}

func selectOp(v *tile.Value, c []bool, a, b any) (any, error) {
	switch a := a.(type) {
	case []bool:
		return pick(c, a, b.([]bool)), nil
	case []int32:
		return pick(c, a, b.([]int32)), nil
	case []int64:
		return pick(c, a, b.([]int64)), nil
	case []float32:
		return pick(c, a, b.([]float32)), nil
	case []float64:
		return pick(c, a, b.([]float64)), nil
	}
	return nil, fault(v, "select of %T", a)
}

func pick[T any](c []bool, a, b []T) []T {
	d := make([]T, len(c))
	for i := range d {
		if c[i] {
			d[i] = a[i]
		} else {
			d[i] = b[i]
		}
	}
	return d
}

// ---- casts ----

func cast(v *tile.Value, x any) (any, error) {
	to := v.Type.DType
	switch x := x.(type) {
	case []bool:
		switch to {
		case tile.I1:
			return append([]bool(nil), x...), nil
		case tile.I32:
			return map1(x, fromBool[int32]), nil
		case tile.I64:
			return map1(x, fromBool[int64]), nil
		case tile.F32:
			return map1(x, fromBool[float32]), nil
		case tile.F64:
			return map1(x, fromBool[float64]), nil
		}
	case []int32:
		return castFrom(to, x)
	case []int64:
		return castFrom(to, x)
	case []float32:
		return castFrom(to, x)
	case []float64:
		return castFrom(to, x)
	}
	return nil, fault(v, "cast of %v to %v", v.Args[0].Type, to)
}

func fromBool[D number](a bool) D {
	if a {
		return 1
	}
	return 0
}

func castFrom[S number](to tile.DType, x []S) (any, error) {
	switch to {
	case tile.I1:
		return map1(x, func(a S) bool { return a != 0 }), nil
	case tile.I32:
		return map1(x, convert[S, int32]), nil
	case tile.I64:
		return map1(x, convert[S, int64]), nil
	case tile.F32:
		return map1(x, convert[S, float32]), nil
	case tile.F64:
		return map1(x, convert[S, float64]), nil
	}
	return nil, nil
}

// convert is Go's conversion, except that a float becomes an integer by
// truncating toward zero and saturating, NaN giving 0 (PTX cvt.rzi.sat).
func convert[S, D number](a S) D {
	var zd D
	var lo, hi int64
	switch any(zd).(type) {
	case int32:
		lo, hi = math.MinInt32, math.MaxInt32
	case int64:
		lo, hi = math.MinInt64, math.MaxInt64
	default:
		return D(a)
	}
	switch any(a).(type) {
	case float32, float64:
		switch x := float64(a); {
		case x != x:
			return 0
		case x <= float64(lo):
			return D(lo)
		case x >= float64(hi):
			return D(hi)
		default:
			return D(x)
		}
	}
	return D(a)
}

// ---- reductions ----

// reduce combines the elements along axis Aux in order: a sum adds them one
// by one from the first, in the dtype; max and min keep NaN once seen.
func reduce(v *tile.Value, x any) (any, error) {
	switch x := x.(type) {
	case []float32:
		return reduceAxis(v, x), nil
	case []float64:
		return reduceAxis(v, x), nil
	case []int32:
		return reduceAxis(v, x), nil
	case []int64:
		return reduceAxis(v, x), nil
	}
	return nil, fault(v, "%v of %v", v.Op, v.Args[0].Type)
}

func reduceAxis[T number](v *tile.Value, x []T) []T {
	s := v.Args[0].Type.Shape
	ax := int(v.Aux)
	outer, n, inner := 1, s.Dims[ax], 1
	for i := 0; i < ax; i++ {
		outer *= s.Dims[i]
	}
	for i := ax + 1; i < s.Rank; i++ {
		inner *= s.Dims[i]
	}
	d := make([]T, outer*inner)
	for o := 0; o < outer; o++ {
		for in := 0; in < inner; in++ {
			at := func(k int) T { return x[(o*n+k)*inner+in] }
			r := at(0)
			for k := 1; k < n; k++ {
				switch p := at(k); v.Op {
				case tile.OpReduceSum:
					r += p
				case tile.OpReduceMax:
					if p > r || p != p {
						r = p
					}
				case tile.OpReduceMin:
					if p < r || p != p {
						r = p
					}
				}
			}
			d[o*inner+in] = r
		}
	}
	return d
}

// ---- dot ----

// dot is acc + a·b: each result element starts from acc's and adds a[i,k]·
// b[k,j] for k = 0, 1, …, each product rounded to the dtype before the
// add. With PrecTF32, f32 operand a is first truncated to TF32
// (tile.TruncTF32) and b rounded to TF32 (tile.RoundTF32), with
// PrecTF32TB a rounded and b truncated; with PrecBF16
// both are rounded to bfloat16; with PrecTF32x3 it is acc + a_lo·b_hi + a_hi·b_lo + a_hi·b_hi,
// three such dots in that order, of the operands' TF32 parts (tile.SplitTF32).
func dot(v *tile.Value, a, b, acc any) (any, error) {
	m, k, n := v.Args[0].Type.Shape.Dims[0], v.Args[0].Type.Shape.Dims[1], v.Args[1].Type.Shape.Dims[1]
	switch a := a.(type) {
	case []float32:
		b := b.([]float32)
		if ca, cb := v.Prec.Operands(); ca != nil {
			a, b = map1(a, ca), map1(b, cb)
		}
		if v.Prec == tile.PrecTF32x3 {
			hi := func(x float32) float32 { h, _ := tile.SplitTF32(x); return h }
			lo := func(x float32) float32 { _, l := tile.SplitTF32(x); return l }
			ahi, alo, bhi, blo := map1(a, hi), map1(a, lo), map1(b, hi), map1(b, lo)
			d := dotL(alo, bhi, acc.([]float32), m, k, n)
			d = dotL(ahi, blo, d, m, k, n)
			return dotL(ahi, bhi, d, m, k, n), nil
		}
		return dotL(a, b, acc.([]float32), m, k, n), nil
	case []float64:
		return dotL(a, b.([]float64), acc.([]float64), m, k, n), nil
	}
	return nil, fault(v, "dot of %v", v.Args[0].Type)
}

func dotL[T float](a, b, acc []T, m, k, n int) []T {
	d := append([]T(nil), acc...)
	for i := 0; i < m; i++ {
		row := d[i*n : i*n+n]
		for kk := 0; kk < k; kk++ {
			aik := a[i*k+kk]
			for j, bkj := range b[kk*n : kk*n+n] {
				row[j] += T(aik * bkj) // the conversion rounds: no fused multiply-add
			}
		}
	}
	return d
}
