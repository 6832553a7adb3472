package native

import (
	"math"

	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
	"github.com/tilefuse/tilefuse/tile"
)

// f64 exp, tanh, log and sigmoid without AVX-512 (f64y.go: ymm pairs): mathd.go's
// operations in the same order on each half of four lanes, opmasks
// replaced by lane masks in ymm registers (vcmppd, vblendvpd), so the
// results are the zmm form's and the reference's bit for bit
// (TestMathF64 runs both). A half takes ten ymm temporaries: the node's
// five temporaries and their high halves (free in a pair phase).

// mathTempsPairs is the temporaries an f64 exp, tanh, log or sigmoid takes in a pair
// phase (each with its high half: ten ymm registers).
const mathTempsPairs = 5

// mathF64Y emits f64 exp, tanh, log or sigmoid of x into dst, half by half (x's half
// is read before dst's half is written; the other halves are other
// registers).
func (g *gen) mathF64Y(v *tile.Value, dst, x amd64.VReg, t []amd64.VReg) error {
	if len(t) < mathTempsPairs {
		return unsupported(v, "f64 %v without AVX-512 here", v.Op)
	}
	s := make([]amd64.VReg, 0, 2*mathTempsPairs)
	for _, r := range t[:mathTempsPairs] {
		s = append(s, r, hi(r))
	}
	for h := 0; h < 2; h++ {
		switch v.Op {
		case tile.OpExp:
			g.expF64Y(half(dst, h), half(x, h), s)
		case tile.OpTanh:
			g.tanhF64Y(half(dst, h), half(x, h), s)
		case tile.OpLog:
			g.logF64Y(half(dst, h), half(x, h), s)
		case tile.OpSigmoid:
			g.sigmoidF64Y(half(dst, h), half(x, h), s)
		default:
			return unsupported(v, "f64 %v without AVX-512", v.Op)
		}
	}
	return nil
}

// expCoreF64Y is expCoreF64 on four lanes: y = expArch64(x) for lanes
// where x is finite and at most expOverflow. x is read first and stays;
// y is written last; t holds six temporaries.
func (g *gen) expCoreF64Y(y, x amd64.VReg, t []amd64.VReg) {
	a := &g.a
	c := g.constF64
	nf, r, p, u, den, k := t[0], t[1], t[2], t[3], t[4], t[5]
	a.VMULPD(nf, x, c(expLog2E))
	a.VCVTPD2DQ(nf, nf) // n in the low half
	a.VCVTDQ2PD(nf, nf)
	a.VMOVAPS(r, x)
	a.VFNMADD231PD(r, nf, c(expLn2U))
	a.VFNMADD231PD(r, nf, c(expLn2L))
	a.VMULPD(r, r, c(0.0625))
	a.VMOVUPD(p, c(expTaylor64[0]))
	for _, e := range expTaylor64[1:] {
		a.VFMADD213PD(p, r, c(e))
	}
	a.VMULPD(p, r, p) // y
	for i := 0; i < 3; i++ {
		a.VADDPD(u, p, c(2))
		a.VMULPD(p, p, u)
	}
	a.VADDPD(u, p, c(2))
	a.VFMADD213PD(p, u, c(1))
	// × 2^n, as expCoreF64
	a.VADDPD(r, nf, c(1023))
	a.VCMPPD(den, r, c(0), amd64.CmpLE)
	a.VADDPD(u, r, c(1022))
	a.VBLENDVPD(r, r, u, den)
	a.VADDPD(r, r, c(0x1p52))
	a.VPSLLQ(r, r, 52)
	a.VMULPD(p, p, r)
	// × 2^-1022 where 2^n is subnormal, × 1 elsewhere: a product with a
	// subnormal result costs the CPU far more than one with a normal one,
	// so none is formed where the lane does not need it
	a.VMOVUPD(u, c(1))
	a.VBLENDVPD(u, u, c(0x1p-1022), den)
	a.VMULPD(p, p, u)
	a.VCMPPD(k, nf, c(-1075), amd64.CmpLT)
	a.VBLENDVPD(p, p, c(0), k)
	a.VCMPPD(k, nf, c(1024), amd64.CmpGE)
	a.VBLENDVPD(y, p, c(math.Inf(1)), k)
}

// expF64Y is expF64 on four lanes: dst = exp64(x). x is read before dst
// is written; t holds nine temporaries.
func (g *gen) expF64Y(dst, x amd64.VReg, t []amd64.VReg) {
	a := &g.a
	c := g.constF64
	xs, y, near := t[6], t[7], t[8]
	// 709 < x < 709.8: e^(x-1)·e
	a.VCMPPD(near, x, c(709), amd64.CmpGT)
	a.VCMPPD(t[0], x, c(709.8), amd64.CmpLT)
	a.VANDPD(near, near, t[0])
	a.VSUBPD(xs, x, c(1))
	a.VBLENDVPD(xs, x, xs, near)
	g.expCoreF64Y(y, xs, t[:6])
	a.VCMPPD(t[0], xs, c(expOverflow), amd64.CmpGT) // +Inf too (NaN: false)
	a.VBLENDVPD(y, y, c(math.Inf(1)), t[0])
	a.VMULPD(t[0], y, c(math.E))
	a.VBLENDVPD(y, y, t[0], near)
	a.VCMPPD(t[1], x, x, amd64.CmpUNORD)
	a.VBLENDVPD(dst, y, x, t[1])
}

// tanhF64Y is tanhF64 on four lanes: dst = tanh64(x). x is read before
// dst is written; t holds ten temporaries.
func (g *gen) tanhF64Y(dst, x amd64.VReg, t []amd64.VReg) {
	a := &g.a
	c := g.constF64
	zz, res, s2, e := t[6], t[7], t[8], t[9]
	a.VPAND(zz, x, g.constI64(1<<63-1))
	// below 0.625: x + x·s·P(s)/Q(s), s = x²
	s, p, q := t[0], t[1], t[2]
	a.VMULPD(s, x, x)
	a.VMULPD(p, s, c(tanhP64[0]))
	a.VADDPD(p, p, c(tanhP64[1]))
	a.VMULPD(p, p, s)
	a.VADDPD(p, p, c(tanhP64[2]))
	a.VADDPD(q, s, c(tanhQ64[0]))
	a.VMULPD(q, q, s)
	a.VADDPD(q, q, c(tanhQ64[1]))
	a.VMULPD(q, q, s)
	a.VADDPD(q, q, c(tanhQ64[2]))
	a.VMULPD(s, x, s)
	a.VMULPD(s, s, p)
	a.VDIVPD(s, s, q)
	a.VADDPD(res, x, s)
	// from 0.625: 1 - 2/(e^{2|x|}+1), x's sign
	a.VADDPD(s2, zz, zz)
	g.expCoreF64Y(e, s2, t[:6])
	q, sign, k := t[0], t[1], t[2]
	a.VADDPD(e, e, c(1))
	a.VMOVUPD(q, c(2))
	a.VDIVPD(e, q, e)
	a.VMOVUPD(q, c(1))
	a.VSUBPD(e, q, e)
	a.VPAND(sign, x, g.constI64(-1<<63))
	a.VPOR(e, e, sign)
	a.VCMPPD(k, zz, c(0.625), amd64.CmpGE)
	a.VBLENDVPD(res, res, e, k)
	// past 44.01: ±1
	a.VPOR(q, q, sign)
	a.VCMPPD(k, zz, c(tanhSat), amd64.CmpGT)
	a.VBLENDVPD(res, res, q, k)
	// ±0: x
	a.VCMPPD(k, x, c(0), amd64.CmpEQ)
	a.VBLENDVPD(dst, res, x, k)
}

// logF64Y is logF64 on four lanes: dst = log64(x). x is read before dst
// is written; t holds ten temporaries (the subnormal lanes' mask is
// computed again for the correction: no register keeps it).
func (g *gen) logF64Y(dst, x amd64.VReg, t []amd64.VReg) {
	a := &g.a
	c := g.constF64
	xs, f1, k, u, f, s, s2, s4, p, q := t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9]
	// subnormals: × 2^54 (the mask in s, free until s is computed)
	a.VCMPPD(s, x, c(0), amd64.CmpGT)
	a.VCMPPD(u, x, c(0x1p-1022), amd64.CmpLT)
	a.VANDPD(s, s, u)
	a.VMULPD(u, x, c(0x1p54))
	a.VBLENDVPD(xs, x, u, s)
	// f1 = the mantissa in [0.5, 1), k = the exponent, as logF64
	a.VPAND(f1, xs, g.constI64(1<<52-1))
	a.VPOR(f1, f1, c(0.5))
	a.VPSRLQ(k, xs, 52)
	a.VPAND(k, k, g.constI64(0x7ff))
	a.VPOR(k, k, c(0x1p52))
	a.VSUBPD(k, k, c(0x1p52))
	a.VSUBPD(k, k, c(0x3fe))
	lo := s
	a.VCMPPD(lo, f1, c(logHSqrt2), amd64.CmpLE)
	a.VSUBPD(u, k, c(1))
	a.VBLENDVPD(k, k, u, lo)
	a.VADDPD(u, f1, f1)
	a.VBLENDVPD(f1, f1, u, lo)
	a.VSUBPD(f, f1, c(1))
	a.VADDPD(u, f, c(2))
	a.VDIVPD(s, f, u)
	a.VMULPD(s2, s, s)
	a.VMULPD(s4, s2, s2)
	a.VMULPD(p, s4, c(logL7))
	a.VADDPD(p, p, c(logL5))
	a.VMULPD(p, p, s4)
	a.VADDPD(p, p, c(logL3))
	a.VMULPD(p, p, s4)
	a.VADDPD(p, p, c(logL1))
	a.VMULPD(p, s2, p) // t1
	a.VMULPD(q, s4, c(logL6))
	a.VADDPD(q, q, c(logL4))
	a.VMULPD(q, q, s4)
	a.VADDPD(q, q, c(logL2))
	a.VMULPD(q, s4, q) // t2
	a.VADDPD(p, p, q)  // R
	a.VMULPD(s2, f, c(0.5))
	a.VMULPD(s2, s2, f) // hfsq
	a.VADDPD(p, p, s2)  // hfsq + R
	a.VMULPD(p, s, p)
	a.VMULPD(u, k, c(logLn2Lo))
	a.VADDPD(p, p, u)
	a.VSUBPD(u, s2, p)
	a.VSUBPD(u, u, f)
	a.VMULPD(p, k, c(logLn2Hi))
	a.VSUBPD(p, p, u)
	// subnormals' correction; ±0: -Inf; x < 0: NaN; +Inf, NaN: x
	a.VSUBPD(u, p, c(logSub))
	sub := f1
	a.VCMPPD(sub, x, c(0), amd64.CmpGT)
	a.VCMPPD(xs, x, c(0x1p-1022), amd64.CmpLT)
	a.VANDPD(sub, sub, xs)
	a.VBLENDVPD(p, p, u, sub)
	a.VCMPPD(u, x, c(0), amd64.CmpEQ)
	a.VBLENDVPD(p, p, c(math.Inf(-1)), u)
	a.VCMPPD(u, x, c(0), amd64.CmpLT)
	a.VBLENDVPD(p, p, c(math.NaN()), u)
	a.VCMPPD(u, x, c(math.Inf(1)), amd64.CmpEQ)
	a.VBLENDVPD(p, p, x, u)
	a.VCMPPD(u, x, x, amd64.CmpUNORD)
	a.VBLENDVPD(dst, p, x, u)
}

// sigmoidF64Y is sigmoidF64 on four lanes: dst = sigmoid64(x). x is read
// before dst is written; t holds ten temporaries (x ≥ 0 is compared
// again after the exp: no register keeps it).
func (g *gen) sigmoidF64Y(dst, x amd64.VReg, t []amd64.VReg) {
	a := &g.a
	c := g.constF64
	xe, pos, d := t[9], t[1], t[0]
	a.VCMPPD(pos, x, c(0), amd64.CmpGE)
	a.VPXOR(xe, x, g.constI64(-1<<63))
	a.VBLENDVPD(xe, x, xe, pos) // -x where x ≥ 0
	g.expF64Y(xe, xe, t[:9])    // e, in place (expF64Y writes its dst last)
	a.VADDPD(d, xe, c(1))
	a.VCMPPD(pos, x, c(0), amd64.CmpGE)
	a.VBLENDVPD(xe, xe, c(1), pos) // the numerator: 1 where x ≥ 0
	a.VDIVPD(dst, xe, d)
}
