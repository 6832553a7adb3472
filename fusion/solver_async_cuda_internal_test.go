//go:build tilefuse_cuda

package fusion

import (
	"errors"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/cuda"
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
