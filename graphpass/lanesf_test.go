package graphpass

import (
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// TestLanesBlockF: on a CPU whose kernels are machine code, an im2col
// whose lanes form's block is under 256 elements (images of 7 × 7 in 8 ×
// 8) and whose patches a product reads (stored column by column: the
// batch its fastest free axis) takes BLOCK_F images a program, its grid
// that many times fewer; an im2col stored row by row (its fastest free
// axis the patch's columns, which the window's arithmetic divides),
// blocks of 256 (14 × 14 in 16 × 16) and the other window ops (the
// convolution's col2im, here the image's gradient) take none; every such
// kernel is machine code. Results: fusion's TestConvolutions (7 × 7
// images in a batch of 5, against Gorgonia).
func TestLanesBlockF(t *testing.T) {
	for _, c := range []struct {
		name      string
		img       []int
		product   bool // a convolution: its patches read by a product, and its gradients
		wantIm2   int  // BLOCK_F of the im2col (0: none)
		wantGrid0 int  // the im2col's grid along axis 0
	}{
		{name: "7×7 alone, stored row by row: none", img: []int{3, 2, 7, 7}, wantGrid0: 3 * 18},
		{name: "7×7 for a product: 4 of the 5 images a program", img: []int{5, 2, 7, 7}, product: true, wantIm2: 4, wantGrid0: 18 * 2},
		{name: "7×7 for a product, one image: none", img: []int{1, 2, 7, 7}, product: true, wantGrid0: 18},
		{name: "14×14: a block of 256, none", img: []int{3, 2, 14, 14}, wantGrid0: 3 * 18},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewTensor(g, tensor.Float32, 4, G.WithShape(c.img...), G.WithName("x"))
			if c.product {
				w := G.NewTensor(g, tensor.Float32, 4, G.WithShape(4, c.img[1], 3, 3), G.WithName("w"))
				cv := G.Must(G.Conv2d(x, w, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
				if _, err := G.Grad(G.Must(G.Sum(G.Must(G.Square(cv)))), x, w); err != nil {
					t.Fatal(err)
				}
			} else {
				G.Must(G.Im2Col(x, tensor.Shape{3, 3}, tensor.Shape{1, 1}, tensor.Shape{1, 1}, tensor.Shape{1, 1}))
			}
			gr, err := Import(g)
			if err != nil {
				t.Fatal(err)
			}
			tg := Target{Cores: 2, Native: true}
			var im2, col2 int
			for _, grp := range Partition(gr, Options{Target: tg, MatMul: true}) {
				var kind ops.Kind
				for _, n := range grp.Members {
					if n.Info.Kind == ops.Im2Col || n.Info.Kind == ops.Col2Im {
						kind = n.Info.Kind
					}
				}
				if kind == 0 {
					continue
				}
				k, err := Emit(grp, tg, tile.PrecIEEE)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := native.Compile(k.Tile); err != nil {
					t.Errorf("%v not machine code: %v", kind, err)
				}
				bf := k.Tile.Meta["BLOCK_F"]
				if kind == ops.Col2Im {
					col2++
					if bf != 0 {
						t.Errorf("a col2im with BLOCK_F = %d: want none", bf)
					}
					continue
				}
				im2++
				if bf != c.wantIm2 || k.Grid[0] != c.wantGrid0 {
					t.Errorf("the im2col: BLOCK_F = %d, grid %v; want %d and %d along axis 0", bf, k.Grid, c.wantIm2, c.wantGrid0)
				}
			}
			if im2 != 1 || c.product && col2 != 1 {
				t.Fatalf("%d im2col and %d col2im groups", im2, col2)
			}
		})
	}
}
