package cpu_test

import (
	"fmt"
	"math"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestProductKernelsNative: the product kernels graphpass writes for a
// two-layer MLP's step (x·w1 + b1 → GELU, h·w2 + b2, a squared loss, and
// the gradients of x, w1, b1, w2, b2: products A×B, Aᵀ×B and A×Bᵀ) at
// sizes that leave tails — rows and columns not a multiple of the tile, K
// not a multiple of BLOCK_K and K under 16 — run natively and on the
// reference interpreter from the inputs they had in a fused run (outputs
// poisoned with NaN): within 1e-4 + 1e-4·|x| (fused multiply-adds in k
// order, the reference's separate roundings, f32 tanh within 1 ulp), and
// where BLOCK_K does not divide K, the K loop runs whole steps unmasked
// and the rest in one step of its own (two dots, the second of at most
// BLOCK_K: the power of two that holds the rest).
func TestProductKernelsNative(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no native code here: not amd64 with AVX2 and FMA, or -tags purego")
	}
	for _, c := range []struct {
		name                string
		batch, in, hid, out int
	}{
		{"tails everywhere: batch 70, 33 → 90 → 10", 70, 33, 90, 10},
		{"K of A×B 200 (3 steps of 64 and one of 8 in 16), batch 100", 100, 200, 48, 20},
		{"mlp_step small's shapes: 64, 256 → 512 → 16 (no tails)", 64, 256, 512, 16},
		{"K of Aᵀ×B 130 (2 of 64, then 2 in 16), 784 → 144 → 16", 130, 784, 144, 16},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := mlpSpec(c.batch, c.in, c.hid, c.out)
			forms, split := map[string]int{}, 0
			total := 0
			generatedKernels(t, spec, map[string]int{}, &total, func(f *fusion.FusedOp, e *cpu.Exec, run func(launch func(args []any) error) []float32) {
				k := f.Kernel()
				var dots []*tile.Value
				k.Walk(func(v *tile.Value) {
					if v.Op == tile.OpDot {
						dots = append(dots, v)
					}
				})
				if len(dots) == 0 {
					return
				}
				got := run(func(args []any) error { return e.Launch(f.Grid(), args...) })
				want := run(func(args []any) error { return interp.Interpret(k, f.Grid(), args...) })
				for i := range want {
					g, w := float64(got[i]), float64(want[i])
					if !(g == w || math.Abs(g-w) <= 1e-4+1e-4*math.Abs(w)) {
						t.Fatalf("%s: output[%d] = %v natively, %v on the reference\n%v", k.Name, i, g, w, k)
					}
				}
				forms[f.String()]++
				bk := k.Meta["BLOCK_K"]
				kk := 0
				for _, d := range dots {
					kk = max(kk, d.Args[0].Type.Shape.Dims[1])
				}
				if len(dots) == 2 {
					if r := dots[1].Args[0].Type.Shape.Dims[1]; r > bk || dots[0].Args[0].Type.Shape.Dims[1] != bk {
						t.Fatalf("%s: K steps of %d and %d, BLOCK_K %d", k.Name, dots[0].Args[0].Type.Shape.Dims[1], r, bk)
					}
					split++
				}
			})
			if len(forms) < 3 {
				t.Errorf("product kernels %v: want A×B, Aᵀ×B and A×Bᵀ", forms)
			}
			t.Logf("%d product kernels natively against the reference, %d with a K tail step: %v", sum(forms), split, forms)
			if c.batch%64 != 0 && split == 0 {
				t.Errorf("batch %d (K of Aᵀ×B) leaves a tail, but no kernel has a tail step", c.batch)
			}
		})
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// mlpSpec is bench's mlp_step at the given sizes, with the gradient of x
// too (an A×Bᵀ over K = hid); seeded inputs in ±1/√fan-in.
func mlpSpec(batch, in, hid, out int) bench.Spec {
	g := G.NewGraph()
	rng := tiletest.RNG(fmt.Sprint(batch, in, hid, out))
	inputs := map[*G.Node]tensor.Tensor{}
	input := func(name string, scale float64, shape ...int) *G.Node {
		n := 1
		for _, s := range shape {
			n *= s
		}
		d := tiletest.Uniform(rng, n, -scale, scale)
		node := G.NewTensor(g, tensor.Float32, len(shape), G.WithShape(shape...), G.WithName(name))
		inputs[node] = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
		return node
	}
	x, y := input("x", 1, batch, in), input("y", 1, batch, out)
	w1, b1 := input("w1", 1/math.Sqrt(float64(in)), in, hid), input("b1", 0.1, hid)
	w2, b2 := input("w2", 1/math.Sqrt(float64(hid)), hid, out), input("b2", 0.1, out)
	c := func(v float64) *G.Node { return G.NewConstant(float32(v)) }
	z := G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w1)), b1, nil, []byte{0}))
	inner := G.Must(G.Mul(G.Must(G.Add(z, G.Must(G.Mul(G.Must(G.Cube(z)), c(0.044715))))), c(math.Sqrt(2/math.Pi))))
	h := G.Must(G.Mul(G.Must(G.HadamardProd(z, G.Must(G.Add(G.Must(G.Tanh(inner)), c(1))))), c(0.5)))
	p := G.Must(G.BroadcastAdd(G.Must(G.Mul(h, w2)), b2, nil, []byte{0}))
	loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(p, y))))))
	grads, err := G.Grad(loss, x, w1, b1, w2, b2)
	if err != nil {
		panic(err)
	}
	return bench.Spec{Name: "mlp", Graph: g, Inputs: inputs, Outputs: append(G.Nodes{loss}, grads...)}
}
