package graphpass

import (
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/tile"
)

// TestPadOperands: a product x·W whose operands' rows are not 16-byte
// aligned (k or n not a multiple of 4) reads x, W or both from copies in
// aligned rows, each written by a pad group of its own just before it
// (A's copy k rounded up to 32, B's n to 128 and, where k is padded, k
// too), only on a GPU, at a tensor-core precision (also where it is each
// group's default: PrecisionByGroup) and at least padMinSide on every
// side; the product's kernel then loops over the padded K with no mask
// along K on A's loads, and none at all on a padded B's.
func TestPadOperands(t *testing.T) {
	sm80 := GPU(108, 1024, 163<<10)
	cases := []struct {
		name    string
		m, k, n int
		t       Target
		prec    tile.Precision
		byGroup bool
		a, b    []int // the copies' shapes (nil: none)
	}{
		{"every side odd tf32", 4095, 4099, 4097, H200, tile.PrecTF32, false, []int{4095, 4128}, []int{4128, 4224}},
		{"k odd tf32", 4096, 4099, 4096, H200, tile.PrecTF32, false, []int{4096, 4128}, nil},
		{"n odd tf32", 4096, 4096, 4097, H200, tile.PrecTF32, false, nil, []int{4096, 4224}},
		{"n 2 mod 4 bf16", 1024, 768, 30522, H200, tile.PrecBF16, false, nil, []int{768, 30592}},
		{"1025³ tf32x3", 1025, 1025, 1025, H200, tile.PrecTF32x3, false, []int{1025, 1056}, []int{1056, 1152}},
		{"1025³ default precision (3xTF32)", 1025, 1025, 1025, H200, tile.PrecIEEE, true, []int{1025, 1056}, []int{1056, 1152}},
		{"sm_80 tf32", 1025, 1025, 1025, sm80, tile.PrecTF32, false, []int{1025, 1056}, []int{1056, 1152}},
		{"k a multiple of 4, not of 32, large: A's tensor copies bound K", 4096, 4100, 4096, H200, tile.PrecTF32, false, nil, nil},
		{"k a multiple of 4, not of 32, large, 3xTF32", 4096, 4100, 4096, H200, tile.PrecTF32x3, false, nil, nil},
		{"k a multiple of 4, not of 32, large, bf16: A's tensor copies bound K too", 4096, 4100, 4096, H200, tile.PrecBF16, false, nil, nil},
		{"k a multiple of 4, not of 32, smaller", 1024, 1000, 4096, H200, tile.PrecTF32, false, nil, nil},
		{"odd m alone", 4095, 4096, 4096, H200, tile.PrecTF32, false, nil, nil},
		{"odd n, m under padBMinRows", 768, 1024, 4097, H200, tile.PrecTF32, false, nil, nil},
		{"odd n, m under padBMinRows, 3xTF32", 768, 1024, 4097, H200, tile.PrecTF32x3, false, nil, []int{1024, 4224}},
		{"odd k and n, m under padBMinRows: A alone", 768, 1025, 4097, H200, tile.PrecTF32, false, []int{768, 1056}, nil},
		{"aligned", 1024, 1024, 1024, H200, tile.PrecTF32, false, nil, nil},
		{"ieee", 1025, 1025, 1025, H200, tile.PrecIEEE, false, nil, nil},
		{"cpu", 1025, 1025, 1025, CPU(4), tile.PrecTF32, false, nil, nil},
		{"small", 511, 1025, 1025, H200, tile.PrecTF32, false, nil, nil},
		{"k short (store-bound)", 4095, 33, 4097, H200, tile.PrecTF32, false, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float32, G.WithShape(c.m, c.k), G.WithName("x"))
			w := G.NewMatrix(g, tensor.Float32, G.WithShape(c.k, c.n), G.WithName("w"))
			G.Must(G.Mul(x, w))
			gr, err := Import(g)
			if err != nil {
				t.Fatal(err)
			}
			groups := Partition(gr, Options{Target: c.t, MatMul: true, Precision: c.prec, PrecisionByGroup: c.byGroup})
			prod := groups[len(groups)-1]
			if prod.Kind != MatMulGroup {
				t.Fatalf("the last group is %v", prod)
			}
			if !slices.Equal(shapeOf(prod.aPad), c.a) || !slices.Equal(shapeOf(prod.bPad), c.b) {
				t.Fatalf("copies %v and %v, want %v and %v", shapeOf(prod.aPad), shapeOf(prod.bPad), c.a, c.b)
			}
			pads := 0
			for _, grp := range groups[:len(groups)-1] {
				if grp.Kind != PadGroup || grp.Root != prod.aPad && grp.Root != prod.bPad || len(grp.Inputs) != 1 {
					t.Fatalf("%v before the product", grp)
				}
				from := map[*Node]*G.Node{prod.aPad: x, prod.bPad: w}[grp.Root]
				if grp.Inputs[0].G != from {
					t.Fatalf("%v copies %v", grp, grp.Inputs[0])
				}
				pads++
				k, err := Emit(grp, c.t, c.prec)
				if err != nil {
					t.Fatal(err)
				}
				p := grp.Root.Info.Shape
				if k.Grid[0]*k.Tile.Meta["BLOCK_R"] < p[0] || k.Grid[1]*k.Tile.Meta["BLOCK_C"] < p[1] {
					t.Fatalf("grid %v of %v blocks does not cover %v", k.Grid, k.Tile.Meta, p)
				}
			}
			if want := len(slices.DeleteFunc([][]int{c.a, c.b}, func(s []int) bool { return s == nil })); pads != want {
				t.Fatalf("%d pad groups, want %d", pads, want)
			}
			for _, in := range prod.Inputs {
				if in.G == x && c.a != nil || in.G == w && c.b != nil {
					t.Fatalf("the product reads %v itself: %v", in, prod.Inputs)
				}
			}
			k, err := Emit(prod, c.t, c.prec)
			if err != nil {
				t.Fatal(err)
			}
			if c.a == nil {
				return
			}
			// the loop runs over the padded K; a padded B's loads are not
			// masked, A's by its rows at most (where m is not whole tiles)
			var loop *tile.Value
			k.Tile.Walk(func(v *tile.Value) {
				if v.Op == tile.OpFor {
					loop = v
				}
			})
			if loop == nil || loop.Args[1].Op != tile.OpConst || int(loop.Args[1].Aux) != c.a[1] {
				t.Fatalf("the loop does not run to the padded K %d:\n%s", c.a[1], k.Tile)
			}
			param := func(n *Node) *tile.Value { return k.Tile.Params[slices.Index(prod.Inputs, n)] }
			k.Tile.Walk(func(v *tile.Value) {
				if v.Op != tile.OpLoad || v.Args[0].Op != tile.OpAddPtr || v.Args[0].Args[0].Op != tile.OpSplat {
					return
				}
				switch p := v.Args[0].Args[0].Args[0]; {
				case c.b != nil && p == param(prod.bPad) && len(v.Args) > 1:
					t.Errorf("B's padded copy read with a mask: %v", v)
				case p == param(prod.aPad) && len(v.Args) > 1 && c.m%k.Tile.Meta["BLOCK_M"] == 0:
					t.Errorf("A's padded copy read with a mask, its rows whole tiles: %v", v)
				}
			})
		})
	}
}

// TestPadOperandsBatchedAndTransposed: BatchedMatMul's products pad each
// matrix of a batch (A's k, B's n, B stored n×k its k), and a batch's pad
// kernel writes matrix z on program axis 2; Bᵀ's copy keeps its n rows;
// Aᵀ·B copies neither operand.
func TestPadOperandsBatchedAndTransposed(t *testing.T) {
	cases := []struct {
		name         string
		batch        int
		m, k, n      int
		tb, ta       bool
		a, b         []int
		padGridBatch int
	}{
		{"A·Bᵀ, k odd", 1, 1024, 1023, 1024, true, false, []int{1, 1024, 1024}, []int{1, 1024, 1024}, 1},
		{"A·Bᵀ, n odd alone", 1, 1024, 1024, 1023, true, false, nil, nil, 0},
		{"a batch of 3, k and n odd", 3, 1100, 601, 602, false, false, []int{3, 1100, 608}, []int{3, 608, 640}, 3},
		// Aᵀ·B's copies were slower (the H100, r39e: GPT-2's embedding
		// gradient 50257×768×4096, A stored 4096×50257, TF32 119.5 →
		// 101.4 TFLOP/s): none
		{"Aᵀ·B, m odd", 1, 1023, 1025, 1024, false, true, nil, nil, 0},
		{"Aᵀ·B, n odd, k odd", 1, 1024, 1025, 1023, false, true, nil, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			ws := []int{c.batch, c.k, c.n}
			if c.tb {
				ws = []int{c.batch, c.n, c.k}
			}
			xs := []int{c.batch, c.m, c.k}
			if c.ta {
				xs = []int{c.batch, c.k, c.m}
			}
			x := G.NewTensor(g, tensor.Float32, 3, G.WithShape(xs...), G.WithName("x"))
			w := G.NewTensor(g, tensor.Float32, 3, G.WithShape(ws...), G.WithName("w"))
			G.Must(G.BatchedMatMul(x, w, c.ta, c.tb))
			gr, err := Import(g)
			if err != nil {
				t.Fatal(err)
			}
			groups := Partition(gr, Options{Target: H200, MatMul: true, Precision: tile.PrecTF32})
			prod := groups[len(groups)-1]
			if !slices.Equal(shapeOf(prod.aPad), c.a) || !slices.Equal(shapeOf(prod.bPad), c.b) {
				t.Fatalf("copies %v and %v, want %v and %v", shapeOf(prod.aPad), shapeOf(prod.bPad), c.a, c.b)
			}
			for _, grp := range groups {
				k, err := Emit(grp, H200, tile.PrecTF32)
				if err != nil {
					t.Fatal(err)
				}
				if grp.Kind == PadGroup && k.Grid[2] != c.padGridBatch {
					t.Fatalf("%v: grid %v, want %d matrices on axis 2", grp, k.Grid, c.padGridBatch)
				}
			}
		})
	}
}
