package graphpass_test

import (
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	. "github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// TestMatMulEpilogueCoordinates: a matmul kernel's epilogue reads a bias
// row at the tile's column coordinates, not at flat indices split by a
// division and a remainder per element (so that the GPU loads each column a
// thread holds once), in plain and batched products.
func TestMatMulEpilogueCoordinates(t *testing.T) {
	for _, batched := range []bool{false, true} {
		g := G.NewGraph()
		var y *G.Node
		if batched {
			x := G.NewTensor(g, tensor.Float32, 3, G.WithShape(4, 64, 48), G.WithName("x"))
			w := G.NewTensor(g, tensor.Float32, 3, G.WithShape(4, 48, 96), G.WithName("w"))
			r := G.NewTensor(g, tensor.Float32, 3, G.WithShape(4, 64, 96), G.WithName("r"))
			y = G.Must(G.Add(G.Must(G.BatchedMatMul(x, w, false, false)), r))
		} else {
			x := G.NewMatrix(g, tensor.Float32, G.WithShape(100, 48), G.WithName("x"))
			w := G.NewMatrix(g, tensor.Float32, G.WithShape(48, 96), G.WithName("w"))
			b := G.NewVector(g, tensor.Float32, G.WithShape(96), G.WithName("b"))
			y = G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w)), b, nil, []byte{0}))
		}
		G.Must(G.Tanh(y))
		gr, err := Import(g)
		if err != nil {
			t.Fatal(err)
		}
		groups := Partition(gr, Options{Target: H200, MatMul: true})
		if len(groups) != 1 || groups[0].Kind != MatMulGroup {
			t.Fatalf("batched %v: %d groups, want one matmul group", batched, len(groups))
		}
		k, err := Emit(groups[0], H200, tile.PrecTF32)
		if err != nil {
			t.Fatal(err)
		}
		ir := k.Tile.String()
		for _, op := range []string{" = rem ", " = div "} {
			if strings.Contains(ir, op) {
				t.Errorf("batched %v: the epilogue splits flat indices (%q):\n%s", batched, strings.TrimSpace(op), ir)
			}
		}
	}
}
