package tile

import (
	"fmt"
	"strings"
)

// DType is the element type of a value.
type DType uint8

// The element types. I1 is the type of masks and comparison results.
const (
	Void DType = iota // no value: store, yield
	I1
	I32
	I64
	F32
	F64
	numDTypes
)

var dtypeNames = [numDTypes]string{Void: "void", I1: "i1", I32: "i32", I64: "i64", F32: "f32", F64: "f64"}

func (d DType) String() string {
	if d < numDTypes {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// IsFloat reports whether d is f32 or f64.
func (d DType) IsFloat() bool { return d == F32 || d == F64 }

// IsInt reports whether d is i32 or i64 (not i1).
func (d DType) IsInt() bool { return d == I32 || d == I64 }

// Size is the size of one element in bytes (i1: 1).
func (d DType) Size() int {
	switch d {
	case I1:
		return 1
	case I32, F32:
		return 4
	case I64, F64:
		return 8
	}
	return 0
}

// MaxRank is the largest rank of a block tensor.
const MaxRank = 3

// Shape is the shape of a value: rank 0 is a scalar, rank 1 to MaxRank a block.
// Shapes are comparable with ==.
type Shape struct {
	Rank int
	Dims [MaxRank]int
}

// Scalar is the shape of a scalar.
var Scalar = Shape{}

// Shp makes a shape from its dimensions: Shp() is a scalar, Shp(64, 32) a
// 64×32 block. More than MaxRank dimensions give a shape that the verifier rejects.
func Shp(dims ...int) Shape {
	var s Shape
	s.Rank = len(dims)
	if s.Rank > MaxRank {
		s.Rank = MaxRank + 1 // invalid, reported by checkShape
		return s
	}
	copy(s.Dims[:], dims)
	return s
}

// IsScalar reports whether s has rank 0.
func (s Shape) IsScalar() bool { return s.Rank == 0 }

// Numel is the number of elements (1 for a scalar).
func (s Shape) Numel() int {
	n := 1
	for i := 0; i < s.Rank && i < MaxRank; i++ {
		n *= s.Dims[i]
	}
	return n
}

// Slice returns the dimensions as a new slice.
func (s Shape) Slice() []int {
	if s.Rank > MaxRank {
		return nil
	}
	return append([]int(nil), s.Dims[:s.Rank]...)
}

func (s Shape) String() string {
	parts := make([]string, 0, s.Rank)
	for i := 0; i < s.Rank && i < MaxRank; i++ {
		parts = append(parts, fmt.Sprint(s.Dims[i]))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// isPow2 reports whether n is a positive power of two.
func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }

// isBlockDim reports whether n is a block dimension: a power of two, or
// three times one and at least 96 (tiles of 192 or 96 rows fill a GPU's
// SMs where powers of two leave a wave part empty: 4096 rows in 22 tiles
// of 192 beside 6 columns of 128 are 132 tiles, one per H200 SM).
func isBlockDim(n int) bool { return isPow2(n) || n >= 96 && n%3 == 0 && isPow2(n/3) }

// checkShape reports why s is not a legal value shape, or nil.
func checkShape(s Shape) error {
	if s.Rank < 0 || s.Rank > MaxRank {
		return fmt.Errorf("rank %d is outside 0..%d", s.Rank, MaxRank)
	}
	for i := 0; i < s.Rank; i++ {
		if !isBlockDim(s.Dims[i]) {
			return fmt.Errorf("block dimension %d of %v is %d, not a power of two (nor three times one, at least 96)", i, s, s.Dims[i])
		}
	}
	return nil
}

// Type is the type of a value: an element type, whether the elements are
// pointers to that type, and a shape. Types are comparable with ==.
type Type struct {
	DType DType
	Ptr   bool // elements are pointers to DType
	Shape Shape
}

// ScalarOf is the scalar type of d.
func ScalarOf(d DType) Type { return Type{DType: d} }

// PtrTo is the scalar pointer type to d.
func PtrTo(d DType) Type { return Type{DType: d, Ptr: true} }

// BlockOf is a block type of d with the given dimensions.
func BlockOf(d DType, dims ...int) Type { return Type{DType: d, Shape: Shp(dims...)} }

// WithShape returns t with shape s.
func (t Type) WithShape(s Shape) Type { t.Shape = s; return t }

// WithDType returns t with element type d, no longer a pointer.
func (t Type) WithDType(d DType) Type { t.DType = d; t.Ptr = false; return t }

// Elem is the scalar type of one element of t.
func (t Type) Elem() Type { t.Shape = Scalar; return t }

// IsVoid reports whether t carries no value.
func (t Type) IsVoid() bool { return t.DType == Void }

// IsNumeric reports whether t's elements are numbers or booleans, not pointers.
func (t Type) IsNumeric() bool { return !t.Ptr && t.DType != Void }

func (t Type) elemString() string {
	if t.Ptr {
		return "!tt.ptr<" + t.DType.String() + ">"
	}
	return t.DType.String()
}

// String writes t as TTIR does: "i32", "!tt.ptr<f32>", "tensor<64x32xf32>".
func (t Type) String() string {
	if t.Shape.Rank == 0 {
		return t.elemString()
	}
	var sb strings.Builder
	sb.WriteString("tensor<")
	for i := 0; i < t.Shape.Rank && i < MaxRank; i++ {
		fmt.Fprintf(&sb, "%dx", t.Shape.Dims[i])
	}
	sb.WriteString(t.elemString())
	sb.WriteString(">")
	return sb.String()
}
