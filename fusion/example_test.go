package fusion_test

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
)

// A Gorgonia graph, unchanged, run by the fused machine: exp, the scaling,
// tanh and the row sum become one kernel (the chain is the reduction's prologue).
func Example() {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("x"))
	y := G.Must(G.Tanh(G.Must(G.Mul(G.Must(G.Exp(x)), G.NewConstant(0.5)))))
	s := G.Must(G.Sum(y, 1))

	m := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CPU))
	defer m.Close()
	G.Let(x, tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{0, 1, 2, -1, -2, -3})))
	if err := m.RunAll(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%.4f\n", s.Value().Data())
	fmt.Println(m.Report().Kernels(), "kernels for", m.Report().FusedOps(), "ops")
	// Output:
	// [2.3371 0.2743]
	// 1 kernels for 4 ops
}
