package fusion_test

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
)

// A training loop as a Gorgonia user writes it, with the fused Adam (here
// fitting y = x·w, whose answer is w = (1, 2)): the solver reads the
// Gorgonia solver's configuration, and Step keeps its signature
// (gorgonia.Solver).
func ExampleNewSolver() {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 2), G.WithName("x"),
		G.WithValue(tensor.New(tensor.WithShape(4, 2), tensor.WithBacking([]float64{0, 0, 0, 1, 1, 0, 1, 1}))))
	y := G.NewVector(g, tensor.Float64, G.WithShape(4), G.WithName("y"),
		G.WithValue(tensor.New(tensor.WithShape(4), tensor.WithBacking([]float64{0, 2, 1, 3}))))
	w := G.NewVector(g, tensor.Float64, G.WithShape(2), G.WithName("w"), G.WithInit(G.Zeroes()))
	loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(G.Must(G.Mul(x, w)), y))))))
	if _, err := G.Grad(loss, w); err != nil {
		fmt.Println(err)
		return
	}

	m := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CPU))
	defer m.Close()
	s, err := fusion.NewSolver(m, G.NewAdamSolver(G.WithLearnRate(0.1)))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	for range 200 {
		if err := m.RunAll(); err != nil {
			fmt.Println(err)
			return
		}
		if err := s.Step(G.NodesToValueGrads(G.Nodes{w})); err != nil {
			fmt.Println(err)
			return
		}
		m.Reset()
	}
	m.Sync() // the host values are current (a no-op on the CPU backend)
	fmt.Printf("w = %.2f\n", w.Value().Data())
	// Output:
	// w = [1.00 2.00]
}
