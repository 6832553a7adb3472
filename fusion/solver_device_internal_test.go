package fusion

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/tile"
)

// hostDevice is a solverDevice whose "device" is host memory: the
// learnables' own tensors, the gradients their nodes' values, the state in
// Go slices. It checks the Solver's side of a device backend (binding by
// position, scalars left to the Gorgonia solver, the scalars of each step,
// State's numbering, Close) without a GPU; the GPU's side is
// TestSolverResidentOnGPU.
type hostDevice struct {
	backend
	synced, bound int
}

func (d *hostDevice) sync() error { d.synced++; return nil }

func (d *hostDevice) bindSolver(ps []deviceParam) (deviceSolver, error) {
	d.bound += len(ps)
	s := &hostSolver{}
	for _, p := range ps {
		e, err := cpuKernels.get(p.kernel.String(), p.kernel, false)
		if err != nil {
			return nil, err
		}
		n := p.node.Value().(*tensor.Dense)
		hp := hostParam{node: p.node, launch: e.Launch, n: n.Shape().TotalSize(), shape: n.Shape().Clone()}
		for range p.states {
			if n.Dtype() == tensor.Float32 {
				hp.state = append(hp.state, make([]float32, hp.n))
			} else {
				hp.state = append(hp.state, make([]float64, hp.n))
			}
		}
		s.params = append(s.params, hp)
	}
	return s, nil
}

type hostSolver struct {
	params []hostParam
	closed bool
}

type hostParam struct {
	node   *G.Node
	launch func(tile.Grid, ...any) error
	n      int
	shape  tensor.Shape
	state  []any
}

func (s *hostSolver) step(scalars func(tile.DType) []any) error {
	for _, p := range s.params {
		w := p.node.Value().(*tensor.Dense)
		g := p.node.Deriv().Value().(*tensor.Dense)
		args := append(append(append([]any{w.Data(), g.Data()}, p.state...), p.n), scalars(tileDType(w.Dtype()))...)
		if err := p.launch(tile.Grid{tile.CDiv(p.n, solverBlock)}, args...); err != nil {
			return err
		}
	}
	return nil
}

func (s *hostSolver) state(i int) ([]tensor.Tensor, error) {
	var out []tensor.Tensor
	for _, st := range s.params[i].state {
		out = append(out, tensor.New(tensor.WithShape(s.params[i].shape...), tensor.WithBacking(st)))
	}
	return out, nil
}

func (s *hostSolver) close() error { s.closed = true; return nil }

// TestSolverDevicePath trains a linear model with a vector and a scalar
// learnable through a machine whose backend is a hostDevice, against
// Gorgonia's Adam: the same values (float64, 1e-12), the scalar stepped by
// the Gorgonia solver, State numbered by position in the model, Sync and
// Close reaching the device, and a reordered model refused.
func TestSolverDevicePath(t *testing.T) {
	build := func() (*G.ExprGraph, *G.Node, *G.Node, *G.Node, *G.Node, *G.Node) {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(9, 4), G.WithName("x"))
		y := G.NewVector(g, tensor.Float64, G.WithShape(9), G.WithName("y"))
		w := G.NewVector(g, tensor.Float64, G.WithShape(4), G.WithName("w"), G.WithValue(tensor.New(tensor.WithBacking([]float64{0.1, -0.3, 0.2, 0.5}))))
		b := G.NewScalar(g, tensor.Float64, G.WithName("b"), G.WithValue(G.NewF64(0.2)))
		loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(G.Must(G.Add(G.Must(G.Mul(x, w)), b)), y))))))
		if _, err := G.Grad(loss, b, w); err != nil {
			t.Fatal(err)
		}
		return g, x, y, w, b, loss
	}
	rg, rx, ry, rw, rb, rloss := build()
	fg, fx, fy, fw, fb, floss := build()
	vmRef := G.NewTapeMachine(rg)
	defer vmRef.Close()
	m := NewTapeMachine(fg)
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
	dev := &hostDevice{backend: m.be}
	m.be = dev
	solRef := G.NewAdamSolver(G.WithLearnRate(0.05))
	s, err := NewSolver(m, G.NewAdamSolver(G.WithLearnRate(0.05)))
	if err != nil {
		t.Fatal(err)
	}
	if s.Backend() != CUDA {
		t.Fatalf("backend %v, want the device's", s.Backend())
	}
	rng := rand.New(rand.NewPCG(3, 3))
	for step := range 20 {
		xs, ys := make([]float64, 36), make([]float64, 9)
		for i := range xs {
			xs[i] = rng.NormFloat64()
		}
		for i := range ys {
			ys[i] = rng.NormFloat64()
		}
		G.Let(rx, tensor.New(tensor.WithShape(9, 4), tensor.WithBacking(xs)))
		G.Let(fx, tensor.New(tensor.WithShape(9, 4), tensor.WithBacking(append([]float64(nil), xs...))))
		G.Let(ry, tensor.New(tensor.WithBacking(ys)))
		G.Let(fy, tensor.New(tensor.WithBacking(append([]float64(nil), ys...))))
		if err := vmRef.RunAll(); err != nil {
			t.Fatal(err)
		}
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		if a, b := rloss.Value().Data().(float64), floss.Value().Data().(float64); math.Abs(a-b) > 1e-12*math.Abs(a) {
			t.Fatalf("step %d: loss %v, Gorgonia %v", step, b, a)
		}
		if err := solRef.Step(G.NodesToValueGrads(G.Nodes{rb, rw})); err != nil {
			t.Fatal(err)
		}
		if err := s.Step(G.NodesToValueGrads(G.Nodes{fb, fw})); err != nil {
			t.Fatal(err)
		}
		if err := m.Sync(); err != nil {
			t.Fatal(err)
		}
		for i, v := range rw.Value().Data().([]float64) {
			if got := fw.Value().Data().([]float64)[i]; math.Abs(got-v) > 1e-12 {
				t.Fatalf("step %d: w[%d] = %v, Gorgonia %v", step, i, got, v)
			}
		}
		if a, b := rb.Value().Data().(float64), fb.Value().Data().(float64); math.Abs(a-b) > 1e-12 {
			t.Fatalf("step %d: b = %v, Gorgonia %v", step, b, a)
		}
		m.Reset()
		vmRef.Reset()
	}
	if dev.bound != 1 || dev.synced != 20 {
		t.Errorf("%d learnables bound to the device (want 1: w; b is a scalar), %d syncs (want 20)", dev.bound, dev.synced)
	}
	st, err := s.State(1) // w, the second in the model, the device's first
	if err != nil || len(st) != 2 || st[0].Shape().TotalSize() != 4 {
		t.Fatalf("State(1): %v, %v: want w's two moments", st, err)
	}
	if _, err := s.State(0); err == nil {
		t.Error("State of the scalar b: no error")
	}
	if err := s.Step(G.NodesToValueGrads(G.Nodes{fw, fb})); err == nil {
		t.Error("a reordered model: no error")
	}
	if err := s.Close(); err != nil || !s.bound.(*hostSolver).closed {
		t.Errorf("Close: %v; the device's solver closed: %v", err, s.bound.(*hostSolver).closed)
	}
}
