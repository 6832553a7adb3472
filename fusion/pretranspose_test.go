package fusion_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// TestWeightGradientTransposedOnce: the weight gradient dW = xᵀ·dY of
// loss = Σ(x·W)² (x 1100×260: k = 1100 tokens, m = 260; W 260×300,
// sizes no multiple of any tile) compiled for the H200 at TF32 reads x
// through a transpose kernel of its own and runs as A·B (graphpass's
// pretranspose), and, run on the CPU, its dW agrees with a float64
// reference that sees TF32's operand conversions (tile.PrecTF32's
// Operands) within float32 summation's error; at 3xTF32 (whose swapped
// form stages Aᵀ itself) and for a CPU target there is no transpose
// kernel.
func TestWeightGradientTransposedOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 170M multiply-adds on the CPU")
	}
	cpu := []fusion.Option{fusion.WithBackend(fusion.CPU), fusion.WithMatMulFusion(true)}
	checkWeightGradient(t, []weightGradCase{
		{"h200 tf32", append(cpu, fusion.WithTarget(graphpass.H200), fusion.WithPrecision(tile.PrecTF32)), tile.PrecTF32, 1},
		{"h200 tf32x3", append(cpu, fusion.WithTarget(graphpass.H200), fusion.WithPrecision(tile.PrecTF32x3)), tile.PrecTF32x3, 0},
		{"cpu tf32", append(cpu, fusion.WithPrecision(tile.PrecTF32)), tile.PrecTF32, 0},
	})
}

type weightGradCase struct {
	name       string
	opts       []fusion.Option
	prec       tile.Precision
	transposes int // transpose kernels the compiled graph has
}

func checkWeightGradient(t *testing.T, cases []weightGradCase) {
	const k, m, n = 1100, 260, 300
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float32, G.WithShape(k, m), G.WithName("x"))
			w := G.NewMatrix(g, tensor.Float32, G.WithShape(m, n), G.WithName("w"))
			loss := G.Must(G.Sum(G.Must(G.Square(G.Must(G.Mul(x, w))))))
			grads, err := G.Grad(loss, w)
			if err != nil {
				t.Fatal(err)
			}
			vm := fusion.NewTapeMachine(g, c.opts...)
			defer vm.Close()
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			transposes, productReadsX := 0, false
			for _, nd := range vm.Compiled().Graph.AllNodes() {
				f, ok := nd.Op().(*fusion.FusedOp)
				if !ok {
					continue
				}
				switch name := f.Kernel().Name; {
				case strings.HasSuffix(name, "_transpose"):
					transposes++
				case strings.HasSuffix(name, "_matmul") && f.Kernel().Meta["wg_stage"] > 0:
					productReadsX = true // Aᵀ staged by the product itself
				}
			}
			if transposes != c.transposes || c.transposes > 0 && productReadsX {
				t.Fatalf("%d transpose kernels (want %d), a product staging Aᵀ: %v\n%v", transposes, c.transposes, productReadsX, vm.Report())
			}
			rng := rand.New(rand.NewPCG(21, 22))
			xd := make([]float32, k*m)
			wd := make([]float32, m*n)
			for i := range xd {
				xd[i] = float32(rng.Float64()*2 - 1)
			}
			for i := range wd {
				wd[i] = float32(rng.Float64()*2 - 1)
			}
			for _, l := range []struct {
				n     *G.Node
				d     []float32
				shape []int
			}{{x, xd, []int{k, m}}, {w, wd, []int{m, n}}} {
				if err := G.Let(l.n, tensor.New(tensor.WithShape(l.shape...), tensor.WithBacking(append([]float32(nil), l.d...)))); err != nil {
					t.Fatal(err)
				}
			}
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			got := grads[0].Value().Data().([]float32)
			// the reference: Y = x·W and dW = xᵀ·2Y in float64, each product's
			// operands as the precision's dot sees them (the float32 inputs
			// converted; Y rounded to float32 first, as the kernels store it)
			ca, cb := referenceOperands(c.prec)
			y := make([]float32, k*n)
			for i := 0; i < k; i++ {
				for j := 0; j < n; j++ {
					s := 0.0
					for l := 0; l < m; l++ {
						s += ca(xd[i*m+l]) * cb(wd[l*n+j])
					}
					y[i*n+j] = float32(s)
				}
			}
			worst := 0.0
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					s, mag := 0.0, 0.0
					for l := 0; l < k; l++ {
						p := ca(xd[l*m+i]) * cb(2*y[l*n+j])
						s, mag = s+p, mag+math.Abs(p)
					}
					// float32 sums of k terms: within k·2⁻²⁴ of Σ|terms|, and
					// Y's own rounding (as the reference has it) moves it no further
					if e := math.Abs(float64(got[i*n+j])-s) / (mag * k * 0x1p-24); e > worst {
						worst = e
					}
				}
			}
			if worst > 1 || math.IsNaN(worst) {
				t.Fatalf("dW off the reference by %.3g of float32 summation's bound", worst)
			}
		})
	}
}

// TestHeadsGradTransposedOnce: the encoder block at 1024 tokens, model 256
// and 4 heads of 64 (float64), compiled for the H200 at TF32: its heads'
// weight gradients (heads_grad, xᵀ·dP per head) read x from a copy one
// transpose kernel writes, on the swapped wgmma form, and the block's
// output and every gradient match the unfused graph's within 1e-10 (the
// CPU runs the H200's kernels; float64 dots are exact at any precision).
func TestHeadsGradTransposedOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: an encoder block of 1024 tokens, twice")
	}
	const b, s, d, h, ff = 2, 512, 256, 4, 256
	run := func(opts ...fusion.Option) ([][]float64, *fusion.Machine) {
		e := newEncoder(t, b, s, d, h, ff)
		rng := rand.New(rand.NewPCG(5, 6))
		if err := G.Let(e.x, randMatrix(rng, b*s, d, 1)); err != nil {
			t.Fatal(err)
		}
		vm := fusion.NewTapeMachine(e.g, opts...)
		t.Cleanup(func() { vm.Close() })
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		out := [][]float64{floats(e.out.Value())}
		for _, g := range e.grads {
			out = append(out, floats(g.Value()))
		}
		return out, vm
	}
	got, vm := run(fusion.WithBackend(fusion.CPU), fusion.WithMatMulFusion(true), fusion.WithTarget(graphpass.H200), fusion.WithPrecision(tile.PrecTF32))
	transposes, wgmma := 0, 0
	for _, n := range vm.Compiled().Graph.AllNodes() {
		if f, ok := n.Op().(*fusion.FusedOp); ok {
			switch name := f.Kernel().Name; {
			case strings.HasSuffix(name, "_transpose"):
				transposes++
			case strings.HasSuffix(name, "_heads_grad") && f.Kernel().Meta["wgmma"] == 2:
				wgmma++
			}
		}
	}
	if wgmma != 2 || transposes < 1 {
		t.Fatalf("%d heads_grad kernels on wgmma (want 2), %d transposes\n%v", wgmma, transposes, vm.Report())
	}
	want, _ := run(fusion.WithBackend(fusion.CPU), fusion.WithFusion(false))
	for i := range want {
		closeTo(t, fmt.Sprintf("value %d", i), got[i], want[i], 1e-10)
	}
}
