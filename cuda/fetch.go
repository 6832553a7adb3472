//go:build tilefuse_cuda

package cuda

import (
	"context"
	"fmt"
	"runtime/trace"
	"unsafe"

	"gorgonia.org/cu"
)

// Fetcher downloads several buffers at once through page-locked (pinned)
// staging memory: Enqueue orders an asynchronous copy (cuMemcpyDtoHAsync,
// default stream: after the kernels launched before it) into its pinned
// memory, and Finish waits for all of them once and copies each into its
// host slice. A synchronous download from pageable Go memory
// (Thread.Download) pays the driver's latency at each copy (about 25 µs on
// an H200 host) and stages the bytes itself; n downloads through a Fetcher
// pay it once.
//
// A copy larger than the staging memory goes straight into its host slice
// (cuMemcpyDtoH, after the copies enqueued before it have landed); one that
// does not fit in what is left makes Enqueue finish the copies before it
// first. The pinned memory is reused from one Finish to the next.
// EnqueueSide copies on the fetcher's own stream, beside the kernels
// launched after it.
type Fetcher struct {
	d    *Device
	mem  unsafe.Pointer
	size int64
	off  int64
	pend []fetch
	// synced: the device has finished everything enqueued so far (Wait)
	synced bool
	// the side stream of EnqueueSide's copies and the event they wait on;
	// landed: an event recorded after each side copy (the first nLanded
	// in use since the last Finish), for CopyLanded
	side    cu.Stream
	sideEv  cu.Event
	landed  []cu.Event
	nLanded int
	// Bytes and Copies are the bytes and copies that went through the
	// pinned memory (not the direct ones).
	Bytes  int64
	Copies int
	// Workers is how many cores copy a large piece out (parallelCopy).
	Workers int
}

type fetch struct {
	dst  unsafe.Pointer
	take func() any // EnqueueSideLater: the host slice, asked for at the copy out
	off  int64
	n    int64
	ev   int  // a side copy: its event in landed; -1: none
	out  bool // copied out (CopyLanded)
}

// fetchAlign keeps every staged copy on its own cache lines.
const fetchAlign = 256

// NewFetcher allocates size bytes of pinned host memory (at least 4 KiB).
func (d *Device) NewFetcher(size int64) (*Fetcher, error) {
	size = max(size, 4<<10)
	size = (size + fetchAlign - 1) / fetchAlign * fetchAlign
	f := &Fetcher{d: d, size: size, Workers: stageWorkers()}
	err := d.Do(func() error {
		if p, ok := d.freePinned.take(size); ok {
			f.mem = p
			return nil
		}
		var err error
		if f.mem, err = memHostAlloc(size); err != nil {
			return err
		}
		return nil
	})
	if err == nil {
		err = d.Do(func() error {
			var err error
			if f.side, err = cu.MakeStream(cu.NonBlocking); err != nil {
				return err
			}
			f.sideEv, err = cu.MakeEvent(cu.DisableTiming)
			return err
		})
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("cuda: fetcher: %w", err)
	}
	return f, nil
}

// PinnedBytes is the page-locked memory the fetcher holds.
func (f *Fetcher) PinnedBytes() int64 { return f.size }

// Enqueue orders the copy of the first bytes of b into host (a []float32,
// []float64 or []int32 no longer than b), on the default stream: after
// the work enqueued before it. host holds them only after Finish; it must
// not be read or written before.
func (f *Fetcher) Enqueue(t *Thread, host any, b *Buffer) error {
	return f.enqueue(t, host, b, false)
}

// EnqueueSide is Enqueue on the fetcher's own stream: the copy waits for
// the work enqueued on the default stream so far (an event) and then runs
// beside the work enqueued there after it (later kernels of a run), so
// that a value computed early comes down while the device computes the
// rest. b must not be written by that later work before Finish.
func (f *Fetcher) EnqueueSide(t *Thread, host any, b *Buffer) error {
	return f.enqueue(t, host, b, true)
}

// EnqueueSideLater is EnqueueSide of the first n bytes of b into a host
// slice that take gives when the copy is copied out of the pinned memory
// (CopyLanded or Finish), not now: the host memory may still be on its way
// (allocated on another goroutine) while the copy runs. take is called
// once, on the device's thread; its slice must hold n bytes.
func (f *Fetcher) EnqueueSideLater(t *Thread, b *Buffer, n int64, take func() any) error {
	if n > b.Bytes {
		return fmt.Errorf("cuda: download of %d bytes from a buffer of %d", n, b.Bytes)
	}
	return f.enqueueAt(t, nil, n, take, b, true)
}

func (f *Fetcher) enqueue(t *Thread, host any, b *Buffer, side bool) error {
	p, n, err := fits(host, b, "download of %d bytes from a buffer of %d")
	if err != nil {
		return err
	}
	return f.enqueueAt(t, p, n, nil, b, side)
}

// enqueueAt enqueues the copy of n bytes of b into p, or into take's slice
// at the copy out where take is not nil.
func (f *Fetcher) enqueueAt(t *Thread, p unsafe.Pointer, n int64, take func() any, b *Buffer, side bool) error {
	if err := t.check(); err != nil {
		return err
	}
	if f.mem == nil {
		return fmt.Errorf("cuda: fetcher: closed")
	}
	if n == 0 {
		return nil
	}
	if n > f.size { // too large to stage: straight into host, in order
		if err := f.Finish(t); err != nil {
			return err
		}
		if take != nil {
			var err error
			if p, err = takeDst(take, n); err != nil {
				return err
			}
		}
		return cu.MemcpyDtoH(p, b.Ptr, n)
	}
	if f.off+n > f.size {
		if err := f.Finish(t); err != nil {
			return err
		}
	}
	stream := cu.Stream{}
	if side {
		if err := f.sideEv.Record(cu.Stream{}); err != nil {
			return fmt.Errorf("cuda: fetcher: %w", err)
		}
		if err := f.side.Wait(f.sideEv, 0); err != nil {
			return fmt.Errorf("cuda: fetcher: %w", err)
		}
		stream = f.side
	}
	if err := cu.MemcpyDtoHAsync(unsafe.Add(f.mem, f.off), b.Ptr, n, stream); err != nil {
		return fmt.Errorf("cuda: async download of %d bytes: %w", n, err)
	}
	ev := -1
	if side {
		if f.nLanded == len(f.landed) {
			e, err := cu.MakeEvent(cu.DisableTiming)
			if err != nil {
				return fmt.Errorf("cuda: fetcher: %w", err)
			}
			f.landed = append(f.landed, e)
		}
		if err := f.landed[f.nLanded].Record(f.side); err != nil {
			return fmt.Errorf("cuda: fetcher: %w", err)
		}
		ev = f.nLanded
		f.nLanded++
	}
	f.synced = false
	f.pend = append(f.pend, fetch{dst: p, take: take, off: f.off, n: n, ev: ev})
	f.off = (f.off + n + fetchAlign - 1) / fetchAlign * fetchAlign
	f.Bytes += n
	f.Copies++
	return nil
}

// Pending is the number of copies enqueued and not yet finished.
func (f *Fetcher) Pending() int { return len(f.pend) }

// OnSide reports whether every copy enqueued and not yet finished went on
// the side stream (EnqueueSide): then CopyLanded waits for each of them
// alone, and Finish after it waits for nothing more.
func (f *Fetcher) OnSide() bool {
	for _, c := range f.pend {
		if c.ev < 0 {
			return false
		}
	}
	return true
}

// Finish waits for the copies enqueued (and so for the device work before
// them) and copies each into its host slice. Where CopyLanded has copied
// out every one of them already, it waits for nothing: the device may
// still run the work enqueued after them.
func (f *Fetcher) Finish(t *Thread) error {
	if err := t.check(); err != nil {
		return err
	}
	if len(f.pend) == 0 {
		return nil
	}
	pend := f.pend
	f.pend, f.off, f.nLanded = f.pend[:0], 0, 0
	allOut := true
	for _, c := range pend {
		allOut = allOut && c.out
	}
	if !f.synced && !allOut {
		if err := cu.Synchronize(); err != nil {
			return fmt.Errorf("cuda: fetcher: %w", err)
		}
	}
	f.synced = false
	var first error
	for _, c := range pend {
		if !c.out {
			if err := f.copyOut(&c); first == nil {
				first = err
			}
		}
	}
	return first
}

// copyOut copies c from the pinned memory into its host slice (asked of
// c.take first where it has none yet).
func (f *Fetcher) copyOut(c *fetch) error {
	if c.dst == nil {
		p, err := takeDst(c.take, c.n)
		if err != nil {
			return err
		}
		c.dst = p
	}
	src := unsafe.Slice((*byte)(unsafe.Add(f.mem, c.off)), c.n)
	dst := unsafe.Slice((*byte)(c.dst), c.n)
	if c.n >= sharedCopyMin && c.n < 2*copyPiece {
		// too small for parallelCopy's goroutines: the second half offered
		// to the run's caller, which polls for the run's end meanwhile
		h := (c.n / 2) &^ 63
		join := f.d.work.share(func() { copy(dst[h:], src[h:]) })
		copy(dst[:h], src[:h])
		join()
		return nil
	}
	parallelCopy(dst, src, f.Workers)
	return nil
}

// sharedCopyMin is the least copy out of the pinned memory that the
// device's thread shares with the run's polling caller (worker.share):
// on the H200's host a copy out of freshly landed memory ran at 4–8 GB/s
// on one core (encoder_train's two 1 MB values: 125–250 µs each, in a
// Go trace of `tilefuse bench -loop`, 2026-12-02), the largest part of a
// training step's host time.
const sharedCopyMin = 256 << 10

// takeDst is the memory of take's slice, which must hold n bytes.
func takeDst(take func() any, n int64) (unsafe.Pointer, error) {
	if take == nil {
		return nil, fmt.Errorf("cuda: fetcher: a copy without a destination")
	}
	p, m, err := hostBytes(take())
	if err == nil && m < n {
		err = fmt.Errorf("cuda: fetcher: a host slice of %d bytes for a copy of %d", m, n)
	}
	return p, err
}

// CopyLanded copies the side copies enqueued so far (EnqueueSide) into
// their host slices, in order, each as soon as it has landed (its event:
// the calling thread waits for that copy, not for the kernels launched
// after it), so that they are out of the pinned memory while later kernels
// still run; Finish copies the rest.
func (f *Fetcher) CopyLanded(t *Thread) error {
	if err := t.check(); err != nil {
		return err
	}
	for i := range f.pend {
		c := &f.pend[i]
		if c.ev < 0 || c.out {
			continue
		}
		rg := trace.StartRegion(context.Background(), "tilefuse: landed wait")
		if err := f.landed[c.ev].Synchronize(); err != nil {
			return fmt.Errorf("cuda: fetcher: %w", err)
		}
		rg.End()
		rg = trace.StartRegion(context.Background(), "tilefuse: landed copy")
		if err := f.copyOut(c); err != nil {
			return err
		}
		rg.End()
		c.out = true
	}
	return nil
}

// Wait blocks until the device has finished all the work enqueued so far
// (the copies included: cuCtxSynchronize); a Finish right after only
// copies out.
func (f *Fetcher) Wait(t *Thread) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := cu.Synchronize(); err != nil {
		return fmt.Errorf("cuda: fetcher: %w", err)
	}
	f.synced = true
	return nil
}

// Discard drops the copies enqueued and not finished (their host slices
// are not written; the staging memory is reused).
func (f *Fetcher) Discard() {
	f.pend, f.off, f.synced, f.nLanded = f.pend[:0], 0, false, 0
}

// Close frees the pinned memory, the stream and the event (after the
// copies in flight); pending copies are dropped.
func (f *Fetcher) Close() error {
	if f == nil || f.d == nil {
		return nil
	}
	err := f.d.Do(func() error {
		first := cu.Synchronize()
		keep := func(err error) {
			if first == nil && err != nil {
				first = err
			}
		}
		if f.mem != nil {
			switch kept, err := f.d.freePinned.put(f.size, f.mem); {
			case err != nil:
				keep(err)
			case !kept:
				keep(cu.MemFreeHost(f.mem))
			}
		}
		if f.side != (cu.Stream{}) {
			keep(f.side.Destroy())
		}
		if f.sideEv != (cu.Event{}) {
			keep(cu.DestroyEvent(&f.sideEv))
		}
		for i := range f.landed {
			keep(cu.DestroyEvent(&f.landed[i]))
		}
		return first
	})
	f.mem, f.pend, f.d = nil, nil, nil
	return err
}
