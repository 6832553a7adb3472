package fusion_test

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// TestGeluMLPRounded: a float32 MLP layer y = gelu(x·W1 + b)·W2 (GELU's
// tanh form) with L = Σy², its gradients taken by Gorgonia, fused for the
// H200 with TF32 products and run on the CPU. Its products' epilogues
// carry no tanh at TF32 (the forward's 1 + tanh(u) and the backward's
// 1 + t and 1 − t·t written from ex2 and rsqrt: graphpass's tanhPlusOne
// and tanhSums, the backward recomputing t from the pre-activation) and
// keep it at ieee; the output and dL/dW1 (through the backward's GELU
// derivative) match a float64 implementation of the layer within the
// precision's bound of the largest value. Sizes no multiple of the tiles.
func TestGeluMLPRounded(t *testing.T) {
	const m, k, f, o = 70, 48, 100, 36
	for _, c := range []struct {
		prec tile.Precision
		tol  float64
		tanh bool
	}{{tile.PrecTF32, 4e-3, false}, {tile.PrecIEEE, 1e-5, true}} {
		t.Run(c.prec.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 11))
			fill := func(n int, s float64) []float64 {
				v := make([]float64, n)
				for i := range v {
					v[i] = (rng.Float64()*2 - 1) * s
				}
				return v
			}
			xv, w1v, bv, w2v := fill(m*k, 1), fill(k*f, 2/math.Sqrt(k)), fill(f, 0.5), fill(f*o, 1/math.Sqrt(f))
			f32 := func(v []float64) []float32 {
				o := make([]float32, len(v))
				for i, x := range v {
					o[i] = float32(x)
				}
				return o
			}
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float32, G.WithShape(m, k), G.WithName("x"), G.WithValue(tensor.New(tensor.WithShape(m, k), tensor.WithBacking(f32(xv)))))
			w1 := G.NewMatrix(g, tensor.Float32, G.WithShape(k, f), G.WithName("w1"), G.WithValue(tensor.New(tensor.WithShape(k, f), tensor.WithBacking(f32(w1v)))))
			b := G.NewVector(g, tensor.Float32, G.WithShape(f), G.WithName("b"), G.WithValue(tensor.New(tensor.WithShape(f), tensor.WithBacking(f32(bv)))))
			w2 := G.NewMatrix(g, tensor.Float32, G.WithShape(f, o), G.WithName("w2"), G.WithValue(tensor.New(tensor.WithShape(f, o), tensor.WithBacking(f32(w2v)))))
			must := G.Must
			cst := func(v float64) *G.Node { return G.NewConstant(float32(v)) }
			h := must(G.BroadcastAdd(must(G.Mul(x, w1)), b, nil, []byte{0}))
			inner := must(G.Mul(must(G.Add(h, must(G.Mul(must(G.Cube(h)), cst(0.044715))))), cst(math.Sqrt(2/math.Pi))))
			a := must(G.Mul(must(G.HadamardProd(h, must(G.Add(must(G.Tanh(inner)), cst(1))))), cst(0.5)))
			y := must(G.Mul(a, w2))
			loss := must(G.Sum(must(G.Square(y))))
			if _, err := G.Grad(loss, w1); err != nil {
				t.Fatal(err)
			}
			vm := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CPU), fusion.WithMatMulFusion(true), fusion.WithTarget(graphpass.H200), fusion.WithPrecision(c.prec), fusion.WithKeep(y))
			defer vm.Close()
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			tanhs := 0
			for _, n := range vm.Compiled().Graph.AllNodes() {
				if fo, ok := n.Op().(*fusion.FusedOp); ok && fo.Kernel().Meta["BLOCK_K"] > 0 {
					fo.Kernel().Walk(func(v *tile.Value) {
						if v.Op == tile.OpTanh {
							tanhs++
						}
					})
				}
			}
			if (tanhs > 0) != c.tanh {
				t.Errorf("%d tanh in the products' kernels; want some: %v\n%v", tanhs, c.tanh, vm.Report())
			}
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			// float64: h, a, y, then dY = 2y, dA = dY·W2ᵀ, dH = dA·gelu′(h), dW1 = xᵀ·dH
			kk := math.Sqrt(2 / math.Pi)
			hv, av, yv := make([]float64, m*f), make([]float64, m*f), make([]float64, m*o)
			dh := make([]float64, m*f)
			for i := range m {
				for j := range f {
					s := bv[j]
					for l := range k {
						s += xv[i*k+l] * w1v[l*f+j]
					}
					hv[i*f+j] = s
					av[i*f+j] = 0.5 * s * (1 + math.Tanh(kk*(s+0.044715*s*s*s)))
				}
			}
			for i := range m {
				for j := range o {
					s := 0.0
					for l := range f {
						s += av[i*f+l] * w2v[l*o+j]
					}
					yv[i*o+j] = s
				}
			}
			for i := range m {
				for j := range f {
					da := 0.0
					for l := range o {
						da += 2 * yv[i*o+l] * w2v[j*o+l]
					}
					s := hv[i*f+j]
					th := math.Tanh(kk * (s + 0.044715*s*s*s))
					dh[i*f+j] = da * (0.5*(1+th) + 0.5*s*(1-th*th)*kk*(1+3*0.044715*s*s))
				}
			}
			dw1 := make([]float64, k*f)
			for l := range k {
				for j := range f {
					s := 0.0
					for i := range m {
						s += xv[i*k+l] * dh[i*f+j]
					}
					dw1[l*f+j] = s
				}
			}
			gw, err := w1.Grad()
			if err != nil {
				t.Fatal(err)
			}
			for _, cmp := range []struct {
				what      string
				got, want []float64
			}{{"y", floats(y.Value()), yv}, {"dL/dW1", floats(gw), dw1}} {
				if len(cmp.got) != len(cmp.want) {
					t.Fatalf("%s: %d values, want %d", cmp.what, len(cmp.got), len(cmp.want))
				}
				big := 0.0
				for _, v := range cmp.want {
					big = math.Max(big, math.Abs(v))
				}
				worst := 0.0
				for i := range cmp.want {
					worst = math.Max(worst, math.Abs(cmp.got[i]-cmp.want[i]))
				}
				if !(worst <= c.tol*big) {
					t.Errorf("%s: largest error %.3g of the largest value %.3g, want within %g", cmp.what, worst, big, c.tol)
				}
				t.Logf("%s: largest error %.3g of %.3g", cmp.what, worst/big, big)
			}
		})
	}
}
