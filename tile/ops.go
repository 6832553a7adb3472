package tile

import (
	"fmt"
	"math"
)

// Op is an IR operation. Each op's semantics are stated here and implemented
// by the reference interpreter (package tile/interp), which is their
// executable definition.
type Op uint8

// The operations. Unless stated otherwise an op's operands share one shape,
// which is also its result's shape (the Builder inserts Splat/Broadcast).
const (
	OpInvalid Op = iota

	// Sources.
	OpParam       // kernel parameter number Aux, named Name: a pointer or a scalar
	OpConst       // scalar constant: AuxF for floats, Aux for ints and i1
	OpProgramID   // i32 coordinate of this program instance along axis Aux (0..2)
	OpNumPrograms // i32 number of program instances along axis Aux (0..2)
	OpArange      // i32 block [Aux, Aux2): make_range; Aux2-Aux a block dimension

	// Shape ops. They move elements, never change them.
	OpSplat      // scalar → block of the result's shape, every element the scalar
	OpBroadcast  // block → block of equal rank: dimensions of size 1 repeat to the result's
	OpExpandDims // insert a dimension of size 1 at axis Aux (x[:, None] is axis 1)
	OpReshape    // same elements in row-major order, new shape of equal element count
	OpTrans      // 2-D transpose: result[i,j] = x[j,i]

	// Pointers and memory. Pointer arithmetic counts elements, not bytes.
	OpAddPtr    // ptr + integer offset
	OpLoad      // load(ptr [, mask [, other]]): lanes whose mask is false are not read and give other (0 without one); Aux: CacheHint
	OpStore     // store(ptr, value [, mask]): lanes whose mask is false are not written; Aux: CacheHint
	OpAtomicAdd // atomic_add(ptr, value [, mask]) → the old values; f32, f64 or i32

	// Binary arithmetic, on operands of one dtype.
	OpAdd
	OpSub
	OpMul
	OpDiv // floats: IEEE division; ints: truncated toward zero; x/0 = -1 (unspecified on the GPU: mask such lanes)
	OpRem // floats: fmod (sign of the dividend); ints: truncated remainder; x%0 = x (unspecified on the GPU)
	OpMin // floats: NaN if either operand is NaN
	OpMax // floats: NaN if either operand is NaN
	OpPow // floats only: x**y
	OpAnd // i1 and ints: bitwise and
	OpOr  // i1 and ints: bitwise or
	OpXor // i1 and ints: bitwise xor

	// Comparisons, on operands of one dtype, giving i1. Ordered: false if a float operand is NaN, except Ne.
	OpEq
	OpNe
	OpLt
	OpLe
	OpGt
	OpGe

	OpSelect // select(cond i1, a, b): a where cond, else b; a and b of one non-pointer type
	OpCast   // convert to the result's dtype: float→int truncates toward zero; x→i1 is x != 0

	// Unary ops. Math ops take floats only and compute in their dtype (f32 math
	// is the f64 function rounded to f32, or an approximation within the op's
	// bound in tiletest.MathTol: 1–4 ulp, erf, sin and cos an absolute one;
	// each backend states its own).
	OpNeg  // -x (ints and floats)
	OpNot  // i1 and ints: bitwise not
	OpAbs  // |x| (ints and floats)
	OpSign // -1, 0 or +1 (ints and floats; NaN stays NaN)
	OpExp
	OpExp2 // Aux = 1 (Builder.Exp2Flush): a result below 2⁻¹²⁶ may be 0 besides 2^x's tolerance
	OpLog
	OpLog2
	OpLog1p
	OpExpm1
	OpSqrt
	OpRsqrt // 1/sqrt(x)
	OpTanh
	OpErf
	OpSigmoid // 1/(1+exp(-x))
	OpSin
	OpCos
	OpFloor
	OpCeil

	// Reductions of one axis (Aux) of a block; Aux2 = 1 keeps the axis with
	// size 1. Sum adds in the dtype; Max and Min propagate NaN. A rank-1 block
	// reduced without keep-dims gives a scalar.
	OpReduceSum
	OpReduceMax
	OpReduceMin

	// OpDot: dot(a [M,K], b [K,N], acc [M,N]) = acc + a·b, with f32 (f64 for
	// f64 operands) accumulation. M, N, K ≥ 16. Prec says how f32 products may be
	// formed: PrecIEEE exactly; PrecTF32 with a truncated to TF32 (10
	// mantissa bits, the 13 low bits dropped: TruncTF32, as the tensor cores
	// read an f32 operand) and b rounded to TF32 (RoundTF32);
	// PrecTF32TB the other way round (a rounded, b truncated);
	// PrecBF16 with them rounded to bfloat16; PrecTF32x3 as three TF32
	// products of the operands' high and low parts (see Precision).
	OpDot

	// Control flow.
	OpFor       // counted loop: Args = lower, upper, step, init...; body Body; results via OpForResult
	OpForResult // result number Aux of the OpFor in Args[0]
	OpBlockArg  // argument number Aux of a loop body: 0 the induction variable, 1.. the loop-carried values
	OpYield     // ends a loop body: Args are the next loop-carried values

	numOps
)

// opClass groups ops that share checks.
type opClass uint8

const (
	classNone opClass = iota
	classSource
	classShape
	classMemory
	classBinary
	classCompare
	classUnary
	classReduce
	classDot
	classControl
	classOther
)

// operand kinds an elementwise op accepts
const (
	okFloat = 1 << iota
	okInt
	okBool
	okAll = okFloat | okInt | okBool
)

type opInfo struct {
	name     string
	class    opClass
	accepts  uint8 // for binary, compare and unary ops: okFloat|okInt|okBool
	commutes bool
}

var opTable = [numOps]opInfo{
	OpInvalid:     {name: "invalid"},
	OpParam:       {name: "param", class: classSource},
	OpConst:       {name: "const", class: classSource},
	OpProgramID:   {name: "get_program_id", class: classSource},
	OpNumPrograms: {name: "get_num_programs", class: classSource},
	OpArange:      {name: "make_range", class: classSource},

	OpSplat:      {name: "splat", class: classShape},
	OpBroadcast:  {name: "broadcast", class: classShape},
	OpExpandDims: {name: "expand_dims", class: classShape},
	OpReshape:    {name: "reshape", class: classShape},
	OpTrans:      {name: "trans", class: classShape},

	OpAddPtr:    {name: "addptr", class: classMemory},
	OpLoad:      {name: "load", class: classMemory},
	OpStore:     {name: "store", class: classMemory},
	OpAtomicAdd: {name: "atomic_add", class: classMemory},

	OpAdd: {name: "add", class: classBinary, accepts: okFloat | okInt, commutes: true},
	OpSub: {name: "sub", class: classBinary, accepts: okFloat | okInt},
	OpMul: {name: "mul", class: classBinary, accepts: okFloat | okInt, commutes: true},
	OpDiv: {name: "div", class: classBinary, accepts: okFloat | okInt},
	OpRem: {name: "rem", class: classBinary, accepts: okFloat | okInt},
	OpMin: {name: "min", class: classBinary, accepts: okFloat | okInt, commutes: true},
	OpMax: {name: "max", class: classBinary, accepts: okFloat | okInt, commutes: true},
	OpPow: {name: "pow", class: classBinary, accepts: okFloat},
	OpAnd: {name: "and", class: classBinary, accepts: okInt | okBool, commutes: true},
	OpOr:  {name: "or", class: classBinary, accepts: okInt | okBool, commutes: true},
	OpXor: {name: "xor", class: classBinary, accepts: okInt | okBool, commutes: true},

	OpEq: {name: "cmp eq", class: classCompare, accepts: okAll, commutes: true},
	OpNe: {name: "cmp ne", class: classCompare, accepts: okAll, commutes: true},
	OpLt: {name: "cmp lt", class: classCompare, accepts: okFloat | okInt},
	OpLe: {name: "cmp le", class: classCompare, accepts: okFloat | okInt},
	OpGt: {name: "cmp gt", class: classCompare, accepts: okFloat | okInt},
	OpGe: {name: "cmp ge", class: classCompare, accepts: okFloat | okInt},

	OpSelect: {name: "select", class: classOther},
	OpCast:   {name: "cast", class: classOther},

	OpNeg:     {name: "neg", class: classUnary, accepts: okFloat | okInt},
	OpNot:     {name: "not", class: classUnary, accepts: okInt | okBool},
	OpAbs:     {name: "abs", class: classUnary, accepts: okFloat | okInt},
	OpSign:    {name: "sign", class: classUnary, accepts: okFloat | okInt},
	OpExp:     {name: "exp", class: classUnary, accepts: okFloat},
	OpExp2:    {name: "exp2", class: classUnary, accepts: okFloat},
	OpLog:     {name: "log", class: classUnary, accepts: okFloat},
	OpLog2:    {name: "log2", class: classUnary, accepts: okFloat},
	OpLog1p:   {name: "log1p", class: classUnary, accepts: okFloat},
	OpExpm1:   {name: "expm1", class: classUnary, accepts: okFloat},
	OpSqrt:    {name: "sqrt", class: classUnary, accepts: okFloat},
	OpRsqrt:   {name: "rsqrt", class: classUnary, accepts: okFloat},
	OpTanh:    {name: "tanh", class: classUnary, accepts: okFloat},
	OpErf:     {name: "erf", class: classUnary, accepts: okFloat},
	OpSigmoid: {name: "sigmoid", class: classUnary, accepts: okFloat},
	OpSin:     {name: "sin", class: classUnary, accepts: okFloat},
	OpCos:     {name: "cos", class: classUnary, accepts: okFloat},
	OpFloor:   {name: "floor", class: classUnary, accepts: okFloat},
	OpCeil:    {name: "ceil", class: classUnary, accepts: okFloat},

	OpReduceSum: {name: "reduce sum", class: classReduce, accepts: okFloat | okInt},
	OpReduceMax: {name: "reduce max", class: classReduce, accepts: okFloat | okInt},
	OpReduceMin: {name: "reduce min", class: classReduce, accepts: okFloat | okInt},

	OpDot: {name: "dot", class: classDot},

	OpFor:       {name: "for", class: classControl},
	OpForResult: {name: "for_result", class: classControl},
	OpBlockArg:  {name: "block_arg", class: classControl},
	OpYield:     {name: "yield", class: classControl},
}

func (o Op) String() string {
	if o < numOps && opTable[o].name != "" {
		return opTable[o].name
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

func (o Op) info() opInfo {
	if o < numOps {
		return opTable[o]
	}
	return opInfo{}
}

// IsBinary reports whether o is an elementwise binary arithmetic or logic op.
func (o Op) IsBinary() bool { return o.info().class == classBinary }

// IsCompare reports whether o is a comparison.
func (o Op) IsCompare() bool { return o.info().class == classCompare }

// IsUnary reports whether o is an elementwise unary op.
func (o Op) IsUnary() bool { return o.info().class == classUnary }

// IsShape reports whether o only moves elements: splat, broadcast,
// expand_dims, reshape, trans.
func (o Op) IsShape() bool { return o.info().class == classShape }

// IsReduce reports whether o reduces an axis.
func (o Op) IsReduce() bool { return o.info().class == classReduce }

// IsElementwise reports whether o maps elements independently (binary,
// compare, unary, select, cast).
func (o Op) IsElementwise() bool {
	c := o.info().class
	return c == classBinary || c == classCompare || c == classUnary || o == OpSelect || o == OpCast
}

// Commutes reports whether o's two operands may be swapped.
func (o Op) Commutes() bool { return o.info().commutes }

// accepts reports whether elementwise op o is defined on dtype d.
func (o Op) accepts(d DType) bool {
	a := o.info().accepts
	switch {
	case d.IsFloat():
		return a&okFloat != 0
	case d.IsInt():
		return a&okInt != 0
	case d == I1:
		return a&okBool != 0
	}
	return false
}

// CacheHint tells the GPU how a load or store should use the caches (as
// Triton's eviction_policy and cache_modifier do); it never changes results.
// On the CPU, codegen/cpu/native writes a store with CacheStreaming past the
// caches (non-temporal stores, where its vectors are aligned); the executor
// and the CPU's loads ignore hints.
type CacheHint uint8

const (
	CacheDefault   CacheHint = iota
	CacheStreaming           // data touched once: evict first (PTX .cs)
	// CacheKeep: data other programs read too (a LayerNorm's γ and β,
	// read by every row): kept in the caches, evicted last (Triton's
	// eviction_policy="evict_last"; PTX ld.global.L1::evict_last with an
	// L2 evict_last policy from createpolicy). Loads only.
	CacheKeep
	numCacheHints
)

func (h CacheHint) String() string {
	switch h {
	case CacheDefault:
		return "default"
	case CacheStreaming:
		return "streaming"
	case CacheKeep:
		return "keep"
	}
	return fmt.Sprintf("cache(%d)", uint8(h))
}

// Precision says how a dot forms f32 products.
type Precision uint8

const (
	PrecIEEE Precision = iota // exact f32 products
	// PrecTF32: a (the left operand) truncated to TF32 (TruncTF32), as the
	// tensor cores read an f32 operand they are given as it is, b rounded
	// to TF32 (RoundTF32, to nearest); the products are exact in f32 and
	// summed in f32. A kernel reads A through shared memory straight into
	// the tensor cores where it can (Hopper's wgmma) and converts B, which
	// it holds in registers, on the way.
	PrecTF32
	// PrecBF16: operands rounded to bfloat16 (RoundBF16: 8 bits of
	// mantissa, to nearest even); the products are exact in f32 and summed
	// in f32, as the tensor cores do with bf16 operands
	PrecBF16
	// PrecTF32x3 (3xTF32): each operand x split into hi = RoundTF32(x) and
	// lo = RoundTF32(x − hi); acc + a_lo·b_hi + a_hi·b_lo + a_hi·b_hi,
	// three products of TF32 operands (each exact in f32) summed in that
	// order, small ones first: close to f32's accuracy on the tensor cores
	PrecTF32x3
	// PrecTF32TB: PrecTF32 with its operands' conversions swapped: a
	// rounded to TF32 (RoundTF32), b truncated (TruncTF32). It is for
	// kernels that hold A in registers and give the tensor cores B as it
	// lies in shared memory, as flash attention's loops do (Q and P in
	// registers; K and V copied into shared memory and read from there):
	// they convert nothing in shared memory. Accuracy is PrecTF32's (one
	// operand rounded, one truncated). Graphpass chooses it for such
	// kernels where the user asked for TF32; it is not a user precision
	// (not in Precisions).
	PrecTF32TB
	numPrecisions
)

// Valid reports whether p is one of the precisions.
func (p Precision) Valid() bool { return p < numPrecisions }

func (p Precision) String() string {
	switch p {
	case PrecIEEE:
		return "ieee"
	case PrecTF32:
		return "tf32"
	case PrecBF16:
		return "bf16"
	case PrecTF32x3:
		return "tf32x3"
	case PrecTF32TB:
		return "tf32tb"
	}
	return fmt.Sprintf("precision(%d)", uint8(p))
}

// IsTF32 reports whether p is one of the TF32 precisions whose products
// are of single TF32 operands (PrecTF32, PrecTF32TB).
func (p Precision) IsTF32() bool { return p == PrecTF32 || p == PrecTF32TB }

// TruncatesA reports whether a dot of precision p truncates its a operand
// to TF32 (PrecTF32), and TruncatesB its b operand (PrecTF32TB); the other
// operand of a TF32 dot is rounded to nearest.
func (p Precision) TruncatesA() bool { return p == PrecTF32 }

// TruncatesB: see TruncatesA.
func (p Precision) TruncatesB() bool { return p == PrecTF32TB }

// Operands are the conversions by which a dot of precision p sees its f32
// operands a and b before it multiplies them: PrecTF32 TruncTF32 and
// RoundTF32, PrecTF32TB the other way round, PrecBF16 RoundBF16 for both;
// nil for ieee (as they are) and tf32x3 (which splits each: SplitTF32).
// The interpreter, the CPU backend and the tests' references read the
// rule here.
func (p Precision) Operands() (a, b func(float32) float32) {
	switch p {
	case PrecTF32:
		return TruncTF32, RoundTF32
	case PrecTF32TB:
		return RoundTF32, TruncTF32
	case PrecBF16:
		return RoundBF16, RoundBF16
	}
	return nil, nil
}

// Precisions lists the precisions a user chooses among, for parsing and
// for tables (PrecTF32TB, graphpass's choice for some kernels, is not one).
var Precisions = []Precision{PrecIEEE, PrecTF32, PrecBF16, PrecTF32x3}

// SplitTF32 splits x into hi = RoundTF32(x) and lo = RoundTF32(x − hi), as
// a dot with PrecTF32x3 sees its f32 operands (x − hi is exact in f32).
func SplitTF32(x float32) (hi, lo float32) {
	hi = RoundTF32(x)
	return hi, RoundTF32(x - hi)
}

// RoundBF16 rounds x to bfloat16 (8 bits of mantissa), to nearest with ties
// to even, as cvt.rn.bf16.f32 does, and returns it as an f32; NaN stays NaN
// (quieted), infinities pass through. It is how a dot with PrecBF16 sees
// its f32 operands.
func RoundBF16(x float32) float32 {
	u := math.Float32bits(x)
	if u&0x7f800000 == 0x7f800000 {
		if u&0x7fffff != 0 {
			u |= 1 << 22 // quiet NaN
		}
		return math.Float32frombits(u &^ (1<<16 - 1))
	}
	u += 0x7fff + (u >> 16 & 1)
	return math.Float32frombits(u &^ (1<<16 - 1))
}

// RoundTF32 rounds x to TF32 (10 explicit mantissa bits), to nearest with
// ties to even, as cvt.rn.tf32.f32 does (one instruction on sm_90; ties
// went away from zero, cvt.rna, until 2026-12-03); infinities and NaN pass
// through. It is how a dot with PrecTF32 sees its b operand, and how one
// with PrecTF32x3 splits its f32 operands (SplitTF32).
func RoundTF32(x float32) float32 {
	u := math.Float32bits(x)
	if u&0x7f800000 == 0x7f800000 {
		return x
	}
	u += 1<<12 - 1 + u>>13&1
	u &^= 1<<13 - 1
	return math.Float32frombits(u)
}

// TruncTF32 is x with its 13 low mantissa bits cleared: TF32 (10 explicit
// mantissa bits) rounded towards zero, which is how the tensor cores read an
// f32 operand that was not converted first (measured on the H200, 2026-12-01:
// wgmma's shared-memory operands), and what the generated kernels do to the
// A operands they hold in registers (and.b32 with 0xffffe000). It is how a
// dot with PrecTF32 sees its a operand. Infinities and zeros pass through, and
// so does a NaN whose payload has a bit among the 10 high mantissa bits (a
// quiet NaN always does); a NaN whose payload lies only in the 13 low bits
// becomes an infinity of its sign, as the mask makes it.
func TruncTF32(x float32) float32 {
	return math.Float32frombits(math.Float32bits(x) &^ (1<<13 - 1))
}
