package ptxsim

import (
	"math/bits"
)

// mbarrier objects (PTX ISA §9.7.13.15) and the asynchronous copies that
// complete on them: cp.async.mbarrier.arrive (§9.7.9.25.3.4) and
// cp.async.bulk global→shared with mbarrier::complete_tx::bytes
// (§9.7.9.25.4.1). An mbarrier is kept beside shared memory, keyed by its
// offset: its expected arrival count, the arrivals still pending in the
// current phase, the transaction count, and the phase. A phase completes
// when no arrival is pending and the transaction count is zero. The copies
// that complete on an mbarrier land as late as the model allows: when a
// thread tests or waits on that mbarrier and its phase would not yet be
// complete, so that a read of their destination before the wait meets a
// copy in flight (a Fault). A failing mbarrier.try_wait or test_wait in a
// loop yields the warp to the others; a CTA whose running warps all spin on
// waits that nothing can end is a Fault ("sync").

func init() {
	register(decodeMbarrier, "mbarrier")
	register(decodeElect, "elect")
	register(decodeNop, "setmaxnreg")
}

type mbar struct {
	expected, pending int
	tx                int64
	phase             uint64
	// racecheck: per warp, the release counts the current phase has
	// gathered (acc) and those of the last completed phase (done)
	acc, done []uint32
	// arrivals to make once these copies land (cp.async.mbarrier.arrive)
	asyncArrives []asyncArrive
	// bulk copies that complete tx bytes on landing
	bulk []bulkCopy
}

type bulkCopy struct {
	copy  int
	bytes int64
}

type asyncArrive struct {
	copies []int
	warp   int
	mc     uint32
}

// join gathers warp w's release count mc into the phase.
func (b *mbar) join(c *cta, w int, mc uint32) {
	if b.acc == nil {
		b.acc = make([]uint32, c.l.nwarps)
		b.done = make([]uint32, c.l.nwarps)
	}
	b.acc[w] = max(b.acc[w], mc+1)
}

// acquire gives warp u what the last completed phase released.
func (b *mbar) acquire(c *cta, u int) {
	for w, v := range b.done {
		c.sync.seen[u][w] = max(c.sync.seen[u][w], v)
	}
}

func (b *mbar) complete(c *cta) {
	for b.pending <= 0 && b.tx == 0 {
		if b.acc != nil {
			copy(b.done, b.acc)
			clear(b.acc)
		}
		b.phase++
		b.pending += b.expected
		c.events++
		if b.expected == 0 {
			return
		}
	}
}

// settle lands the copies that complete on b and makes their arrivals.
func (b *mbar) settle(c *cta) error {
	for len(b.asyncArrives) > 0 || len(b.bulk) > 0 {
		if len(b.asyncArrives) > 0 {
			aa := b.asyncArrives[0]
			b.asyncArrives = b.asyncArrives[1:]
			for _, idx := range aa.copies {
				if err := c.async.land(c, idx); err != nil {
					return err
				}
			}
			b.join(c, aa.warp, aa.mc)
			b.pending--
		} else {
			bc := b.bulk[0]
			b.bulk = b.bulk[1:]
			if err := c.async.land(c, bc.copy); err != nil {
				return err
			}
			cp := &c.async.copies[bc.copy]
			b.join(c, cp.warp, cp.mc)
			b.tx -= bc.bytes
		}
		c.events++
		b.complete(c)
	}
	return nil
}

func (c *cta) drainMbars() error {
	for _, b := range c.mbars {
		if err := b.settle(c); err != nil {
			return err
		}
	}
	return nil
}

func (c *cta) spinDeadlock() error {
	for _, w := range c.warps {
		if m := w.live &^ w.wait; m != 0 {
			l := bits.TrailingZeros32(m)
			pc := w.lanePCOf(l)
			if pc > 0 {
				w.cur = c.l.e.prog[pc-1]
			}
			return w.faultKind(l, "sync", "every running warp waits on an mbarrier phase that no arrival or copy in flight can complete (deadlock)")
		}
	}
	return c.deadlock()
}

// mbarAt resolves lane l's mbarrier address (8-byte aligned, in shared memory).
func (w *warp) mbarAt(sp space, a *addrOperand, l int, init bool) (*mbar, uint64, error) {
	addr := w.addr(a, l)
	if sp == spGeneric {
		if addr < sharedWindow || addr >= sharedWindow+windowSize {
			return nil, addr, w.faultAddr(l, "memcheck", addr, "mbarrier address is not in shared memory")
		}
		addr -= sharedWindow
	}
	addr &= 0xffffffff
	if _, err := w.sharedOff(addr, 8, l, "mbarrier"); err != nil {
		return nil, addr, err
	}
	b, ok := w.c.mbars[addr]
	if !ok && !init {
		return nil, addr, w.faultAddr(l, "sync", addr, "mbarrier at shared offset %#x used before mbarrier.init", addr)
	}
	if !ok {
		b = &mbar{}
		w.c.mbars[addr] = b
	}
	return b, addr, nil
}

// decodeMbarrier: init, inval, arrive{.expect_tx}, arrive_drop,
// expect_tx, complete_tx, test_wait{.parity}, try_wait{.parity},
// pending_count.
func decodeMbarrier(d *decoder) error {
	if len(d.mods) == 0 {
		return d.errorf("mbarrier needs an operation")
	}
	op := d.mods[0]
	sp, err := d.space()
	if err != nil {
		return err
	}
	if sp != spShared && sp != spGeneric {
		return d.errorf("mbarrier objects live in shared memory")
	}
	addrArg := func(i int) (addrOperand, error) {
		a, err := d.address(i)
		if a.symSpace == spShared && sp == spGeneric {
			a.off += sharedWindow
		}
		return a, err
	}
	switch op {
	case "init":
		if err := d.nargs(2); err != nil {
			return err
		}
		a, err := addrArg(0)
		if err != nil {
			return err
		}
		cnt, err := d.src(1, tyU32)
		if err != nil {
			return err
		}
		d.in.run = func(w *warp, m uint32) error {
			for ; m != 0; m &= m - 1 {
				l := bits.TrailingZeros32(m)
				b, _, err := w.mbarAt(sp, &a, l, true)
				if err != nil {
					return err
				}
				n := int(uint32(w.val(&cnt, l)))
				if n < 1 || n > 1<<20-1 {
					return w.fault(l, "mbarrier.init count %d: 1 to 2^20-1", n)
				}
				*b = mbar{expected: n, pending: n}
				w.c.events++
			}
			return nil
		}
	case "inval":
		a, err := addrArg(0)
		if err != nil {
			return err
		}
		d.in.run = func(w *warp, m uint32) error {
			for ; m != 0; m &= m - 1 {
				l := bits.TrailingZeros32(m)
				_, off, err := w.mbarAt(sp, &a, l, false)
				if err != nil {
					return err
				}
				delete(w.c.mbars, off)
			}
			return nil
		}
	case "arrive", "arrive_drop":
		expectTx := d.has("expect_tx")
		// operands: state, [addr] {, txCount} {, count}
		if err := d.nargs(2, 3, 4); err != nil {
			return err
		}
		st, err := d.dst(0)
		if err != nil {
			return err
		}
		a, err := addrArg(1)
		if err != nil {
			return err
		}
		var tx, cnt operand
		next := 2
		if expectTx {
			if tx, err = d.src(next, tyU32); err != nil {
				return err
			}
			next++
		}
		if len(d.raw.args) > next {
			if cnt, err = d.src(next, tyU32); err != nil {
				return err
			}
		}
		drop := op == "arrive_drop"
		d.in.run = func(w *warp, m uint32) error {
			for ; m != 0; m &= m - 1 {
				l := bits.TrailingZeros32(m)
				b, _, err := w.mbarAt(sp, &a, l, false)
				if err != nil {
					return err
				}
				n := 1
				if cnt.kind != oNone {
					n = int(uint32(w.val(&cnt, l)))
				}
				if b.pending < n {
					// the phase can only be complete by now: its copies
					// have landed, however late the model lands them
					if err := b.settle(w.c); err != nil {
						return err
					}
				}
				w.set(&st, l, b.phase)
				if expectTx {
					b.tx += int64(uint32(w.val(&tx, l)))
				}
				if drop {
					b.expected -= n
				}
				b.join(w.c, w.id, w.c.sync.release(w.id))
				b.pending -= n
				if b.pending < 0 {
					return w.faultKind(l, "sync", "mbarrier.%s: more arrivals than the %d expected in phase %d (transaction count %d)", op, b.expected, b.phase, b.tx)
				}
				w.c.events++
				b.complete(w.c)
			}
			return nil
		}
	case "expect_tx", "complete_tx":
		if err := d.nargs(2); err != nil {
			return err
		}
		a, err := addrArg(0)
		if err != nil {
			return err
		}
		tx, err := d.src(1, tyU32)
		if err != nil {
			return err
		}
		sign := int64(1)
		if op == "complete_tx" {
			sign = -1
		}
		d.in.run = func(w *warp, m uint32) error {
			for ; m != 0; m &= m - 1 {
				l := bits.TrailingZeros32(m)
				b, _, err := w.mbarAt(sp, &a, l, false)
				if err != nil {
					return err
				}
				b.tx += sign * int64(uint32(w.val(&tx, l)))
				b.join(w.c, w.id, w.c.sync.release(w.id))
				w.c.events++
				b.complete(w.c)
			}
			return nil
		}
	case "test_wait", "try_wait":
		// waitComplete, [addr], state | phaseParity {, suspendTimeHint}
		if err := d.nargs(3, 4); err != nil {
			return err
		}
		p, err := d.dst(0)
		if err != nil {
			return err
		}
		a, err := addrArg(1)
		if err != nil {
			return err
		}
		parity := d.has("parity")
		st, err := d.src(2, tyB64)
		if err != nil {
			return err
		}
		d.in.run = func(w *warp, m uint32) error {
			waiting := false
			for ; m != 0; m &= m - 1 {
				l := bits.TrailingZeros32(m)
				b, _, err := w.mbarAt(sp, &a, l, false)
				if err != nil {
					return err
				}
				s := w.val(&st, l)
				done := func() bool {
					if parity {
						return b.phase&1 != s&1
					}
					return b.phase > s
				}
				if !done() {
					if err := b.settle(w.c); err != nil {
						return err
					}
				}
				ok := done()
				if ok {
					b.acquire(w.c, w.id)
				}
				w.set(&p, l, boolBit(ok))
				waiting = waiting || !ok
			}
			if waiting {
				w.yield = true
			}
			return nil
		}
	case "pending_count":
		if err := d.nargs(2); err != nil {
			return err
		}
		return d.errorf("mbarrier.pending_count is not simulated (the state token is the phase here)")
	default:
		return d.errorf("mbarrier.%s is not simulated", op)
	}
	return nil
}

// decodeCpAsyncMbarrierArrive: cp.async.mbarrier.arrive{.noinc}.shared.b64 [mbar]:
// an arrival once every cp.async the thread issued before it has landed;
// without .noinc the pending count is first raised by one, so that the
// arrival does not count against the expected ones.
func decodeCpAsyncMbarrierArrive(d *decoder) error {
	if err := d.nargs(1); err != nil {
		return err
	}
	sp, err := d.space()
	if err != nil {
		return err
	}
	a, err := d.address(0)
	if err != nil {
		return err
	}
	if a.symSpace == spShared && sp == spGeneric {
		a.off += sharedWindow
	}
	noinc := d.has("noinc")
	d.in.run = func(w *warp, m uint32) error {
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			b, _, err := w.mbarAt(sp, &a, l, false)
			if err != nil {
				return err
			}
			if !noinc {
				b.pending++
			}
			mc := w.c.sync.release(w.id)
			cps := w.c.async.inflight(w, l)
			for _, idx := range cps {
				// a copy that an earlier arrival already tracks keeps
				// that arrival's count: its write happens before both,
				// and a thread that waits on the earlier mbarrier only
				// must see it
				if cp := &w.c.async.copies[idx]; !cp.bound {
					cp.bound, cp.mc = true, mc
				}
			}
			b.asyncArrives = append(b.asyncArrives, asyncArrive{copies: cps, warp: w.id, mc: mc})
			w.c.events++
		}
		return nil
	}
	return nil
}

// decodeCpAsyncBulk: cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
// [dst], [src], size, [mbar]: size bytes (a multiple of 16, 16-byte
// aligned) that complete size transactions on the mbarrier when they land.
func decodeCpAsyncBulk(d *decoder) error {
	if len(d.mods) > 2 && d.mods[2] == "global" && d.has("bulk_group") {
		return decodeBulkStore(d)
	}
	if _, ok := d.hasPrefix("mbarrier::complete_tx"); !ok || !d.has("global") {
		return d.errorf("of the bulk copies only global → shared with mbarrier::complete_tx::bytes is simulated")
	}
	if err := d.nargs(4, 5); err != nil {
		return err
	}
	dst, src, size, err := d.copyOperands()
	if err != nil {
		return err
	}
	mb, err := d.address(3)
	if err != nil {
		return err
	}
	pc := d.in.pc
	d.in.run = func(w *warp, m uint32) error {
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			n := int(uint32(w.val(&size, l)))
			da, sa := w.addr(&dst, l)&0xffffffff, w.addr(&src, l)
			if n%16 != 0 || da%16 != 0 || sa%16 != 0 {
				return w.faultAddr(l, "memcheck", sa, "cp.async.bulk of %d bytes from %#x to shared %#x: sizes and addresses must be multiples of 16", n, sa, da)
			}
			b, _, err := w.mbarAt(spShared, &mb, l, false)
			if err != nil {
				return err
			}
			data := make([]byte, n)
			if n > 0 {
				g, err := w.globalBytesAligned(sa, n, l, "cp.async.bulk read")
				if err != nil {
					return err
				}
				copy(data, g)
			}
			if da+uint64(n) > uint64(w.c.l.sharedSize) {
				return w.faultAddr(l, "memcheck", da, "cp.async.bulk writes %d bytes at shared offset %#x: the CTA has %d", n, da, w.c.l.sharedSize)
			}
			if err := w.bulkOnto(b, l, da, data, pc); err != nil {
				return err
			}
		}
		return nil
	}
	return nil
}

// bulkOnto issues a bulk copy of data to shared offset da by lane l,
// which lands (and completes its bytes' transactions on mbarrier b) when
// a thread waits on b.
func (w *warp) bulkOnto(b *mbar, l int, da uint64, data []byte, pc int) error {
	idx, err := w.c.async.issueBulk(w, l, int(da), data, pc)
	if err != nil {
		return err
	}
	cp := &w.c.async.copies[idx]
	cp.bound, cp.mc = true, w.c.sync.release(w.id)
	b.bulk = append(b.bulk, bulkCopy{copy: idx, bytes: int64(len(data))})
	return nil
}

// globalBytesAligned returns n bytes at a global address aligned to 16.
func (w *warp) globalBytesAligned(addr uint64, n, l int, what string) ([]byte, error) {
	b, off, err := w.c.l.mem.find(addr, n)
	if err != nil {
		return nil, w.faultAddr(l, "memcheck", addr, "invalid global %s: %v", what, err)
	}
	return b.data[off : off+n], nil
}

// decodeElect: elect.sync d|p, membermask: the lowest lane of the mask
// that executes it is elected.
func decodeElect(d *decoder) error {
	if err := d.nargs(2); err != nil {
		return err
	}
	r, p, err := d.dstPair(0)
	if err != nil {
		return err
	}
	mask, err := d.src(1, tyB32)
	if err != nil {
		return err
	}
	d.in.run = func(w *warp, m uint32) error {
		if err := membership(w, m, &mask); err != nil {
			return err
		}
		leader := bits.TrailingZeros32(m)
		for r2 := m; r2 != 0; r2 &= r2 - 1 {
			l := bits.TrailingZeros32(r2)
			w.set(&r, l, uint64(leader))
			if p.kind == oReg {
				w.set(&p, l, boolBit(l == leader))
			}
		}
		return nil
	}
	return nil
}
