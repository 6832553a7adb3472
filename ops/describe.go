package ops

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tilefuse/tilefuse/tile"
)

// The user's names for ops: a report speaks of the functions a Gorgonia user
// called (Mul, Add, Sum along axis 1, MatMul with B transposed), not of the
// op strings Gorgonia prints ("⊙ false", "Σ[1]", "A × Bᵀ").

// unaryFuncs names the Gorgonia function that makes each unary op, by its
// spelling (every key of unaryOps has one: TestDescribeEveryUnary).
var unaryFuncs = map[string]string{
	"exp": "Exp", "ln": "Log", "log2": "Log2", "log1p": "Log1p", "expm1": "Expm1",
	"tanh": "Tanh", "sigmoid": "Sigmoid", "softplus": "Softplus", "sqrt": "Sqrt",
	"invSqrt": "InverseSqrt", "inv": "Inverse", "square": "Square", "cube": "Cube",
	"neg": "Neg", "abs": "Abs", "sign": "Sign", "ceil": "Ceil", "floor": "Floor",
	"sin": "Sin", "cos": "Cos",
}

var binaryFuncs = map[tile.Op]string{tile.OpAdd: "Add", tile.OpSub: "Sub", tile.OpMul: "Mul", tile.OpDiv: "Div", tile.OpPow: "Pow"}

var compareFuncs = map[tile.Op]string{tile.OpEq: "Eq", tile.OpNe: "Ne", tile.OpLt: "Lt", tile.OpLe: "Lte", tile.OpGt: "Gt", tile.OpGe: "Gte"}

// Func is the Gorgonia function a user calls to make the op of info, without
// its parameters ("Mul", "Sum", "MatMul", "SoftMax"); "" for an input, and
// Gorgonia's own spelling for an op the catalogue does not know.
func (info Info) Func() string {
	switch info.Kind {
	case Input:
		return ""
	case Constant:
		if isSizeOfSpelling(info.Name) {
			return "SizeOf"
		}
		return "NewConstant"
	case Unary:
		if f, ok := unaryFuncs[info.Name]; ok {
			return f
		}
	case Binary:
		if info.Cmp {
			return compareFuncs[info.Binary]
		}
		return binaryFuncs[info.Binary]
	case Reshape:
		return "Reshape"
	case Repeat:
		return "Broadcast"
	case Reduce:
		if info.Reduce == tile.OpReduceMax {
			return "Max"
		}
		return "Sum"
	case Softmax:
		if info.Log {
			return "LogSoftMax"
		}
		return "SoftMax"
	case SoftmaxGrad:
		return "SoftMax's gradient"
	case MatMul:
		return "MatMul"
	case BatchedMatMul:
		return "BatchedMatMul"
	case Slice:
		return "Slice"
	case Concat:
		return "Concat"
	case SliceIncr:
		return "Slice's gradient"
	case Transpose:
		return "Transpose"
	case Im2Col:
		return "Im2Col"
	case MaxPool:
		return "MaxPool"
	case MaxPoolDiff:
		return "MaxPool's gradient"
	case Col2Im:
		return "Col2Im"
	}
	return spelledFunc(info.Name)
}

// spelledFunc is the function that makes an op from its spelling alone,
// for ops the catalogue cannot take (a comparison giving booleans, an
// integer product): Gorgonia's spelling where it knows none.
func spelledFunc(s string) string {
	if f, ok := unaryFuncs[s]; ok {
		return f
	}
	if isBinarySpelling(s) {
		sym, _, _ := strings.Cut(s, " ")
		if o, ok := binaryOps[sym]; ok {
			return binaryFuncs[o]
		}
		if o, ok := compareOps[sym]; ok {
			return compareFuncs[o]
		}
	}
	switch {
	case isMatMulSpelling(s):
		return "MatMul"
	case isBatchedSpelling(s):
		return "BatchedMatMul"
	case strings.HasPrefix(s, "Aᵀ{"):
		return "Transpose"
	}
	return s
}

// Describe is the op of info as the user called it, with the parameters
// that tell it apart: "Mul", "Sum along axis 1", "MatMul with B
// transposed", "Reshape to (4, 3)", "Broadcast along axis 0", "Slice 2:5 of
// axis 1", "constant 0.5"; an op the catalogue cannot take by its function
// where the spelling tells it ("Gte"), else by Gorgonia's spelling.
func (info Info) Describe() string {
	f := info.Func()
	switch info.Kind {
	case Input:
		return "input"
	case Constant:
		if f == "SizeOf" {
			return "SizeOf"
		}
		return "constant " + strconv.FormatFloat(info.Value, 'g', -1, 64)
	case Reduce, Repeat, Concat:
		return f + " along " + axes(info.Axes)
	case Reshape:
		return f + " to " + shape(info.Shape)
	case MatMul, BatchedMatMul:
		switch {
		case info.TransA && info.TransB:
			return f + " with A and B transposed"
		case info.TransA:
			return f + " with A transposed"
		case info.TransB:
			return f + " with B transposed"
		}
		return f
	case Slice, SliceIncr:
		a := 0
		if len(info.Axes) > 0 {
			a = info.Axes[0]
		}
		return fmt.Sprintf("%s %d:%d of axis %d", f, info.Start, info.End, a)
	}
	return f
}

// LossLike reports whether a Unary op is one a loss is made with from a
// prediction (Square, Log, Neg, Abs, Sqrt, …), as opposed to an activation
// (Tanh, Sigmoid, Exp, …) whose output is itself a prediction.
func (info Info) LossLike() bool {
	switch info.Func() {
	case "Square", "Log", "Log2", "Log1p", "Neg", "Abs", "Sqrt":
		return info.Kind == Unary
	}
	return false
}

func axes(a []int) string {
	if len(a) == 1 {
		return "axis " + strconv.Itoa(a[0])
	}
	s := make([]string, len(a))
	for i, x := range a {
		s[i] = strconv.Itoa(x)
	}
	return "axes " + strings.Join(s, ", ")
}

func shape(s []int) string {
	p := make([]string, len(s))
	for i, x := range s {
		p[i] = strconv.Itoa(x)
	}
	return "(" + strings.Join(p, ", ") + ")"
}
