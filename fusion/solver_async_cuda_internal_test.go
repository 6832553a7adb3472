//go:build tilefuse_cuda

package fusion

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/cuda"
	"github.com/tilefuse/tilefuse/tile"
)

// TestSolverStepErrorLaterOnGPU: a fused solver step's launches run on the
// device's thread after Step returned (Device.Post), so an error there is
// reported by what the user calls next on the machine, once: RunAll, Sync,
// and the solver's next Step's launches do not hide it. The error is made
// by a piece posted after a real step, as a failing launch would leave it.
func TestSolverStepErrorLaterOnGPU(t *testing.T) {
	g, _, w, loss := tanhLossGraph(t, 64, 5, 0.1)
	m := NewTapeMachine(g, WithBackend(CUDA))
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := NewSolver(m, G.NewAdamSolver())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	gb := m.be.(*gpu)
	boom := errors.New("boom: a launch that failed")
	fail := func() { gb.dev.Post(func(*cuda.Thread) { gb.stepErr = boom }) }
	step := func() error { return s.Step(G.NodesToValueGrads(G.Nodes{w})) }
	for _, c := range []struct {
		name string
		next func() error // the call that must report the step's error
	}{
		{"RunAll", m.RunAll},
		{"Sync", m.Sync},
		{"Step then RunAll", func() error {
			if err := step(); err != nil { // a step posts; the earlier error stays
				return err
			}
			return m.RunAll()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			if err := step(); err != nil {
				t.Fatal(err)
			}
			fail()
			err := c.next()
			if err == nil || !errors.Is(err, boom) || !strings.Contains(err.Error(), "the last solver step failed") {
				t.Fatalf("got %v, want the step's error", err)
			}
			if err := m.RunAll(); err != nil { // reported once
				t.Fatalf("the run after the report: %v", err)
			}
			if v, ok := loss.Value().(*G.F32); !ok || float32(*v) <= 0 {
				t.Fatalf("loss %v after the report, want a positive value", loss.Value())
			}
		})
	}
}

// TestAsyncRunOnGPU: a training run whose readable values all come from
// its forward kernels (the loss and the small prediction; the gradient is
// the fused solver's, taken on the device) returns once they have landed,
// its backward product still running (WithAsyncRuns, the default), and
// the next run's batch, a different tensor each step, goes into the
// batch's second buffer (a twin) beside it. It computes what runs that
// wait for the device compute, within the order of a reduction's atomics
// (the loss 1e-5 relative, w 1e-6), where a batch written over the one the
// backward still reads, or kernels not re-pointed to the new batch, change
// the gradient by far more; its prediction, written back once its memory
// has come (writeBackLater), agrees too. The same with WithCUDAGraphs: the
// run's graphs cut after the kernels whose values go down early, the
// batch's twin re-pointed in its graph. The first run is not checked (it
// also registers the batch's memory and loads the kernels). Without the
// work every run waits: the device is idle at each return.
func TestAsyncRunOnGPU(t *testing.T) {
	// products of 4096³ forward and backward: the backward's (~4 ms on the
	// FMA) must outlast the host's return and its look at the device; at
	// 2048³ (~0.5 ms) step 1 once found it done (the H200, 2026-12-03, r19g)
	const n, steps = 4096, 6
	type run struct {
		losses       []float64
		preds        [][]float32 // each step's prediction (written back late: writeBackLater)
		w            []float32
		early, busy  []bool
		xTwin, wTwin bool
		graphs, segs int // WithCUDAGraphs: graph launches of the last run, the run's graphs
	}
	rng := rand.New(rand.NewPCG(3, 4))
	fill := func(r, c int, sd float64) *tensor.Dense {
		d := make([]float32, r*c)
		for i := range d {
			d[i] = float32(rng.NormFloat64() * sd)
		}
		return tensor.New(tensor.WithShape(r, c), tensor.WithBacking(d))
	}
	batches := []*tensor.Dense{fill(n, n, 0.05), fill(n, n, 0.05)}
	w0, v0 := fill(n, n, 0.05), fill(n, 1, 0.05)
	train := func(t *testing.T, opts ...Option) run {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float32, G.WithShape(n, n), G.WithName("x"))
		w := G.NewMatrix(g, tensor.Float32, G.WithShape(n, n), G.WithName("w"))
		v := G.NewMatrix(g, tensor.Float32, G.WithShape(n, 1), G.WithName("v"))
		pred := G.Must(G.Mul(G.Must(G.Tanh(G.Must(G.Mul(x, w)))), v))
		loss := G.Must(G.Mean(G.Must(G.Square(pred))))
		if _, err := G.Grad(loss, w); err != nil {
			t.Fatal(err)
		}
		G.Let(w, w0.Clone())
		G.Let(v, v0)
		G.Let(x, batches[0])
		// ieee: the FMA's products are what keeps the device busy past an
		// async step's return (the default's 3xTF32 runs them 2.5× faster:
		// at 2048³ step 0 had finished by then on the H200, 2026-12-03)
		m := NewTapeMachine(g, append([]Option{WithBackend(CUDA), WithPrecision(tile.PrecIEEE)}, opts...)...)
		if err := m.Err(); err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		s, err := NewSolver(m, G.NewAdamSolver(G.WithLearnRate(1e-3)))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		gb := m.be.(*gpu)
		var r run
		// step -1 is not checked: the first run also registers the batch's
		// memory and loads the kernels
		for i := -1; i < steps; i++ {
			G.Let(x, batches[(i+2)%2])
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			var done bool
			if err := gb.dev.Run(func(th *cuda.Thread) (err error) {
				done, err = gb.timer.Done(th)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			early := gb.last.ReturnedEarly
			if err := s.Step(G.NodesToValueGrads(G.Nodes{w})); err != nil {
				t.Fatal(err)
			}
			l, ok := loss.Value().(*G.F32)
			if !ok {
				t.Fatalf("step %d: loss %v", i, loss.Value())
			}
			p, ok := pred.Value().(*tensor.Dense)
			if !ok || p.Size() != n {
				t.Fatalf("step %d: prediction %v", i, pred.Value())
			}
			if i < 0 {
				continue
			}
			r.early, r.busy = append(r.early, early), append(r.busy, !done)
			r.losses = append(r.losses, float64(*l))
			r.preds = append(r.preds, slices.Clone(p.Data().([]float32)))
		}
		if err := m.Wait(); err != nil {
			t.Fatal(err)
		}
		st := m.Stats()
		if st.DeviceTime <= 0 || st.ReturnedEarly != r.early[steps-1] {
			t.Fatalf("Stats after Wait: device time %g s, returned early %v; want > 0, %v", st.DeviceTime, st.ReturnedEarly, r.early[steps-1])
		}
		if err := m.Sync(); err != nil {
			t.Fatal(err)
		}
		r.w = append([]float32(nil), w.Value().Data().([]float32)...)
		r.graphs = gb.last.GraphLaunches
		for _, sg := range gb.segs {
			if sg.graph != nil {
				r.segs++
			}
		}
		for i, in := range gb.c.rw.inputs {
			switch in.orig {
			case x:
				r.xTwin = gb.twins[i] != nil
			case w:
				r.wTwin = gb.twins[i] != nil
			}
		}
		return r
	}
	sync := train(t, WithAsyncRuns(false))
	if sync.xTwin {
		t.Errorf("WithAsyncRuns(false): the batch has a twin")
	}
	for i := range steps {
		if sync.early[i] || sync.busy[i] {
			t.Errorf("WithAsyncRuns(false) step %d: returned early %v, device busy at return %v; want neither", i, sync.early[i], sync.busy[i])
		}
	}
	for _, c := range []struct {
		name string
		opts []Option
	}{
		{"launches", nil},
		// the run's kernels as CUDA graphs, cut after the forward's
		// kernels whose values go down early; the twin's launch
		// re-pointed in its graph (cuda.Thread.SetLaunch)
		{"CUDA graphs", []Option{WithCUDAGraphs(true)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			async := train(t, c.opts...)
			if !async.xTwin || async.wTwin {
				t.Errorf("twins: the batch's %v, the learnable's %v; want true, false", async.xTwin, async.wTwin)
			}
			if c.opts != nil && (async.segs != 2 || async.graphs != async.segs) {
				t.Errorf("%d graphs launched by the last run, %d made; want 2 (cut after the forward's last kernel, whose values go down) and each launched", async.graphs, async.segs)
			}
			for i := range steps {
				if !async.early[i] || !async.busy[i] {
					t.Errorf("async step %d: returned early %v, device busy at return %v; want both", i, async.early[i], async.busy[i])
				}
				if d := math.Abs(async.losses[i] - sync.losses[i]); d > 1e-5*math.Abs(sync.losses[i]) {
					t.Errorf("step %d: loss %g async, %g waiting", i, async.losses[i], sync.losses[i])
				}
				for j, a := range async.preds[i] {
					if b := sync.preds[i][j]; math.Abs(float64(a-b)) > 1e-5*(1+math.Abs(float64(b))) {
						t.Fatalf("step %d: pred[%d] %g async, %g waiting", i, j, a, b)
					}
				}
			}
			for i := range async.w {
				if d := math.Abs(float64(async.w[i] - sync.w[i])); d > 1e-6 {
					t.Fatalf("w[%d] after %d steps: %g async, %g waiting", i, steps, async.w[i], sync.w[i])
				}
			}
		})
	}
}

// TestAsyncRunErrorLaterOnGPU: an error of the device's work found after
// a run returned early (runErr, as settleLate keeps it) is reported once by
// the machine's next call: Wait, RunAll, Sync or Close.
func TestAsyncRunErrorLaterOnGPU(t *testing.T) {
	g, _, _, _ := tanhLossGraph(t, 64, 5, 0.1)
	m := NewTapeMachine(g, WithBackend(CUDA))
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	gb := m.be.(*gpu)
	boom := errors.New("boom: a kernel that failed")
	for _, c := range []struct {
		name string
		next func() error
	}{
		{"Wait", m.Wait},
		{"RunAll", m.RunAll},
		{"Sync", m.Sync},
		{"Close", m.Close},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			if err := gb.dev.Run(func(*cuda.Thread) error { gb.runErr = boom; return nil }); err != nil {
				t.Fatal(err)
			}
			err := c.next()
			if err == nil || !errors.Is(err, boom) || !strings.Contains(err.Error(), "after RunAll returned") {
				t.Fatalf("got %v, want the run's error", err)
			}
			if c.name == "Close" {
				return
			}
			if err := m.Wait(); err != nil { // reported once
				t.Fatalf("Wait after the report: %v", err)
			}
		})
	}
}
