package native

import (
	"math"

	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
	"github.com/tilefuse/tilefuse/tile"
)

// The elementwise ops on eight f32 (or mask) lanes. Each writes dst with
// its last instruction, so dst may be the register of an operand; temps
// are registers of its own.

// reg is o in a register (a memory operand loaded into t).
func (g *gen) reg(o opnd, t amd64.VReg) amd64.VReg {
	if o.isMem {
		g.a.VMOVUPS(t, o.mem)
		return t
	}
	return o.reg
}

var cmpPred = map[tile.Op]uint8{
	tile.OpEq: amd64.CmpEQ, tile.OpNe: amd64.CmpNEQ, tile.OpLt: amd64.CmpLT,
	tile.OpLe: amd64.CmpLE, tile.OpGt: amd64.CmpGT, tile.OpGe: amd64.CmpGE,
}

// floatCompare: dst = x op y on f32 lanes (ordered: false with a NaN, but
// for Ne).
func (g *gen) floatCompare(op tile.Op, dst, x amd64.VReg, y opnd) {
	g.a.VCMPPS(dst, x, y.rm(), cmpPred[op])
}

// floatOp emits f32 op v.
func (g *gen) floatOp(v *tile.Value, dst amd64.VReg, s []opnd, t []amd64.VReg) error {
	a := &g.a
	switch v.Op {
	case tile.OpAdd:
		a.VADDPS(dst, g.reg(s[0], t[0]), s[1].rm())
	case tile.OpSub:
		a.VSUBPS(dst, g.reg(s[0], t[0]), s[1].rm())
	case tile.OpMul:
		a.VMULPS(dst, g.reg(s[0], t[0]), s[1].rm())
	case tile.OpDiv:
		a.VDIVPS(dst, g.reg(s[0], t[0]), s[1].rm())
	case tile.OpMin, tile.OpMax:
		// (x != x || x op y) ? x : y, as the reference: vminps/vmaxps give
		// y when either is NaN, so lanes where x is NaN take x
		x := g.reg(s[0], t[0])
		if v.Op == tile.OpMin {
			a.VMINPS(t[1], x, s[1].rm())
		} else {
			a.VMAXPS(t[1], x, s[1].rm())
		}
		a.VCMPPS(t[2], x, x, amd64.CmpUNORD)
		a.VBLENDVPS(dst, t[1], x, t[2])
	case tile.OpNeg:
		a.VXORPS(dst, g.reg(s[0], t[0]), g.constVec(0x80000000))
	case tile.OpAbs:
		a.VANDPS(dst, g.reg(s[0], t[0]), g.constVec(0x7fffffff))
	case tile.OpSqrt:
		a.VSQRTPS(dst, s[0].rm())
	case tile.OpFloor:
		a.VROUNDPS(dst, s[0].rm(), 9)
	case tile.OpCeil:
		a.VROUNDPS(dst, s[0].rm(), 10)
	case tile.OpRsqrt:
		// 1/√x in float64, rounded once to f32, as the reference
		x := g.reg(s[0], t[0])
		one := g.constF64(1)
		a.VCVTPS2PD(t[1], x)
		a.VSQRTPD(t[1], t[1])
		a.VMOVUPD(t[2], one)
		a.VDIVPD(t[2], t[2], t[1])
		a.VCVTPD2PS(t[2], t[2]) // low half in xmm t2
		a.VEXTRACTF128(t[1], x, 1)
		a.VCVTPS2PD(t[1], t[1])
		a.VSQRTPD(t[1], t[1])
		a.VMOVUPD(t[0], one) // x is no longer needed
		a.VDIVPD(t[0], t[0], t[1])
		a.VCVTPD2PS(t[0], t[0])
		a.VINSERTF128(dst, t[2], t[0], 1)
	case tile.OpExp, tile.OpTanh:
		g.mathF32(v.Op, dst, g.reg(s[0], t[8]), t[:8])
	case tile.OpSelect:
		a.VBLENDVPS(dst, g.reg(s[2], t[0]), s[1].rm(), g.maskReg(s[0], t))
	case tile.OpCast:
		switch v.Args[0].Type.DType {
		case tile.I1:
			a.VANDPS(dst, g.reg(s[0], t[0]), g.constF32(1))
		case tile.I32:
			a.VCVTDQ2PS(dst, s[0].rm())
		default:
			return unsupported(v, "cast from %v", v.Args[0].Type.DType)
		}
	default:
		return unsupported(v, "f32 %v", v.Op)
	}
	return nil
}

// maskReg is a mask operand in a register, using the last temp.
func (g *gen) maskReg(o opnd, t []amd64.VReg) amd64.VReg {
	if !o.isMem {
		return o.reg
	}
	r := t[len(t)-1]
	g.a.VMOVUPS(r, o.mem)
	return r
}

// maskOp emits an i1 op: all-ones lanes where true.
func (g *gen) maskOp(v *tile.Value, dst amd64.VReg, s []opnd, t []amd64.VReg) error {
	a := &g.a
	ones := g.constVec(0xffffffff)
	switch {
	case v.Op.IsCompare() && v.Args[0].Type.DType == tile.F32:
		g.floatCompare(v.Op, dst, g.reg(s[0], t[0]), s[1])
	case v.Op.IsCompare():
		// int32 lanes: only > and == exist
		x, y := g.reg(s[0], t[0]), s[1]
		switch v.Op {
		case tile.OpGt:
			a.VPCMPGTD(dst, x, y.rm())
		case tile.OpLt:
			a.VPCMPGTD(dst, g.reg(y, t[1]), x)
		case tile.OpEq:
			a.VPCMPEQD(dst, x, y.rm())
		case tile.OpLe:
			a.VPCMPGTD(t[1], x, y.rm())
			a.VPXOR(dst, t[1], ones)
		case tile.OpGe:
			a.VPCMPGTD(t[1], g.reg(y, t[1]), x)
			a.VPXOR(dst, t[1], ones)
		case tile.OpNe:
			a.VPCMPEQD(t[1], x, y.rm())
			a.VPXOR(dst, t[1], ones)
		}
	case v.Op == tile.OpAnd:
		a.VANDPS(dst, g.reg(s[0], t[0]), s[1].rm())
	case v.Op == tile.OpOr:
		a.VORPS(dst, g.reg(s[0], t[0]), s[1].rm())
	case v.Op == tile.OpXor:
		a.VXORPS(dst, g.reg(s[0], t[0]), s[1].rm())
	case v.Op == tile.OpNot:
		a.VXORPS(dst, g.reg(s[0], t[0]), ones)
	case v.Op == tile.OpCast: // f32 → i1: x != 0
		a.VCMPPS(dst, g.reg(s[0], t[0]), g.constVec(0), amd64.CmpNEQ)
	case v.Op == tile.OpSelect:
		a.VBLENDVPS(dst, g.reg(s[2], t[0]), s[1].rm(), g.maskReg(s[0], t))
	default:
		return unsupported(v, "i1 %v", v.Op)
	}
	return nil
}

// mathF32: exp or tanh of eight f32 lanes, each as codegen/cpu's expf and
// tanhf compute it (the same operations as its vmath_amd64.s, in two
// halves of four float64 lanes): so the results are the executor's, bit
// for bit. t holds eight temporaries; x is read before dst is written.
func (g *gen) mathF32(op tile.Op, dst, x amd64.VReg, t []amd64.VReg) {
	a := &g.a
	lo := t[7]
	for h := 0; h < 2; h++ {
		t0, t1 := t[0], t[1]
		if h == 0 {
			a.VCVTPS2PD(t0, x)
		} else {
			a.VEXTRACTF128(t0, x, 1)
			a.VCVTPS2PD(t0, t0)
		}
		res := t[4]
		if op == tile.OpExp {
			a.VMAXPD(t1, t0, g.constF64(-104))
			a.VMINPD(t1, t1, g.constF64(89))
			g.expCore(t1, t[2], t[4], t[3])
			a.VCMPPD(t[6], t0, g.constF64(expOverflow), amd64.CmpGT)
			a.VBLENDVPD(res, res, g.constF64(math.Inf(1)), t[6])
			a.VCMPPD(t[6], t0, g.constF64(expUnderflow), amd64.CmpLT)
			a.VANDNPD(res, t[6], res)
		} else {
			c := t[6]
			a.VMAXPD(c, t0, g.constF64(-9.1))
			a.VMINPD(c, c, g.constF64(9.1))
			a.VADDPD(t1, c, c)
			g.expCore(t1, t[2], t[4], t[3])
			a.VADDPD(res, res, g.constF64(1))
			a.VMOVUPD(t[5], g.constF64(2))
			a.VDIVPD(t[5], t[5], res)
			a.VMOVUPD(res, g.constF64(1))
			a.VSUBPD(res, res, t[5])
			a.VMULPD(t[2], c, c)
			a.VMULPD(t[3], t[2], g.constF64(2.0/15))
			a.VADDPD(t[3], t[3], g.constF64(-1.0/3))
			a.VMULPD(t[3], t[2], t[3])
			a.VADDPD(t[3], t[3], g.constF64(1))
			a.VMULPD(t[3], c, t[3])
			a.VANDPD(t[5], c, g.constI64(0x7fffffffffffffff))
			a.VCMPPD(t[5], t[5], g.constF64(1.0/256), amd64.CmpLT)
			a.VBLENDVPD(res, res, t[3], t[5])
		}
		a.VCMPPD(t[6], t0, t0, amd64.CmpUNORD)
		a.VBLENDVPD(res, res, t0, t[6])
		if h == 0 {
			a.VCVTPD2PS(lo, res)
		} else {
			a.VCVTPD2PS(res, res)
			a.VINSERTF128(dst, lo, res, 1)
		}
	}
}

// expCore: r = e^y for float64 lanes y in about [-105, 89], as expFMA: t
// = y·log2(e), n = round(t) (ties to even), y' = (t-n)·ln2, the
// degree-11 Taylor polynomial in fused multiply-adds, times 2^n through
// the exponent bits. Clobbers y, u, w.
func (g *gen) expCore(y, u, r, w amd64.VReg) {
	a := &g.a
	a.VMULPD(u, y, g.constF64(math.Log2E))
	a.VROUNDPD(w, u, 0)
	a.VSUBPD(u, u, w)
	a.VMULPD(u, u, g.constF64(math.Ln2))
	a.VMOVUPD(r, g.constF64(expPoly[0]))
	for _, c := range expPoly[1:] {
		a.VFMADD213PD(r, u, g.constF64(c))
	}
	a.VCVTPD2DQ(y, w)
	a.VPMOVSXDQ(y, y)
	a.VPADDQ(y, y, g.constI64(1023))
	a.VPSLLQ(y, y, 52)
	a.VMULPD(r, r, y)
}

// expf's bounds, float32(88.72284) and float32(-103.97208) (expf compares
// its f32 argument with them).
var (
	expOverflow  = float64(float32(88.72284))
	expUnderflow = float64(float32(-103.97208))
)

// expPoly holds 1/k! for k = 11 down to 0 (codegen/cpu's expPoly).
var expPoly = func() (c [12]float64) {
	f := 1.0
	for k := 1; k <= 11; k++ {
		f *= float64(k)
	}
	for i := range c {
		c[i] = 1 / f
		if k := 11 - i; k > 0 {
			f /= float64(k)
		}
	}
	return c
}()
