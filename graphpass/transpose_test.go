package graphpass

import (
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/tile"
)

// TestPretranspose: the weight gradient xᵀ·dY of Σ(x·W)² takes a
// transpose group of its own (ordered just before it, its root the copy
// of x the product reads instead of x, as A·B) only on a Hopper target at
// TF32 and at the sizes where the copy is small beside the product.
func TestPretranspose(t *testing.T) {
	sm80 := GPU(108, 1024, 163<<10) // an A100's shared memory: no wgmma
	cases := []struct {
		name    string
		k, m, n int
		t       Target
		prec    tile.Precision
		want    bool
	}{
		{"h200 tf32", 1100, 260, 300, H200, tile.PrecTF32, true},
		{"h200 tf32, the BERT layer's dW1", 4096, 768, 3072, H200, tile.PrecTF32, true},
		{"h200 ieee", 1100, 260, 300, H200, tile.PrecIEEE, false},
		{"h200 tf32x3", 1100, 260, 300, H200, tile.PrecTF32x3, false},
		{"sm_80 tf32", 1100, 260, 300, sm80, tile.PrecTF32, false},
		{"cpu tf32", 1100, 260, 300, CPU(4), tile.PrecTF32, false},
		{"k short", 1000, 260, 300, H200, tile.PrecTF32, false},
		{"m narrow", 1100, 200, 300, H200, tile.PrecTF32, false},
		{"n narrow", 1100, 260, 200, H200, tile.PrecTF32, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float32, G.WithShape(c.k, c.m), G.WithName("x"))
			w := G.NewMatrix(g, tensor.Float32, G.WithShape(c.m, c.n), G.WithName("w"))
			loss := G.Must(G.Sum(G.Must(G.Square(G.Must(G.Mul(x, w))))))
			if _, err := G.Grad(loss, w); err != nil {
				t.Fatal(err)
			}
			gr, err := Import(g)
			if err != nil {
				t.Fatal(err)
			}
			groups := Partition(gr, Options{Target: c.t, MatMul: true, Precision: c.prec})
			var tg, prod *Group
			for i, grp := range groups {
				if grp.Kind == TransposeGroup {
					tg = grp
					if i+1 < len(groups) {
						prod = groups[i+1]
					}
				}
			}
			if (tg != nil) != c.want {
				t.Fatalf("transpose group: %v, want %v (%v)", tg != nil, c.want, groups)
			}
			if tg == nil {
				return
			}
			switch {
			case prod == nil || prod.Kind != MatMulGroup || prod.aT != tg.Root || prod.transA():
				t.Fatalf("the group after the transpose is not its product, read as A·B: %v", prod)
			case len(tg.Inputs) != 1 || tg.Inputs[0].G != x || !sameShape(tg.Root.Info.Shape, []int{c.m, c.k}):
				t.Fatalf("the transpose reads %v into %v", tg.Inputs, tg.Root.Info.Shape)
			}
			for _, in := range prod.Inputs {
				if in.G == x {
					t.Fatalf("the product reads x itself: %v", prod.Inputs)
				}
			}
			if _, err := Emit(prod, c.t, c.prec); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestPretransposeShared: two weight gradients of one input (xᵀ·dY and
// xᵀ·dZ of Σ(x·W)² + Σ(x·V)²) read one copy of x, written once, before
// the first of them.
func TestPretransposeShared(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(1100, 260), G.WithName("x"))
	w := G.NewMatrix(g, tensor.Float32, G.WithShape(260, 300), G.WithName("w"))
	v := G.NewMatrix(g, tensor.Float32, G.WithShape(260, 280), G.WithName("v"))
	sq := func(y *G.Node) *G.Node { return G.Must(G.Sum(G.Must(G.Square(y)))) }
	loss := G.Must(G.Add(sq(G.Must(G.Mul(x, w))), sq(G.Must(G.Mul(x, v)))))
	if _, err := G.Grad(loss, w, v); err != nil {
		t.Fatal(err)
	}
	gr, err := Import(g)
	if err != nil {
		t.Fatal(err)
	}
	groups := Partition(gr, Options{Target: H200, MatMul: true, Precision: tile.PrecTF32})
	var copies []*Node
	readers := 0
	at := map[*Group]int{}
	for i, grp := range groups {
		at[grp] = i
		if grp.Kind == TransposeGroup {
			copies = append(copies, grp.Root)
		}
	}
	if len(copies) != 1 {
		t.Fatalf("%d copies of x, want 1: %v", len(copies), groups)
	}
	for _, grp := range groups {
		if grp.aT == nil {
			continue
		}
		readers++
		if grp.aT != copies[0] || at[grp] < at[copies[0].Group] {
			t.Fatalf("%v reads %v (at %d), the copy is at %d", grp, grp.aT, at[grp], at[copies[0].Group])
		}
	}
	if readers != 2 {
		t.Fatalf("%d products read the copy, want 2", readers)
	}
}
