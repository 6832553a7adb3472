//go:build tilefuse_cuda

package cuda

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"gorgonia.org/cu"
)

// BenchmarkUploadSplit times, with events on the device, one upload of a
// training batch's size (mlp_train's 1.56 MB, and 16 MB) from Go memory
// page-locked in place (as Stager.UploadKept sends it) as one copy and
// split into 2 or 4 copies on as many streams (the first on the legacy
// stream, the others on non-blocking streams it waits for), and from
// memory allocated page-locked (cuMemHostAlloc) as one copy: whether a
// batch's DMA is bound by the link or by one copy's engine. µs/copy is the
// median over the iterations of the device time from an event before the
// copies to one after the last. On the H200 (2026-12-02): 1.56 MB 33.3 µs
// (48 GB/s) as one copy, 36.8 and 43.0 as 2 and 4, the same 33.3 from
// cuMemHostAlloc'd memory; 16 MB 307 µs (54.7 GB/s), 310 and 317 split:
// the link bounds it, so UploadKept sends one copy.
func BenchmarkUploadSplit(b *testing.B) {
	for _, n := range []int64{512 * 784 * 4, 16 << 20} {
		buf, err := dev.Alloc(n)
		if err != nil {
			b.Fatal(err)
		}
		host := make([]byte, n)
		for i := range host {
			host[i] = byte(i)
		}
		var pin runtime.Pinner
		p := unsafe.Pointer(unsafe.SliceData(host))
		pin.Pin(p)
		if err := dev.Do(func() error { return memHostRegister(p, n) }); err != nil {
			b.Fatal(err)
		}
		var locked unsafe.Pointer
		if err := dev.Do(func() (err error) { locked, err = memHostAlloc(n); return err }); err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct {
			name  string
			src   unsafe.Pointer
			parts int
		}{
			{"registered/1", p, 1}, {"registered/2", p, 2}, {"registered/4", p, 4}, {"allocated/1", locked, 1},
		} {
			b.Run(fmt.Sprintf("%dKiB/%s", n>>10, c.name), func(b *testing.B) {
				var us []float64
				err := dev.Do(func() error {
					var side [3]cu.Stream
					var done [3]cu.Event
					for i := range c.parts - 1 {
						var err error
						if side[i], err = cu.MakeStream(cu.NonBlocking); err != nil {
							return err
						}
						if done[i], err = cu.MakeEvent(cu.DisableTiming); err != nil {
							return err
						}
					}
					defer func() {
						for i := range c.parts - 1 {
							cu.DestroyEvent(&done[i])
							side[i].Destroy()
						}
					}()
					start, end := mustEvent(), mustEvent()
					defer cu.DestroyEvent(&start)
					defer cu.DestroyEvent(&end)
					part := (n/int64(c.parts) + 4095) / 4096 * 4096
					for b.Loop() {
						if err := start.Record(cu.Stream{}); err != nil {
							return err
						}
						for k := range c.parts {
							off := int64(k) * part
							m := min(part, n-off)
							s := cu.Stream{}
							if k > 0 {
								s = side[k-1]
								if err := s.Wait(start, 0); err != nil {
									return err
								}
							}
							if err := cu.MemcpyHtoDAsync(buf.Ptr+cu.DevicePtr(off), unsafe.Add(c.src, off), m, s); err != nil {
								return err
							}
							if k > 0 {
								if err := done[k-1].Record(s); err != nil {
									return err
								}
								if err := (cu.Stream{}).Wait(done[k-1], 0); err != nil {
									return err
								}
							}
						}
						if err := end.Record(cu.Stream{}); err != nil {
							return err
						}
						if err := end.Synchronize(); err != nil {
							return err
						}
						ms, err := start.Elapsed(end)
						if err != nil {
							return err
						}
						us = append(us, ms*1e3)
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				slices.Sort(us)
				b.ReportMetric(us[len(us)/2], "µs/copy")
				b.ReportMetric(float64(n)/us[len(us)/2]/1e3, "GB/s")
			})
		}
		dev.Do(func() error {
			memHostUnregister(p)
			return cu.MemFreeHost(locked)
		})
		pin.Unpin()
		dev.Free(buf)
	}
}

func mustEvent() cu.Event {
	ev, err := cu.MakeEvent(cu.DefaultEvent)
	if err != nil {
		panic(err)
	}
	return ev
}
