package tile

import "math"

// FoldIntRoundTrips returns a copy of k in which each round trip of a
// float through i32 — cast(cast(x, i32), F) with x of float type F, the
// i32 value read by such casts back to F alone — is computed in F:
//
//	select(x ≠ x, 0, min(max(trunc(x), −2³¹), hi) + 0)
//
// trunc(x) = select(x < 0, ceil(x), floor(x)), hi = F(MaxInt32) (2³¹ in
// f32, where MaxInt32 rounds to it; 2³¹ − 1 in f64), and + 0 turning −0
// into +0: the same value as the casts' for every x (they truncate toward
// zero and saturate, NaN giving 0; every integer they can give is exact in
// F or rounds as the clamp's bound does). Code generators whose integer
// blocks must be affine in the lanes (codegen/cpu/native) run such a
// kernel without an integer vector. The copy keeps k's parameters, name
// and value IDs (the new values numbered after k's, the i32 casts left
// out); folded is how many round trips it replaced. Where there is none
// it returns k itself. k is not changed.
func (k *Kernel) FoldIntRoundTrips() (c *Kernel, folded int) {
	uses := map[*Value][]*Value{}
	k.Walk(func(v *Value) {
		for _, a := range v.Args {
			uses[a] = append(uses[a], v)
		}
	})
	// inner reports whether v is an i32 cast of a float that only casts
	// back to that float read
	inner := func(v *Value) bool {
		if v.Op != OpCast || v.Type.DType != I32 || v.Type.Ptr || len(v.Args) != 1 {
			return false
		}
		f := v.Args[0].Type
		if !f.DType.IsFloat() || f.Ptr || len(uses[v]) == 0 {
			return false
		}
		for _, u := range uses[v] {
			if u.Op != OpCast || u.Type.DType != f.DType {
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
				m[v] = foldRoundTrip(m[v.Args[0].Args[0]], emit)
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

// foldRoundTrip emits F(int32(x)) computed in x's float type (the formula
// of FoldIntRoundTrips) and returns it.
func foldRoundTrip(x *Value, emit func(Op, Type, ...*Value) *Value) *Value {
	t := x.Type
	d := t.DType
	hi := float64(math.MaxInt32)
	if d == F32 {
		hi = float64(float32(hi)) // 2³¹: what MaxInt32 becomes in f32
	}
	splat := func(f float64) *Value {
		v := emit(OpConst, ScalarOf(d))
		v.AuxF = f
		if t.Shape.IsScalar() {
			return v
		}
		return emit(OpSplat, t, v)
	}
	zero, lo, top := splat(0), splat(math.MinInt32), splat(hi)
	b := t.WithDType(I1)
	nan := emit(OpNe, b, x, x)
	neg := emit(OpLt, b, x, zero)
	tr := emit(OpSelect, t, neg, emit(OpCeil, t, x), emit(OpFloor, t, x))
	cl := emit(OpMin, t, emit(OpMax, t, tr, lo), top)
	return emit(OpSelect, t, nan, zero, emit(OpAdd, t, cl, zero))
}
