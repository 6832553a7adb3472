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

// Kind is what an op does to its operands' elements.
type Kind uint8

const (
	Opaque        Kind = iota // not understood, or not fusable: run by Gorgonia
	Input                     // a graph input (no op)
	Constant                  // a scalar constant (const x, SizeOf=n)
	Unary                     // elementwise, one operand
	Binary                    // elementwise, two operands (scalars broadcast)
	Reshape                   // same elements, new shape
	Repeat                    // broadcasting: repeats along axes
	Reduce                    // Σ or MaxAlong along axes
	Softmax                   // Gorgonia's SoftMax (or log-softmax) along the last axis
	MatMul                    // a 2-D matrix product, either operand transposed
	BatchedMatMul             // a batch of matrix products over 3-D operands
	Slice                     // a range of one axis, step 1 (injective: output element i reads one input element)
	Concat                    // operands joined along one axis (injective)
	SoftmaxGrad               // Gorgonia's SoftmaxDiff: the softmax's backward along the last axis, from (x, y, dy)
	SliceIncr                 // a slice's backward T[…]+=…: zeros of the first operand's shape, the second in the range
)

var kindNames = [...]string{"opaque", "input", "constant", "unary", "binary", "reshape", "repeat", "reduce", "softmax", "matmul", "batched matmul", "slice", "concat", "softmax backward", "slice backward"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Elementwise reports whether k maps elements independently (or moves them).
func (k Kind) Elementwise() bool {
	return k == Unary || k == Binary || k == Constant || k == Reshape || k == Repeat
}

// Injective reports whether each output element of k reads one element of
// one operand at an index of its own (Reshape, Repeat, Slice, Concat): such
// ops fuse wherever elementwise ones do, outside attention kernels.
func (k Kind) Injective() bool {
	return k == Reshape || k == Repeat || k == Slice || k == Concat || k == SliceIncr
}

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
	Axes   []int   // reduced or repeated axes
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

// Classify says what node n's op is.
func Classify(n *G.Node) Info {
	info := Info{Shape: append([]int(nil), n.Shape()...)}
	op := n.Op()
	if op != nil && (op.String() == "print" || op.String() == "=") { // statements have no type
		info.Name, info.Kind, info.Why = op.String(), Opaque, "a Gorgonia statement (Read or Set)"
		return info
	}
	info.DType, _ = DTypeOf(n.Dtype()) // Void where kernels cannot take the values
	if op == nil {
		info.Kind, info.Name = Input, "input"
		return info
	}
	info.Name = op.String()
	opaque := func(why string) Info {
		info.Kind, info.Why = Opaque, why
		return info
	}
	d, ok := DTypeOf(n.Dtype())
	if !ok {
		return opaque(fmt.Sprintf("dtype %v (tile kernels take float32 and float64)", n.Dtype()))
	}
	info.DType = d
	s := info.Name
	switch {
	case strings.HasPrefix(s, "const "):
		if len(info.Shape) != 0 {
			return opaque("a tensor constant")
		}
		v, err := scalarOf(n.Value())
		if err != nil {
			return opaque(err.Error())
		}
		info.Kind, info.Value = Constant, v
	case strings.HasPrefix(s, "SizeOf="):
		v, err := strconv.Atoi(strings.TrimPrefix(s, "SizeOf="))
		if err != nil {
			return opaque("unreadable SizeOf")
		}
		info.Kind, info.Value = Constant, float64(v)
	case unaryOps[s] != nil:
		info.Kind, info.Unary = Unary, unaryOps[s]
	case strings.HasSuffix(s, " false") || strings.HasSuffix(s, " true"):
		sym, retSame, _ := strings.Cut(s, " ")
		if o, ok := binaryOps[sym]; ok {
			info.Kind, info.Binary = Binary, o
		} else if o, ok := compareOps[sym]; ok {
			if retSame != "true" {
				return opaque("a comparison giving booleans")
			}
			info.Kind, info.Binary, info.Cmp = Binary, o, true
		} else {
			return opaque("unknown binary op")
		}
	case strings.HasPrefix(s, "Reshape("):
		info.Kind = Reshape
	case strings.HasPrefix(s, "Repeat"):
		axis, err := strconv.Atoi(strings.TrimPrefix(s, "Repeat")) // "Repeat1": along axis 1
		if err != nil {
			return opaque("unreadable Repeat")
		}
		info.Kind, info.Axes = Repeat, []int{axis}
	case strings.HasPrefix(s, "Σ"):
		axes, err := intsField(op, "along")
		if err != nil {
			return opaque(err.Error())
		}
		info.Kind, info.Reduce, info.Axes = Reduce, tile.OpReduceSum, axes
	case strings.HasPrefix(s, "MaxAlong"):
		axes, err := intsField(op, "along")
		if err != nil {
			return opaque(err.Error())
		}
		info.Kind, info.Reduce, info.Axes = Reduce, tile.OpReduceMax, axes
	case s == "A × B" || s == "Aᵀ × B" || s == "A × Bᵀ" || s == "Aᵀ × Bᵀ":
		if len(info.Shape) != 2 {
			return opaque("a matrix product that is not 2-D")
		}
		info.Kind, info.TransA, info.TransB = MatMul, strings.HasPrefix(s, "Aᵀ"), strings.HasSuffix(s, "Bᵀ")
	case s == "A ××× B" || s == "Aᵀ ××× B" || s == "A ××× Bᵀ" || s == "Aᵀ ××× Bᵀ":
		if len(info.Shape) != 3 {
			return opaque("a batched product that is not 3-D")
		}
		// on its own it runs as Gorgonia runs it; graphpass fuses it inside attention
		info.Kind, info.TransA, info.TransB = BatchedMatMul, strings.HasPrefix(s, "Aᵀ"), strings.HasSuffix(s, "Bᵀ")
	case strings.HasPrefix(s, "T["): // a slice, or T[…]+=…, a slice's backward
		incr := strings.HasSuffix(s, "+=...")
		along, err := intField(op, "along")
		if err != nil {
			return opaque(err.Error())
		}
		var in []tensor.Shape // the operands' shapes
		for ch := n.Graph().From(n.ID()); ch.Next(); {
			in = append(in, ch.Node().(*G.Node).Shape())
		}
		if len(in) != 1 && !incr || len(in) != 2 && incr {
			return opaque("a slice with an unexpected number of operands")
		}
		whole, sliced := in[0], info.Shape // the range is taken of whole; sliced has the range's length
		if incr {
			whole, sliced = info.Shape, in[1]
		}
		if len(sliced) != len(whole) || along < 0 || along >= len(whole) {
			if !(incr && len(sliced) == 0) { // a scalar increment is broadcast
				return opaque("a slice that drops an axis")
			}
		}
		start, end := 0, whole[along]
		if sl, ok := op.(interface{ IsSlice() tensor.Slice }); ok && sl.IsSlice() != nil && sl.IsSlice().End() > sl.IsSlice().Start() {
			if sl.IsSlice().Step() != 1 {
				return opaque("a slice with a step")
			}
			start, end = sl.IsSlice().Start(), sl.IsSlice().End()
		}
		info.Kind, info.Axes, info.Start, info.End = Slice, []int{along}, start, end
		if incr {
			info.Kind = SliceIncr
		}
	case strings.HasPrefix(s, "Concat("):
		axis, err := intField(op, "axis")
		if err != nil {
			return opaque(err.Error())
		}
		if axis < 0 || axis >= len(info.Shape) {
			return opaque("a concat along an axis out of range")
		}
		info.Kind, info.Axes = Concat, []int{axis}
	case strings.HasPrefix(s, "SoftmaxDiff{"), strings.HasPrefix(s, "Softmax{"): // the softmax and its backward
		axes, err := intField(op, "axis")
		if err != nil {
			return opaque(err.Error())
		}
		isLog, err := boolField(op, "isLog")
		if err != nil {
			return opaque(err.Error())
		}
		if r := len(info.Shape); r == 0 || axes != -1 && axes != r-1 {
			return opaque("softmax along an axis other than the last")
		}
		info.Kind, info.Log = Softmax, isLog
		if strings.HasPrefix(s, "SoftmaxDiff{") {
			info.Kind = SoftmaxGrad
		}
	default:
		return opaque("not in the catalogue yet")
	}
	return info
}

// ReadTarget is where Gorgonia's Read statement (gorgonia.Read(n, &v))
// writes n's value when the graph runs: ok is false for any other op.
func ReadTarget(op G.Op) (into *G.Value, ok bool) {
	if op == nil || op.String() != "print" {
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
