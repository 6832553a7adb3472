package graphpass

import (
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/tile"
)

// TestLateCandidates: a product whose epilogue reads a value of its
// output's shape (dO·Wᵀ ⊙ (1 − tanh(u)²)) gets, for each swapped-form
// candidate with its epilogue in the accumulator's layout and K whole, a
// twin with late_loads = 2; one that reads only a bias gets none.
func TestLateCandidates(t *testing.T) {
	must := G.Must
	swapped := tile.Meta{"wgmma": 2, "BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 32, "num_warps": 8, "num_stages": 4}
	cands := []tile.Meta{swapped, with(swapped, "epi_smem", 1), with(swapped, "SPLIT_K", 2),
		{"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_warps": 8, "num_stages": 3}}
	cases := []struct {
		name  string
		build func(g *G.ExprGraph)
		want  []string
	}{
		{"an input gradient through tanh's derivative", func(g *G.ExprGraph) {
			do := G.NewMatrix(g, tensor.Float32, G.WithShape(300, 136), G.WithName("do"))
			w := G.NewMatrix(g, tensor.Float32, G.WithShape(200, 136), G.WithName("w"))
			u := G.NewMatrix(g, tensor.Float32, G.WithShape(300, 200), G.WithName("u"))
			th := must(G.Tanh(u))
			must(G.HadamardProd(must(G.Mul(do, must(G.Transpose(w)))), must(G.Sub(G.NewConstant(float32(1)), must(G.HadamardProd(th, th))))))
		}, []string{with(swapped, "late_loads", 2).String()}},
		{"a bias and an activation", func(g *G.ExprGraph) {
			x := G.NewMatrix(g, tensor.Float32, G.WithShape(300, 136), G.WithName("x"))
			w := G.NewMatrix(g, tensor.Float32, G.WithShape(136, 200), G.WithName("w"))
			b := G.NewVector(g, tensor.Float32, G.WithShape(200), G.WithName("b"))
			must(G.Tanh(must(G.BroadcastAdd(must(G.Mul(x, w)), b, nil, []byte{0}))))
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			c.build(g)
			gr, err := Import(g)
			if err != nil {
				t.Fatal(err)
			}
			var grp *Group
			for _, gp := range Partition(gr, Options{Target: H200, MatMul: true}) {
				if gp.Kind == MatMulGroup {
					grp = gp
				}
			}
			if grp == nil {
				t.Fatal("no product group")
			}
			seen := map[string]bool{}
			for _, m := range cands {
				seen[m.String()] = true
			}
			var got []string
			for _, m := range lateCandidates(grp, cands, seen) {
				got = append(got, m.String())
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("late candidates %v, want %v", got, c.want)
			}
		})
	}
}
