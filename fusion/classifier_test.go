package fusion_test

import (
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
)

type classifier struct {
	g          *G.ExprGraph
	x, y       *G.Node
	w, b       *G.Node
	loss       *G.Node
	learnables G.Nodes
}

// newClassifier is softmax regression with cross-entropy, as Gorgonia users
// write it: probs = SoftMax(x·W + b), loss = -mean(Σ onehot ⊙ log(probs)).
func newClassifier(t *testing.T, batch, in, classes int) *classifier {
	t.Helper()
	rng := rand.New(rand.NewPCG(21, 22))
	g := G.NewGraph()
	c := &classifier{g: g}
	wv := make([]float64, in*classes)
	for i := range wv {
		wv[i] = rng.NormFloat64() * 0.3
	}
	c.x = G.NewMatrix(g, tensor.Float64, G.WithShape(batch, in), G.WithName("x"))
	c.y = G.NewMatrix(g, tensor.Float64, G.WithShape(batch, classes), G.WithName("onehot"))
	c.w = G.NewMatrix(g, tensor.Float64, G.WithShape(in, classes), G.WithName("w"), G.WithValue(tensor.New(tensor.WithShape(in, classes), tensor.WithBacking(wv))))
	c.b = G.NewVector(g, tensor.Float64, G.WithShape(classes), G.WithName("b"), G.WithInit(G.Zeroes()))
	logits := G.Must(G.BroadcastAdd(G.Must(G.Mul(c.x, c.w)), c.b, nil, []byte{0}))
	probs := G.Must(G.SoftMax(logits))
	ll := G.Must(G.Sum(G.Must(G.HadamardProd(c.y, G.Must(G.Log(probs)))), 1))
	c.loss = G.Must(G.Neg(G.Must(G.Mean(ll))))
	c.learnables = G.Nodes{c.w, c.b}
	if _, err := G.Grad(c.loss, c.learnables...); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSoftmaxClassifierMatchesGorgonia trains softmax regression with
// cross-entropy 10 steps, fused and on Gorgonia's machine: losses and
// weights agree (float64, 1e-10 relative).
func TestSoftmaxClassifierMatchesGorgonia(t *testing.T) { checkClassifier(t) }

func checkClassifier(t *testing.T, opts ...fusion.Option) {
	const batch, in, classes = 16, 5, 7
	ref, fu := newClassifier(t, batch, in, classes), newClassifier(t, batch, in, classes)
	vmRef := G.NewTapeMachine(ref.g)
	defer vmRef.Close()
	vm := fusion.NewTapeMachine(fu.g, opts...)
	defer vm.Close()
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	t.Log(vm.Report())
	solRef, sol := G.NewAdamSolver(G.WithLearnRate(0.05)), G.NewAdamSolver(G.WithLearnRate(0.05))
	rng := rand.New(rand.NewPCG(8, 8))
	for step := 0; step < 10; step++ {
		xv := randMatrix(rng, batch, in, 1)
		oh := make([]float64, batch*classes)
		for i := 0; i < batch; i++ {
			oh[i*classes+rng.IntN(classes)] = 1
		}
		yv := tensor.New(tensor.WithShape(batch, classes), tensor.WithBacking(oh))
		for _, c := range []*classifier{ref, fu} {
			G.Let(c.x, xv.Clone())
			G.Let(c.y, yv.Clone())
		}
		if err := vmRef.RunAll(); err != nil {
			t.Fatal(err)
		}
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		lockstep(t, step, 1e-10, ref.loss, fu.loss, solRef, sol, ref.learnables, fu.learnables, vmRef, vm)
	}
	a, b := floats(ref.w.Value()), floats(fu.w.Value())
	closeTo(t, "w", b, a, 1e-10)
}
