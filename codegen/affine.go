package codegen

import (
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/analysis"
)

// Per-dimension facts for the copies of mma loops (mmaloop.go): which
// dimension of a loaded block is contiguous in memory and how wide a copy
// may be. tile/analysis knows the last dimension only; a block of keys
// loaded transposed ([head dim, keys], the head dim contiguous) needs the
// first.

// affine says that an integer or pointer block is base + Σ_d Coef[d]·i_d
// at lane coordinates i (pointers in bytes), with Div a power of two
// dividing base; Const when every lane holds the known value Base.
type affine struct {
	Coef  []int64
	Div   int64
	Const bool
	Base  int64
}

// step is Σ_d Coef[d]·c_d: the block's value at coordinates c less its
// value at the origin (copyBases' offset of a slot).
func (a *affine) step(c []int) int64 {
	var d int64
	for i, x := range c {
		d += a.Coef[i] * int64(x)
	}
	return d
}

func (a *affine) uniform() bool {
	for _, c := range a.Coef {
		if c != 0 {
			return false
		}
	}
	return true
}

// affineOf is v as an affine block, or nil when it is not one (or not
// known to be).
func (l *lowerer) affineOf(v *tile.Value, memo map[*tile.Value]*affine) *affine {
	if a, ok := memo[v]; ok {
		return a
	}
	a := l.affineCompute(v, memo)
	memo[v] = a
	return a
}

func (l *lowerer) affineCompute(v *tile.Value, memo map[*tile.Value]*affine) *affine {
	if !v.Type.Ptr && !v.Type.DType.IsInt() {
		return nil
	}
	r := v.Type.Shape.Rank
	zero := make([]int64, r)
	capDiv := func(d int64) int64 { return min(d, analysis.MaxDiv) }
	if r == 0 {
		if v.Op == tile.OpConst {
			return &affine{Coef: zero, Div: int64(analysis.Pow2Div(v.Aux)), Const: true, Base: v.Aux}
		}
		if v.ID < len(l.axes) {
			return &affine{Coef: zero, Div: int64(max(1, l.axes[v.ID].Div))}
		}
		return &affine{Coef: zero, Div: 1}
	}
	arg := func(i int) *affine { return l.affineOf(v.Args[i], memo) }
	switch v.Op {
	case tile.OpArange:
		return &affine{Coef: []int64{1}, Div: int64(analysis.Pow2Div(v.Aux)), Base: v.Aux}
	case tile.OpSplat:
		s := arg(0)
		if s == nil {
			return nil
		}
		return &affine{Coef: zero, Div: s.Div, Const: s.Const, Base: s.Base}
	case tile.OpExpandDims:
		s := arg(0)
		if s == nil {
			return nil
		}
		c := append(append(append([]int64(nil), s.Coef[:v.Aux]...), 0), s.Coef[v.Aux:]...)
		return &affine{Coef: c, Div: s.Div, Const: s.Const, Base: s.Base}
	case tile.OpBroadcast:
		s := arg(0)
		if s == nil || len(s.Coef) != r {
			return nil
		}
		c := append([]int64(nil), s.Coef...)
		for d := range c {
			if v.Args[0].Type.Shape.Dims[d] == 1 {
				c[d] = 0
			}
		}
		return &affine{Coef: c, Div: s.Div, Const: s.Const, Base: s.Base}
	case tile.OpTrans:
		s := arg(0)
		if s == nil {
			return nil
		}
		return &affine{Coef: []int64{s.Coef[1], s.Coef[0]}, Div: s.Div, Const: s.Const, Base: s.Base}
	case tile.OpCast:
		if v.Args[0].Type.DType.IsInt() && v.Args[0].Type.DType != tile.I1 {
			return arg(0)
		}
		return nil
	case tile.OpAdd, tile.OpSub:
		a, b := arg(0), arg(1)
		if a == nil || b == nil || len(a.Coef) != r || len(b.Coef) != r {
			return nil
		}
		c := make([]int64, r)
		for d := range c {
			if v.Op == tile.OpAdd {
				c[d] = a.Coef[d] + b.Coef[d]
			} else {
				c[d] = a.Coef[d] - b.Coef[d]
			}
		}
		out := &affine{Coef: c, Div: min(a.Div, b.Div), Const: a.Const && b.Const}
		if out.Const {
			out.Base = a.Base + b.Base
			if v.Op == tile.OpSub {
				out.Base = a.Base - b.Base
			}
			out.Div = int64(analysis.Pow2Div(out.Base))
		}
		return out
	case tile.OpMul:
		a, b := arg(0), arg(1)
		if a == nil || b == nil || len(a.Coef) != r || len(b.Coef) != r {
			return nil
		}
		if b.Const {
			a, b = b, a
		}
		c := make([]int64, r)
		switch {
		case a.Const:
			for d := range c {
				c[d] = b.Coef[d] * a.Base
			}
			out := &affine{Coef: c, Div: capDiv(b.Div * int64(analysis.Pow2Div(a.Base))), Const: b.Const, Base: a.Base * b.Base}
			return out
		case a.uniform() && b.uniform():
			return &affine{Coef: c, Div: capDiv(a.Div * b.Div)}
		}
		return nil
	case tile.OpAddPtr:
		p, off := arg(0), arg(1)
		if p == nil || off == nil || len(p.Coef) != r || len(off.Coef) != r {
			return nil
		}
		size := int64(v.Type.DType.Size())
		c := make([]int64, r)
		for d := range c {
			c[d] = p.Coef[d] + off.Coef[d]*size
		}
		return &affine{Coef: c, Div: min(p.Div, capDiv(off.Div*size))}
	}
	return nil
}

// runs is a power of two r such that the i1 block v is constant on the
// aligned runs of r lanes along dimension d (MaxDiv: along all of it).
func (l *lowerer) runs(v *tile.Value, d int, memo map[*tile.Value]*affine) int64 {
	const all = analysis.MaxDiv
	if v.Type.Shape.Rank == 0 {
		return all
	}
	switch v.Op {
	case tile.OpConst, tile.OpSplat:
		return all
	case tile.OpBroadcast:
		if v.Args[0].Type.Shape.Dims[d] == 1 {
			return all
		}
		return l.runs(v.Args[0], d, memo)
	case tile.OpExpandDims:
		switch {
		case d == int(v.Aux):
			return all
		case d > int(v.Aux):
			return l.runs(v.Args[0], d-1, memo)
		}
		return l.runs(v.Args[0], d, memo)
	case tile.OpTrans:
		return l.runs(v.Args[0], 1-d, memo)
	case tile.OpAnd, tile.OpOr, tile.OpXor:
		return min(l.runs(v.Args[0], d, memo), l.runs(v.Args[1], d, memo))
	case tile.OpNot:
		return l.runs(v.Args[0], d, memo)
	case tile.OpSelect:
		return min(l.runs(v.Args[0], d, memo), l.runs(v.Args[1], d, memo), l.runs(v.Args[2], d, memo))
	case tile.OpLt, tile.OpGe, tile.OpGt, tile.OpLe, tile.OpEq, tile.OpNe:
		a, b := l.affineOf(v.Args[0], memo), l.affineOf(v.Args[1], memo)
		if a == nil || b == nil || len(a.Coef) != len(b.Coef) || d >= len(a.Coef) {
			return 1
		}
		if a.Coef[d] == 0 && b.Coef[d] == 0 {
			return all
		}
		// i < bound (or i ≥ bound): one step along d adds one, the bound
		// does not move along d, and the step where the result flips is a
		// multiple of r for every other lane coordinate
		idx, bound := a, b
		switch v.Op {
		case tile.OpGt, tile.OpLe:
			idx, bound = b, a
		case tile.OpLt, tile.OpGe:
		default:
			return 1
		}
		if idx.Coef[d] != 1 || bound.Coef[d] != 0 {
			return 1
		}
		r := min(idx.Div, bound.Div)
		for e := range idx.Coef {
			if e != d {
				r = min(r, int64(analysis.Pow2Div(idx.Coef[e])), int64(analysis.Pow2Div(bound.Coef[e])))
			}
		}
		return r
	}
	return 1
}
