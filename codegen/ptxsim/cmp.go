package ptxsim

import (
	"math"
	"math/bits"
)

// Comparison and selection (PTX ISA §9.7.6): setp, set, selp, slct.

func init() {
	register(decodeSetp, "setp", "set")
	register(decodeSelp, "selp")
	register(decodeSlct, "slct")
}

var cmpOps = []string{"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs",
	"equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"}

// compare builds the comparison of two values of type t.
func compare(d *decoder, t ptxType) (func(a, b uint64) bool, error) {
	op := ""
	for _, m := range d.mods {
		for _, c := range cmpOps {
			if m == c {
				op = c
			}
		}
	}
	if op == "" {
		return nil, d.errorf("no comparison operator")
	}
	if t.isFloat() {
		var val func(uint64) float64
		switch t {
		case tyF32:
			ftz := d.has("ftz")
			val = func(a uint64) float64 {
				if ftz {
					return float64(ftz32(f32(a)))
				}
				return float64(f32(a))
			}
		case tyF64:
			val = f64
		case tyF16:
			val = f16val
		case tyBF16:
			val = bf16val
		default:
			return nil, d.errorf("comparison of .%v is not simulated", t)
		}
		var f func(x, y float64) bool
		switch op {
		case "eq", "equ":
			f = func(x, y float64) bool { return x == y }
		case "ne", "neu":
			f = func(x, y float64) bool { return x != y }
		case "lt", "ltu":
			f = func(x, y float64) bool { return x < y }
		case "le", "leu":
			f = func(x, y float64) bool { return x <= y }
		case "gt", "gtu":
			f = func(x, y float64) bool { return x > y }
		case "ge", "geu":
			f = func(x, y float64) bool { return x >= y }
		case "num":
			return func(a, b uint64) bool { x, y := val(a), val(b); return x == x && y == y }, nil
		case "nan":
			return func(a, b uint64) bool { x, y := val(a), val(b); return x != x || y != y }, nil
		default:
			return nil, d.errorf("comparison .%s on floats", op)
		}
		unordered := len(op) == 3
		return func(a, b uint64) bool {
			x, y := val(a), val(b)
			if math.IsNaN(x) || math.IsNaN(y) {
				return unordered
			}
			return f(x, y)
		}, nil
	}
	if t == tyPred {
		switch op {
		case "eq":
			return func(a, b uint64) bool { return a&1 == b&1 }, nil
		case "ne":
			return func(a, b uint64) bool { return a&1 != b&1 }, nil
		}
		return nil, d.errorf("comparison .%s on predicates", op)
	}
	mask := t.mask()
	switch op {
	case "eq":
		return func(a, b uint64) bool { return a&mask == b&mask }, nil
	case "ne":
		return func(a, b uint64) bool { return a&mask != b&mask }, nil
	case "lo", "ls", "hi", "hs":
	case "lt", "le", "gt", "ge":
		if t.signed() {
			s := map[string]func(x, y int64) bool{
				"lt": func(x, y int64) bool { return x < y }, "le": func(x, y int64) bool { return x <= y },
				"gt": func(x, y int64) bool { return x > y }, "ge": func(x, y int64) bool { return x >= y },
			}[op]
			return func(a, b uint64) bool { return s(t.sext(a), t.sext(b)) }, nil
		}
	default:
		return nil, d.errorf("comparison .%s on integers", op)
	}
	u := map[string]func(x, y uint64) bool{
		"lt": func(x, y uint64) bool { return x < y }, "le": func(x, y uint64) bool { return x <= y },
		"gt": func(x, y uint64) bool { return x > y }, "ge": func(x, y uint64) bool { return x >= y },
		"lo": func(x, y uint64) bool { return x < y }, "ls": func(x, y uint64) bool { return x <= y },
		"hi": func(x, y uint64) bool { return x > y }, "hs": func(x, y uint64) bool { return x >= y },
	}[op]
	return func(a, b uint64) bool { return u(a&mask, b&mask) }, nil
}

// decodeSetp: setp.cmp[.bool].type p[|q], a, b[, {!}c] and
// set.cmp[.bool].dtype.stype d, a, b[, {!}c].
func decodeSetp(d *decoder) error {
	ts := d.types()
	if len(ts) == 0 {
		return d.errorf("no type")
	}
	t := ts[len(ts)-1]
	cmp, err := compare(d, t)
	if err != nil {
		return err
	}
	boolOp := ""
	for _, m := range d.mods {
		if m == "and" || m == "or" || m == "xor" {
			boolOp = m
		}
	}
	if err := d.nargs(3, 4); err != nil {
		return err
	}
	if (boolOp != "") != (len(d.raw.args) == 4) {
		return d.errorf("a boolean operation .and/.or/.xor goes with a fourth operand")
	}
	p, q, err := d.dstPair(0)
	if err != nil {
		return err
	}
	a, err := d.src(1, t)
	if err != nil {
		return err
	}
	b, err := d.src(2, t)
	if err != nil {
		return err
	}
	var c operand
	if boolOp != "" {
		if c, err = d.src(3, tyPred); err != nil {
			return err
		}
	}
	// set writes 0xffffffff / 1.0 for true (PTX ISA §9.7.6.1)
	var dtrue uint64 = 1
	if d.base == "set" {
		if len(ts) != 2 {
			return d.errorf("set needs a destination and a source type")
		}
		switch ts[0] {
		case tyF32:
			dtrue = b32(1)
		case tyU32, tyS32, tyB32:
			dtrue = 0xffffffff
		default:
			return d.errorf("set.%v", ts[0])
		}
		if q.kind != oNone {
			return d.errorf("set has one destination")
		}
	}
	d.in.run = func(w *warp, m uint32) error {
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			r := cmp(w.val(&a, l), w.val(&b, l))
			nr := !r
			if boolOp != "" {
				cv := w.pval(&c, l)
				switch boolOp {
				case "and":
					r, nr = r && cv, nr && cv
				case "or":
					r, nr = r || cv, nr || cv
				case "xor":
					r, nr = r != cv, nr != cv
				}
			}
			if r {
				w.set(&p, l, dtrue)
			} else {
				w.set(&p, l, 0)
			}
			if q.kind == oReg {
				w.set(&q, l, boolBit(nr))
			}
		}
		return nil
	}
	return nil
}

// decodeSelp: selp.type d, a, b, c gives c ? a : b.
func decodeSelp(d *decoder) error {
	t, err := d.typ()
	if err != nil {
		return err
	}
	if err := d.nargs(4); err != nil {
		return err
	}
	dst, err := d.dst(0)
	if err != nil {
		return err
	}
	a, err := d.src(1, t)
	if err != nil {
		return err
	}
	b, err := d.src(2, t)
	if err != nil {
		return err
	}
	c, err := d.src(3, tyPred)
	if err != nil {
		return err
	}
	d.in.run = func(w *warp, m uint32) error {
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			if w.pval(&c, l) {
				w.set(&dst, l, w.val(&a, l))
			} else {
				w.set(&dst, l, w.val(&b, l))
			}
		}
		return nil
	}
	return nil
}

// decodeSlct: slct.dtype.ctype d, a, b, c gives c >= 0 ? a : b.
func decodeSlct(d *decoder) error {
	ts := d.types()
	if len(ts) != 2 {
		return d.errorf("slct needs two types")
	}
	t, tc := ts[0], ts[1]
	return op3(d, t, t, tc, func(a, b, c uint64) uint64 {
		ge := false
		if tc == tyF32 {
			ge = f32(c) >= 0
		} else {
			ge = tc.sext(c) >= 0
		}
		if ge {
			return a
		}
		return b
	})
}
