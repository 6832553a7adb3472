package amd64

// VEX-encoded AVX, AVX2 and FMA instructions. Methods without a suffix are
// 256-bit (ymm); an X suffix is the 128-bit form (xmm). Operand order is
// Intel's: VADDPS(d, a, b) is d = a + b (Go's assembler: VADDPS b, a, d).

type vop struct {
	mm, pp uint8
	w      bool
	op     byte
}

var (
	// packed single (no prefix, map 0F)
	opADDPS    = vop{map0F, ppNone, false, 0x58}
	opMULPS    = vop{map0F, ppNone, false, 0x59}
	opSUBPS    = vop{map0F, ppNone, false, 0x5c}
	opMINPS    = vop{map0F, ppNone, false, 0x5d}
	opDIVPS    = vop{map0F, ppNone, false, 0x5e}
	opMAXPS    = vop{map0F, ppNone, false, 0x5f}
	opANDPS    = vop{map0F, ppNone, false, 0x54}
	opANDNPS   = vop{map0F, ppNone, false, 0x55}
	opORPS     = vop{map0F, ppNone, false, 0x56}
	opXORPS    = vop{map0F, ppNone, false, 0x57}
	opSQRTPS   = vop{map0F, ppNone, false, 0x51}
	opCMPPS    = vop{map0F, ppNone, false, 0xc2}
	opSHUFPS   = vop{map0F, ppNone, false, 0xc6}
	opUNPCKLPS = vop{map0F, ppNone, false, 0x14}
	opUNPCKHPS = vop{map0F, ppNone, false, 0x15}
	opUNPCKLPD = vop{map0F, pp66, false, 0x14}
	opUNPCKHPD = vop{map0F, pp66, false, 0x15}
	opMOVUPS   = vop{map0F, ppNone, false, 0x10}
	opMOVUPSst = vop{map0F, ppNone, false, 0x11}
	opMOVNTPS  = vop{map0F, ppNone, false, 0x2b}
	opMOVAPS   = vop{map0F, ppNone, false, 0x28}
	opMOVAPSst = vop{map0F, ppNone, false, 0x29}
	opMOVHLPS  = vop{map0F, ppNone, false, 0x12}
	opCVTDQ2PS = vop{map0F, ppNone, false, 0x5b}
	opCVTPS2PD = vop{map0F, ppNone, false, 0x5a}
	opMOVMSKPS = vop{map0F, ppNone, false, 0x50}

	// packed double (66, map 0F)
	opADDPD    = vop{map0F, pp66, false, 0x58}
	opMULPD    = vop{map0F, pp66, false, 0x59}
	opSUBPD    = vop{map0F, pp66, false, 0x5c}
	opMINPD    = vop{map0F, pp66, false, 0x5d}
	opDIVPD    = vop{map0F, pp66, false, 0x5e}
	opMAXPD    = vop{map0F, pp66, false, 0x5f}
	opANDPD    = vop{map0F, pp66, false, 0x54}
	opANDNPD   = vop{map0F, pp66, false, 0x55}
	opCMPPD    = vop{map0F, pp66, false, 0xc2}
	opCVTPD2PS = vop{map0F, pp66, false, 0x5a}
	opMOVUPD   = vop{map0F, pp66, false, 0x10}
	opSQRTPD   = vop{map0F, pp66, false, 0x51}

	// scalar single (F3, map 0F)
	opADDSS     = vop{map0F, ppF3, false, 0x58}
	opADDSD     = vop{map0F, ppF2, false, 0x58}
	opMULSS     = vop{map0F, ppF3, false, 0x59}
	opSUBSS     = vop{map0F, ppF3, false, 0x5c}
	opDIVSS     = vop{map0F, ppF3, false, 0x5e}
	opSQRTSS    = vop{map0F, ppF3, false, 0x51}
	opMOVSS     = vop{map0F, ppF3, false, 0x10}
	opMOVSSst   = vop{map0F, ppF3, false, 0x11}
	opMOVSD     = vop{map0F, ppF2, false, 0x10}
	opMOVSDst   = vop{map0F, ppF2, false, 0x11}
	opMOVSHDUP  = vop{map0F, ppF3, false, 0x16}
	opMOVHPD    = vop{map0F, pp66, false, 0x16}
	opCVTTPS2DQ = vop{map0F, ppF3, false, 0x5b}
	opCVTPD2DQ  = vop{map0F, ppF2, false, 0xe6}

	// packed integers (66, map 0F)
	opPADDD   = vop{map0F, pp66, false, 0xfe}
	opPSUBD   = vop{map0F, pp66, false, 0xfa}
	opPADDQ   = vop{map0F, pp66, false, 0xd4}
	opPCMPGTD = vop{map0F, pp66, false, 0x66}
	opPCMPEQD = vop{map0F, pp66, false, 0x76}
	opPAND    = vop{map0F, pp66, false, 0xdb}
	opPANDN   = vop{map0F, pp66, false, 0xdf}
	opPOR     = vop{map0F, pp66, false, 0xeb}
	opPXOR    = vop{map0F, pp66, false, 0xef}
	opMOVDx   = vop{map0F, pp66, false, 0x6e} // xmm ← r32
	opMOVDr   = vop{map0F, pp66, false, 0x7e} // r32 ← xmm
	opPSHIFTD = vop{map0F, pp66, false, 0x72} // /6 sll, /2 srl, /4 sra
	opPSHIFTQ = vop{map0F, pp66, false, 0x73} // /6 sll, /2 srl

	// map 0F38 (66)
	opBROADCASTSS = vop{map0F38, pp66, false, 0x18}
	opPBROADCASTD = vop{map0F38, pp66, false, 0x58}
	opMASKMOVPSld = vop{map0F38, pp66, false, 0x2c}
	opMASKMOVPSst = vop{map0F38, pp66, false, 0x2e}
	opMASKMOVPDld = vop{map0F38, pp66, false, 0x2d}
	opMASKMOVPDst = vop{map0F38, pp66, false, 0x2f}
	opBROADCASTSD = vop{map0F38, pp66, false, 0x19}
	opCVTDQ2PD    = vop{map0F, ppF3, false, 0xe6}
	opPMULLD      = vop{map0F38, pp66, false, 0x40}
	opPMINSD      = vop{map0F38, pp66, false, 0x39}
	opPMAXSD      = vop{map0F38, pp66, false, 0x3d}
	opPABSD       = vop{map0F38, pp66, false, 0x1e}
	opCVTTPD2DQ   = vop{map0F, pp66, false, 0xe6}
	opCVTSI2SDQ   = vop{map0F, ppF2, true, 0x2a}  // xmm ← r/m64 (int64 → float64)
	opCVTSS2SD    = vop{map0F, ppF3, false, 0x5a} // xmm ← xmm/m32 (float32 → float64)
	opPMOVSXDQ    = vop{map0F38, pp66, false, 0x25}
	opFMADD231PS  = vop{map0F38, pp66, false, 0xb8}
	opFMADD213PS  = vop{map0F38, pp66, false, 0xa8}
	opFNMADD231PS = vop{map0F38, pp66, false, 0xbc}
	opFMADD231PD  = vop{map0F38, pp66, true, 0xb8}
	opFMADD213PD  = vop{map0F38, pp66, true, 0xa8}
	opFNMADD231PD = vop{map0F38, pp66, true, 0xbc}
	opTESTPS      = vop{map0F38, pp66, false, 0x0e}
	opPERMPS      = vop{map0F38, pp66, false, 0x16}

	// map 0F3A (66)
	opBLENDVPS   = vop{map0F3A, pp66, false, 0x4a}
	opBLENDVPD   = vop{map0F3A, pp66, false, 0x4b}
	opROUNDPS    = vop{map0F3A, pp66, false, 0x08}
	opROUNDPD    = vop{map0F3A, pp66, false, 0x09}
	opEXTRACTF   = vop{map0F3A, pp66, false, 0x19}
	opINSERTF    = vop{map0F3A, pp66, false, 0x18}
	opPERMILPS   = vop{map0F3A, pp66, false, 0x04}
	opPERM2F128  = vop{map0F3A, pp66, false, 0x06}
	opBLENDPS    = vop{map0F3A, pp66, false, 0x0c}
	opINSERTPSop = vop{map0F3A, pp66, false, 0x21}
	opEXTRACTPS  = vop{map0F3A, pp66, false, 0x17}
)

// v3 emits d = op(s1, s2) with s1 in VEX.vvvv and s2 the r/m operand.
func (a *Asm) v3(o vop, l bool, d, s1 uint8, s2 Operand, imm ...byte) {
	a.vex(o.mm, o.pp, o.w, l, o.op, d, s1, s2, imm...)
}

// Compare predicates of VCMPPS and VCMPPD (ordered, non-signalling unless
// stated; Go's assembler and Intel's manual number them the same).
const (
	CmpEQ    uint8 = 0x00 // ordered, quiet
	CmpLT    uint8 = 0x11 // ordered, quiet (LT_OQ)
	CmpLE    uint8 = 0x12 // ordered, quiet (LE_OQ)
	CmpUNORD uint8 = 0x03
	CmpNEQ   uint8 = 0x04 // unordered or not equal (NEQ_UQ)
	CmpORD   uint8 = 0x07
	CmpGT    uint8 = 0x1e // ordered, quiet (GT_OQ)
	CmpGE    uint8 = 0x1d // ordered, quiet (GE_OQ)
)

// ---- moves ----

// VMOVUPS d, [m] (256-bit load).
func (a *Asm) VMOVUPS(d VReg, m Mem) { a.v3(opMOVUPS, true, uint8(d), 0, m) }

// VMOVUPSX d, [m] (128-bit load).
func (a *Asm) VMOVUPSX(d VReg, m Mem) { a.v3(opMOVUPS, false, uint8(d), 0, m) }

// VMOVUPSstore [m], s (256-bit store).
func (a *Asm) VMOVUPSstore(m Mem, s VReg) { a.v3(opMOVUPSst, true, uint8(s), 0, m) }

// VMOVNTPSstore [m], s: a 256-bit store past the caches (non-temporal: no
// read for ownership, the line not kept; m 32-byte aligned, else the CPU
// faults). An SFENCE orders it before later stores.
func (a *Asm) VMOVNTPSstore(m Mem, s VReg) { a.v3(opMOVNTPS, true, uint8(s), 0, m) }

// VMOVUPSstoreX [m], s (128-bit store).
func (a *Asm) VMOVUPSstoreX(m Mem, s VReg) { a.v3(opMOVUPSst, false, uint8(s), 0, m) }

// VMOVAPS d, s (register copy). Where only s is one of Y8–Y15 the store
// form is shorter (two-byte VEX), as Go's assembler chooses.
func (a *Asm) VMOVAPS(d, s VReg) {
	if s >= 8 && d < 8 {
		a.v3(opMOVAPSst, true, uint8(s), 0, d)
		return
	}
	a.v3(opMOVAPS, true, uint8(d), 0, s)
}

// VMOVSSload d, [m]: lane 0 from memory, the others zeroed.
func (a *Asm) VMOVSSload(d VReg, m Mem) { a.v3(opMOVSS, false, uint8(d), 0, m) }

// VMOVSSstore [m], s: lane 0.
func (a *Asm) VMOVSSstore(m Mem, s VReg) { a.v3(opMOVSSst, false, uint8(s), 0, m) }

// VMOVSDload d = the float64 at m in lane 0, the other lanes zero.
func (a *Asm) VMOVSDload(d VReg, m Mem) { a.v3(opMOVSD, false, uint8(d), 0, m) }

// VMOVHPDload d = x's float64 lane 0 and the float64 at m (lane 1), the
// lanes above zero (VEX.128).
func (a *Asm) VMOVHPDload(d, x VReg, m Mem) { a.v3(opMOVHPD, false, uint8(d), uint8(x), m) }

// VCVTSI2SDQ d = s1 with lane 0 the int64 in r converted to float64
// (rounded as MXCSR says: to nearest, as Go's float64(int64)).
func (a *Asm) VCVTSI2SDQ(d, s1 VReg, r Reg) { a.v3(opCVTSI2SDQ, false, uint8(d), uint8(s1), r) }

// VCVTSS2SD d = s1 with lane 0 s2's float32 lane 0 as float64 (exact).
func (a *Asm) VCVTSS2SD(d, s1 VReg, s2 Operand) { a.v3(opCVTSS2SD, false, uint8(d), uint8(s1), s2) }

// VMOVSDstore [m] = s's float64 lane 0.
func (a *Asm) VMOVSDstore(m Mem, s VReg) { a.v3(opMOVSDst, false, uint8(s), 0, m) }

// VMOVDload d, [m]: 32 bits into lane 0.
func (a *Asm) VMOVDload(d VReg, m Mem) { a.v3(opMOVDx, false, uint8(d), 0, m) }

// VMOVDfromGPR d, r: the low 32 bits of r into lane 0.
func (a *Asm) VMOVDfromGPR(d VReg, r Reg) { a.v3(opMOVDx, false, uint8(d), 0, r) }

// VMOVDtoGPR r, s: lane 0 into r (zero-extended).
func (a *Asm) VMOVDtoGPR(r Reg, s VReg) { a.v3(opMOVDr, false, uint8(s), 0, r) }

// VBROADCASTSS d, src: a 32-bit value (memory, or lane 0 of a register:
// AVX2) into every lane.
func (a *Asm) VBROADCASTSS(d VReg, src Operand) { a.v3(opBROADCASTSS, true, uint8(d), 0, src) }

// VPBROADCASTD d, src: the 32-bit integer form.
func (a *Asm) VPBROADCASTD(d VReg, src Operand) { a.v3(opPBROADCASTD, true, uint8(d), 0, src) }

// VMASKMOVPSload d, mask, [m]: lanes whose mask sign bit is set are
// loaded, the others zeroed; masked-off lanes never fault.
func (a *Asm) VMASKMOVPSload(d, mask VReg, m Mem) {
	a.v3(opMASKMOVPSld, true, uint8(d), uint8(mask), m)
}

// VMASKMOVPSstore [m], mask, s: lanes whose mask sign bit is set are
// stored; masked-off lanes are not touched and never fault.
func (a *Asm) VMASKMOVPSstore(m Mem, mask, s VReg) {
	a.v3(opMASKMOVPSst, true, uint8(s), uint8(mask), m)
}

// VMASKMOVPDload d, mask, [m]: the f64 lanes whose mask sign bit is set
// are loaded, the others zeroed; masked-off lanes never fault.
func (a *Asm) VMASKMOVPDload(d, mask VReg, m Mem) {
	a.v3(opMASKMOVPDld, true, uint8(d), uint8(mask), m)
}

// VMASKMOVPDstore [m], mask, s: the f64 lanes whose mask sign bit is set
// are stored; masked-off lanes are not touched and never fault.
func (a *Asm) VMASKMOVPDstore(m Mem, mask, s VReg) {
	a.v3(opMASKMOVPDst, true, uint8(s), uint8(mask), m)
}

// VBROADCASTSD d(ymm), [m]: one float64 to four lanes.
func (a *Asm) VBROADCASTSD(d VReg, m Mem) { a.v3(opBROADCASTSD, true, uint8(d), 0, m) }

// VCVTDQ2PD d(ymm) = the four int32 lanes of s (xmm or m128), exactly.
func (a *Asm) VCVTDQ2PD(d VReg, s Operand) { a.v3(opCVTDQ2PD, true, uint8(d), 0, s) }

// VMOVMSKPS r, s: the sign bits of s's eight lanes.
func (a *Asm) VMOVMSKPS(r Reg, s VReg) { a.v3(opMOVMSKPS, true, uint8(r), 0, s) }

// ---- single-precision arithmetic ----

// VADDPS d = a + b.
func (a *Asm) VADDPS(d, x VReg, y Operand) { a.v3(opADDPS, true, uint8(d), uint8(x), y) }

// VSUBPS d = a - b.
func (a *Asm) VSUBPS(d, x VReg, y Operand) { a.v3(opSUBPS, true, uint8(d), uint8(x), y) }

// VMULPS d = a · b.
func (a *Asm) VMULPS(d, x VReg, y Operand) { a.v3(opMULPS, true, uint8(d), uint8(x), y) }

// VDIVPS d = a / b.
func (a *Asm) VDIVPS(d, x VReg, y Operand) { a.v3(opDIVPS, true, uint8(d), uint8(x), y) }

// VMINPS d = a < b ? a : b (b if either is NaN).
func (a *Asm) VMINPS(d, x VReg, y Operand) { a.v3(opMINPS, true, uint8(d), uint8(x), y) }

// VMAXPS d = a > b ? a : b (b if either is NaN).
func (a *Asm) VMAXPS(d, x VReg, y Operand) { a.v3(opMAXPS, true, uint8(d), uint8(x), y) }

// VANDPS d = a & b.
func (a *Asm) VANDPS(d, x VReg, y Operand) { a.v3(opANDPS, true, uint8(d), uint8(x), y) }

// VANDNPS d = ^a & b.
func (a *Asm) VANDNPS(d, x VReg, y Operand) { a.v3(opANDNPS, true, uint8(d), uint8(x), y) }

// VORPS d = a | b.
func (a *Asm) VORPS(d, x VReg, y Operand) { a.v3(opORPS, true, uint8(d), uint8(x), y) }

// VXORPS d = a ^ b.
func (a *Asm) VXORPS(d, x VReg, y Operand) { a.v3(opXORPS, true, uint8(d), uint8(x), y) }

// VSQRTPS d = √s.
func (a *Asm) VSQRTPS(d VReg, s Operand) { a.v3(opSQRTPS, true, uint8(d), 0, s) }

// VCMPPS d = a pred b: all ones where true.
func (a *Asm) VCMPPS(d, x VReg, y Operand, pred uint8) {
	a.v3(opCMPPS, true, uint8(d), uint8(x), y, pred)
}

// VBLENDVPS d = mask ? b : a, lane by lane (the mask's sign bit).
func (a *Asm) VBLENDVPS(d, x VReg, y Operand, mask VReg) {
	a.v3(opBLENDVPS, true, uint8(d), uint8(x), y, uint8(mask)<<4)
}

// VFMADD231PS d = a·b + d, rounded once.
func (a *Asm) VFMADD231PS(d, x VReg, y Operand) { a.v3(opFMADD231PS, true, uint8(d), uint8(x), y) }

// VFMADD213PS d = a·d + b, rounded once.
func (a *Asm) VFMADD213PS(d, x VReg, y Operand) { a.v3(opFMADD213PS, true, uint8(d), uint8(x), y) }

// VFNMADD231PS d = -(a·b) + d, rounded once.
func (a *Asm) VFNMADD231PS(d, x VReg, y Operand) {
	a.v3(opFNMADD231PS, true, uint8(d), uint8(x), y)
}

// VROUNDPS d = round(s) in mode (0 nearest even, 1 down, 2 up, 3 toward
// zero; +8 suppresses the inexact exception).
func (a *Asm) VROUNDPS(d VReg, s Operand, mode uint8) { a.v3(opROUNDPS, true, uint8(d), 0, s, mode) }

// VCVTDQ2PS d = float32(int32 lanes of s).
func (a *Asm) VCVTDQ2PS(d VReg, s Operand) { a.v3(opCVTDQ2PS, true, uint8(d), 0, s) }

// VCVTTPS2DQ d = int32(s) truncated (0x80000000 where out of range or NaN).
func (a *Asm) VCVTTPS2DQ(d VReg, s Operand) { a.v3(opCVTTPS2DQ, true, uint8(d), 0, s) }

// VSHUFPS d = lanes of a and b picked by imm (within each 128-bit half).
func (a *Asm) VSHUFPS(d, x VReg, y Operand, imm uint8) {
	a.v3(opSHUFPS, true, uint8(d), uint8(x), y, imm)
}

// VUNPCKLPS d = the low two lanes of each 128-bit half of x and y,
// interleaved (x0 y0 x1 y1 | x4 y4 x5 y5).
func (a *Asm) VUNPCKLPS(d, x VReg, y Operand) { a.v3(opUNPCKLPS, true, uint8(d), uint8(x), y) }

// VUNPCKHPS d = the high two lanes of each 128-bit half of x and y,
// interleaved (x2 y2 x3 y3 | x6 y6 x7 y7).
func (a *Asm) VUNPCKHPS(d, x VReg, y Operand) { a.v3(opUNPCKHPS, true, uint8(d), uint8(x), y) }

// VUNPCKLPD d = the low f64 lane of each 128-bit half of x and y,
// interleaved (x0 y0 | x2 y2).
func (a *Asm) VUNPCKLPD(d, x VReg, y Operand) { a.v3(opUNPCKLPD, true, uint8(d), uint8(x), y) }

// VUNPCKHPD d = the high f64 lane of each 128-bit half of x and y,
// interleaved (x1 y1 | x3 y3).
func (a *Asm) VUNPCKHPD(d, x VReg, y Operand) { a.v3(opUNPCKHPD, true, uint8(d), uint8(x), y) }

// VPERMILPS d = s's lanes permuted by imm within each 128-bit half.
func (a *Asm) VPERMILPS(d VReg, s Operand, imm uint8) { a.v3(opPERMILPS, true, uint8(d), 0, s, imm) }

// VPERMPS d = lanes of s picked by the index lanes of idx (AVX2).
func (a *Asm) VPERMPS(d, idx VReg, s Operand) { a.v3(opPERMPS, true, uint8(d), uint8(idx), s) }

// VPERM2F128 d = 128-bit halves of a and b picked by imm.
func (a *Asm) VPERM2F128(d, x VReg, y Operand, imm uint8) {
	a.v3(opPERM2F128, true, uint8(d), uint8(x), y, imm)
}

// VBLENDPS d = lanes of b where imm's bit is set, else of a.
func (a *Asm) VBLENDPS(d, x VReg, y Operand, imm uint8) {
	a.v3(opBLENDPS, true, uint8(d), uint8(x), y, imm)
}

// VTESTPS sets ZF if a & b has no sign bit set, CF if ^a & b has none.
func (a *Asm) VTESTPS(x VReg, y Operand) { a.v3(opTESTPS, true, uint8(x), 0, y) }

// ---- 128-bit and scalar forms used by horizontal reductions ----

// VEXTRACTF128 d(xmm) = the 128-bit half imm (0 low, 1 high) of s.
func (a *Asm) VEXTRACTF128(d VReg, s VReg, imm uint8) {
	a.v3(opEXTRACTF, true, uint8(s), 0, d, imm)
}

// VINSERTF128 d = a with its half imm replaced by s (xmm or m128).
func (a *Asm) VINSERTF128(d, x VReg, s Operand, imm uint8) {
	a.v3(opINSERTF, true, uint8(d), uint8(x), s, imm)
}

// VADDPSX d = a + b on 4 lanes (the upper half of d zeroed).
func (a *Asm) VADDPSX(d, x VReg, y Operand) { a.v3(opADDPS, false, uint8(d), uint8(x), y) }

// VMAXPSX and VMINPSX: the 4-lane forms.
func (a *Asm) VMAXPSX(d, x VReg, y Operand) { a.v3(opMAXPS, false, uint8(d), uint8(x), y) }

// VMINPSX d = min on 4 lanes.
func (a *Asm) VMINPSX(d, x VReg, y Operand) { a.v3(opMINPS, false, uint8(d), uint8(x), y) }

// VMOVHLPS d = (b's lanes 2,3; a's lanes 2,3) (128-bit).
func (a *Asm) VMOVHLPS(d, x, y VReg) { a.v3(opMOVHLPS, false, uint8(d), uint8(x), y) }

// VMOVSHDUP d = (s1, s1, s3, s3) (128-bit).
func (a *Asm) VMOVSHDUP(d VReg, s Operand) { a.v3(opMOVSHDUP, false, uint8(d), 0, s) }

// VADDSS d = a + b in lane 0 (lanes 1–3 from a).
func (a *Asm) VADDSS(d, x VReg, y Operand) { a.v3(opADDSS, false, uint8(d), uint8(x), y) }

// VADDSD d = a + b in the low f64 lane (the high one from a).
func (a *Asm) VADDSD(d, x VReg, y Operand) { a.v3(opADDSD, false, uint8(d), uint8(x), y) }

// VSUBSS d = a - b in lane 0.
func (a *Asm) VSUBSS(d, x VReg, y Operand) { a.v3(opSUBSS, false, uint8(d), uint8(x), y) }

// VMULSS d = a · b in lane 0.
func (a *Asm) VMULSS(d, x VReg, y Operand) { a.v3(opMULSS, false, uint8(d), uint8(x), y) }

// VDIVSS d = a / b in lane 0.
func (a *Asm) VDIVSS(d, x VReg, y Operand) { a.v3(opDIVSS, false, uint8(d), uint8(x), y) }

// VSQRTSS d = √b in lane 0 (lanes 1–3 from a).
func (a *Asm) VSQRTSS(d, x VReg, y Operand) { a.v3(opSQRTSS, false, uint8(d), uint8(x), y) }

// VINSERTPS d = a with lane imm>>4&3 set to lane imm>>6 of b; imm&15
// zeroes lanes.
func (a *Asm) VINSERTPS(d, x VReg, y Operand, imm uint8) {
	a.v3(opINSERTPSop, false, uint8(d), uint8(x), y, imm)
}

// VEXTRACTPS [m], s, imm: the f32 lane imm (0–3) of xmm s to memory.
func (a *Asm) VEXTRACTPS(m Mem, s VReg, imm uint8) {
	a.v3(opEXTRACTPS, false, uint8(s), 0, m, imm)
}

// ---- double precision (f32 math through float64) ----

// VCVTPS2PD d(4 × f64) = the 4 f32 lanes of s (xmm or m128).
func (a *Asm) VCVTPS2PD(d VReg, s Operand) { a.v3(opCVTPS2PD, true, uint8(d), 0, s) }

// VCVTPD2PS d(xmm) = s's 4 f64 lanes rounded to f32.
func (a *Asm) VCVTPD2PS(d VReg, s VReg) { a.v3(opCVTPD2PS, true, uint8(d), 0, s) }

// VCVTPD2DQ d(xmm) = s's 4 f64 lanes rounded (MXCSR: to nearest even) to int32.
func (a *Asm) VCVTPD2DQ(d VReg, s VReg) { a.v3(opCVTPD2DQ, true, uint8(d), 0, s) }

// VMOVUPD d, [m].
func (a *Asm) VMOVUPD(d VReg, m Mem) { a.v3(opMOVUPD, true, uint8(d), 0, m) }

// VADDPD d = a + b.
func (a *Asm) VADDPD(d, x VReg, y Operand) { a.v3(opADDPD, true, uint8(d), uint8(x), y) }

// VSUBPD d = a - b.
func (a *Asm) VSUBPD(d, x VReg, y Operand) { a.v3(opSUBPD, true, uint8(d), uint8(x), y) }

// VMULPD d = a · b.
func (a *Asm) VMULPD(d, x VReg, y Operand) { a.v3(opMULPD, true, uint8(d), uint8(x), y) }

// VDIVPD d = a / b.
func (a *Asm) VDIVPD(d, x VReg, y Operand) { a.v3(opDIVPD, true, uint8(d), uint8(x), y) }

// VMINPD d = a < b ? a : b.
func (a *Asm) VMINPD(d, x VReg, y Operand) { a.v3(opMINPD, true, uint8(d), uint8(x), y) }

// VMAXPD d = a > b ? a : b.
func (a *Asm) VMAXPD(d, x VReg, y Operand) { a.v3(opMAXPD, true, uint8(d), uint8(x), y) }

// VANDPD d = a & b.
func (a *Asm) VANDPD(d, x VReg, y Operand) { a.v3(opANDPD, true, uint8(d), uint8(x), y) }

// VANDNPD d = ^a & b.
func (a *Asm) VANDNPD(d, x VReg, y Operand) { a.v3(opANDNPD, true, uint8(d), uint8(x), y) }

// VCMPPD d = a pred b.
func (a *Asm) VCMPPD(d, x VReg, y Operand, pred uint8) {
	a.v3(opCMPPD, true, uint8(d), uint8(x), y, pred)
}

// VBLENDVPD d = mask ? b : a.
func (a *Asm) VBLENDVPD(d, x VReg, y Operand, mask VReg) {
	a.v3(opBLENDVPD, true, uint8(d), uint8(x), y, uint8(mask)<<4)
}

// VSQRTPD d = √s.
func (a *Asm) VSQRTPD(d VReg, s Operand) { a.v3(opSQRTPD, true, uint8(d), 0, s) }

// VROUNDPD d = round(s) in mode.
func (a *Asm) VROUNDPD(d VReg, s Operand, mode uint8) { a.v3(opROUNDPD, true, uint8(d), 0, s, mode) }

// VFMADD213PD d = a·d + b.
func (a *Asm) VFMADD213PD(d, x VReg, y Operand) { a.v3(opFMADD213PD, true, uint8(d), uint8(x), y) }

// VFMADD231PD d = a·b + d.
func (a *Asm) VFMADD231PD(d, x VReg, y Operand) { a.v3(opFMADD231PD, true, uint8(d), uint8(x), y) }

// VFNMADD231PD d = -(a·b) + d, rounded once.
func (a *Asm) VFNMADD231PD(d, x VReg, y Operand) { a.v3(opFNMADD231PD, true, uint8(d), uint8(x), y) }

// ---- integers (AVX2) ----

// VPADDD d = a + b (int32 lanes, wrapping).
func (a *Asm) VPADDD(d, x VReg, y Operand) { a.v3(opPADDD, true, uint8(d), uint8(x), y) }

// VPSUBD d = a - b.
func (a *Asm) VPSUBD(d, x VReg, y Operand) { a.v3(opPSUBD, true, uint8(d), uint8(x), y) }

// VPMULLD d = a · b (low 32 bits).
func (a *Asm) VPMULLD(d, x VReg, y Operand) { a.v3(opPMULLD, true, uint8(d), uint8(x), y) }

// VPMINSD d = min(a, b) (signed int32 lanes).
func (a *Asm) VPMINSD(d, x VReg, y Operand) { a.v3(opPMINSD, true, uint8(d), uint8(x), y) }

// VPMAXSD d = max(a, b) (signed int32 lanes).
func (a *Asm) VPMAXSD(d, x VReg, y Operand) { a.v3(opPMAXSD, true, uint8(d), uint8(x), y) }

// VPABSD d = |s| (int32 lanes; MinInt32 stays MinInt32).
func (a *Asm) VPABSD(d VReg, s Operand) { a.v3(opPABSD, true, uint8(d), 0, s) }

// VCVTTPD2DQ d(xmm) = s's 4 f64 lanes truncated to int32 (0x80000000
// where out of range or NaN).
func (a *Asm) VCVTTPD2DQ(d VReg, s VReg) { a.v3(opCVTTPD2DQ, true, uint8(d), 0, s) }

// VPADDQ d = a + b (int64 lanes).
func (a *Asm) VPADDQ(d, x VReg, y Operand) { a.v3(opPADDQ, true, uint8(d), uint8(x), y) }

// VPCMPGTD d = a > b (signed int32): all ones where true.
func (a *Asm) VPCMPGTD(d, x VReg, y Operand) { a.v3(opPCMPGTD, true, uint8(d), uint8(x), y) }

// VPCMPEQD d = a == b.
func (a *Asm) VPCMPEQD(d, x VReg, y Operand) { a.v3(opPCMPEQD, true, uint8(d), uint8(x), y) }

// VPAND d = a & b.
func (a *Asm) VPAND(d, x VReg, y Operand) { a.v3(opPAND, true, uint8(d), uint8(x), y) }

// VPANDN d = ^a & b.
func (a *Asm) VPANDN(d, x VReg, y Operand) { a.v3(opPANDN, true, uint8(d), uint8(x), y) }

// VPOR d = a | b.
func (a *Asm) VPOR(d, x VReg, y Operand) { a.v3(opPOR, true, uint8(d), uint8(x), y) }

// VPXOR d = a ^ b.
func (a *Asm) VPXOR(d, x VReg, y Operand) { a.v3(opPXOR, true, uint8(d), uint8(x), y) }

// VPSLLD d = s << n (int32 lanes).
func (a *Asm) VPSLLD(d, s VReg, n uint8) { a.v3(opPSHIFTD, true, 6, uint8(d), s, n) }

// VPSRLD d = s >> n (logical).
func (a *Asm) VPSRLD(d, s VReg, n uint8) { a.v3(opPSHIFTD, true, 2, uint8(d), s, n) }

// VPSRAD d = s >> n (arithmetic).
func (a *Asm) VPSRAD(d, s VReg, n uint8) { a.v3(opPSHIFTD, true, 4, uint8(d), s, n) }

// VPSLLQ d = s << n (int64 lanes).
func (a *Asm) VPSLLQ(d, s VReg, n uint8) { a.v3(opPSHIFTQ, true, 6, uint8(d), s, n) }

// VPSRLQ d = s >> n on each 64-bit lane (logical).
func (a *Asm) VPSRLQ(d, s VReg, n uint8) { a.v3(opPSHIFTQ, true, 2, uint8(d), s, n) }

// VPMOVSXDQ d(4 × int64) = the 4 int32 lanes of s (xmm) sign-extended.
func (a *Asm) VPMOVSXDQ(d VReg, s Operand) { a.v3(opPMOVSXDQ, true, uint8(d), 0, s) }
