package fusion

import (
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestWriteOut: the readable set, which the partition writes out, holds
// what the user can read — kept and named nodes, gradients, scalars,
// outputs, predictions — and nothing else, so inner values fuse away.
func TestWriteOut(t *testing.T) {
	g := G.NewGraph()
	w := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName("w"))
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName("x"))
	inner := G.Must(G.Exp(x))                                                             // fuses away
	kept := G.Must(G.Tanh(inner))                                                         // WithKeep
	named := G.Must(G.Sigmoid(kept))                                                      // named by the user
	G.WithName("hidden")(named)                                                           //
	h := G.Must(G.HadamardProd(G.Must(G.Tanh(w)), named))                                 // w's path
	sq := G.Must(G.Square(h))                                                             // inside the loss
	cost := G.Must(G.Sum(sq))                                                             // a scalar
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
		{"the prediction the loss is computed from", h, true},
		{"a square inside the loss", sq, false},
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

// TestPredictions: the readable set holds what each loss is computed from,
// and not the loss's own intermediates nor the network's inside.
func TestPredictions(t *testing.T) {
	type graph struct {
		g         *G.ExprGraph
		pred, not []*G.Node
	}
	cases := []struct {
		name  string
		build func() graph
	}{
		{"mean squared error", func() graph {
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 3), G.WithName("x"))
			target := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 2), G.WithName("target"))
			w := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 2), G.WithName("w"))
			hidden := G.Must(G.Tanh(x))
			pred := G.Must(G.Mul(hidden, w))
			diff := G.Must(G.Sub(pred, target))
			sq := G.Must(G.Square(diff))
			cost := G.Must(G.Mean(sq))
			if _, err := G.Grad(cost, w); err != nil {
				t.Fatal(err)
			}
			return graph{g, []*G.Node{pred}, []*G.Node{hidden, diff, sq}}
		}},
		{"cross-entropy of a softmax", func() graph {
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 3), G.WithName("x"))
			onehot := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 3), G.WithName("onehot"))
			w := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName("w"))
			logits := G.Must(G.Mul(x, w))
			probs := G.Must(G.SoftMax(logits))
			cost := G.Must(G.Neg(G.Must(G.Mean(G.Must(G.HadamardProd(G.Must(G.Log(probs)), onehot))))))
			if _, err := G.Grad(cost, w); err != nil {
				t.Fatal(err)
			}
			return graph{g, []*G.Node{probs}, []*G.Node{logits}}
		}},
		{"a sigmoid output", func() graph {
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 3), G.WithName("x"))
			w := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 1), G.WithName("w"))
			z := G.Must(G.Mul(x, w))
			p := G.Must(G.Sigmoid(z))
			cost := G.Must(G.Mean(G.Must(G.Neg(G.Must(G.Log(p))))))
			if _, err := G.Grad(cost, w); err != nil {
				t.Fatal(err)
			}
			return graph{g, []*G.Node{p}, []*G.Node{z}}
		}},
		{"an inference graph with a metric", func() graph {
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 3), G.WithName("x"))
			e := G.Must(G.Exp(x))
			y := G.Must(G.HadamardProd(e, G.Must(G.Tanh(x))))
			G.Must(G.Sum(G.Must(G.Abs(y))))
			return graph{g, []*G.Node{y}, []*G.Node{e}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gr := tc.build()
			read := compileThrough(t, gr.g, "readable").isRead
			for _, n := range gr.pred {
				if !read[n] {
					t.Errorf("prediction %v is not readable", n)
				}
			}
			for _, n := range gr.not {
				if read[n] {
					t.Errorf("%v, not a prediction, is readable", n)
				}
			}
		})
	}
}
