package fusion_test

import (
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
)

// TestIdenticalLayersCompileOnce: two layers that compute the same on
// inputs of the same shapes become two kernels of different names and the
// same text without names, which share one compiled CPU form; a layer
// that differs (another constant) gets its own. Each computes its own
// values.
func TestIdenticalLayersCompileOnce(t *testing.T) {
	g := G.NewGraph()
	layer := func(name string, c float32) *G.Node {
		x := G.NewMatrix(g, tensor.Float32, G.WithShape(6, 40), G.WithName(name))
		return G.Must(G.SoftMax(G.Must(G.Mul(G.Must(G.Tanh(x)), G.NewConstant(c)))))
	}
	y1, y2, y3 := layer("x1", 2), layer("x2", 2), layer("x3", 3)
	m := fusion.NewTapeMachine(g)
	defer m.Close()
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
	var execs []any
	var names []string
	for _, n := range m.Compiled().Graph.AllNodes() {
		if f, ok := n.Op().(*fusion.FusedOp); ok {
			execs = append(execs, fusion.ExecOf(f))
			names = append(names, f.Kernel().Name)
		}
	}
	if len(execs) != 3 {
		t.Fatalf("%d kernels, want 3: %v", len(execs), names)
	}
	same, distinct := 0, map[any]bool{}
	for i := range execs {
		distinct[execs[i]] = true
		for j := i + 1; j < len(execs); j++ {
			if execs[i] == execs[j] {
				same++
			}
		}
	}
	if same != 1 || len(distinct) != 2 {
		t.Fatalf("kernels %v: %d pairs share a compiled form, %d distinct forms; want 1 and 2", names, same, len(distinct))
	}
	for i, x := range []string{"x1", "x2", "x3"} {
		d := make([]float32, 240)
		for j := range d {
			d[j] = float32(i+1) * float32(j%7) / 10
		}
		for _, n := range g.AllNodes() {
			if n.Name() == x {
				if err := G.Let(n, tensor.New(tensor.WithShape(6, 40), tensor.WithBacking(d))); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	a, b := y1.Value().Data().([]float32), y2.Value().Data().([]float32)
	if a[7] == b[7] || y3.Value().Data().([]float32)[7] == a[7] {
		t.Fatalf("the layers' outputs coincide: %v %v %v", a[7], b[7], y3.Value().Data().([]float32)[7])
	}
}
