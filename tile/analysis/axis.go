package analysis

import "github.com/tilefuse/tilefuse/tile"

// AxisInfo is what is known of a value's lanes.
//
// Rows are the runs of lanes along the last dimension, Row lanes each (1 for
// a scalar). Along a row, in the manner of Triton's AxisInfo: Contig is the
// length of runs of consecutive values (integers: lane j of a run holds its
// first value plus j; pointers: points j elements past it), Div a power of two
// dividing the first value of every run (pointers: the address in bytes, given
// the parameters' divisibility), Const the length of runs of equal values.
// Runs start at multiples of their length and never cross rows; a lane that
// is a run of its own has Div dividing its value.
//
// Over the whole block, in row-major lane order: Uniform says every lane
// holds the same value, Contiguous that lane i holds lane 0's value plus i
// (pointers: i elements past it), so that a contiguous pointer block covers
// one unbroken window of memory. A block of one element is both.
type AxisInfo struct {
	Row                 int
	Contig, Div, Const  int
	Uniform, Contiguous bool
}

// RowContiguous reports whether every row is one run of consecutive values:
// the offsets of a 2-D tile of a row-major matrix are.
func (a AxisInfo) RowContiguous() bool { return a.Contig == a.Row }

// RowUniform reports whether every lane of a row holds the same value: a
// [R,1] block broadcast along its rows does.
func (a AxisInfo) RowUniform() bool { return a.Const == a.Row }

// MaxDiv stands for "divisible by any power of two we care about": the
// divisibility of the value 0.
const MaxDiv = 1 << 20

// Pow2Div is the largest power of two dividing x, at most MaxDiv (x = 0: MaxDiv).
func Pow2Div(x int64) int {
	if x == 0 {
		return MaxDiv
	}
	d := 1
	for x%2 == 0 && d < MaxDiv {
		x /= 2
		d *= 2
	}
	return d
}

// LastDim is the length of a shape's rows: its last dimension, 1 for a scalar.
func LastDim(s tile.Shape) int {
	if s.Rank == 0 {
		return 1
	}
	return s.Dims[s.Rank-1]
}

// Axes computes AxisInfo for every value of k, by value ID. spec gives, per
// parameter (by number), the known divisibility of its value (integers) or
// of its address in bytes (pointers); 0 or missing means 1: nothing known.
// Loop-carried values are assumed to be neither uniform nor contiguous; a
// loop's induction variable, lo + i·step, is divisible by what divides both.
func Axes(k *tile.Kernel, spec []int) []AxisInfo {
	info := make([]AxisInfo, k.NumValues())
	loopOf := map[*tile.Value]*tile.Value{} // induction variable → its loop
	k.Walk(func(v *tile.Value) {
		if v.ID < 0 || v.ID >= len(info) {
			return
		}
		if v.Op == tile.OpFor && v.Body != nil && len(v.Body.Args) > 0 {
			loopOf[v.Body.Args[0]] = v
		}
		info[v.ID] = axisInfo(v, info, spec)
		if f, ok := loopOf[v]; ok && len(f.Args) >= 3 {
			info[v.ID].Div = min(info[f.Args[0].ID].Div, info[f.Args[2].ID].Div)
		}
	})
	return info
}

// indexLike reports whether t holds indices or addresses: ints and pointers,
// the only values whose lanes can be consecutive.
func indexLike(t tile.Type) bool { return t.Ptr || t.DType.IsInt() }

// unit is what one step along a run adds to the divisibility's measure:
// pointers are measured in bytes, integers in themselves.
func unit(t tile.Type) int {
	if t.Ptr {
		return t.DType.Size()
	}
	return 1
}

// divAt is a power of two dividing a's value at every lane whose position
// in its row is a multiple of c (a power of two): a run's first value, or
// inside a longer run, that value plus a multiple of c steps.
func divAt(a AxisInfo, t tile.Type, c int) int {
	if a.Contig > c {
		return min(a.Div, c*unit(t))
	}
	return a.Div
}

func axisInfo(v *tile.Value, info []AxisInfo, spec []int) AxisInfo {
	L := LastDim(v.Type.Shape)
	arg := func(i int) AxisInfo {
		a := v.Args[i]
		if a.ID < 0 || a.ID >= len(info) {
			return AxisInfo{Row: LastDim(a.Type.Shape), Contig: 1, Div: 1, Const: 1}
		}
		return info[a.ID]
	}
	argT := func(i int) tile.Type { return v.Args[i].Type }
	ai := AxisInfo{Row: L, Contig: 1, Div: 1, Const: 1}
	switch v.Op {
	case tile.OpParam:
		if int(v.Aux) < len(spec) && spec[v.Aux] > 0 {
			ai.Div = spec[v.Aux]
		}
	case tile.OpConst:
		if v.Type.DType.IsInt() {
			ai.Div = Pow2Div(v.Aux)
		}
	case tile.OpArange:
		ai.Contig, ai.Div, ai.Contiguous = L, Pow2Div(v.Aux), true
	case tile.OpSplat:
		ai.Div, ai.Const, ai.Uniform = arg(0).Div, L, true
	case tile.OpBroadcast:
		a := arg(0)
		if LastDim(argT(0).Shape) == 1 { // along the rows: the operand's lanes are runs of one
			ai.Div, ai.Const = a.Div, L
		} else { // the rows are the operand's rows, repeated
			ai.Contig, ai.Div, ai.Const = a.Contig, a.Div, a.Const
		}
		ai.Uniform = a.Uniform
	case tile.OpExpandDims, tile.OpReshape: // row-major lane order is unchanged
		a := arg(0)
		ai.Uniform, ai.Contiguous = a.Uniform, a.Contiguous
		switch {
		case LastDim(argT(0).Shape) == L: // the same rows
			ai.Contig, ai.Div, ai.Const = a.Contig, a.Div, a.Const
		case a.Contiguous: // rows of L consecutive values, each L steps past the last
			ai.Contig, ai.Div = L, min(a.Div, L*unit(v.Type))
		case a.Uniform:
			ai.Div, ai.Const = a.Div, L
		default:
			ai.Div = divAt(a, argT(0), 1)
		}
	case tile.OpTrans:
		a := arg(0)
		ai.Uniform, ai.Div = a.Uniform, divAt(a, argT(0), 1)
		if a.Uniform {
			ai.Const = L
		}
	case tile.OpAdd, tile.OpAddPtr:
		a, b := arg(0), arg(1)
		scale := 1
		if v.Op == tile.OpAddPtr {
			scale = v.Type.DType.Size()
		}
		if indexLike(v.Type) {
			ai.Contig = max(min(a.Contig, b.Const), min(a.Const, b.Contig))
			ai.Contiguous = a.Contiguous && b.Uniform || a.Uniform && b.Contiguous
		}
		c := min(max(ai.Contig, 1), L)
		ai.Div = min(divAt(a, argT(0), c), divAt(b, argT(1), c)*scale)
		ai.Const = min(a.Const, b.Const)
		ai.Uniform = a.Uniform && b.Uniform
	case tile.OpSub:
		a, b := arg(0), arg(1)
		if indexLike(v.Type) {
			ai.Contig = min(a.Contig, b.Const)
			ai.Contiguous = a.Contiguous && b.Uniform
		}
		c := min(max(ai.Contig, 1), L)
		ai.Div = min(divAt(a, argT(0), c), divAt(b, argT(1), c))
		ai.Const = min(a.Const, b.Const)
		ai.Uniform = a.Uniform && b.Uniform
	case tile.OpMul:
		a, b := arg(0), arg(1)
		if v.Type.DType.IsInt() {
			ai.Div = divAt(a, argT(0), 1) * divAt(b, argT(1), 1)
		}
		ai.Const = min(a.Const, b.Const)
		ai.Uniform = a.Uniform && b.Uniform
	case tile.OpLt, tile.OpLe, tile.OpGt, tile.OpGe, tile.OpEq, tile.OpNe:
		a, b := arg(0), arg(1)
		ai.Const = min(a.Const, b.Const)
		// a run of consecutive values against a constant: the result can
		// change only where the run crosses the constant, at a multiple of
		// both divisibilities
		if a.Contig > 1 && b.Const > 1 {
			ai.Const = max(ai.Const, min(a.Contig, b.Const, a.Div, b.Div))
		}
		if b.Contig > 1 && a.Const > 1 {
			ai.Const = max(ai.Const, min(b.Contig, a.Const, a.Div, b.Div))
		}
		ai.Uniform = a.Uniform && b.Uniform
	case tile.OpCast:
		// a widening integer cast (i32 offsets to i64: tile.Builder.Index64,
		// a product's 64-bit output) keeps every value, and so its runs,
		// divisibility and constancy; any other cast is elementwise
		from, to := argT(0).DType, v.Type.DType
		if from.IsInt() && from != tile.I1 && to.IsInt() && to.Size() >= from.Size() {
			a := arg(0)
			ai.Contig, ai.Div, ai.Const, ai.Uniform, ai.Contiguous = a.Contig, a.Div, a.Const, a.Uniform, a.Contiguous
			break
		}
		ai.Const, ai.Uniform = arg(0).Const, arg(0).Uniform
	case tile.OpSelect:
		// either operand, lane by lane: divisible by what divides both
		// (per-head offsets chosen by program id, as the heads' kernels
		// pick their weights' slices)
		ai.Const, ai.Uniform = L, true
		for i := range v.Args {
			a := arg(i)
			ai.Const, ai.Uniform = min(ai.Const, a.Const), ai.Uniform && a.Uniform
		}
		if v.Type.DType.IsInt() && v.Type.DType != tile.I1 {
			ai.Div = min(divAt(arg(1), argT(1), 1), divAt(arg(2), argT(2), 1))
		}
	default:
		if v.Op.IsElementwise() {
			ai.Const, ai.Uniform = L, true
			for i := range v.Args {
				a := arg(i)
				ai.Const, ai.Uniform = min(ai.Const, a.Const), ai.Uniform && a.Uniform
			}
		}
	}
	ai.Contig = min(max(ai.Contig, 1), L)
	ai.Const = min(max(ai.Const, 1), L)
	ai.Div = min(max(ai.Div, 1), MaxDiv)
	if v.Type.Shape.Numel() == 1 {
		ai.Uniform, ai.Contiguous = true, true
	}
	if ai.Uniform {
		ai.Const = L
	}
	return ai
}
