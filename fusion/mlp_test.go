package fusion_test

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
)

// mlp is a two-layer perceptron with its loss and gradients, built exactly
// as a Gorgonia user builds it.
type mlp struct {
	g              *G.ExprGraph
	x, y           *G.Node
	w1, b1, w2, b2 *G.Node
	loss           *G.Node
	learnables     G.Nodes
}

func newMLP(t *testing.T, dt tensor.Dtype, batch, in, hidden, out int, seed uint64) *mlp {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	init := func(shape ...int) tensor.Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		if dt == tensor.Float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(rng.NormFloat64() * 0.5)
			}
			return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
		}
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64() * 0.5
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
	}
	g := G.NewGraph()
	m := &mlp{g: g}
	m.x = G.NewMatrix(g, dt, G.WithShape(batch, in), G.WithName("x"))
	m.y = G.NewMatrix(g, dt, G.WithShape(batch, out), G.WithName("y"))
	m.w1 = G.NewMatrix(g, dt, G.WithShape(in, hidden), G.WithName("w1"), G.WithValue(init(in, hidden)))
	m.b1 = G.NewVector(g, dt, G.WithShape(hidden), G.WithName("b1"), G.WithValue(init(hidden)))
	m.w2 = G.NewMatrix(g, dt, G.WithShape(hidden, out), G.WithName("w2"), G.WithValue(init(hidden, out)))
	m.b2 = G.NewVector(g, dt, G.WithShape(out), G.WithName("b2"), G.WithValue(init(out)))
	h := G.Must(G.Rectify(G.Must(G.BroadcastAdd(G.Must(G.Mul(m.x, m.w1)), m.b1, nil, []byte{0}))))
	o := G.Must(G.BroadcastAdd(G.Must(G.Mul(h, m.w2)), m.b2, nil, []byte{0}))
	m.loss = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(o, m.y))))))
	m.learnables = G.Nodes{m.w1, m.b1, m.w2, m.b2}
	if _, err := G.Grad(m.loss, m.learnables...); err != nil {
		t.Fatal(err)
	}
	return m
}

func data(dt tensor.Dtype, rng *rand.Rand, shape ...int) tensor.Tensor {
	n := shape[0] * shape[1]
	if dt == tensor.Float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.Float64()*2 - 1)
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.Float64()*2 - 1
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
}

func scalar(v G.Value) float64 {
	if v == nil {
		return math.NaN() // no value: the comparison fails
	}
	switch x := v.Data().(type) {
	case float32:
		return float64(x)
	case float64:
		return x
	}
	return math.NaN()
}

func floats(v G.Value) []float64 {
	if v == nil {
		return nil
	}
	switch x := v.Data().(type) {
	case []float32:
		out := make([]float64, len(x))
		for i, f := range x {
			out[i] = float64(f)
		}
		return out
	case []float64:
		return append([]float64(nil), x...)
	}
	return nil
}

// TestMLPTrainingMatchesGorgonia trains the same MLP 20 steps with a
// Gorgonia solver, once on Gorgonia's tape machine and once fused: the
// losses and weights agree (float64: 1e-12 relative; float32: 2e-5).
func TestMLPTrainingMatchesGorgonia(t *testing.T) {
	trainMLPAgainstGorgonia(t, 1e-12, 2e-5, fusion.WithBackend(fusion.CPU))
}

// trainMLPAgainstGorgonia is the MLP comparison with the given fusion options.
func trainMLPAgainstGorgonia(t *testing.T, tol64, tol32 float64, opts ...fusion.Option) {
	for _, c := range []struct {
		name string
		dt   tensor.Dtype
		tol  float64
	}{{"float64", tensor.Float64, tol64}, {"float32", tensor.Float32, tol32}} {
		t.Run(c.name, func(t *testing.T) {
			ref, fused := newMLP(t, c.dt, 8, 4, 16, 3, 1), newMLP(t, c.dt, 8, 4, 16, 3, 1)
			vmRef := G.NewTapeMachine(ref.g)
			defer vmRef.Close()
			vm := fusion.NewTapeMachine(fused.g, opts...)
			defer vm.Close()
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			solRef, sol := G.NewVanillaSolver(G.WithLearnRate(0.1)), G.NewVanillaSolver(G.WithLearnRate(0.1))
			rng := rand.New(rand.NewPCG(42, 42))
			for step := 0; step < 20; step++ {
				xv, yv := data(c.dt, rng, 8, 4), data(c.dt, rng, 8, 3)
				for _, m := range []*mlp{ref, fused} {
					if err := G.Let(m.x, xv); err != nil {
						t.Fatal(err)
					}
					if err := G.Let(m.y, yv); err != nil {
						t.Fatal(err)
					}
				}
				if err := vmRef.RunAll(); err != nil {
					t.Fatal(err)
				}
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				lockstep(t, step, c.tol, ref.loss, fused.loss, solRef, sol, ref.learnables, fused.learnables, vmRef, vm)
			}
			for i, w := range ref.learnables {
				a, b := floats(w.Value()), floats(fused.learnables[i].Value())
				if len(a) != len(b) {
					t.Fatalf("%s: %d values fused, %d in Gorgonia", w.Name(), len(b), len(a))
				}
				for j := range a {
					if math.Abs(a[j]-b[j]) > c.tol*(1+math.Abs(a[j])) {
						t.Fatalf("%s[%d] after 20 steps: %v fused, %v in Gorgonia", w.Name(), j, b[j], a[j])
					}
				}
			}
			t.Log(vm.Report())
		})
	}
}

// lockstep ends one training step run on Gorgonia's machine and on ours:
// the losses agree within tol (relative), then both solvers step and both
// machines reset.
func lockstep(t *testing.T, step int, tol float64, lossRef, loss *G.Node, solRef, sol G.Solver, ref, fused G.Nodes, vmRef, vm interface{ Reset() }) {
	t.Helper()
	lr, lf := scalar(lossRef.Value()), scalar(loss.Value())
	if !(math.Abs(lr-lf) <= tol*math.Abs(lr)) {
		t.Fatalf("step %d: loss %v fused, %v in Gorgonia", step, lf, lr)
	}
	if err := solRef.Step(G.NodesToValueGrads(ref)); err != nil {
		t.Fatal(err)
	}
	if err := sol.Step(G.NodesToValueGrads(fused)); err != nil {
		t.Fatal(err)
	}
	vmRef.Reset()
	vm.Reset()
}
