package ops

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/tile"
)

// Info is what the catalogue knows of one node's op.
type Info struct {
	Kind   Kind
	Name   string     // the op's String()
	DType  tile.DType // f32 or f64 for fusable ops
	Shape  []int      // the node's output shape
	Unary  func(b *tile.Builder, x *tile.Value) *tile.Value
	Binary tile.Op // the tile op of a Binary
	Cmp    bool    // Binary is a comparison giving 1 or 0 in the operand dtype
	Reduce tile.Op // OpReduceSum or OpReduceMax
	Axes   []int   // reduced or repeated axes; a Transpose's pattern
	// Window is an Im2Col's kernel height and width, padding, stride and
	// dilation (height then width each)
	Window [8]int
	Value  float64 // a Constant's value
	Log    bool    // a Softmax (or SoftmaxGrad) that is log-softmax
	Start  int     // a Slice's (or SliceIncr's) range along Axes[0]: [Start, End)
	End    int
	TransA bool // a MatMul's operands are stored transposed
	TransB bool
	Why    string // why an op is Opaque
}

// unaryOps writes each elementwise unary Gorgonia op in tile IR, with
// Gorgonia's meaning.
var unaryOps = map[string]func(b *tile.Builder, x *tile.Value) *tile.Value{
	"exp":     func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Exp(x) },
	"ln":      func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Log(x) },
	"log2":    func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Log2(x) },
	"log1p":   func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Log1p(x) },
	"expm1":   func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Expm1(x) },
	"tanh":    func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Tanh(x) },
	"sigmoid": func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Sigmoid(x) },
	"softplus": func(b *tile.Builder, x *tile.Value) *tile.Value {
		// log(1+e^x), written so that large x does not overflow: max(x,0) + log1p(e^-|x|)
		return b.Add(b.Maximum(x, 0.0), b.Log1p(b.Exp(b.Neg(b.Abs(x)))))
	},
	"sqrt":    func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Sqrt(x) },
	"invSqrt": func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Rsqrt(x) },
	"inv":     func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Div(1.0, x) },
	"square":  func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Mul(x, x) },
	"cube":    func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Mul(b.Mul(x, x), x) },
	"neg":     func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Neg(x) },
	"abs":     func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Abs(x) },
	"sign":    func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Sign(x) },
	"ceil":    func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Ceil(x) },
	"floor":   func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Floor(x) },
	"sin":     func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Sin(x) },
	"cos":     func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Cos(x) },
}

var binaryOps = map[string]tile.Op{"+": tile.OpAdd, "-": tile.OpSub, "⊙": tile.OpMul, "÷": tile.OpDiv, "^": tile.OpPow}

var compareOps = map[string]tile.Op{"==": tile.OpEq, "!=": tile.OpNe, "<": tile.OpLt, "<=": tile.OpLe, ">": tile.OpGt, ">=": tile.OpGe}

// DTypeOf maps a Gorgonia dtype to a tile dtype (ok false for the others).
func DTypeOf(d tensor.Dtype) (tile.DType, bool) {
	switch d {
	case tensor.Float32:
		return tile.F32, true
	case tensor.Float64:
		return tile.F64, true
	}
	return tile.Void, false
}

// Classify says what node n's op is: the kind whose spelling its String()
// is, read by that kind's entry of the table.
func Classify(n *G.Node) Info {
	info := Info{Shape: append([]int(nil), n.Shape()...)}
	op := n.Op()
	if IsStatement(op) { // statements have no type
		info.Name, info.Kind, info.Why = op.String(), Opaque, "a Gorgonia statement (Read or Set)"
		return info
	}
	info.DType, _ = DTypeOf(n.Dtype()) // Void where kernels cannot take the values
	if op == nil {
		info.Kind, info.Name = Input, "input"
		return info
	}
	info.Name = op.String()
	d, ok := DTypeOf(n.Dtype())
	if !ok {
		info.Kind, info.Why = Opaque, fmt.Sprintf("dtype %v (tile kernels take float32 and float64)", n.Dtype())
		return info
	}
	info.DType = d
	info.Kind, info.Why = Opaque, "not in the catalogue yet"
	for k := range kinds {
		p := &kinds[k]
		if p.spelled == nil || !p.spelled(info.Name) {
			continue
		}
		info.Kind, info.Why = Kind(k), ""
		if why := p.read(n, op, &info); why != "" {
			info.Kind, info.Why = Opaque, why
		}
		break
	}
	return info
}

func readNothing(*G.Node, G.Op, *Info) string { return "" }

func readConstant(n *G.Node, op G.Op, info *Info) string {
	if s, ok := strings.CutPrefix(info.Name, "SizeOf="); ok {
		v, err := strconv.Atoi(s)
		if err != nil {
			return "unreadable SizeOf"
		}
		info.Value = float64(v)
		return ""
	}
	if len(info.Shape) != 0 {
		return "a tensor constant"
	}
	v, err := scalarOf(n.Value())
	if err != nil {
		return err.Error()
	}
	info.Value = v
	return ""
}

func readUnary(n *G.Node, op G.Op, info *Info) string {
	info.Unary = unaryOps[info.Name]
	return ""
}

func readBinary(n *G.Node, op G.Op, info *Info) string {
	sym, retSame, _ := strings.Cut(info.Name, " ")
	if o, ok := binaryOps[sym]; ok {
		info.Binary = o
		return ""
	}
	if o, ok := compareOps[sym]; ok {
		if retSame != "true" {
			return "a comparison giving booleans"
		}
		info.Binary, info.Cmp = o, true
		return ""
	}
	return "unknown binary op"
}

func readRepeat(n *G.Node, op G.Op, info *Info) string {
	axis, err := strconv.Atoi(strings.TrimPrefix(info.Name, "Repeat")) // "Repeat1": along axis 1
	if err != nil {
		return "unreadable Repeat"
	}
	info.Axes = []int{axis}
	return ""
}

func readReduce(n *G.Node, op G.Op, info *Info) string {
	axes, err := intsField(op, "along")
	if err != nil {
		return err.Error()
	}
	info.Reduce, info.Axes = tile.OpReduceSum, axes
	if strings.HasPrefix(info.Name, "MaxAlong") {
		info.Reduce = tile.OpReduceMax
	}
	return ""
}

func readMatMul(n *G.Node, op G.Op, info *Info) string {
	if len(info.Shape) != 2 {
		return "a matrix product that is not 2-D"
	}
	info.TransA, info.TransB = strings.HasPrefix(info.Name, "Aᵀ"), strings.HasSuffix(info.Name, "Bᵀ")
	return ""
}

func readBatched(n *G.Node, op G.Op, info *Info) string {
	if len(info.Shape) != 3 {
		return "a batched product that is not 3-D"
	}
	// on its own it runs as Gorgonia runs it; graphpass fuses it inside attention
	info.TransA, info.TransB = strings.HasPrefix(info.Name, "Aᵀ"), strings.HasSuffix(info.Name, "Bᵀ")
	return ""
}

// readSlice reads a slice, or T[…]+=…, a slice's backward.
func readSlice(n *G.Node, op G.Op, info *Info) string {
	incr := info.Kind == SliceIncr
	along, err := intField(op, "along")
	if err != nil {
		return err.Error()
	}
	var in []tensor.Shape // the operands' shapes
	for ch := n.Graph().From(n.ID()); ch.Next(); {
		in = append(in, ch.Node().(*G.Node).Shape())
	}
	if len(in) != 1 && !incr || len(in) != 2 && incr {
		return "a slice with an unexpected number of operands"
	}
	whole, sliced := in[0], info.Shape // the range is taken of whole; sliced has the range's length
	if incr {
		whole, sliced = info.Shape, in[1]
	}
	if len(sliced) != len(whole) || along < 0 || along >= len(whole) {
		if !(incr && len(sliced) == 0) { // a scalar increment is broadcast
			return "a slice that drops an axis"
		}
	}
	start, end := 0, whole[along]
	if sl, ok := op.(interface{ IsSlice() tensor.Slice }); ok && sl.IsSlice() != nil && sl.IsSlice().End() > sl.IsSlice().Start() {
		if sl.IsSlice().Step() != 1 {
			return "a slice with a step"
		}
		start, end = sl.IsSlice().Start(), sl.IsSlice().End()
	}
	info.Axes, info.Start, info.End = []int{along}, start, end
	return ""
}

// readTranspose reads Gorgonia's Transpose: its pattern (output axis i is
// the operand's axis pattern[i]) into Axes.
func readTranspose(n *G.Node, op G.Op, info *Info) string {
	p, err := intsField(op, "pattern")
	if err != nil {
		return err.Error()
	}
	seen := make([]bool, len(p))
	for _, a := range p {
		if a < 0 || a >= len(p) || seen[a] {
			return "a transpose whose pattern is not a permutation"
		}
		seen[a] = true
	}
	if len(p) != len(info.Shape) {
		return "a transpose whose pattern is not of its rank"
	}
	info.Axes = p
	return ""
}

// readIm2Col reads Gorgonia's im2col: (B, C, H, W) → (B, OH, OW, C·KH·KW),
// element [b, oh, ow, (c·KH + i)·KW + j] the operand's [b, c, oh·SH − PH +
// i·DH, ow·SW − PW + j·DW], or 0 where that is past an edge.
func readIm2Col(n *G.Node, op G.Op, info *Info) string {
	for i, f := range []string{"h", "w", "padH", "padW", "strideH", "strideW", "dilationH", "dilationW"} {
		v, err := intField(op, f)
		if err != nil {
			return err.Error()
		}
		info.Window[i] = v
	}
	w := info.Window
	if w[0] < 1 || w[1] < 1 || w[2] < 0 || w[3] < 0 || w[4] < 1 || w[5] < 1 || w[6] < 1 || w[7] < 1 {
		return "an im2col with a window of no size, a negative padding or a stride or dilation below 1"
	}
	if len(info.Shape) != 4 {
		return "an im2col that is not 4-D"
	}
	return ""
}

func readConcat(n *G.Node, op G.Op, info *Info) string {
	axis, err := intField(op, "axis")
	if err != nil {
		return err.Error()
	}
	if axis < 0 || axis >= len(info.Shape) {
		return "a concat along an axis out of range"
	}
	info.Axes = []int{axis}
	return ""
}

// readSoftmax reads the softmax and its backward.
func readSoftmax(n *G.Node, op G.Op, info *Info) string {
	axes, err := intField(op, "axis")
	if err != nil {
		return err.Error()
	}
	isLog, err := boolField(op, "isLog")
	if err != nil {
		return err.Error()
	}
	if r := len(info.Shape); r == 0 || axes != -1 && axes != r-1 {
		return "softmax along an axis other than the last"
	}
	if axes == -1 && tensor.Shape(info.Shape).IsColVec() {
		// Gorgonia's SoftMax takes an (n, 1) matrix along axis 0, and its
		// backward (SoftmaxDiff) along the last axis: both run as it runs them
		return "a softmax of a column vector (n, 1), which Gorgonia takes along axis 0"
	}
	info.Log = isLog
	return ""
}

// ReadTarget is where Gorgonia's Read statement (gorgonia.Read(n, &v))
// writes n's value when the graph runs: ok is false for any other op.
func ReadTarget(op G.Op) (into *G.Value, ok bool) {
	if op == nil || op.String() != readSpelling {
		return nil, false
	}
	v, err := structOf(op)
	if err != nil {
		return nil, false
	}
	f := v.FieldByName("into")
	if !f.IsValid() || f.Kind() != reflect.Ptr || f.Type().Elem() != reflect.TypeFor[G.Value]() || f.IsNil() {
		return nil, false
	}
	return (*G.Value)(f.UnsafePointer()), true
}

func structOf(op G.Op) (reflect.Value, error) {
	v := reflect.ValueOf(op)
	for v.Kind() == reflect.Ptr || v.Kind() == reflect.Interface {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return v, fmt.Errorf("op %v is not a struct", op)
	}
	return v, nil
}

func intField(op G.Op, name string) (int, error) {
	v, err := structOf(op)
	if err != nil {
		return 0, err
	}
	f := v.FieldByName(name)
	if !f.IsValid() || f.Kind() != reflect.Int {
		return 0, fmt.Errorf("op %v has no int field %s", op, name)
	}
	return int(f.Int()), nil
}

func boolField(op G.Op, name string) (bool, error) {
	v, err := structOf(op)
	if err != nil {
		return false, err
	}
	f := v.FieldByName(name)
	if !f.IsValid() || f.Kind() != reflect.Bool {
		return false, fmt.Errorf("op %v has no bool field %s", op, name)
	}
	return f.Bool(), nil
}

// intsField reads an []int-like field of an op (Gorgonia's axes type).
func intsField(op G.Op, name string) ([]int, error) {
	v := reflect.ValueOf(op)
	for v.Kind() == reflect.Ptr || v.Kind() == reflect.Interface {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil, fmt.Errorf("op %v is not a struct", op)
	}
	f := v.FieldByName(name)
	if !f.IsValid() || f.Kind() != reflect.Slice {
		return nil, fmt.Errorf("op %v has no field %s", op, name)
	}
	out := make([]int, f.Len())
	for i := range out {
		out[i] = int(f.Index(i).Int())
	}
	return out, nil
}

func scalarOf(v G.Value) (float64, error) {
	switch x := v.Data().(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	case int:
		return float64(x), nil
	}
	return math.NaN(), fmt.Errorf("constant of type %T", v.Data())
}

// IsExp reports whether the node is Gorgonia's elementwise exp (the online
// softmax of a looped row recognises Σ exp(x − max x) by it).
func (i *Info) IsExp() bool { return i.Kind == Unary && i.Name == "exp" }

// gradGroup is the group Gorgonia's Grad files the nodes it makes under
// (its unexported gradClust): each operand's gradient contribution, the
// sums of contributions and what its ops' derivative expressions return.
const gradGroup = "gradients"

// MadeByGrad reports whether gorgonia.Grad made n: Gorgonia records it in
// the node's unexported field group ("gradients"), read here by
// reflection. A node the user made has no group. False where the field is
// missing (another Gorgonia version): the caller then treats n as the
// user's.
func MadeByGrad(n *G.Node) bool {
	if n == nil {
		return false
	}
	f := reflect.ValueOf(n).Elem().FieldByName("group")
	return f.IsValid() && f.Kind() == reflect.String && f.String() == gradGroup
}
