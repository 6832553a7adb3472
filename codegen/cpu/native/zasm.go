package native

import (
	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
	"github.com/tilefuse/tilefuse/tile"
)

// f64 math without AVX-512. The f64 math functions of mathd.go and
// powd.go are written once, in AVX-512's instructions on eight lanes in
// zmm registers with opmasks (zasm). With AVX-512 those are the
// assembler's own; without it, in a pair phase (f64y.go), halfAsm runs
// the same instruction sequence on four lanes in ymm registers, twice: an
// instruction on Z n is that instruction's VEX form on Y n, an opmask K n
// a 32-byte frame slot of four 64-bit lane masks (a comparison is the
// ymm comparison stored there; a blend loads it and blends by it; KORW,
// KXORW and a masked comparison combine slots; KORTESTW of a mask with
// itself is VTESTPS), and a broadcast constant the pool's 32-byte one.
// Every operation is the same IEEE operation on the same lane, so the
// results are the zmm form's bit for bit (the tests run both).
//
// The functions take up to fourteen registers (x, y for pow, twelve
// temporaries), where a pair phase has its values in Y0–Y15, so
// mathF64Pairs stores all sixteen ymm registers to the frame, runs the
// function on each half of the operands from there with Y0 (and Y1) the
// operands and the result and Y1–Y13 (Y2–Y13) its temporaries, Y14 the
// shim's own, keeps each half's result in the frame, restores the
// sixteen registers and loads the result's pair: 32 moves a vector of
// eight lanes over the function's own two halves.

// zasm is the instruction set of the f64 math functions (mathd.go,
// powd.go): *amd64.Asm's AVX-512 forms, or halfAsm's stand-ins.
type zasm interface {
	VADDPDZ(d, x amd64.ZReg, y amd64.Operand)
	VSUBPDZ(d, x amd64.ZReg, y amd64.Operand)
	VMULPDZ(d, x amd64.ZReg, y amd64.Operand)
	VDIVPDZ(d, x amd64.ZReg, y amd64.Operand)
	VMINPDZ(d, x amd64.ZReg, y amd64.Operand)
	VMAXPDZ(d, x amd64.ZReg, y amd64.Operand)
	VSQRTPDZ(d amd64.ZReg, s amd64.Operand)
	VFMADD213PDZ(d, x amd64.ZReg, y amd64.Operand)
	VFMADD231PDZ(d, x amd64.ZReg, y amd64.Operand)
	VFNMADD231PDZ(d, x amd64.ZReg, y amd64.Operand)
	VPANDQZ(d, x amd64.ZReg, y amd64.Operand)
	VPORQZ(d, x amd64.ZReg, y amd64.Operand)
	VPXORQZ(d, x amd64.ZReg, y amd64.Operand)
	VPADDQZ(d, x amd64.ZReg, y amd64.Operand)
	VPSLLQZ(d, s amd64.ZReg, n uint8)
	VPSRLQZ(d, s amd64.ZReg, n uint8)
	VRNDSCALEPDZ(d amd64.ZReg, s amd64.Operand, imm uint8)
	VCVTPD2DQZ(d, s amd64.ZReg)
	VCVTDQ2PDZ(d amd64.ZReg, s amd64.Operand)
	VMOVAPDZ(d, s amd64.ZReg)
	VBROADCASTSDZ(d amd64.ZReg, m amd64.Mem)
	VCMPPDZ(k amd64.KReg, x amd64.ZReg, y amd64.Operand, pred uint8)
	VCMPPDKZ(k, m amd64.KReg, x amd64.ZReg, y amd64.Operand, pred uint8)
	VBLENDMPDZ(d amd64.ZReg, k amd64.KReg, x amd64.ZReg, y amd64.Operand)
	KORW(d, x, y amd64.KReg)
	KXORW(d, x, y amd64.KReg)
	KORTESTW(x, y amd64.KReg)
	NewLabel() amd64.Label
	Bind(l amd64.Label)
	Jcc(c amd64.Cond, l amd64.Label)
	JMP(l amd64.Label)
}

var _ zasm = (*amd64.Asm)(nil)

// za is the instruction set the f64 math functions emit through now.
func (g *gen) za() zasm {
	if g.zh != nil {
		return g.zh
	}
	return &g.a
}

// Registers of halfAsm: the functions' own are Y0–Y13, Y14 the shim's.
const (
	halfRegs    = 14
	halfScratch = amd64.VReg(14)
	halfSlots   = 16*32 + 7*32 + 2*32 // the sixteen registers, K1–K7, the result's halves
)

// halfAsm runs zasm's instructions on four f64 lanes in ymm registers
// (see above); kslot is the frame offset of K1's slot.
type halfAsm struct {
	*amd64.Asm
	kslot int32
}

func (h *halfAsm) reg(z amd64.ZReg) amd64.VReg {
	if z >= halfRegs {
		h.Fail("f64 math on ymm halves: register Z%d past Y%d", z, halfRegs-1)
	}
	return amd64.VReg(z)
}

func (h *halfAsm) op(o amd64.Operand) amd64.Operand {
	switch o := o.(type) {
	case amd64.ZReg:
		return h.reg(o)
	case amd64.Mem:
		return o.Plain()
	}
	h.Fail("f64 math on ymm halves: operand %v", o)
	return o
}

func (h *halfAsm) k(k amd64.KReg) amd64.Mem {
	if k < 1 || k > 7 {
		h.Fail("f64 math on ymm halves: opmask K%d", k)
	}
	return fr(h.kslot + 32*int32(k-1))
}

func (h *halfAsm) VADDPDZ(d, x amd64.ZReg, y amd64.Operand) { h.VADDPD(h.reg(d), h.reg(x), h.op(y)) }
func (h *halfAsm) VSUBPDZ(d, x amd64.ZReg, y amd64.Operand) { h.VSUBPD(h.reg(d), h.reg(x), h.op(y)) }
func (h *halfAsm) VMULPDZ(d, x amd64.ZReg, y amd64.Operand) { h.VMULPD(h.reg(d), h.reg(x), h.op(y)) }
func (h *halfAsm) VDIVPDZ(d, x amd64.ZReg, y amd64.Operand) { h.VDIVPD(h.reg(d), h.reg(x), h.op(y)) }
func (h *halfAsm) VMINPDZ(d, x amd64.ZReg, y amd64.Operand) { h.VMINPD(h.reg(d), h.reg(x), h.op(y)) }
func (h *halfAsm) VMAXPDZ(d, x amd64.ZReg, y amd64.Operand) { h.VMAXPD(h.reg(d), h.reg(x), h.op(y)) }
func (h *halfAsm) VSQRTPDZ(d amd64.ZReg, s amd64.Operand)   { h.VSQRTPD(h.reg(d), h.op(s)) }
func (h *halfAsm) VFMADD213PDZ(d, x amd64.ZReg, y amd64.Operand) {
	h.VFMADD213PD(h.reg(d), h.reg(x), h.op(y))
}
func (h *halfAsm) VFMADD231PDZ(d, x amd64.ZReg, y amd64.Operand) {
	h.VFMADD231PD(h.reg(d), h.reg(x), h.op(y))
}
func (h *halfAsm) VFNMADD231PDZ(d, x amd64.ZReg, y amd64.Operand) {
	h.VFNMADD231PD(h.reg(d), h.reg(x), h.op(y))
}
func (h *halfAsm) VPANDQZ(d, x amd64.ZReg, y amd64.Operand) { h.VPAND(h.reg(d), h.reg(x), h.op(y)) }
func (h *halfAsm) VPORQZ(d, x amd64.ZReg, y amd64.Operand)  { h.VPOR(h.reg(d), h.reg(x), h.op(y)) }
func (h *halfAsm) VPXORQZ(d, x amd64.ZReg, y amd64.Operand) { h.VPXOR(h.reg(d), h.reg(x), h.op(y)) }
func (h *halfAsm) VPADDQZ(d, x amd64.ZReg, y amd64.Operand) { h.VPADDQ(h.reg(d), h.reg(x), h.op(y)) }
func (h *halfAsm) VPSLLQZ(d, s amd64.ZReg, n uint8)         { h.VPSLLQ(h.reg(d), h.reg(s), n) }
func (h *halfAsm) VPSRLQZ(d, s amd64.ZReg, n uint8)         { h.VPSRLQ(h.reg(d), h.reg(s), n) }

// VRNDSCALEPDZ with a scale of 0 (imm < 16) is VROUNDPD with the same
// rounding control.
func (h *halfAsm) VRNDSCALEPDZ(d amd64.ZReg, s amd64.Operand, imm uint8) {
	if imm >= 16 {
		h.Fail("f64 math on ymm halves: vrndscalepd with a scale (%#x)", imm)
	}
	h.VROUNDPD(h.reg(d), h.op(s), imm)
}

// VCVTPD2DQZ and VCVTDQ2PDZ: four lanes to four int32 in the low half, and
// back.
func (h *halfAsm) VCVTPD2DQZ(d, s amd64.ZReg) { h.VCVTPD2DQ(h.reg(d), h.reg(s)) }
func (h *halfAsm) VCVTDQ2PDZ(d amd64.ZReg, s amd64.Operand) {
	h.VCVTDQ2PD(h.reg(d), h.op(s))
}
func (h *halfAsm) VMOVAPDZ(d, s amd64.ZReg)                { h.VMOVAPS(h.reg(d), h.reg(s)) }
func (h *halfAsm) VBROADCASTSDZ(d amd64.ZReg, m amd64.Mem) { h.VBROADCASTSD(h.reg(d), m.Plain()) }

func (h *halfAsm) VCMPPDZ(k amd64.KReg, x amd64.ZReg, y amd64.Operand, pred uint8) {
	h.VCMPPD(halfScratch, h.reg(x), h.op(y), pred)
	h.VMOVUPSstore(h.k(k), halfScratch)
}

// VCMPPDKZ: the comparison where m is set (an And of the two masks).
func (h *halfAsm) VCMPPDKZ(k, m amd64.KReg, x amd64.ZReg, y amd64.Operand, pred uint8) {
	h.VCMPPD(halfScratch, h.reg(x), h.op(y), pred)
	h.VPAND(halfScratch, halfScratch, h.k(m))
	h.VMOVUPSstore(h.k(k), halfScratch)
}

// VBLENDMPDZ: d = y where k is set, else x.
func (h *halfAsm) VBLENDMPDZ(d amd64.ZReg, k amd64.KReg, x amd64.ZReg, y amd64.Operand) {
	h.VMOVUPS(halfScratch, h.k(k))
	h.VBLENDVPD(h.reg(d), h.reg(x), h.op(y), halfScratch)
}

func (h *halfAsm) KORW(d, x, y amd64.KReg) {
	h.VMOVUPS(halfScratch, h.k(x))
	h.VPOR(halfScratch, halfScratch, h.k(y))
	h.VMOVUPSstore(h.k(d), halfScratch)
}

func (h *halfAsm) KXORW(d, x, y amd64.KReg) {
	h.VMOVUPS(halfScratch, h.k(x))
	h.VPXOR(halfScratch, halfScratch, h.k(y))
	h.VMOVUPSstore(h.k(d), halfScratch)
}

// KORTESTW of a mask with itself: ZF where no lane is set (VTESTPS of the
// lanes' sign bits, each lane's mask all ones or zero).
func (h *halfAsm) KORTESTW(x, y amd64.KReg) {
	if x != y {
		h.Fail("f64 math on ymm halves: KORTESTW of two masks")
	}
	h.VMOVUPS(halfScratch, h.k(x))
	h.VTESTPS(halfScratch, halfScratch)
}

// mathF64Pairs emits f64 op v (mathF64Forms' functions, or pow) on a pair
// phase's ymm registers without AVX-512 (see above): dst's pair = op of
// s's pairs.
func (g *gen) mathF64Pairs(v *tile.Value, dst amd64.VReg, s []opnd) error {
	a := &g.a
	if g.halfFrame == 0 {
		g.halfFrame = g.alloc(halfSlots, 32)
	}
	save := g.halfFrame
	res := save + 16*32 + 7*32
	for r := amd64.VReg(0); r < 16; r++ {
		a.VMOVUPSstore(fr(save+32*int32(r)), r)
	}
	var t []amd64.VReg
	for r := amd64.VReg(len(s)); r < halfRegs; r++ {
		t = append(t, r)
	}
	for h := 0; h < 2; h++ {
		for i, o := range s {
			a.VMOVUPS(amd64.VReg(i), fr(save+32*int32(half(o.reg, h))))
		}
		g.zh = &halfAsm{Asm: a, kslot: save + 16*32}
		switch v.Op {
		case tile.OpPow:
			g.powF64(0, 0, 1, t)
		case tile.OpRem:
			g.remF64(0, 0, 1, t)
		default:
			mathF64Forms[v.Op](g, 0, 0, t)
		}
		g.zh = nil
		a.VMOVUPSstore(fr(res+32*int32(h)), 0)
	}
	for r := amd64.VReg(0); r < 16; r++ {
		a.VMOVUPS(r, fr(save+32*int32(r)))
	}
	a.VMOVUPS(dst, fr(res))
	a.VMOVUPS(hi(dst), fr(res+32))
	return a.Err()
}
