package graphpass_test

import (
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	. "github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

func opSoftmax(x *G.Node) *G.Node { // max, sub, exp, sum, div, as users write it
	e := G.Must(G.Exp(G.Must(G.BroadcastSub(x, G.Must(G.Max(x, 1)), nil, []byte{1}))))
	return G.Must(G.BroadcastHadamardDiv(e, G.Must(G.Sum(e, 1)), nil, []byte{1}))
}

func opLayerNorm(x *G.Node) *G.Node {
	mu := G.Must(G.Mean(x, 1))
	xc := G.Must(G.BroadcastSub(x, mu, nil, []byte{1}))
	v := G.Must(G.Mean(G.Must(G.Square(xc)), 1))
	rstd := G.Must(G.Inverse(G.Must(G.Sqrt(G.Must(G.Add(v, G.NewConstant(float32(1e-5))))))))
	gamma := G.NewVector(x.Graph(), tensor.Float32, G.WithShape(x.Shape()[1]), G.WithName("gamma"))
	return G.Must(G.BroadcastHadamardProd(G.Must(G.BroadcastHadamardProd(xc, rstd, nil, []byte{1})), gamma, nil, []byte{0}))
}

// TestRowKernelShapes: the forms of row kernel each width takes on the
// H200's target, read from the kernel: the passes over the row (loops:
// none where the row is held in one block; two for a softmax walked in
// blocks, op by op or Gorgonia's, the maximum and the sum of exponentials
// in one online pass, and two for LayerNorm, its mean and variance in
// one; one per reduction and one for the output otherwise; LayerNorm
// walks rows of 8192 or more), the rank of the row block (2 with BLOCK_M
// rows a program) and the streaming hints on the row's loads and stores
// only where the tensor is larger than the L2.
func TestRowKernelShapes(t *testing.T) {
	cases := []struct {
		name        string
		shape       []int
		build       func(x *G.Node) *G.Node
		loops, rank int
		streamed    bool // the row's loads and stores carry the streaming hint
	}{
		{"softmax op by op 8192×4096: one block, not streamed (rows of up to maxRow)", []int{8192, 4096}, opSoftmax, 0, 1, false},
		{"layernorm 4096×32768: one block past maxRow, late loads, streamed", []int{4096, 32768}, opLayerNorm, 0, 1, true},
		{"softmax op by op 1823×781: one block", []int{1823, 781}, opSoftmax, 0, 1, false},
		{"softmax op by op 4096×32768: one block, not streamed", []int{4096, 32768}, opSoftmax, 0, 1, false},
		{"softmax op by op 64×40000: two passes", []int{64, 40000}, opSoftmax, 2, 1, false},
		{"Gorgonia's softmax 64×40000: two passes", []int{64, 40000}, func(x *G.Node) *G.Node { return G.Must(G.SoftMax(x)) }, 2, 1, false},
		{"layernorm 64×40000: two passes (the mean and the variance in one)", []int{64, 40000}, opLayerNorm, 2, 1, false},
		{"layernorm 64×40960: two passes, no lane past the end", []int{64, 40960}, opLayerNorm, 2, 1, false},
		{"layernorm 64×20000: one block", []int{64, 20000}, opLayerNorm, 0, 1, false},
		{"layernorm 1151×8192: one block", []int{1151, 8192}, opLayerNorm, 0, 1, false},
		{"layernorm 4096×128: 8 rows a program", []int{4096, 128}, opLayerNorm, 0, 2, false},
		{"softmax op by op 8192×100: 8 rows a program", []int{8192, 100}, opSoftmax, 0, 2, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewTensor(g, tensor.Float32, len(c.shape), G.WithShape(c.shape...), G.WithName("x"))
			c.build(x)
			k := emitOne(t, g, H200)
			loops, rank := 0, 0
			var hinted, plain int
			k.Tile.Walk(func(v *tile.Value) {
				switch v.Op {
				case tile.OpFor:
					loops++
				case tile.OpLoad, tile.OpStore:
					if tile.CacheHint(v.Aux) == tile.CacheStreaming {
						hinted++
					} else {
						plain++
					}
					if v.Op == tile.OpLoad {
						rank = max(rank, v.Type.Shape.Rank)
					}
				}
			})
			if loops != c.loops || rank != c.rank {
				t.Errorf("%d loops and row blocks of rank %d, want %d and %d:\n%s", loops, rank, c.loops, c.rank, k.Tile)
			}
			// streamed: the row's load and the store (a LayerNorm's γ is not)
			if c.streamed && hinted != 2 || !c.streamed && hinted != 0 {
				t.Errorf("%d loads and stores with the streaming hint and %d without (streamed: %v):\n%s", hinted, plain, c.streamed, k.Tile)
			}
		})
	}
}

// TestRowReciprocal: on a GPU a softmax written op by op divides by its
// row sum once a row (a division of a scalar, or of [BLOCK_M,1] with
// several rows a program, then a product per element), as the
// hand-written kernels do; on the CPU the division stays per element, as
// the unfused graph computes it.
func TestRowReciprocal(t *testing.T) {
	cases := []struct {
		name    string
		shape   []int
		target  Target
		perElem bool // a division of a block of the row's width
	}{
		{"one row a program", []int{64, 1000}, H200, false},
		{"rows a program", []int{4096, 100}, H200, false},
		{"walked in blocks", []int{8, 40000}, H200, false},
		{"cpu", []int{64, 1000}, CPU(2), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			opSoftmax(G.NewTensor(g, tensor.Float32, len(c.shape), G.WithShape(c.shape...), G.WithName("x")))
			k := emitOne(t, g, c.target)
			wide := 0
			k.Tile.Walk(func(v *tile.Value) {
				if v.Op == tile.OpDiv && v.Type.DType.IsFloat() && v.Type.Shape.Numel() > max(1, k.Tile.Meta["BLOCK_M"]) {
					wide++
				}
			})
			if (wide > 0) != c.perElem {
				t.Fatalf("%d float divisions of whole blocks (per element: %v):\n%s", wide, c.perElem, k.Tile)
			}
		})
	}
}
