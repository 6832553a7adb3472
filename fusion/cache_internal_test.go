package fusion

import (
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestCompileReusesExecs: compiling a graph again takes each kernel's
// compiled CPU form from the cache (the same *cpu.Exec), and the result
// still runs.
func TestCompileReusesExecs(t *testing.T) {
	build := func() (*G.ExprGraph, *G.Node, *G.Node) {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 5), G.WithName("x"))
		y := G.Must(G.SoftMax(G.Must(G.Tanh(G.Must(G.Mul(x, G.NewConstant(2.0)))))))
		return g, x, y
	}
	execsOf := func(c *Compiled) []*FusedOp {
		var ops []*FusedOp
		for _, n := range c.Graph.AllNodes() {
			if f, ok := n.Op().(*FusedOp); ok {
				ops = append(ops, f)
			}
		}
		return ops
	}
	g1, _, _ := build()
	c1, err := Compile(g1)
	if err != nil {
		t.Fatal(err)
	}
	g2, x2, y2 := build()
	c2, err := Compile(g2)
	if err != nil {
		t.Fatal(err)
	}
	a, b := execsOf(c1), execsOf(c2)
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("%d and %d fused ops", len(a), len(b))
	}
	for i := range a {
		if a[i].exec != b[i].exec {
			t.Errorf("kernel %s compiled again, not taken from the cache", b[i].name)
		}
	}
	m := NewTapeMachine(g2)
	defer m.Close()
	G.Let(x2, tensor.New(tensor.WithShape(3, 5), tensor.WithBacking(make([]float64, 15))))
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	if got := y2.Value().Data().([]float64)[0]; got != 0.2 {
		t.Fatalf("softmax of a zero row: %v, want 0.2", got)
	}
}
