package native_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// TestEstimate: a launch's estimated work (which sizes its workers) is
// near one core's time: the bench's small softmax and LayerNorm (64×1024,
// 11–21 µs on one core of the 2-core VM and of the 16-core host, estimated
// 90 and 70 µs before 2026-12-02, so that 16 cores asked 5–6 workers for
// them) are estimated at 20–50 µs and ask 2 of 16; LayerNorm's γ and β,
// which every program reads, are not counted as streamed; the column sum
// 1000×777 is no less than the 3.1 MB its programs stream at 16 GB/s (its
// time on the host's cores, from L3), and a vector add no less than its
// three streams (0.15 µs a program of 256 before: under its bytes' 0.19).
func TestEstimate(t *testing.T) {
	requireJIT(t)
	tg := graphpass.CPU(16)
	tg.Native = true
	for _, c := range []struct {
		name     string
		workload string // a bench workload at size small, one kernel; else a vector add
		lo, hi   float64
		workers  int // asked of a pool of 16; 0: not checked
	}{
		{name: "softmax 64×1024: 2 workers of 16, not 5", workload: "softmax", lo: 20e3, hi: 50e3, workers: 2},
		{name: "LayerNorm 64×1024: γ and β not streamed", workload: "layernorm", lo: 20e3, hi: 50e3, workers: 2},
		{name: "colsum 1000×777: its 3.1 MB at 16 GB/s", workload: "colsum", lo: 1000 * 784 * 4 / 16, hi: 400e3, workers: 13},
		{name: "vector add of 4096 in blocks of 256: three streams", lo: 16 * 3 * 256 * 4 / 16, hi: 16 * (20 + 2*3*256*4/16)},
	} {
		t.Run(c.name, func(t *testing.T) {
			var k *tile.Kernel
			grid := tile.Grid{16}
			if c.workload == "" {
				nk := vecAdd(t, 256)
				k = nk.Kernel()
			} else {
				w, _ := bench.Lookup(c.workload)
				spec, err := w.Build("small")
				if err != nil {
					t.Fatal(err)
				}
				gr, err := graphpass.Import(spec.Graph)
				if err != nil {
					t.Fatal(err)
				}
				groups := graphpass.Partition(gr, graphpass.Options{Target: tg})
				if len(groups) != 1 {
					t.Fatalf("%d groups, want 1", len(groups))
				}
				gk, err := graphpass.Emit(groups[0], tg, tile.PrecIEEE)
				if err != nil {
					t.Fatal(err)
				}
				k, grid = gk.Tile, gk.Grid
			}
			nk, err := native.Compile(k)
			if err != nil {
				t.Fatal(err)
			}
			defer nk.Free()
			g, err := grid.Norm()
			if err != nil {
				t.Fatal(err)
			}
			work := native.Work(nk) * float64(g[0]*g[1]*g[2])
			if work < c.lo || work > c.hi {
				t.Errorf("estimated %.1f µs, want %.1f to %.1f", work/1e3, c.lo/1e3, c.hi/1e3)
			}
			if got := native.LaunchWorkers(work, 16); c.workers > 0 && got != c.workers {
				t.Errorf("%.1f µs estimated: %d workers of 16, want %d", work/1e3, got, c.workers)
			}
		})
	}
}
