package ptxsim_test

import (
	"math"
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestGeneratedKernels runs the kernels the fusion pass generates for the
// bench workloads at size small (matrix products fused, as on the GPU),
// each on the simulator from the inputs it had in a fused CPU run, and
// compares its outputs with that run's (outputs poisoned with NaN first;
// sm_80 and sm_90 alternate). Tolerances: summation orders and the GPU's
// f32 math differ from the CPU's by a few ulp; with TF32 products an
// operand that rounds the other way moves a product by 2⁻¹¹.
func TestGeneratedKernels(t *testing.T) {
	tols := map[tile.Precision]tiletest.Tol{tile.PrecIEEE: {Abs: 1e-5, Rel: 1e-4}, tile.PrecTF32: {Abs: 1e-3, Rel: 1e-2}}
	total := 0
	for _, wl := range bench.Workloads {
		for _, prec := range []tile.Precision{tile.PrecIEEE, tile.PrecTF32} {
			t.Run(wl.Name+"/"+prec.String(), func(t *testing.T) {
				if wl.Name == "encoder_fwd_bwd" && (testing.Short() || prec == tile.PrecIEEE) {
					// its ieee kernels differ from the tf32 ones only in the
					// FMA dots, which encoder_fwd and the MLPs cover
					t.Skip("the backward pass's 140-odd kernels take a while in the simulator: tf32 only, and not with -short")
				}
				n := runGenerated(t, wl, prec, tols[prec])
				if n == 0 {
					t.Fatal("no generated kernel ran")
				}
				total += n
			})
		}
	}
	t.Logf("%d generated kernels agree with the fused CPU run", total)
}

func runGenerated(t *testing.T, wl bench.Workload, prec tile.Precision, tol tiletest.Tol) int {
	spec, err := wl.Build("small")
	if err != nil {
		t.Fatal(err)
	}
	vm := fusion.NewTapeMachine(spec.Graph, fusion.WithMatMulFusion(true), fusion.WithPrecision(prec))
	defer vm.Close()
	for n, v := range spec.Inputs {
		if err := G.Let(n, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	cg := vm.Compiled().Graph
	kernels := 0
	for _, n := range cg.AllNodes() {
		f, ok := n.Op().(*fusion.FusedOp)
		if !ok || n.Value() == nil || f.IsView() {
			continue
		}
		var args []any
		ch := cg.From(n.ID())
		for ch.Next() {
			switch v := ch.Node().(*G.Node).Value().Data().(type) {
			case []float32:
				args = append(args, append([]float32(nil), v...))
			case float32:
				args = append(args, []float32{v})
			default:
				t.Fatalf("%s: input of type %T", f.Kernel().Name, v)
			}
		}
		var want []float32
		switch v := n.Value().Data().(type) {
		case []float32:
			want = v
		case float32:
			want = []float32{v}
		default:
			t.Fatalf("%s: output of type %T", f.Kernel().Name, v)
		}
		out := make([]float32, len(want))
		for i := range out {
			if !f.Accumulates() { // else zeros, which the kernel adds into
				out[i] = float32(math.NaN())
			}
		}
		at := 0 // a multi-output kernel writes each output through its own pointer
		for _, size := range f.PartSizes() {
			args = append(args, out[at:at+size])
			at += size
		}
		k := f.Kernel()
		sim := &ptxsim.Launcher{Arch: 80 + 10*(kernels%2), Racecheck: true, Initcheck: true}
		if err := sim.Launch(k, f.Grid(), args...); err != nil {
			t.Fatalf("%s: %v", k.Name, err)
		}
		for i := range want {
			g, w := float64(out[i]), float64(want[i])
			if !(math.Abs(g-w) <= tol.Abs+tol.Rel*math.Abs(w)) && !(math.IsNaN(g) && math.IsNaN(w)) {
				t.Fatalf("%s (%s): output[%d] = %v in the simulator, %v on the CPU (tolerance %+v)\n%v", k.Name, sim.Name(), i, g, w, tol, k)
			}
		}
		kernels++
	}
	return kernels
}
