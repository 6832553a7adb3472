package bench

import (
	"testing"
	"time"
)

// TestWorkloadsSmall runs every workload at its small size, one timed run:
// each mode runs, the fused result agrees with the unfused one (Graph fails
// otherwise), and fusion cuts the kernel count.
func TestWorkloadsSmall(t *testing.T) {
	for _, w := range Workloads {
		t.Run(w.Name, func(t *testing.T) {
			s, err := w.Build("small")
			if err != nil {
				t.Fatal(err)
			}
			r, err := Graph(s, Options{Runs: 1, WarmUp: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Modes) != 3 {
				t.Fatalf("%d modes measured", len(r.Modes))
			}
			fu, un := r.Mode(Fused), r.Mode(Unfused)
			if fu.Kernels >= un.Kernels {
				t.Errorf("fused: %d kernels, unfused %d", fu.Kernels, un.Kernels)
			}
			for _, m := range r.Modes {
				if m.Median <= 0 || m.GBps <= 0 {
					t.Errorf("%s: median %v, %v GB/s", m.Mode, m.Median, m.GBps)
				}
			}
			t.Logf("%s: kernels %d → %d; speedup fused %.2fx, unfused %.2fx; max err gorgonia %.2g fused %.2g",
				w.Name, un.Kernels, fu.Kernels, r.Speedup(Fused), r.Speedup(Unfused), r.Mode(Gorgonia).MaxErr, fu.MaxErr)
		})
	}
}
