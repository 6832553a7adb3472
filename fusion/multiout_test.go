package fusion_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
)

// TestGELUTrainingForwardIsOneKernel: in a training graph the backward
// pass reads the GELU's intermediates, and each is an extra output of the
// one forward kernel, not the cut between kernels it was (8 kernels for this
// forward before multi-output groups). Loss and gradients match Gorgonia.
func TestGELUTrainingForwardIsOneKernel(t *testing.T) { checkGELUTraining(t, 1e-12) }

func checkGELUTraining(t *testing.T, tol float64, opts ...fusion.Option) {
	build := func() (*G.ExprGraph, G.Nodes, *G.Node, G.Nodes) {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(13, 20), G.WithName("x"))
		w := G.NewMatrix(g, tensor.Float64, G.WithShape(20, 37), G.WithName("w"))
		b := G.NewVector(g, tensor.Float64, G.WithShape(37), G.WithName("b"))
		c := func(v float64) *G.Node { return G.NewConstant(v) }
		h := G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w)), b, nil, []byte{0}))
		inner := G.Must(G.Mul(G.Must(G.Add(h, G.Must(G.Mul(G.Must(G.Cube(h)), c(0.044715))))), c(math.Sqrt(2/math.Pi))))
		y := G.Must(G.Mul(G.Must(G.HadamardProd(h, G.Must(G.Add(G.Must(G.Tanh(inner)), c(1))))), c(0.5)))
		loss := G.Must(G.Mean(G.Must(G.Square(y))))
		grads, err := G.Grad(loss, w, b)
		if err != nil {
			t.Fatal(err)
		}
		return g, G.Nodes{x, w, b}, loss, grads
	}
	rng := rand.New(rand.NewPCG(7, 11))
	vals := []tensor.Tensor{data(tensor.Float64, rng, 13, 20), data(tensor.Float64, rng, 20, 37), nil}
	bv := make([]float64, 37)
	for i := range bv {
		bv[i] = rng.Float64() - 0.5
	}
	vals[2] = tensor.New(tensor.WithShape(37), tensor.WithBacking(bv))

	gRef, insRef, lossRef, gradsRef := build()
	g, ins, loss, grads := build()
	for i := range ins {
		if err := G.Let(insRef[i], vals[i]); err != nil {
			t.Fatal(err)
		}
		if err := G.Let(ins[i], vals[i].Clone()); err != nil {
			t.Fatal(err)
		}
	}
	vmRef := G.NewTapeMachine(gRef)
	defer vmRef.Close()
	vm := fusion.NewTapeMachine(g, opts...)
	defer vm.Close()
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	// the forward GELU: one kernel holds cube and tanh, with extra outputs
	var fwd []fusion.GroupInfo
	for _, gi := range vm.Report().Groups {
		ops := strings.Join(gi.Ops, " ")
		if strings.Contains(ops, "Cube") || strings.Contains(ops, "Tanh") {
			fwd = append(fwd, gi)
		}
	}
	if len(fwd) != 1 || !slices.ContainsFunc(fwd[0].Ops, func(s string) bool { return strings.HasPrefix(s, "Cube") }) ||
		!slices.ContainsFunc(fwd[0].Ops, func(s string) bool { return strings.HasPrefix(s, "Tanh") }) || len(fwd[0].Extra) == 0 {
		t.Fatalf("the GELU forward is not one kernel with extra outputs:\n%v", vm.Report())
	}
	if err := vmRef.RunAll(); err != nil {
		t.Fatal(err)
	}
	if err := vm.RunAll(); err != nil {
		t.Fatalf("%v\n%v", err, vm.Report())
	}
	if a, b := scalar(loss.Value()), scalar(lossRef.Value()); !(math.Abs(a-b) <= tol*math.Abs(b)) {
		t.Fatalf("loss %v fused, %v in Gorgonia", a, b)
	}
	for i := range grads {
		got, want := floats(grads[i].Value()), floats(gradsRef[i].Value())
		if len(got) != len(want) || len(want) == 0 {
			t.Fatalf("gradient %d: %d values, want %d", i, len(got), len(want))
		}
		for j := range want {
			if !(math.Abs(got[j]-want[j]) <= tol*(1+math.Abs(want[j]))) {
				t.Fatalf("gradient %d [%d] = %v, want %v", i, j, got[j], want[j])
			}
		}
	}
	t.Logf("%d kernels, the forward one with %d extra outputs", vm.Report().Kernels(), len(fwd[0].Extra))
}
