package tile

import (
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"strings"
)

// Builder writes one kernel. Its methods read like the Triton kernel they
// mirror:
//
//	b := tile.NewBuilder("vec_add", tile.Meta{"BLOCK": 1024})
//	x, y, out, n := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32), b.Ptr("out", tile.F32), b.Param("n", tile.I32)
//	BLOCK := b.BlockSize("BLOCK")
//	offs := b.Add(b.Mul(b.ProgramID(0), BLOCK), b.Arange(0, BLOCK))
//	mask := b.Lt(offs, n)
//	sum := b.Add(b.Load(b.AddPtr(x, offs), mask, nil), b.Load(b.AddPtr(y, offs), mask, nil))
//	b.Store(b.AddPtr(out, offs), sum, mask)
//	k, err := b.Build()
//
// Operands written `any` take a *Value or a Go number. A Go int or float64 is
// a weak literal, as Python numbers are in Triton: it takes the other
// operand's dtype (a float literal beside an int value makes both f32). An
// int32, int64, float32 or bool is a constant of that dtype.
//
// Binary operands are promoted (i1 < i32 < i64 < f32 < f64) and broadcast
// (numpy rules: scalars splat, missing leading dimensions and dimensions of
// size 1 repeat). The first mistake is recorded with the caller's file and
// line; later calls do nothing and Build returns that error. No method panics.
type Builder struct {
	k    *Kernel
	cur  *Block
	meta Meta
	err  error
	// index64: ProgramID, NumPrograms and Arange give i64 values (Index64)
	index64 bool
}

// Index64 makes the builder's index sources, ProgramID, NumPrograms and
// Arange, give i64 values (their i32 values cast), so that the offsets a
// kernel computes from them, with Go integers taking their dtype, are
// 64-bit: for tensors of 2³¹ elements or more.
func (b *Builder) Index64() { b.index64 = true }

// NewBuilder starts a kernel named name, specialised for meta.
func NewBuilder(name string, meta Meta) *Builder {
	m := Meta{}
	for k, v := range meta {
		m[k] = v
	}
	k := &Kernel{Name: name, Meta: m, Body: &Block{}}
	return &Builder{k: k, cur: k.Body, meta: m}
}

// Err is the first error recorded, or nil.
func (b *Builder) Err() error { return b.err }

// Build verifies and returns the kernel, or the first error.
func (b *Builder) Build() (*Kernel, error) {
	if b.err != nil {
		return nil, b.err
	}
	if b.cur != b.k.Body {
		return nil, fmt.Errorf("tile: @%s: Build called inside a loop body", b.k.Name)
	}
	if err := b.k.Verify(); err != nil {
		return nil, err
	}
	return b.k, nil
}

// BuildError is a mistake made while building a kernel.
type BuildError struct {
	Kernel string
	Where  string // file:line of the call that made it
	Op     string
	Msg    string
}

func (e *BuildError) Error() string {
	return fmt.Sprintf("tile: @%s: %s: %s: %s", e.Kernel, e.Where, e.Op, e.Msg)
}

var tileDir = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}()

// caller finds the first frame outside this package's non-test files.
func caller() string {
	pcs := make([]uintptr, 16)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if filepath.Dir(f.File) != tileDir || strings.HasSuffix(f.File, "_test.go") {
			return fmt.Sprintf("%s:%d", filepath.Base(f.File), f.Line)
		}
		if !more {
			return "?"
		}
	}
}

// fail records the first error and returns a detached poison value of type t.
func (b *Builder) fail(op string, t Type, format string, args ...any) *Value {
	if b.err == nil {
		b.err = &BuildError{Kernel: b.k.Name, Where: caller(), Op: op, Msg: fmt.Sprintf(format, args...)}
	}
	return &Value{Op: OpInvalid, Type: t}
}

func (b *Builder) poison(t Type) *Value { return &Value{Op: OpInvalid, Type: t} }

// emit appends a new value to the current block.
func (b *Builder) emit(op Op, t Type, args ...*Value) *Value {
	v := &Value{ID: b.k.nextID, Op: op, Type: t, Args: args, kernel: b.k}
	b.k.nextID++
	b.cur.Values = append(b.cur.Values, v)
	return v
}

// ---- parameters and meta-parameters ----

func (b *Builder) param(name string, t Type) *Value {
	if b.err != nil {
		return b.poison(t)
	}
	if name == "" || b.k.Param(name) != nil {
		return b.fail("param", t, "parameter name %q is empty or already taken", name)
	}
	v := &Value{ID: b.k.nextID, Op: OpParam, Type: t, Name: name, Aux: int64(len(b.k.Params)), kernel: b.k}
	b.k.nextID++
	b.k.Params = append(b.k.Params, v)
	return v
}

// Ptr declares a pointer parameter to elements of d (f32, f64 or i32).
func (b *Builder) Ptr(name string, d DType) *Value {
	if d != F32 && d != F64 && d != I32 {
		return b.fail("param", PtrTo(d), "pointer %s to %v: pointers are to f32, f64 or i32", name, d)
	}
	return b.param(name, PtrTo(d))
}

// Param declares a scalar parameter of dtype d.
func (b *Builder) Param(name string, d DType) *Value {
	if d == Void || d >= numDTypes {
		return b.fail("param", ScalarOf(I32), "scalar %s of dtype %v", name, d)
	}
	return b.param(name, ScalarOf(d))
}

// Meta returns the meta-parameter name; a missing one is an error.
func (b *Builder) Meta(name string) int {
	v, ok := b.meta[name]
	if !ok && b.err == nil {
		b.fail("meta", Type{}, "meta-parameter %s is not set (have %v)", name, b.meta)
		return 1
	}
	return v
}

// BlockSize returns the meta-parameter name, which must be a block
// dimension (a power of two, or three times one and at least 96).
func (b *Builder) BlockSize(name string) int {
	v := b.Meta(name)
	if !isBlockDim(v) {
		if b.err == nil {
			b.fail("meta", Type{}, "block size %s = %d is not a power of two (nor three times one, at least 96)", name, v)
		}
		return 1
	}
	return v
}

// ---- sources ----

// ProgramID is this program instance's coordinate along axis (0, 1 or 2).
func (b *Builder) ProgramID(axis int) *Value { return b.index(b.gridQuery(OpProgramID, axis)) }

// NumPrograms is the grid's size along axis (0, 1 or 2).
func (b *Builder) NumPrograms(axis int) *Value { return b.index(b.gridQuery(OpNumPrograms, axis)) }

// index is x, an i32 index source, cast to i64 where the builder was asked
// for 64-bit indices (Index64).
func (b *Builder) index(x *Value) *Value {
	if !b.index64 {
		return x
	}
	return b.Cast(x, I64)
}

func (b *Builder) gridQuery(op Op, axis int) *Value {
	t := ScalarOf(I32)
	if b.err != nil {
		return b.poison(t)
	}
	if axis < 0 || axis > 2 {
		return b.fail(op.String(), t, "axis %d is outside 0..2", axis)
	}
	v := b.emit(op, t)
	v.Aux = int64(axis)
	return v
}

// Arange is the i32 block [start, end) (Triton's arange); end-start must be a
// block dimension (a power of two, or three times one and at least 96).
func (b *Builder) Arange(start, end int) *Value {
	n := end - start
	t := BlockOf(I32, max(n, 1))
	if b.err != nil {
		return b.poison(t)
	}
	if !isBlockDim(n) {
		return b.fail("make_range", t, "range {%d, %d} has size %d, not a power of two (nor three times one, at least 96)", start, end, n)
	}
	if start < math.MinInt32 || end > math.MaxInt32 {
		return b.fail("make_range", t, "range {%d, %d} does not fit i32", start, end)
	}
	v := b.emit(OpArange, t)
	v.Aux, v.Aux2 = int64(start), int64(end)
	return b.index(v)
}

// Const is a scalar constant x of dtype d.
func (b *Builder) Const(x float64, d DType) *Value {
	t := ScalarOf(d)
	if b.err != nil {
		return b.poison(t)
	}
	v := b.emit(OpConst, t)
	switch {
	case d.IsFloat():
		if d == F32 {
			x = float64(float32(x))
		}
		v.AuxF = x
	case d == I1:
		if x != 0 {
			v.Aux = 1
		}
	case d == I32:
		if x != math.Trunc(x) || x < math.MinInt32 || x > math.MaxInt32 {
			return b.fail("const", t, "%v is not an i32", x)
		}
		v.Aux = int64(x)
	case d == I64:
		if x != math.Trunc(x) || x < math.MinInt64 || x >= math.MaxInt64 {
			return b.fail("const", t, "%v is not an i64", x)
		}
		v.Aux = int64(x)
	default:
		return b.fail("const", t, "constant of dtype %v", d)
	}
	return v
}

// I32 is an i32 constant.
func (b *Builder) I32(x int) *Value { return b.Const(float64(x), I32) }

// I64 is an i64 constant.
func (b *Builder) I64(x int64) *Value {
	v := b.Const(0, I64)
	if v.Op == OpConst {
		v.Aux = x
	}
	return v
}

// F32 is an f32 constant.
func (b *Builder) F32(x float64) *Value { return b.Const(x, F32) }

// F64 is an f64 constant.
func (b *Builder) F64(x float64) *Value { return b.Const(x, F64) }

// Bool is an i1 constant.
func (b *Builder) Bool(x bool) *Value {
	if x {
		return b.Const(1, I1)
	}
	return b.Const(0, I1)
}

// Full is a block of the given dims with every element x of dtype d (tl.full).
func (b *Builder) Full(x float64, d DType, dims ...int) *Value {
	return b.Splat(b.Const(x, d), Shp(dims...))
}

// Zeros is a block of zeros of dtype d (tl.zeros).
func (b *Builder) Zeros(d DType, dims ...int) *Value { return b.Full(0, d, dims...) }

// ---- shape ops ----

// checkArg reports a nil or poisoned operand, or one this Builder did not
// make.
func (b *Builder) checkArg(op string, vs ...*Value) bool {
	if b.err != nil {
		return false
	}
	for i, v := range vs {
		if v == nil {
			b.fail(op, Type{}, "operand %d is nil", i)
			return false
		}
		if v.kernel != b.k {
			if v.kernel == nil {
				b.fail(op, Type{}, "operand %d (%s) was not made by a Builder", i, v.ref())
			} else {
				b.fail(op, Type{}, "operand %d: value %s is from builder @%s", i, v.ref(), v.kernel.Name)
			}
			return false
		}
		if v.Type.IsVoid() {
			b.fail(op, Type{}, "operand %d (%s) has no value", i, v.ref())
			return false
		}
	}
	return true
}

// Splat makes a block of shape s from scalar x.
func (b *Builder) Splat(x *Value, s Shape) *Value {
	if !b.checkArg("splat", x) {
		return b.poison(typeOr(x).WithShape(s))
	}
	t := x.Type.WithShape(s)
	if !x.Type.Shape.IsScalar() {
		return b.fail("splat", t, "splat of %v: not a scalar", x.Type)
	}
	if s.IsScalar() {
		return x
	}
	if err := checkShape(s); err != nil {
		return b.fail("splat", t, "%v", err)
	}
	return b.emit(OpSplat, t, x)
}

func typeOr(x *Value) Type {
	if x == nil {
		return Type{}
	}
	return x.Type
}

// ExpandDims inserts a dimension of size 1 at axis (x[:, None] is axis 1).
func (b *Builder) ExpandDims(x *Value, axis int) *Value {
	if !b.checkArg("expand_dims", x) {
		return b.poison(typeOr(x))
	}
	s := x.Type.Shape
	if s.IsScalar() || axis < 0 || axis > s.Rank || s.Rank == MaxRank {
		return b.fail("expand_dims", x.Type, "axis %d of %v: allowed 0..%d, rank below %d", axis, x.Type, s.Rank, MaxRank)
	}
	v := b.emit(OpExpandDims, x.Type.WithShape(insertDim(s, axis)), x)
	v.Aux = int64(axis)
	return v
}

// Reshape gives x the shape dims, keeping the row-major order of its elements.
func (b *Builder) Reshape(x *Value, dims ...int) *Value {
	s := Shp(dims...)
	if !b.checkArg("reshape", x) {
		return b.poison(typeOr(x).WithShape(s))
	}
	t := x.Type.WithShape(s)
	if err := checkShape(s); err != nil {
		return b.fail("reshape", t, "%v", err)
	}
	if x.Type.Shape.IsScalar() || s.IsScalar() || s.Numel() != x.Type.Shape.Numel() {
		return b.fail("reshape", t, "cannot reshape %v to %v", x.Type, s)
	}
	if s == x.Type.Shape {
		return x
	}
	return b.emit(OpReshape, t, x)
}

// Trans transposes a 2-D block.
func (b *Builder) Trans(x *Value) *Value {
	if !b.checkArg("trans", x) {
		return b.poison(typeOr(x))
	}
	s := x.Type.Shape
	if s.Rank != 2 {
		return b.fail("trans", x.Type, "trans of %v: a 2-D block is needed", x.Type)
	}
	return b.emit(OpTrans, x.Type.WithShape(Shp(s.Dims[1], s.Dims[0])), x)
}

// BroadcastShapes is the shape two operands broadcast to under numpy rules.
func BroadcastShapes(a, c Shape) (Shape, error) {
	if a.Rank < c.Rank {
		a, c = c, a
	}
	out := a
	off := a.Rank - c.Rank
	for i := 0; i < c.Rank; i++ {
		x, y := a.Dims[off+i], c.Dims[i]
		switch {
		case x == y:
		case x == 1:
			out.Dims[off+i] = y
		case y == 1:
		default:
			return Shape{}, fmt.Errorf("shapes %v and %v do not broadcast (dimension %d: %d vs %d)", a, c, off+i, x, y)
		}
	}
	return out, nil
}

// BroadcastTo broadcasts x to shape s: a scalar splats, missing leading
// dimensions are added, dimensions of size 1 repeat.
func (b *Builder) BroadcastTo(x *Value, s Shape) *Value {
	if !b.checkArg("broadcast", x) {
		return b.poison(typeOr(x).WithShape(s))
	}
	xs := x.Type.Shape
	if xs == s {
		return x
	}
	t := x.Type.WithShape(s)
	if got, err := BroadcastShapes(xs, s); err != nil || got != s {
		return b.fail("broadcast", t, "cannot broadcast %v to %v", x.Type, t)
	}
	if xs.IsScalar() {
		return b.Splat(x, s)
	}
	for x.Type.Shape.Rank < s.Rank {
		x = b.ExpandDims(x, 0)
	}
	if x.Type.Shape == s {
		return x
	}
	return b.emit(OpBroadcast, t, x)
}

// ---- literals, promotion, broadcasting ----

type operand struct {
	v     *Value
	weak  bool // a Go int or float64: takes the other operand's dtype
	float bool
	x     float64
}

func (b *Builder) operand(op string, x any) (operand, bool) {
	if b.err != nil {
		return operand{}, false
	}
	switch x := x.(type) {
	case nil:
		b.fail(op, Type{}, "operand is nil")
		return operand{}, false
	case *Value:
		if !b.checkArg(op, x) {
			return operand{}, false
		}
		return operand{v: x}, true
	case int:
		return operand{weak: true, x: float64(x)}, true
	case float64:
		return operand{weak: true, float: true, x: x}, true
	case int32:
		return operand{v: b.Const(float64(x), I32)}, true
	case int64:
		return operand{v: b.I64(x)}, true
	case float32:
		return operand{v: b.Const(float64(x), F32)}, true
	case bool:
		return operand{v: b.Bool(x)}, true
	}
	b.fail(op, Type{}, "operand of Go type %T: want *tile.Value or a number", x)
	return operand{}, false
}

// rank of dtypes for promotion
func promoteRank(d DType) int {
	switch d {
	case I1:
		return 0
	case I32:
		return 1
	case I64:
		return 2
	case F32:
		return 3
	case F64:
		return 4
	}
	return -1
}

// materialize turns a weak literal into a constant of dtype d.
func (b *Builder) materialize(o operand, d DType) *Value {
	if !o.weak {
		return o.v
	}
	if o.float && !d.IsFloat() {
		d = F32
	}
	if d == I1 {
		d = I32
	}
	return b.Const(o.x, d)
}

// Cast converts x to dtype d (a no-op if it already is).
func (b *Builder) Cast(x *Value, d DType) *Value {
	if !b.checkArg("cast", x) {
		return b.poison(typeOr(x).WithDType(d))
	}
	if x.Type.Ptr {
		return b.fail("cast", x.Type, "cast of pointer %v", x.Type)
	}
	if d == Void || d >= numDTypes {
		return b.fail("cast", x.Type, "cast to dtype %v", d)
	}
	if x.Type.DType == d {
		return x
	}
	return b.emit(OpCast, x.Type.WithDType(d), x)
}

// unify makes operands one dtype (promoted) and one shape (broadcast).
func (b *Builder) unify(op string, xs ...any) []*Value {
	ops := make([]operand, len(xs))
	for i, x := range xs {
		o, ok := b.operand(op, x)
		if !ok {
			return nil
		}
		ops[i] = o
	}
	// dtype: the highest of the strong operands; weak floats lift ints to f32
	d, anyStrong, weakFloat := Void, false, false
	for _, o := range ops {
		if o.weak {
			weakFloat = weakFloat || o.float
			continue
		}
		if o.v.Type.Ptr {
			b.fail(op, o.v.Type, "operand %v is a pointer: use AddPtr for pointer arithmetic, Load to read", o.v.Type)
			return nil
		}
		if !anyStrong || promoteRank(o.v.Type.DType) > promoteRank(d) {
			d = o.v.Type.DType
		}
		anyStrong = true
	}
	switch {
	case !anyStrong && weakFloat:
		d = F32
	case !anyStrong:
		d = I32
	case weakFloat && !d.IsFloat():
		d = F32
	}
	vs := make([]*Value, len(ops))
	shape := Scalar
	for i, o := range ops {
		vs[i] = b.Cast(b.materialize(o, d), d)
		s, err := BroadcastShapes(shape, vs[i].Type.Shape)
		if err != nil {
			b.fail(op, vs[i].Type, "operands %s: %v", typeList(vs[:i+1]), err)
			return nil
		}
		shape = s
	}
	for i := range vs {
		vs[i] = b.BroadcastTo(vs[i], shape)
	}
	if b.err != nil {
		return nil
	}
	return vs
}

func typeList(vs []*Value) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.Type.String()
	}
	return strings.Join(parts, " and ")
}

// ---- elementwise ----

func (b *Builder) binary(op Op, x, y any) *Value {
	vs := b.unify(op.String(), x, y)
	if vs == nil {
		return b.poison(Type{DType: F32})
	}
	t := vs[0].Type
	if !op.accepts(t.DType) {
		return b.fail(op.String(), t, "%v is not defined on %v", op, t)
	}
	if op.IsCompare() {
		t = t.WithDType(I1)
	}
	return b.emit(op, t, vs...)
}

// Add is x + y. A pointer plus an integer is AddPtr.
func (b *Builder) Add(x, y any) *Value {
	if p, ok := x.(*Value); ok && p != nil && p.Type.Ptr {
		return b.AddPtr(p, y)
	}
	if p, ok := y.(*Value); ok && p != nil && p.Type.Ptr {
		return b.AddPtr(p, x)
	}
	return b.binary(OpAdd, x, y)
}

func (b *Builder) Sub(x, y any) *Value { return b.binary(OpSub, x, y) }
func (b *Builder) Mul(x, y any) *Value { return b.binary(OpMul, x, y) }

// Div is x / y: IEEE division on floats, truncated on ints.
func (b *Builder) Div(x, y any) *Value { return b.binary(OpDiv, x, y) }

// Rem is the remainder of x / y, with the sign of x.
func (b *Builder) Rem(x, y any) *Value { return b.binary(OpRem, x, y) }

// Minimum is the elementwise minimum (tl.minimum); NaN if either is NaN.
func (b *Builder) Minimum(x, y any) *Value { return b.binary(OpMin, x, y) }

// Maximum is the elementwise maximum (tl.maximum); NaN if either is NaN.
func (b *Builder) Maximum(x, y any) *Value { return b.binary(OpMax, x, y) }

// Pow is x**y on floats.
func (b *Builder) Pow(x, y any) *Value { return b.binary(OpPow, x, y) }

func (b *Builder) And(x, y any) *Value { return b.binary(OpAnd, x, y) }
func (b *Builder) Or(x, y any) *Value  { return b.binary(OpOr, x, y) }
func (b *Builder) Xor(x, y any) *Value { return b.binary(OpXor, x, y) }
func (b *Builder) Eq(x, y any) *Value  { return b.binary(OpEq, x, y) }
func (b *Builder) Ne(x, y any) *Value  { return b.binary(OpNe, x, y) }
func (b *Builder) Lt(x, y any) *Value  { return b.binary(OpLt, x, y) }
func (b *Builder) Le(x, y any) *Value  { return b.binary(OpLe, x, y) }
func (b *Builder) Gt(x, y any) *Value  { return b.binary(OpGt, x, y) }
func (b *Builder) Ge(x, y any) *Value  { return b.binary(OpGe, x, y) }

// Where is select: a where cond is true, else c (tl.where). All three broadcast.
func (b *Builder) Where(cond, a, c any) *Value {
	cv, ok := b.operand("select", cond)
	if !ok {
		return b.poison(Type{DType: F32})
	}
	if cv.weak || cv.v.Type.DType != I1 || cv.v.Type.Ptr {
		return b.fail("select", Type{DType: F32}, "condition must be i1, is %v", typeOr(cv.v))
	}
	vs := b.unify("select", a, c)
	if vs == nil {
		return b.poison(Type{DType: F32})
	}
	s, err := BroadcastShapes(cv.v.Type.Shape, vs[0].Type.Shape)
	if err != nil {
		return b.fail("select", vs[0].Type, "condition %v and values %v: %v", cv.v.Type, vs[0].Type, err)
	}
	cb, x, y := b.BroadcastTo(cv.v, s), b.BroadcastTo(vs[0], s), b.BroadcastTo(vs[1], s)
	if b.err != nil {
		return b.poison(vs[0].Type)
	}
	return b.emit(OpSelect, x.Type, cb, x, y)
}

func (b *Builder) unary(op Op, x any) *Value {
	o, ok := b.operand(op.String(), x)
	if !ok {
		return b.poison(Type{DType: F32})
	}
	d := F32
	if !o.weak {
		d = o.v.Type.DType
	} else if !o.float && op.accepts(I32) {
		d = I32
	}
	v := b.materialize(o, d)
	if v.Type.Ptr || !op.accepts(v.Type.DType) {
		return b.fail(op.String(), v.Type, "%v is not defined on %v", op, v.Type)
	}
	return b.emit(op, v.Type, v)
}

func (b *Builder) Neg(x any) *Value  { return b.unary(OpNeg, x) }
func (b *Builder) Not(x any) *Value  { return b.unary(OpNot, x) }
func (b *Builder) Abs(x any) *Value  { return b.unary(OpAbs, x) }
func (b *Builder) Sign(x any) *Value { return b.unary(OpSign, x) }
func (b *Builder) Exp(x any) *Value  { return b.unary(OpExp, x) }
func (b *Builder) Exp2(x any) *Value { return b.unary(OpExp2, x) }

// Exp2Flush is 2^x where a result below 2⁻¹²⁶ (a subnormal) may be 0, and
// a subnormal x may be read as 0 (the GPU's ex2.approx.ftz, without the
// compare and two multiplies that keep subnormal results): for values
// whose users cannot tell an absolute error under 2⁻¹²⁶, such as a term
// of a sum with one of 1 or more, or an operand of a product rounded to
// TF32 or bf16. The interpreter and the CPU compute 2^x.
func (b *Builder) Exp2Flush(x any) *Value {
	v := b.unary(OpExp2, x)
	if v.Op == OpExp2 {
		v.Aux = 1
	}
	return v
}
func (b *Builder) Log(x any) *Value     { return b.unary(OpLog, x) }
func (b *Builder) Log2(x any) *Value    { return b.unary(OpLog2, x) }
func (b *Builder) Log1p(x any) *Value   { return b.unary(OpLog1p, x) }
func (b *Builder) Expm1(x any) *Value   { return b.unary(OpExpm1, x) }
func (b *Builder) Sqrt(x any) *Value    { return b.unary(OpSqrt, x) }
func (b *Builder) Rsqrt(x any) *Value   { return b.unary(OpRsqrt, x) }
func (b *Builder) Tanh(x any) *Value    { return b.unary(OpTanh, x) }
func (b *Builder) Erf(x any) *Value     { return b.unary(OpErf, x) }
func (b *Builder) Sigmoid(x any) *Value { return b.unary(OpSigmoid, x) }
func (b *Builder) Sin(x any) *Value     { return b.unary(OpSin, x) }
func (b *Builder) Cos(x any) *Value     { return b.unary(OpCos, x) }
func (b *Builder) Floor(x any) *Value   { return b.unary(OpFloor, x) }
func (b *Builder) Ceil(x any) *Value    { return b.unary(OpCeil, x) }

// Unary applies the unary op o to x (for generated code).
func (b *Builder) Unary(o Op, x any) *Value {
	if !o.IsUnary() {
		return b.fail(o.String(), Type{DType: F32}, "%v is not a unary op", o)
	}
	return b.unary(o, x)
}

// Binary applies the binary or comparison op o to x and y (for generated code).
func (b *Builder) Binary(o Op, x, y any) *Value {
	if !o.IsBinary() && !o.IsCompare() {
		return b.fail(o.String(), Type{DType: F32}, "%v is not a binary op", o)
	}
	if o == OpAdd {
		return b.Add(x, y)
	}
	return b.binary(o, x, y)
}

// ---- reductions ----

// KeepDims, passed to a reduction, keeps the reduced axis with size 1.
const KeepDims = true

// Reduce reduces axis of x with OpReduceSum, OpReduceMax or OpReduceMin.
func (b *Builder) Reduce(o Op, x *Value, axis int, keepDims ...bool) *Value {
	keep := len(keepDims) > 0 && keepDims[0]
	if !b.checkArg(o.String(), x) {
		return b.poison(typeOr(x))
	}
	if !o.IsReduce() {
		return b.fail(o.String(), x.Type, "%v is not a reduction", o)
	}
	s := x.Type.Shape
	if s.IsScalar() || axis < 0 || axis >= s.Rank {
		return b.fail(o.String(), x.Type, "axis %d of %v", axis, x.Type)
	}
	if x.Type.Ptr || !o.accepts(x.Type.DType) {
		return b.fail(o.String(), x.Type, "%v is not defined on %v", o, x.Type)
	}
	v := b.emit(o, x.Type.WithShape(reducedShape(s, axis, keep)), x)
	v.Aux = int64(axis)
	if keep {
		v.Aux2 = 1
	}
	return v
}

// Sum adds x along axis (tl.sum); pass KeepDims to keep the axis.
func (b *Builder) Sum(x *Value, axis int, keepDims ...bool) *Value {
	return b.Reduce(OpReduceSum, x, axis, keepDims...)
}

// Max is the largest element along axis (tl.max).
func (b *Builder) Max(x *Value, axis int, keepDims ...bool) *Value {
	return b.Reduce(OpReduceMax, x, axis, keepDims...)
}

// Min is the smallest element along axis (tl.min).
func (b *Builder) Min(x *Value, axis int, keepDims ...bool) *Value {
	return b.Reduce(OpReduceMin, x, axis, keepDims...)
}

// ---- dot ----

// Dot is acc + a·b for a [M,K] and b [K,N] (tl.dot); acc nil means zeros.
func (b *Builder) Dot(a, c, acc *Value, p Precision) *Value {
	if !b.checkArg("dot", a, c) {
		return b.poison(typeOr(a))
	}
	sa, sc := a.Type.Shape, c.Type.Shape
	if sa.Rank != 2 || sc.Rank != 2 {
		return b.fail("dot", a.Type, "dot takes 2-D blocks, not %v and %v", a.Type, c.Type)
	}
	if a.Type.Ptr || c.Type.Ptr || !a.Type.DType.IsFloat() || a.Type.DType != c.Type.DType {
		return b.fail("dot", a.Type, "dot operands %v and %v must be f32 or f64, alike", a.Type, c.Type)
	}
	m, k, k2, n := sa.Dims[0], sa.Dims[1], sc.Dims[0], sc.Dims[1]
	t := BlockOf(a.Type.DType, m, n)
	if k != k2 {
		return b.fail("dot", t, "dot of %v and %v: inner dimensions %d and %d differ", a.Type, c.Type, k, k2)
	}
	if m < MinDotDim || n < MinDotDim || k < MinDotDim {
		return b.fail("dot", t, "dot %dx%dx%d: M, N and K must be at least %d", m, n, k, MinDotDim)
	}
	if !p.Valid() {
		return b.fail("dot", t, "unknown precision %v", p)
	}
	if acc == nil {
		acc = b.Zeros(a.Type.DType, m, n)
	} else if !b.checkArg("dot", acc) {
		return b.poison(t)
	} else if acc.Type != t {
		return b.fail("dot", t, "accumulator %v must be %v", acc.Type, t)
	}
	v := b.emit(OpDot, t, a, c, acc)
	v.Prec = p
	return v
}

// ---- pointers and memory ----

// AddPtr is ptr + off, off counting elements. Both broadcast to one shape.
func (b *Builder) AddPtr(ptr *Value, off any) *Value {
	if !b.checkArg("addptr", ptr) {
		return b.poison(typeOr(ptr))
	}
	if !ptr.Type.Ptr {
		return b.fail("addptr", ptr.Type, "base %v is not a pointer", ptr.Type)
	}
	o, ok := b.operand("addptr", off)
	if !ok {
		return b.poison(ptr.Type)
	}
	ov := b.materialize(o, I32)
	if ov.Type.Ptr || !ov.Type.DType.IsInt() {
		return b.fail("addptr", ptr.Type, "offset %v must be i32 or i64", ov.Type)
	}
	s, err := BroadcastShapes(ptr.Type.Shape, ov.Type.Shape)
	if err != nil {
		return b.fail("addptr", ptr.Type, "pointer %v and offset %v: %v", ptr.Type, ov.Type, err)
	}
	p, ov := b.BroadcastTo(ptr, s), b.BroadcastTo(ov, s)
	if b.err != nil {
		return b.poison(ptr.Type)
	}
	return b.emit(OpAddPtr, p.Type, p, ov)
}

// maskFor broadcasts mask (nil: none) to shape s.
func (b *Builder) maskFor(op string, mask *Value, s Shape) *Value {
	if mask == nil || b.err != nil {
		return nil
	}
	if !b.checkArg(op, mask) {
		return nil
	}
	if mask.Type.DType != I1 || mask.Type.Ptr {
		b.fail(op, mask.Type, "mask must be i1, is %v", mask.Type)
		return nil
	}
	if got, err := BroadcastShapes(mask.Type.Shape, s); err != nil || got != s {
		b.fail(op, mask.Type, "mask %v does not match pointer shape %v", mask.Type, s)
		return nil
	}
	return b.BroadcastTo(mask, s)
}

// Load reads the elements ptr points to (tl.load). Lanes where mask (nil: none)
// is false are not read and give other (nil: zero). mask and other broadcast
// to the pointer's shape.
//
// A CacheHint may follow (Load(p, m, nil, tile.CacheStreaming)).
func (b *Builder) Load(ptr, mask *Value, other any, hint ...CacheHint) *Value {
	if !b.checkArg("load", ptr) {
		return b.poison(typeOr(ptr).WithDType(F32))
	}
	t := Type{DType: ptr.Type.DType, Shape: ptr.Type.Shape}
	if !ptr.Type.Ptr {
		return b.fail("load", t, "load from %v, not a pointer", ptr.Type)
	}
	args := []*Value{ptr}
	if m := b.maskFor("load", mask, t.Shape); m != nil {
		args = append(args, m)
		if other != nil {
			o, ok := b.operand("load", other)
			if !ok {
				return b.poison(t)
			}
			ov := b.materialize(o, t.DType)
			if ov.Type.DType != t.DType || ov.Type.Ptr {
				return b.fail("load", t, "other %v must be %v", ov.Type, t.Elem())
			}
			ov = b.BroadcastTo(ov, t.Shape)
			args = append(args, ov)
		}
	} else if other != nil && b.err == nil {
		return b.fail("load", t, "other without a mask")
	}
	if b.err != nil {
		return b.poison(t)
	}
	v := b.emit(OpLoad, t, args...)
	return b.hint(v, hint)
}

// hint records an optional cache hint on a memory op.
func (b *Builder) hint(v *Value, hint []CacheHint) *Value {
	if len(hint) > 1 || len(hint) == 1 && hint[0] >= numCacheHints {
		return b.fail(v.Op.String(), v.Type, "cache hints %v: give at most one known hint", hint)
	}
	if len(hint) == 1 && hint[0] == CacheKeep && v.Op != OpLoad {
		return b.fail(v.Op.String(), v.Type, "cache hint keep: for loads only (a store takes streaming or none)")
	}
	if len(hint) == 1 {
		v.Aux = int64(hint[0])
	}
	return v
}

// storeLike checks and emits store or atomic_add. The pointer, value and mask
// broadcast to one shape.
func (b *Builder) storeLike(op Op, ptr *Value, x any, mask *Value, hint []CacheHint) *Value {
	name := op.String()
	if !b.checkArg(name, ptr) {
		return b.poison(Type{})
	}
	if !ptr.Type.Ptr {
		return b.fail(name, Type{}, "%s to %v, not a pointer", name, ptr.Type)
	}
	o, ok := b.operand(name, x)
	if !ok {
		return b.poison(Type{})
	}
	xv := b.materialize(o, ptr.Type.DType)
	if xv.Type.Ptr || xv.Type.DType != ptr.Type.DType {
		return b.fail(name, Type{}, "value %v does not match pointer %v: cast it first", xv.Type, ptr.Type)
	}
	s, err := BroadcastShapes(ptr.Type.Shape, xv.Type.Shape)
	if err != nil {
		return b.fail(name, Type{}, "pointer %v and value %v: %v", ptr.Type, xv.Type, err)
	}
	p, xv := b.BroadcastTo(ptr, s), b.BroadcastTo(xv, s)
	args := []*Value{p, xv}
	if m := b.maskFor(name, mask, s); m != nil {
		args = append(args, m)
	}
	if b.err != nil {
		return b.poison(Type{})
	}
	t := Type{}
	if op == OpAtomicAdd {
		t = xv.Type
	}
	return b.hint(b.emit(op, t, args...), hint)
}

// Store writes x where ptr points (tl.store); lanes where mask is false are
// not written. A CacheHint may follow.
func (b *Builder) Store(ptr *Value, x any, mask *Value, hint ...CacheHint) {
	b.storeLike(OpStore, ptr, x, mask, hint)
}

// AtomicAdd adds x atomically where ptr points and returns the old values
// (tl.atomic_add); lanes where mask is false are untouched and give 0.
func (b *Builder) AtomicAdd(ptr *Value, x any, mask *Value) *Value {
	return b.storeLike(OpAtomicAdd, ptr, x, mask, nil)
}

// ---- loops ----

// For runs body for iv = lo, lo+step, … while iv < hi (step > 0), carrying
// the values init from one iteration to the next, and returns their final
// values. body returns the next carried values, of the same types:
//
//	acc := b.For(0, K, BLOCK_K, []*tile.Value{zeros}, func(k *tile.Value, c []*tile.Value) []*tile.Value {
//		return []*tile.Value{b.Dot(a, bb, c[0], tile.PrecIEEE)}
//	})[0]
func (b *Builder) For(lo, hi, step any, init []*Value, body func(iv *Value, carried []*Value) []*Value) []*Value {
	poisons := func() []*Value {
		out := make([]*Value, len(init))
		for i, v := range init {
			out[i] = b.poison(typeOr(v))
		}
		return out
	}
	bounds := b.unify("for", lo, hi, step)
	if bounds == nil || !b.checkArg("for", init...) {
		return poisons()
	}
	if !bounds[0].Type.Shape.IsScalar() || bounds[0].Type.Ptr || !bounds[0].Type.DType.IsInt() {
		b.fail("for", bounds[0].Type, "bounds and step must be scalar integers, are %v", bounds[0].Type)
		return poisons()
	}
	f := b.emit(OpFor, Type{}, append(bounds, init...)...)
	f.Body = &Block{}
	newArg := func(i int, t Type) *Value {
		a := &Value{ID: b.k.nextID, Op: OpBlockArg, Type: t, Aux: int64(i), kernel: b.k}
		b.k.nextID++
		f.Body.Args = append(f.Body.Args, a)
		return a
	}
	iv := newArg(0, bounds[0].Type)
	carried := make([]*Value, len(init))
	for i, v := range init {
		carried[i] = newArg(i+1, v.Type)
	}
	outer := b.cur
	b.cur = f.Body
	next := body(iv, carried)
	if b.err == nil {
		if len(next) != len(init) {
			b.fail("for", Type{}, "loop body returns %d values, the loop carries %d", len(next), len(init))
		} else if b.checkArg("yield", next...) {
			for i, v := range next {
				if v.Type != init[i].Type {
					b.fail("for", v.Type, "loop-carried value %d changes type from %v to %v", i, init[i].Type, v.Type)
					break
				}
			}
		}
	}
	if b.err == nil {
		b.emit(OpYield, Type{}, next...)
	}
	b.cur = outer
	if b.err != nil {
		return poisons()
	}
	res := make([]*Value, len(init))
	for i := range init {
		r := b.emit(OpForResult, init[i].Type, f)
		r.Aux = int64(i)
		res[i] = r
	}
	return res
}
