package ptxsim

import (
	"math"
	"math/bits"
	"strings"
)

// Loads, stores, atomics and reductions (PTX ISA §9.7.9.8 ld, §9.7.9.10 st,
// §9.7.13.5 atom, §9.7.13.6 red). Every access is checked: inside a
// buffer (global), inside the CTA's shared memory or the parameters, and
// aligned to its size (the whole vector for .v2/.v4). Cache operators,
// eviction priorities and memory-order qualifiers are accepted and do
// nothing: the simulator has no caches, and a CTA's warps interleave only
// at barriers.

func init() {
	register(decodeLd, "ld", "ldu")
	register(decodeSt, "st")
	register(decodeAtom, "atom", "red")
	register(decodeNop, "prefetch", "prefetchu", "membar", "fence", "nanosleep", "pmevent", "discard", "griddepcontrol", "applypriority", "createpolicy")
}

func (d *decoder) space() (space, error) {
	for _, m := range d.mods {
		switch {
		case m == "global":
			return spGlobal, nil
		case m == "shared" || strings.HasPrefix(m, "shared::"):
			if m == "shared::cluster" {
				// a CTA is its own cluster: its shared window is the cluster's
				return spShared, nil
			}
			return spShared, nil
		case m == "param" || strings.HasPrefix(m, "param::"):
			return spParam, nil
		case m == "local" || m == "const" || m == "tex":
			return 0, d.errorf("the .%s state space is not simulated", m)
		}
	}
	return spGeneric, nil
}

func (d *decoder) vecWidth() int {
	for _, m := range d.mods {
		switch m {
		case "v2":
			return 2
		case "v4":
			return 4
		case "v8":
			return 8
		}
	}
	return 1
}

// globalBytes returns the n bytes at a global address, checked.
func (w *warp) globalBytes(addr uint64, n, l int, what string) ([]byte, error) {
	if addr%uint64(n) != 0 {
		return nil, w.faultAddr(l, "memcheck", addr, "misaligned %s of %d bytes (the address must be a multiple of %d)", what, n, n)
	}
	return w.globalRange(addr, n, l, what)
}

// globalRange is globalBytes without the alignment check, for an access
// whose alignment is its caller's (cp.async: cp-size, not the src-size it
// reads, which may be 12).
func (w *warp) globalRange(addr uint64, n, l int, what string) ([]byte, error) {
	mem := w.c.l.mem
	b, off, err := mem.find(addr, n)
	if err != nil {
		return nil, w.faultAddr(l, "memcheck", addr, "invalid global %s: %v", what, err)
	}
	return b.data[off : off+n], nil
}

// sharedOff checks an n-byte shared access and returns its offset.
func (w *warp) sharedOff(addr uint64, n, l int, what string) (int, error) {
	size := w.c.l.sharedSize
	if addr >= uint64(size) || addr+uint64(n) > uint64(size) {
		return 0, w.faultAddr(l, "memcheck", addr, "invalid shared %s of %d bytes at offset %#x: the CTA has %d bytes of shared memory (%d static, %d dynamic)",
			what, n, addr, size, w.c.l.e.staticShared, w.c.l.cfg.DynamicShared)
	}
	if addr%uint64(n) != 0 {
		return 0, w.faultAddr(l, "memcheck", addr, "misaligned shared %s of %d bytes at offset %#x", what, n, addr)
	}
	return int(addr), nil
}

// sharedRead checks an n-byte shared read (bounds, cp.async in flight,
// racecheck) and returns the bytes.
func (w *warp) sharedRead(addr uint64, n, l int, what string) ([]byte, error) {
	off, err := w.sharedOff(addr, n, l, what)
	if err != nil {
		return nil, err
	}
	c := w.c
	if err := c.async.check(w, l, off, n, false); err != nil {
		return nil, err
	}
	if c.race != nil {
		if err := c.race.read(w, l, off, n, w.cur.pc); err != nil {
			return nil, err
		}
	}
	return c.shared[off : off+n], nil
}

// sharedWrite checks a shared write and performs it.
func (w *warp) sharedWrite(addr uint64, data []byte, l int, what string) error {
	n := len(data)
	off, err := w.sharedOff(addr, n, l, what)
	if err != nil {
		return err
	}
	c := w.c
	if err := c.async.check(w, l, off, n, true); err != nil {
		return err
	}
	if c.race != nil {
		if err := c.race.write(w, w.id, l, c.sync.mclock[w.id], off, c.shared[off:off+n], data, w.cur.pc); err != nil {
			return err
		}
	}
	copy(c.shared[off:], data)
	return nil
}

// load reads n bytes in state space sp (generic addresses go to shared
// memory inside its window, to global memory elsewhere).
func (w *warp) load(sp space, addr uint64, n, l int) ([]byte, error) {
	switch sp {
	case spGeneric:
		if addr >= sharedWindow && addr < sharedWindow+windowSize {
			return w.sharedRead(addr-sharedWindow, n, l, "load")
		}
		return w.globalBytes(addr, n, l, "load")
	case spGlobal:
		return w.globalBytes(addr, n, l, "load")
	case spShared:
		return w.sharedRead(addr&0xffffffff, n, l, "load")
	case spParam:
		p := w.c.l.params
		if addr+uint64(n) > uint64(len(p)) {
			return nil, w.faultAddr(l, "memcheck", addr, "parameter read of %d bytes at offset %d: the parameters take %d bytes", n, addr, len(p))
		}
		return p[addr : addr+uint64(n)], nil
	}
	return nil, w.fault(l, "state space %v", sp)
}

// store writes data in state space sp.
func (w *warp) store(sp space, addr uint64, data []byte, l int) error {
	switch sp {
	case spGeneric:
		if addr >= sharedWindow && addr < sharedWindow+windowSize {
			return w.sharedWrite(addr-sharedWindow, data, l, "store")
		}
	case spShared:
		return w.sharedWrite(addr&0xffffffff, data, l, "store")
	}
	b, err := w.globalBytes(addr, len(data), l, "store")
	if err != nil {
		return err
	}
	copy(b, data)
	return nil
}

// decodeLd: ld{.space}{...}{.vN}.type d, [a].
func decodeLd(d *decoder) error {
	sp, err := d.space()
	if err != nil {
		return err
	}
	t, err := d.typ()
	if err != nil {
		return err
	}
	if err := d.nargs(2, 3); err != nil { // a third operand is a cache policy
		return err
	}
	n := d.vecWidth()
	var dsts []operand
	if n > 1 {
		if dsts, err = d.vec(0, t, false); err != nil {
			return err
		}
		if len(dsts) != n {
			return d.errorf("%d registers for .v%d", len(dsts), n)
		}
	} else {
		o, err := d.dst(0)
		if err != nil {
			return err
		}
		dsts = []operand{o}
	}
	a, err := d.address(1)
	if err != nil {
		return err
	}
	if a.symSpace == spParam && sp != spParam {
		return d.errorf("parameter %s read outside .param", a.sym)
	}
	if a.symSpace == spShared && sp == spGeneric {
		a.off += sharedWindow
	}
	es := t.size()
	total := es * n
	d.in.run = func(w *warp, m uint32) error {
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			b, err := w.load(sp, w.addr(&a, l), total, l)
			if err != nil {
				return err
			}
			for i := range dsts {
				v := le(b[i*es:], es)
				if t.signed() && es < 8 {
					v = uint64(t.sext(v))
					if rt := dsts[i].rtyp; rt != tyNone && rt.size() < 8 {
						v &= rt.mask()
					}
				}
				w.set(&dsts[i], l, v)
			}
		}
		return nil
	}
	return nil
}

// decodeSt: st{.space}{...}{.vN}.type [a], b.
func decodeSt(d *decoder) error {
	sp, err := d.space()
	if err != nil {
		return err
	}
	if sp == spParam {
		return d.errorf("stores to kernel parameters are not allowed")
	}
	t, err := d.typ()
	if err != nil {
		return err
	}
	if err := d.nargs(2, 3); err != nil {
		return err
	}
	n := d.vecWidth()
	var srcs []operand
	if n > 1 {
		if srcs, err = d.vec(1, t, true); err != nil {
			return err
		}
		if len(srcs) != n {
			return d.errorf("%d values for .v%d", len(srcs), n)
		}
	} else {
		o, err := d.src(1, t)
		if err != nil {
			return err
		}
		srcs = []operand{o}
	}
	a, err := d.address(0)
	if err != nil {
		return err
	}
	if a.symSpace == spShared && sp == spGeneric {
		a.off += sharedWindow
	}
	es := t.size()
	total := es * n
	if total > 32 {
		return d.errorf("a %d-byte store", total)
	}
	d.in.run = func(w *warp, m uint32) error {
		var buf [32]byte
		data := buf[:total]
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			addr := w.addr(&a, l)
			for i := range srcs {
				if srcs[i].kind == oSink {
					// a store of _ leaves the element as it is
					old, err := w.load(sp, addr, total, l)
					if err != nil {
						return err
					}
					copy(data[i*es:(i+1)*es], old[i*es:])
					continue
				}
				putLE(data[i*es:], es, w.val(&srcs[i], l))
			}
			if err := w.store(sp, addr, data, l); err != nil {
				return err
			}
		}
		return nil
	}
	return nil
}

// atomOp returns the new memory value and the value returned for an
// atomic operation on type t (PTX ISA §9.7.13.5).
func atomOp(d *decoder, t ptxType) (func(old, b, c uint64) uint64, error) {
	mask := t.mask()
	op := ""
	for _, m := range d.mods {
		switch m {
		case "add", "inc", "dec", "min", "max", "and", "or", "xor", "cas", "exch":
			op = m
		}
	}
	switch op {
	case "add":
		switch t {
		case tyF32:
			// atom.add.f32 rounds to nearest and flushes subnormal inputs
			// and results to zero (PTX ISA §9.7.13.5)
			return func(old, b, _ uint64) uint64 { return b32(ftz32(ftz32(f32(old)) + ftz32(f32(b)))) }, nil
		case tyF64:
			return func(old, b, _ uint64) uint64 { return b64(f64(old) + f64(b)) }, nil
		case tyF16, tyBF16, tyF16x2, tyBF16x2:
			f, pair, _ := halfFormat(t)
			h := halfOp(f, pair, rn, func(xs ...float64) float64 { return xs[0] + xs[1] })
			return func(old, b, _ uint64) uint64 { return h(old, b) }, nil
		}
		return func(old, b, _ uint64) uint64 { return (old + b) & mask }, nil
	case "inc":
		return func(old, b, _ uint64) uint64 {
			if old&mask >= b&mask {
				return 0
			}
			return (old + 1) & mask
		}, nil
	case "dec":
		return func(old, b, _ uint64) uint64 {
			if old&mask == 0 || old&mask > b&mask {
				return b & mask
			}
			return (old - 1) & mask
		}, nil
	case "min", "max":
		isMax := op == "max"
		switch {
		case t == tyF32:
			return func(old, b, _ uint64) uint64 {
				x, y := float64(f32(old)), float64(f32(b))
				if math.IsNaN(y) || (less(x, y) == isMax) && !math.IsNaN(x) {
					if math.IsNaN(y) {
						return old
					}
					return b & mask
				}
				return old
			}, nil
		case t.signed():
			return func(old, b, _ uint64) uint64 {
				if (t.sext(b) > t.sext(old)) == isMax && t.sext(b) != t.sext(old) {
					return b & mask
				}
				return old & mask
			}, nil
		}
		return func(old, b, _ uint64) uint64 {
			if (b&mask > old&mask) == isMax && b&mask != old&mask {
				return b & mask
			}
			return old & mask
		}, nil
	case "and":
		return func(old, b, _ uint64) uint64 { return old & b & mask }, nil
	case "or":
		return func(old, b, _ uint64) uint64 { return (old | b) & mask }, nil
	case "xor":
		return func(old, b, _ uint64) uint64 { return (old ^ b) & mask }, nil
	case "exch":
		return func(_, b, _ uint64) uint64 { return b & mask }, nil
	case "cas":
		return func(old, b, c uint64) uint64 {
			if old&mask == b&mask {
				return c & mask
			}
			return old & mask
		}, nil
	}
	return nil, d.errorf("no atomic operation")
}

// decodeAtom: atom{...}{.space}.op.type d, [a], b{, c} and red{...}.op.type [a], b.
func decodeAtom(d *decoder) error {
	sp, err := d.space()
	if err != nil {
		return err
	}
	if sp == spParam {
		return d.errorf("atomics on parameters")
	}
	t, err := d.typ()
	if err != nil {
		return err
	}
	if d.vecWidth() > 1 {
		return d.errorf("vector atomics are not simulated")
	}
	f, err := atomOp(d, t)
	if err != nil {
		return err
	}
	isRed := d.base == "red"
	cas := d.has("cas")
	first := 1
	var dst operand
	if isRed {
		first = 0
		if err := d.nargs(2, 3); err != nil {
			return err
		}
	} else {
		want := 3
		if cas {
			want = 4
		}
		if err := d.nargs(want, want+1); err != nil {
			return err
		}
		if dst, err = d.dst(0); err != nil {
			return err
		}
	}
	a, err := d.address(first)
	if err != nil {
		return err
	}
	if a.symSpace == spShared && sp == spGeneric {
		a.off += sharedWindow
	}
	b, err := d.src(first+1, t)
	if err != nil {
		return err
	}
	var c operand
	if cas {
		if c, err = d.src(first+2, t); err != nil {
			return err
		}
	}
	n := t.size()
	d.in.run = func(w *warp, m uint32) error {
		mem := w.c.l.mem
		mem.atom.Lock()
		defer mem.atom.Unlock()
		// lanes in ascending order, each atomic on its own
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			addr := w.addr(&a, l)
			var p []byte
			var err error
			if sp == spShared || sp == spGeneric && addr >= sharedWindow && addr < sharedWindow+windowSize {
				off := addr & 0xffffffff
				if sp == spGeneric {
					off = addr - sharedWindow
				}
				var o int
				if o, err = w.sharedOff(off, n, l, "atomic"); err == nil {
					if err = w.c.async.check(w, l, o, n, true); err == nil {
						p = w.c.shared[o : o+n]
					}
				}
			} else {
				p, err = w.globalBytes(addr, n, l, "atomic")
			}
			if err != nil {
				return err
			}
			old := le(p, n)
			putLE(p, n, f(old, w.val(&b, l), w.val(&c, l)))
			if !isRed {
				w.set(&dst, l, old)
			}
		}
		return nil
	}
	return nil
}

func decodeNop(d *decoder) error {
	if d.base == "fence" && d.has("proxy") {
		// fence.proxy.async orders generic and async proxies: no effect here
	}
	d.in.run = func(*warp, uint32) error { return nil }
	return nil
}
