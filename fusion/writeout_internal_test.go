package fusion

import (
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestWriteOut: the readable set, which the partition writes out, holds
// what the user can read — kept and named nodes, gradients, scalars,
// outputs — and nothing else, so inner values fuse away.
func TestWriteOut(t *testing.T) {
	g := G.NewGraph()
	w := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName("w"))
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName("x"))
	inner := G.Must(G.Exp(x))                                                             // fuses away
	kept := G.Must(G.Tanh(inner))                                                         // WithKeep
	named := G.Must(G.Sigmoid(kept))                                                      // named by the user
	G.WithName("hidden")(named)                                                           //
	h := G.Must(G.HadamardProd(G.Must(G.Tanh(w)), named))                                 // w's path
	cost := G.Must(G.Sum(G.Must(G.Square(h))))                                            // a scalar
	two := G.Must(G.Mul(G.Must(G.Square(x)), G.NewConstant(float64(2), G.WithName("2")))) // an output
	if _, err := G.Grad(cost, w); err != nil {
		t.Fatal(err)
	}
	out := compileThrough(t, g, "readable", WithKeep(kept)).isRead
	cases := []struct {
		name string
		n    *G.Node
		want bool
	}{
		{"an inner value", inner, false},
		{"a kept node", kept, true},
		{"a named node", named, true},
		{"a scalar", cost, true},
		{"an output", two, true},
		{"the gradient", w.Deriv(), true},
		{"a square inside the loss", h, false},
	}
	for _, c := range cases {
		if c.n == nil {
			t.Fatalf("%s: no node", c.name)
		}
		if out[c.n] != c.want {
			t.Errorf("%s (%v): written out %v, want %v", c.name, c.n, out[c.n], c.want)
		}
	}
}
