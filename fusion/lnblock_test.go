package fusion_test

import (
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
)

// lnBlock is a post-norm residual block as the encoder's feed-forward half
// is written: out = LayerNorm(x + x·w; gamma, beta), the loss
// Mean(out²), and the gradients of w, gamma and beta.
type lnBlock struct {
	g                      *G.ExprGraph
	x, w, gamma, beta, out *G.Node
	w2                     *G.Node // the product after the LayerNorm (then)
	loss                   *G.Node
}

func newLNBlock(t *testing.T, rows, d int, then bool) *lnBlock {
	t.Helper()
	rng := rand.New(rand.NewPCG(51, 52))
	g := G.NewGraph()
	b := &lnBlock{g: g}
	b.x = G.NewMatrix(g, tensor.Float64, G.WithShape(rows, d), G.WithName("x"), G.WithValue(randMatrix(rng, rows, d, 1)))
	b.w = paramMatrix(g, rng, "w", d, d)
	b.gamma, b.beta = paramMatrix(g, rng, "gamma", d), paramMatrix(g, rng, "beta", d)
	h := G.Must(G.Add(b.x, G.Must(G.Mul(b.x, b.w))))
	b.out = layerNorm(h, b.gamma, b.beta)
	params := G.Nodes{b.w, b.gamma, b.beta}
	if then { // a product after the LayerNorm, as the encoder's first one feeds the feed-forward
		b.w2 = paramMatrix(g, rng, "w2", d, 7)
		b.out = G.Must(G.Tanh(G.Must(G.Mul(b.out, b.w2))))
		params = append(params, b.w2)
	}
	b.loss = G.Must(G.Mean(G.Must(G.Square(b.out))))
	if _, err := G.Grad(b.loss, params...); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLNBlockKernels: the block's forward and backward fuse into few
// kernels on the CPU's and the H200's targets (both run here, on the CPU
// backend), and the loss and the gradients agree with Gorgonia's machine
// (float64, 37×50: no block size divides it; 5000×20). The rules it
// counts:
//   - LayerNorm's normalised value x̂, which the backward reads, is an
//     extra output of the kernel that scales and shifts it: the
//     broadcasts of gamma and beta take SizeOf(x̂), its shape alone, which
//     is no path back to x̂ (partition.go's reaches); it was a kernel of
//     its own, and so the whole LayerNorm could not become one row kernel
//     with its backward (14 → 9 kernels);
//   - the gradients of gamma and beta, Reshape(Sum(…, 0)) as Gorgonia
//     writes a broadcast's gradient, are each one reduction kernel that
//     stores its sums under the reshape's shape, not a reduction and a
//     copy (9 → 7); on the H200 with 5000 rows the column sums are split
//     over programs that add their parts atomically into the reshaped
//     output;
//   - those two column sums, Σ dy and Σ dy⊙x̂, are one kernel with two
//     outputs that reads dy once (sibling reductions; 7 → 6);
//   - with a product after the LayerNorm (its backward then comes after
//     the product's), the LayerNorm's forward is one row kernel: its
//     per-row values (σ, 1/σ), which the backward reads, are extra
//     outputs stored once a row (13 → 10 kernels; with several rows a
//     program too).
func TestLNBlockKernels(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       []fusion.Option
		rows, cols int
		kernels    int
		then       bool
	}{
		{"cpu", []fusion.Option{fusion.WithMatMulFusion(true)}, 37, 50, 6, false},
		{"h200", []fusion.Option{fusion.WithMatMulFusion(true), fusion.WithTarget(graphpass.H200)}, 37, 50, 6, false},
		{"h200 split column sums", []fusion.Option{fusion.WithMatMulFusion(true), fusion.WithTarget(graphpass.H200)}, 5000, 20, 6, false},
		{"cpu, a product after", []fusion.Option{fusion.WithMatMulFusion(true)}, 37, 50, 10, true},
		{"h200, a product after", []fusion.Option{fusion.WithMatMulFusion(true), fusion.WithTarget(graphpass.H200)}, 37, 50, 10, true},
		{"h200, a product after, rows a program (BLOCK_M)", []fusion.Option{fusion.WithMatMulFusion(true), fusion.WithTarget(graphpass.H200)}, 3001, 20, 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref, fused := newLNBlock(t, tc.rows, tc.cols, tc.then), newLNBlock(t, tc.rows, tc.cols, tc.then)
			vmRef := G.NewTapeMachine(ref.g)
			defer vmRef.Close()
			vm := fusion.NewTapeMachine(fused.g, tc.opts...)
			defer vm.Close()
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			if err := vmRef.RunAll(); err != nil {
				t.Fatal(err)
			}
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			r := vm.Report()
			if r.Kernels() != tc.kernels {
				t.Errorf("%d kernels, want %d\n%v", r.Kernels(), tc.kernels, r)
			}
			closeTo(t, "loss", []float64{scalar(fused.loss.Value())}, []float64{scalar(ref.loss.Value())}, 1e-12)
			pairs := [][2]*G.Node{{fused.w, ref.w}, {fused.gamma, ref.gamma}, {fused.beta, ref.beta}}
			if tc.then {
				pairs = append(pairs, [2]*G.Node{fused.w2, ref.w2})
			}
			for _, p := range pairs {
				got, err := p[0].Grad()
				if err != nil {
					t.Fatal(err)
				}
				want, err := p[1].Grad()
				if err != nil {
					t.Fatal(err)
				}
				closeTo(t, "d loss/d "+p[0].Name(), floats(got), floats(want), 1e-10)
			}
		})
	}
}

// TestPerRowExtraElementwise: a value per row that the user reads (e =
// exp(v), named) and that a kernel over the rows' elements broadcasts is
// that kernel's extra output, stored once a row by the lanes of the first
// column; its value and the kernel's agree with Gorgonia's (float64, 37×50,
// the CPU's and the H200's targets), in one kernel for both and one for
// the loss's sum.
func TestPerRowExtraElementwise(t *testing.T) {
	build := func() (g *G.ExprGraph, e, y, loss *G.Node) {
		rng := rand.New(rand.NewPCG(61, 62))
		g = G.NewGraph()
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(37, 50), G.WithName("x"), G.WithValue(randMatrix(rng, 37, 50, 1)))
		v := G.NewVector(g, tensor.Float64, G.WithShape(37), G.WithName("v"), G.WithValue(tensor.New(tensor.WithShape(37), tensor.WithBacking(floats(randMatrix(rng, 37, 1, 1))))))
		e = G.Must(G.Exp(v))
		G.WithName("e")(e)
		y = G.Must(G.Tanh(G.Must(G.BroadcastHadamardProd(x, e, nil, []byte{1}))))
		G.WithName("y")(y)
		loss = G.Must(G.Sum(y))
		return
	}
	for _, tc := range []struct {
		name string
		opts []fusion.Option
	}{
		{"cpu", nil},
		{"h200", []fusion.Option{fusion.WithTarget(graphpass.H200)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gr, er, _, lr := build()
			gf, ef, _, lf := build()
			vmRef := G.NewTapeMachine(gr)
			defer vmRef.Close()
			vm := fusion.NewTapeMachine(gf, tc.opts...)
			defer vm.Close()
			if err := vmRef.RunAll(); err != nil {
				t.Fatal(err)
			}
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			r := vm.Report()
			if r.Kernels() != 2 {
				t.Errorf("%d kernels, want 2 (3 with exp(v) a kernel of its own)\n%v", r.Kernels(), r)
			}
			closeTo(t, "e", floats(ef.Value()), floats(er.Value()), 1e-15)
			closeTo(t, "loss", []float64{scalar(lf.Value())}, []float64{scalar(lr.Value())}, 1e-12)
			t.Logf("%v", r)
		})
	}
}
