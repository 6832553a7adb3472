package native

import (
	"math"

	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
	"github.com/tilefuse/tilefuse/tile"
)

// f64 exp and tanh without AVX-512 (f64y.go: ymm pairs): mathd.go's
// operations in the same order on each half of four lanes, opmasks
// replaced by lane masks in ymm registers (vcmppd, vblendvpd), so the
// results are the zmm form's and the reference's bit for bit
// (TestMathF64 runs both). A half takes ten ymm temporaries: the node's
// five temporaries and their high halves (free in a pair phase). log and
// sigmoid are declined without AVX-512 (plan.go).

// mathTempsPairs is the temporaries an f64 exp or tanh takes in a pair
// phase (each with its high half: ten ymm registers).
const mathTempsPairs = 5

// mathF64Y emits f64 exp or tanh of x into dst, half by half (x's half
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
	a.VMULPD(u, p, c(0x1p-1022))
	a.VBLENDVPD(p, p, u, den)
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
