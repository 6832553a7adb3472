package ops

import (
	"fmt"

	G "gorgonia.org/gorgonia"
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
	Transpose                 // Gorgonia's Transpose: the axes permuted (injective)
	Im2Col                    // Gorgonia's im2col: a convolution's patches as rows, zeros past the edges (injective)
	MaxPool                   // Gorgonia's MaxPool2D: each window's largest element (a window of its operand)
	MaxPoolDiff               // MaxPool2D's backward from (x, pooled, dy): dy to each window's first largest element
	Col2Im                    // Gorgonia's col2im (im2col's backward): each image element the sum of the columns that read it

	numKinds // the end: the kinds table below has one entry per kind
)

// kindProps is what the catalogue knows of a kind: how Gorgonia spells its
// ops, how a node of it is read, and the properties the partitioner asks.
type kindProps struct {
	name string
	// spelled reports whether an op's String() is one of this kind's
	// (nil: no Gorgonia op is, as for Opaque and Input). Spellings of
	// different kinds never overlap (TestSpellings).
	spelled func(s string) bool
	// read fills what the kind needs beyond the name, dtype and shape from
	// node n with op op; a non-empty result is why n is Opaque after all.
	read func(n *G.Node, op G.Op, info *Info) (why string)
	// elementwise: output element i is computed from operand elements at
	// i, or moves one element (Unary, Binary, Constant, Reshape, Repeat)
	elementwise bool
	// injective: each output element reads one element of one operand at
	// an index of its own, or a zero (Reshape, Repeat, Slice, Concat,
	// SliceIncr, Transpose, Im2Col), or the elements of a window of its
	// operands (MaxPool, MaxPoolDiff, Col2Im):
	// such ops fuse wherever elementwise ones do, outside attention kernels
	injective bool
	// window: reads its operand over windows: each output element from a
	// window of operand elements (MaxPool, MaxPoolDiff, Col2Im), or each
	// operand element into a window of outputs (Im2Col)
	window bool
	// product: a matrix product, whose operands live in index spaces other
	// than its output's
	product bool
	// row: computed along whole rows of the last axis (a softmax and its
	// backward): one row per program
	row bool
	// write, if not nil, writes the op in tile IR at flat indices of its
	// own shape (see Writer); nil for kinds whose writing belongs to a group
	// kind (reductions, softmaxes, products) or that are not computed
	write writeFunc
}

// kinds is the table of kinds. Its type checks its length: a kind added
// before numKinds without an entry here does not compile, and
// TestKindTable checks that no entry is empty.
var kinds = [...]kindProps{
	Opaque: {name: "opaque"},
	Input:  {name: "input"},
	Constant: {name: "constant", elementwise: true,
		spelled: func(s string) bool { return isConstSpelling(s) || isSizeOfSpelling(s) }, read: readConstant, write: writeConstant},
	Unary: {name: "unary", elementwise: true,
		spelled: func(s string) bool { return unaryOps[s] != nil }, read: readUnary, write: writeUnary},
	Binary: {name: "binary", elementwise: true,
		spelled: isBinarySpelling, read: readBinary, write: writeBinary},
	Reshape: {name: "reshape", elementwise: true, injective: true,
		spelled: prefix("Reshape("), read: readNothing, write: writeReshape},
	Repeat: {name: "repeat", elementwise: true, injective: true,
		spelled: prefix("Repeat"), read: readRepeat, write: writeRepeat},
	Reduce: {name: "reduce",
		spelled: func(s string) bool { return prefix("Σ")(s) || prefix("MaxAlong")(s) }, read: readReduce},
	Softmax: {name: "softmax", row: true,
		spelled: prefix("Softmax{"), read: readSoftmax},
	MatMul: {name: "matmul", product: true,
		spelled: isMatMulSpelling, read: readMatMul},
	BatchedMatMul: {name: "batched matmul", product: true,
		spelled: isBatchedSpelling, read: readBatched},
	Slice: {name: "slice", injective: true,
		spelled: func(s string) bool { return prefix("T[")(s) && !isIncrSpelling(s) }, read: readSlice, write: writeSlice},
	Concat: {name: "concat", injective: true,
		spelled: prefix("Concat("), read: readConcat, write: writeConcat},
	SoftmaxGrad: {name: "softmax backward", row: true,
		spelled: prefix("SoftmaxDiff{"), read: readSoftmax},
	SliceIncr: {name: "slice backward", injective: true,
		spelled: func(s string) bool { return prefix("T[")(s) && isIncrSpelling(s) }, read: readSlice, write: writeSliceIncr},
	Transpose: {name: "transpose", injective: true,
		spelled: prefix("Aᵀ{"), read: readTranspose, write: writeTranspose},
	Im2Col: {name: "im2col", injective: true, window: true,
		spelled: prefix("im2col<"), read: readIm2Col, write: writeIm2Col},
	MaxPool: {name: "max pool", injective: true, window: true,
		spelled: prefix("MaxPool{"), read: readMaxPool, write: writeMaxPool},
	MaxPoolDiff: {name: "max pool backward", injective: true, window: true,
		spelled: prefix("MaxPoolDiff{"), read: readMaxPool, write: writeMaxPoolDiff},
	Col2Im: {name: "col2im", injective: true, window: true,
		spelled: prefix("col2im<"), read: readIm2Col, write: writeCol2Im}, // col2im embeds im2col's op
}

var _ [numKinds]kindProps = kinds // one entry per kind

func (k Kind) String() string {
	if k < numKinds {
		return kinds[k].name
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

func (k Kind) props() kindProps {
	if k < numKinds {
		return kinds[k]
	}
	return kindProps{}
}

// Elementwise reports whether k maps elements independently (or moves them).
func (k Kind) Elementwise() bool { return k.props().elementwise }

// Injective reports whether each output element of k reads one element of
// one operand at an index of its own, or a zero (Reshape, Repeat, Slice,
// Concat, SliceIncr, Transpose, Im2Col), or a window's (MaxPool,
// MaxPoolDiff, Col2Im): such ops fuse wherever elementwise ones do, outside
// attention kernels.
func (k Kind) Injective() bool { return k.props().injective }

// Window reports whether k reads its operand over windows: each output
// element from a window of operand elements (MaxPool, MaxPoolDiff,
// Col2Im), or each operand element into a window of outputs (Im2Col).
func (k Kind) Window() bool { return k.props().window }

// Product reports whether k is a matrix product (MatMul, BatchedMatMul).
func (k Kind) Product() bool { return k.props().product }

// Row reports whether k is computed along whole rows of its last axis
// (Softmax, SoftmaxGrad).
func (k Kind) Row() bool { return k.props().row }

// Writable reports whether the catalogue writes k in tile IR itself (Write):
// elementwise and injective kinds. The others are written by the kernel
// that holds them (a reduction, a row, a product).
func (k Kind) Writable() bool { return k.props().write != nil }
