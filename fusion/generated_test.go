package fusion_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestGeneratedKernelsOnPTXSim is TestGeneratedKernelsOnGPU on the PTX
// simulator (sm_90), where CI runs it: every kernel the pass writes for the
// 30 random graphs, as PTX, from the inputs it had in a fused CPU run. It
// found a gradient of a maximum routed wrongly where a kernel recomputed
// log1p(x²) an ulp away from the value its maximum was taken of (graph 10,
// 2026-12-01: graphpass's compared).
func TestGeneratedKernelsOnPTXSim(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 30 graphs' kernels in the simulator take seconds")
	}
	generatedKernelsAgree(t, &ptxsim.Launcher{Arch: 90, NumWarps: 4}, 300)
}

// generatedKernelsAgree runs each of 30 random graphs fused on the CPU,
// then every generated kernel again on gpu, from the same input values,
// and compares the outputs (1e-9 relative: the same float64 arithmetic,
// but the GPU's math functions and sum order differ slightly); at least
// least kernels, with extra outputs among them.
func generatedKernelsAgree(t *testing.T, gpu tiletest.Launcher, least int) {
	t.Helper()
	kernels, extra := 0, 0
	for seed := uint64(1); seed <= 30; seed++ {
		g, in, _, err := randomGraph(seed)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, 1))
		for _, x := range in {
			d := make([]float64, x.Shape().TotalSize())
			for j := range d {
				d[j] = rng.Float64()*4 - 2
			}
			G.Let(x, tensor.New(tensor.WithShape(x.Shape()...), tensor.WithBacking(d)))
		}
		vm := fusion.NewTapeMachine(g)
		if err := vm.RunAll(); err != nil {
			t.Fatalf("graph %d: %v", seed, err)
		}
		k, x := kernelsAgree(t, vm, gpu, fmt.Sprintf("graph %d", seed))
		kernels += k
		extra += x
		vm.Close()
	}
	t.Logf("%d generated kernels agree on %s (%d extra outputs)", kernels, gpu.Name(), extra)
	if kernels < least || extra == 0 { // 30 graphs: about 430 kernels and 380 extra outputs (700 and 200 before sibling reductions and per-row values)
		t.Fatalf("only %d kernels (%d extra outputs) compared: the CPU run left the rewritten graph without values", kernels, extra)
	}
}

// kernelsAgree runs every kernel of vm's rewritten graph, after a run on
// the CPU, again on gpu from the same float64 input values, and compares
// its outputs with the CPU's (1e-9 relative: the same arithmetic, but the
// GPU's math functions and sum order differ slightly); it returns the
// kernels compared and their extra outputs. label names the graph.
func kernelsAgree(t *testing.T, vm *fusion.Machine, gpu tiletest.Launcher, label string) (kernels, extra int) {
	t.Helper()
	cg := vm.Compiled().Graph
	for _, n := range cg.AllNodes() {
		f, ok := n.Op().(*fusion.FusedOp)
		if !ok || n.Value() == nil {
			continue
		}
		var args []any
		ch := cg.From(n.ID())
		for ch.Next() {
			c := ch.Node().(*G.Node)
			switch v := c.Value().Data().(type) {
			case []float64:
				args = append(args, append([]float64(nil), v...))
			case float64:
				args = append(args, []float64{v})
			default:
				t.Fatalf("%s: input of type %T", label, v)
			}
		}
		want := floats(n.Value())
		if n.IsScalar() {
			want = []float64{scalar(n.Value())}
		}
		out := make([]float64, len(want))
		for i := range out {
			if !f.Accumulates() { // else zeros, which the kernel adds into
				out[i] = math.NaN()
			}
		}
		// a multi-output kernel writes each output through its own
		// pointer (or, OnePointer, all through one), each of its own size
		// (a per-row extra output is one value a row)
		if f.OnePointer() {
			args = append(args, out)
		} else {
			off := 0
			for _, n := range f.PartSizes() {
				args = append(args, out[off:off+n])
				off += n
			}
			if off != len(out) {
				t.Fatalf("%s: %s: parts of %v elements in a value of %d", label, f.Kernel().Name, f.PartSizes(), len(out))
			}
		}
		k := f.Kernel()
		if err := gpu.Launch(k, f.Grid(), args...); err != nil {
			t.Fatalf("%s: %s: %v", label, k.Name, err)
		}
		for i := range want {
			if !(math.Abs(out[i]-want[i]) <= 1e-12+1e-9*math.Abs(want[i])) && !(math.IsNaN(want[i]) && math.IsNaN(out[i])) {
				t.Fatalf("%s: %s[%d]: %v on %s, %v on the CPU\n%v", label, k.Name, i, out[i], gpu.Name(), want[i], k)
			}
		}
		kernels++
		extra += f.Outputs() - 1
	}
	return kernels, extra
}
