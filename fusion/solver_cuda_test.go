//go:build tilefuse_cuda

package fusion_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/cuda"
	"github.com/tilefuse/tilefuse/fusion"
)

// TestSolverOnGPU runs the fused solvers' kernels on the GPU (parameters,
// gradients and state through host buffers: cuda.Launcher), against
// Gorgonia's solver: the MLP's 100 steps of Adam, RMSProp and Momentum
// and the shorter cases, float32 and float64. Tolerances (as in
// TestSolverMatchesGorgonia, max over each tensor): 1e-10 and 1e-4, looser
// than on the CPU because ptxas may contract PTX's mul and add into fused
// multiply-adds, one rounding less per step, which the solvers carry.
func TestSolverOnGPU(t *testing.T) {
	dev, err := cuda.Open(0)
	if err != nil {
		t.Fatalf("no usable GPU: %v", err)
	}
	defer dev.Close()
	gpu := &cuda.Launcher{Dev: dev, NumWarps: 4}
	for _, c := range solverCases() {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			tol := 1e-10
			if dt == tensor.Float32 {
				tol = 1e-4
			}
			t.Run(c.name+"/"+dt.String(), func(t *testing.T) {
				solverAgainstGorgonia(t, c.new, c.steps, dt, tol, gpu)
			})
		}
	}
}

// TestSolverKernelsOnGPU runs every solver kernel shape on the GPU over
// 1, 1000 and 2500 elements (poison past the end), three steps against
// Gorgonia's solver; tolerances 1e-12 and 1e-5 (one step's contraction).
// scripts/gpu-run.sh runs it under compute-sanitizer memcheck too.
func TestSolverKernelsOnGPU(t *testing.T) {
	dev, err := cuda.Open(0)
	if err != nil {
		t.Fatalf("no usable GPU: %v", err)
	}
	defer dev.Close()
	gpu := &cuda.Launcher{Dev: dev, NumWarps: 4}
	for name, mk := range solverConfigs(t) {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			tol := 1e-12
			if dt == tensor.Float32 {
				tol = 1e-5
			}
			for _, n := range []int{1, 1000, 2500} {
				t.Run(fmt.Sprintf("%s/%v/%d", name, dt, n), func(t *testing.T) {
					solverKernelAgainstGorgonia(t, mk, n, dt, tol, gpu)
				})
			}
		}
	}
}

// TestSolverResidentOnGPU is the training loop on the CUDA backend with the
// fused solver of the machine: the learnables and the optimizer state stay
// on the device, stepped there. Against Gorgonia's machine and solver, 100
// steps of Adam, RMSProp and Momentum, float32 and float64: the losses at
// every step, and the parameters and state after m.Sync() every tenth step
// and after Close (tolerances as in TestSolverOnGPU). Between syncs, a run
// uploads the batch only (Stats counts the copies), and a parameter Let
// anew goes up at the next run.
func TestSolverResidentOnGPU(t *testing.T) {
	if err := fusion.Available(fusion.CUDA); err != nil {
		t.Fatal(err)
	}
	for _, c := range solverCases() {
		if c.steps < 100 {
			continue
		}
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			tol := 1e-10
			if dt == tensor.Float32 {
				tol = 1e-4
			}
			t.Run(c.name+"/"+dt.String(), func(t *testing.T) {
				ref, fused := newMLP(t, dt, 8, 5, 17, 3, 3), newMLP(t, dt, 8, 5, 17, 3, 3)
				vmRef := G.NewTapeMachine(ref.g)
				defer vmRef.Close()
				vm := fusion.NewTapeMachine(fused.g, fusion.WithBackend(fusion.CUDA))
				if err := vm.Err(); err != nil {
					t.Fatal(err)
				}
				solRef := c.new()
				sol, err := fusion.NewSolver(vm, c.new())
				if err != nil {
					t.Fatal(err)
				}
				if sol.Backend() != fusion.CUDA {
					t.Fatalf("the solver runs on %v, want cuda", sol.Backend())
				}
				batchBytes := int64(8 * (5 + 3) * dt.Size())
				compare := func(step int) {
					t.Helper()
					for i, w := range ref.learnables {
						closeTensors(t, step, w.Name(), tol, floats(w.Value()), floats(fused.learnables[i].Value()))
						got, err := sol.State(i)
						if err != nil {
							t.Fatal(err)
						}
						for s, want := range gorgoniaState(t, solRef, i) {
							closeTensors(t, step, fmt.Sprintf("%s state %d", w.Name(), s), tol, floats(want), floats(got[s]))
						}
					}
				}
				rng := rand.New(rand.NewPCG(42, 42))
				for step := range c.steps {
					xv, yv := data(dt, rng, 8, 5), data(dt, rng, 8, 3)
					for _, m := range []*mlp{ref, fused} {
						G.Let(m.x, xv)
						G.Let(m.y, yv)
					}
					if err := vmRef.RunAll(); err != nil {
						t.Fatal(err)
					}
					if err := vm.RunAll(); err != nil {
						t.Fatal(err)
					}
					switch st := vm.Stats(); {
					case step >= 2 && step%10 != 1 && (st.Uploads != 2 || st.BytesUp != batchBytes):
						t.Fatalf("step %d: %d uploads of %d bytes, want the batch only (2, %d bytes)", step, st.Uploads, st.BytesUp, batchBytes)
					case step%10 == 1 && st.Uploads != 3:
						t.Fatalf("step %d: %d uploads, want the batch and w2, let anew (3)", step, st.Uploads)
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
					if step%10 == 0 {
						if err := vm.Sync(); err != nil {
							t.Fatal(err)
						}
						compare(step)
						// a parameter let anew goes up at the next run
						w := fused.w2.Value().(tensor.Tensor).Clone().(tensor.Tensor)
						G.Let(fused.w2, w)
					}
					vmRef.Reset()
					vm.Reset()
				}
				if err := vm.Close(); err != nil {
					t.Fatal(err)
				}
				for i, w := range ref.learnables { // Close brought them up to date
					closeTensors(t, c.steps, w.Name(), tol, floats(w.Value()), floats(fused.learnables[i].Value()))
				}
				if err := sol.Step(G.NodesToValueGrads(fused.learnables)); err == nil {
					t.Error("Step after the machine's Close: no error")
				}
			})
		}
	}
}

// TestSolverResidentErrorsOnGPU: on the CUDA backend the learnables must be
// inputs of the machine's graph with a gradient there.
func TestSolverResidentErrorsOnGPU(t *testing.T) {
	m := newMLP(t, tensor.Float32, 8, 5, 17, 3, 3)
	vm := fusion.NewTapeMachine(m.g, fusion.WithBackend(fusion.CUDA))
	defer vm.Close()
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	G.Let(m.x, data(tensor.Float32, rng, 8, 5))
	G.Let(m.y, data(tensor.Float32, rng, 8, 3))
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		model G.Nodes
		want  string
	}{
		{"not an input", G.Nodes{m.w1, m.w1.Deriv()}, "is not an input of the machine's graph"},
		{"no gradient", G.Nodes{m.w1, m.x}, "has no gradient on the device"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := fusion.NewSolver(vm, G.NewAdamSolver())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Step(G.NodesToValueGrads(c.model)); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v, want an error containing %q", err, c.want)
			}
		})
	}
}
