package fusion_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/fusion"
)

// randomGraph builds, from seed, a random DAG of elementwise, broadcast and
// reduction ops over matrices of random (mostly non-power-of-two) shape, its
// scalar cost and the gradients of that cost: the same seed builds the same graph.
func randomGraph(seed uint64) (g *G.ExprGraph, inputs, outputs G.Nodes, err error) {
	defer func() {
		if r := recover(); r != nil { // G.Must panics on a shape mistake of the generator
			err = fmt.Errorf("building graph %d: %v", seed, r)
		}
	}()
	rng := rand.New(rand.NewPCG(seed, 99))
	g = G.NewGraph()
	m, n := 1+rng.IntN(37), 1+rng.IntN(41)
	var mats, vecsN, vecsM G.Nodes
	for i := 0; i < 2+rng.IntN(2); i++ {
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(m, n), G.WithName(fmt.Sprintf("x%d", i)))
		inputs = append(inputs, x)
		mats = append(mats, x)
	}
	b := G.NewVector(g, tensor.Float64, G.WithShape(n), G.WithName("b"))
	inputs = append(inputs, b)
	vecsN = append(vecsN, b)
	pick := func(ns G.Nodes) *G.Node { return ns[rng.IntN(len(ns))] }
	unary := []func(*G.Node) (*G.Node, error){G.Tanh, G.Sigmoid, G.Square, G.Neg, G.Abs, G.Sin, G.Cos, G.Softplus,
		func(x *G.Node) (*G.Node, error) { return G.Exp(G.Must(G.Tanh(x))) },
		func(x *G.Node) (*G.Node, error) { return G.Log1p(G.Must(G.Square(x))) }}
	for step := 0; step < 6+rng.IntN(8); step++ {
		switch rng.IntN(7) {
		case 0, 1:
			mats = append(mats, G.Must(unary[rng.IntN(len(unary))](pick(mats))))
		case 2:
			x, y := pick(mats), pick(mats)
			ops := []func(a, b *G.Node) (*G.Node, error){G.Add, G.Sub, G.HadamardProd}
			mats = append(mats, G.Must(ops[rng.IntN(len(ops))](x, y)))
		case 3: // a scalar constant
			mats = append(mats, G.Must(G.Mul(pick(mats), G.NewConstant(rng.Float64()*2-1))))
		case 4: // broadcast a vector over the rows
			mats = append(mats, G.Must(G.BroadcastAdd(pick(mats), pick(vecsN), nil, []byte{0})))
		case 5: // reduce along an axis
			if rng.IntN(2) == 0 {
				vecsN = append(vecsN, G.Must(G.Sum(pick(mats), 0)))
			} else {
				vecsM = append(vecsM, G.Must(G.Max(pick(mats), 1)))
			}
		case 6: // broadcast a row reduction back over its row
			if len(vecsM) > 0 {
				mats = append(mats, G.Must(G.BroadcastSub(pick(mats), pick(vecsM), nil, []byte{1})))
			}
		}
	}
	var terms G.Nodes
	for _, x := range mats[len(inputs)-1:] {
		terms = append(terms, G.Must(G.Sum(x)))
	}
	for _, v := range append(vecsN[1:], vecsM...) {
		terms = append(terms, G.Must(G.Sum(v)))
	}
	cost := terms[0]
	for _, tm := range terms[1:] {
		cost = G.Must(G.Add(cost, tm))
	}
	outputs = G.Nodes{cost}
	var used G.Nodes // Grad refuses inputs the cost does not depend on
	for _, x := range inputs {
		if g.To(x.ID()).Len() > 0 {
			used = append(used, x)
		}
	}
	grads, err := G.Grad(cost, used...)
	if err != nil {
		return nil, nil, nil, err
	}
	return g, inputs, append(outputs, grads...), nil
}

// TestRandomGraphs compares fused against Gorgonia's tape machine on random
// graphs, forward and backward (float64: 1e-9 relative). The seed of a
// failing graph is in the failure.
func TestRandomGraphs(t *testing.T) {
	n := 60
	if testing.Short() {
		n = 15
	}
	kernels, ops, extra := 0, 0, 0
	for seed := uint64(1); seed <= uint64(n); seed++ {
		gRef, inRef, outRef, err := randomGraph(seed)
		if err != nil {
			t.Fatal(err)
		}
		gFu, inFu, outFu, err := randomGraph(seed)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, 1))
		for i, x := range inRef {
			v := tensor.New(tensor.WithShape(x.Shape()...), tensor.WithBacking(tensor.Random(tensor.Float64, x.Shape().TotalSize())))
			d := v.Data().([]float64)
			for j := range d {
				d[j] = rng.Float64()*4 - 2
			}
			G.Let(x, v)
			G.Let(inFu[i], v.Clone())
		}
		vmRef := G.NewTapeMachine(gRef)
		vm := fusion.NewTapeMachine(gFu)
		if err := vm.Err(); err != nil {
			t.Fatalf("graph %d: %v", seed, err)
		}
		if err := vmRef.RunAll(); err != nil {
			t.Fatalf("graph %d: Gorgonia: %v", seed, err)
		}
		if err := vm.RunAll(); err != nil {
			t.Fatalf("graph %d: fused: %v\n%v", seed, err, vm.Report())
		}
		// fusion must not raise peak memory: the fused graph holds no more
		// values, element for element, than the original
		if fu, ref := valueElems(vm.Compiled().Graph), valueElems(gRef); fu > ref {
			t.Fatalf("graph %d: the fused graph holds %d elements of values, the original %d\n%v", seed, fu, ref, vm.Report())
		}
		for i, o := range outRef {
			a, b := floats(o.Value()), floats(outFu[i].Value())
			if o.IsScalar() {
				a, b = []float64{scalar(o.Value())}, []float64{scalar(outFu[i].Value())}
			}
			if len(a) != len(b) {
				t.Fatalf("graph %d: output %d (%s): %d values fused, %d in Gorgonia\n%v", seed, i, o.Name(), len(b), len(a), vm.Report())
			}
			for j := range a {
				if !(math.Abs(a[j]-b[j]) <= 1e-12+1e-9*math.Abs(a[j])) && !(math.IsNaN(a[j]) && math.IsNaN(b[j])) {
					t.Fatalf("graph %d: output %d (%s)[%d]: %v fused, %v in Gorgonia\n%v", seed, i, o.Name(), j, b[j], a[j], vm.Report())
				}
			}
		}
		kernels += vm.Report().Kernels()
		ops += vm.Report().FusedOps()
		for _, gi := range vm.Report().Groups {
			extra += len(gi.Extra)
		}
		// every generated kernel also lowers to PTX, for the GPU backend
		for _, n := range vm.Compiled().Graph.AllNodes() {
			if f, ok := n.Op().(*fusion.FusedOp); ok {
				if _, err := codegen.Compile(f.Kernel(), codegen.Options{}); err != nil {
					t.Fatalf("graph %d: %s does not lower to PTX: %v", seed, f.Kernel().Name, err)
				}
			}
		}
		vmRef.Close()
		vm.Close()
	}
	t.Logf("%d random graphs: %d fusable ops in %d kernels, with %d extra outputs", n, ops, kernels, extra)
	if extra == 0 {
		t.Fatal("no kernel with extra outputs: the property does not cover them")
	}
}

// TestFusionOffIsOneKernelPerOp: the unfused baseline runs the same ops one
// kernel each and gets the same results.
func TestFusionOffIsOneKernelPerOp(t *testing.T) {
	on, off := newMLP(t, tensor.Float64, 8, 4, 16, 3, 3), newMLP(t, tensor.Float64, 8, 4, 16, 3, 3)
	vmOn, vmOff := fusion.NewTapeMachine(on.g), fusion.NewTapeMachine(off.g, fusion.WithFusion(false))
	defer vmOn.Close()
	defer vmOff.Close()
	rOn, rOff := vmOn.Report(), vmOff.Report()
	if rOff.Kernels() != rOff.FusedOps() {
		t.Fatalf("fusion off: %d kernels for %d ops", rOff.Kernels(), rOff.FusedOps())
	}
	if rOn.Kernels() >= rOff.Kernels() || rOn.FusedOps() != rOff.FusedOps() {
		t.Fatalf("fused %d kernels for %d ops, unfused %d for %d", rOn.Kernels(), rOn.FusedOps(), rOff.Kernels(), rOff.FusedOps())
	}
	rng := rand.New(rand.NewPCG(5, 5))
	xv, yv := data(tensor.Float64, rng, 8, 4), data(tensor.Float64, rng, 8, 3)
	for _, m := range []*mlp{on, off} {
		G.Let(m.x, xv)
		G.Let(m.y, yv)
	}
	if err := vmOn.RunAll(); err != nil {
		t.Fatal(err)
	}
	if err := vmOff.RunAll(); err != nil {
		t.Fatal(err)
	}
	if a, b := scalar(on.loss.Value()), scalar(off.loss.Value()); math.Abs(a-b) > 1e-12*math.Abs(a) {
		t.Fatalf("loss %v fused, %v unfused", a, b)
	}
	t.Logf("MLP: fused %d kernels, unfused %d (for %d ops); left to Gorgonia: %d", rOn.Kernels(), rOff.Kernels(), rOn.FusedOps(), len(rOn.Unfused))
}

// valueElems is the number of elements of all values a graph's nodes hold
// (constants and inputs included), a proxy for the memory it needs.
func valueElems(g *G.ExprGraph) int {
	n := 0
	for _, x := range g.AllNodes() {
		if _, ok := x.Op().(*fusion.PartOp); ok {
			continue // a slice of its kernel's stacked outputs, counted there
		}
		n += max(1, x.Shape().TotalSize())
	}
	return n
}
