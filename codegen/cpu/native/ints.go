package native

import (
	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
	"github.com/tilefuse/tilefuse/tile"
)

// i32 data blocks: i32 values that are not affine in the lanes (loaded
// integers and what is computed from them, a float cast to i32) are
// vectors of eight lanes computed per position like f32 ones (kind kFloat;
// loads, stores, selects and frame blocks move their bits alike), in ymm
// loops only (zmmOp). Their ops are the reference's on int32 (wrapping):
//
//   - add, sub, mul (low 32 bits), min, max, and, or, xor, not, neg, abs
//     (MinInt32 stays), sign, select;
//   - div and rem: the quotient of two int32 is exact once truncated in
//     float64 (|a/b| < 2³¹ and a non-integer quotient is at least 1/|b|
//     from an integer, far more than float64's rounding of it), so
//     trunc(a/b) is computed in float64 halves and converted back
//     (MinInt32 / −1 gives 2³¹, which converts to MinInt32: −a wrapped, as
//     the reference); a rem b = a − q·b in int32 (0 where b = −1, a where
//     b = 0, as the reference); a div 0 is the reference's −1, blended in;
//   - casts from i1 (1 where true) and from f32: truncation toward zero,
//     saturating, NaN giving 0 (cvttps2dq gives MinInt32 for NaN and for
//     every lane out of range: those at or past 2³¹ take MaxInt32, NaN 0).
//
// An affine pointer plus such a block (offsets loaded or computed) is a
// kScatter pointer: atomic adds take it, lane by lane, each lane's element
// checked against its buffer (body.go: atomicAdd), loads of 4-byte
// elements (f32, i32: a gather, body.go: gatherIdx: each active lane's
// element checked and inserted, the others +0 or other) and stores
// (scatterIdx: lane by lane in order, each element checked; a kernel that
// also loads from that buffer is declined). An i32 scalar loaded once a program (an
// embedding's row index) is a scalar slot like any integer scalar, so the
// addresses computed from it are affine (gen.go: scalarInt). Broadcasts,
// expand_dims and reshapes that only add or drop dimensions of 1 of a
// data block are views read through, as a float block's (labels against a
// row of classes: a one-hot mask), and a loop carries i32 blocks in frame
// blocks as it carries f32 ones. Declined still: reductions of i32 blocks
// and casts from f64 to i32 blocks.

// intDataOp reports whether the code computes op o on i32 data blocks.
func intDataOp(v *tile.Value) bool {
	switch v.Op {
	case tile.OpAdd, tile.OpSub, tile.OpMul, tile.OpMin, tile.OpMax, tile.OpAnd, tile.OpOr, tile.OpXor,
		tile.OpNot, tile.OpNeg, tile.OpAbs, tile.OpSign, tile.OpSelect, tile.OpDiv, tile.OpRem:
		return true
	case tile.OpCast:
		d := v.Args[0].Type.DType
		return d == tile.I1 || d == tile.F32
	}
	return false
}

// intTemps is how many temporaries intOp takes for v (tempsFor).
func intTemps(v *tile.Value) int {
	switch v.Op {
	case tile.OpDiv, tile.OpRem:
		return 6
	case tile.OpCast, tile.OpMin, tile.OpMax, tile.OpSign, tile.OpSelect:
		return 3
	}
	return 2
}

// intOp emits an op on i32 data lanes (ymm).
func (g *gen) intOp(v *tile.Value, dst amd64.VReg, s []opnd, t []amd64.VReg) error {
	a := &g.a
	x := func() amd64.VReg { return g.reg(s[0], t[0]) }
	switch v.Op {
	case tile.OpAdd:
		a.VPADDD(dst, x(), s[1].rm())
	case tile.OpSub:
		a.VPSUBD(dst, x(), s[1].rm())
	case tile.OpMul:
		a.VPMULLD(dst, x(), s[1].rm())
	case tile.OpMin:
		a.VPMINSD(dst, x(), s[1].rm())
	case tile.OpMax:
		a.VPMAXSD(dst, x(), s[1].rm())
	case tile.OpAnd:
		a.VPAND(dst, x(), s[1].rm())
	case tile.OpOr:
		a.VPOR(dst, x(), s[1].rm())
	case tile.OpXor:
		a.VPXOR(dst, x(), s[1].rm())
	case tile.OpNot:
		a.VPXOR(dst, x(), g.constVec(0xffffffff))
	case tile.OpNeg:
		r := x()
		a.VPXOR(t[1], t[1], t[1])
		a.VPSUBD(dst, t[1], r)
	case tile.OpAbs:
		a.VPABSD(dst, s[0].rm())
	case tile.OpSign: // min(max(x, −1), 1)
		a.VPMAXSD(t[1], x(), g.constVec(0xffffffff))
		a.VPMINSD(dst, t[1], g.constVec(1))
	case tile.OpSelect:
		a.VBLENDVPS(dst, g.reg(s[2], t[0]), s[1].rm(), g.maskReg(s[0], t))
	case tile.OpCast:
		switch v.Args[0].Type.DType {
		case tile.I1:
			a.VPAND(dst, x(), g.constVec(1))
		case tile.F32:
			f := x()
			a.VCVTTPS2DQ(t[1], f)
			// at or past 2³¹: MaxInt32; NaN: 0
			a.VCMPPS(t[2], f, g.constF32(0x1p31), amd64.CmpGE)
			a.VBLENDVPS(t[1], t[1], g.constVec(0x7fffffff), t[2])
			a.VCMPPS(t[2], f, f, amd64.CmpORD)
			a.VPAND(dst, t[1], t[2])
		default:
			return unsupported(v, "cast from %v to an i32 block", v.Args[0].Type.DType)
		}
	case tile.OpDiv, tile.OpRem:
		xr, yr := x(), g.reg(s[1], t[1])
		for h := 0; h < 2; h++ {
			if h == 0 {
				a.VCVTDQ2PD(t[4], xr)
				a.VCVTDQ2PD(t[5], yr)
			} else {
				a.VEXTRACTF128(t[3], xr, 1)
				a.VCVTDQ2PD(t[4], t[3])
				a.VEXTRACTF128(t[3], yr, 1)
				a.VCVTDQ2PD(t[5], t[3])
			}
			a.VDIVPD(t[4], t[4], t[5])
			a.VROUNDPD(t[4], t[4], 3)
			a.VCVTTPD2DQ(t[2+h], t[4]) // t2: lanes 0–3 (its high half read), t3: lanes 4–7
		}
		a.VINSERTF128(t[2], t[2], t[3], 1) // q
		if v.Op == tile.OpRem {
			// a − q·b: a where b = 0 (q is MinInt32 there, q·0 = 0)
			a.VPMULLD(t[2], t[2], yr)
			a.VPSUBD(dst, xr, t[2])
			break
		}
		// b = 0: −1
		a.VPXOR(t[3], t[3], t[3])
		a.VPCMPEQD(t[3], t[3], yr)
		a.VPOR(dst, t[2], t[3])
	default:
		return unsupported(v, "i32 %v", v.Op)
	}
	return nil
}
