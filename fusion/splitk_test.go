package fusion_test

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/tile"
)

// TestLongKProductInParts: a convolution's weight gradient — Aᵀ·B of a few
// output tiles over a long K, alone in its group — runs on a CPU whose
// kernels are machine code with K in parts (graphpass splitLongK), each
// written to scratch and added in order by the kernel's Combine (both
// machine code): the
// result is Gorgonia's (within the sums' rounding, float64 and float32)
// and the same bits run after run.
func TestLongKProductInParts(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no machine code here (not amd64 with AVX2 and FMA, or -tags purego): the CPU splits K only for machine code")
	}
	for _, c := range []struct {
		name    string
		dt      tensor.Dtype
		k, m, n int
		tol     float64
	}{
		{"float32 32×9 over 9000", tensor.Float32, 9000, 32, 9, 1e-4},
		{"float64 24×5 over 5000", tensor.Float64, 5000, 24, 5, 1e-12},
		{"float32 17×9 over 4507, K not whole steps", tensor.Float32, 4507, 17, 9, 1e-4},
	} {
		t.Run(c.name, func(t *testing.T) {
			build := func() (*G.ExprGraph, []*G.Node, *G.Node) {
				g := G.NewGraph()
				a := G.NewMatrix(g, c.dt, G.WithShape(c.k, c.m), G.WithName("a"))
				b := G.NewMatrix(g, c.dt, G.WithShape(c.k, c.n), G.WithName("b"))
				return g, []*G.Node{a, b}, G.Must(G.Mul(G.Must(G.Transpose(a)), b))
			}
			gRef, inRef, yRef := build()
			g, in, y := build()
			letTwins(t, rand.New(rand.NewPCG(9, 9)), inRef, in, nil)
			vm := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CPU), fusion.WithMatMulFusion(true))
			defer vm.Close()
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			parts := 0
			for _, n := range vm.Compiled().Graph.AllNodes() {
				if f, ok := n.Op().(*fusion.FusedOp); ok && f.Kernel().Meta["SPLIT_K"] > 1 {
					parts = f.Kernel().Meta["SPLIT_K"]
					comb, _ := f.Combine()
					for _, k := range []*tile.Kernel{f.Kernel(), comb} {
						e, err := cpu.NewExec(k, cpu.WithNative(true))
						if err != nil {
							t.Fatal(err)
						}
						if !e.Native() {
							t.Fatalf("%s is not machine code: %v", k.Name, e.NativeErr())
						}
					}
				}
			}
			if parts == 0 {
				t.Fatalf("the product's K is not split:\n%v", vm.Report())
			}
			runTwins(t, gRef, vm)
			sameAsGorgonia(t, "aᵀ·b", y, yRef, c.tol)
			first := append([]float64(nil), floats(y.Value())...)
			for run := 0; run < 3; run++ {
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				for i, v := range floats(y.Value()) {
					if math.Float64bits(v) != math.Float64bits(first[i]) {
						t.Fatalf("run %d: element %d is %v, the first run's %v (%d parts)", run+2, i, v, first[i], parts)
					}
				}
			}
		})
	}
}
