//go:build tilefuse_cuda

package cuda

import (
	"fmt"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"
)

// MemInfo is the device's free and total memory in bytes (cuMemGetInfo):
// what every context on the GPU has left, not only this process.
func (d *Device) MemInfo() (free, total int64, err error) {
	err = d.Do(func() error {
		var err error
		free, total, err = cu.MemInfo()
		return err
	})
	if err != nil {
		err = fmt.Errorf("cuda: cuMemGetInfo: %w", err)
	}
	return free, total, err
}

// Stager copies host memory to the device through page-locked (pinned)
// staging memory (cuMemHostAlloc), asynchronously: Upload copies the bytes
// into a slot of a ring and enqueues cuMemcpyHtoDAsync from there on the
// default stream, so that the copy is ordered before the kernels launched
// after it and the host goes on (copying the next piece while the DMA
// engine moves this one; a piece is copied by several cores on a machine
// with many, Workers). A slot is reused only after an event recorded
// behind its last copy has completed, so the host never overwrites bytes
// still being copied. Pieces of one upload fill the slots in turn; small
// uploads share a slot.
//
// Uploading straight from pageable Go memory (Thread.Upload) makes the
// driver stage the bytes itself and return only once they are on the
// device.
type Stager struct {
	d     *Device
	mem   unsafe.Pointer // slots × slot bytes, page-locked
	slot  int64
	ev    []cu.Event // per slot: recorded after its last copy
	pend  []bool     // ev recorded and not yet waited for
	cur   int
	off   int64 // bytes of slot cur in use
	Bytes int64 // bytes that went through the stager
	// Workers is how many cores copy a piece into its slot (parallelCopy;
	// NewStager: 4 on a machine of 8 or more cores, else 1)
	Workers int
	// Direct is the bytes of Bytes that UploadKept sent straight from
	// host memory it had page-locked
	Direct int64
	pins   *pinPolicy // UploadKept's locked ranges; nil: LockRepeated(false)
}

// Bounds of the host memory UploadKept locks in place: ranges of at least
// lockMin bytes, at most lockMax bytes at once.
const (
	lockMin = 256 << 10
	lockMax = 256 << 20
)

// NewStager allocates slots × slotBytes of pinned host memory and an event
// per slot.
func (d *Device) NewStager(slotBytes int64, slots int) (*Stager, error) {
	if slotBytes <= 0 || slots < 2 {
		return nil, fmt.Errorf("cuda: stager of %d slots of %d bytes: want at least 2 slots of at least 1 byte", slots, slotBytes)
	}
	s := &Stager{d: d, slot: slotBytes, ev: make([]cu.Event, slots), pend: make([]bool, slots), Workers: stageWorkers(), pins: newPinPolicy(lockMin, lockMax)}
	err := d.Do(func() error {
		var err error
		if p, ok := d.freePinned.take(slotBytes * int64(slots)); ok {
			s.mem = p
		} else if s.mem, err = memHostAlloc(slotBytes * int64(slots)); err != nil {
			return err
		}
		for i := range s.ev {
			if s.ev[i], err = cu.MakeEvent(cu.DisableTiming); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("cuda: stager: %w", err)
	}
	return s, nil
}

// PinnedBytes is the page-locked memory the stager holds.
func (s *Stager) PinnedBytes() int64 { return s.slot * int64(len(s.ev)) }

// Upload enqueues the copy of host (a []float32, []float64 or []int32) into
// the first bytes of b. The copy completes in stream order: kernels launched
// after it read the new bytes, and a synchronous download or a Timer's Stop
// after it waits for it. host may change as soon as Upload returns.
func (s *Stager) Upload(t *Thread, b *Buffer, host any) error {
	if err := t.check(); err != nil {
		return err
	}
	p, n, err := fits(host, b, "upload of %d bytes into a buffer of %d")
	if err != nil || n == 0 {
		return err
	}
	src := unsafe.Slice((*byte)(p), n)
	dst := b.Ptr
	for len(src) > 0 {
		if s.off == s.slot {
			if err := s.next(); err != nil {
				return err
			}
		}
		k := min(int64(len(src)), s.slot-s.off)
		at := unsafe.Add(s.mem, int64(s.cur)*s.slot+s.off)
		parallelCopy(unsafe.Slice((*byte)(at), k), src[:k], s.Workers)
		if err := cu.MemcpyHtoDAsync(dst, at, k, cu.Stream{}); err != nil {
			return fmt.Errorf("cuda: staged upload of %d bytes: %w", k, err)
		}
		s.off += k
		s.Bytes += k
		dst += cu.DevicePtr(k)
		src = src[k:]
	}
	return nil
}

// LockRepeated(false) makes UploadKept stage every upload as Upload does,
// unlocking what it had locked (between runs: the stream must have passed
// every copy from it); by default (true) it locks ranges it uploads from
// again (pinPolicy).
func (s *Stager) LockRepeated(on bool) error {
	if !on {
		err := s.unlockAll()
		s.pins = nil
		return err
	}
	if s.pins == nil {
		s.pins = newPinPolicy(lockMin, lockMax)
	}
	return nil
}

// UploadKept is Upload for host memory that the caller leaves unchanged
// until the stream has passed the copy (a Run waits for its stream before
// it returns): the second time an upload of 256 KiB or more comes from the
// same memory, the stager page-locks that memory in place
// (cuMemHostRegister, once; pinPolicy has the rule and its bounds), and
// from then on its uploads are one asynchronous copy straight from it,
// with no copy into the slots by the host. The stager keeps such memory
// reachable and locked (a runtime.Pinner) until it unlocks it: when the
// bound needs room, on LockRepeated(false) or on Close.
func (s *Stager) UploadKept(t *Thread, b *Buffer, host any) error {
	_, err := s.UploadKeptOn(t, nil, b, host)
	return err
}

// UploadKeptOn is UploadKept with the copy straight from locked memory
// enqueued on on (nil: the default stream), where on reports it went;
// a staged copy goes on the default stream either way.
func (s *Stager) UploadKeptOn(t *Thread, on *Stream, b *Buffer, host any) (onStream bool, err error) {
	if err := t.check(); err != nil {
		return false, err
	}
	p, n, err := fits(host, b, "upload of %d bytes into a buffer of %d")
	if err != nil || n == 0 || s.pins == nil {
		if err == nil && n > 0 {
			err = s.Upload(t, b, host)
		}
		return false, err
	}
	act, evict := s.pins.upload(uintptr(p), n)
	if len(evict) > 0 {
		if err := cu.Synchronize(); err != nil { // no copy still reading them
			return false, err
		}
		for _, e := range evict {
			if err := unlockRange(e); err != nil {
				return false, err
			}
		}
	}
	if act == lockIt {
		l := &lockedMem{p: p}
		l.pin.Pin(p)
		ok := memHostRegister(p, n) == nil
		if !ok {
			l.pin.Unpin() // staged from now on
		}
		s.pins.took(uintptr(p), n, l, ok)
		if ok {
			act = directly
		}
	}
	if act != directly {
		return false, s.Upload(t, b, host)
	}
	stream := cu.Stream{}
	if on != nil {
		stream = on.s
	}
	if err := cu.MemcpyHtoDAsync(b.Ptr, p, n, stream); err != nil {
		return false, fmt.Errorf("cuda: upload of %d bytes from locked memory: %w", n, err)
	}
	s.Bytes += n
	s.Direct += n
	return on != nil, nil
}

// lockedMem is host memory UploadKept locked: where, and the Pinner that
// keeps it (Go memory) where it is and reachable meanwhile.
type lockedMem struct {
	p   unsafe.Pointer
	pin runtime.Pinner
}

// unlockRange unlocks a range UploadKept locked (no copy may still read it).
func unlockRange(e *pinned) error {
	l := e.pin.(*lockedMem)
	err := memHostUnregister(l.p)
	l.pin.Unpin()
	return err
}

// unlockAll waits for the stream and unlocks every range UploadKept locked.
func (s *Stager) unlockAll() error {
	if s.pins == nil || len(s.pins.locked) == 0 {
		return nil
	}
	return s.d.Do(func() error {
		first := cu.Synchronize()
		for _, e := range s.pins.drop() {
			if err := unlockRange(e); first == nil {
				first = err
			}
		}
		return first
	})
}

// next records the current slot's event and moves to the next slot,
// waiting for that slot's copies if any are still pending.
func (s *Stager) next() error {
	if err := s.ev[s.cur].Record(cu.Stream{}); err != nil {
		return err
	}
	s.pend[s.cur] = true
	s.cur = (s.cur + 1) % len(s.ev)
	s.off = 0
	if s.pend[s.cur] {
		if err := s.ev[s.cur].Synchronize(); err != nil {
			return err
		}
		s.pend[s.cur] = false
	}
	return nil
}

// Close waits for the copies in flight and frees the pinned memory and the
// events.
func (s *Stager) Close() error {
	if s == nil || s.d == nil {
		return nil
	}
	lerr := s.unlockAll()
	err := s.d.Do(func() error {
		var first error
		keep := func(err error) {
			if first == nil && err != nil {
				first = err
			}
		}
		if s.mem != nil {
			keep(cu.Synchronize())
			// for the next stager of its size (a second machine), or freed
			switch kept, err := s.d.freePinned.put(s.PinnedBytes(), s.mem); {
			case err != nil: // held there already: not freed twice
				keep(err)
			case !kept:
				keep(cu.MemFreeHost(s.mem))
			}
			s.mem = nil
		}
		for i := range s.ev {
			if s.ev[i] != (cu.Event{}) {
				keep(cu.DestroyEvent(&s.ev[i]))
			}
		}
		s.d = nil
		return first
	})
	if err == nil {
		err = lerr
	}
	return err
}
