package native

import (
	"math"
	"sync/atomic"

	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
	"github.com/tilefuse/tilefuse/tile"
)

// The elementwise ops on eight f32 (or mask) lanes. Each writes dst with
// its last instruction, so dst may be the register of an operand; temps
// are registers of its own.

// reg is o in a register (a memory operand loaded into t).
func (g *gen) reg(o opnd, t amd64.VReg) amd64.VReg {
	if o.isMem {
		g.va().vbcst(t, o.mem)
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
	g.va().VCMPPS(dst, x, y.rm(), cmpPred[op])
}

// floatOp emits f32 op v.
func (g *gen) floatOp(v *tile.Value, dst amd64.VReg, s []opnd, t []amd64.VReg) error {
	a := g.va()
	switch v.Op {
	case tile.OpAdd:
		a.VADDPS(dst, g.reg(s[0], t[0]), s[1].rm())
	case tile.OpSub:
		a.VSUBPS(dst, g.reg(s[0], t[0]), s[1].rm())
	case tile.OpMul:
		a.VMULPS(dst, g.reg(s[0], t[0]), s[1].rm())
	case tile.OpDiv:
		if sl, ok := g.divRcp[v]; ok && g.zmm && s[1].isMem {
			g.divFMA(dst, g.reg(s[0], t[0]), s[1].mem, sl, t)
			break
		}
		if g.zmm && !s[1].isMem && g.p.newton && len(t) >= 4 { // tempsFor reserved divNewton's temps
			g.divNewton(dst, g.reg(s[0], t[0]), s[1].reg, t)
			break
		}
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
		a.blendSel(dst, t[1], x, a.cmpSel(t[2], x, x, amd64.CmpUNORD))
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
		if g.zmm {
			g.rsqrtZ(dst, x, t)
			break
		}
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
	case tile.OpExp, tile.OpTanh, tile.OpLog, tile.OpSigmoid, tile.OpLog1p, tile.OpExpm1, tile.OpErf, tile.OpLog2, tile.OpExp2,
		tile.OpSin, tile.OpCos:
		g.mathF32(v.Op, dst, g.reg(s[0], t[9]), t[:9])
	case tile.OpPow:
		g.pow32(dst, g.reg(s[0], t[10]), g.reg(s[1], t[11]), t[:10])
	case tile.OpRem:
		g.rem32(dst, g.reg(s[0], t[10]), g.reg(s[1], t[11]), t[:10])
	case tile.OpSign: // 1 where x > 0, -1 where x < 0, else x (±0, NaN)
		x := g.reg(s[0], t[2])
		zero := g.constF32(0)
		a.blendSel(t[1], x, g.constF32(1), a.cmpSel(t[0], x, zero, amd64.CmpGT))
		a.blendSel(dst, t[1], g.constF32(-1), a.cmpSel(t[0], x, zero, amd64.CmpLT))
	case tile.OpSelect:
		a.VBLENDVPS(dst, g.reg(s[2], t[0]), s[1].rm(), g.maskReg(s[0], t))
	case tile.OpCast:
		switch v.Args[0].Type.DType {
		case tile.I1:
			a.VANDPS(dst, g.reg(s[0], t[0]), g.constF32(1))
		case tile.I32:
			a.VCVTDQ2PS(dst, s[0].rm())
		case tile.F64: // rounded to nearest, as float32(x)
			if s[0].isMem {
				return unsupported(v, "f64 operand in memory")
			}
			if !g.avx512 { // a ymm pair (f64y.go): the high half first
				a.VCVTPD2PS(t[0], hi(s[0].reg))
				a.VCVTPD2PS(dst, s[0].reg)
				a.VINSERTF128(dst, dst, t[0], 1)
				break
			}
			g.a.VCVTPD2PSZ(z(dst), z(s[0].reg))
		default:
			return unsupported(v, "cast from %v", v.Args[0].Type.DType)
		}
	default:
		return unsupported(v, "f32 %v", v.Op)
	}
	return nil
}

// rsqrtZ is rsqrt in zmm registers: the ymm form's operations on each
// half of sixteen lanes (eight float64 lanes a half). x is read before
// dst is written; t holds three temporaries (x may be t[0]).
func (g *gen) rsqrtZ(dst, x amd64.VReg, t []amd64.VReg) {
	a := &g.a
	one := g.constF64(1)
	z := func(r amd64.VReg) amd64.ZReg { return amd64.ZReg(r) }
	a.VCVTPS2PDZ(z(t[1]), z(x)) // lanes 0–7
	a.VSQRTPDZ(z(t[1]), z(t[1]))
	a.VBROADCASTSDZ(z(t[2]), one)
	a.VDIVPDZ(z(t[2]), z(t[2]), z(t[1]))
	a.VCVTPD2PSZ(z(t[2]), z(t[2]))
	a.VEXTRACTF64X4Z(z(t[1]), z(x), 1) // lanes 8–15
	a.VCVTPS2PDZ(z(t[1]), z(t[1]))
	a.VSQRTPDZ(z(t[1]), z(t[1]))
	a.VBROADCASTSDZ(z(t[0]), one) // x is no longer needed
	a.VDIVPDZ(z(t[0]), z(t[0]), z(t[1]))
	a.VCVTPD2PSZ(z(t[0]), z(t[0]))
	a.VINSERTF64X4Z(z(dst), z(t[2]), z(t[0]), 1)
	g.va().wrote(dst)
}

// maskReg is a mask operand in a register, using the last temp.
func (g *gen) maskReg(o opnd, t []amd64.VReg) amd64.VReg {
	if !o.isMem {
		return o.reg
	}
	r := t[len(t)-1]
	g.va().vbcst(r, o.mem)
	return r
}

// maskOp emits an i1 op: all-ones lanes where true.
func (g *gen) maskOp(v *tile.Value, dst amd64.VReg, s []opnd, t []amd64.VReg) error {
	a := g.va()
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

// mathF32: exp, tanh, log, sigmoid, log1p, expm1, erf, log2, exp2, sin or
// cos of eight f32 lanes (sixteen in zmm), each lane as its twin in
// mathf.go computes it, in f32 arithmetic (so the results are not the
// executor's: see mathf.go for their bounds). t holds nine temporaries; x
// is read before dst is written.
func (g *gen) mathF32(op tile.Op, dst, x amd64.VReg, t []amd64.VReg) {
	a := g.va()
	if f := mathF32Forms[op]; f != nil {
		f(g, dst, x, t)
		return
	}
	if op == tile.OpExp {
		res := t[5]
		g.expCore32(res, x, t[:5])
		if !g.zmm { // in zmm VSCALEFPS's own overflow and underflow do this
			over := a.cmpSel(t[0], x, g.constF32(expOverflow32), amd64.CmpGT)
			a.blendSel(res, res, g.constF32(float32(math.Inf(1))), over)
			a.zeroSel(res, a.cmpSel(t[0], x, g.constF32(expUnderflow32), amd64.CmpLT), res)
		}
		a.blendSel(dst, res, x, a.cmpSel(t[0], x, x, amd64.CmpUNORD))
		return
	}
	// tanh: |x| < 0.625 by its Taylor polynomial, else 1 - 2/(e^{2|x|}+1)
	// with x's sign
	a.VANDPS(t[0], x, g.constVec(0x7fffffff))
	small := a.cmpSel(t[1], t[0], g.constF32(tanhSmall32), amd64.CmpLT)
	a.VMULPS(t[2], x, x)
	a.vbcst(t[3], g.constF32(tanhTaylor32[len(tanhTaylor32)-1]))
	for k := len(tanhTaylor32) - 2; k >= 1; k-- {
		a.VFMADD213PS(t[3], t[2], g.constF32(tanhTaylor32[k]))
	}
	a.VMULPS(t[4], x, t[2])
	a.VFMADD213PS(t[4], t[3], x)
	a.VMINPS(t[0], t[0], g.constF32(tanhClamp32))
	a.VADDPS(t[0], t[0], t[0])
	g.expCore32(t[2], t[0], []amd64.VReg{t[3], t[5], t[6], t[7], t[8]})
	a.VADDPS(t[2], t[2], g.constF32(1))
	a.vbcst(t[3], g.constF32(2))
	a.VDIVPS(t[2], t[3], t[2])
	a.vbcst(t[3], g.constF32(1))
	a.VSUBPS(t[2], t[3], t[2])
	a.blendSel(t[2], t[2], t[4], small)
	a.VANDPS(t[3], x, g.constVec(0x80000000))
	a.VORPS(t[2], t[2], t[3]) // x's sign (the Taylor form loses it at -0)
	a.blendSel(dst, t[2], x, a.cmpSel(t[3], x, x, amd64.CmpUNORD))
}

// mathF32Forms are mathF32's functions but exp and tanh (which share its
// own code), each writing its lanes as its twin in mathf.go computes them.
var mathF32Forms = map[tile.Op]func(g *gen, dst, x amd64.VReg, t []amd64.VReg){
	tile.OpLog:     (*gen).log32,
	tile.OpSigmoid: (*gen).sigmoid32,
	tile.OpLog1p:   (*gen).log1p32,
	tile.OpExpm1:   (*gen).expm1_32,
	tile.OpErf:     (*gen).erf32,
	tile.OpLog2:    (*gen).log2_32,
	tile.OpExp2:    (*gen).exp2_32,
	tile.OpSin:     func(g *gen, dst, x amd64.VReg, t []amd64.VReg) { g.sincos32(dst, x, t, false) },
	tile.OpCos:     func(g *gen, dst, x amd64.VReg, t []amd64.VReg) { g.sincos32(dst, x, t, true) },
}

// logSpecials: dst = r where x is positive and finite, else a logarithm's
// value at x (logSpecial32): NaN below 0, -Inf at ±0, +Inf at +Inf, x's
// NaN. tmp is a temporary (a mask).
func (g *gen) logSpecials(dst, r, x, tmp amd64.VReg) {
	a := g.va()
	a.blendSel(r, r, g.constF32(float32(math.NaN())), a.cmpSel(tmp, x, g.constF32(0), amd64.CmpLT))
	a.blendSel(r, r, g.constF32(float32(math.Inf(-1))), a.cmpSel(tmp, x, g.constF32(0), amd64.CmpEQ))
	a.blendSel(r, r, x, a.cmpSel(tmp, x, g.constF32(float32(math.Inf(1))), amd64.CmpEQ))
	a.blendSel(dst, r, x, a.cmpSel(tmp, x, x, amd64.CmpUNORD))
}

// log32: ln x of eight lanes as logf32 computes them. t holds nine
// temporaries; x is read before dst is written.
func (g *gen) log32(dst, x amd64.VReg, t []amd64.VReg) {
	a := g.va()
	g.logSplit(t[2], t[1], x, t[0], t[3]) // e, f
	a.VMULPS(t[3], t[1], t[1])            // z
	a.vbcst(t[4], g.constF32(logP[0]))
	for _, c := range logP[1:] {
		a.VFMADD213PS(t[4], t[1], g.constF32(c))
	}
	a.VMULPS(t[4], t[4], t[1])
	a.VMULPS(t[4], t[4], t[3]) // y
	a.VCVTDQ2PS(t[2], t[2])    // ef
	a.VFMADD231PS(t[4], t[2], g.constF32(ln2Lo32))
	a.VFMADD231PS(t[4], t[3], g.constF32(-0.5))
	a.VADDPS(t[4], t[1], t[4])
	a.VFMADD231PS(t[4], t[2], g.constF32(ln2Hi32))
	g.logSpecials(dst, t[4], x, t[0])
}

// expCore32: res = e^x for x in [-104, 89] (clamped there), as expf32's
// core: n = round(x·log2 e), r = x - n·ln2 in two steps, the degree-7
// Taylor polynomial of e^r by fused multiply-adds, times 2^(n>>1) and
// 2^(n-(n>>1)). x is read first, res written last; t holds five
// temporaries.
//
// In zmm the scaling is one VSCALEFPS (p·2^n rounded once) instead of
// the nine integer and float instructions that build and apply the two
// powers: the same results, since both products are exact wherever the
// result is normal, and where it is subnormal the two-step form's first
// product (by 2^(n>>1), n ≥ -150) is still normal, so both round once.
// Past the clamps, n = 128 overflows to +Inf and n = -150 gives less
// than half the least subnormal, 0: what mathF32's range blends give
// for x above expOverflow32 and below expUnderflow32, which the zmm
// form therefore leaves out (TestExpScalef compares the zmm code with
// expf32, the ymm code's twin, over every f32 where the two could differ).
//
// Where the CPU has AVX512DQ the zmm form clamps x by one VRANGEPS to
// [-128, 128] (sign(x)·min(|x|, 128); a NaN stays NaN, and the NaN blend
// after gives x), instead of VMAXPS and VMINPS to [-104, 89]: the same
// results. Inside [-104, 89] neither clamp changes x. Above 89, n ≥ 128
// and VSCALEFPS overflows to +Inf (p·2^n is e^x to a few parts in 10⁷, and
// e^x > 2^128 there), as the clamp to 89 does; below -104, p·2^n is e^x <
// 0.49·2^-149, which rounds to 0, as the clamp to -104 gives; |n| ≤ 185,
// so n·ln2Hi stays exact. One instruction less a vector (softmax's exp
// loop alone 8–12% faster on the 2-core VM's Zen 5; TestExpScalef checks
// every f32 in [80, 200] and [-200, -80] and the magnitudes beyond).
func (g *gen) expCore32(res, x amd64.VReg, t []amd64.VReg) {
	a := g.va()
	if g.zmm && g.dq {
		a.vrange(t[0], x, g.constF32(expClampZ), 2) // sign(x)·min(|x|, 128)
		g.p.ranges++
	} else {
		a.VMAXPS(t[0], x, g.constF32(-104))
		a.VMINPS(t[0], t[0], g.constF32(89))
	}
	a.VMULPS(t[1], t[0], g.constF32(log2e32))
	a.VROUNDPS(t[1], t[1], 0)
	a.VFNMADD231PS(t[0], t[1], g.constF32(ln2Hi32)) // r, in place: x clamped is read no more
	a.VFNMADD231PS(t[0], t[1], g.constF32(ln2Lo32))
	a.vbcst(t[3], g.constF32(expTaylor32[0]))
	for _, c := range expTaylor32[1:] {
		a.VFMADD213PS(t[3], t[0], g.constF32(c))
	}
	if g.zmm {
		a.vscalef(res, t[3], t[1])
		g.p.scalefs++
		return
	}
	a.VCVTTPS2DQ(t[1], t[1])
	a.VPSRAD(t[4], t[1], 1)
	a.VPSUBD(t[1], t[1], t[4])
	bias := g.constVec(127)
	a.VPADDD(t[4], t[4], bias)
	a.VPSLLD(t[4], t[4], 23)
	a.VPADDD(t[1], t[1], bias)
	a.VPSLLD(t[1], t[1], 23)
	a.VMULPS(t[3], t[3], t[4])
	a.VMULPS(res, t[3], t[1])
}

// divFMA: dst = x/b for a uniform b in a zmm loop (useDivFMA), the
// quotient correctly rounded as VDIVPS gives it, from y = RN(1/b) (the
// frame splat sl[0], divSetup): q = x·y, then twice r = x - q·b (exact
// where q is within an ulp), q = q + r·y, in fused multiply-adds. The
// first product is within 1.5 ulp, the first correction makes it
// faithful, and the second then rounds to the correctly rounded quotient
// (Markstein's theorem: y within half an ulp of 1/b, q faithful, r exact,
// one rounding) wherever nothing overflows or underflows: |x| in
// [2^-100, 2^100] and |b| in [2^-20, 2^20] (divSetup makes the bound sl[1]
// +Inf otherwise). A vector with a lane outside (0, ±Inf, NaN, subnormals,
// the extremes) divides by VDIVPS. t holds two temporaries; x is read
// before dst is written.
func (g *gen) divFMA(dst, x amd64.VReg, b amd64.Mem, sl [2]int32, t []amd64.VReg) {
	v := g.va()
	a := v.Asm
	k1, k2 := v.newK(), v.newK()
	banks := g.banks()
	g.zfixed = true
	for c := 0; c < banks; c++ {
		g.zc = c
		xz, dz, t0, t1 := v.z(x), v.z(dst), v.z(t[0]), v.z(t[1])
		slow, done := a.NewLabel(), a.NewLabel()
		a.VPANDDZ(t0, xz, g.constVec(0x7fffffff).Bcst())
		a.VCMPPSZ(v.zk(k1), t0, fr(sl[1]).Bcst(), cmpNGEUQ)
		a.VCMPPSZ(v.zk(k2), t0, g.constF32(0x1p100).Bcst(), amd64.CmpGT)
		a.KORTESTW(v.zk(k1), v.zk(k2))
		a.Jcc(amd64.CondNE, slow)
		y := fr(sl[0]).Bcst()
		a.VMULPSZ(t1, xz, y)
		for range 2 {
			a.VMOVAPSZ(t0, xz)
			a.VFNMADD231PSZ(t0, t1, b.Bcst())
			a.VFMADD231PSZ(t1, t0, y)
		}
		a.VMOVAPSZ(dz, t1)
		a.JMP(done)
		a.Bind(slow)
		if divSlowPoison.Load() { // tests: which vectors divide
			a.VBROADCASTSSZ(dz, g.constVec(divPoison))
		} else {
			a.VDIVPSZ(dz, xz, b.Bcst())
		}
		a.Bind(done)
	}
	g.zfixed, g.zc = false, 0
	v.wrote(dst)
}

// banks is the zmm banks a paired loop's instruction is emitted for (2
// where the loop runs in pairs, else 1), for code that emits each bank
// itself (zfixed).
func (g *gen) banks() int {
	if g.zpair {
		return 2
	}
	return 1
}

// divNewton: dst = x/b for vectors x and b in a zmm loop (plan.newton:
// isa.go's divNewtonMode), the quotient correctly rounded as VDIVPS gives
// it, without the divider:
// y0 = VRCP14PS(b) (relative error below 2^-14), then twice y = y + y·(1 -
// b·y) (Newton's step: the first leaves y within an ulp of 1/b, the second
// makes it RN(1/b), Markstein's theorem, for every b whose significand is
// not all ones), q = x·y, then twice r = x - q·b (exact), q = q + r·y, as
// divFMA does with a uniform's reciprocal: correctly rounded wherever
// nothing overflows or underflows. A vector with a lane of x or b outside
// [2^-62, 2^62] in magnitude (0, subnormals, ±Inf, NaN, the extremes), or
// a b whose significand is all ones (where Newton's step can land an ulp
// off), divides by VDIVPS. t[1:4] are temporaries (t[0] may hold x); x and
// b are read before dst is written. divNewtonProbe (tests) makes the
// vectors that take the steps give y, the reciprocal, instead of q.
func (g *gen) divNewton(dst, x, b amd64.VReg, t []amd64.VReg) {
	v := g.va()
	a := v.Asm
	k1, k2 := v.newK(), v.newK()
	banks := g.banks()
	abs, lo, hi := g.constVec(0x7fffffff).Bcst(), g.constF32(0x1p-62).Bcst(), g.constF32(0x1p62).Bcst()
	frac, one := g.constVec(0x7fffff).Bcst(), g.constF32(1).Bcst()
	probe := divNewtonProbe.Load()
	g.zfixed = true
	for c := 0; c < banks; c++ {
		g.zc = c
		xz, bz, dz := v.z(x), v.z(b), v.z(dst)
		y, e, q := v.z(t[1]), v.z(t[2]), v.z(t[3])
		m1, m2 := v.zk(k1), v.zk(k2)
		slow, done := a.NewLabel(), a.NewLabel()
		// the lanes out of range: |x| or |b| not in [2^-62, 2^62] (NaN
		// compares unordered: out), or b's significand all ones
		a.VPANDDZ(e, xz, abs)
		a.VCMPPSZ(m1, e, lo, cmpNGEUQ)
		a.VCMPPSZ(m2, e, hi, amd64.CmpGT)
		a.KORW(m1, m1, m2)
		a.VPANDDZ(e, bz, abs)
		a.VCMPPSZ(m2, e, lo, cmpNGEUQ)
		a.KORW(m1, m1, m2)
		a.VCMPPSZ(m2, e, hi, amd64.CmpGT)
		a.KORW(m1, m1, m2)
		a.VPANDDZ(e, bz, frac)
		a.VPCMPEQDZ(m2, e, frac)
		a.KORTESTW(m1, m2)
		a.Jcc(amd64.CondNE, slow)
		a.VRCP14PSZ(y, bz)
		for range 2 {
			a.VMOVAPSZ(e, bz)
			a.VFNMADD213PSZ(e, y, one) // e = 1 - y·b
			a.VFMADD231PSZ(y, y, e)    // y = y·e + y
		}
		if probe {
			a.VMOVAPSZ(dz, y)
			a.JMP(done)
		} else {
			a.VMULPSZ(q, xz, y)
			for range 2 {
				a.VMOVAPSZ(e, xz)
				a.VFNMADD231PSZ(e, q, bz) // r = x - q·b
				a.VFMADD231PSZ(q, e, y)   // q = r·y + q
			}
			a.VMOVAPSZ(dz, q)
			a.JMP(done)
		}
		a.Bind(slow)
		if divSlowPoison.Load() {
			a.VBROADCASTSSZ(dz, g.constVec(divPoison))
		} else {
			a.VDIVPSZ(dz, xz, bz)
		}
		a.Bind(done)
	}
	g.zfixed, g.zc = false, 0
	v.wrote(dst)
	g.p.divNewtons++
}

// divNewtonProbe (tests: export_test.go) makes divNewton's vectors that take
// Newton's steps give the reciprocal y instead of the quotient.
var divNewtonProbe atomic.Bool

// divSlowPoison (tests: export_test.go) makes divFMA's vectors that would
// divide by VDIVPS take divPoison instead, to see which do.
var divSlowPoison atomic.Bool

const divPoison = 0x7fc0d1f0

// cmpNGEUQ: not greater than or equal, unordered, quiet (true for NaN).
const cmpNGEUQ uint8 = 0x19

// sigmoid32: 1/(1+e^-x) of eight lanes as sigmoidf32 computes them (the
// two parts of e^-|x| by sigmoidParts32's operations, scaled in two steps
// in zmm too, so that the twin's roundings are the code's everywhere,
// subnormal parts included). t holds nine temporaries; x is read before
// dst is written.
func (g *gen) sigmoid32(dst, x amd64.VReg, t []amd64.VReg) {
	a := g.va()
	one := g.constF32(1)
	a.VORPS(t[0], x, g.constVec(0x80000000)) // -|x|
	a.VMAXPS(t[0], t[0], g.constF32(-104))
	a.VMULPS(t[1], t[0], g.constF32(log2e32))
	a.VROUNDPS(t[1], t[1], 0) // n
	a.VFNMADD231PS(t[0], t[1], g.constF32(ln2Hi32))
	a.VFNMADD231PS(t[0], t[1], g.constF32(ln2Lo32)) // r
	a.vbcst(t[2], g.constF32(expTaylor32[0]))
	for _, c := range expTaylor32[1 : len(expTaylor32)-1] {
		a.VFMADD213PS(t[2], t[0], g.constF32(c)) // q
	}
	a.vbcst(t[3], one)
	a.VFMADD231PS(t[3], t[2], t[0]) // p = 1 + q·r
	a.vbcst(t[4], one)
	a.VSUBPS(t[4], t[4], t[3])
	a.VFMADD231PS(t[4], t[2], t[0]) // its error, 1 - p + q·r
	a.VCVTTPS2DQ(t[1], t[1])
	g.scale2n(t[1], t[5], t[3], t[4]) // eh, el
	a.VCMPPS(t[5], x, g.constF32(0), amd64.CmpLT)
	a.vbcst(t[0], one)
	a.VBLENDVPS(t[0], t[0], t[3], t[5]) // num: eh where x < 0, else 1
	a.VANDPS(t[1], t[4], t[5])          // numLo: el where x < 0, else 0
	a.VADDPS(t[2], t[3], one)           // d
	a.VSUBPS(t[6], t[2], one)
	a.VSUBPS(t[6], t[3], t[6])       // dErr = eh - (d - 1)
	a.VDIVPS(t[7], t[0], t[2])       // q0
	a.VFNMADD231PS(t[0], t[7], t[2]) // r0 = num - q0·d
	a.VADDPS(t[6], t[6], t[4])       // dErr + el
	a.VADDPS(t[0], t[0], t[1])       // r0 + numLo
	a.VFNMADD231PS(t[0], t[7], t[6]) // t = r0 + numLo - q0·(dErr + el)
	a.vbcst(t[8], one)
	a.VSUBPS(t[8], t[8], t[7])
	a.VBLENDVPS(t[8], t[7], t[8], t[5]) // 1/(1+e): 1 - q0 where x < 0, else q0
	a.VFMADD213PS(t[0], t[8], t[7])     // q0 + t·(1/(1+e))
	a.blendSel(dst, t[0], x, a.cmpSel(t[1], x, x, amd64.CmpUNORD))
}

// log1p32: ln(1+x) of eight lanes as log1pf32 computes them. t holds nine
// temporaries (log32 takes the first five); x is read before dst is
// written.
func (g *gen) log1p32(dst, x amd64.VReg, t []amd64.VReg) {
	a := g.va()
	one := g.constF32(1)
	a.VADDPS(t[5], x, one) // u
	a.VSUBPS(t[6], t[5], one)
	a.VSUBPS(t[6], x, t[6]) // x - (u - 1)
	a.VSUBPS(t[7], t[5], x)
	a.vbcst(t[8], one)
	a.VSUBPS(t[7], t[8], t[7]) // 1 - (u - x)
	a.VANDPS(t[8], x, g.constVec(0x7fffffff))
	a.blendSel(t[6], t[6], t[7], a.cmpSel(t[0], t[8], one, amd64.CmpGT)) // c
	a.VDIVPS(t[6], t[6], t[5])                                           // q = c/u
	g.log32(t[7], t[5], t[:5])                                           // l = ln u
	a.VADDPS(t[5], t[7], t[6])
	a.blendSel(t[5], t[5], t[7], a.cmpSel(t[0], t[6], t[6], amd64.CmpUNORD)) // l where q is NaN
	a.blendSel(dst, t[5], x, a.cmpSel(t[0], t[8], g.constF32(expm1Tiny32), amd64.CmpLT))
}

// expm1_32: e^x - 1 of eight lanes as expm1f32 computes them. t holds nine
// temporaries; x is read before dst is written.
func (g *gen) expm1_32(dst, x amd64.VReg, t []amd64.VReg) {
	a := g.va()
	one := g.constF32(1)
	a.VMAXPS(t[0], x, g.constF32(expm1Low32))
	a.VMINPS(t[0], t[0], g.constF32(89))
	a.VMULPS(t[1], t[0], g.constF32(log2e32))
	a.VROUNDPS(t[1], t[1], 0) // n
	a.VFNMADD231PS(t[0], t[1], g.constF32(ln2Hi32))
	a.VFNMADD231PS(t[0], t[1], g.constF32(ln2Lo32)) // r
	a.vbcst(t[2], g.constF32(expm1Taylor32[0]))
	for _, c := range expm1Taylor32[1:] {
		a.VFMADD213PS(t[2], t[0], g.constF32(c))
	}
	a.VMULPS(t[3], t[0], t[0])
	a.VFMADD213PS(t[3], t[2], t[0]) // em = r²·p + r
	a.VCVTTPS2DQ(t[4], t[1])
	a.VPADDD(t[5], t[4], g.constVec(126))
	a.VPSLLD(t[5], t[5], 23) // h = 2^(n-1)
	a.VPADDD(t[4], t[4], g.constVec(127))
	a.VPSLLD(t[4], t[4], 23) // s = 2^n
	a.VSUBPS(t[6], t[4], one)
	a.VFMADD231PS(t[6], t[4], t[3]) // s·em + (s - 1)
	a.VFMADD213PS(t[3], t[5], t[5]) // h·em + h
	a.VADDPS(t[3], t[3], t[3])
	a.VSUBPS(t[3], t[3], one)
	a.blendSel(t[6], t[6], t[3], a.cmpSel(t[7], t[1], g.constF32(24), amd64.CmpGT))
	a.blendSel(t[6], t[6], g.constF32(float32(math.Inf(1))), a.cmpSel(t[7], x, g.constF32(expOverflow32), amd64.CmpGT))
	a.blendSel(t[6], t[6], g.constF32(-1), a.cmpSel(t[7], x, g.constF32(expm1Low32), amd64.CmpLT))
	a.VANDPS(t[8], x, g.constVec(0x7fffffff))
	a.blendSel(t[6], t[6], x, a.cmpSel(t[7], t[8], g.constF32(expm1Tiny32), amd64.CmpLT))
	a.blendSel(dst, t[6], x, a.cmpSel(t[7], x, x, amd64.CmpUNORD))
}

// erf32: erf x of eight lanes as erff32 computes them (both forms on
// every lane, then blends). t holds nine temporaries; x is read before dst
// is written.
func (g *gen) erf32(dst, x amd64.VReg, t []amd64.VReg) {
	a := g.va()
	one := g.constF32(1)
	signBit := g.constVec(0x80000000)
	a.VANDPS(t[0], x, g.constVec(0x7fffffff)) // |x|
	// 1 - e^(-x²)·R(x), with the sign of x
	a.vbcst(t[1], g.constF32(erfU0_32))
	a.VFMADD231PS(t[1], t[0], g.constF32(erfInvH32)) // u
	a.vbcst(t[2], g.constF32(erfcR32[0]))
	for _, c := range erfcR32[1:] {
		a.VFMADD213PS(t[2], t[1], g.constF32(c)) // R
	}
	a.VMULPS(t[3], t[0], t[0])    // hi
	a.VXORPS(t[5], t[3], signBit) // -hi
	a.VMOVAPS(t[4], t[5])
	a.VFMADD231PS(t[4], t[0], t[0]) // lo = |x|·|x| - hi
	g.expCore32(t[5], t[5], []amd64.VReg{t[1], t[3], t[6], t[7], t[8]})
	a.VFNMADD231PS(t[5], t[5], t[4]) // e·(1 - lo)
	a.vbcst(t[1], one)
	a.VFNMADD231PS(t[1], t[5], t[2]) // 1 - e·R
	a.VANDPS(t[3], x, signBit)
	a.VORPS(t[1], t[1], t[3])
	a.VORPS(t[3], t[3], one) // ±1
	a.blendSel(t[1], t[1], t[3], a.cmpSel(t[4], t[0], g.constF32(erfHigh32), amd64.CmpGE))
	// |x|·hi + |x|·(lo + z·P(z)), with the sign of x
	a.VMULPS(t[2], t[0], t[0]) // z
	a.vbcst(t[3], g.constF32(erfTaylor32[0]))
	for _, c := range erfTaylor32[1:] {
		a.VFMADD213PS(t[3], t[2], g.constF32(c))
	}
	a.VFMADD213PS(t[3], t[2], g.constF32(erfC0Lo32))
	a.VMULPS(t[3], t[0], t[3])
	a.VFMADD231PS(t[3], t[0], g.constF32(erfC0Hi32))
	a.VANDPS(t[2], x, signBit)
	a.VORPS(t[3], t[3], t[2])
	a.blendSel(t[1], t[1], t[3], a.cmpSel(t[4], t[0], g.constF32(erfMid32), amd64.CmpLT))
	a.blendSel(dst, t[1], x, a.cmpSel(t[4], x, x, amd64.CmpUNORD))
}

// log2_32: log₂ x of eight lanes as log2f32 computes them. t holds nine
// temporaries; x is read before dst is written.
func (g *gen) log2_32(dst, x amd64.VReg, t []amd64.VReg) {
	a := g.va()
	g.log2Parts32(t[7], t[8], x, t[:7])
	a.VADDPS(t[8], t[7], t[8])
	g.logSpecials(dst, t[8], x, t[0])
}

// log2Parts32: s and t, log₂ x of eight lanes in two parts as log2Parts32
// computes them (meaningful for positive finite x). t holds seven
// temporaries, none of them s, tl or x; x is read before s and tl are
// written.
func (g *gen) log2Parts32(s, tl, x amd64.VReg, t []amd64.VReg) {
	a := g.va()
	g.logSplit(t[2], t[1], x, t[0], t[3])
	a.VMULPS(t[3], t[1], t[1]) // z
	a.vbcst(t[4], g.constF32(logP[0]))
	for _, c := range logP[1:] {
		a.VFMADD213PS(t[4], t[1], g.constF32(c))
	}
	a.VMULPS(t[4], t[4], t[1])
	a.VMULPS(t[4], t[4], t[3])
	a.VFMADD231PS(t[4], t[3], g.constF32(-0.5)) // y = ln m - f
	a.VMULPS(t[5], t[1], g.constF32(log2eHi32)) // a = f·Lh
	a.VXORPS(t[6], t[5], g.constVec(0x80000000))
	a.VFMADD231PS(t[6], t[1], g.constF32(log2eHi32)) // its error
	a.VFMADD231PS(t[6], t[1], g.constF32(log2eLo32))
	a.VFMADD231PS(t[6], t[4], g.constF32(log2eHi32)) // rest
	a.VCVTDQ2PS(t[2], t[2])                          // ef
	a.VADDPS(s, t[2], t[5])                          // s = ef + a
	a.VSUBPS(tl, s, t[2])
	a.VSUBPS(tl, t[5], tl) // a - (s - ef)
	a.VADDPS(tl, tl, t[6])
}

// exp2_32: 2^x of eight lanes as exp2f32 computes them (scaled in two
// steps in zmm too). t holds nine temporaries; x is read before dst is
// written.
func (g *gen) exp2_32(dst, x amd64.VReg, t []amd64.VReg) {
	a := g.va()
	a.VMAXPS(t[0], x, g.constF32(-151))
	a.VMINPS(t[0], t[0], g.constF32(129))
	a.VROUNDPS(t[1], t[0], 0)  // n
	a.VSUBPS(t[0], t[0], t[1]) // f
	a.vbcst(t[2], g.constF32(exp2Taylor32[0]))
	for _, c := range exp2Taylor32[1:] {
		a.VFMADD213PS(t[2], t[0], g.constF32(c))
	}
	a.VCVTTPS2DQ(t[1], t[1])
	g.scale2n(t[1], t[3], t[2])
	a.blendSel(dst, t[2], x, a.cmpSel(t[0], x, x, amd64.CmpUNORD))
}

// sincos32: sin x, or cos x, of eight lanes as sincosf32 computes them,
// after a bail-out where any lane's |x| exceeds sinBound32 (∞ included;
// NaN is computed: NaN). t holds nine temporaries; x is read before dst
// is written. RAX is clobbered.
func (g *gen) sincos32(dst, x amd64.VReg, t []amd64.VReg, cos bool) {
	a := g.va()
	a.VANDPS(t[0], x, g.constVec(0x7fffffff))
	a.bailIf(a.cmpSel(t[1], t[0], g.constF32(sinBound32), amd64.CmpGT))
	a.VMULPS(t[1], x, g.constF32(twoOverPi32))
	a.VROUNDPS(t[1], t[1], 0) // k
	a.VMOVAPS(t[2], x)
	for _, c := range sinPiHalf32 {
		a.VFNMADD231PS(t[2], t[1], g.constF32(c)) // r
	}
	a.VMULPS(t[3], t[2], t[2]) // z
	a.vbcst(t[4], g.constF32(sinTaylor32[0]))
	for _, c := range sinTaylor32[1:] {
		a.VFMADD213PS(t[4], t[3], g.constF32(c))
	}
	a.VMULPS(t[5], t[2], t[3])
	a.VFMADD213PS(t[5], t[4], t[2]) // sin r
	a.vbcst(t[4], g.constF32(cosTaylor32[0]))
	for _, c := range cosTaylor32[1:] {
		a.VFMADD213PS(t[4], t[3], g.constF32(c))
	}
	a.VFMADD213PS(t[4], t[3], g.constF32(1)) // cos r
	a.VCVTTPS2DQ(t[6], t[1])
	if cos {
		a.VPADDD(t[6], t[6], g.constVec(1))
	}
	a.VPSLLD(t[7], t[6], 31)            // odd quadrants: the sign bit
	a.VBLENDVPS(t[5], t[5], t[4], t[7]) // cos r there
	a.VPSLLD(t[7], t[6], 30)
	a.VPAND(t[7], t[7], g.constVec(0x80000000))
	a.VXORPS(t[5], t[5], t[7]) // negated in quadrants 2 and 3
	if cos {
		a.VMOVAPS(dst, t[5])
		return
	}
	a.blendSel(dst, t[5], x, a.cmpSel(t[1], t[0], g.constF32(sinTiny32), amd64.CmpLT))
}

// pow32: x^y of eight lanes as powf32 computes them: the general form on
// every lane, then Go's special cases blended over it, the lowest in
// math.Pow's order first. t holds ten temporaries; x and y are read
// before dst is written.
func (g *gen) pow32(dst, x, y amd64.VReg, t []amd64.VReg) {
	a := g.va()
	one, inf, nan := g.constF32(1), g.constF32(float32(math.Inf(1))), g.constF32(float32(math.NaN()))
	abs, sign := g.constVec(0x7fffffff), g.constVec(0x80000000)
	a.VANDPS(t[0], x, abs)
	g.log2Parts32(t[7], t[8], t[0], []amd64.VReg{t[1], t[2], t[3], t[4], t[5], t[6], t[9]})
	// y·log₂|x| = wh + wl
	a.VMULPS(t[0], y, t[7])
	a.VXORPS(t[1], t[0], sign)
	a.VFMADD231PS(t[1], y, t[7])
	a.VFMADD231PS(t[1], y, t[8])
	a.VANDPS(t[2], t[0], abs)
	a.zeroSel(t[1], a.cmpSel(t[3], t[2], g.constF32(powClamp32), amd64.CmpGE), t[1])
	a.VMAXPS(t[0], t[0], g.constF32(-powClamp32))
	a.VMINPS(t[0], t[0], g.constF32(powClamp32))
	a.VADDPS(t[2], t[0], t[1])
	a.VMAXPS(t[2], t[2], g.constF32(-152))
	a.VMINPS(t[2], t[2], g.constF32(130))
	a.VROUNDPS(t[2], t[2], 0) // n
	a.VSUBPS(t[0], t[0], t[2])
	a.VADDPS(t[0], t[0], t[1])
	a.VMAXPS(t[0], t[0], g.constF32(-1))
	a.VMINPS(t[0], t[0], one) // f
	a.vbcst(t[3], g.constF32(exp2Taylor32[0]))
	for _, c := range exp2Taylor32[1:] {
		a.VFMADD213PS(t[3], t[0], g.constF32(c))
	}
	a.VCVTTPS2DQ(t[2], t[2])
	g.scale2n(t[2], t[4], t[3]) // |x|^y
	// x's sign where y is an odd integer
	a.VROUNDPS(t[0], y, 3)
	a.VCMPPS(t[1], t[0], y, amd64.CmpEQ) // y an integer (or ±∞)
	a.VCVTTPS2DQ(t[2], y)
	a.VPSLLD(t[2], t[2], 31)
	a.VANDPS(t[2], t[2], t[1])
	a.VANDPS(t[4], x, sign)
	a.VANDPS(t[2], t[2], t[4]) // sg
	a.VXORPS(t[3], t[3], t[2])
	// a negative x and y not an integer: NaN
	a.VCMPPS(t[4], x, g.constF32(0), amd64.CmpLT)
	a.VANDNPS(t[4], t[1], t[4])
	a.VBLENDVPS(t[3], t[3], nan, t[4])
	// y = ½: √x
	a.VSQRTPS(t[4], x)
	a.blendSel(t[3], t[3], t[4], a.cmpSel(t[5], y, g.constF32(0.5), amd64.CmpEQ))
	// y = ±∞: 1 where |x| = 1, else 0 where |x| < 1 is y > 0, else ∞
	a.VANDPS(t[5], x, abs)
	a.VCMPPS(t[6], t[5], one, amd64.CmpLT)
	a.VCMPPS(t[7], y, g.constF32(0), amd64.CmpGT)
	a.VXORPS(t[6], t[6], t[7])
	a.VANDPS(t[6], t[6], inf)
	a.blendSel(t[6], t[6], one, a.cmpSel(t[7], t[5], one, amd64.CmpEQ))
	a.VANDPS(t[7], y, abs)
	a.blendSel(t[3], t[3], t[6], a.cmpSel(t[8], t[7], inf, amd64.CmpEQ))
	// x = ±0 or ±∞: ∞ where y < 0 is x = ±0, else 0; with sg
	a.VCMPPS(t[6], y, g.constF32(0), amd64.CmpLT)
	a.VCMPPS(t[7], t[5], inf, amd64.CmpEQ)
	a.VXORPS(t[6], t[6], t[7])
	a.VANDPS(t[6], t[6], inf)
	a.VORPS(t[6], t[6], t[2])
	a.VCMPPS(t[8], t[5], g.constF32(0), amd64.CmpEQ)
	a.VORPS(t[7], t[7], t[8])
	a.VBLENDVPS(t[3], t[3], t[6], t[7])
	// NaN operands: NaN; y = 1: x; y = 0 or x = 1: 1
	a.blendSel(t[3], t[3], nan, a.cmpSel(t[6], x, y, amd64.CmpUNORD))
	a.blendSel(t[3], t[3], x, a.cmpSel(t[6], y, one, amd64.CmpEQ))
	a.VCMPPS(t[6], y, g.constF32(0), amd64.CmpEQ)
	a.VCMPPS(t[7], x, one, amd64.CmpEQ)
	a.VORPS(t[6], t[6], t[7])
	a.VBLENDVPS(dst, t[3], one, t[6])
}

// scale2n multiplies each of vs in place by 2^n, n i32 lanes (clobbered),
// in two steps as expCoref32 scales: by 2^(n>>1), then by 2^(n - (n>>1))
// (each product exact where the result is normal, one rounding where it
// is subnormal: the first is still normal for n ≥ -252). tmp is a
// temporary.
func (g *gen) scale2n(n, tmp amd64.VReg, vs ...amd64.VReg) {
	a := g.va()
	a.VPSRAD(tmp, n, 1)
	a.VPSUBD(n, n, tmp)
	bias := g.constVec(127)
	a.VPADDD(tmp, tmp, bias)
	a.VPSLLD(tmp, tmp, 23)
	a.VPADDD(n, n, bias)
	a.VPSLLD(n, n, 23)
	for _, v := range vs {
		a.VMULPS(v, v, tmp)
		a.VMULPS(v, v, n)
	}
}

// logSplit: x = m·2^e of eight lanes as logSplit32 splits them, e (i32
// lanes) and f = m - 1 written; t0 and t3 are temporaries. x is read
// before e and f are written.
func (g *gen) logSplit(e, f, x, t0, t3 amd64.VReg) {
	a := g.va()
	// subnormals scaled by 2^23, their exponent's bias 127 + 23
	a.VCMPPS(t0, x, g.constF32(minNormal32), amd64.CmpLT)
	a.VMULPS(f, x, g.constF32(subnormScale))
	a.VBLENDVPS(f, x, f, t0)
	a.VANDPS(t0, t0, g.constVec(23))
	a.VPADDD(t0, t0, g.constVec(127)) // the bias
	a.VPSRLD(e, f, 23)
	a.VPSUBD(e, e, t0)
	a.VPAND(f, f, g.constVec(0x7fffff))
	a.VPOR(f, f, g.constVec(0x3f800000)) // m in [1, 2)
	a.VCMPPS(t0, f, g.constF32(sqrt2_32), amd64.CmpGT)
	a.VMULPS(t3, f, g.constF32(0.5))
	a.VBLENDVPS(f, f, t3, t0)
	a.VPSUBD(e, e, t0)            // e+1 where halved (the mask is -1)
	a.VSUBPS(f, f, g.constF32(1)) // f
}
