package fusion_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/tile"
)

// solverCase is one solver configuration, built twice: for Gorgonia and for
// fusion.NewSolver.
type solverCase struct {
	name  string
	new   func() G.Solver
	steps int
}

// solverCases: Adam, RMSProp and Momentum 100 steps with their defaults and
// a larger learn rate; each option (L1, L2, batch size, clip, eps, betas,
// rho, momentum) on the solvers Gorgonia applies it to; Vanilla and AdaGrad
// briefly.
func solverCases() []solverCase {
	return []solverCase{
		{"adam", func() G.Solver { return G.NewAdamSolver(G.WithLearnRate(0.01)) }, 100},
		{"adam_defaults", func() G.Solver { return G.NewAdamSolver() }, 30},
		{"adam_betas_eps", func() G.Solver {
			return G.NewAdamSolver(G.WithLearnRate(0.02), G.WithBeta1(0.8), G.WithBeta2(0.99), G.WithEps(1e-6))
		}, 30},
		{"adam_l1", func() G.Solver { return G.NewAdamSolver(G.WithLearnRate(0.01), G.WithL1Reg(0.01)) }, 30},
		{"adam_l2", func() G.Solver { return G.NewAdamSolver(G.WithLearnRate(0.01), G.WithL2Reg(0.05)) }, 30},
		{"adam_batch", func() G.Solver { return G.NewAdamSolver(G.WithLearnRate(0.01), G.WithBatchSize(8)) }, 30},
		{"adam_clip", func() G.Solver { return G.NewAdamSolver(G.WithLearnRate(0.01), G.WithClip(0.05)) }, 30},
		{"adam_all", func() G.Solver {
			return G.NewAdamSolver(G.WithLearnRate(0.01), G.WithL1Reg(0.01), G.WithL2Reg(0.05), G.WithBatchSize(4), G.WithClip(0.02))
		}, 30},
		{"rmsprop", func() G.Solver { return G.NewRMSPropSolver(G.WithLearnRate(0.005)) }, 100},
		{"rmsprop_rho_eps", func() G.Solver {
			return G.NewRMSPropSolver(G.WithLearnRate(0.005), G.WithRho(0.9), G.WithEps(1e-5))
		}, 30},
		{"rmsprop_l2", func() G.Solver { return G.NewRMSPropSolver(G.WithLearnRate(0.005), G.WithL2Reg(0.01)) }, 30},
		{"rmsprop_clip", func() G.Solver { return G.NewRMSPropSolver(G.WithLearnRate(0.005), G.WithClip(0.05)) }, 30},
		// a clip of 0: RMSProp and AdaGrad clamp every gradient to 0 (only
		// their caches move), Adam, Momentum and Vanilla do not clip at all
		{"rmsprop_clip0", func() G.Solver { return G.NewRMSPropSolver(G.WithLearnRate(0.005), G.WithClip(0)) }, 10},
		{"adam_clip0", func() G.Solver { return G.NewAdamSolver(G.WithLearnRate(0.01), G.WithClip(0)) }, 10},
		{"momentum", func() G.Solver { return G.NewMomentum(G.WithLearnRate(0.05)) }, 100},
		{"momentum_0.5", func() G.Solver { return G.NewMomentum(G.WithLearnRate(0.05), G.WithMomentum(0.5)) }, 30},
		{"momentum_l1", func() G.Solver { return G.NewMomentum(G.WithLearnRate(0.05), G.WithL1Reg(0.01)) }, 30},
		{"momentum_l2", func() G.Solver { return G.NewMomentum(G.WithLearnRate(0.05), G.WithL2Reg(0.05)) }, 30},
		{"momentum_batch", func() G.Solver { return G.NewMomentum(G.WithLearnRate(0.05), G.WithBatchSize(3)) }, 30},
		{"momentum_clip", func() G.Solver { return G.NewMomentum(G.WithLearnRate(0.05), G.WithClip(0.05)) }, 30},
		{"vanilla", func() G.Solver { return G.NewVanillaSolver(G.WithLearnRate(0.1)) }, 20},
		{"vanilla_all", func() G.Solver {
			return G.NewVanillaSolver(G.WithLearnRate(0.1), G.WithL1Reg(0.01), G.WithL2Reg(0.05), G.WithBatchSize(2), G.WithClip(0.1))
		}, 20},
		{"adagrad", func() G.Solver { return G.NewAdaGradSolver(G.WithLearnRate(0.05)) }, 20},
		{"adagrad_clip0", func() G.Solver { return G.NewAdaGradSolver(G.WithLearnRate(0.05), G.WithClip(0)) }, 10},
		{"adagrad_l2_clip", func() G.Solver {
			return G.NewAdaGradSolver(G.WithLearnRate(0.05), G.WithL2Reg(0.05), G.WithClip(0.05), G.WithEps(1e-6))
		}, 20},
	}
}

// TestSolverMatchesGorgonia trains two identical MLPs on Gorgonia's own
// tape machine, one stepped by a Gorgonia solver and one by the fused
// solver of the same configuration, so that the solver is the only
// difference: losses, parameters and the optimizer state agree at every
// step, and every gradient is zeroed by Step as Gorgonia's Step zeroes it.
// Tolerance: max |fused-Gorgonia| ≤ tol · max |Gorgonia| over each tensor,
// tol 1e-13 (float64) and 1e-5 (float32); the CPU executor computes the
// same operations in the same order, so today they agree to the bit.
func TestSolverMatchesGorgonia(t *testing.T) {
	for _, c := range solverCases() {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			tol := 1e-13
			if dt == tensor.Float32 {
				tol = 1e-5
			}
			t.Run(c.name+"/"+dt.String(), func(t *testing.T) {
				solverAgainstGorgonia(t, c.new, c.steps, dt, tol, nil)
			})
		}
	}
}

// solverAgainstGorgonia is one case of TestSolverMatchesGorgonia; launch,
// if not nil, runs the fused solver's kernels.
func solverAgainstGorgonia(t *testing.T, mk func() G.Solver, steps int, dt tensor.Dtype, tol float64, launch launcher) {
	t.Helper()
	ref, fused := newMLP(t, dt, 8, 5, 17, 3, 3), newMLP(t, dt, 8, 5, 17, 3, 3)
	vmRef, vm := G.NewTapeMachine(ref.g), G.NewTapeMachine(fused.g)
	defer vmRef.Close()
	defer vm.Close()
	sol, err := fusion.NewSolver(nil, mk())
	if err != nil {
		t.Fatal(err)
	}
	defer sol.Close()
	if launch != nil {
		fusion.SetSolverLauncher(sol, launch)
	}
	trainLockstep(t, steps, dt, tol, ref, fused, vmRef, vm, mk(), sol)
}

// launcher runs tile kernels somewhere (a tiletest.Launcher).
type launcher interface {
	Launch(k *tile.Kernel, grid tile.Grid, args ...any) error
}

// TestSolverFusedMachine is the user's whole training loop: the MLP fused
// on the CPU backend and stepped by the fused solver of its machine, against
// Gorgonia's machine and solver, 100 steps of Adam, RMSProp and Momentum.
// Tolerance (as above) 1e-12 for float64 and 1e-5 for float32: the fused
// forward and backward passes round differently from Gorgonia's, and the
// solvers carry those differences from step to step (measured: within
// 1e-14 and 1.2e-6 over the 100 steps).
func TestSolverFusedMachine(t *testing.T) {
	for _, c := range solverCases() {
		if c.steps < 100 {
			continue
		}
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			tol := 1e-12
			if dt == tensor.Float32 {
				tol = 1e-5
			}
			t.Run(c.name+"/"+dt.String(), func(t *testing.T) {
				ref, fused := newMLP(t, dt, 8, 5, 17, 3, 3), newMLP(t, dt, 8, 5, 17, 3, 3)
				vmRef := G.NewTapeMachine(ref.g)
				defer vmRef.Close()
				vm := fusion.NewTapeMachine(fused.g, fusion.WithBackend(fusion.CPU))
				defer vm.Close()
				if err := vm.Err(); err != nil {
					t.Fatal(err)
				}
				sol, err := fusion.NewSolver(vm, c.new())
				if err != nil {
					t.Fatal(err)
				}
				defer sol.Close()
				trainLockstep(t, c.steps, dt, tol, ref, fused, vmRef, vm, c.new(), sol)
				if err := vm.Sync(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

type runner interface {
	RunAll() error
	Reset()
}

// trainLockstep runs steps training steps of ref (stepped by solRef) and
// fused (stepped by sol) on the same batches, checking the losses before
// each step and the parameters, state and gradients after it.
func trainLockstep(t *testing.T, steps int, dt tensor.Dtype, tol float64, ref, fused *mlp, vmRef, vm runner, solRef G.Solver, sol *fusion.Solver) {
	t.Helper()
	rng := rand.New(rand.NewPCG(42, 42))
	for step := range steps {
		xv, yv := data(dt, rng, 8, 5), data(dt, rng, 8, 3)
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
		lr, lf := scalar(ref.loss.Value()), scalar(fused.loss.Value())
		if !(math.Abs(lr-lf) <= tol*math.Abs(lr)) {
			t.Fatalf("step %d: loss %v fused, %v in Gorgonia", step, lf, lr)
		}
		if err := solRef.Step(G.NodesToValueGrads(ref.learnables)); err != nil {
			t.Fatal(err)
		}
		if err := sol.Step(G.NodesToValueGrads(fused.learnables)); err != nil {
			t.Fatal(err)
		}
		for i, w := range ref.learnables {
			fw := fused.learnables[i]
			closeTensors(t, step, w.Name(), tol, floats(w.Value()), floats(fw.Value()))
			g, err := fw.Grad()
			if err != nil {
				t.Fatal(err)
			}
			for j, x := range floats(g) {
				if x != 0 {
					t.Fatalf("step %d: %s's gradient[%d] = %v after Step, want 0", step, fw.Name(), j, x)
				}
			}
			want := gorgoniaState(t, solRef, i)
			got, err := sol.State(i)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d state tensors, Gorgonia has %d", len(got), len(want))
			}
			for s := range want {
				closeTensors(t, step, w.Name()+" state "+string(rune('0'+s)), tol, floats(want[s]), floats(got[s]))
			}
		}
		vmRef.Reset()
		vm.Reset()
	}
}

// closeTensors: max |b-a| ≤ tol · max |a|, and no NaN.
func closeTensors(t *testing.T, step int, what string, tol float64, a, b []float64) {
	t.Helper()
	if len(a) != len(b) || len(a) == 0 {
		t.Fatalf("step %d: %s: %d values fused, %d in Gorgonia", step, what, len(b), len(a))
	}
	scale, worst, at := 0.0, 0.0, 0
	for i := range a {
		scale = max(scale, math.Abs(a[i]))
		if d := math.Abs(a[i] - b[i]); d > worst || math.IsNaN(d) {
			worst, at = d, i
			if math.IsNaN(d) {
				break
			}
		}
	}
	if !(worst <= tol*scale) {
		t.Fatalf("step %d: %s[%d]: %v fused, %v in Gorgonia (max difference %.3g, scale %.3g, tol %g)", step, what, at, b[at], a[at], worst, scale, tol)
	}
}

// gorgoniaState reads a Gorgonia solver's state for parameter i (its
// unexported cache of dual values): Adam's means and variances, the
// momentum's velocity, RMSProp's and AdaGrad's caches.
func gorgoniaState(t *testing.T, s G.Solver, i int) []G.Value {
	t.Helper()
	v := reflect.ValueOf(s).Elem()
	cache := v.FieldByName("cache")
	if !cache.IsValid() {
		return nil // VanillaSolver keeps none
	}
	if i >= cache.Len() || cache.Index(i).IsNil() {
		t.Fatalf("%T has no state for parameter %d", s, i)
	}
	dv := cache.Index(i).Elem()
	read := func(f reflect.Value) G.Value {
		x := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface()
		val, _ := x.(G.Value)
		return val
	}
	out := []G.Value{read(dv.Field(0))}
	if _, adam := s.(*G.AdamSolver); adam {
		out = append(out, read(dv.FieldByName("d")))
	}
	return out
}

// TestSolverScalarParameters: a model with a scalar parameter (a
// *gorgonia.F64 or *F32 value) beside a vector: the vector takes the fused
// update, the scalar Gorgonia's own, through the solver given to NewSolver.
func TestSolverScalarParameters(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		t.Run(dt.String(), func(t *testing.T) {
			type model struct {
				g       *G.ExprGraph
				x, y    *G.Node
				w, b    *G.Node
				loss    *G.Node
				learned G.Nodes
			}
			build := func() *model {
				m := &model{g: G.NewGraph()}
				var w0 tensor.Tensor
				var b0 G.Value
				if dt == tensor.Float32 {
					w0, b0 = tensor.New(tensor.WithShape(5), tensor.WithBacking([]float32{0.3, -0.2, 0.5, 0.1, -0.4})), G.NewF32(0.25)
				} else {
					w0, b0 = tensor.New(tensor.WithShape(5), tensor.WithBacking([]float64{0.3, -0.2, 0.5, 0.1, -0.4})), G.NewF64(0.25)
				}
				m.x = G.NewMatrix(m.g, dt, G.WithShape(7, 5), G.WithName("x"))
				m.y = G.NewVector(m.g, dt, G.WithShape(7), G.WithName("y"))
				m.w = G.NewVector(m.g, dt, G.WithShape(5), G.WithName("w"), G.WithValue(w0))
				m.b = G.NewScalar(m.g, dt, G.WithName("b"), G.WithValue(b0))
				pred := G.Must(G.Add(G.Must(G.Mul(m.x, m.w)), m.b))
				m.loss = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(pred, m.y))))))
				m.learned = G.Nodes{m.w, m.b}
				if _, err := G.Grad(m.loss, m.learned...); err != nil {
					t.Fatal(err)
				}
				return m
			}
			ref, fused := build(), build()
			vmRef, vm := G.NewTapeMachine(ref.g), G.NewTapeMachine(fused.g)
			defer vmRef.Close()
			defer vm.Close()
			solRef := G.NewAdamSolver(G.WithLearnRate(0.05))
			sol, err := fusion.NewSolver(nil, G.NewAdamSolver(G.WithLearnRate(0.05)))
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(5, 5))
			for step := range 10 {
				xv := data(dt, rng, 7, 5)
				yv := data(dt, rng, 7, 1)
				yv.Reshape(7)
				for _, m := range []*model{ref, fused} {
					G.Let(m.x, xv)
					G.Let(m.y, yv)
				}
				for _, vm := range []G.VM{vmRef, vm} {
					if err := vm.RunAll(); err != nil {
						t.Fatal(err)
					}
				}
				if err := solRef.Step(G.NodesToValueGrads(ref.learned)); err != nil {
					t.Fatal(err)
				}
				if err := sol.Step(G.NodesToValueGrads(fused.learned)); err != nil {
					t.Fatal(err)
				}
				closeTensors(t, step, "w", 1e-6, floats(ref.w.Value()), floats(fused.w.Value()))
				closeTensors(t, step, "b", 1e-6, []float64{scalar(ref.b.Value())}, []float64{scalar(fused.b.Value())})
				vmRef.Reset()
				vm.Reset()
			}
			if _, err := sol.State(1); err == nil || !strings.Contains(err.Error(), "scalar") {
				t.Errorf("State of the scalar parameter: %v, want an error saying it is a scalar", err)
			}
		})
	}
}

// notASolver is a solver tilefuse does not know.
type notASolver struct{}

func (notASolver) Step([]G.ValueGrad) error { return nil }

// TestSolverErrors: unsupported solvers and configurations, and misuse of
// Step, give errors that say what is wrong.
func TestSolverErrors(t *testing.T) {
	stepped := func(s G.Solver) G.Solver {
		m := newMLP(t, tensor.Float64, 4, 3, 5, 2, 9)
		vm := G.NewTapeMachine(m.g)
		defer vm.Close()
		rng := rand.New(rand.NewPCG(1, 2))
		G.Let(m.x, data(tensor.Float64, rng, 4, 3))
		G.Let(m.y, data(tensor.Float64, rng, 4, 2))
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		if err := s.Step(G.NodesToValueGrads(m.learnables)); err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, c := range []struct {
		name string
		s    G.Solver
		want string
	}{
		{"nil", nil, "no Gorgonia solver"},
		{"nil adam", (*G.AdamSolver)(nil), "nil *gorgonia.AdamSolver"},
		{"adamw", G.NewAdamW(), "*gorgonia.AdamW is not supported"},
		{"barzilai-borwein", G.NewBarzilaiBorweinSolver(), "*gorgonia.BarzilaiBorweinSolver is not supported"},
		{"unknown", notASolver{}, "fusion_test.notASolver is not supported"},
		{"nan learn rate", G.NewAdamSolver(G.WithLearnRate(math.NaN())), "eta is NaN"},
		{"nan clip", G.NewRMSPropSolver(G.WithClip(math.NaN())), "clip is NaN"},
		{"stepped adam", stepped(G.NewAdamSolver()), "stepped already"},
		{"stepped momentum", stepped(G.NewMomentum()), "stepped already"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := fusion.NewSolver(nil, c.s)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("NewSolver: %v, want an error containing %q", err, c.want)
			}
		})
	}

	t.Run("failed machine", func(t *testing.T) {
		vm := fusion.NewTapeMachine(G.NewGraph(), fusion.WithBackend(fusion.Backend(1)))
		if vm.Err() == nil {
			t.Skip("the CUDA backend is available here: no failed machine to give")
		}
		if _, err := fusion.NewSolver(vm, G.NewAdamSolver()); err == nil || !strings.Contains(err.Error(), "did not compile") {
			t.Fatalf("NewSolver on a failed machine: %v", err)
		}
	})

	// misuse of Step and State, on a trained-once MLP
	setup := func(t *testing.T) (*mlp, *fusion.Solver) {
		m := newMLP(t, tensor.Float32, 4, 3, 5, 2, 9)
		vm := G.NewTapeMachine(m.g)
		t.Cleanup(func() { vm.Close() })
		rng := rand.New(rand.NewPCG(1, 2))
		G.Let(m.x, data(tensor.Float32, rng, 4, 3))
		G.Let(m.y, data(tensor.Float32, rng, 4, 2))
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		s, err := fusion.NewSolver(nil, G.NewAdamSolver())
		if err != nil {
			t.Fatal(err)
		}
		return m, s
	}
	for _, c := range []struct {
		name string
		do   func(m *mlp, s *fusion.Solver) error
		want string
	}{
		{"state before a step", func(m *mlp, s *fusion.Solver) error { _, err := s.State(0); return err }, "before the first Step"},
		{"state out of range", func(m *mlp, s *fusion.Solver) error {
			s.Step(G.NodesToValueGrads(m.learnables))
			_, err := s.State(4)
			return err
		}, "parameter 4 of 4"},
		{"fewer parameters", func(m *mlp, s *fusion.Solver) error {
			if err := s.Step(G.NodesToValueGrads(m.learnables)); err != nil {
				return nil
			}
			return s.Step(G.NodesToValueGrads(m.learnables[:3]))
		}, "3 parameters, the first step had 4"},
		{"reordered parameters", func(m *mlp, s *fusion.Solver) error {
			if err := s.Step(G.NodesToValueGrads(m.learnables)); err != nil {
				return nil
			}
			return s.Step(G.NodesToValueGrads(G.Nodes{m.b1, m.w1, m.w2, m.b2}))
		}, "parameter 0 (b1): its value is float32 (5), but parameter 0 (w1) was float32 (3, 5)"},
		{"no gradient", func(m *mlp, s *fusion.Solver) error {
			return s.Step(G.NodesToValueGrads(G.Nodes{m.w1, m.x}))
		}, "x has no gradient"},
		{"int parameter", func(m *mlp, s *fusion.Solver) error {
			g := G.NewGraph()
			n := G.NewVector(g, tensor.Int, G.WithShape(3), G.WithName("counts"), G.WithValue(tensor.New(tensor.WithBacking([]int{1, 2, 3}))))
			return s.Step([]G.ValueGrad{intParam{n}})
		}, "int elements"},
		{"a view", func(m *mlp, s *fusion.Solver) error {
			w := m.w1.Value().(*tensor.Dense)
			v, err := w.Slice(G.S(0, 2))
			if err != nil {
				return nil
			}
			return s.Step([]G.ValueGrad{viewParam{v.(*tensor.Dense), w}})
		}, "a view of another tensor"},
		{"closed", func(m *mlp, s *fusion.Solver) error {
			s.Close()
			return s.Step(G.NodesToValueGrads(m.learnables))
		}, "closed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, s := setup(t)
			if err := c.do(m, s); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v, want an error containing %q", err, c.want)
			}
		})
	}
}

// intParam is an int vector given as a parameter, its gradient itself.
type intParam struct{ n *G.Node }

func (p intParam) Value() G.Value         { return p.n.Value() }
func (p intParam) Grad() (G.Value, error) { return p.n.Value(), nil }
func (p intParam) Name() string           { return p.n.Name() }

// viewParam is a slice of a weight matrix given as a parameter.
type viewParam struct{ v, of *tensor.Dense }

func (p viewParam) Value() G.Value         { return p.v }
func (p viewParam) Grad() (G.Value, error) { return p.v, nil }
func (p viewParam) Name() string           { return "view" }

// solverConfigs is every shape of solver kernel: each solver with every
// combination of the options Gorgonia applies to it (L1, L2, batch size,
// clip), by kernel name (float32), with a constructor of the Gorgonia solver.
func solverConfigs(t *testing.T) map[string]func() G.Solver {
	t.Helper()
	out := map[string]func() G.Solver{}
	for _, mk := range []func(...G.SolverOpt) G.Solver{
		func(o ...G.SolverOpt) G.Solver {
			return G.NewVanillaSolver(append([]G.SolverOpt{G.WithLearnRate(0.1)}, o...)...)
		},
		func(o ...G.SolverOpt) G.Solver {
			return G.NewMomentum(append([]G.SolverOpt{G.WithLearnRate(0.1)}, o...)...)
		},
		func(o ...G.SolverOpt) G.Solver {
			return G.NewAdamSolver(append([]G.SolverOpt{G.WithLearnRate(0.01)}, o...)...)
		},
		func(o ...G.SolverOpt) G.Solver {
			return G.NewRMSPropSolver(append([]G.SolverOpt{G.WithLearnRate(0.01)}, o...)...)
		},
		func(o ...G.SolverOpt) G.Solver {
			return G.NewAdaGradSolver(append([]G.SolverOpt{G.WithLearnRate(0.1)}, o...)...)
		},
	} {
		for bits := range 16 {
			var opts []G.SolverOpt
			for i, o := range []G.SolverOpt{G.WithL1Reg(0.01), G.WithL2Reg(0.02), G.WithBatchSize(4), G.WithClip(0.5)} {
				if bits&(1<<i) != 0 {
					opts = append(opts, o)
				}
			}
			s, err := fusion.NewSolver(nil, mk(opts...))
			if err != nil {
				t.Fatal(err)
			}
			ks, err := s.Kernels()
			if err != nil {
				t.Fatal(err)
			}
			out[ks[0].Name] = func() G.Solver { return mk(opts...) }
		}
	}
	return out
}

// tensorParam is a parameter outside any graph: a value and a gradient.
type tensorParam struct{ w, g *tensor.Dense }

func (p tensorParam) Value() G.Value         { return p.w }
func (p tensorParam) Grad() (G.Value, error) { return p.g, nil }

// TestSolverKernels steps every solver kernel (each solver, each
// combination of options) over tensors of 1, 1000 (within one program) and
// 2500 elements (three programs, the last partly masked), float32 and
// float64, three steps against the Gorgonia solver on copies: values and
// state within the tolerances of TestSolverMatchesGorgonia, gradients
// zeroed, and the poisoned elements just past each tensor's end (its
// backing array is longer) untouched.
func TestSolverKernels(t *testing.T) {
	sizes := []int{1, 1000, 2500}
	if testing.Short() {
		sizes = sizes[2:] // -short (the race run): the multi-program size
	}
	for name, mk := range solverConfigs(t) {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			tol := 1e-13
			if dt == tensor.Float32 {
				tol = 1e-5
			}
			for _, n := range sizes {
				t.Run(fmt.Sprintf("%s/%v/%d", name, dt, n), func(t *testing.T) {
					solverKernelAgainstGorgonia(t, mk, n, dt, tol, nil)
				})
			}
		}
	}
}

// solverKernelAgainstGorgonia is one case of TestSolverKernels; launch, if
// not nil, runs the fused solver's kernels.
func solverKernelAgainstGorgonia(t *testing.T, mk func() G.Solver, n int, dt tensor.Dtype, tol float64, launch launcher) {
	t.Helper()
	const pad = 5
	poison := -7.25e3
	rng := rand.New(rand.NewPCG(uint64(n), 11))
	// padded backing arrays, [n values | pad poison]; the
	// tensors hold the first n
	var pads []any
	buf := func(scale float64) *tensor.Dense {
		v := make([]float64, n+pad)
		for i := range v {
			v[i] = poison
			if i < n {
				v[i] = scale * rng.NormFloat64()
			}
		}
		if dt == tensor.Float32 {
			f := make([]float32, len(v))
			for i, x := range v {
				f[i] = float32(x)
			}
			pads = append(pads, f)
			return tensor.New(tensor.WithShape(n), tensor.WithBacking(f[:n]))
		}
		pads = append(pads, v)
		return tensor.New(tensor.WithShape(n), tensor.WithBacking(v[:n]))
	}
	w := buf(1)
	ref := tensorParam{w.Clone().(*tensor.Dense), nil}
	p := tensorParam{w, nil}
	gs := mk()
	s, err := fusion.NewSolver(nil, mk())
	if err != nil {
		t.Fatal(err)
	}
	for step := range 3 {
		p.g = buf(0.3)
		ref.g = p.g.Clone().(*tensor.Dense)
		if err := gs.Step([]G.ValueGrad{ref}); err != nil {
			t.Fatal(err)
		}
		if err := s.Step([]G.ValueGrad{p}); err != nil {
			t.Fatal(err)
		}
		closeTensors(t, step, "w", tol, floats(ref.w), floats(p.w))
		for i, x := range floats(p.g) {
			if x != 0 {
				t.Fatalf("step %d: g[%d] = %v after Step, want 0", step, i, x)
			}
		}
		for _, b := range pads {
			var past []float64
			switch b := b.(type) {
			case []float32:
				for _, x := range b[n:] {
					past = append(past, float64(x))
				}
			case []float64:
				past = b[n:]
			}
			for i, x := range past {
				if x != poison {
					t.Fatalf("step %d: element %d past the end is %v, want the poison %v", step, n+i, x, poison)
				}
			}
		}
		got, err := s.State(0)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range gorgoniaState(t, gs, 0) {
			closeTensors(t, step, fmt.Sprintf("state %d", i), tol, floats(want), floats(got[i]))
		}
	}
}

// TestSolverKernelsPTX lowers every solver kernel (each solver, each
// combination of options, float32 and float64) to PTX for sm_80 and sm_90
// and assembles them with ptxas where it is installed (required under
// TILEFUSE_REQUIRE_PTXAS=1, as in CI): all kernels of a target in one
// module, one ptxas run per target.
func TestSolverKernelsPTX(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the full run lowers and assembles the solver kernels")
	}
	ptxas, err := exec.LookPath("ptxas")
	if err != nil && os.Getenv("TILEFUSE_REQUIRE_PTXAS") != "" {
		t.Fatalf("ptxas is required (TILEFUSE_REQUIRE_PTXAS is set) but not found: %v", err)
	}
	configs := solverConfigs(t)
	n := 0
	for _, arch := range []int{80, 90} {
		var module strings.Builder
		for _, mk := range configs {
			s, err := fusion.NewSolver(nil, mk())
			if err != nil {
				t.Fatal(err)
			}
			ks, err := s.Kernels()
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range ks {
				ck, err := codegen.Compile(k, codegen.Options{Arch: arch})
				if err != nil {
					t.Errorf("%s sm_%d: %v", k.Name, arch, err)
					continue
				}
				n++
				ptx := ck.PTX
				if module.Len() > 0 { // one header per module
					const addr = ".address_size 64\n"
					i := strings.Index(ptx, addr)
					if i < 0 {
						t.Fatalf("%s: no %q line in its PTX", k.Name, addr)
					}
					ptx = fmt.Sprintf("// %s\n%s", k.Name, ptx[i+len(addr):])
				}
				module.WriteString(ptx)
			}
		}
		if ptxas == "" {
			continue
		}
		file := filepath.Join(t.TempDir(), fmt.Sprintf("solvers_sm%d.ptx", arch))
		if err := os.WriteFile(file, []byte(module.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(ptxas, fmt.Sprintf("-arch=sm_%d", arch), "-o", os.DevNull, file).CombinedOutput(); err != nil {
			t.Errorf("sm_%d: ptxas: %v\n%s", arch, err, out)
		}
	}
	if ptxas == "" {
		t.Skipf("lowered %d solver kernels to PTX; ptxas not found: install the CUDA toolkit (see README) to assemble them", n)
	}
	t.Logf("%d solver kernels lowered and assembled", n)
}
