package amd64

// General-purpose instructions. A Q suffix is 64-bit, L 32-bit (which
// zeroes the upper half of a destination register), as in Go's assembler.

// Cond is a condition code of Jcc and CMOVcc.
type Cond uint8

// The conditions (after CMP a, b: L/G/LE/GE signed, B/A/BE/AE unsigned).
const (
	CondO  Cond = 0x0
	CondNO Cond = 0x1
	CondB  Cond = 0x2
	CondAE Cond = 0x3
	CondE  Cond = 0x4
	CondNE Cond = 0x5
	CondBE Cond = 0x6
	CondA  Cond = 0x7
	CondS  Cond = 0x8
	CondNS Cond = 0x9
	CondL  Cond = 0xc
	CondGE Cond = 0xd
	CondLE Cond = 0xe
	CondG  Cond = 0xf
)

// MOVQ dst, src: 64-bit register copy.
func (a *Asm) MOVQ(dst, src Reg) { a.legacy(0, true, []byte{0x89}, uint8(src), dst, nil) }

// MOVL dst, src: 32-bit register copy (zero-extends).
func (a *Asm) MOVL(dst, src Reg) { a.legacy(0, false, []byte{0x89}, uint8(src), dst, nil) }

// MOVQload dst, [m].
func (a *Asm) MOVQload(dst Reg, m Mem) { a.legacy(0, true, []byte{0x8b}, uint8(dst), m, nil) }

// MOVQstore [m], src.
func (a *Asm) MOVQstore(m Mem, src Reg) { a.legacy(0, true, []byte{0x89}, uint8(src), m, nil) }

// MOVLload dst, [m]: 32 bits, zero-extended.
func (a *Asm) MOVLload(dst Reg, m Mem) { a.legacy(0, false, []byte{0x8b}, uint8(dst), m, nil) }

// MOVLstore [m], src: the low 32 bits of src.
func (a *Asm) MOVLstore(m Mem, src Reg) { a.legacy(0, false, []byte{0x89}, uint8(src), m, nil) }

// MOVSXDload dst, [m]: 32 bits, sign-extended to 64.
func (a *Asm) MOVSXDload(dst Reg, m Mem) { a.legacy(0, true, []byte{0x63}, uint8(dst), m, nil) }

// MOVSXD dst, src: the low 32 bits of src sign-extended to 64.
func (a *Asm) MOVSXD(dst, src Reg) { a.legacy(0, true, []byte{0x63}, uint8(dst), src, nil) }

// MOVQimm dst, v: the shortest of the sign-extended 32-bit, zero-extended
// 32-bit and full 64-bit forms.
func (a *Asm) MOVQimm(dst Reg, v int64) {
	switch {
	case v >= 0 && v <= 0xffffffff && v > 0x7fffffff:
		a.MOVLimm(dst, uint32(v))
	case v >= -0x80000000 && v <= 0x7fffffff:
		a.legacy(0, true, []byte{0xc7}, 0, dst, le32(int32(v)))
	default:
		a.ripAt, a.ripL = -1, 0
		rex := byte(0x48)
		if dst >= 8 {
			rex |= 1
		}
		a.byte1(rex, 0xb8+byte(dst&7))
		a.imm64(v)
	}
}

// MOVLimm dst, v: 32 bits, zero-extended.
func (a *Asm) MOVLimm(dst Reg, v uint32) {
	a.ripAt, a.ripL = -1, 0
	if dst >= 8 {
		a.byte1(0x41)
	}
	a.byte1(0xb8 + byte(dst&7))
	a.imm32(int32(v))
}

// MOVQstoreImm [m], v (sign-extended from 32 bits).
func (a *Asm) MOVQstoreImm(m Mem, v int32) { a.legacy(0, true, []byte{0xc7}, 0, m, le32(v)) }

// MOVLstoreImm [m], v.
func (a *Asm) MOVLstoreImm(m Mem, v int32) { a.legacy(0, false, []byte{0xc7}, 0, m, le32(v)) }

// LEAQ dst, m.
func (a *Asm) LEAQ(dst Reg, m Mem) { a.legacy(0, true, []byte{0x8d}, uint8(dst), m, nil) }

func le32(v int32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }

// alu is one of the eight classic binary operations.
type alu uint8

const (
	aluADD alu = 0
	aluOR  alu = 1
	aluAND alu = 4
	aluSUB alu = 5
	aluXOR alu = 6
	aluCMP alu = 7
)

func (a *Asm) aluRR(op alu, w bool, dst, src Reg) {
	a.legacy(0, w, []byte{byte(op)<<3 | 1}, uint8(src), dst, nil)
}

func (a *Asm) aluRM(op alu, w bool, dst Reg, m Mem) {
	a.legacy(0, w, []byte{byte(op)<<3 | 3}, uint8(dst), m, nil)
}

func (a *Asm) aluRI(op alu, w bool, dst Operand, v int32) {
	if v >= -128 && v <= 127 {
		a.legacy(0, w, []byte{0x83}, uint8(op), dst, []byte{byte(int8(v))})
		return
	}
	if r, ok := dst.(Reg); ok && r == RAX {
		a.ripAt, a.ripL = -1, 0
		if w {
			a.byte1(0x48)
		}
		a.byte1(byte(op)<<3 | 5)
		a.imm32(v)
		return
	}
	a.legacy(0, w, []byte{0x81}, uint8(op), dst, le32(v))
}

// ADDQ dst, src.
func (a *Asm) ADDQ(dst, src Reg) { a.aluRR(aluADD, true, dst, src) }

// SUBQ dst, src.
func (a *Asm) SUBQ(dst, src Reg) { a.aluRR(aluSUB, true, dst, src) }

// ANDQ dst, src.
func (a *Asm) ANDQ(dst, src Reg) { a.aluRR(aluAND, true, dst, src) }

// ORQ dst, src.
func (a *Asm) ORQ(dst, src Reg) { a.aluRR(aluOR, true, dst, src) }

// XORQ dst, src.
func (a *Asm) XORQ(dst, src Reg) { a.aluRR(aluXOR, true, dst, src) }

// CMPQ a, b: flags of a - b.
func (a *Asm) CMPQ(x, y Reg) { a.aluRR(aluCMP, true, x, y) }

// ADDL dst, src (32 bits).
func (a *Asm) ADDL(dst, src Reg) { a.aluRR(aluADD, false, dst, src) }

// SUBL dst, src (32 bits).
func (a *Asm) SUBL(dst, src Reg) { a.aluRR(aluSUB, false, dst, src) }

// ANDL dst, src (32 bits).
func (a *Asm) ANDL(dst, src Reg) { a.aluRR(aluAND, false, dst, src) }

// ORL dst, src (32 bits).
func (a *Asm) ORL(dst, src Reg) { a.aluRR(aluOR, false, dst, src) }

// XORL dst, src (32 bits).
func (a *Asm) XORL(dst, src Reg) { a.aluRR(aluXOR, false, dst, src) }

// CMPL a, b (32 bits).
func (a *Asm) CMPL(x, y Reg) { a.aluRR(aluCMP, false, x, y) }

// ADDQload dst, [m].
func (a *Asm) ADDQload(dst Reg, m Mem) { a.aluRM(aluADD, true, dst, m) }

// SUBQload dst, [m].
func (a *Asm) SUBQload(dst Reg, m Mem) { a.aluRM(aluSUB, true, dst, m) }

// CMPQload x, [m]: flags of x - [m].
func (a *Asm) CMPQload(x Reg, m Mem) { a.aluRM(aluCMP, true, x, m) }

// ADDQimm dst, v.
func (a *Asm) ADDQimm(dst Reg, v int32) { a.aluRI(aluADD, true, dst, v) }

// SUBQimm dst, v.
func (a *Asm) SUBQimm(dst Reg, v int32) { a.aluRI(aluSUB, true, dst, v) }

// ANDQimm dst, v.
func (a *Asm) ANDQimm(dst Reg, v int32) { a.aluRI(aluAND, true, dst, v) }

// CMPQimm x, v.
func (a *Asm) CMPQimm(x Reg, v int32) { a.aluRI(aluCMP, true, x, v) }

// ADDLimm dst, v (32 bits).
func (a *Asm) ADDLimm(dst Reg, v int32) { a.aluRI(aluADD, false, dst, v) }

// CMPLimm x, v (32 bits).
func (a *Asm) CMPLimm(x Reg, v int32) { a.aluRI(aluCMP, false, x, v) }

// ADDQstoreImm [m] += v.
func (a *Asm) ADDQstoreImm(m Mem, v int32) { a.aluRI(aluADD, true, m, v) }

// IMULQ dst, src: dst·src, the low 64 bits.
func (a *Asm) IMULQ(dst, src Reg) { a.legacy(0, true, []byte{0x0f, 0xaf}, uint8(dst), src, nil) }

// IMULQload dst, [m]: dst·[m], the low 64 bits.
func (a *Asm) IMULQload(dst Reg, m Mem) { a.legacy(0, true, []byte{0x0f, 0xaf}, uint8(dst), m, nil) }

// IMULL dst, src: the low 32 bits (zero-extended).
func (a *Asm) IMULL(dst, src Reg) { a.legacy(0, false, []byte{0x0f, 0xaf}, uint8(dst), src, nil) }

// IMULQimm dst, src, v: src·v.
func (a *Asm) IMULQimm(dst, src Reg, v int32) { a.imulImm(true, dst, src, v) }

// IMULLimm dst, src, v (32 bits).
func (a *Asm) IMULLimm(dst, src Reg, v int32) { a.imulImm(false, dst, src, v) }

func (a *Asm) imulImm(w bool, dst, src Reg, v int32) {
	if v >= -128 && v <= 127 {
		a.legacy(0, w, []byte{0x6b}, uint8(dst), src, []byte{byte(int8(v))})
		return
	}
	a.legacy(0, w, []byte{0x69}, uint8(dst), src, le32(v))
}

// NEGQ dst.
func (a *Asm) NEGQ(dst Reg) { a.legacy(0, true, []byte{0xf7}, 3, dst, nil) }

// NEGL dst (32 bits).
func (a *Asm) NEGL(dst Reg) { a.legacy(0, false, []byte{0xf7}, 3, dst, nil) }

// NOTL dst (32 bits).
func (a *Asm) NOTL(dst Reg) { a.legacy(0, false, []byte{0xf7}, 2, dst, nil) }

// NOTQ dst.
func (a *Asm) NOTQ(dst Reg) { a.legacy(0, true, []byte{0xf7}, 2, dst, nil) }

// CQO: RDX:RAX = RAX sign-extended.
func (a *Asm) CQO() { a.byte1(0x48, 0x99) }

// CDQ: EDX:EAX = EAX sign-extended.
func (a *Asm) CDQ() { a.byte1(0x99) }

// IDIVQ src: RAX = RDX:RAX / src, RDX the remainder (signed).
func (a *Asm) IDIVQ(src Reg) { a.legacy(0, true, []byte{0xf7}, 7, src, nil) }

// IDIVL src: 32-bit signed division of EDX:EAX.
func (a *Asm) IDIVL(src Reg) { a.legacy(0, false, []byte{0xf7}, 7, src, nil) }

type shift uint8

const (
	shiftSHL shift = 4
	shiftSHR shift = 5
	shiftSAR shift = 7
)

func (a *Asm) shiftImm(op shift, w bool, dst Reg, n uint8) {
	if n == 1 {
		a.legacy(0, w, []byte{0xd1}, uint8(op), dst, nil)
		return
	}
	a.legacy(0, w, []byte{0xc1}, uint8(op), dst, []byte{n})
}

// SHLQ dst, n.
func (a *Asm) SHLQ(dst Reg, n uint8) { a.shiftImm(shiftSHL, true, dst, n) }

// SHRQ dst, n (logical).
func (a *Asm) SHRQ(dst Reg, n uint8) { a.shiftImm(shiftSHR, true, dst, n) }

// SARQ dst, n (arithmetic).
func (a *Asm) SARQ(dst Reg, n uint8) { a.shiftImm(shiftSAR, true, dst, n) }

// SHLL dst, n (32 bits).
func (a *Asm) SHLL(dst Reg, n uint8) { a.shiftImm(shiftSHL, false, dst, n) }

// SARL dst, n (32 bits, arithmetic).
func (a *Asm) SARL(dst Reg, n uint8) { a.shiftImm(shiftSAR, false, dst, n) }

// TESTQ x, y: flags of x & y.
func (a *Asm) TESTQ(x, y Reg) { a.legacy(0, true, []byte{0x85}, uint8(y), x, nil) }

// TESTL x, y (32 bits).
func (a *Asm) TESTL(x, y Reg) { a.legacy(0, false, []byte{0x85}, uint8(y), x, nil) }

// CMOVQ dst = src if c.
func (a *Asm) CMOVQ(c Cond, dst, src Reg) {
	a.legacy(0, true, []byte{0x0f, 0x40 + byte(c)}, uint8(dst), src, nil)
}

// CMOVL dst = src if c (32 bits, zero-extends either way).
func (a *Asm) CMOVL(c Cond, dst, src Reg) {
	a.legacy(0, false, []byte{0x0f, 0x40 + byte(c)}, uint8(dst), src, nil)
}

// BSFL dst, src: the index of src's lowest set bit (src ≠ 0).
func (a *Asm) BSFL(dst, src Reg) { a.legacy(0, false, []byte{0x0f, 0xbc}, uint8(dst), src, nil) }

// BSRL dst, src: the index of src's highest set bit (src ≠ 0).
func (a *Asm) BSRL(dst, src Reg) { a.legacy(0, false, []byte{0x0f, 0xbd}, uint8(dst), src, nil) }

// Jcc jumps to l if c.
func (a *Asm) Jcc(c Cond, l Label) {
	a.byte1(0x0f, 0x80+byte(c))
	a.rel32(l)
}

// JMP jumps to l.
func (a *Asm) JMP(l Label) {
	a.byte1(0xe9)
	a.rel32(l)
}

func (a *Asm) rel32(l Label) {
	if l < 1 || int(l) > len(a.labels) {
		a.fail("jump to unknown label %d", l)
		return
	}
	at := len(a.buf)
	a.imm32(0)
	a.fixups = append(a.fixups, fixup{at: at, end: len(a.buf), label: l})
}

// RET returns.
func (a *Asm) RET() { a.byte1(0xc3) }

// LOCKCMPXCHGL is LOCK CMPXCHG m32, r32: where m holds EAX, m = src and
// ZF set; else EAX = m and ZF clear, atomically.
func (a *Asm) LOCKCMPXCHGL(m Mem, src Reg) {
	a.legacy(0xf0, false, []byte{0x0f, 0xb1}, uint8(src), m, nil)
}

// LOCKCMPXCHGQ is LOCK CMPXCHG m64, r64 (RAX), as LOCKCMPXCHGL.
func (a *Asm) LOCKCMPXCHGQ(m Mem, src Reg) {
	a.legacy(0xf0, true, []byte{0x0f, 0xb1}, uint8(src), m, nil)
}

// VZEROUPPER clears the upper halves of the vector registers (before
// returning to code that uses SSE).
func (a *Asm) VZEROUPPER() { a.byte1(0xc5, 0xf8, 0x77) }

// SFENCE orders the stores before it (non-temporal ones included) before
// those after it.
func (a *Asm) SFENCE() { a.byte1(0x0f, 0xae, 0xf8) }

// PREFETCHT0 [m]: a hint to bring m's cache line into every level.
func (a *Asm) PREFETCHT0(m Mem) { a.legacy(0, false, []byte{0x0f, 0x18}, 1, m, nil) }

// PREFETCHW m: a hint to bring m's line into the caches in a state that
// lets a store write it (AMD 3DNow! prefetch, Intel since Broadwell; a
// no-op on older Intel cores).
func (a *Asm) PREFETCHW(m Mem) { a.legacy(0, false, []byte{0x0f, 0x0d}, 1, m, nil) }

// PREFETCHT1 m: a hint to bring m's line into the caches from L2 outward.
func (a *Asm) PREFETCHT1(m Mem) { a.legacy(0, false, []byte{0x0f, 0x18}, 2, m, nil) }
