package ptxsim

import "fmt"

// raceShadow is racecheck-lite: for every byte of shared memory, the last
// write (its warp, the value it wrote and the value before it) and the
// reads since, each tagged with the barrier epoch. Two accesses by
// different warps in the same epoch (no barrier released between them),
// at least one a write, are a hazard, as compute-sanitizer --tool
// racecheck reports, except where the outcome cannot depend on their
// order: writes of the value the byte already holds from the other warp's
// write (replicated layouts store the same value from several warps), and
// reads of a byte whose write in this epoch did not change it. Accesses
// within one warp are ordered by the lockstep model and never reported;
// atomics are not tracked. Named barriers that release only some warps
// advance the epoch for all of them, so a race across such a barrier can
// be missed.
type raceShadow struct {
	b []shadow
}

type shadow struct {
	wEpoch, rEpoch uint64
	wWarp, rWarp   int16 // rWarp -2: several warps read
	wLane, rLane   int8
	wVal, wPrev    byte // the value written, and the value before this epoch's first write
	wPC, rPC       int32
}

func newRaceShadow(n int) *raceShadow { return &raceShadow{b: make([]shadow, n)} }

// read records lane l of w reading [off, off+n) and reports a hazard.
func (r *raceShadow) read(w *warp, l, off, n, pc int) error {
	ep := w.c.epoch
	me := int16(w.id)
	for i := off; i < off+n; i++ {
		s := &r.b[i]
		if s.wEpoch == ep && s.wWarp != me && s.wPrev != s.wVal {
			return w.raceFault(l, "read", "write", int(s.wWarp), int(s.wLane), int(s.wPC), i)
		}
		switch {
		case s.rEpoch != ep:
			s.rEpoch, s.rWarp, s.rLane, s.rPC = ep, me, int8(l), int32(pc)
		case s.rWarp != me:
			s.rWarp = -2
		}
	}
	return nil
}

// write records lane l of w writing data over old at off and reports a hazard.
func (r *raceShadow) write(w *warp, l, off int, old, data []byte, pc int) error {
	ep := w.c.epoch
	me := int16(w.id)
	for j, v := range data {
		i := off + j
		s := &r.b[i]
		if s.wEpoch == ep && s.wWarp != me && s.wVal != v {
			return w.raceFault(l, "write", "write", int(s.wWarp), int(s.wLane), int(s.wPC), i)
		}
		if s.rEpoch == ep && s.rWarp != me && old[j] != v {
			return w.raceFault(l, "write", "read", int(s.rWarp), int(s.rLane), int(s.rPC), i)
		}
		if s.wEpoch != ep {
			s.wPrev = old[j]
		}
		s.wEpoch, s.wWarp, s.wLane, s.wVal, s.wPC = ep, me, int8(l), v, int32(pc)
	}
	return nil
}

func (w *warp) raceFault(l int, what, other string, ow, ol, opc, at int) error {
	prog := w.c.l.e.prog
	where := ""
	if opc >= 0 && opc < len(prog) {
		where = fmt.Sprintf(" at line %d `%s`", prog[opc].line, prog[opc].text)
	}
	by := fmt.Sprintf("warp %d lane %d", ow, ol)
	if ow == -2 {
		by = "several other warps"
	}
	return w.faultAddr(l, "racecheck", uint64(at), "shared-memory hazard: this %s of byte %#x conflicts with a %s by %s%s, with no barrier between them",
		what, at, other, by, where)
}
