package fusion_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/ops"
)

// TestFoldedExtraOutputs: a group that reads only constants is folded into
// a constant at compile time; when it has extra outputs each becomes a
// constant of its own. A PartOp reading a folded constant ran on the CPU
// (it slices host memory) but the GPU backend has no kernel outputs to cut
// it from ("part 0 of 2 of ..., which has 0 outputs": TestFuzzGraphsOnGPU,
// H200, 2026-12-01). The graph is that fuzz input's: the gradient of
// Sum(x·(−0.125)) with at most 5 ops a kernel, on the GPU's target.
func TestFoldedExtraOutputs(t *testing.T) {
	fg, err := fzBuild([]byte("\xf3\xce\xc2K%\xcc˞H\xc6O\x98\xe9\x1b\x10\xdb"), tensor.Dtype{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := fusion.Compile(fg.g, fusion.WithMaxGroup(fg.maxGrp), fusion.WithTarget(graphpass.H200), fusion.WithMatMulFusion(false))
	if err != nil {
		t.Fatal(err)
	}
	parts := 0
	for _, n := range c.Graph.AllNodes() {
		if _, ok := n.Op().(*fusion.PartOp); !ok {
			continue
		}
		parts++
		for it := c.Graph.From(n.ID()); it.Next(); {
			if a := it.Node().(*G.Node); ops.IsConst(a.Op()) {
				t.Errorf("%v cuts its value from the constant %v: fold each output into a constant of its own", n.Name(), a.Name())
			}
		}
	}
	t.Logf("%d parts of kernels left in the graph", parts)
	// and the values are right on the CPU
	fzCheck(t, []byte("\xf3\xce\xc2K%\xcc˞H\xc6O\x98\xe9\x1b\x10\xdb"), fusion.CPU)
}

// TestFoldedScalarsRun: in a float32 graph with Mean's divisors (forward
// and in Grad's chain) and a scalar of constants the user names, the
// scalars made of constants and shapes alone are folded at import: no
// kernel computes one (each was a one-element kernel), the named one holds,
// after a run on the fused machine, bit for bit the value Gorgonia's
// machine computes, and the loss and the gradients agree with Gorgonia's
// within float32 rounding (seeded data, 5×7 with 3 columns: no block
// size). At most 6 kernels; 10 without folding when it came.
func TestFoldedScalarsRun(t *testing.T) {
	build := func() (g *G.ExprGraph, x, w, scale, loss *G.Node) {
		g = G.NewGraph()
		x = G.NewMatrix(g, tensor.Float32, G.WithShape(5, 7), G.WithName("x"))
		w = G.NewMatrix(g, tensor.Float32, G.WithShape(7, 3), G.WithName("w"))
		n := G.Must(G.Mul(G.Must(G.SizeOf(0, x)), G.Must(G.SizeOf(1, x))))
		scale = G.Must(G.Div(G.NewConstant(float32(1), G.In(g)), n))
		G.WithName("scale")(scale)
		h := G.Must(G.Tanh(G.Must(G.Mul(G.Must(G.Mul(x, scale)), w))))
		loss = G.Must(G.Mean(G.Must(G.Square(h))))
		if _, err := G.Grad(loss, w); err != nil {
			t.Fatal(err)
		}
		return
	}
	rng := rand.New(rand.NewPCG(31, 32))
	xv, wv := randMatrix(rng, 5, 7, 2), randMatrix(rng, 7, 3, 2)
	f32 := func(d *tensor.Dense) *tensor.Dense {
		v := make([]float32, d.Size())
		for i, f := range d.Data().([]float64) {
			v[i] = float32(f)
		}
		return tensor.New(tensor.WithShape(d.Shape()...), tensor.WithBacking(v))
	}
	gr, xr, wr, sr, lr := build()
	gf, xf, wf, sf, lf := build()
	for _, p := range [][2]*G.Node{{xr, xf}, {wr, wf}} {
		for _, n := range p {
			v := xv
			if n.Name() == "w" {
				v = wv
			}
			if err := G.Let(n, f32(v)); err != nil {
				t.Fatal(err)
			}
		}
	}
	ref := G.NewTapeMachine(gr)
	defer ref.Close()
	m := fusion.NewTapeMachine(gf)
	defer m.Close()
	if err := ref.RunAll(); err != nil {
		t.Fatal(err)
	}
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	for _, k := range m.Report().Groups {
		for _, n := range k.Nodes {
			if n == "scale" || strings.HasPrefix(n, "Mul(SizeOf") || strings.HasPrefix(n, "Div(constant") {
				t.Errorf("kernel %d (%s) computes %s from constants: want it folded", k.ID, k.Kind, n)
			}
		}
	}
	if got := m.Report().Kernels(); got > 6 { // 10 with the 4 scalars' kernels
		t.Errorf("%d kernels, want at most 6\n%v", got, m.Report())
	}
	if sf.Value() == nil {
		t.Fatalf("the named scalar has no value\n%v", m.Report())
	}
	if got, want := sf.Value().Data().(float32), sr.Value().Data().(float32); math.Float32bits(got) != math.Float32bits(want) {
		t.Errorf("scale = %v, Gorgonia computes %v", got, want)
	}
	closeTo(t, "loss", []float64{scalar(lf.Value())}, []float64{scalar(lr.Value())}, 1e-6)
	gw, err := wf.Grad()
	if err != nil {
		t.Fatal(err)
	}
	gwr, err := wr.Grad()
	if err != nil {
		t.Fatal(err)
	}
	closeTo(t, "d loss/d w", floats(gw), floats(gwr), 1e-5)
	t.Logf("%v", m.Report())
}
