package cuda

import (
	"os"
	"sync"
)

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
// recently is unlocked (evict). A range sharing a page with one locked in
// the process (by this policy or another machine's) is staged, the driver
// not asked (lockedPages), until those pages are unlocked. A loop that uploads from new memory every
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
	pages        *lockedPages // the process's locked pages (a test's own)
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
	return &pinPolicy{min: min, max: max, maxEvictions: 16, seen: map[uintptr]int64{}, locked: map[uintptr]*pinned{}, refused: map[uintptr]bool{}, pages: processPages}
}

// lockedPages is the pages of the ranges every pinPolicy of the process
// has locked. The driver locks whole pages, once in a process: a range
// sharing a page with one locked already (two machines uploading the same
// input, or two inputs sliced from one allocation) is refused with
// CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, which compute-sanitizer
// counts as an error of the program. So such a range is staged without
// asking the driver.
type lockedPages struct {
	mu   sync.Mutex
	page uintptr
	// spans: [first page, past the last page) of each locked range, by its address
	spans map[uintptr][2]uintptr
}

// processPages is the process's lockedPages, which every pinPolicy shares.
var processPages = newLockedPages(uintptr(os.Getpagesize()))

func newLockedPages(page uintptr) *lockedPages {
	return &lockedPages{page: page, spans: map[uintptr][2]uintptr{}}
}

func (l *lockedPages) span(addr uintptr, n int64) [2]uintptr {
	return [2]uintptr{addr / l.page, (addr + uintptr(n) + l.page - 1) / l.page}
}

// take records [addr, addr+n) as locked unless a page of it is locked
// already (then false).
func (l *lockedPages) take(addr uintptr, n int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.span(addr, n)
	for _, o := range l.spans {
		if s[0] < o[1] && o[0] < s[1] {
			return false
		}
	}
	l.spans[addr] = s
	return true
}

// release forgets the range locked at addr.
func (l *lockedPages) release(addr uintptr) {
	l.mu.Lock()
	delete(l.spans, addr)
	l.mu.Unlock()
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
	if !p.pages.take(addr, n) {
		return stageIt, nil // seen anew: asked again where it repeats, once those pages are free
	}
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
		p.pages.release(old.addr)
		p.evictions++
	}
	return lockIt, evict
}

// refusedMax bounds pinPolicy.refused, the ranges the driver refused
// (cleared when full: a range forgotten so is asked about again, where it
// repeats).
const refusedMax = 4096

// refuse records that the range at addr is staged for good.
func (p *pinPolicy) refuse(addr uintptr) {
	if len(p.refused) >= refusedMax {
		clear(p.refused)
	}
	p.refused[addr] = true
}

// took records the outcome of a lockIt: locked (with what the device side
// keeps), or refused.
func (p *pinPolicy) took(addr uintptr, n int64, pin any, ok bool) {
	if !ok {
		p.refuse(addr)
		p.pages.release(addr)
		return
	}
	p.locked[addr] = &pinned{addr: addr, n: n, last: p.tick, pin: pin}
	p.bytes += n
}

// drop forgets every locked range and returns them, to be unlocked.
func (p *pinPolicy) drop() map[uintptr]*pinned {
	l := p.locked
	for a := range l {
		p.pages.release(a)
	}
	p.locked, p.bytes = map[uintptr]*pinned{}, 0
	return l
}
