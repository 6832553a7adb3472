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
	loss                   *G.Node
}

func newLNBlock(t *testing.T, rows, d int) *lnBlock {
	t.Helper()
	rng := rand.New(rand.NewPCG(51, 52))
	g := G.NewGraph()
	b := &lnBlock{g: g}
	b.x = G.NewMatrix(g, tensor.Float64, G.WithShape(rows, d), G.WithName("x"), G.WithValue(randMatrix(rng, rows, d, 1)))
	b.w = paramMatrix(g, rng, "w", d, d)
	b.gamma, b.beta = paramMatrix(g, rng, "gamma", d), paramMatrix(g, rng, "beta", d)
	h := G.Must(G.Add(b.x, G.Must(G.Mul(b.x, b.w))))
	b.out = layerNorm(h, b.gamma, b.beta)
	b.loss = G.Must(G.Mean(G.Must(G.Square(b.out))))
	if _, err := G.Grad(b.loss, b.w, b.gamma, b.beta); err != nil {
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
//     outputs that reads dy once (sibling reductions; 7 → 6).
func TestLNBlockKernels(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       []fusion.Option
		rows, cols int
		kernels    int
	}{
		{"cpu", []fusion.Option{fusion.WithMatMulFusion(true)}, 37, 50, 6},
		{"h200", []fusion.Option{fusion.WithMatMulFusion(true), fusion.WithTarget(graphpass.H200)}, 37, 50, 6},
		{"h200 split column sums", []fusion.Option{fusion.WithMatMulFusion(true), fusion.WithTarget(graphpass.H200)}, 5000, 20, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref, fused := newLNBlock(t, tc.rows, tc.cols), newLNBlock(t, tc.rows, tc.cols)
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
			for _, p := range [][2]*G.Node{{fused.w, ref.w}, {fused.gamma, ref.gamma}, {fused.beta, ref.beta}} {
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
