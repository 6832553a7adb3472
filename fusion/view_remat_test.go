package fusion_test

import (
	"math"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
)

// TestReshapeThatRecomputesIsNoView: a reshape's kernel that computes its
// operand again (tanh(x+x), left out of the kernel that made it) is no view
// of its one input x: the GPU backend gives a view its input's memory, and
// read x back where tanh(x+x) was wanted (a GPU fuzz graph, 2026-12-01).
func TestReshapeThatRecomputesIsNoView(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(9, 65), G.WithName("x"))
	th := G.Must(G.Tanh(G.Must(G.Add(x, x))))
	p := G.Must(G.Pow(G.Must(G.Add(G.Must(G.Softplus(x)), G.NewConstant(0.5))), th))
	r := G.Must(G.Reshape(th, tensor.Shape{3, 3, 65}))
	data := make([]float64, 9*65)
	for i := range data {
		data[i] = math.Sin(float64(i))
	}
	if err := G.Let(x, tensor.New(tensor.WithShape(9, 65), tensor.WithBacking(data))); err != nil {
		t.Fatal(err)
	}
	m := fusion.NewTapeMachine(g, fusion.WithTarget(graphpass.H200))
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	again := map[string][]string{} // kernel: what it computes again
	for _, gi := range m.Report().Groups {
		if len(gi.Recompute) > 0 {
			again[gi.Kernel] = gi.Recompute
		}
	}
	for _, n := range m.Compiled().Graph.AllNodes() {
		if f, ok := n.Op().(*fusion.FusedOp); ok && f.IsView() && again[f.Kernel().Name] != nil {
			t.Errorf("%s computes %v again and is a view of its input", f.Kernel().Name, again[f.Kernel().Name])
		}
	}
	if len(again) == 0 {
		t.Fatal("no kernel computes tanh(x+x) again: the test does not test it")
	}
	got := r.Value().Data().([]float64)
	for i, v := range data {
		if w := math.Tanh(v + v); math.Abs(got[i]-w) > 1e-15 {
			t.Fatalf("reshape[%d] = %v, want %v", i, got[i], w)
		}
	}
	_ = p
}
