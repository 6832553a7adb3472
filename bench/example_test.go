package bench_test

import (
	"fmt"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/bench"
)

// Measuring your own graph: build it, give its inputs and the outputs to
// check, and read the three modes' measurements.
func ExampleGraph() {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(256, 512), G.WithName("x"))
	y := G.Must(G.Tanh(G.Must(G.Add(G.Must(G.Mul(x, G.NewConstant(float32(2)))), G.NewConstant(float32(1))))))
	xv := tensor.New(tensor.WithShape(256, 512), tensor.Of(tensor.Float32))
	r, err := bench.Graph(bench.Spec{Name: "tanh(2x+1)", Graph: g, Inputs: map[*G.Node]tensor.Tensor{x: xv}, Outputs: []*G.Node{y}},
		bench.Options{Runs: 3, WarmUp: time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("kernels: unfused %d, fused %d\n", r.Mode(bench.Unfused).Kernels, r.Mode(bench.Fused).Kernels)
	fmt.Println("fused result within tolerance of the unfused one:", r.Mode(bench.Fused).MaxErr <= 1e-3)
	_ = r.Speedup(bench.Fused) // Gorgonia's median over the fused one
	// Output:
	// kernels: unfused 3, fused 1
	// fused result within tolerance of the unfused one: true
}
