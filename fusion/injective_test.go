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

// TestSliceConcatSoftmaxBackward: slices and a concat (and, in the backward
// pass, the softmax's backward and the concat's slices) fuse into kernels;
// the loss and the gradient match Gorgonia. Row 30 and the split at 13 are
// not multiples of any block.
func TestSliceConcatSoftmaxBackward(t *testing.T) { checkSliceConcat(t, 1e-12) }

func checkSliceConcat(t *testing.T, tol float64, opts ...fusion.Option) {
	build := func() (*G.ExprGraph, *G.Node, *G.Node, *G.Node, *G.Node) {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(7, 30), G.WithName("x"))
		tg := G.NewMatrix(g, tensor.Float64, G.WithShape(7, 30), G.WithName("target"))
		a := G.Must(G.Tanh(G.Must(G.Slice(x, nil, G.S(0, 13)))))
		b := G.Must(G.Exp(G.Must(G.Mul(G.Must(G.Slice(x, nil, G.S(13, 30))), G.NewConstant(0.5)))))
		p := G.Must(G.SoftMax(G.Must(G.Concat(1, a, b))))
		loss := G.Must(G.Sum(G.Must(G.HadamardProd(p, tg))))
		grads, err := G.Grad(loss, x)
		if err != nil {
			t.Fatal(err)
		}
		return g, x, tg, loss, grads[0]
	}
	gRef, xRef, tRef, lossRef, dxRef := build()
	g, x, tg, loss, dx := build()
	rng := rand.New(rand.NewPCG(9, 9))
	xv, tv := data(tensor.Float64, rng, 7, 30), data(tensor.Float64, rng, 7, 30)
	for _, l := range [][2]*G.Node{{xRef, x}, {tRef, tg}} {
		v := xv
		if l[0] == tRef {
			v = tv
		}
		if err := G.Let(l[0], v); err != nil {
			t.Fatal(err)
		}
		if err := G.Let(l[1], v.Clone()); err != nil {
			t.Fatal(err)
		}
	}
	vm := fusion.NewTapeMachine(g, opts...)
	defer vm.Close()
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	for _, u := range vm.Report().Unfused {
		for _, op := range []string{"Slice", "Concat", "SoftMax's gradient"} {
			if strings.HasPrefix(u.Op, op) {
				t.Fatalf("%s left to Gorgonia:\n%v", u.Op, vm.Report())
			}
		}
	}
	lowersToPTX(t, vm)
	vmRef := G.NewTapeMachine(gRef)
	defer vmRef.Close()
	if err := vmRef.RunAll(); err != nil {
		t.Fatal(err)
	}
	if err := vm.RunAll(); err != nil {
		t.Fatalf("%v\n%v", err, vm.Report())
	}
	if a, b := scalar(loss.Value()), scalar(lossRef.Value()); !(math.Abs(a-b) <= tol*(1+math.Abs(b))) {
		t.Fatalf("loss %v fused, %v in Gorgonia", a, b)
	}
	got, want := floats(dx.Value()), floats(dxRef.Value())
	if len(got) != len(want) || len(want) != 7*30 {
		t.Fatalf("gradient: %d values, want %d", len(got), len(want))
	}
	for j := range want {
		if !(math.Abs(got[j]-want[j]) <= tol*(1+math.Abs(want[j]))) {
			t.Fatalf("gradient [%d] = %v, want %v\n%v", j, got[j], want[j], vm.Report())
		}
	}
	t.Logf("%d kernels; left to Gorgonia: %d", vm.Report().Kernels(), len(vm.Report().Unfused))
}
