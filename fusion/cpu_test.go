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
)

// TestRunsAgainWithNewInputs: the CPU backend's kernels write into their
// outputs of the previous run; run after run with new inputs, every output
// agrees with Gorgonia's tape machine. The graph has a kernel that adds
// into its output (a split column sum, which must be zeroed again: written
// for a GPU target, as the CPU's own does not split sums), a
// multi-output kernel, a view, a scalar, a product left to Gorgonia and
// the gradients of all of it (float64, 1e-9 relative).
func TestRunsAgainWithNewInputs(t *testing.T) {
	build := func() (*G.ExprGraph, G.Nodes, G.Nodes) {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(20000, 6), G.WithName("x"))
		w := G.NewMatrix(g, tensor.Float64, G.WithShape(6, 5), G.WithName("w"))
		b := G.NewVector(g, tensor.Float64, G.WithShape(5), G.WithName("b"))
		h := G.Must(G.Tanh(G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w)), b, nil, []byte{0}))))
		col := G.Must(G.Sum(G.Must(G.Square(h)), 0))                      // a split sum: few outputs over many rows
		flat := G.Must(G.Reshape(G.Must(G.Exp(h)), tensor.Shape{100000})) // a view of a kernel's output
		G.WithName("col")(col)                                            // named: the user reads them
		G.WithName("flat")(flat)
		cost := G.Must(G.Add(G.Must(G.Sum(col)), G.Must(G.Mean(flat))))
		grads, err := G.Grad(cost, x, w, b)
		if err != nil {
			t.Fatal(err)
		}
		return g, G.Nodes{x, w, b}, append(G.Nodes{cost, col, flat}, grads...)
	}
	gRef, inRef, outRef := build()
	gFu, inFu, outFu := build()
	vmRef := G.NewTapeMachine(gRef)
	defer vmRef.Close()
	vm := fusion.NewTapeMachine(gFu, fusion.WithTarget(graphpass.H200))
	defer vm.Close()
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	accumulates := false // a kernel that adds into a vector, kept from one run to the next
	for _, n := range vm.Compiled().Graph.AllNodes() {
		if f, ok := n.Op().(*fusion.FusedOp); ok && f.Accumulates() {
			accumulates = accumulates || n.Shape().TotalSize() > 1
		}
	}
	if !accumulates {
		t.Fatalf("no kernel adds into its output: the test does not cover zeroing\n%v", vm.Report())
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for run := 0; run < 3; run++ {
		var in [][]float64
		for i, x := range inRef {
			d := make([]float64, x.Shape().TotalSize())
			for j := range d {
				d[j] = rng.Float64()*2 - 1
			}
			if err := G.Let(x, tensor.New(tensor.WithShape(x.Shape()...), tensor.WithBacking(d))); err != nil {
				t.Fatal(err)
			}
			in = append(in, d)
			c := append([]float64(nil), d...)
			if err := G.Let(inFu[i], tensor.New(tensor.WithShape(x.Shape()...), tensor.WithBacking(c))); err != nil {
				t.Fatal(err)
			}
		}
		if err := vmRef.RunAll(); err != nil {
			t.Fatal(err)
		}
		vmRef.Reset()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		vm.Reset()
		for _, n := range vm.Compiled().Graph.AllNodes() { // as under Gorgonia's machine
			if n.Value() == nil {
				t.Fatalf("run %d: %v of the rewritten graph has no value", run, n.Name())
			}
		}
		// Gorgonia's own values of col and flat are not reliable once Grad
		// has run (its tape machine reuses their memory in place): by hand
		h := make([]float64, 100000)
		hand := map[int][]float64{1: make([]float64, 5), 2: make([]float64, 100000)}
		for r := range 20000 {
			for c := range 5 {
				s := in[2][c]
				for k := range 6 {
					s += in[0][r*6+k] * in[1][k*5+c]
				}
				h[r*5+c] = math.Tanh(s)
				hand[1][c] += h[r*5+c] * h[r*5+c]
				hand[2][r*5+c] = math.Exp(h[r*5+c])
			}
		}
		for i, o := range outRef {
			a, b := floats(o.Value()), floats(outFu[i].Value())
			if want, ok := hand[i]; ok {
				a = want
			}
			if o.IsScalar() {
				a, b = []float64{scalar(o.Value())}, []float64{scalar(outFu[i].Value())}
			}
			if len(a) != len(b) {
				t.Fatalf("run %d: %s: %d values, want %d", run, o.Name(), len(b), len(a))
			}
			for j := range a {
				if !(math.Abs(a[j]-b[j]) <= 1e-12+1e-9*math.Abs(a[j])) {
					t.Fatalf("run %d: %s[%d] = %v, want %v", run, o.Name(), j, b[j], a[j])
				}
			}
		}
	}
}

// TestRead: gorgonia.Read(n, &v) in the user's graph gets n's value after
// every run, as under Gorgonia's machine, even where n would be inside a
// kernel; a cost read this way follows new inputs.
func TestRead(t *testing.T) { checkRead(t) }

func checkRead(t *testing.T, opts ...fusion.Option) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(30, 40), G.WithName("x"))
	e := G.Must(G.Exp(x))                     // inside the kernel with the sum
	cost := G.Must(G.Mean(G.Must(G.Tanh(e)))) // a scalar
	var ev, cv G.Value
	G.Read(e, &ev)
	G.Read(cost, &cv)
	vm := fusion.NewTapeMachine(g, opts...)
	defer vm.Close()
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	for run := 0; run < 2; run++ {
		d := make([]float32, 30*40)
		for i := range d {
			d[i] = float32((i*7+run*3)%11)/11 - 0.5
		}
		if err := G.Let(x, tensor.New(tensor.WithShape(30, 40), tensor.WithBacking(d))); err != nil {
			t.Fatal(err)
		}
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		vm.Reset()
		if ev == nil || cv == nil {
			t.Fatalf("run %d: read %v and %v", run, ev, cv)
		}
		want := 0.0
		got := floats(ev)
		for i, v := range d {
			w := math.Exp(float64(v))
			if math.Abs(got[i]-w) > 1e-6*w {
				t.Fatalf("run %d: e[%d] = %v, want %v", run, i, got[i], w)
			}
			want += math.Tanh(w)
		}
		want /= float64(len(d))
		if c := scalar(cv); math.Abs(c-want) > 1e-6 {
			t.Fatalf("run %d: cost %v, want %v", run, c, want)
		}
	}
}

// TestSetIsAClearError: gorgonia.Set is refused at compile time with an
// error that says so, not a crash.
func TestSetIsAClearError(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(2, 3), G.WithName("x"))
	w := G.NewMatrix(g, tensor.Float32, G.WithShape(2, 3), G.WithName("w"))
	G.Set(w, G.Must(G.Exp(x)))
	m := fusion.NewTapeMachine(g)
	defer m.Close()
	if err := m.Err(); err == nil || !strings.Contains(err.Error(), "gorgonia.Set") {
		t.Fatalf("compile error %v, want one about gorgonia.Set", err)
	}
	if err := m.RunAll(); err == nil {
		t.Fatal("RunAll of a graph that did not compile succeeded")
	}
}
