package fusion_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
)

// TestUnsummedGradientsAreNotComputed: in y = tanh(x·W) with Grad asked for
// W only, Gorgonia still differentiates the product with respect to x: its
// contribution dy·Wᵀ is a root that it never sums into a gradient of x. No
// kernel computes it, the report lists it, the rewritten graph holds no
// value of its shape; W's gradient is right. Kept with WithKeep, it is
// computed, and right.
func TestUnsummedGradientsAreNotComputed(t *testing.T) {
	const b, in, out = 7, 9, 5
	build := func() (g *G.ExprGraph, x, w, dx *G.Node) {
		g = G.NewGraph()
		x = G.NewMatrix(g, tensor.Float64, G.WithShape(b, in), G.WithName("x"))
		w = G.NewMatrix(g, tensor.Float64, G.WithShape(in, out), G.WithName("w"))
		cost := G.Must(G.Sum(G.Must(G.Tanh(G.Must(G.Mul(x, w))))))
		if _, err := G.Grad(cost, w); err != nil {
			t.Fatal(err)
		}
		for _, n := range g.AllNodes() { // the contribution to x's gradient: b×in, from the graph's roots
			if n.Shape().TotalSize() == b*in && n != x && len(n.DerivOf()) == 0 && g.To(n.ID()).Len() == 0 {
				dx = n
			}
		}
		if dx == nil || x.Deriv() != nil {
			t.Fatalf("no unsummed contribution to x's gradient (x's gradient: %v): the test's premise is gone", x.Deriv())
		}
		return g, x, w, dx
	}
	rng := rand.New(rand.NewPCG(3, 4))
	xv, wv := randMatrix(rng, b, in, 1), randMatrix(rng, in, out, 1)
	for _, keep := range []bool{false, true} {
		g, x, w, dx := build()
		G.Let(x, xv)
		G.Let(w, wv)
		opts := []fusion.Option{fusion.WithMatMulFusion(true)}
		if keep {
			opts = append(opts, fusion.WithKeep(dx))
		}
		vm := fusion.NewTapeMachine(g, opts...)
		if err := vm.Err(); err != nil {
			t.Fatal(err)
		}
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		rep := vm.Report()
		listed := strings.Contains(strings.Join(rep.NotComputed, ";"), "MatMul")
		held := false
		for _, n := range vm.Compiled().Graph.AllNodes() {
			held = held || n.Op() != nil && n.Shape().TotalSize() == b*in && n.Name() != "x"
		}
		if listed == keep || held != keep {
			t.Fatalf("kept %v: listed as not computed %v, a value of its shape in the rewritten graph %v:\n%v", keep, listed, held, rep)
		}
		// the float64 reference: dW = xᵀ·(1 − tanh²(x·W)), dx = (1 − tanh²)·Wᵀ
		X, W := floats(xv), floats(wv)
		dy := make([]float64, b*out)
		for i := range b {
			for j := range out {
				s := 0.0
				for k := range in {
					s += X[i*in+k] * W[k*out+j]
				}
				th := math.Tanh(s)
				dy[i*out+j] = 1 - th*th
			}
		}
		dW, dX := make([]float64, in*out), make([]float64, b*in)
		for i := range b {
			for j := range out {
				for k := range in {
					dW[k*out+j] += X[i*in+k] * dy[i*out+j]
					dX[i*in+k] += dy[i*out+j] * W[k*out+j]
				}
			}
		}
		gw, err := w.Grad()
		if err != nil {
			t.Fatal(err)
		}
		closeTo(t, "dW", floats(gw), dW, 1e-12)
		if keep {
			closeTo(t, "the contribution to dx", floats(dx.Value()), dX, 1e-12)
		}
		vm.Close()
	}
}
