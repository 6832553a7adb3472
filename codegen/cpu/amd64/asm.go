package amd64

import (
	"encoding/binary"
	"fmt"
)

// Reg is a general-purpose register.
type Reg uint8

// The general-purpose registers, numbered as the encoding numbers them.
const (
	RAX Reg = iota
	RCX
	RDX
	RBX
	RSP
	RBP
	RSI
	RDI
	R8
	R9
	R10
	R11
	R12
	R13
	R14
	R15
)

var regNames = [16]string{"AX", "CX", "DX", "BX", "SP", "BP", "SI", "DI", "R8", "R9", "R10", "R11", "R12", "R13", "R14", "R15"}

// String is the register's name in Go's assembler.
func (r Reg) String() string {
	if r < 16 {
		return regNames[r]
	}
	return fmt.Sprintf("reg(%d)", uint8(r))
}

// VReg is a vector register: X0–X15 in 128-bit instructions, Y0–Y15 in
// 256-bit ones (the same register).
type VReg uint8

// String is the register's 256-bit name in Go's assembler.
func (v VReg) String() string { return fmt.Sprintf("Y%d", uint8(v)) }

// Operand is the r/m operand of an instruction: a Reg, a VReg or a Mem.
type Operand interface{ isOperand() }

func (Reg) isOperand()  {}
func (VReg) isOperand() {}
func (Mem) isOperand()  {}

// Mem is a memory operand: [Base + Index·Scale + Disp], or (Label set) a
// RIP-relative reference to a label (a constant of the pool) plus Disp.
type Mem struct {
	Base  Reg
	Index Reg
	Scale uint8 // 0: no index; else 1, 2, 4 or 8
	Disp  int32
	label Label // ≥ 1: RIP-relative to this label
	bcst  bool  // an EVEX broadcast of one element (Bcst)
}

// Ptr is [base + disp].
func Ptr(base Reg, disp int32) Mem { return Mem{Base: base, Disp: disp} }

// PtrIdx is [base + index·scale + disp].
func PtrIdx(base, index Reg, scale uint8, disp int32) Mem {
	return Mem{Base: base, Index: index, Scale: scale, Disp: disp}
}

// At is the memory at label l (RIP-relative).
func At(l Label) Mem { return Mem{label: l} }

// Offset is m moved by d bytes.
func (m Mem) Offset(d int32) Mem { m.Disp += d; return m }

// Label is a position in the code, bound once (Bind) and referred to by
// jumps and RIP-relative operands before or after.
type Label int

type fixup struct {
	at    int   // where the 32-bit displacement goes
	end   int   // the end of its instruction: the displacement is relative to it
	label Label // its target
}

// Asm is an instruction buffer. The zero value is ready to use.
type Asm struct {
	buf    []byte
	labels []int // by label-1: bound offset, or -1
	fixups []fixup
	pool   []poolEntry
	err    error

	ripAt int // the displacement of the instruction being emitted, or -1
	ripL  Label
}

type poolEntry struct {
	l     Label
	data  []byte
	align int
}

func (a *Asm) fail(format string, args ...any) {
	if a.err == nil {
		a.err = fmt.Errorf("amd64: "+format, args...)
	}
}

// Err is the first misuse recorded, or nil.
func (a *Asm) Err() error { return a.err }

// Fail records an error of the code being assembled (the first is kept):
// for emitters above the encoder that find an operand they cannot take.
func (a *Asm) Fail(format string, args ...any) { a.fail(format, args...) }

// Len is the number of code bytes emitted so far.
func (a *Asm) Len() int { return len(a.buf) }

// NewLabel makes an unbound label.
func (a *Asm) NewLabel() Label {
	a.labels = append(a.labels, -1)
	return Label(len(a.labels))
}

// Bind binds l to the current position.
func (a *Asm) Bind(l Label) {
	if l < 1 || int(l) > len(a.labels) {
		a.fail("bind of unknown label %d", l)
		return
	}
	if a.labels[l-1] >= 0 {
		a.fail("label %d bound twice", l)
		return
	}
	a.labels[l-1] = len(a.buf)
}

// Data adds data to the constant pool (placed after the code, at an
// offset aligned to align bytes) and returns its label.
func (a *Asm) Data(data []byte, align int) Label {
	l := a.NewLabel()
	a.pool = append(a.pool, poolEntry{l, append([]byte(nil), data...), align})
	return l
}

// Finish lays out the constant pool, resolves every label reference and
// returns the code, or the first error.
func (a *Asm) Finish() ([]byte, error) {
	if a.err != nil {
		return nil, a.err
	}
	for _, p := range a.pool {
		for len(a.buf)%p.align != 0 {
			a.buf = append(a.buf, 0xcc) // int3: never executed
		}
		a.labels[p.l-1] = len(a.buf)
		a.buf = append(a.buf, p.data...)
	}
	a.pool = nil
	for _, f := range a.fixups {
		to := a.labels[f.label-1]
		if to < 0 {
			return nil, fmt.Errorf("amd64: label %d used but never bound", f.label)
		}
		rel := int64(to) - int64(f.end)
		binary.LittleEndian.PutUint32(a.buf[f.at:], uint32(int32(rel)+int32(binary.LittleEndian.Uint32(a.buf[f.at:]))))
	}
	a.fixups = nil
	return a.buf, nil
}

func (a *Asm) byte1(b ...byte) { a.buf = append(a.buf, b...) }

func (a *Asm) imm32(v int32) { a.buf = binary.LittleEndian.AppendUint32(a.buf, uint32(v)) }

func (a *Asm) imm64(v int64) { a.buf = binary.LittleEndian.AppendUint64(a.buf, uint64(v)) }

// rmBits is what the REX or VEX prefix needs of an r/m operand: its X and
// B extension bits.
func (a *Asm) rmBits(rm Operand) (x, b bool) {
	switch o := rm.(type) {
	case Reg:
		return false, o >= 8
	case VReg:
		return false, o >= 8
	case Mem:
		if o.label != 0 {
			return false, false
		}
		return o.Scale != 0 && o.Index >= 8, o.Base >= 8
	}
	a.fail("operand %v", rm)
	return false, false
}

// modrm emits the ModRM byte (reg field reg) and what follows it for rm:
// SIB and displacement. A RIP-relative displacement is recorded for
// endInstr.
func (a *Asm) modrm(reg uint8, rm Operand) {
	if m, ok := rm.(Mem); ok && m.bcst {
		a.fail("a broadcast operand in a non-EVEX instruction")
		return
	}
	a.modrmN(reg, rm, 1)
}

// modrmN is modrm with an 8-bit displacement scaled by n (EVEX's disp8·N
// compression; 1 for legacy and VEX instructions): a displacement that is
// a multiple of n within ±128·n takes one byte.
func (a *Asm) modrmN(reg uint8, rm Operand, n int32) {
	reg &= 7
	switch o := rm.(type) {
	case Reg:
		a.byte1(0xc0 | reg<<3 | uint8(o)&7)
		return
	case VReg:
		a.byte1(0xc0 | reg<<3 | uint8(o)&7)
		return
	case ZReg:
		a.byte1(0xc0 | reg<<3 | uint8(o)&7)
		return
	case Mem:
		if o.label != 0 {
			a.byte1(reg<<3 | 5)
			a.ripAt, a.ripL = len(a.buf), o.label
			a.imm32(o.Disp)
			return
		}
		if o.Scale != 0 && o.Index == RSP {
			a.fail("RSP cannot be an index")
			return
		}
		var ss uint8
		switch o.Scale {
		case 0, 1:
		case 2:
			ss = 1
		case 4:
			ss = 2
		case 8:
			ss = 3
		default:
			a.fail("scale %d", o.Scale)
			return
		}
		base := uint8(o.Base) & 7
		var mod uint8
		switch {
		case o.Disp == 0 && base != 5: // [rbp] and [r13] need a displacement
			mod = 0
		case o.Disp%n == 0 && o.Disp/n >= -128 && o.Disp/n <= 127:
			mod = 1
		default:
			mod = 2
		}
		if o.Scale == 0 && base != 4 { // no SIB
			a.byte1(mod<<6 | reg<<3 | base)
		} else {
			index := uint8(4) // none
			if o.Scale != 0 {
				index = uint8(o.Index) & 7
			}
			a.byte1(mod<<6|reg<<3|4, ss<<6|index<<3|base)
		}
		switch mod {
		case 1:
			a.byte1(byte(int8(o.Disp / n)))
		case 2:
			a.imm32(o.Disp)
		}
		return
	}
	a.fail("operand %v", rm)
}

// endInstr closes an instruction: a RIP-relative displacement in it is
// relative to here.
func (a *Asm) endInstr() {
	if a.ripAt >= 0 && a.ripL != 0 {
		a.fixups = append(a.fixups, fixup{at: a.ripAt, end: len(a.buf), label: a.ripL})
	}
	a.ripAt, a.ripL = -1, 0
}

// legacy emits a non-VEX instruction: prefix (0 for none), REX (W, and
// the extension bits of reg and rm), opcode bytes, ModRM for reg and rm,
// then imm bytes.
func (a *Asm) legacy(prefix byte, w bool, opcode []byte, reg uint8, rm Operand, imm []byte) {
	a.ripAt, a.ripL = -1, 0
	if prefix != 0 {
		a.byte1(prefix)
	}
	x, b := a.rmBits(rm)
	rex := byte(0x40)
	if w {
		rex |= 8
	}
	if reg >= 8 {
		rex |= 4
	}
	if x {
		rex |= 2
	}
	if b {
		rex |= 1
	}
	if rex != 0x40 {
		a.byte1(rex)
	}
	a.byte1(opcode...)
	a.modrm(reg, rm)
	a.byte1(imm...)
	a.endInstr()
}

// VEX opcode maps and implied prefixes.
const (
	map0F   = 1
	map0F38 = 2
	map0F3A = 3

	ppNone = 0
	pp66   = 1
	ppF3   = 2
	ppF2   = 3
)

// vex emits a VEX-encoded instruction: ModRM reg field reg, second source
// vvvv, r/m operand rm, 256-bit when l, then imm bytes. The two-byte form
// is used where it can be, as Go's assembler does.
func (a *Asm) vex(mmmmm, pp uint8, w, l bool, op byte, reg, vvvv uint8, rm Operand, imm ...byte) {
	a.ripAt, a.ripL = -1, 0
	x, b := a.rmBits(rm)
	var lbit uint8
	if l {
		lbit = 1
	}
	r := reg >= 8
	if !x && !b && !w && mmmmm == map0F {
		var byte1 uint8
		if !r {
			byte1 |= 0x80
		}
		byte1 |= (^vvvv & 15) << 3
		byte1 |= lbit<<2 | pp
		a.byte1(0xc5, byte1)
	} else {
		var b1, b2 uint8
		if !r {
			b1 |= 0x80
		}
		if !x {
			b1 |= 0x40
		}
		if !b {
			b1 |= 0x20
		}
		b1 |= mmmmm
		if w {
			b2 |= 0x80
		}
		b2 |= (^vvvv&15)<<3 | lbit<<2 | pp
		a.byte1(0xc4, b1, b2)
	}
	a.byte1(op)
	a.modrm(reg, rm)
	a.byte1(imm...)
	a.endInstr()
}
