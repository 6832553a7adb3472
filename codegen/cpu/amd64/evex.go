package amd64

import "fmt"

// EVEX-encoded AVX-512 instructions (AVX512F): the 512-bit forms over
// Z0–Z31 that the native code generator emits (the product micro-kernel,
// the unmasked loops of vector phases), with opmasks K1–K7 where a
// comparison or a blend needs them.
// Methods have a Z suffix; operand order is Intel's, as for the VEX forms.
// A memory operand made with Mem.Bcst is a 32-bit element broadcast to
// every lane ({1to16}). Displacements that fit are compressed (disp8·N,
// N the size of the memory operand: 64 for a vector, 4 for an element or
// a broadcast), as every assembler does.

// ZReg is a 512-bit vector register Z0–Z31 (Z0–Z15 share their low 256
// bits with Y0–Y15).
type ZReg uint8

// String is the register's name in Go's assembler.
func (z ZReg) String() string { return fmt.Sprintf("Z%d", uint8(z)) }

func (ZReg) isOperand() {}

// KReg is an opmask register K0–K7 (K0 cannot mask: as a mask it means
// none).
type KReg uint8

// String is the register's name in Go's assembler.
func (k KReg) String() string { return fmt.Sprintf("K%d", uint8(k)) }

// Bcst is m read as one 32-bit element broadcast to every lane ({1to16}),
// for the EVEX instructions that take it.
func (m Mem) Bcst() Mem { m.bcst = true; return m }

// Plain is m without Bcst: the same address, read whole (a VEX operand).
func (m Mem) Plain() Mem { m.bcst = false; return m }

// evex emits an EVEX-encoded 512-bit instruction: ModRM reg field reg
// (0–31), second source vvvv (0–31), r/m operand rm (a ZReg, Reg or Mem),
// its memory operand's size n for disp8 compression (a broadcast's is 4).
// No masking: aaa = 0, z = 0.
func (a *Asm) evex(mm, pp uint8, w bool, op byte, reg, vvvv uint8, rm Operand, n int32) {
	a.evexK(mm, pp, w, op, reg, vvvv, rm, n, 0, false)
}

// evexK is evex under opmask k (K1–K7; 0: none), zeroing the lanes it
// leaves off where zero (else they keep the destination's), with imm
// bytes after the operands.
func (a *Asm) evexK(mm, pp uint8, w bool, op byte, reg, vvvv uint8, rm Operand, n int32, k KReg, zero bool, imm ...byte) {
	a.ripAt, a.ripL = -1, 0
	if k > 7 || zero && k == 0 {
		a.fail("opmask K%d (zeroing %v)", k, zero)
		return
	}
	if reg > 31 || vvvv > 31 {
		a.fail("vector register %d or %d", reg, vvvv)
		return
	}
	var x, b, bcst bool
	switch o := rm.(type) {
	case ZReg:
		if o > 31 {
			a.fail("vector register %d", o)
			return
		}
		b, x = o&8 != 0, o&16 != 0 // EVEX.X extends a vector r/m register
	case Reg:
		b = o >= 8
	case Mem:
		if o.label == 0 {
			x, b = o.Scale != 0 && o.Index >= 8, o.Base >= 8
		}
		bcst = o.bcst
		if bcst {
			n = 4
			if w { // a float64 (W1) instruction broadcasts 8 bytes ({1to8})
				n = 8
			}
		}
	default:
		a.fail("operand %v", rm)
		return
	}
	p0 := mm
	if reg&8 == 0 {
		p0 |= 0x80
	}
	if !x {
		p0 |= 0x40
	}
	if !b {
		p0 |= 0x20
	}
	if reg&16 == 0 {
		p0 |= 0x10
	}
	p1 := (^vvvv&15)<<3 | 4 | pp
	if w {
		p1 |= 0x80
	}
	p2 := uint8(2 << 5) // L'L = 10: 512 bits
	if bcst {
		p2 |= 0x10
	}
	if vvvv&16 == 0 {
		p2 |= 0x08
	}
	p2 |= uint8(k)
	if zero {
		p2 |= 0x80
	}
	a.byte1(0x62, p0, p1, p2, op)
	a.modrmN(reg, rm, n)
	a.byte1(imm...)
	a.endInstr()
}

// VMOVUPSZ d, [m] (512-bit load).
func (a *Asm) VMOVUPSZ(d ZReg, m Mem) { a.evex(map0F, ppNone, false, 0x10, uint8(d), 0, m, 64) }

// VMOVUPSstoreZ [m], s (512-bit store).
func (a *Asm) VMOVUPSstoreZ(m Mem, s ZReg) {
	a.evex(map0F, ppNone, false, 0x11, uint8(s), 0, m, 64)
}

// VMOVNTPSstoreZ [m], s: a 512-bit store that bypasses the caches
// (non-temporal; m 64-byte aligned, else the CPU faults).
func (a *Asm) VMOVNTPSstoreZ(m Mem, s ZReg) {
	a.evex(map0F, ppNone, false, 0x2b, uint8(s), 0, m, 64)
}

// VBROADCASTSSZ d, [m]: a 32-bit value from memory into all 16 lanes.
func (a *Asm) VBROADCASTSSZ(d ZReg, m Mem) {
	a.evex(map0F38, pp66, false, 0x18, uint8(d), 0, m, 4)
}

// VPXORDZ d = x ^ y (VPXORD d, d, d zeroes d).
func (a *Asm) VPXORDZ(d, x ZReg, y Operand) {
	a.evex(map0F, pp66, false, 0xef, uint8(d), uint8(x), y, 64)
}

// VADDPSZ d = x + y.
func (a *Asm) VADDPSZ(d, x ZReg, y Operand) {
	a.evex(map0F, ppNone, false, 0x58, uint8(d), uint8(x), y, 64)
}

// VMULPSZ d = x · y.
func (a *Asm) VMULPSZ(d, x ZReg, y Operand) {
	a.evex(map0F, ppNone, false, 0x59, uint8(d), uint8(x), y, 64)
}

// VFMADD231PSZ d = x·y + d, rounded once; y may be a broadcast (Mem.Bcst).
func (a *Asm) VFMADD231PSZ(d, x ZReg, y Operand) {
	a.evex(map0F38, pp66, false, 0xb8, uint8(d), uint8(x), y, 64)
}

// The instructions of the native code's vector phases in zmm registers
// (codegen/cpu/native: vec.go): each the 512-bit twin of a VEX form the
// ymm code uses, or an opmask form standing in for a vector mask.

// VMOVAPSZ d = s (register to register; the store form, as Go's
// assembler encodes it).
func (a *Asm) VMOVAPSZ(d, s ZReg) { a.evex(map0F, ppNone, false, 0x29, uint8(s), 0, d, 64) }

// VSUBPSZ d = x - y.
func (a *Asm) VSUBPSZ(d, x ZReg, y Operand) {
	a.evex(map0F, ppNone, false, 0x5c, uint8(d), uint8(x), y, 64)
}

// VDIVPSZ d = x / y.
func (a *Asm) VDIVPSZ(d, x ZReg, y Operand) {
	a.evex(map0F, ppNone, false, 0x5e, uint8(d), uint8(x), y, 64)
}

// VMINPSZ d = min(x, y) (y where either is NaN, as VMINPS).
func (a *Asm) VMINPSZ(d, x ZReg, y Operand) {
	a.evex(map0F, ppNone, false, 0x5d, uint8(d), uint8(x), y, 64)
}

// VMAXPSZ d = max(x, y) (y where either is NaN, as VMAXPS).
func (a *Asm) VMAXPSZ(d, x ZReg, y Operand) {
	a.evex(map0F, ppNone, false, 0x5f, uint8(d), uint8(x), y, 64)
}

// VPANDDZ d = x & y.
func (a *Asm) VPANDDZ(d, x ZReg, y Operand) {
	a.evex(map0F, pp66, false, 0xdb, uint8(d), uint8(x), y, 64)
}

// VPANDNDZ d = ^x & y.
func (a *Asm) VPANDNDZ(d, x ZReg, y Operand) {
	a.evex(map0F, pp66, false, 0xdf, uint8(d), uint8(x), y, 64)
}

// VPORDZ d = x | y.
func (a *Asm) VPORDZ(d, x ZReg, y Operand) {
	a.evex(map0F, pp66, false, 0xeb, uint8(d), uint8(x), y, 64)
}

// VPADDDZ d = x + y (int32 lanes).
func (a *Asm) VPADDDZ(d, x ZReg, y Operand) {
	a.evex(map0F, pp66, false, 0xfe, uint8(d), uint8(x), y, 64)
}

// VPSUBDZ d = x - y (int32 lanes).
func (a *Asm) VPSUBDZ(d, x ZReg, y Operand) {
	a.evex(map0F, pp66, false, 0xfa, uint8(d), uint8(x), y, 64)
}

// VFMADD213PSZ d = x·d + y, rounded once.
func (a *Asm) VFMADD213PSZ(d, x ZReg, y Operand) {
	a.evex(map0F38, pp66, false, 0xa8, uint8(d), uint8(x), y, 64)
}

// VFNMADD213PSZ d = -(x·d) + y, rounded once.
func (a *Asm) VFNMADD213PSZ(d, x ZReg, y Operand) {
	a.evex(map0F38, pp66, false, 0xac, uint8(d), uint8(x), y, 64)
}

// VRCP14PSZ d = 1/s to a relative error below 2^-14 (the reciprocal's
// estimate; ±0 gives ±Inf, ±Inf ±0, NaN a NaN).
func (a *Asm) VRCP14PSZ(d ZReg, s Operand) { a.evex(map0F38, pp66, false, 0x4c, uint8(d), 0, s, 64) }

// VFNMADD231PSZ d = -(x·y) + d, rounded once.
func (a *Asm) VFNMADD231PSZ(d, x ZReg, y Operand) {
	a.evex(map0F38, pp66, false, 0xbc, uint8(d), uint8(x), y, 64)
}

// VSCALEFPSZ d = x·2^⌊y⌋, rounded once (the result's overflow to ±Inf and
// underflow to subnormals and 0 as any product's; NaN in x or y gives NaN).
func (a *Asm) VSCALEFPSZ(d, x ZReg, y Operand) {
	a.evex(map0F38, pp66, false, 0x2c, uint8(d), uint8(x), y, 64)
}

// VSQRTPSZ d = √s.
func (a *Asm) VSQRTPSZ(d ZReg, s Operand) { a.evex(map0F, ppNone, false, 0x51, uint8(d), 0, s, 64) }

// VCVTTPS2DQZ d = int32(s), truncated.
func (a *Asm) VCVTTPS2DQZ(d ZReg, s Operand) {
	a.evex(map0F, ppF3, false, 0x5b, uint8(d), 0, s, 64)
}

// VCVTDQ2PSZ d = float32(s) of int32 lanes.
func (a *Asm) VCVTDQ2PSZ(d ZReg, s Operand) {
	a.evex(map0F, ppNone, false, 0x5b, uint8(d), 0, s, 64)
}

// VRNDSCALEPSZ d = s rounded to an integer as imm says (imm < 16: VROUNDPS's
// rounding control, the same results).
func (a *Asm) VRNDSCALEPSZ(d ZReg, s Operand, imm uint8) {
	a.evexK(map0F3A, pp66, false, 0x08, uint8(d), 0, s, 64, 0, false, imm)
}

// VRANGEPSZ d = the range operation imm selects on x and y (AVX512DQ;
// imm 2: the one of smaller magnitude, with x's sign: x clamped to
// [-|y|, |y|] where y is a bound; a NaN in x gives x quieted).
func (a *Asm) VRANGEPSZ(d, x ZReg, y Operand, imm uint8) {
	a.evexK(map0F3A, pp66, false, 0x50, uint8(d), uint8(x), y, 64, 0, false, imm)
}

// KORW d = x | y (16-bit opmasks).
func (a *Asm) KORW(d, x, y KReg) {
	a.vex(map0F, ppNone, false, true, 0x45, uint8(d), uint8(x), VReg(y))
}

// KXORW d = x ^ y (16-bit opmasks; KXORW k, k, k clears k).
func (a *Asm) KXORW(d, x, y KReg) {
	a.vex(map0F, ppNone, false, true, 0x47, uint8(d), uint8(x), VReg(y))
}

// KORTESTW sets ZF where x | y is zero (16-bit opmasks).
func (a *Asm) KORTESTW(x, y KReg) { a.vex(map0F, ppNone, false, false, 0x98, uint8(x), 0, VReg(y)) }

// VPSRADZ d = s >> n (int32 lanes, arithmetic).
func (a *Asm) VPSRADZ(d, s ZReg, n uint8) {
	a.evexK(map0F, pp66, false, 0x72, 4, uint8(d), s, 64, 0, false, n)
}

// VPSRLDZ d = s >> n (int32 lanes, logical).
func (a *Asm) VPSRLDZ(d, s ZReg, n uint8) {
	a.evexK(map0F, pp66, false, 0x72, 2, uint8(d), s, 64, 0, false, n)
}

// VPSLLDZ d = s << n (int32 lanes).
func (a *Asm) VPSLLDZ(d, s ZReg, n uint8) {
	a.evexK(map0F, pp66, false, 0x72, 6, uint8(d), s, 64, 0, false, n)
}

// VCMPPSZ k = x pred y (VCMPPS's predicates) lane by lane.
func (a *Asm) VCMPPSZ(k KReg, x ZReg, y Operand, pred uint8) {
	a.evexK(map0F, ppNone, false, 0xc2, uint8(k), uint8(x), y, 64, 0, false, pred)
}

// VPCMPGTDZ k = x > y (int32 lanes).
func (a *Asm) VPCMPGTDZ(k KReg, x ZReg, y Operand) {
	a.evex(map0F, pp66, false, 0x66, uint8(k), uint8(x), y, 64)
}

// VPCMPEQDZ k = x == y (int32 lanes).
func (a *Asm) VPCMPEQDZ(k KReg, x ZReg, y Operand) {
	a.evex(map0F, pp66, false, 0x76, uint8(k), uint8(x), y, 64)
}

// VPTESTMDZ k = x & y != 0 (int32 lanes).
func (a *Asm) VPTESTMDZ(k KReg, x ZReg, y Operand) {
	a.evex(map0F38, pp66, false, 0x27, uint8(k), uint8(x), y, 64)
}

// VBLENDMPSZ d = k ? y : x lane by lane (k not 0).
func (a *Asm) VBLENDMPSZ(d ZReg, k KReg, x ZReg, y Operand) {
	if k == 0 {
		a.fail("VBLENDMPS without an opmask")
		return
	}
	a.evexK(map0F38, pp66, false, 0x65, uint8(d), uint8(x), y, 64, k, false)
}

// VPBROADCASTDZ d = s's low int32 in every lane (s an X register, given as
// a ZReg of its number, or a 32-bit memory operand), under opmask k
// (0: none), the lanes it leaves off zeroed where zero.
func (a *Asm) VPBROADCASTDZ(d ZReg, k KReg, zero bool, s Operand) {
	a.evexK(map0F38, pp66, false, 0x58, uint8(d), 0, s, 4, k, zero)
}

// VEXTRACTF64X4Z d = the 256-bit half i of s (d a Y register, given as a
// ZReg of its number).
func (a *Asm) VEXTRACTF64X4Z(d, s ZReg, i uint8) {
	a.evexK(map0F3A, pp66, true, 0x1b, uint8(s), 0, d, 32, 0, false, i)
}

// VCVTPS2PDZ d = float64 of the eight f32 lanes of s (a Y register, given
// as a ZReg of its number, or 32 bytes of memory).
func (a *Asm) VCVTPS2PDZ(d ZReg, s Operand) {
	a.evex(map0F, ppNone, false, 0x5a, uint8(d), 0, s, 32)
}

// VCVTPD2PSZ d = f32 of the eight float64 lanes of s (d a Y register,
// given as a ZReg of its number).
func (a *Asm) VCVTPD2PSZ(d, s ZReg) { a.evex(map0F, pp66, true, 0x5a, uint8(d), 0, s, 64) }

// VSQRTPDZ d = √s (float64 lanes).
func (a *Asm) VSQRTPDZ(d ZReg, s Operand) { a.evex(map0F, pp66, true, 0x51, uint8(d), 0, s, 64) }

// VDIVPDZ d = x / y (float64 lanes).
func (a *Asm) VDIVPDZ(d, x ZReg, y Operand) {
	a.evex(map0F, pp66, true, 0x5e, uint8(d), uint8(x), y, 64)
}

// VBROADCASTSDZ d = the float64 at m in every lane.
func (a *Asm) VBROADCASTSDZ(d ZReg, m Mem) { a.evex(map0F38, pp66, true, 0x19, uint8(d), 0, m, 8) }

// VINSERTF64X4Z d = x with its 256-bit half i replaced by s (a Y register,
// given as a ZReg of its number).
func (a *Asm) VINSERTF64X4Z(d, x, s ZReg, i uint8) {
	a.evexK(map0F3A, pp66, true, 0x1a, uint8(d), uint8(x), s, 32, 0, false, i)
}

// The float64 lanes of native phases with f64 values (codegen/cpu/native:
// f64.go): eight float64 lanes in a zmm register; a memory operand made
// with Mem.Bcst is one float64 broadcast ({1to8}).

// VMOVUPDZ d = [m] (512-bit load) under opmask k (0: none), the lanes it
// leaves off zeroed (their memory is not read: no fault).
func (a *Asm) VMOVUPDZ(d ZReg, k KReg, m Mem) {
	a.evexK(map0F, pp66, true, 0x10, uint8(d), 0, m, 64, k, k != 0)
}

// VMOVUPDstoreZ [m] = s under opmask k (0: none; the lanes it leaves off
// are not written).
func (a *Asm) VMOVUPDstoreZ(m Mem, k KReg, s ZReg) {
	a.evexK(map0F, pp66, true, 0x11, uint8(s), 0, m, 64, k, false)
}

// VADDPDZ d = x + y (float64 lanes).
func (a *Asm) VADDPDZ(d, x ZReg, y Operand) {
	a.evex(map0F, pp66, true, 0x58, uint8(d), uint8(x), y, 64)
}

// VSUBPDZ d = x - y (float64 lanes).
func (a *Asm) VSUBPDZ(d, x ZReg, y Operand) {
	a.evex(map0F, pp66, true, 0x5c, uint8(d), uint8(x), y, 64)
}

// VMULPDZ d = x · y (float64 lanes).
func (a *Asm) VMULPDZ(d, x ZReg, y Operand) {
	a.evex(map0F, pp66, true, 0x59, uint8(d), uint8(x), y, 64)
}

// VMINPDZ d = min(x, y) (y where either is NaN).
func (a *Asm) VMINPDZ(d, x ZReg, y Operand) {
	a.evex(map0F, pp66, true, 0x5d, uint8(d), uint8(x), y, 64)
}

// VMAXPDZ d = max(x, y) (y where either is NaN).
func (a *Asm) VMAXPDZ(d, x ZReg, y Operand) {
	a.evex(map0F, pp66, true, 0x5f, uint8(d), uint8(x), y, 64)
}

// VPADDQZ d = x + y (int64 lanes).
func (a *Asm) VPADDQZ(d, x ZReg, y Operand) {
	a.evex(map0F, pp66, true, 0xd4, uint8(d), uint8(x), y, 64)
}

// VPANDQZ d = x & y (64-bit lanes).
func (a *Asm) VPANDQZ(d, x ZReg, y Operand) {
	a.evex(map0F, pp66, true, 0xdb, uint8(d), uint8(x), y, 64)
}

// VPXORQZ d = x ^ y (64-bit lanes).
func (a *Asm) VPXORQZ(d, x ZReg, y Operand) {
	a.evex(map0F, pp66, true, 0xef, uint8(d), uint8(x), y, 64)
}

// VCMPPDZ k = x pred y (VCMPPD's predicates) lane by lane.
func (a *Asm) VCMPPDZ(k KReg, x ZReg, y Operand, pred uint8) {
	a.evexK(map0F, pp66, true, 0xc2, uint8(k), uint8(x), y, 64, 0, false, pred)
}

// VBLENDMPDZ d = k ? y : x lane by lane (k not 0).
func (a *Asm) VBLENDMPDZ(d ZReg, k KReg, x ZReg, y Operand) {
	if k == 0 {
		a.fail("VBLENDMPD without an opmask")
		return
	}
	a.evexK(map0F38, pp66, true, 0x65, uint8(d), uint8(x), y, 64, k, false)
}

// VRNDSCALEPDZ d = s rounded to an integer as imm says (float64 lanes).
func (a *Asm) VRNDSCALEPDZ(d ZReg, s Operand, imm uint8) {
	a.evexK(map0F3A, pp66, true, 0x09, uint8(d), 0, s, 64, 0, false, imm)
}

// VCVTDQ2PDZ d = float64 of the eight int32 lanes of s (a Y register,
// given as a ZReg of its number, or 32 bytes of memory).
func (a *Asm) VCVTDQ2PDZ(d ZReg, s Operand) {
	a.evex(map0F, ppF3, false, 0xe6, uint8(d), 0, s, 32)
}

// VMOVAPDZ d = s (float64 lanes, register to register; the store form, as
// Go's assembler encodes it).
func (a *Asm) VMOVAPDZ(d, s ZReg) { a.evex(map0F, pp66, true, 0x29, uint8(s), 0, d, 64) }

// VPORQZ d = x | y (64-bit lanes).
func (a *Asm) VPORQZ(d, x ZReg, y Operand) {
	a.evex(map0F, pp66, true, 0xeb, uint8(d), uint8(x), y, 64)
}

// VFMADD213PDZ d = x·d + y, rounded once (float64 lanes).
func (a *Asm) VFMADD213PDZ(d, x ZReg, y Operand) {
	a.evex(map0F38, pp66, true, 0xa8, uint8(d), uint8(x), y, 64)
}

// VFNMADD231PDZ d = -(x·y) + d, rounded once (float64 lanes).
func (a *Asm) VFNMADD231PDZ(d, x ZReg, y Operand) {
	a.evex(map0F38, pp66, true, 0xbc, uint8(d), uint8(x), y, 64)
}

// VCVTPD2DQZ d = int32 of the eight float64 lanes of s, rounded as MXCSR
// says (to nearest; 0x80000000 where out of range or NaN); d a Y register,
// given as a ZReg of its number.
func (a *Asm) VCVTPD2DQZ(d, s ZReg) { a.evex(map0F, ppF2, true, 0xe6, uint8(d), 0, s, 64) }

// VPSLLQZ d = s << n (64-bit lanes).
func (a *Asm) VPSLLQZ(d, s ZReg, n uint8) {
	a.evexK(map0F, pp66, true, 0x73, 6, uint8(d), s, 64, 0, false, n)
}

// VCMPPDKZ k = x pred y lane by lane where opmask m is set, 0 elsewhere
// (m not 0).
func (a *Asm) VCMPPDKZ(k, m KReg, x ZReg, y Operand, pred uint8) {
	if m == 0 {
		a.fail("VCMPPD under K0")
		return
	}
	a.evexK(map0F, pp66, true, 0xc2, uint8(k), uint8(x), y, 64, m, false, pred)
}

// VFMADD231PDZ d = x·y + d, rounded once (float64 lanes).
func (a *Asm) VFMADD231PDZ(d, x ZReg, y Operand) {
	a.evex(map0F38, pp66, true, 0xb8, uint8(d), uint8(x), y, 64)
}

// VPSRLQZ d = s >> n (64-bit lanes, logical).
func (a *Asm) VPSRLQZ(d, s ZReg, n uint8) {
	a.evexK(map0F, pp66, true, 0x73, 2, uint8(d), s, 64, 0, false, n)
}
