package fusion_test

import (
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/fusion"
)

// Helpers of the tests that build a graph twice, run one copy on
// Gorgonia's machine and the other on tilefuse's, and compare.

// letTwins gives each node of ref and the node at its index in ours the
// same seeded values in [-1, 1), in the node's dtype; level, if not nil,
// maps each value first (a few levels: ties).
func letTwins(t *testing.T, rng *rand.Rand, ref, ours []*G.Node, level func(float64) float64) {
	t.Helper()
	for i := range ref {
		n := ref[i].Shape().TotalSize()
		next := func() float64 {
			x := rng.Float64()*2 - 1
			if level != nil {
				x = level(x)
			}
			return x
		}
		var v *tensor.Dense
		if ref[i].Dtype() == tensor.Float32 {
			b := make([]float32, n)
			for j := range b {
				b[j] = float32(next())
			}
			v = tensor.New(tensor.WithShape(ref[i].Shape().Clone()...), tensor.WithBacking(b))
		} else {
			b := make([]float64, n)
			for j := range b {
				b[j] = next()
			}
			v = tensor.New(tensor.WithShape(ref[i].Shape().Clone()...), tensor.WithBacking(b))
		}
		if err := G.Let(ref[i], v); err != nil {
			t.Fatal(err)
		}
		if err := G.Let(ours[i], v.Clone()); err != nil {
			t.Fatal(err)
		}
	}
}

// runTwins runs Gorgonia's machine over gRef, then vm (tilefuse's, over
// the twin graph), once each, failing t on an error of either.
func runTwins(t *testing.T, gRef *G.ExprGraph, vm *fusion.Machine) {
	t.Helper()
	vmRef := G.NewTapeMachine(gRef)
	t.Cleanup(func() { vmRef.Close() })
	if err := vmRef.RunAll(); err != nil {
		t.Fatal(err)
	}
	if err := vm.RunAll(); err != nil {
		t.Fatalf("%v\n%v", err, vm.Report())
	}
}

// sameAsGorgonia fails t unless node got's value is node want's (closeTo:
// within tol·(1 + |want|), tol 0 bit for bit); a scalar as one element.
func sameAsGorgonia(t *testing.T, what string, got, want *G.Node, tol float64) {
	t.Helper()
	g, w := floats(got.Value()), floats(want.Value())
	if len(w) == 0 && want.Value() != nil {
		g, w = []float64{scalar(got.Value())}, []float64{scalar(want.Value())}
	}
	if len(w) == 0 {
		t.Fatalf("%s: Gorgonia's has no value", what)
	}
	closeTo(t, what, g, w, tol)
}

// needMachineCode skips t where the CPU's kernels are not machine code
// (no AVX2 and FMA, or -tags purego), saying so, and why where given.
func needMachineCode(t *testing.T, why string) {
	t.Helper()
	if !jit.Supported() {
		msg := "kernels are not machine code on this CPU (no AVX2 and FMA, or -tags purego)"
		if why != "" {
			msg += ": " + why
		}
		t.Skip(msg)
	}
}
