package codegen

import "github.com/tilefuse/tilefuse/tile"

// axisInfo is what is known of a value along its last dimension, in the
// manner of Triton's AxisInfo: Contig is the length of runs of consecutive
// values (pointers: consecutive elements), Div a power of two dividing the
// first value of every run (pointers: in bytes), Const the length of runs of
// equal values. Runs start at multiples of their length. A scalar is one run.
type axisInfo struct {
	Contig, Div, Const int
}

const bigDiv = 1 << 20 // "divisible by anything we care about" (the value 0)

// lastDim is the length of t's last dimension (1 for scalars).
func lastDim(t tile.Type) int {
	if t.Shape.Rank == 0 {
		return 1
	}
	return t.Shape.Dims[t.Shape.Rank-1]
}

func pow2Div(x int64) int {
	if x == 0 {
		return bigDiv
	}
	d := 1
	for x%2 == 0 && d < bigDiv {
		x /= 2
		d *= 2
	}
	return d
}

func gcd2(a, b int) int { return min(a, b) } // gcd of powers of two

// analyzeAxes computes axisInfo for every value. spec gives, per parameter,
// the known divisibility of its value (integers) or address in bytes
// (pointers); 0 or missing means 1.
func analyzeAxes(k *tile.Kernel, spec []int) []axisInfo {
	info := make([]axisInfo, k.NumValues())
	get := func(v *tile.Value) axisInfo { return info[v.ID] }
	loopOf := map[*tile.Value]*tile.Value{} // induction variable → its loop
	k.Walk(func(v *tile.Value) {
		L := lastDim(v.Type)
		ai := axisInfo{Contig: 1, Div: 1, Const: 1}
		switch v.Op {
		case tile.OpFor:
			loopOf[v.Body.Args[0]] = v
		case tile.OpBlockArg:
			if f, ok := loopOf[v]; ok { // lo + i·step: divisible by what divides both
				ai.Div = gcd2(get(f.Args[0]).Div, get(f.Args[2]).Div)
			}
		case tile.OpParam:
			d := 1
			if int(v.Aux) < len(spec) && spec[v.Aux] > 0 {
				d = spec[v.Aux]
			}
			ai = axisInfo{Contig: 1, Div: d, Const: 1}
		case tile.OpConst:
			if v.Type.DType.IsInt() {
				ai.Div = pow2Div(v.Aux)
			}
		case tile.OpArange:
			ai = axisInfo{Contig: L, Div: pow2Div(v.Aux), Const: 1}
		case tile.OpSplat:
			a := get(v.Args[0])
			ai = axisInfo{Contig: 1, Div: a.Div, Const: L}
		case tile.OpBroadcast:
			a := get(v.Args[0])
			if lastDim(v.Args[0].Type) == 1 && L > 1 {
				ai = axisInfo{Contig: 1, Div: a.Div, Const: L}
			} else {
				ai = a
			}
		case tile.OpExpandDims:
			a := get(v.Args[0])
			if int(v.Aux) == v.Args[0].Type.Shape.Rank { // new last dimension of size 1
				ai = axisInfo{Contig: 1, Div: a.Div, Const: 1}
			} else {
				ai = a
			}
		case tile.OpReshape, tile.OpTrans:
			ai.Div = get(v.Args[0]).Div
		case tile.OpAdd, tile.OpAddPtr:
			a, b := get(v.Args[0]), get(v.Args[1])
			scale := 1
			if v.Op == tile.OpAddPtr {
				scale = v.Type.DType.Size()
			}
			ai.Contig = max(min(a.Contig, b.Const), min(a.Const, b.Contig))
			ai.Div = gcd2(a.Div, min(b.Div*scale, bigDiv))
			ai.Const = gcd2(a.Const, b.Const)
		case tile.OpSub:
			a, b := get(v.Args[0]), get(v.Args[1])
			ai.Contig = min(a.Contig, b.Const)
			ai.Div = gcd2(a.Div, b.Div)
			ai.Const = gcd2(a.Const, b.Const)
		case tile.OpMul:
			a, b := get(v.Args[0]), get(v.Args[1])
			ai.Div = min(a.Div*b.Div, bigDiv)
			ai.Const = gcd2(a.Const, b.Const)
		case tile.OpLt, tile.OpLe, tile.OpGt, tile.OpGe, tile.OpEq, tile.OpNe:
			a, b := get(v.Args[0]), get(v.Args[1])
			ai.Const = gcd2(a.Const, b.Const)
			// a contiguous run against a constant: the result can change only
			// where the run crosses the constant, at a multiple of both divisors
			if a.Contig > 1 && b.Const > 1 {
				ai.Const = max(ai.Const, min(a.Contig, b.Const, a.Div, b.Div))
			}
			if b.Contig > 1 && a.Const > 1 {
				ai.Const = max(ai.Const, min(b.Contig, a.Const, a.Div, b.Div))
			}
		default:
			if v.Op.IsElementwise() {
				c := L
				for _, a := range v.Args {
					c = gcd2(c, get(a).Const)
				}
				ai.Const = c
			}
		}
		ai.Contig = min(max(ai.Contig, 1), L)
		ai.Const = min(max(ai.Const, 1), L)
		info[v.ID] = ai
	})
	return info
}
