package ptxsim

import (
	"fmt"
	"math/bits"
	"strings"
)

// cp.async (PTX ISA §9.7.9.25): asynchronous copies from global to shared
// memory, in groups per thread. The simulator reads the source when the
// copy is issued and writes shared memory only when the issuing thread
// waits for its group (cp.async.wait_group / wait_all), so that code that
// reads the destination early sees stale data; reading or writing bytes
// that a copy still in flight will write is reported as a Fault of kind
// "async" whichever thread does it.

func init() {
	register(decodeCpAsync, "cp")
}

type asyncCopy struct {
	dst    int
	data   []byte
	warp   int
	lane   int
	pc     int
	landed bool
	// bound: the copy completes on an mbarrier, released at count mc
	// of its warp (racecheck); else it lands at its thread's wait
	bound bool
	mc    uint32
}

// asyncThread is a thread's asynchronous operations in groups: its
// cp.async copies (cp.async.commit_group, wait_group, wait_all) and its
// tensor stores (cp.async.bulk.commit_group, bulk.wait_group{.read}).
type asyncThread struct {
	copies, stores asyncGroups
}

// asyncGroups are operations (indices) not yet committed and committed
// groups of them, oldest first.
type asyncGroups struct {
	open   []int
	groups [][]int
}

// commit closes the open operations into a group.
func (g *asyncGroups) commit() {
	g.groups = append(g.groups, g.open)
	g.open = nil
}

// retire calls done for each operation of every group but the newest keep,
// oldest first, and drops those groups.
func (g *asyncGroups) retire(keep int, done func(idx int) error) error {
	for len(g.groups) > keep {
		for _, idx := range g.groups[0] {
			if err := done(idx); err != nil {
				return err
			}
		}
		g.groups = g.groups[1:]
	}
	return nil
}

// groupCount is the N of a wait_group N (an integer constant).
func groupCount(d *decoder) (int, error) {
	if err := d.nargs(1); err != nil {
		return 0, err
	}
	n, err := d.src(0, tyU32)
	if err != nil {
		return 0, err
	}
	if n.kind != oImm {
		return 0, d.errorf("%s takes an integer constant", d.raw.op)
	}
	return int(n.imm), nil
}

type asyncCTA struct {
	owner   []int32 // per shared byte: 1 + the pending copy that will write it, or 0
	copies  []asyncCopy
	pending int
	threads []asyncThread
	// tensor stores in flight (tmastore.go): readBy counts, per shared
	// byte, the stores that still read it; reading the stores whose
	// source is still read
	stores  []bulkStore
	readBy  []int32
	reading int
}

func (a *asyncCTA) init(sharedSize int) {
	a.owner = make([]int32, sharedSize)
	a.readBy = make([]int32, sharedSize)
}

func (a *asyncCTA) reset() {
	a.copies = a.copies[:0]
	a.pending = 0
	for i := range a.threads {
		a.threads[i] = asyncThread{}
	}
	a.stores = a.stores[:0]
	a.reading = 0
	clear(a.readBy)
}

func (a *asyncCTA) thread(w *warp, l int) *asyncThread {
	t := w.id*32 + l
	for len(a.threads) <= t {
		a.threads = append(a.threads, asyncThread{})
	}
	return &a.threads[t]
}

// check reports an access to shared bytes that a pending copy will
// write, and a write to shared bytes that a tensor store still reads.
func (a *asyncCTA) check(w *warp, l, off, n int, write bool) error {
	if write && a.reading > 0 {
		if err := a.checkStores(w, l, off, n); err != nil {
			return err
		}
	}
	if a.pending == 0 {
		return nil
	}
	for i := off; i < off+n; i++ {
		if o := a.owner[i]; o != 0 {
			cp := &a.copies[o-1]
			what := "reads"
			if write {
				what = "writes"
			}
			in := w.c.l.e.prog[cp.pc]
			return w.faultAddr(l, "async", uint64(i), "%s shared byte %#x, which a cp.async issued by warp %d lane %d at line %d `%s` has not written yet: that thread has not waited for it (cp.async.wait_group / wait_all, then a barrier for other threads)",
				what, i, cp.warp, cp.lane, in.line, in.text)
		}
	}
	return nil
}

func (a *asyncCTA) issue(w *warp, l, dst int, data []byte, pc int) error {
	if err := a.check(w, l, dst, len(data), true); err != nil {
		return err
	}
	a.copies = append(a.copies, asyncCopy{dst: dst, data: data, warp: w.id, lane: l, pc: pc})
	idx := len(a.copies)
	for i := dst; i < dst+len(data); i++ {
		a.owner[i] = int32(idx)
	}
	a.pending++
	t := a.thread(w, l)
	t.copies.open = append(t.copies.open, idx-1)
	return nil
}

// issueBulk registers a copy that no thread's groups track (a bulk copy
// completing on an mbarrier) and returns its index.
func (a *asyncCTA) issueBulk(w *warp, l, dst int, data []byte, pc int) (int, error) {
	if err := a.check(w, l, dst, len(data), true); err != nil {
		return 0, err
	}
	a.copies = append(a.copies, asyncCopy{dst: dst, data: data, warp: w.id, lane: l, pc: pc})
	idx := len(a.copies)
	for i := dst; i < dst+len(data); i++ {
		a.owner[i] = int32(idx)
	}
	a.pending++
	return idx - 1, nil
}

// inflight lists the thread's copies that have not landed.
func (a *asyncCTA) inflight(w *warp, l int) []int {
	t := a.thread(w, l)
	var out []int
	for _, g := range append(append([][]int(nil), t.copies.groups...), t.copies.open) {
		for _, idx := range g {
			if !a.copies[idx].landed {
				out = append(out, idx)
			}
		}
	}
	return out
}

func (a *asyncCTA) land(c *cta, idx int) error {
	cp := &a.copies[idx]
	if cp.landed {
		return nil
	}
	cp.landed = true
	a.pending--
	for i := cp.dst; i < cp.dst+len(cp.data); i++ {
		a.owner[i] = 0
	}
	if c.race != nil {
		mc := c.sync.mclock[cp.warp]
		if cp.bound {
			mc = cp.mc
		}
		if err := c.race.write(c.warps[cp.warp], cp.warp, cp.lane, mc, cp.dst, c.shared[cp.dst:cp.dst+len(cp.data)], cp.data, cp.pc); err != nil {
			return err
		}
	}
	copy(c.shared[cp.dst:], cp.data)
	return nil
}

// wait lands the thread's groups but the newest n (n < 0: commit the open
// copies and land everything, as wait_all).
func (a *asyncCTA) wait(c *cta, w *warp, l, n int) error {
	t := a.thread(w, l)
	if n < 0 {
		if len(t.copies.open) > 0 {
			t.copies.commit()
		}
		n = 0
	}
	return t.copies.retire(n, func(idx int) error { return a.land(c, idx) })
}

// drain lands every copy still in flight when the CTA ends, and writes
// every tensor store's box to global memory.
func (a *asyncCTA) drain(c *cta) error {
	for i := range a.copies {
		if err := a.land(c, i); err != nil {
			return err
		}
	}
	for i := range a.stores {
		if err := a.finishStore(c, i); err != nil {
			return err
		}
	}
	return nil
}

// decodeCpAsync: cp.async.{ca,cg}.shared{::cta}.global [dst], [src], size{, src-size | ignore-src}{, policy};
// cp.async.commit_group; cp.async.wait_group N; cp.async.wait_all.
func decodeCpAsync(d *decoder) error {
	if len(d.mods) == 0 || d.mods[0] != "async" {
		return d.errorf("%s is not simulated", d.raw.op)
	}
	if len(d.mods) > 1 {
		switch {
		case d.mods[1] == "mbarrier":
			return decodeCpAsyncMbarrierArrive(d)
		case d.mods[1] == "bulk" && len(d.mods) > 2 && d.mods[2] == "tensor":
			return decodeCpAsyncBulkTensor(d)
		case d.mods[1] == "bulk" && (d.has("commit_group") || d.has("wait_group")):
			return decodeBulkGroup(d)
		case d.mods[1] == "bulk":
			return decodeCpAsyncBulk(d)
		case strings.HasPrefix(d.mods[1], "reduce"):
			return d.errorf("%s is not simulated", d.raw.op)
		}
	}
	switch {
	case d.has("commit_group"):
		if err := d.nargs(0); err != nil {
			return err
		}
		d.in.run = func(w *warp, m uint32) error {
			for ; m != 0; m &= m - 1 {
				w.c.async.thread(w, bits.TrailingZeros32(m)).copies.commit()
			}
			return nil
		}
		return nil
	case d.has("wait_group"):
		n, err := groupCount(d)
		if err != nil {
			return err
		}
		return asyncWait(d, n)
	case d.has("wait_all"):
		if err := d.nargs(0); err != nil {
			return err
		}
		return asyncWait(d, -1)
	}
	cg := d.has("cg")
	if !cg && !d.has("ca") {
		return d.errorf("cp.async needs .ca or .cg")
	}
	if err := d.nargs(3, 4, 5); err != nil {
		return err
	}
	dst, src, size, err := d.copyOperands()
	if err != nil {
		return err
	}
	if size.kind != oImm || size.imm != 4 && size.imm != 8 && size.imm != 16 || cg && size.imm != 16 {
		return d.errorf("cp-size must be 4, 8 or 16 (16 for .cg)")
	}
	n := int(size.imm)
	var srcSize, ignore operand
	if len(d.raw.args) >= 4 {
		o, err := d.src(3, tyU32)
		if err != nil {
			return err
		}
		if o.kind == oReg && o.rtyp == tyPred {
			ignore = o
		} else if len(d.raw.args) == 5 || !d.has("L2::cache_hint") {
			srcSize = o
		}
	}
	pc := d.in.pc
	d.in.run = func(w *warp, m uint32) error {
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			da := w.addr(&dst, l)
			sa := w.addr(&src, l)
			ns := n
			if srcSize.kind != oNone {
				ns = int(uint32(w.val(&srcSize, l)))
				if ns > n {
					return w.fault(l, "src-size %d is larger than cp-size %d", ns, n)
				}
			}
			if ignore.kind != oNone && w.pval(&ignore, l) {
				ns = 0
			}
			data := make([]byte, n)
			if ns > 0 {
				// the source must be aligned to cp-size even when fewer bytes are read
				if sa%uint64(n) != 0 {
					return w.faultAddr(l, "memcheck", sa, "cp.async source is not aligned to its %d bytes", n)
				}
				b, err := w.globalRange(sa, ns, l, "cp.async read")
				if err != nil {
					return err
				}
				// compute-sanitizer's memcheck takes the whole cp-size
				// range as read where src-size is not 0 (the H200,
				// 2026-12-04: a 16-byte copy of 4 bytes at a buffer's
				// last 4 was an invalid global read)
				if ns < n {
					if _, err := w.globalRange(sa, n, l, fmt.Sprintf("cp.async read (src-size %d)", ns)); err != nil {
						return err
					}
				}
				copy(data, b)
			}
			off, err := w.sharedOff(da, n, l, "cp.async write")
			if err != nil {
				return err
			}
			if err := w.c.async.issue(w, l, off, data, pc); err != nil {
				return err
			}
		}
		return nil
	}
	return nil
}

func asyncWait(d *decoder, n int) error {
	d.in.run = func(w *warp, m uint32) error {
		for ; m != 0; m &= m - 1 {
			if err := w.c.async.wait(w.c, w, bits.TrailingZeros32(m), n); err != nil {
				return err
			}
		}
		return nil
	}
	return nil
}
