package fusion_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
)

// TestGELUBackwardRecomputes: in a training step of gelu(x·W1 + b1)·W2
// the GELU's backward, in the epilogue of dH = dO·W2ᵀ, reads the
// pre-activation z and computes tanh(c·(z + 0.044715·z³)) and 1 + tanh
// again (graphpass's rematerialisation), so the forward kernel writes 2
// values (the GELU, which the next product reads, and z) where it wrote 4
// (and tanh and 1 + tanh); the recomputed ops are the 6 of tanh and 1 +
// tanh from z. Loss and gradients match Gorgonia's machine
// (float64, 1e-12 relative; float32 with its f32 tanh, 2e-5), on the
// CPU's target and on the H200's (its split sums, on the CPU); shapes
// that are no multiple of any block.
func TestGELUBackwardRecomputes(t *testing.T) {
	for _, c := range []struct {
		name   string
		dt     tensor.Dtype
		bias   bool
		target graphpass.Target
		tol    float64
		writes int // the values the forward GELU's kernel writes
	}{
		{"float64 with bias", tensor.Float64, true, graphpass.CPU(2), 1e-12, 2},
		{"float64 with bias, H200 target", tensor.Float64, true, graphpass.H200, 1e-12, 2},
		{"float32 with bias", tensor.Float32, true, graphpass.CPU(2), 2e-5, 2},
		// the product is a kernel of its own (a product is no extra
		// output), so the GELU's kernel reads z and writes the GELU alone
		// (3 before)
		{"float64 without bias", tensor.Float64, false, graphpass.CPU(2), 1e-12, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			const n, in, hid, out = 13, 20, 37, 11
			rng := rand.New(rand.NewPCG(3, 5))
			vals := []tensor.Tensor{data(c.dt, rng, n, in), data(c.dt, rng, in, hid), data(c.dt, rng, hid, out), data(c.dt, rng, 1, hid)}
			if err := vals[3].Reshape(hid); err != nil {
				t.Fatal(err)
			}
			build := func() (*G.ExprGraph, G.Nodes, *G.Node, G.Nodes) {
				g := G.NewGraph()
				x := G.NewMatrix(g, c.dt, G.WithShape(n, in), G.WithName("x"))
				w1 := G.NewMatrix(g, c.dt, G.WithShape(in, hid), G.WithName("w1"))
				w2 := G.NewMatrix(g, c.dt, G.WithShape(hid, out), G.WithName("w2"))
				k := func(v float64) *G.Node {
					if c.dt == tensor.Float32 {
						return G.NewConstant(float32(v))
					}
					return G.NewConstant(v)
				}
				z := G.Must(G.Mul(x, w1))
				ins, learn := G.Nodes{x, w1, w2}, G.Nodes{w1, w2}
				if c.bias {
					b1 := G.NewVector(g, c.dt, G.WithShape(hid), G.WithName("b1"))
					z = G.Must(G.BroadcastAdd(z, b1, nil, []byte{0}))
					ins, learn = append(ins, b1), append(learn, b1)
				}
				inner := G.Must(G.Mul(G.Must(G.Add(z, G.Must(G.Mul(G.Must(G.Cube(z)), k(0.044715))))), k(math.Sqrt(2/math.Pi))))
				h := G.Must(G.Mul(G.Must(G.HadamardProd(z, G.Must(G.Add(G.Must(G.Tanh(inner)), k(1))))), k(0.5)))
				loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Mul(h, w2))))))
				grads, err := G.Grad(loss, learn...)
				if err != nil {
					t.Fatal(err)
				}
				return g, ins, loss, grads
			}
			gRef, insRef, lossRef, gradsRef := build()
			g, ins, loss, grads := build()
			for i := range ins {
				if err := G.Let(insRef[i], vals[i]); err != nil {
					t.Fatal(err)
				}
				if err := G.Let(ins[i], vals[i].Clone()); err != nil {
					t.Fatal(err)
				}
			}
			vmRef := G.NewTapeMachine(gRef)
			defer vmRef.Close()
			vm := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CPU), fusion.WithMatMulFusion(true), fusion.WithTarget(c.target))
			defer vm.Close()
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			rep := vm.Report()
			isTanh := func(s string) bool { return strings.HasPrefix(s, "Tanh(") }
			var fwd, recomputes []fusion.GroupInfo
			for _, gi := range rep.Groups {
				if slices.ContainsFunc(gi.Ops, func(s string) bool { return strings.HasPrefix(s, "Cube") }) {
					fwd = append(fwd, gi)
				}
				if slices.ContainsFunc(gi.Recompute, isTanh) {
					recomputes = append(recomputes, gi)
				}
				if isTanh(gi.Root) || slices.ContainsFunc(gi.Extra, isTanh) {
					t.Errorf("kernel %s writes tanh", gi.Kernel)
				}
			}
			if len(fwd) != 1 || 1+len(fwd[0].Extra) != c.writes {
				t.Fatalf("want one forward GELU kernel writing %d values:\n%v", c.writes, rep)
			}
			if len(recomputes) != 1 || recomputes[0].Kind != "matmul" || len(recomputes[0].Recompute) > 8 {
				t.Fatalf("want the backward's product to compute tanh again (at most 8 ops):\n%v", rep)
			}
			poisonGrads(grads)
			if err := vmRef.RunAll(); err != nil {
				t.Fatal(err)
			}
			if err := vm.RunAll(); err != nil {
				t.Fatalf("%v\n%v", err, rep)
			}
			if a, b := scalar(loss.Value()), scalar(lossRef.Value()); !(math.Abs(a-b) <= c.tol*math.Abs(b)) {
				t.Fatalf("loss %v fused, %v in Gorgonia", a, b)
			}
			for i := range grads {
				got, want := floats(grads[i].Value()), floats(gradsRef[i].Value())
				if len(got) != len(want) || len(want) == 0 {
					t.Fatalf("gradient of %s: %d values, want %d", grads[i].Name(), len(got), len(want))
				}
				for j := range want {
					if !(math.Abs(got[j]-want[j]) <= c.tol*(1+math.Abs(want[j]))) {
						t.Fatalf("gradient %s [%d] = %v, want %v", grads[i].Name(), j, got[j], want[j])
					}
				}
			}
			t.Logf("%d kernels, the forward GELU's writing %d values, the backward's product computing %d ops again; %d bytes moved",
				rep.Kernels(), 1+len(fwd[0].Extra), len(recomputes[0].Recompute), rep.KernelBytes())
		})
	}
}

// poisonGrads fills the gradients' values with NaN where they have one, so
// that a value the machine does not write shows.
func poisonGrads(grads G.Nodes) {
	for _, n := range grads {
		v := n.Value()
		if v == nil {
			continue
		}
		switch x := v.Data().(type) {
		case []float64:
			for i := range x {
				x[i] = math.NaN()
			}
		case []float32:
			for i := range x {
				x[i] = float32(math.NaN())
			}
		}
	}
}

// TestRecomputedValuesMatchGorgonia: graphs in which a kernel computes
// values of another again instead of reading them (an elementwise value
// in a sum's prologue; a product's tanh and 1 + tanh from the product,
// which its kernel writes in their place; two values of one intermediate
// left one at a time, the intermediate computed once; LayerNorm's
// broadcast γ and 1/σ in its backward's row kernel) give Gorgonia's values (float64,
// 1e-12 relative; 13×37, no multiple of a block), and each does compute
// something again.
func TestRecomputedValuesMatchGorgonia(t *testing.T) {
	const r, c = 13, 37
	type graph struct {
		outs  G.Nodes // the values compared
		learn G.Nodes // differentiated, their gradients compared too
	}
	cases := []struct {
		name  string
		build func(g *G.ExprGraph, in func(name string, shape ...int) *G.Node) graph
	}{
		{"exp in a sum's prologue", func(g *G.ExprGraph, in func(string, ...int) *G.Node) graph {
			e := G.Must(G.Exp(in("x", r, c)))
			return graph{outs: G.Nodes{G.Must(G.Sum(e, 0)), G.Must(G.Tanh(e))}}
		}},
		{"a product written in place of its tanh", func(g *G.ExprGraph, in func(string, ...int) *G.Node) graph {
			th := G.Must(G.Tanh(G.Must(G.Mul(in("x", r, c), in("w", c, c)))))
			a := G.Must(G.Add(th, G.NewConstant(1.0)))
			return graph{outs: G.Nodes{G.Must(G.HadamardProd(th, a)), G.Must(G.Sum(th, 0)), G.Must(G.Sum(a, 1))}}
		}},
		{"two values of one intermediate, left one at a time", func(g *G.ExprGraph, in func(string, ...int) *G.Node) graph {
			x := in("x", r, c)
			e := G.Must(G.Exp(x))
			th, a := G.Must(G.Tanh(e)), G.Must(G.Add(e, G.NewConstant(1.0)))
			q := x
			for range 9 { // too long a chain to compute again
				q = G.Must(G.Sin(q))
			}
			return graph{outs: G.Nodes{G.Must(G.HadamardProd(G.Must(G.HadamardProd(th, a)), q)), G.Must(G.Sum(G.Must(G.Sub(th, a)), 0)), G.Must(G.Max(q, 0))}}
		}},
		{"LayerNorm's backward after a product", func(g *G.ExprGraph, in func(string, ...int) *G.Node) graph {
			x, gamma, beta := in("x", r, c), in("g", c), in("b", c)
			loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Mul(layerNorm(x, gamma, beta), in("w", c, 5)))))))
			return graph{outs: G.Nodes{loss}, learn: G.Nodes{x, gamma, beta}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			build := func() ([]G.Nodes, *G.ExprGraph) {
				rng := rand.New(rand.NewPCG(9, 10))
				g := G.NewGraph()
				in := func(name string, shape ...int) *G.Node {
					n := 1
					for _, d := range shape {
						n *= d
					}
					v := make([]float64, n)
					for i := range v {
						v[i] = rng.Float64() - 0.5
					}
					val := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
					if len(shape) == 1 {
						return G.NewVector(g, tensor.Float64, G.WithShape(shape...), G.WithName(name), G.WithValue(val))
					}
					return G.NewMatrix(g, tensor.Float64, G.WithShape(shape...), G.WithName(name), G.WithValue(val))
				}
				gr := tc.build(g, in)
				var grads G.Nodes
				if len(gr.learn) > 0 {
					var err error
					if grads, err = G.Grad(gr.outs[0], gr.learn...); err != nil {
						t.Fatal(err)
					}
				}
				return []G.Nodes{gr.outs, grads}, g
			}
			ref, gRef := build()
			got, g := build()
			vmRef := G.NewTapeMachine(gRef)
			defer vmRef.Close()
			vm := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CPU), fusion.WithMatMulFusion(true))
			defer vm.Close()
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(vm.Report().Groups, func(gi fusion.GroupInfo) bool { return len(gi.Recompute) > 0 }) {
				t.Fatalf("no kernel computes another's value again:\n%v", vm.Report())
			}
			for _, gi := range vm.Report().Groups {
				if len(gi.Recompute) > 0 {
					t.Logf("%s computes again: %s", gi.Kernel, strings.Join(gi.Recompute, ", "))
				}
			}
			if err := vmRef.RunAll(); err != nil {
				t.Fatal(err)
			}
			if err := vm.RunAll(); err != nil {
				t.Fatalf("%v\n%v", err, vm.Report())
			}
			for k := range ref {
				for i, n := range ref[k] {
					want, have := floats(n.Value()), floats(got[k][i].Value())
					if len(want) == 0 && n.Value() != nil {
						want, have = []float64{scalar(n.Value())}, []float64{scalar(got[k][i].Value())}
					}
					if len(have) != len(want) || len(want) == 0 {
						t.Fatalf("%s: %d values, want %d", n.Name(), len(have), len(want))
					}
					for j := range want {
						if !(math.Abs(have[j]-want[j]) <= 1e-12*(1+math.Abs(want[j]))) {
							t.Fatalf("%s [%d] = %v, want %v\n%v", n.Name(), j, have[j], want[j], vm.Report())
						}
					}
				}
			}
		})
	}
}
