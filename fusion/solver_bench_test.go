package fusion_test

import (
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
)

// BenchmarkSolverStep times one Step over the parameters of the bench's
// large MLP (784×1024, 1024, 1024×16, 16; float32) and of its large
// encoder (33 learnables: 24 heads' projections of 256×32, 256×256,
// 256×1024, 1024×256, 6 vectors), Gorgonia's solver against the fused
// one of the same configuration, side by side, the step alone (the
// gradients refilled between steps untimed)
// (go test -run xxx -bench SolverStep ./fusion).
func BenchmarkSolverStep(b *testing.B) {
	mlp := [][]int{{784, 1024}, {1024}, {1024, 16}, {16}}
	var encoder [][]int
	for range 24 {
		encoder = append(encoder, []int{256, 32})
	}
	encoder = append(encoder, []int{256, 256}, []int{256}, []int{256}, []int{256, 1024}, []int{1024}, []int{1024, 256}, []int{256}, []int{256}, []int{256})
	for _, c := range []struct {
		name string
		new  func() G.Solver
	}{
		{"adam", func() G.Solver { return G.NewAdamSolver(G.WithLearnRate(1e-3)) }},
		{"momentum", func() G.Solver { return G.NewMomentum() }},
		{"rmsprop", func() G.Solver { return G.NewRMSPropSolver() }},
	} {
		for _, mode := range []string{"gorgonia", "fused"} {
			for _, set := range []struct {
				name   string
				shapes [][]int
			}{{"mlp", mlp}, {"encoder", encoder}} {
				shapes := set.shapes
				b.Run(c.name+"/"+set.name+"/"+mode, func(b *testing.B) {
					rng := rand.New(rand.NewPCG(1, 1))
					var model []G.ValueGrad
					var bytes int64
					for _, sh := range shapes {
						n := 1
						for _, d := range sh {
							n *= d
						}
						w, g := make([]float32, n), make([]float32, n)
						for i := range w {
							w[i] = float32(rng.NormFloat64())
						}
						model = append(model, tensorParam{tensor.New(tensor.WithShape(sh...), tensor.WithBacking(w)), tensor.New(tensor.WithShape(sh...), tensor.WithBacking(g))})
						bytes += int64(4 * n)
					}
					var s G.Solver = c.new()
					if mode == "fused" {
						fs, err := fusion.NewSolver(nil, c.new())
						if err != nil {
							b.Fatal(err)
						}
						defer fs.Close()
						s = fs
					}
					b.SetBytes(bytes)
					for b.Loop() {
						b.StopTimer()             // the step alone: Memset runs on one core
						for _, p := range model { // a gradient, as a run leaves one
							p.(tensorParam).g.Memset(float32(1e-3))
						}
						b.StartTimer()
						if err := s.Step(model); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
