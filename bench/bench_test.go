package bench

import (
	"math"
	"strings"
	"testing"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
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

func TestGraphRejectsBadSpecs(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(2, 3), G.WithName("x"))
	y := G.Must(G.Exp(x))
	for _, c := range []struct {
		name string
		spec Spec
		want string
	}{
		{"no graph", Spec{Name: "a"}, "needs a graph"},
		{"no outputs", Spec{Name: "b", Graph: g}, "at least one output"},
		{"wrong input shape", Spec{Name: "c", Graph: g, Outputs: []*G.Node{y},
			Inputs: map[*G.Node]tensor.Tensor{x: tensor.New(tensor.WithShape(3, 2), tensor.Of(tensor.Float32))}}, "has shape (2, 3), its value (3, 2)"},
		{"nil input", Spec{Name: "d", Graph: g, Outputs: []*G.Node{y}, Inputs: map[*G.Node]tensor.Tensor{x: nil}}, "a nil input"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Graph(c.spec, Options{Runs: 1}); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestCompare(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		name      string
		got, want []float64
		worst     float64
		fails     bool
	}{
		{"equal", []float64{1, 2}, []float64{1, 2}, 0, false},
		{"NaN matches NaN", []float64{nan, 2}, []float64{nan, 2}, 0, false},
		{"within tolerance", []float64{1.0001}, []float64{1}, 0.00005, false},
		{"beyond tolerance", []float64{1.1}, []float64{1}, 0.05, true},
		{"NaN where a number is wanted", []float64{nan}, []float64{1}, math.Inf(1), true},
		{"lengths differ", []float64{1}, []float64{1, 2}, math.Inf(1), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			worst, err := compare([][]float64{c.got}, [][]float64{c.want}, 1e-3)
			if (err != nil) != c.fails || math.Abs(worst-c.worst) > 1e-9 && !(math.IsInf(worst, 1) && math.IsInf(c.worst, 1)) {
				t.Fatalf("worst %v, err %v; want worst %v, failing %v", worst, err, c.worst, c.fails)
			}
		})
	}
}

// TestDeviceTimes: rates come from the device time where there is one, and
// the device speedup needs both tilefuse modes' device times.
func TestDeviceTimes(t *testing.T) {
	f := &Measurement{Mode: Fused, Median: 0.01, DeviceMedian: 0.002}
	u := &Measurement{Mode: Unfused, Median: 0.02, DeviceMedian: 0.006}
	g := &Measurement{Mode: Gorgonia, Median: 0.05}
	if f.Time() != 0.002 || g.Time() != 0.05 {
		t.Fatalf("Time: fused %v (want the device 0.002), Gorgonia %v (want the wall 0.05)", f.Time(), g.Time())
	}
	r := &Result{Modes: []*Measurement{g, u, f}}
	if s := r.DeviceSpeedup(Fused); math.Abs(s-3) > 1e-12 {
		t.Fatalf("DeviceSpeedup = %v, want 3", s)
	}
	if s := r.Speedup(Fused); math.Abs(s-5) > 1e-12 {
		t.Fatalf("Speedup = %v, want 5 (wall clock against Gorgonia)", s)
	}
	u.DeviceMedian = 0
	if s := r.DeviceSpeedup(Fused); s != 0 {
		t.Fatalf("DeviceSpeedup without the unfused device time = %v, want 0", s)
	}
}
