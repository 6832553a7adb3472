//go:build tilefuse_cuda

package fusion

import (
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestMemoryAfterCloseOnGPU: the GPU's free memory (cuMemGetInfo) returns to
// its level before NewTapeMachine after Close, over a machine's whole life
// with a fused solver: NewTapeMachine (buffers), runs (host ops' and
// staging), NewSolver and Steps (the optimizer state on the device),
// Sync, the solver's Close and the machine's. The graph has 80 MB of
// buffers and 32 MB of state, so that a leak of any of them shows; the
// first life, untimed, loads the kernels (the device's module cache stays,
// shared by machines) and lets the driver make what it makes once. Three
// lives follow; each must end within 2 MiB (the driver's page) of the
// level before the first of them, and each must have taken at least the
// buffers' bytes while alive (the measure sees the machine).
func TestMemoryAfterCloseOnGPU(t *testing.T) {
	dev, err := sharedDevice()
	if err != nil {
		t.Fatal(err)
	}
	const n = 2048 // x, w, x·w, its gradient, w's gradient: 16 MB each
	g, _, w, _ := tanhLossGraph(t, n, 3, 0.02)
	life := func() (peakDrop int64) {
		t.Helper()
		free0, _, err := dev.MemInfo()
		if err != nil {
			t.Fatal(err)
		}
		m := NewTapeMachine(g, WithBackend(CUDA))
		if err := m.Err(); err != nil {
			t.Fatal(err)
		}
		s, err := NewSolver(m, G.NewAdamSolver())
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			if err := s.Step(G.NodesToValueGrads(G.Nodes{w})); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.Sync(); err != nil {
			t.Fatal(err)
		}
		alive, _, err := dev.MemInfo()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		return free0 - alive
	}
	life() // kernels loaded, the driver's one-time allocations made
	level, _, err := dev.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if drop := life(); drop < 5*n*n*4 {
			t.Fatalf("life %d: the machine took %d bytes while alive, want at least its buffers' %d", i, drop, 5*n*n*4)
		}
		free, _, err := dev.MemInfo()
		if err != nil {
			t.Fatal(err)
		}
		if d := level - free; d > 2<<20 || d < -(2<<20) {
			t.Fatalf("life %d: free memory %d after Close, %d before NewTapeMachine (%+d bytes)", i, free, level, -d)
		}
	}
}

// tanhLossGraph is mean(tanh(x·w)²) over n×n matrices x and w, with w's
// gradient, both let to seeded normal values of the standard deviation sd.
func tanhLossGraph(t *testing.T, n int, seed uint64, sd float64) (g *G.ExprGraph, x, w, loss *G.Node) {
	t.Helper()
	g = G.NewGraph()
	x = G.NewMatrix(g, tensor.Float32, G.WithShape(n, n), G.WithName("x"))
	w = G.NewMatrix(g, tensor.Float32, G.WithShape(n, n), G.WithName("w"))
	loss = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Tanh(G.Must(G.Mul(x, w))))))))
	if _, err := G.Grad(loss, w); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	fill := func() *tensor.Dense {
		d := make([]float32, n*n)
		for i := range d {
			d[i] = float32(rng.NormFloat64() * sd)
		}
		return tensor.New(tensor.WithShape(n, n), tensor.WithBacking(d))
	}
	G.Let(x, fill())
	G.Let(w, fill())
	return g, x, w, loss
}
