package tile

import "fmt"

// VerifyError is a rule of the IR that a kernel breaks.
type VerifyError struct {
	Kernel string
	Value  string // the offending value's line in the text dump ("" for kernel-level faults)
	Msg    string
}

func (e *VerifyError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("tile: verify @%s: %s", e.Kernel, e.Msg)
	}
	return fmt.Sprintf("tile: verify @%s: %s: %s", e.Kernel, e.Value, e.Msg)
}

// Verify checks that k is well formed: every type legal (power-of-two block
// dimensions, rank ≤ 3, pointers to f32/f64/i32 only), every value defined
// before it is used and visible where it is used, and each op's operand and
// result types as ops.go states them. It returns the first fault found.
func (k *Kernel) Verify() error {
	n := k.size() // values, parameters and loop arguments
	v := &verifier{k: k, defined: make(map[*Value]bool, n), ids: make(map[int]*Value, n), roots: make(map[*Value]*Value, n)}
	if k.Name == "" {
		return v.fail(nil, "kernel has no name")
	}
	if k.Body == nil {
		return v.fail(nil, "kernel has no body")
	}
	names := map[string]bool{}
	for i, p := range k.Params {
		if p == nil || p.Op != OpParam {
			return v.fail(p, fmt.Sprintf("parameter %d is not an OpParam", i))
		}
		if p.Aux != int64(i) {
			return v.fail(p, fmt.Sprintf("parameter %d says it is number %d", i, p.Aux))
		}
		if p.Name == "" || names[p.Name] {
			return v.fail(p, fmt.Sprintf("parameter %d has an empty or repeated name %q", i, p.Name))
		}
		names[p.Name] = true
		if !p.Type.Shape.IsScalar() {
			return v.fail(p, "a parameter must be a scalar or a scalar pointer")
		}
		if err := v.checkType(p); err != nil {
			return err
		}
		if err := v.define(p, nil); err != nil {
			return err
		}
	}
	return v.block(k.Body, nil)
}

type verifier struct {
	k       *Kernel
	defined map[*Value]bool // values visible at this point
	ids     map[int]*Value
	roots   map[*Value]*Value // pointer value → its parameter
}

func (vr *verifier) fail(v *Value, msg string) error {
	e := &VerifyError{Kernel: vr.k.Name, Msg: msg}
	if v != nil {
		e.Value = v.String()
	}
	return e
}

func (vr *verifier) define(v *Value, loop *Value) error {
	if other, ok := vr.ids[v.ID]; ok && other != v {
		return vr.fail(v, fmt.Sprintf("value ID %d is used twice", v.ID))
	}
	if v.ID >= vr.k.nextID && vr.k.nextID != 0 {
		return vr.fail(v, fmt.Sprintf("value ID %d is not below the kernel's NumValues %d", v.ID, vr.k.nextID))
	}
	vr.ids[v.ID] = v
	vr.defined[v] = true
	if v.Type.Ptr {
		r := rootOf(vr.roots, v, loop)
		if r == nil {
			return vr.fail(v, "pointer does not derive from a pointer parameter")
		}
		vr.roots[v] = r
	}
	return nil
}

// block checks the values of b in order. loop is the OpFor whose body b is, or nil.
func (vr *verifier) block(b *Block, loop *Value) error {
	var local []*Value
	defer func() {
		for _, v := range local {
			delete(vr.defined, v)
		}
	}()
	for _, a := range b.Args {
		if a == nil || a.Op != OpBlockArg {
			return vr.fail(a, "a block argument must be an OpBlockArg")
		}
		if err := vr.define(a, loop); err != nil {
			return err
		}
		local = append(local, a)
	}
	for i, v := range b.Values {
		if v == nil {
			return vr.fail(nil, fmt.Sprintf("nil value at position %d", i))
		}
		for j, a := range v.Args {
			if a == nil {
				return vr.fail(v, fmt.Sprintf("operand %d is nil", j))
			}
			if a.kernel != nil && a.kernel != vr.k {
				return vr.fail(v, fmt.Sprintf("operand %s is from kernel @%s", a.ref(), a.kernel.Name))
			}
			if !vr.defined[a] {
				return vr.fail(v, fmt.Sprintf("operand %s is used before its definition or outside its loop", a.ref()))
			}
		}
		if v.Op == OpYield {
			if loop == nil {
				return vr.fail(v, "yield outside a loop body")
			}
			if i != len(b.Values)-1 {
				return vr.fail(v, "yield must end its loop body")
			}
		}
		if err := vr.value(v, loop); err != nil {
			return err
		}
		if v.Op == OpFor {
			if err := vr.block(v.Body, v); err != nil {
				return err
			}
		}
		if err := vr.define(v, loop); err != nil {
			return err
		}
		local = append(local, v)
	}
	if loop != nil && (len(b.Values) == 0 || b.Values[len(b.Values)-1].Op != OpYield) {
		return vr.fail(loop, "loop body does not end in yield")
	}
	return nil
}

func (vr *verifier) checkType(v *Value) error {
	t := v.Type
	if t.DType >= numDTypes {
		return vr.fail(v, fmt.Sprintf("unknown dtype %v", t.DType))
	}
	if t.Ptr && t.DType != F32 && t.DType != F64 && t.DType != I32 {
		return vr.fail(v, fmt.Sprintf("pointer to %v: pointers are to f32, f64 or i32", t.DType))
	}
	if t.IsVoid() && t.Shape.Rank != 0 {
		return vr.fail(v, "a void value has a shape")
	}
	if err := checkShape(t.Shape); err != nil {
		return vr.fail(v, err.Error())
	}
	return nil
}

func (vr *verifier) nargs(v *Value, lo, hi int) error {
	if len(v.Args) < lo || len(v.Args) > hi {
		if lo == hi {
			return vr.fail(v, fmt.Sprintf("%v takes %d operands, has %d", v.Op, lo, len(v.Args)))
		}
		return vr.fail(v, fmt.Sprintf("%v takes %d to %d operands, has %d", v.Op, lo, hi, len(v.Args)))
	}
	return nil
}

func (vr *verifier) sameType(v *Value, a, b *Value) error {
	if a.Type != b.Type {
		return vr.fail(v, fmt.Sprintf("operand types differ: %v and %v", a.Type, b.Type))
	}
	return nil
}

func (vr *verifier) isScalarInt(v, a *Value, what string) error {
	if !a.Type.Shape.IsScalar() || a.Type.Ptr || !a.Type.DType.IsInt() {
		return vr.fail(v, fmt.Sprintf("%s must be a scalar i32 or i64, is %v", what, a.Type))
	}
	return nil
}

// value checks the operands and result type of v.
func (vr *verifier) value(v *Value, loop *Value) error {
	if v.Op == OpInvalid || v.Op >= numOps {
		return vr.fail(v, "invalid op")
	}
	if err := vr.checkType(v); err != nil {
		return err
	}
	t := v.Type
	switch c := v.Op.info().class; {
	case v.Op == OpParam:
		return vr.fail(v, "a parameter inside the body")
	case v.Op == OpBlockArg:
		return vr.fail(v, "a block argument among a block's values")
	case v.Op == OpConst:
		if err := vr.nargs(v, 0, 0); err != nil {
			return err
		}
		if !t.Shape.IsScalar() || !t.IsNumeric() {
			return vr.fail(v, "a constant is a numeric scalar")
		}
	case v.Op == OpProgramID || v.Op == OpNumPrograms:
		if err := vr.nargs(v, 0, 0); err != nil {
			return err
		}
		if v.Aux < 0 || v.Aux > 2 {
			return vr.fail(v, fmt.Sprintf("axis %d is outside 0..2", v.Aux))
		}
		if t != ScalarOf(I32) {
			return vr.fail(v, "result must be i32")
		}
	case v.Op == OpArange:
		if err := vr.nargs(v, 0, 0); err != nil {
			return err
		}
		n := v.Aux2 - v.Aux
		if !isBlockDim(int(n)) {
			return vr.fail(v, fmt.Sprintf("range {%d, %d} has size %d, not a power of two (nor three times one, at least 96)", v.Aux, v.Aux2, n))
		}
		if t != BlockOf(I32, int(n)) {
			return vr.fail(v, fmt.Sprintf("result must be tensor<%dxi32>", n))
		}
	case c == classShape:
		return vr.shapeOp(v)
	case c == classMemory:
		return vr.memoryOp(v)
	case c == classBinary || c == classCompare:
		if err := vr.nargs(v, 2, 2); err != nil {
			return err
		}
		a, b := v.Args[0], v.Args[1]
		if err := vr.sameType(v, a, b); err != nil {
			return err
		}
		if !a.Type.IsNumeric() || !v.Op.accepts(a.Type.DType) {
			return vr.fail(v, fmt.Sprintf("%v is not defined on %v", v.Op, a.Type))
		}
		want := a.Type
		if c == classCompare {
			want = a.Type.WithDType(I1)
		}
		if t != want {
			return vr.fail(v, fmt.Sprintf("result type %v, want %v", t, want))
		}
	case c == classUnary:
		if err := vr.nargs(v, 1, 1); err != nil {
			return err
		}
		a := v.Args[0]
		if !a.Type.IsNumeric() || !v.Op.accepts(a.Type.DType) {
			return vr.fail(v, fmt.Sprintf("%v is not defined on %v", v.Op, a.Type))
		}
		if t != a.Type {
			return vr.fail(v, fmt.Sprintf("result type %v, want %v", t, a.Type))
		}
		if v.Aux != 0 && (v.Op != OpExp2 || v.Aux != 1) {
			return vr.fail(v, fmt.Sprintf("%v with attribute %d", v.Op, v.Aux))
		}
	case v.Op == OpSelect:
		if err := vr.nargs(v, 3, 3); err != nil {
			return err
		}
		c, a, b := v.Args[0], v.Args[1], v.Args[2]
		if c.Type != a.Type.WithDType(I1) {
			return vr.fail(v, fmt.Sprintf("condition %v must be i1 of the shape of %v", c.Type, a.Type))
		}
		if err := vr.sameType(v, a, b); err != nil {
			return err
		}
		if !a.Type.IsNumeric() {
			return vr.fail(v, "select takes numeric operands, not pointers")
		}
		if t != a.Type {
			return vr.fail(v, fmt.Sprintf("result type %v, want %v", t, a.Type))
		}
	case v.Op == OpCast:
		if err := vr.nargs(v, 1, 1); err != nil {
			return err
		}
		a := v.Args[0]
		if !a.Type.IsNumeric() || !t.IsNumeric() {
			return vr.fail(v, "cast converts numbers, not pointers")
		}
		if a.Type.Shape != t.Shape {
			return vr.fail(v, fmt.Sprintf("cast changes the shape %v to %v", a.Type.Shape, t.Shape))
		}
	case c == classReduce:
		return vr.reduce(v)
	case v.Op == OpDot:
		return vr.dot(v)
	case v.Op == OpFor:
		return vr.forOp(v)
	case v.Op == OpForResult:
		if err := vr.nargs(v, 1, 1); err != nil {
			return err
		}
		f := v.Args[0]
		if f.Op != OpFor || f.Body == nil {
			return vr.fail(v, "for_result of a value that is not a loop")
		}
		i := int(v.Aux)
		if i < 0 || i+1 >= len(f.Body.Args) {
			return vr.fail(v, fmt.Sprintf("the loop has no result #%d", i))
		}
		if t != f.Body.Args[i+1].Type {
			return vr.fail(v, fmt.Sprintf("result type %v, the loop carries %v", t, f.Body.Args[i+1].Type))
		}
	case v.Op == OpYield:
		if !t.IsVoid() {
			return vr.fail(v, "yield has a type")
		}
		carried := loop.Body.Args[1:]
		if len(v.Args) != len(carried) {
			return vr.fail(v, fmt.Sprintf("yield gives %d values, the loop carries %d", len(v.Args), len(carried)))
		}
		for i, a := range v.Args {
			if a.Type != carried[i].Type {
				return vr.fail(v, fmt.Sprintf("yield value %d is %v, the loop carries %v", i, a.Type, carried[i].Type))
			}
			if a.Type.Ptr && vr.roots[a] != vr.roots[loop.Args[3+i]] {
				return vr.fail(v, fmt.Sprintf("yield value %d points into another buffer than the loop's initial value", i))
			}
		}
	default:
		return vr.fail(v, "op has no verifier rule")
	}
	return nil
}

func (vr *verifier) shapeOp(v *Value) error {
	if err := vr.nargs(v, 1, 1); err != nil {
		return err
	}
	a, t := v.Args[0], v.Type
	if a.Type.IsVoid() || a.Type.DType != t.DType || a.Type.Ptr != t.Ptr {
		return vr.fail(v, fmt.Sprintf("%v changes the element type %v to %v", v.Op, a.Type.Elem(), t.Elem()))
	}
	as, ts := a.Type.Shape, t.Shape
	switch v.Op {
	case OpSplat:
		if !as.IsScalar() || ts.IsScalar() {
			return vr.fail(v, fmt.Sprintf("splat goes from a scalar to a block, not %v to %v", as, ts))
		}
	case OpBroadcast:
		if as.Rank != ts.Rank || as.Rank == 0 {
			return vr.fail(v, fmt.Sprintf("broadcast keeps the rank: %v to %v", as, ts))
		}
		for i := 0; i < as.Rank; i++ {
			if as.Dims[i] != ts.Dims[i] && as.Dims[i] != 1 {
				return vr.fail(v, fmt.Sprintf("cannot broadcast %v to %v: dimension %d is %d, not 1", as, ts, i, as.Dims[i]))
			}
		}
	case OpExpandDims:
		ax := int(v.Aux)
		if as.Rank == 0 || ax < 0 || ax > as.Rank || ts.Rank != as.Rank+1 {
			return vr.fail(v, fmt.Sprintf("expand_dims of %v at axis %d to %v", as, ax, ts))
		}
		if want := insertDim(as, ax); want != ts {
			return vr.fail(v, fmt.Sprintf("expand_dims of %v at axis %d gives %v, not %v", as, ax, want, ts))
		}
	case OpReshape:
		if as.IsScalar() || ts.IsScalar() || as.Numel() != ts.Numel() {
			return vr.fail(v, fmt.Sprintf("reshape %v to %v changes the element count", as, ts))
		}
	case OpTrans:
		if as.Rank != 2 || ts != Shp(as.Dims[1], as.Dims[0]) {
			return vr.fail(v, fmt.Sprintf("trans of %v to %v: a 2-D block to its transpose", as, ts))
		}
	}
	return nil
}

func insertDim(s Shape, axis int) Shape {
	d := s.Slice()
	d = append(d[:axis], append([]int{1}, d[axis:]...)...)
	return Shp(d...)
}

func (vr *verifier) memoryOp(v *Value) error {
	t := v.Type
	switch v.Op {
	case OpAddPtr:
		if err := vr.nargs(v, 2, 2); err != nil {
			return err
		}
		p, off := v.Args[0], v.Args[1]
		if !p.Type.Ptr {
			return vr.fail(v, fmt.Sprintf("addptr base %v is not a pointer", p.Type))
		}
		if off.Type.Ptr || !off.Type.DType.IsInt() || off.Type.Shape != p.Type.Shape {
			return vr.fail(v, fmt.Sprintf("addptr offset %v must be i32 or i64 of the pointer's shape %v", off.Type, p.Type.Shape))
		}
		if t != p.Type {
			return vr.fail(v, fmt.Sprintf("result type %v, want %v", t, p.Type))
		}
	case OpLoad:
		if err := vr.nargs(v, 1, 3); err != nil {
			return err
		}
		if v.Aux < 0 || v.Aux >= int64(numCacheHints) {
			return vr.fail(v, fmt.Sprintf("unknown cache hint %d", v.Aux))
		}
		p := v.Args[0]
		if !p.Type.Ptr {
			return vr.fail(v, fmt.Sprintf("load from %v, not a pointer", p.Type))
		}
		want := Type{DType: p.Type.DType, Shape: p.Type.Shape}
		if len(v.Args) >= 2 {
			if err := vr.mask(v, v.Args[1], p); err != nil {
				return err
			}
		}
		if len(v.Args) == 3 && v.Args[2].Type != want {
			return vr.fail(v, fmt.Sprintf("other %v must be %v", v.Args[2].Type, want))
		}
		if t != want {
			return vr.fail(v, fmt.Sprintf("result type %v, want %v", t, want))
		}
	case OpStore, OpAtomicAdd:
		if err := vr.nargs(v, 2, 3); err != nil {
			return err
		}
		if v.Aux < 0 || v.Aux >= int64(numCacheHints) || v.Op == OpAtomicAdd && v.Aux != 0 {
			return vr.fail(v, fmt.Sprintf("unknown cache hint %d", v.Aux))
		}
		if CacheHint(v.Aux) == CacheKeep {
			return vr.fail(v, "the keep cache hint is for loads; a store takes streaming or none")
		}
		p, x := v.Args[0], v.Args[1]
		if !p.Type.Ptr {
			return vr.fail(v, fmt.Sprintf("%v to %v, not a pointer", v.Op, p.Type))
		}
		elem := Type{DType: p.Type.DType, Shape: p.Type.Shape}
		if x.Type != elem {
			return vr.fail(v, fmt.Sprintf("value %v must be %v to match pointer %v", x.Type, elem, p.Type))
		}
		if len(v.Args) == 3 {
			if err := vr.mask(v, v.Args[2], p); err != nil {
				return err
			}
		}
		want := elem
		if v.Op == OpStore {
			want = Type{}
		}
		if t != want {
			return vr.fail(v, fmt.Sprintf("result type %v, want %v", t, want))
		}
	}
	return nil
}

func (vr *verifier) mask(v, m, p *Value) error {
	if m.Type != (Type{DType: I1, Shape: p.Type.Shape}) {
		return vr.fail(v, fmt.Sprintf("mask %v does not match pointer %v: want i1 of shape %v", m.Type, p.Type, p.Type.Shape))
	}
	return nil
}

func (vr *verifier) reduce(v *Value) error {
	if err := vr.nargs(v, 1, 1); err != nil {
		return err
	}
	a := v.Args[0]
	if !a.Type.IsNumeric() || !v.Op.accepts(a.Type.DType) {
		return vr.fail(v, fmt.Sprintf("%v is not defined on %v", v.Op, a.Type))
	}
	s := a.Type.Shape
	ax := int(v.Aux)
	if s.IsScalar() || ax < 0 || ax >= s.Rank {
		return vr.fail(v, fmt.Sprintf("axis %d is outside the rank of %v", ax, s))
	}
	if want := a.Type.WithShape(reducedShape(s, ax, v.Aux2 != 0)); v.Type != want {
		return vr.fail(v, fmt.Sprintf("result type %v, want %v", v.Type, want))
	}
	return nil
}

func reducedShape(s Shape, axis int, keep bool) Shape {
	d := s.Slice()
	if keep {
		d[axis] = 1
	} else {
		d = append(d[:axis], d[axis+1:]...)
	}
	return Shp(d...)
}

// MinDotDim is the smallest M, N and K a dot accepts, as on the tensor cores.
const MinDotDim = 16

func (vr *verifier) dot(v *Value) error {
	if err := vr.nargs(v, 3, 3); err != nil {
		return err
	}
	a, b, acc := v.Args[0], v.Args[1], v.Args[2]
	if a.Type.Shape.Rank != 2 || b.Type.Shape.Rank != 2 {
		return vr.fail(v, fmt.Sprintf("dot takes 2-D blocks, not %v and %v", a.Type, b.Type))
	}
	if !a.Type.DType.IsFloat() || a.Type.Ptr || a.Type.DType != b.Type.DType {
		return vr.fail(v, fmt.Sprintf("dot operands %v and %v must be f32 or f64, alike", a.Type, b.Type))
	}
	m, k, k2, n := a.Type.Shape.Dims[0], a.Type.Shape.Dims[1], b.Type.Shape.Dims[0], b.Type.Shape.Dims[1]
	if k != k2 {
		return vr.fail(v, fmt.Sprintf("dot of %v and %v: inner dimensions %d and %d differ", a.Type.Shape, b.Type.Shape, k, k2))
	}
	if m < MinDotDim || n < MinDotDim || k < MinDotDim {
		return vr.fail(v, fmt.Sprintf("dot %dx%dx%d: M, N and K must be at least %d", m, n, k, MinDotDim))
	}
	want := BlockOf(a.Type.DType, m, n)
	if acc.Type != want || v.Type != want {
		return vr.fail(v, fmt.Sprintf("accumulator %v and result %v must be %v", acc.Type, v.Type, want))
	}
	if !v.Prec.Valid() {
		return vr.fail(v, fmt.Sprintf("unknown precision %v", v.Prec))
	}
	return nil
}

func (vr *verifier) forOp(v *Value) error {
	if len(v.Args) < 3 {
		return vr.fail(v, fmt.Sprintf("for takes lower, upper, step and initial values, has %d operands", len(v.Args)))
	}
	for i, what := range []string{"lower bound", "upper bound", "step"} {
		if err := vr.isScalarInt(v, v.Args[i], what); err != nil {
			return err
		}
	}
	lo := v.Args[0].Type
	if v.Args[1].Type != lo || v.Args[2].Type != lo {
		return vr.fail(v, "bounds and step must share one type")
	}
	if !v.Type.IsVoid() {
		return vr.fail(v, "for has a type; its results are for_result values")
	}
	if v.Body == nil {
		return vr.fail(v, "for has no body")
	}
	inits := v.Args[3:]
	if len(v.Body.Args) != 1+len(inits) {
		return vr.fail(v, fmt.Sprintf("body has %d arguments, want the induction variable and %d carried values", len(v.Body.Args), len(inits)))
	}
	for i, a := range v.Body.Args {
		if a == nil || a.Op != OpBlockArg || a.Aux != int64(i) {
			return vr.fail(v, fmt.Sprintf("body argument %d is malformed", i))
		}
		want := lo
		if i > 0 {
			want = inits[i-1].Type
		}
		if a.Type != want {
			return vr.fail(v, fmt.Sprintf("body argument %d is %v, want %v", i, a.Type, want))
		}
	}
	return nil
}

// rootOf says which pointer parameter a pointer value derives from. Select
// does not take pointers, so every pointer has exactly one root, known
// statically; a loop-carried pointer's root is its initial value's.
func rootOf(roots map[*Value]*Value, v *Value, loop *Value) *Value {
	switch v.Op {
	case OpParam:
		return v
	case OpAddPtr, OpSplat, OpBroadcast, OpExpandDims, OpReshape, OpTrans:
		return roots[v.Args[0]]
	case OpForResult:
		f := v.Args[0]
		if 3+int(v.Aux) < len(f.Args) {
			return roots[f.Args[3+v.Aux]]
		}
	case OpBlockArg:
		if loop != nil && v.Aux > 0 && 2+int(v.Aux) < len(loop.Args) {
			return roots[loop.Args[2+v.Aux]]
		}
	}
	return nil
}
