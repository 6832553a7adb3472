package ptxsim

import "fmt"

// raceShadow is racecheck-lite: a happens-before check of shared-memory
// accesses at warp granularity. Barriers (bar.sync) order everything
// before them before everything after (a CTA-wide epoch); mbarriers order
// what a warp did before arriving (or before issuing a copy that completes
// on the mbarrier) before what a warp does after seeing that phase
// complete (mclock: each warp's count of such releases; seen: what each
// warp has acquired of the others'). For every byte the shadow keeps the
// last write (its warp, epoch, release count, the value written and the
// value before) and, per warp, its last read. Two accesses by different
// warps that are not ordered, at least one a write, are a hazard, as
// compute-sanitizer --tool racecheck reports, except where the outcome
// cannot depend on their order: a write of the value the byte already
// holds from the other warp's write (replicated layouts store one value
// from several warps) or over what the other warp read, and a read of a
// byte whose unordered write did not change it. Accesses within one warp
// are ordered by the lockstep model; atomics are not tracked. Named
// barriers that release only some warps advance the epoch for all, so a
// race across such a barrier can be missed.
type raceShadow struct {
	races bool // report hazards
	init  bool // report reads of bytes never written (initcheck)
	nw    int
	b     []shadow
	reads []uint64 // byte i, warp w: epoch<<32 | release count+1 of w's last read (0: none)
	rPC   []int32  // the last read of byte i, for messages
	rLane []int8
	rWarp []int16
	// wgRead counts, per byte, the wgmma.mma_async in flight that read it
	// (each warp's part, from its issue to the wgmma.wait_group of that
	// warp that retires it)
	wgRead []int16
}

type shadow struct {
	wEpoch      uint64
	wWarp       int16
	wLane       int8
	wVal, wPrev byte
	wMC         uint32
	wPC         int32
}

func newRaceShadow(n, nwarps int) *raceShadow {
	return &raceShadow{nw: nwarps, b: make([]shadow, n), reads: make([]uint64, n*nwarps),
		rPC: make([]int32, n), rLane: make([]int8, n), rWarp: make([]int16, n),
		wgRead: make([]int16, n)}
}

// syncClock is the mbarrier ordering state of a CTA.
type syncClock struct {
	mclock []uint32   // per warp: releases so far
	seen   [][]uint32 // seen[u][w]: releases of w that u has acquired
}

func (s *syncClock) reset(nwarps int) {
	if len(s.mclock) != nwarps {
		s.mclock = make([]uint32, nwarps)
		s.seen = make([][]uint32, nwarps)
		for i := range s.seen {
			s.seen[i] = make([]uint32, nwarps)
		}
	}
	clear(s.mclock)
	for _, r := range s.seen {
		clear(r)
	}
}

// release is a release by warp w (an arrival): returns the count its
// earlier accesses carry and advances its clock.
func (s *syncClock) release(w int) uint32 {
	mc := s.mclock[w]
	s.mclock[w]++
	return mc
}

// ordered says whether an access by warp w at release count mc in this
// epoch happens before warp u's access now.
func (r *raceShadow) ordered(c *cta, u, w int, mc uint32) bool {
	return u == w || c.sync.seen[u][w] > mc
}

// read records lane l of w reading [off, off+n) and reports a hazard.
func (r *raceShadow) read(w *warp, l, off, n, pc int) error {
	c := w.c
	ep := c.epoch
	me := w.id
	rec := uint64(uint32(ep))<<32 | uint64(c.sync.mclock[me]+1)
	for i := off; i < off+n; i++ {
		s := &r.b[i]
		if r.init && s.wEpoch < c.start {
			return w.faultAddr(l, "initcheck", uint64(i), "reads shared byte %#x, which nothing has written since the CTA started", i)
		}
		if !r.races {
			continue
		}
		if s.wEpoch == ep && !r.ordered(c, me, int(s.wWarp), s.wMC) && s.wPrev != s.wVal {
			return w.raceFault(l, "read", "write", int(s.wWarp), int(s.wLane), int(s.wPC), i)
		}
		r.reads[i*r.nw+me] = rec
		r.rPC[i], r.rLane[i], r.rWarp[i] = int32(pc), int8(l), int16(me)
	}
	return nil
}

// write records warp me (lane l, release count mc) writing data over old
// at off and reports a hazard; w is the warp whose instruction does it
// (a copy lands inside another warp's wait).
func (r *raceShadow) write(w *warp, me, l int, mc uint32, off int, old, data []byte, pc int) error {
	c := w.c
	ep := c.epoch
	for j, v := range data {
		i := off + j
		s := &r.b[i]
		if !r.races {
			s.wEpoch = ep
			continue
		}
		if r.wgRead[i] > 0 && old[j] != v {
			w := c.warps[me]
			cur := w.cur
			if pc >= 0 && pc < len(w.c.l.e.prog) {
				w.cur = w.c.l.e.prog[pc]
			}
			err := w.faultAddr(l, "wgmma", uint64(i), "writes shared byte %#x, which a wgmma.mma_async of warp %d in flight reads: a wgmma.wait_group of every warp that issued it must retire it before the write (a barrier after the waits orders them)", i, c.wgReader(i))
			w.cur = cur
			return err
		}
		if s.wEpoch == ep && !r.ordered(c, me, int(s.wWarp), s.wMC) && s.wVal != v {
			return c.warps[me].raceFaultAt(l, pc, "write", "write", int(s.wWarp), int(s.wLane), int(s.wPC), i)
		}
		if old[j] != v {
			for u := 0; u < r.nw; u++ {
				rec := r.reads[i*r.nw+u]
				if u == me || rec == 0 || rec>>32 != uint64(uint32(ep)) {
					continue
				}
				if !r.ordered(c, me, u, uint32(rec)-1) {
					lane, rpc := int(r.rLane[i]), int(r.rPC[i])
					if int(r.rWarp[i]) != u {
						lane, rpc = -1, -1
					}
					return c.warps[me].raceFaultAt(l, pc, "write", "read", u, lane, rpc, i)
				}
			}
		}
		if s.wEpoch != ep {
			s.wPrev = old[j]
		}
		s.wEpoch, s.wWarp, s.wLane, s.wVal, s.wMC, s.wPC = ep, int16(me), int8(l), v, mc, int32(pc)
	}
	return nil
}

func (w *warp) raceFault(l int, what, other string, ow, ol, opc, at int) error {
	return w.raceFaultAt(l, -1, what, other, ow, ol, opc, at)
}

// raceFaultAt reports a hazard of lane l of w (at instruction pc, or the
// current one if pc < 0) with an access by warp ow.
func (w *warp) raceFaultAt(l, pc int, what, other string, ow, ol, opc, at int) error {
	prog := w.c.l.e.prog
	where := ""
	if opc >= 0 && opc < len(prog) {
		where = fmt.Sprintf(" at line %d `%s`", prog[opc].line, prog[opc].text)
	}
	by := fmt.Sprintf("warp %d", ow)
	if ol >= 0 {
		by += fmt.Sprintf(" lane %d", ol)
	}
	cur := w.cur
	if pc >= 0 && pc < len(prog) {
		w.cur = prog[pc]
	}
	err := w.faultAddr(l, "racecheck", uint64(at), "shared-memory hazard: this %s of byte %#x conflicts with a %s by %s%s, with no barrier or mbarrier wait ordering them",
		what, at, other, by, where)
	w.cur = cur
	return err
}

// wgReader is a warp with a wgmma in flight that reads shared byte i (-1
// if none), for messages.
func (c *cta) wgReader(i int) int {
	for _, w := range c.warps {
		for _, s := range w.wg.smem {
			for _, o := range s.offs {
				if i >= int(o) && i < int(o)+s.n {
					return w.id
				}
			}
		}
	}
	return -1
}
