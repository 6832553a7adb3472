package ptxsim

import (
	"math/bits"
)

// Tensor stores (PTX ISA §9.7.9.25.5.1, cp.async.bulk.tensor.Nd.global.
// shared::cta.tile.bulk_group [tmap, {c0, …}], [src]): a box of shared
// memory, laid out as a tensor copy would have written it (row after row,
// the map's swizzle on the shared address), written to the tensor in
// global memory, the elements outside the tensor left alone. A store joins
// its thread's bulk async-group (cp.async.bulk.commit_group); the thread's
// cp.async.bulk.wait_group.read N (the source read) or wait_group N (the
// writes done) retires all but its newest N groups.
//
// The simulator reads the source when the store is issued and writes the
// global bytes when its group is retired (or the CTA ends), and until then
// a write to the source's shared bytes, by any thread, is a Fault of kind
// "async": the hardware may read them any time before the wait. Not
// modelled: the proxy fence that generic writes of the source need before
// the store (fence.proxy.async.shared::cta), and the source's bytes under
// racecheck and initcheck.

// bulkStore is a tensor store in flight, or a bulk store (plain: n
// bytes to global address dst).
type bulkStore struct {
	tm       TensorMap
	plain    bool
	dst      uint64
	origin   []int64
	data     []byte // the box, row after row, as it was read
	src, n   int    // the shared bytes it reads
	warp     int
	lane, pc int
	done     bool
}

// decodeTensorStore: cp.async.bulk.tensor.Nd.global.shared::cta
// {.tile}.bulk_group [tmap, {c0, …}], [src].
func decodeTensorStore(d *decoder, rank int) error {
	if !d.has("global") || d.has("im2col") || d.has("L2::cache_hint") || d.has("reduce") {
		return d.errorf("of the tensor stores only shared::cta → global in tile mode with bulk_group is simulated")
	}
	if err := d.nargs(2); err != nil {
		return err
	}
	tmap, coords, err := tensorOperand(d, 0, rank)
	if err != nil {
		return err
	}
	src, err := d.address(1)
	if err != nil {
		return err
	}
	pc := d.in.pc
	d.in.run = func(w *warp, m uint32) error {
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			tm, origin, err := w.tensorMapAt(&tmap, coords, rank, l)
			if err != nil {
				return err
			}
			rows := 1
			for _, b := range tm.Box[1:] {
				rows *= int(b)
			}
			n := rows * int(tm.Box[0]) * tm.ElemBytes
			sa := w.addr(&src, l)
			if sa >= sharedWindow {
				sa -= sharedWindow
			}
			sa &= 0xffffffff
			if sa%128 != 0 {
				return w.faultAddr(l, "memcheck", sa, "cp.async.bulk.tensor from shared %#x: not 128-byte aligned", sa)
			}
			if sa+uint64(n) > uint64(w.c.l.sharedSize) {
				return w.faultAddr(l, "memcheck", sa, "cp.async.bulk.tensor reads %d bytes at shared offset %#x: the CTA has %d", n, sa, w.c.l.sharedSize)
			}
			a := &w.c.async
			if err := a.check(w, l, int(sa), n, false); err != nil {
				return err
			}
			data := make([]byte, n)
			for o := 0; o < n; o += 16 {
				t := swizzleOff(sa+uint64(o), tm.Swizzle) - sa
				if t+16 > uint64(n) {
					return w.faultAddr(l, "memcheck", sa, "cp.async.bulk.tensor: a %d-byte swizzle takes the box of %d bytes at %#x out of itself (box rows × 8 must fill whole swizzle atoms)", tm.Swizzle, n, sa)
				}
				copy(data[o:o+16], w.c.shared[sa+t:sa+t+16])
			}
			a.addStore(w, l, bulkStore{tm: tm, origin: origin, data: data, src: int(sa), n: n, warp: w.id, lane: l, pc: pc})
		}
		return nil
	}
	return nil
}

// decodeBulkStore: cp.async.bulk.global.shared::cta.bulk_group [dst],
// [src], size (PTX ISA §9.7.9.25.4.1): size bytes of shared memory
// written to global memory, both addresses and the size multiples of 16;
// it joins its thread's bulk async-group as a tensor store does, its
// source read when issued and its bytes written when the group retires.
func decodeBulkStore(d *decoder) error {
	if !d.has("shared::cta") || d.has("L2::cache_hint") || d.has("cp_mask") {
		return d.errorf("of the bulk stores only shared::cta → global with bulk_group is simulated")
	}
	if err := d.nargs(3); err != nil {
		return err
	}
	dst, src, size, err := d.copyOperands()
	if err != nil {
		return err
	}
	pc := d.in.pc
	d.in.run = func(w *warp, m uint32) error {
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			n := int(uint32(w.val(&size, l)))
			da := w.addr(&dst, l)
			sa := w.addr(&src, l)
			if sa >= sharedWindow {
				sa -= sharedWindow
			}
			sa &= 0xffffffff
			if n%16 != 0 || da%16 != 0 || sa%16 != 0 {
				return w.faultAddr(l, "memcheck", da, "cp.async.bulk of %d bytes from shared %#x to %#x: sizes and addresses must be multiples of 16", n, sa, da)
			}
			if sa+uint64(n) > uint64(w.c.l.sharedSize) {
				return w.faultAddr(l, "memcheck", sa, "cp.async.bulk reads %d bytes at shared offset %#x: the CTA has %d", n, sa, w.c.l.sharedSize)
			}
			if _, _, err := w.c.l.mem.find(da, n); n > 0 && err != nil {
				return w.faultAddr(l, "memcheck", da, "cp.async.bulk writes %d bytes: %v", n, err)
			}
			a := &w.c.async
			if err := a.check(w, l, int(sa), n, false); err != nil {
				return err
			}
			data := make([]byte, n)
			copy(data, w.c.shared[sa:sa+uint64(n)])
			a.addStore(w, l, bulkStore{plain: true, dst: da, data: data, src: int(sa), n: n, warp: w.id, lane: l, pc: pc})
		}
		return nil
	}
	return nil
}

// addStore puts st in flight: its source bytes read until it retires,
// in lane l's open bulk async-group.
func (a *asyncCTA) addStore(w *warp, l int, st bulkStore) {
	a.stores = append(a.stores, st)
	for i := st.src; i < st.src+st.n; i++ {
		a.readBy[i]++
	}
	a.reading++
	t := a.thread(w, l)
	t.stores.open = append(t.stores.open, len(a.stores)-1)
}

// checkStores reports a write to shared bytes that a tensor store in
// flight still reads.
func (a *asyncCTA) checkStores(w *warp, l, off, n int) error {
	for i := off; i < off+n; i++ {
		if a.readBy[i] == 0 {
			continue
		}
		for _, st := range a.stores {
			if !st.done && i >= st.src && i < st.src+st.n {
				in := w.c.l.e.prog[st.pc]
				return w.faultAddr(l, "async", uint64(i), "writes shared byte %#x, which the bulk or tensor store issued by warp %d lane %d at line %d `%s` may still read: that thread has not waited for it (cp.async.bulk.wait_group.read, then a barrier for other threads)",
					i, st.warp, st.lane, in.line, in.text)
			}
		}
	}
	return nil
}

// finishStore retires tensor store i: its source is no longer read, and
// its box's elements inside the tensor are written to global memory.
func (a *asyncCTA) finishStore(c *cta, i int) error {
	st := &a.stores[i]
	if st.done {
		return nil
	}
	st.done = true
	for j := st.src; j < st.src+st.n; j++ {
		a.readBy[j]--
	}
	a.reading--
	if st.plain {
		g, off, err := c.l.mem.find(st.dst, st.n)
		if err != nil {
			w := c.warps[st.warp]
			w.cur = c.l.e.prog[st.pc]
			return w.faultAddr(st.lane, "memcheck", st.dst, "cp.async.bulk writes %d bytes: %v", st.n, err)
		}
		copy(g.data[off:off+st.n], st.data)
		return nil
	}
	m := st.tm
	inner := int(m.Box[0]) * m.ElemBytes
	return m.rows(st.origin, func(r int, addr uint64, lo, hi int64) error {
		n := int(hi-lo) * m.ElemBytes
		dst := addr + uint64(lo)*uint64(m.ElemBytes)
		g, off, err := c.l.mem.find(dst, n)
		if err != nil {
			w := c.warps[st.warp]
			w.cur = c.l.e.prog[st.pc]
			return w.faultAddr(st.lane, "memcheck", dst, "cp.async.bulk.tensor writes %d bytes of box row %d: %v", n, r, err)
		}
		copy(g.data[off:off+n], st.data[r*inner+int(lo-st.origin[0])*m.ElemBytes:])
		return nil
	})
}

// decodeBulkGroup: cp.async.bulk.commit_group; cp.async.bulk.wait_group
// N and cp.async.bulk.wait_group.read N (retiring every group of the
// thread's tensor stores but the newest N).
func decodeBulkGroup(d *decoder) error {
	if d.has("commit_group") {
		if err := d.nargs(0); err != nil {
			return err
		}
		d.in.run = func(w *warp, m uint32) error {
			for ; m != 0; m &= m - 1 {
				w.c.async.thread(w, bits.TrailingZeros32(m)).stores.commit()
			}
			return nil
		}
		return nil
	}
	keep, err := groupCount(d)
	if err != nil {
		return err
	}
	d.in.run = func(w *warp, m uint32) error {
		for ; m != 0; m &= m - 1 {
			t := w.c.async.thread(w, bits.TrailingZeros32(m))
			if err := t.stores.retire(keep, func(i int) error { return w.c.async.finishStore(w.c, i) }); err != nil {
				return err
			}
		}
		return nil
	}
	return nil
}
