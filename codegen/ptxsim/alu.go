package ptxsim

import (
	"math/bits"
)

// Integer, bit and predicate arithmetic (PTX ISA §9.7.1 integer, §9.7.7
// logic and shift, §9.7.2 extended-precision is not simulated). Values are
// kept in the low bits of a 64-bit register slot, zero-extended.

func init() {
	register(decodeAddSub, "add", "sub")
	register(decodeMul, "mul")
	register(decodeMad, "mad")
	register(decodeDivRem, "div", "rem")
	register(decodeMinMax, "min", "max")
	register(decodeAbsNeg, "abs", "neg")
	register(decodeLogic, "and", "or", "xor")
	register(decodeNot, "not", "cnot")
	register(decodeShift, "shl", "shr")
	register(decodeBitCount, "popc", "clz", "brev", "bfind")
	register(decodeBfe, "bfe")
	register(decodeBfi, "bfi")
	register(decodePrmt, "prmt")
}

// op1 sets d = f(a) on each lane.
func op1(d *decoder, ta ptxType, f func(a uint64) uint64) error {
	if err := d.nargs(2); err != nil {
		return err
	}
	dst, err := d.dst(0)
	if err != nil {
		return err
	}
	a, err := d.src(1, ta)
	if err != nil {
		return err
	}
	if dst.kind == oReg && a.kind == oReg {
		di, ai := dst.idx, a.idx
		d.in.run = func(w *warp, m uint32) error {
			r := w.r
			for ; m != 0; m &= m - 1 {
				l := bits.TrailingZeros32(m)
				r[di+l] = f(r[ai+l])
			}
			return nil
		}
		return nil
	}
	d.in.run = func(w *warp, m uint32) error {
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			w.set(&dst, l, f(w.val(&a, l)))
		}
		return nil
	}
	return nil
}

// op2 sets d = f(a, b) on each lane; tb is b's type (shift amounts are u32).
func op2(d *decoder, ta, tb ptxType, f func(a, b uint64) uint64) error {
	if err := d.nargs(3); err != nil {
		return err
	}
	dst, err := d.dst(0)
	if err != nil {
		return err
	}
	a, err := d.src(1, ta)
	if err != nil {
		return err
	}
	b, err := d.src(2, tb)
	if err != nil {
		return err
	}
	if dst.kind == oReg && a.kind == oReg && (b.kind == oReg || b.kind == oImm) {
		// the common forms, without the operand switch per lane
		di, ai := dst.idx, a.idx
		if b.kind == oImm {
			bv := b.imm
			d.in.run = func(w *warp, m uint32) error {
				r := w.r
				for ; m != 0; m &= m - 1 {
					l := bits.TrailingZeros32(m)
					r[di+l] = f(r[ai+l], bv)
				}
				return nil
			}
			return nil
		}
		bi := b.idx
		d.in.run = func(w *warp, m uint32) error {
			r := w.r
			for ; m != 0; m &= m - 1 {
				l := bits.TrailingZeros32(m)
				r[di+l] = f(r[ai+l], r[bi+l])
			}
			return nil
		}
		return nil
	}
	d.in.run = func(w *warp, m uint32) error {
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			w.set(&dst, l, f(w.val(&a, l), w.val(&b, l)))
		}
		return nil
	}
	return nil
}

// op3 sets d = f(a, b, c) on each lane.
func op3(d *decoder, ta, tb, tc ptxType, f func(a, b, c uint64) uint64) error {
	if err := d.nargs(4); err != nil {
		return err
	}
	dst, err := d.dst(0)
	if err != nil {
		return err
	}
	a, err := d.src(1, ta)
	if err != nil {
		return err
	}
	b, err := d.src(2, tb)
	if err != nil {
		return err
	}
	c, err := d.src(3, tc)
	if err != nil {
		return err
	}
	if dst.kind == oReg && a.kind == oReg && b.kind == oReg && c.kind == oReg {
		di, ai, bi, ci := dst.idx, a.idx, b.idx, c.idx
		d.in.run = func(w *warp, m uint32) error {
			r := w.r
			for ; m != 0; m &= m - 1 {
				l := bits.TrailingZeros32(m)
				r[di+l] = f(r[ai+l], r[bi+l], r[ci+l])
			}
			return nil
		}
		return nil
	}
	d.in.run = func(w *warp, m uint32) error {
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			w.set(&dst, l, f(w.val(&a, l), w.val(&b, l), w.val(&c, l)))
		}
		return nil
	}
	return nil
}

func (d *decoder) intType() (ptxType, error) {
	t, err := d.typ()
	if err != nil {
		return 0, err
	}
	if !t.isInt() && t != tyPred {
		return 0, d.errorf("type .%v: an integer type is expected", t)
	}
	if t == tyB128 {
		return 0, d.errorf(".b128 arithmetic is not simulated")
	}
	return t, nil
}

func decodeAddSub(d *decoder) error {
	t, err := d.typ()
	if err != nil {
		return err
	}
	if t.isFloat() {
		return decodeFloatArith(d, t)
	}
	if d.has("cc") || d.base == "addc" {
		return d.errorf("carry arithmetic (.cc) is not simulated")
	}
	t, err = d.intType()
	if err != nil {
		return err
	}
	mask := t.mask()
	sub := d.base == "sub"
	if d.has("sat") {
		if t != tyS32 {
			return d.errorf(".sat applies to .s32 only")
		}
		return op2(d, t, t, func(a, b uint64) uint64 {
			x, y := int64(int32(a)), int64(int32(b))
			r := x + y
			if sub {
				r = x - y
			}
			if r > 1<<31-1 {
				r = 1<<31 - 1
			}
			if r < -1<<31 {
				r = -1 << 31
			}
			return uint64(uint32(r))
		})
	}
	if sub {
		return op2(d, t, t, func(a, b uint64) uint64 { return (a - b) & mask })
	}
	return op2(d, t, t, func(a, b uint64) uint64 { return (a + b) & mask })
}

// mulInt is mul.lo/hi/wide (PTX ISA §9.7.1.3) on t.
func mulInt(t ptxType, mode string) func(a, b uint64) uint64 {
	n := t.bits()
	mask := t.mask()
	switch mode {
	case "wide":
		wmask := uint64(1)<<(2*n) - 1
		if 2*n >= 64 {
			wmask = ^uint64(0)
		}
		if t.signed() {
			return func(a, b uint64) uint64 { return uint64(t.sext(a)*t.sext(b)) & wmask }
		}
		return func(a, b uint64) uint64 { return (a & mask) * (b & mask) & wmask }
	case "hi":
		if n == 64 {
			if t.signed() {
				return func(a, b uint64) uint64 {
					hi, _ := bits.Mul64(a, b)
					// signed correction of the unsigned high word
					if int64(a) < 0 {
						hi -= b
					}
					if int64(b) < 0 {
						hi -= a
					}
					return hi
				}
			}
			return func(a, b uint64) uint64 { hi, _ := bits.Mul64(a, b); return hi }
		}
		if t.signed() {
			return func(a, b uint64) uint64 { return uint64(t.sext(a)*t.sext(b)>>n) & mask }
		}
		return func(a, b uint64) uint64 { return (a & mask) * (b & mask) >> n & mask }
	}
	return func(a, b uint64) uint64 { return a * b & mask }
}

func mulMode(d *decoder) string {
	switch {
	case d.has("hi"):
		return "hi"
	case d.has("wide"):
		return "wide"
	}
	return "lo"
}

func decodeMul(d *decoder) error {
	t, err := d.typ()
	if err != nil {
		return err
	}
	if t.isFloat() {
		return decodeFloatArith(d, t)
	}
	if t, err = d.intType(); err != nil {
		return err
	}
	if d.has("wide") && t.bits() == 64 {
		return d.errorf("mul.wide of 64-bit operands")
	}
	return op2(d, t, t, mulInt(t, mulMode(d)))
}

func decodeMad(d *decoder) error {
	t, err := d.typ()
	if err != nil {
		return err
	}
	if t.isFloat() {
		return decodeFma(d)
	}
	if d.has("cc") {
		return d.errorf("carry arithmetic (.cc) is not simulated")
	}
	if t, err = d.intType(); err != nil {
		return err
	}
	mode := mulMode(d)
	mul := mulInt(t, mode)
	mask := t.mask()
	if mode == "wide" {
		mask = uint64(1)<<(2*t.bits()) - 1
		if t.bits() >= 32 {
			mask = ^uint64(0)
		}
	}
	tc := t
	if mode == "wide" {
		tc = wideType(t)
	}
	return op3(d, t, t, tc, func(a, b, c uint64) uint64 { return (mul(a, b) + c) & mask })
}

func wideType(t ptxType) ptxType {
	switch t {
	case tyS16:
		return tyS32
	case tyU16:
		return tyU32
	case tyS32:
		return tyS64
	}
	return tyU64
}

// decodeDivRem: integer division truncates toward zero (PTX ISA §9.7.1.6);
// division by zero is undefined in PTX: the simulator gives all ones for
// div and the dividend for rem, what the GPU's sequence produces for
// unsigned operands, so that lanes computing on masked-off garbage go on.
func decodeDivRem(d *decoder) error {
	t, err := d.typ()
	if err != nil {
		return err
	}
	if t.isFloat() {
		if d.base == "rem" {
			return d.errorf("rem on floats is not a PTX instruction")
		}
		return decodeFloatArith(d, t)
	}
	if t, err = d.intType(); err != nil {
		return err
	}
	mask := t.mask()
	div := d.base == "div"
	if t.signed() {
		return op2(d, t, t, func(a, b uint64) uint64 {
			x, y := t.sext(a), t.sext(b)
			switch {
			case y == 0 && div:
				return mask
			case y == 0:
				return a & mask
			case y == -1: // avoids the overflow of MinInt / -1
				if div {
					return uint64(-x) & mask
				}
				return 0
			case div:
				return uint64(x/y) & mask
			}
			return uint64(x%y) & mask
		})
	}
	return op2(d, t, t, func(a, b uint64) uint64 {
		x, y := a&mask, b&mask
		switch {
		case y == 0 && div:
			return mask
		case y == 0:
			return x
		case div:
			return x / y
		}
		return x % y
	})
}

func decodeMinMax(d *decoder) error {
	t, err := d.typ()
	if err != nil {
		return err
	}
	if t.isFloat() {
		return decodeFloatMinMax(d, t)
	}
	if t, err = d.intType(); err != nil {
		return err
	}
	isMax := d.base == "max"
	if t.signed() {
		return op2(d, t, t, func(a, b uint64) uint64 {
			x, y := t.sext(a), t.sext(b)
			if (x > y) == isMax {
				return a & t.mask()
			}
			return b & t.mask()
		})
	}
	return op2(d, t, t, func(a, b uint64) uint64 {
		x, y := a&t.mask(), b&t.mask()
		if (x > y) == isMax {
			return x
		}
		return y
	})
}

func decodeAbsNeg(d *decoder) error {
	t, err := d.typ()
	if err != nil {
		return err
	}
	if t.isFloat() {
		return decodeFloatUnary(d, t)
	}
	if t, err = d.intType(); err != nil {
		return err
	}
	if d.base == "neg" {
		return op1(d, t, func(a uint64) uint64 { return -a & t.mask() })
	}
	return op1(d, t, func(a uint64) uint64 {
		if x := t.sext(a); x < 0 {
			return uint64(-x) & t.mask()
		}
		return a & t.mask()
	})
}

func decodeLogic(d *decoder) error {
	t, err := d.intType()
	if err != nil {
		return err
	}
	var f func(a, b uint64) uint64
	switch d.base {
	case "and":
		f = func(a, b uint64) uint64 { return a & b }
	case "or":
		f = func(a, b uint64) uint64 { return a | b }
	default:
		f = func(a, b uint64) uint64 { return a ^ b }
	}
	if t == tyPred {
		// predicate operands may be negated: !%p
		return binaryPred(d, f)
	}
	mask := t.mask()
	return op2(d, t, t, func(a, b uint64) uint64 { return f(a, b) & mask })
}

func binaryPred(d *decoder, f func(a, b uint64) uint64) error {
	if err := d.nargs(3); err != nil {
		return err
	}
	dst, err := d.dst(0)
	if err != nil {
		return err
	}
	a, err := d.src(1, tyPred)
	if err != nil {
		return err
	}
	b, err := d.src(2, tyPred)
	if err != nil {
		return err
	}
	d.in.run = func(w *warp, m uint32) error {
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			w.set(&dst, l, f(boolBit(w.pval(&a, l)), boolBit(w.pval(&b, l)))&1)
		}
		return nil
	}
	return nil
}

func decodeNot(d *decoder) error {
	t, err := d.intType()
	if err != nil {
		return err
	}
	if d.base == "cnot" {
		return op1(d, t, func(a uint64) uint64 { return boolBit(a&t.mask() == 0) })
	}
	if t == tyPred {
		return op1(d, t, func(a uint64) uint64 { return ^a & 1 })
	}
	return op1(d, t, func(a uint64) uint64 { return ^a & t.mask() })
}

// decodeShift: shift amounts above the width clamp to it (PTX ISA §9.7.7.7).
func decodeShift(d *decoder) error {
	t, err := d.intType()
	if err != nil {
		return err
	}
	n := uint64(t.bits())
	mask := t.mask()
	if d.base == "shl" {
		return op2(d, t, tyU32, func(a, b uint64) uint64 {
			s := b & 0xffffffff
			if s >= n {
				return 0
			}
			return a << s & mask
		})
	}
	if t.signed() {
		return op2(d, t, tyU32, func(a, b uint64) uint64 {
			s := b & 0xffffffff
			if s >= n {
				s = n - 1
			}
			return uint64(t.sext(a)>>s) & mask
		})
	}
	return op2(d, t, tyU32, func(a, b uint64) uint64 {
		s := b & 0xffffffff
		if s >= n {
			return 0
		}
		return (a & mask) >> s
	})
}

func decodeBitCount(d *decoder) error {
	t, err := d.intType()
	if err != nil {
		return err
	}
	n := int(t.bits())
	switch d.base {
	case "popc":
		return op1(d, t, func(a uint64) uint64 { return uint64(bits.OnesCount64(a & t.mask())) })
	case "clz":
		return op1(d, t, func(a uint64) uint64 { return uint64(bits.LeadingZeros64(a&t.mask()) - (64 - n)) })
	case "brev":
		return op1(d, t, func(a uint64) uint64 { return bits.Reverse64(a) >> (64 - n) })
	}
	// bfind: the position of the most significant non-sign bit, 0xffffffff if none
	shiftAmt := d.has("shiftamt")
	return op1(d, t, func(a uint64) uint64 {
		x := a & t.mask()
		if t.signed() && t.sext(a) < 0 {
			x = ^x & t.mask()
		}
		if x == 0 {
			return 0xffffffff
		}
		p := uint64(63 - bits.LeadingZeros64(x))
		if shiftAmt {
			return uint64(n-1) - p
		}
		return p
	})
}

// decodeBfe: bit-field extract (PTX ISA §9.7.1.17).
func decodeBfe(d *decoder) error {
	t, err := d.intType()
	if err != nil {
		return err
	}
	n := uint64(t.bits())
	return op3(d, t, tyU32, tyU32, func(a, b, c uint64) uint64 {
		pos, ln := b&0xff, c&0xff
		x := a & t.mask()
		var sbit uint64
		if t.signed() && ln != 0 {
			p := pos + ln - 1
			if p > n-1 {
				p = n - 1
			}
			sbit = x >> p & 1
		}
		var out uint64
		for i := uint64(0); i < n; i++ {
			var bit uint64
			if i < ln && pos+i <= n-1 {
				bit = x >> (pos + i) & 1
			} else {
				bit = sbit
			}
			out |= bit << i
		}
		return out
	})
}

// decodeBfi: bit-field insert (PTX ISA §9.7.1.18): d = b with len bits of a at pos.
func decodeBfi(d *decoder) error {
	t, err := d.intType()
	if err != nil {
		return err
	}
	if err := d.nargs(5); err != nil {
		return err
	}
	n := uint64(t.bits())
	dst, err := d.dst(0)
	if err != nil {
		return err
	}
	var src [4]operand
	for i, ty := range []ptxType{t, t, tyU32, tyU32} {
		if src[i], err = d.src(i+1, ty); err != nil {
			return err
		}
	}
	d.in.run = func(w *warp, m uint32) error {
		forLanes(m, func(l int) {
			a, b := w.val(&src[0], l), w.val(&src[1], l)
			pos, ln := w.val(&src[2], l)&0xff, w.val(&src[3], l)&0xff
			out := b & t.mask()
			for i := uint64(0); i < ln && pos+i < n; i++ {
				bit := a >> i & 1
				out = out&^(1<<(pos+i)) | bit<<(pos+i)
			}
			w.set(&dst, l, out)
		})
		return nil
	}
	return nil
}

// decodePrmt: byte permute, default mode (PTX ISA §9.7.7.9).
func decodePrmt(d *decoder) error {
	for _, m := range d.mods {
		if m != "b32" {
			return d.errorf("prmt mode .%s is not simulated", m)
		}
	}
	return op3(d, tyB32, tyB32, tyB32, func(a, b, c uint64) uint64 {
		src := (b&0xffffffff)<<32 | a&0xffffffff
		var out uint64
		for i := uint(0); i < 4; i++ {
			sel := c >> (4 * i) & 0xf
			byt := src >> (8 * (sel & 7)) & 0xff
			if sel&8 != 0 { // replicate the sign bit
				if byt&0x80 != 0 {
					byt = 0xff
				} else {
					byt = 0
				}
			}
			out |= byt << (8 * i)
		}
		return out
	})
}
