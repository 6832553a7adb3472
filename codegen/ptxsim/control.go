package ptxsim

import (
	"math/bits"
)

// Control flow and synchronisation (PTX ISA §9.7.12 bra, ret, exit, trap;
// §9.7.13.1 bar/barrier; §9.7.9.6 shfl.sync; §9.7.12.? vote.sync,
// activemask, redux.sync, bar.warp.sync).

func init() {
	register(decodeBra, "bra")
	register(decodeExit, "ret", "exit")
	register(decodeBar, "bar", "barrier")
	register(decodeTrap, "trap", "brkpt")
	register(decodeShfl, "shfl")
	register(decodeVote, "vote")
	register(decodeActivemask, "activemask")
	register(decodeRedux, "redux")
}

func decodeBra(d *decoder) error {
	if err := d.nargs(1); err != nil {
		return err
	}
	t, err := d.label(0)
	if err != nil {
		return err
	}
	d.in.kind, d.in.target, d.in.uni = iBra, t, d.has("uni")
	return nil
}

func decodeExit(d *decoder) error {
	if err := d.nargs(0); err != nil {
		return err
	}
	d.in.kind = iExit
	return nil
}

func decodeTrap(d *decoder) error {
	d.in.run = func(w *warp, m uint32) error {
		return w.fault(bits.TrailingZeros32(m), "%s executed", d.base)
	}
	return nil
}

// decodeBar: bar{.cta}.sync a{, b}; bar{.cta}.arrive a, b; barrier{.cta}.sync{.aligned} a{, b};
// bar.warp.sync membermask.
func decodeBar(d *decoder) error {
	if d.has("warp") {
		// bar.warp.sync: the lanes named must all arrive; in lockstep they do
		if err := d.nargs(1); err != nil {
			return err
		}
		mask, err := d.src(0, tyB32)
		if err != nil {
			return err
		}
		d.in.run = func(w *warp, m uint32) error {
			l := bits.TrailingZeros32(m)
			want := uint32(w.val(&mask, l)) & w.live
			if want&^m != 0 {
				return w.faultKind(l, "sync", "bar.warp.sync %#08x: lanes %#08x have not exited and are not here", want, want&^m)
			}
			return nil
		}
		return nil
	}
	if d.has("red") {
		return d.errorf("bar.red is not simulated")
	}
	arrive := d.has("arrive")
	if !arrive && !d.has("sync") {
		return d.errorf("bar needs .sync or .arrive")
	}
	if err := d.nargs(1, 2); err != nil {
		return err
	}
	id, err := d.src(0, tyU32)
	if err != nil {
		return err
	}
	d.in.kind, d.in.barID, d.in.barArrive = iBar, id, arrive
	if len(d.raw.args) == 2 {
		if d.in.barCount, err = d.src(1, tyU32); err != nil {
			return err
		}
	} else if arrive {
		return d.errorf("bar.arrive needs a thread count")
	}
	return nil
}

// membership checks a .sync warp instruction's membermask against the lanes
// executing it: each must be named, and every live lane named must be there.
func membership(w *warp, m uint32, mask *operand) error {
	l := bits.TrailingZeros32(m)
	mm := uint32(w.val(mask, l))
	for r := m; r != 0; r &= r - 1 {
		if uint32(w.val(mask, bits.TrailingZeros32(r))) != mm {
			return w.faultKind(l, "sync", "membermask differs across the lanes executing %s", w.cur.op)
		}
	}
	if m&^mm != 0 {
		return w.faultKind(bits.TrailingZeros32(m&^mm), "sync", "lane executes %s but is not in its membermask %#08x", w.cur.op, mm)
	}
	if missing := mm & w.live &^ m; missing != 0 {
		return w.faultKind(bits.TrailingZeros32(missing), "sync", "membermask %#08x names lanes %#08x that have not exited but do not execute %s with the others (divergence)", mm, missing, w.cur.op)
	}
	return nil
}

// decodeShfl: shfl.sync.{up,down,bfly,idx}.b32 d[|p], a, b, c, membermask
// (PTX ISA §9.7.9.6, the pseudocode there). Reading from a lane that does
// not execute the shuffle is undefined on the GPU and a Fault here.
func decodeShfl(d *decoder) error {
	mode := ""
	for _, m := range []string{"up", "down", "bfly", "idx"} {
		if d.has(m) {
			mode = m
		}
	}
	if mode == "" {
		return d.errorf("shfl needs .up, .down, .bfly or .idx")
	}
	sync := d.has("sync")
	if sync {
		if err := d.nargs(5); err != nil {
			return err
		}
	} else if err := d.nargs(4); err != nil {
		return err
	}
	dst, pdst, err := d.dstPair(0)
	if err != nil {
		return err
	}
	a, err := d.src(1, tyB32)
	if err != nil {
		return err
	}
	b, err := d.src(2, tyB32)
	if err != nil {
		return err
	}
	c, err := d.src(3, tyB32)
	if err != nil {
		return err
	}
	var mask operand
	if sync {
		if mask, err = d.src(4, tyB32); err != nil {
			return err
		}
	}
	d.in.run = func(w *warp, m uint32) error {
		if sync {
			if err := membership(w, m, &mask); err != nil {
				return err
			}
		}
		var src [32]uint64
		for r := m; r != 0; r &= r - 1 {
			l := bits.TrailingZeros32(r)
			src[l] = w.val(&a, l) & 0xffffffff
		}
		var out [32]uint64
		var pv [32]bool
		for r := m; r != 0; r &= r - 1 {
			lane := bits.TrailingZeros32(r)
			bval := int(w.val(&b, lane) & 31)
			cv := w.val(&c, lane)
			cval := int(cv & 31)
			seg := int(cv >> 8 & 31)
			maxLane := lane&seg | cval&^seg
			minLane := lane & seg
			var j int
			var p bool
			switch mode {
			case "up":
				j = lane - bval
				p = j >= maxLane
			case "down":
				j = lane + bval
				p = j <= maxLane
			case "bfly":
				j = lane ^ bval
				p = j <= maxLane
			case "idx":
				j = minLane | bval&^seg
				p = j <= maxLane
			}
			if !p {
				j = lane
			}
			if m&(1<<j) == 0 {
				return w.faultKind(lane, "sync", "shfl.%s reads lane %d, which does not execute it (result undefined)", mode, j)
			}
			out[lane], pv[lane] = src[j], p
		}
		for r := m; r != 0; r &= r - 1 {
			l := bits.TrailingZeros32(r)
			w.set(&dst, l, out[l])
			if pdst.kind == oReg {
				w.set(&pdst, l, boolBit(pv[l]))
			}
		}
		return nil
	}
	return nil
}

// decodeVote: vote.sync.{all,any,uni}.pred d, {!}a, membermask;
// vote.sync.ballot.b32 d, {!}a, membermask (PTX ISA §9.7.12.?).
func decodeVote(d *decoder) error {
	mode := ""
	for _, m := range []string{"all", "any", "uni", "ballot"} {
		if d.has(m) {
			mode = m
		}
	}
	if mode == "" {
		return d.errorf("vote needs .all, .any, .uni or .ballot")
	}
	sync := d.has("sync")
	if err := d.nargs(2, 3); err != nil {
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
	var mask operand
	if sync {
		if mask, err = d.src(2, tyB32); err != nil {
			return err
		}
	}
	d.in.run = func(w *warp, m uint32) error {
		if sync {
			if err := membership(w, m, &mask); err != nil {
				return err
			}
		}
		var ballot uint32
		for r := m; r != 0; r &= r - 1 {
			l := bits.TrailingZeros32(r)
			if w.pval(&a, l) {
				ballot |= 1 << l
			}
		}
		var v uint64
		switch mode {
		case "all":
			v = boolBit(ballot == m)
		case "any":
			v = boolBit(ballot != 0)
		case "uni":
			v = boolBit(ballot == 0 || ballot == m)
		case "ballot":
			v = uint64(ballot)
		}
		for r := m; r != 0; r &= r - 1 {
			w.set(&dst, bits.TrailingZeros32(r), v)
		}
		return nil
	}
	return nil
}

func decodeActivemask(d *decoder) error {
	if err := d.nargs(1); err != nil {
		return err
	}
	dst, err := d.dst(0)
	if err != nil {
		return err
	}
	d.in.run = func(w *warp, m uint32) error {
		for r := m; r != 0; r &= r - 1 {
			w.set(&dst, bits.TrailingZeros32(r), uint64(m))
		}
		return nil
	}
	return nil
}

// decodeRedux: redux.sync.op.type d, a, membermask (sm_80): add, min, max
// on .u32/.s32; and, or, xor on .b32.
func decodeRedux(d *decoder) error {
	t, err := d.typ()
	if err != nil {
		return err
	}
	if err := d.nargs(3); err != nil {
		return err
	}
	var f func(x, y uint64) uint64
	switch {
	case d.has("add"):
		f = func(x, y uint64) uint64 { return (x + y) & 0xffffffff }
	case d.has("and"):
		f = func(x, y uint64) uint64 { return x & y }
	case d.has("or"):
		f = func(x, y uint64) uint64 { return x | y }
	case d.has("xor"):
		f = func(x, y uint64) uint64 { return x ^ y }
	case d.has("min"), d.has("max"):
		isMax := d.has("max")
		f = func(x, y uint64) uint64 {
			gt := x > y
			if t.signed() {
				gt = int32(x) > int32(y)
			}
			if gt == isMax {
				return x
			}
			return y
		}
	default:
		return d.errorf("redux operation")
	}
	dst, err := d.dst(0)
	if err != nil {
		return err
	}
	a, err := d.src(1, t)
	if err != nil {
		return err
	}
	mask, err := d.src(2, tyB32)
	if err != nil {
		return err
	}
	d.in.run = func(w *warp, m uint32) error {
		if err := membership(w, m, &mask); err != nil {
			return err
		}
		first := true
		var acc uint64
		for r := m; r != 0; r &= r - 1 {
			v := w.val(&a, bits.TrailingZeros32(r)) & 0xffffffff
			if first {
				acc, first = v, false
			} else {
				acc = f(acc, v)
			}
		}
		for r := m; r != 0; r &= r - 1 {
			w.set(&dst, bits.TrailingZeros32(r), acc)
		}
		return nil
	}
	return nil
}
