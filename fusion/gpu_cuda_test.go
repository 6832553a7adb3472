//go:build tilefuse_cuda

package fusion_test

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/cuda"
	"github.com/tilefuse/tilefuse/fusion"
)

// TestGeneratedKernelsOnGPU runs each random graph fused on the CPU, then
// runs every generated kernel again on the GPU, from the same input values,
// and compares the outputs (1e-9 relative: the same float64 arithmetic, but
// the GPU's math functions and sum order differ slightly).
func TestGeneratedKernelsOnGPU(t *testing.T) {
	dev, err := cuda.Open(0)
	if err != nil {
		t.Fatalf("no usable GPU: %v", err)
	}
	defer dev.Close()
	gpu := &cuda.Launcher{Dev: dev, NumWarps: 4}
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
					t.Fatalf("graph %d: input of type %T", seed, v)
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
					t.Fatalf("graph %d: %s: parts of %v elements in a value of %d", seed, f.Kernel().Name, f.PartSizes(), len(out))
				}
			}
			k := f.Kernel()
			if err := gpu.Launch(k, f.Grid(), args...); err != nil {
				t.Fatalf("graph %d: %s: %v", seed, k.Name, err)
			}
			for i := range want {
				if !(math.Abs(out[i]-want[i]) <= 1e-12+1e-9*math.Abs(want[i])) && !(math.IsNaN(want[i]) && math.IsNaN(out[i])) {
					t.Fatalf("graph %d: %s[%d]: %v on the GPU, %v on the CPU\n%v", seed, k.Name, i, out[i], want[i], k)
				}
			}
			kernels++
			extra += f.Outputs() - 1
		}
		vm.Close()
	}
	t.Logf("%d generated kernels agree on the GPU (%d extra outputs)", kernels, extra)
	if kernels < 300 || extra == 0 { // 30 graphs: about 430 kernels and 380 extra outputs (700 and 200 before sibling reductions and per-row values)
		t.Fatalf("only %d kernels (%d extra outputs) compared: the CPU run left the rewritten graph without values", kernels, extra)
	}
}
