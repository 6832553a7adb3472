//go:build tilefuse_cuda

package cuda

import (
	"testing"
	"time"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/kernels"
)

// BenchmarkLaunchHostCost measures the host's side of a step's launches
// as fusion's run makes them: 24 packed launches of a one-row softmax
// in one Device.Run, then a wait for the device. host-µs/launch is the
// launch loop's wall clock over the launches (the wait left out); the
// variants add what fusion's compute adds between launches (an event
// recorded after each, a zeroing before each), and queue the launches
// behind a long kernel (the device busy, as in a step).
func BenchmarkLaunchHostCost(b *testing.B) {
	const launches, cols = 24, 1024
	k, err := kernels.Softmax(tile.Meta{"BLOCK": 1024})
	if err != nil {
		b.Fatal(err)
	}
	bx, err := dev.Alloc(4 * cols * 4096)
	if err != nil {
		b.Fatal(err)
	}
	defer dev.Free(bx)
	by, err := dev.Alloc(4 * cols * 4096)
	if err != nil {
		b.Fatal(err)
	}
	defer dev.Free(by)
	small := tile.Grid{1}
	_, f, err := dev.Compile(k, 4, []any{bx, by, cols, cols})
	if err != nil {
		b.Fatal(err)
	}
	p, err := dev.Pack(f, k, small, bx, by, cols, cols)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Free()
	long, err := dev.Pack(f, k, tile.Grid{4096}, bx, by, cols, cols)
	if err != nil {
		b.Fatal(err)
	}
	defer long.Free()
	ev, err := dev.NewEvent()
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name         string
		busy, record bool
		zero         bool
	}{
		{name: "plain"},
		{name: "busy", busy: true},
		{name: "record", record: true},
		{name: "zero", zero: true},
	} {
		b.Run(c.name, func(b *testing.B) {
			var host time.Duration
			for range b.N {
				err := dev.Run(func(t *Thread) error {
					if c.busy {
						for range 20 {
							if err := t.LaunchPacked(long); err != nil {
								return err
							}
						}
					}
					s := time.Now()
					for range launches {
						if c.zero {
							if err := t.Zero(by); err != nil {
								return err
							}
						}
						if err := t.LaunchPacked(p); err != nil {
							return err
						}
						if c.record {
							if err := t.Record(ev); err != nil {
								return err
							}
						}
					}
					host += time.Since(s)
					return t.Wait(ev)
				})
				if err != nil {
					b.Fatal(err)
				}
				if err := dev.Sync(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(host.Microseconds())/float64(b.N*launches), "host-µs/launch")
		})
	}
}
