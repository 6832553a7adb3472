package amd64

import "fmt"

// EVEX-encoded AVX-512 instructions (AVX512F): the 512-bit forms over
// Z0–Z31 that the native code generator's zmm product micro-kernel emits.
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

// Bcst is m read as one 32-bit element broadcast to every lane ({1to16}),
// for the EVEX instructions that take it.
func (m Mem) Bcst() Mem { m.bcst = true; return m }

// evex emits an EVEX-encoded 512-bit instruction: ModRM reg field reg
// (0–31), second source vvvv (0–31), r/m operand rm (a ZReg, Reg or Mem),
// its memory operand's size n for disp8 compression (a broadcast's is 4).
// No masking: aaa = 0, z = 0.
func (a *Asm) evex(mm, pp uint8, w bool, op byte, reg, vvvv uint8, rm Operand, n int32) {
	a.ripAt, a.ripL = -1, 0
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
	a.byte1(0x62, p0, p1, p2, op)
	a.modrmN(reg, rm, n)
	a.endInstr()
}

// VMOVUPSZ d, [m] (512-bit load).
func (a *Asm) VMOVUPSZ(d ZReg, m Mem) { a.evex(map0F, ppNone, false, 0x10, uint8(d), 0, m, 64) }

// VMOVUPSstoreZ [m], s (512-bit store).
func (a *Asm) VMOVUPSstoreZ(m Mem, s ZReg) {
	a.evex(map0F, ppNone, false, 0x11, uint8(s), 0, m, 64)
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
