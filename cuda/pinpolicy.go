package cuda

// pinPolicy decides which host ranges a Stager page-locks in place
// (cuMemHostRegister) so that their uploads go to the device as one
// asynchronous copy straight from them, with no copy into the stager's
// slots first. It is the part of the stager that needs no device, kept
// apart so that CI tests it.
//
// The rule: a range of at least min bytes is locked the second time an
// upload comes from it (the same address and length: a training loop's
// batch filled in place, or a few batches taken in turn), not the first
// (a one-off upload would pay the locking, ~100 µs a MiB, for nothing).
// At most max bytes are locked at once; past that the range used least
// recently is unlocked (evict). A loop that uploads from new memory every
// time never repeats an address except where Go's allocator hands freed
// memory out again; so that such a loop does not keep locking and
// unlocking, the stager locks nothing new once it has evicted
// maxEvictions ranges. A range the driver refused to lock (memory it
// cannot lock, or pages another locked range shares) is never tried again.
type pinPolicy struct {
	min, max     int64
	maxEvictions int
	seen         map[uintptr]int64 // ranges uploaded from once: address → length
	locked       map[uintptr]*pinned
	refused      map[uintptr]bool
	bytes        int64 // locked
	tick         uint64
	evictions    int
}

// pinned is a locked range: its length and when it was last uploaded from.
type pinned struct {
	addr uintptr
	n    int64
	last uint64
	pin  any // what the device side keeps for it (its runtime.Pinner)
}

// pinAction is what the stager does with an upload.
type pinAction int

const (
	stageIt  pinAction = iota // through the slots, as before
	directly                  // from the locked range itself
	lockIt                    // lock the range (then directly, or stageIt if the driver refuses)
)

// seenMax bounds pinPolicy.seen (cleared when full).
const seenMax = 256

func newPinPolicy(min, max int64) *pinPolicy {
	return &pinPolicy{min: min, max: max, maxEvictions: 16, seen: map[uintptr]int64{}, locked: map[uintptr]*pinned{}, refused: map[uintptr]bool{}}
}

// upload is the action for an upload of n bytes from addr, and the locked
// ranges to unlock first (oldest first) when it is lockIt.
func (p *pinPolicy) upload(addr uintptr, n int64) (pinAction, []*pinned) {
	p.tick++
	if e, ok := p.locked[addr]; ok && n <= e.n {
		e.last = p.tick
		return directly, nil
	}
	if n < p.min || n > p.max || p.refused[addr] || p.evictions >= p.maxEvictions {
		return stageIt, nil
	}
	if _, ok := p.locked[addr]; ok { // locked shorter: the same memory grew
		return stageIt, nil
	}
	if p.seen[addr] != n {
		if len(p.seen) >= seenMax {
			clear(p.seen)
		}
		p.seen[addr] = n
		return stageIt, nil
	}
	delete(p.seen, addr)
	var evict []*pinned
	for p.bytes+n > p.max {
		var old *pinned
		for _, e := range p.locked {
			if old == nil || e.last < old.last {
				old = e
			}
		}
		evict = append(evict, old)
		p.bytes -= old.n
		delete(p.locked, old.addr)
		p.evictions++
	}
	return lockIt, evict
}

// took records the outcome of a lockIt: locked (with what the device side
// keeps), or refused.
func (p *pinPolicy) took(addr uintptr, n int64, pin any, ok bool) {
	if !ok {
		p.refused[addr] = true
		return
	}
	p.locked[addr] = &pinned{addr: addr, n: n, last: p.tick, pin: pin}
	p.bytes += n
}

// drop forgets every locked range and returns them, to be unlocked.
func (p *pinPolicy) drop() map[uintptr]*pinned {
	l := p.locked
	p.locked, p.bytes = map[uintptr]*pinned{}, 0
	return l
}
