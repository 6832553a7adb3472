package tile

import "math"

// FoldIntRoundTrips returns a copy of k in which each round trip of a
// float through an integer — cast(cast(x, I), G) with x of float type F, I
// i32 or i64, G a float type, the integer read by such casts back alone —
// is computed in the wider W of F and G:
//
//	select(x' ≠ x', 0, min(max(trunc(x'), lo), hi) + 0)
//
// x' = W(x) (exact), trunc(x') = select(x' < 0, ceil(x'), floor(x')), lo
// and hi W(MinI) and W(MaxI) (MaxInt32 is 2³¹ in f32, 2³¹ − 1 in f64;
// MaxInt64 is 2⁶³ in both), + 0 turning −0 into +0, the result cast to G
// where G is narrower than W: the same value as the casts' for every x
// (they truncate toward zero and saturate, NaN giving 0; the integer they
// give is exact in W, or W's bound where it saturates, and rounds to G
// once either way). Code generators whose integer blocks must be affine
// in the lanes (codegen/cpu/native) run such a kernel without an integer
// vector. The copy keeps k's parameters, name and value IDs (the new
// values numbered after k's, the integer casts left out); folded is how
// many round trips it replaced. Where there is none it returns k itself.
// k is not changed.
func (k *Kernel) FoldIntRoundTrips() (c *Kernel, folded int) {
	uses := map[*Value][]*Value{}
	k.Walk(func(v *Value) {
		for _, a := range v.Args {
			uses[a] = append(uses[a], v)
		}
	})
	// inner reports whether v is an i32 or i64 cast of a float that only
	// casts to floats read
	inner := func(v *Value) bool {
		if v.Op != OpCast || v.Type.DType != I32 && v.Type.DType != I64 || v.Type.Ptr || len(v.Args) != 1 {
			return false
		}
		f := v.Args[0].Type
		if !f.DType.IsFloat() || f.Ptr || len(uses[v]) == 0 {
			return false
		}
		for _, u := range uses[v] {
			if u.Op != OpCast || !u.Type.DType.IsFloat() {
				return false
			}
		}
		return true
	}
	found := false
	for v := range uses {
		if inner(v) {
			found = true
			break
		}
	}
	if !found {
		return k, 0
	}
	c, m := copyKernel(k)
	var block func(b *Block) *Block
	block = func(b *Block) *Block {
		if b == nil {
			return nil
		}
		nb := copyArgs(b, k, c, m)
		emit := emitter(c, nb)
		for _, v := range b.Values {
			if inner(v) {
				continue // read only by the casts back, which fold
			}
			if v.Op == OpCast && len(v.Args) == 1 && inner(v.Args[0]) {
				m[v] = foldRoundTrip(m[v.Args[0].Args[0]], v.Args[0].Type.DType, v.Type.DType, emit)
				folded++
				continue
			}
			q := copyValue(v, k, c, m)
			if v.Op == OpFor {
				q.Body = block(v.Body)
			}
			m[v] = q
			nb.Values = append(nb.Values, q)
		}
		return nb
	}
	c.Body = block(k.Body)
	return c, folded
}

// foldRoundTrip emits to(I(x)) for an integer type it = I (i32 or i64)
// and a float type to, computed in the wider of x's float type and to
// (the formula of FoldIntRoundTrips), and returns it.
func foldRoundTrip(x *Value, it, to DType, emit func(Op, Type, ...*Value) *Value) *Value {
	w := x.Type.DType
	if to == F64 {
		w = F64
	}
	t := x.Type.WithDType(w)
	if x.Type.DType != w {
		x = emit(OpCast, t, x) // exact
	}
	lo, hi := float64(math.MinInt32), float64(math.MaxInt32)
	if it == I64 {
		lo, hi = math.MinInt64, math.MaxInt64 // 2⁶³ in both float types
	}
	if w == F32 {
		hi = float64(float32(hi)) // 2³¹: what MaxInt32 becomes in f32
	}
	splat := func(f float64) *Value {
		v := emit(OpConst, ScalarOf(w))
		v.AuxF = f
		if t.Shape.IsScalar() {
			return v
		}
		return emit(OpSplat, t, v)
	}
	zero, low, top := splat(0), splat(lo), splat(hi)
	b := t.WithDType(I1)
	nan := emit(OpNe, b, x, x)
	neg := emit(OpLt, b, x, zero)
	tr := emit(OpSelect, t, neg, emit(OpCeil, t, x), emit(OpFloor, t, x))
	cl := emit(OpMin, t, emit(OpMax, t, tr, low), top)
	r := emit(OpSelect, t, nan, zero, emit(OpAdd, t, cl, zero))
	if to != w {
		r = emit(OpCast, x.Type.WithDType(to), r) // rounds once, as to(I(x)) does
	}
	return r
}
