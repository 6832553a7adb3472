package fusion_test

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/fusion"
)

// smallGraphs are graphs whose every kernel runs as machine code: the
// bench's memory-bound workloads and its MLP training step (size small:
// products, multi-output kernels whose parts are views) and a scalar
// result (the mean of squares, a kernel with a scalar output).
func smallGraphs(t testing.TB) []struct {
	name string
	spec bench.Spec
} {
	var gs []struct {
		name string
		spec bench.Spec
	}
	for _, name := range []string{"chain", "softmax", "layernorm", "mlp_step"} {
		wl, _ := bench.Lookup(name)
		spec, err := wl.Build("small")
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, struct {
			name string
			spec bench.Spec
		}{name, spec})
	}
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(37, 300), G.WithName("x"))
	ms := G.Must(G.Mean(G.Must(G.Square(x))))
	d := make([]float32, 37*300)
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range d {
		d[i] = float32(rng.Float64()*2 - 1)
	}
	gs = append(gs, struct {
		name string
		spec bench.Spec
	}{"mean_square", bench.Spec{Graph: g, Inputs: map[*G.Node]tensor.Tensor{x: tensor.New(tensor.WithShape(37, 300), tensor.WithBacking(d))}, Outputs: []*G.Node{ms}}})
	return gs
}

// allNative fails the test unless every kernel of vm's graph compiles to
// machine code.
func allNative(t testing.TB, vm *fusion.Machine) {
	t.Helper()
	kernels := 0
	for _, n := range vm.Compiled().Graph.AllNodes() {
		f, ok := n.Op().(*fusion.FusedOp)
		if !ok || f.IsView() {
			continue
		}
		kernels++
		e, err := cpu.NewExec(f.Kernel(), cpu.WithNative(true))
		if err != nil {
			t.Fatal(err)
		}
		if !e.Native() {
			t.Fatalf("kernel %v does not run natively: %v", f, e.NativeErr())
		}
	}
	if kernels == 0 {
		t.Fatal("no kernel in the graph")
	}
}

// TestRunAllAllocs: a warm RunAll of a graph whose kernels all run as
// machine code allocates nothing when outputs are reused
// (WithReuseOutputs): the arguments stay boxed from run to run, nodes that
// hold their values already are not bound again, a scalar result is
// written into its value of the last run, and a launch allocates nothing
// (codegen/cpu/pool). By default each run gives the values the user can
// read fresh memory (as Gorgonia's machine does), which allocates; that
// count is logged. The results of the warm runs are those of the first.
// Under the race detector, whose instrumentation allocates, the count is
// only logged.
func TestRunAllAllocs(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no machine code in this build (not amd64 with AVX2 and FMA, or -tags purego): kernels run on the executor, which allocates per launch")
	}
	for _, g := range smallGraphs(t) {
		t.Run(g.name, func(t *testing.T) {
			for n, v := range g.spec.Inputs {
				if err := G.Let(n, v); err != nil {
					t.Fatal(err)
				}
			}
			for _, reuse := range []bool{true, false} {
				vm := fusion.NewTapeMachine(g.spec.Graph, fusion.WithReuseOutputs(reuse))
				if err := vm.Err(); err != nil {
					t.Fatal(err)
				}
				allNative(t, vm)
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				first := outputs(g.spec.Outputs)
				allocs := testing.AllocsPerRun(20, func() {
					if err := vm.RunAll(); err != nil {
						t.Fatal(err)
					}
				})
				if reuse && allocs != 0 && !raceEnabled {
					t.Errorf("reused outputs: %v allocations per RunAll, want 0", allocs)
				}
				t.Logf("reuse %v: %v allocations per RunAll", reuse, allocs)
				if got := outputs(g.spec.Outputs); !sameFloats(got, first) {
					t.Errorf("reuse %v: the warm runs' results differ from the first run's", reuse)
				}
				vm.Close()
			}
		})
	}
}

// TestReusedArgumentsFollowNewInputs: with reused outputs a kernel's
// arguments stay boxed from run to run; a new input tensor, or new data in
// the same tensor, is what the next run reads (against a fresh machine's
// run of the same inputs, bit for bit).
func TestReusedArgumentsFollowNewInputs(t *testing.T) {
	wl, _ := bench.Lookup("softmax")
	spec, err := wl.Build("small")
	if err != nil {
		t.Fatal(err)
	}
	var x *G.Node
	for n := range spec.Inputs {
		x = n
	}
	vm := fusion.NewTapeMachine(spec.Graph, fusion.WithReuseOutputs(true))
	defer vm.Close()
	rng := rand.New(rand.NewPCG(5, 5))
	shape := x.Shape().Clone()
	d := make([]float32, shape.TotalSize())
	fill := func() {
		for i := range d {
			d[i] = float32(rng.Float64()*8 - 4)
		}
	}
	for step, what := range []string{"first tensor", "same tensor, new data", "new tensor", "new tensor over the same memory"} {
		switch step {
		case 2:
			d = make([]float32, len(d))
		case 3:
			d = d[:len(d):len(d)]
		}
		fill()
		if err := G.Let(x, tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))); err != nil {
			t.Fatal(err)
		}
		sameAsFresh(t, vm, spec, what)
	}
}

// sameAsFresh runs vm and then a fresh machine of spec's graph (with the
// inputs bound now), fails the test where their outputs differ, and
// returns vm's.
func sameAsFresh(t *testing.T, vm *fusion.Machine, spec bench.Spec, what string) [][]float64 {
	t.Helper()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	got := outputs(spec.Outputs)
	ref := fusion.NewTapeMachine(spec.Graph)
	defer ref.Close()
	if err := ref.RunAll(); err != nil {
		t.Fatal(err)
	}
	if !sameFloats(got, outputs(spec.Outputs)) {
		t.Fatalf("%s: the reused machine's results differ from a fresh machine's", what)
	}
	return got
}

func outputs(ns []*G.Node) [][]float64 {
	var o [][]float64
	for _, n := range ns {
		switch d := n.Value().Data().(type) {
		case []float32:
			f := make([]float64, len(d))
			for i, v := range d {
				f[i] = float64(v)
			}
			o = append(o, f)
		case float32:
			o = append(o, []float64{float64(d)})
		case []float64:
			o = append(o, append([]float64(nil), d...))
		case float64:
			o = append(o, []float64{d})
		}
	}
	return o
}

func sameFloats(a, b [][]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] && !(math.IsNaN(a[i][j]) && math.IsNaN(b[i][j])) {
				return false
			}
		}
	}
	return true
}

// BenchmarkFixedCost is the fixed cost of running a one-kernel graph, the
// kernel on the executor and as machine code, side by side: RunAll of the
// chain over 256 elements and a softmax of 4×64 (work well under a
// microsecond), outputs reused.
func BenchmarkFixedCost(b *testing.B) {
	for _, c := range []struct {
		name  string
		build func(g *G.ExprGraph, x *G.Node)
		shape tensor.Shape
	}{
		{"chain256", workloads[0].build, tensor.Shape{1, 256}},
		{"softmax4x64", workloads[1].build, tensor.Shape{4, 64}},
	} {
		for _, native := range []bool{false, true} {
			mode := "executor"
			if native {
				mode = "native"
			}
			b.Run(c.name+"/"+mode, func(b *testing.B) {
				g := G.NewGraph()
				x := G.NewMatrix(g, tensor.Float32, G.WithShape(c.shape...), G.WithName("x"))
				c.build(g, x)
				d := make([]float32, c.shape.TotalSize())
				for i := range d {
					d[i] = float32(i%17) / 8
				}
				G.Let(x, tensor.New(tensor.WithShape(c.shape...), tensor.WithBacking(d)))
				vm := fusion.NewTapeMachine(g, fusion.WithReuseOutputs(true), fusion.WithNativeCPU(native))
				defer vm.Close()
				if err := vm.RunAll(); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if err := vm.RunAll(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestReusedPartsFollowNewInputs: with reused outputs a multi-output
// kernel's parts keep their headers from run to run (no allocation);
// what the next run gives the user is still its own result: the bench's
// MLP step (its backward kernels have several outputs) with new data in
// the same tensors and then new tensors, against a fresh machine's run
// of the same inputs, bit for bit, and the first run's results against
// the unfused graph within the bench's float32 tolerance.
func TestReusedPartsFollowNewInputs(t *testing.T) {
	wl, _ := bench.Lookup("mlp_step")
	spec, err := wl.Build("small")
	if err != nil {
		t.Fatal(err)
	}
	vm := fusion.NewTapeMachine(spec.Graph, fusion.WithReuseOutputs(true))
	defer vm.Close()
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	parts := 0
	for _, n := range vm.Compiled().Graph.AllNodes() {
		if _, ok := n.Op().(*fusion.PartOp); ok {
			parts++
		}
	}
	if parts == 0 {
		t.Fatal("no multi-output kernel in the graph: the test covers nothing")
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for step, what := range []string{"first inputs", "same tensors, new data", "new tensors"} {
		for n, v := range spec.Inputs {
			d := v.Data().([]float32)
			if step == 2 {
				d = make([]float32, len(d))
			}
			for i := range d {
				d[i] = float32(rng.Float64()*2 - 1)
			}
			if err := G.Let(n, tensor.New(tensor.WithShape(v.Shape().Clone()...), tensor.WithBacking(d))); err != nil {
				t.Fatal(err)
			}
		}
		got := sameAsFresh(t, vm, spec, what)
		if step == 0 {
			unf := fusion.NewTapeMachine(spec.Graph, fusion.WithFusion(false))
			if err := unf.RunAll(); err != nil {
				t.Fatal(err)
			}
			u := outputs(spec.Outputs)
			unf.Close()
			for i := range u {
				for j := range u[i] {
					if d := math.Abs(got[i][j] - u[i][j]); d > 1e-3*(1+math.Abs(u[i][j])) {
						t.Fatalf("output %d[%d] = %v, unfused %v", i, j, got[i][j], u[i][j])
					}
				}
			}
		}
	}
}
