package fusion_test

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// TestMLPWithFusedMatMuls trains the MLP with every product fused with its
// epilogue (forward and backward, transposed operands included), on the
// interpreter, against Gorgonia (its products by BLAS, in another order).
func TestMLPWithFusedMatMuls(t *testing.T) {
	trainMLPAgainstGorgonia(t, 1e-10, 3e-5, fusion.WithBackend(fusion.CPU), fusion.WithMatMulFusion(true))
}

// TestLinearReLUIsOneKernel: relu(x·W + b), as Gorgonia builds it (a
// broadcast add, then >= and ⊙), is one matmul kernel with its epilogue; on
// shapes with tails in every dimension, and on shapes the tiles divide
// (no masks), in float64 and in float32 (the interpreter's vector dot).
func TestLinearReLUIsOneKernel(t *testing.T) { checkLinearReLU(t, fusion.WithMatMulFusion(true)) }

func checkLinearReLU(t *testing.T, opts ...fusion.Option) {
	cases := []struct {
		name    string
		m, k, n int
		dt      tensor.Dtype
		tol     float64
	}{
		{"tails everywhere", 37, 70, 45, tensor.Float64, 1e-12},
		{"whole tiles", 64, 64, 96, tensor.Float64, 1e-12},
		{"whole tiles, float32", 64, 96, 128, tensor.Float32, 2e-5},
		{"tails, float32", 70, 33, 50, tensor.Float32, 2e-5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, k, n := c.m, c.k, c.n
			g := G.NewGraph()
			x := G.NewMatrix(g, c.dt, G.WithShape(m, k), G.WithName("x"))
			w := G.NewMatrix(g, c.dt, G.WithShape(k, n), G.WithName("w"))
			b := G.NewVector(g, c.dt, G.WithShape(n), G.WithName("b"))
			y := G.Must(G.Rectify(G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w)), b, nil, []byte{0}))))
			vm := oneKernel(t, g, "matmul", true, opts...)
			rng := rand.New(rand.NewPCG(9, 9))
			xv, wv, bv := randMatrix(rng, m, k, 1), randMatrix(rng, k, n, 1), randMatrix(rng, 1, n, 1)
			xd, wd, bd := xv.Data().([]float64), wv.Data().([]float64), bv.Data().([]float64)
			let := func(node *G.Node, d []float64, shape ...int) {
				var v *tensor.Dense
				if c.dt == tensor.Float32 {
					d32 := make([]float32, len(d))
					for i, x := range d {
						d32[i] = float32(x)
						d[i] = float64(d32[i]) // the reference sees the rounded inputs
					}
					v = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d32))
				} else {
					v = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]float64(nil), d...)))
				}
				if err := G.Let(node, v); err != nil {
					t.Fatal(err)
				}
			}
			let(x, xd, m, k)
			let(w, wd, k, n)
			let(b, bd, n)
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			want := make([]float64, m*n)
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					s := bd[j]
					for l := 0; l < k; l++ {
						s += xd[i*k+l] * wd[l*n+j]
					}
					want[i*n+j] = max(s, 0)
				}
			}
			closeTo(t, "relu(x·W+b)", floats(y.Value()), want, c.tol)
		})
	}
}

// TestMatMulBlock64: the 64×64 output tile (the default for large
// products; here chosen by a Target.Tune) gives the MLP the same training
// as Gorgonia, and its kernels lower to PTX.
func TestMatMulBlock64(t *testing.T) {
	target := graphpass.CPU(runtime.NumCPU())
	target.Tune = func(grp *graphpass.Group, m tile.Meta) {
		if grp.Kind == graphpass.MatMulGroup {
			m["BLOCK_M"], m["BLOCK_N"] = 64, 64
		}
	}
	trainMLPAgainstGorgonia(t, 1e-11, 2e-5, fusion.WithMatMulFusion(true), fusion.WithTarget(target))
	m := newMLP(t, tensor.Float32, 70, 33, 90, 10, 5)
	vm := fusion.NewTapeMachine(m.g, fusion.WithMatMulFusion(true), fusion.WithTarget(target))
	defer vm.Close()
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	lowersToPTX(t, vm)
	for _, n := range vm.Compiled().Graph.AllNodes() {
		if f, ok := n.Op().(*fusion.FusedOp); ok && strings.HasSuffix(f.Kernel().Name, "_matmul") && f.Grid()[0] != (70+63)/64 && f.Grid()[0] != (33+63)/64 && f.Grid()[0] != (90+63)/64 {
			t.Fatalf("%s: grid %v, not 64-row tiles", f.Kernel().Name, f.Grid())
		}
	}
}
