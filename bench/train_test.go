package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/fusion"
)

// TestTrainStep: the training workloads' three modes each train their own
// copy of the learnables from the same start, so their first losses and
// gradients agree, and each mode's learnables moved away from the start
// (the solver stepped them), while the spec's own start values stay as
// they were.
func TestTrainStep(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(string) (Spec, error)
		tol   float64 // of the first step's loss and gradients against the unfused run
	}{
		{"mlp_train", mlpTrain, 1e-5},
		{"encoder_train", encoderTrain, 1e-4},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := c.build("small")
			require.NoError(t, err)
			require.Equal(t, c.name, s.Name)
			start := map[*G.Node][]float32{}
			for _, n := range s.Train.Learnables {
				start[n] = append([]float32(nil), s.Inputs[n].Data().([]float32)...)
			}
			r, err := Graph(s, Options{Runs: 2, WarmUp: time.Millisecond})
			require.NoError(t, err)
			require.Len(t, r.Modes, 3)
			for _, m := range r.Modes {
				assert.Positive(t, m.Median, m.Mode)
				assert.Less(t, m.MaxErr, c.tol, m.Mode)
				assert.Nil(t, m.Copies, "%s: copies on the CPU", m.Mode)
			}
			for n, v := range start {
				assert.Equal(t, v, s.Inputs[n].Data().([]float32), "%s: the spec's start values are not trained", n.Name())
			}
			moved := false // the last mode's learnables, bound to the nodes
			for _, n := range s.Train.Learnables {
				moved = moved || !assert.ObjectsAreEqual(start[n], n.Value().Data())
			}
			assert.True(t, moved, "the learnables did not move: no solver step")
		})
	}
}

func TestTrainRejectsBadSpecs(t *testing.T) {
	s, err := mlpTrain("small")
	require.NoError(t, err)
	s.Train.Learnables = append(s.Train.Learnables, s.Outputs[0]) // the loss is no input
	_, err = Graph(s, Options{Runs: 1})
	assert.ErrorContains(t, err, "is not an input of the spec")
	s.Train = &Train{}
	_, err = Graph(s, Options{Runs: 1})
	assert.ErrorContains(t, err, "needs its loss, learnables and solver")
}

type fakeStats fusion.Stats

func (f fakeStats) Stats() fusion.Stats { return fusion.Stats(f) }

// TestCopiesOf: a run's copies and host time are taken from fusion's Stats
// where the machine ran on the GPU (a device time), not on the CPU.
func TestCopiesOf(t *testing.T) {
	var m Measurement
	var host []float64
	copiesOf(fakeStats{Runs: 1}, &m, &host) // the CPU backend
	copiesOf(struct{}{}, &m, &host)         // no Stats: Gorgonia's machine
	assert.Nil(t, m.Copies)
	assert.Empty(t, host)
	copiesOf(fakeStats{Runs: 2, DeviceTime: 1e-3, Uploads: 2, Downloads: 3, BytesUp: 40, BytesDown: 12, Held: 5, HashedBytes: 7, HostSeconds: 2e-4}, &m, &host)
	assert.Equal(t, &Copies{Uploads: 2, Downloads: 3, BytesUp: 40, BytesDown: 12, Held: 5, HashedBytes: 7}, m.Copies)
	assert.Equal(t, []float64{2e-4}, host)
}

// TestLoop: Options.Loop times each mode's runs back to back (no
// collection between them) for a plain graph and a training step: every
// mode measured, its runs' spread ordered (min ≤ median ≤ max), the fused
// results checked against the unfused ones as without Loop.
func TestLoop(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(string) (Spec, error)
		tol   float64
	}{
		{"softmax", softmaxW, 1e-5},
		{"mlp_train", mlpTrain, 1e-5},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := c.build("small")
			require.NoError(t, err)
			r, err := Graph(s, Options{Runs: 4, WarmUp: time.Millisecond, Loop: true})
			require.NoError(t, err)
			require.Len(t, r.Modes, 3)
			for _, m := range r.Modes {
				assert.Positive(t, m.Min, m.Mode)
				assert.LessOrEqual(t, m.Min, m.Median, m.Mode)
				assert.LessOrEqual(t, m.Median, m.Max, m.Mode)
				assert.Less(t, m.MaxErr, c.tol, m.Mode)
			}
		})
	}
}

// TestUntimedRuns: on the CPU each timed run (training step) follows an
// untimed one of its mode unless the mode's warm-up run took warmLong or
// more (Graph and training steps alike; training steps kept theirs
// always until 2026-12-07) or ColdCPU: every mode of a graph and of a
// training step, with warmLong above and below any run's time.
func TestUntimedRuns(t *testing.T) {
	defer func(w time.Duration) { warmLong = w }(warmLong)
	for _, c := range []struct {
		name  string
		build func(string) (Spec, error)
	}{
		{"softmax", func(size string) (Spec, error) { w, _ := Lookup("softmax"); return w.Build(size) }},
		{"mlp_train", mlpTrain},
	} {
		for _, w := range []struct {
			name string
			long time.Duration
			cold bool
			want int // untimed runs per mode
		}{
			{"every run short", time.Hour, false, 3},
			{"every run long", 0, false, 0},
			{"cold", time.Hour, true, 0},
		} {
			t.Run(c.name+"/"+w.name, func(t *testing.T) {
				warmLong = w.long
				s, err := c.build("small")
				require.NoError(t, err)
				r, err := Graph(s, Options{Runs: 3, WarmUp: time.Millisecond, ColdCPU: w.cold})
				require.NoError(t, err)
				require.Len(t, r.Modes, 3)
				for _, m := range r.Modes {
					assert.Equal(t, w.want, m.UntimedRuns, m.Mode)
				}
			})
		}
	}
}
