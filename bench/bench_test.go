package bench

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
			require.NoError(t, err)
			r, err := Graph(s, Options{Runs: 1, WarmUp: time.Millisecond})
			require.NoError(t, err)
			require.Len(t, r.Modes, 3)
			fu, un := r.Mode(Fused), r.Mode(Unfused)
			assert.Less(t, fu.Kernels, un.Kernels, "fusion cuts the kernel count")
			for _, m := range r.Modes {
				assert.Positive(t, m.Median, m.Mode)
				assert.Positive(t, m.GBps, m.Mode)
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
			_, err := Graph(c.spec, Options{Runs: 1})
			assert.ErrorContains(t, err, c.want)
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
			if c.fails {
				assert.Error(t, err)
			} else {
				assert.NoError(t, err)
			}
			if math.IsInf(c.worst, 1) {
				assert.True(t, math.IsInf(worst, 1), "worst %v, want +Inf", worst)
			} else {
				assert.InDelta(t, c.worst, worst, 1e-9)
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
	assert.Equal(t, 0.002, f.Time(), "fused: the device time")
	assert.Equal(t, 0.05, g.Time(), "Gorgonia: the wall clock")
	r := &Result{Modes: []*Measurement{g, u, f}}
	assert.InDelta(t, 3, r.DeviceSpeedup(Fused), 1e-12)
	assert.InDelta(t, 5, r.Speedup(Fused), 1e-12, "wall clock against Gorgonia")
	u.DeviceMedian = 0
	assert.Zero(t, r.DeviceSpeedup(Fused), "without the unfused device time")
}
