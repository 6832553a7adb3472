//go:build tilefuse_cuda

package fusion_test

import (
	"fmt"
	"hash"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
)

// TestCUDAGraphsTrainingOnGPU trains the same MLP (300×777 batch,
// float32: sizes off every block; the loss poisoned with NaN before each run) for 20 steps with the fused Adam on two
// machines, WithCUDAGraphs on and off, each step a new batch let into
// both: the losses and, after Sync, the learnables and their gradients
// agree within 1e-5·(1+|b|) (the same kernels in the same order: they
// differ at most where a kernel accumulates with atomics). Stats count the
// launches: with graphs a step replays at most two graphs (cut after the
// last kernel that writes a readable value, where kernels follow it: its
// copy down starts before theirs) and launches the solver's kernel;
// without, every kernel of the run is a launch of its own. Machine.DeviceTimes replays the graph too, and Stats.SolverDeviceTime
// times the solver's kernels.
func TestCUDAGraphsTrainingOnGPU(t *testing.T) {
	if err := fusion.Available(fusion.CUDA); err != nil {
		t.Fatal(err)
	}
	const batch, in, hidden, out, steps = 300, 777, 65, 10, 20
	const tol = 1e-5
	dt := tensor.Float32
	type run struct {
		m   *mlp
		vm  *fusion.Machine
		sol *fusion.Solver
	}
	var runs [2]run
	for i, graphs := range []bool{false, true} {
		m := newMLP(t, dt, batch, in, hidden, out, 5) // the same start for both
		vm := fusion.NewTapeMachine(m.g, fusion.WithBackend(fusion.CUDA), fusion.WithCUDAGraphs(graphs))
		if err := vm.Err(); err != nil {
			t.Fatalf("graphs %v: %v", graphs, err)
		}
		defer vm.Close()
		sol, err := fusion.NewSolver(vm, G.NewAdamSolver(G.WithLearnRate(1e-3)))
		if err != nil {
			t.Fatal(err)
		}
		defer sol.Close()
		runs[i] = run{m, vm, sol}
	}
	rng := rand.New(rand.NewPCG(3, 14))
	for s := range steps {
		xv, yv := data(dt, rng, batch, in), data(dt, rng, batch, out)
		var loss [2]float64
		var st [2]fusion.Stats
		for i, r := range runs {
			x, y := xv, yv
			if i > 0 {
				x, y = xv.Clone().(tensor.Tensor), yv.Clone().(tensor.Tensor)
			}
			G.Let(r.m.x, x)
			G.Let(r.m.y, y)
			if err := G.UnsafeLet(r.m.loss, G.NewF32(float32(math.NaN()))); err != nil { // poison: the run writes it
				t.Fatal(err)
			}
			if err := r.vm.RunAll(); err != nil {
				t.Fatalf("step %d, graphs %v: %v", s, i == 1, err)
			}
			if err := r.sol.Step(G.NodesToValueGrads(r.m.learnables)); err != nil {
				t.Fatal(err)
			}
			loss[i] = scalar(r.m.loss.Value())
			st[i] = r.vm.Stats()
			r.vm.Reset()
		}
		if math.IsNaN(loss[0]) || !(math.Abs(loss[1]-loss[0]) <= tol*(1+math.Abs(loss[0]))) {
			t.Fatalf("step %d: loss %v with graphs, %v without", s, loss[1], loss[0])
		}
		off, on := st[0], st[1]
		if s == 0 {
			t.Logf("a step without graphs: %d launches; with: %d graph replays and %d launches", off.Launches, on.GraphLaunches, on.Launches)
		}
		if on.GraphLaunches < 1 || on.GraphLaunches > 2 || on.Launches != 1 {
			t.Fatalf("step %d with graphs: %d graph replays and %d launches, want 1 or 2 (the run cut after the last kernel whose value goes down, where kernels follow it) and the solver's one (every float32 learnable in one multi-tensor launch)", s, on.GraphLaunches, on.Launches)
		}
		if off.GraphLaunches != 0 || off.Launches <= 2 {
			t.Fatalf("step %d without graphs: %d graph replays and %d launches, want 0 and a launch per kernel and solver kernel", s, off.GraphLaunches, off.Launches)
		}
		if !(on.SolverDeviceTime > 0) || !(off.SolverDeviceTime > 0) {
			t.Fatalf("step %d: the solver's device time %v with graphs, %v without", s, on.SolverDeviceTime, off.SolverDeviceTime)
		}
		for _, p := range []fusion.RunPhases{on.Phases, off.Phases} {
			if !(p.Upload > 0 && p.Launch > 0 && p.Wait >= 0 && p.Download > 0 && p.Solver > 0) {
				t.Fatalf("step %d: phases of the run %+v: a batch went up, kernels ran, the loss came down and the solver stepped", s, p)
			}
		}
		if on.Uploads != off.Uploads || on.BytesDown != off.BytesDown {
			t.Fatalf("step %d: copies differ: %+v with graphs, %+v without", s, on, off)
		}
	}
	for _, r := range runs {
		if err := r.vm.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	for j, w := range runs[0].m.learnables {
		w1 := runs[1].m.learnables[j]
		if w.Deriv() == nil || w1.Deriv() == nil {
			t.Fatalf("%s has no gradient node", w.Name())
		}
		for _, c := range []struct {
			what      string
			off, with G.Value
		}{{w.Name(), w.Value(), w1.Value()}, {"the gradient of " + w.Name(), w.Deriv().Value(), w1.Deriv().Value()}} {
			want, got := floats(c.off), floats(c.with)
			if len(want) != len(got) || len(want) == 0 {
				t.Fatalf("%s: %d values with graphs, %d without", c.what, len(got), len(want))
			}
			for k := range want {
				if !(math.Abs(got[k]-want[k]) <= tol*(1+math.Abs(want[k]))) {
					t.Fatalf("%s [%d] after %d steps: %v with graphs, %v without", c.what, k, steps, got[k], want[k])
				}
			}
		}
	}
	times, ok, err := runs[1].vm.DeviceTimes(5, 0)
	if err != nil || !ok || len(times) != 5 {
		t.Fatalf("DeviceTimes with graphs: %v, %v, %v", times, ok, err)
	}
	for _, s := range times {
		if !(s > 0) {
			t.Fatalf("DeviceTimes with graphs: %v", times)
		}
	}
}

// halve is a user's op tilefuse does not know (x/2 elementwise, float64):
// the CUDA backend runs it on the CPU between kernels.
type halve struct{}

func (halve) Arity() int { return 1 }
func (halve) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a)
}
func (halve) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}
func (halve) Do(vs ...G.Value) (G.Value, error) {
	x, ok := vs[0].(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("halve: %T", vs[0])
	}
	src := x.Data().([]float64)
	dst := make([]float64, len(src))
	for i, v := range src {
		dst[i] = v / 2
	}
	return tensor.New(tensor.WithShape(x.Shape().Clone()...), tensor.WithBacking(dst)), nil
}
func (halve) ReturnsPtr() bool      { return false }
func (halve) CallsExtern() bool     { return false }
func (halve) OverwritesInput() int  { return -1 }
func (halve) WriteHash(h hash.Hash) { fmt.Fprint(h, "halve") }
func (p halve) Hashcode() uint32 {
	h := fnv.New32a()
	p.WriteHash(h)
	return h.Sum32()
}
func (halve) String() string { return "halve" }

// TestCUDAGraphsHostOpOnGPU: a run whose kernels are split by an op on the
// CPU (sum(tanh(halve(exp(x)·1.5)))) replays the kernels before it and
// after it as two graphs, the op between them reading the first's result
// and the second reading the op's; the sum agrees with float64 on the host
// (1e-12·(1+|b|)) and with the machine without graphs, for three batches of
// 37×53 (poisoned: the result node holds NaN before each run).
func TestCUDAGraphsHostOpOnGPU(t *testing.T) {
	if err := fusion.Available(fusion.CUDA); err != nil {
		t.Fatal(err)
	}
	const rows, cols, tol = 37, 53, 1e-12
	for _, graphs := range []bool{false, true} {
		t.Run(fmt.Sprintf("graphs=%v", graphs), func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float64, G.WithShape(rows, cols), G.WithName("x"))
			e := G.Must(G.Mul(G.Must(G.Exp(x)), G.NewConstant(1.5)))
			s := G.Must(G.Sum(G.Must(G.Tanh(G.Must(G.ApplyOp(halve{}, e))))))
			vm := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CUDA), fusion.WithCUDAGraphs(graphs))
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			defer vm.Close()
			rng := rand.New(rand.NewPCG(8, uint64(rows)))
			for r := range 3 {
				xv := data(tensor.Float64, rng, rows, cols)
				want := 0.0
				for _, v := range xv.Data().([]float64) {
					want += math.Tanh(math.Exp(v) * 1.5 / 2)
				}
				G.Let(x, xv)
				if err := G.UnsafeLet(s, G.NewF64(math.NaN())); err != nil { // poison: the run writes it
					t.Fatal(err)
				}
				if err := vm.RunAll(); err != nil {
					t.Fatalf("run %d: %v", r, err)
				}
				if got := scalar(s.Value()); !(math.Abs(got-want) <= tol*(1+math.Abs(want))) {
					t.Fatalf("run %d: %v, want %v", r, got, want)
				}
				st := vm.Stats()
				if st.HostOps != 1 {
					t.Fatalf("run %d: %d host ops, want 1", r, st.HostOps)
				}
				if graphs && (st.GraphLaunches != 2 || st.Launches != 0) {
					t.Fatalf("run %d: %d graph replays and %d launches, want 2 (before and after the host op) and 0", r, st.GraphLaunches, st.Launches)
				}
				if !graphs && (st.GraphLaunches != 0 || st.Launches < 2) {
					t.Fatalf("run %d: %d graph replays and %d launches, want 0 and a launch per kernel (at least 2)", r, st.GraphLaunches, st.Launches)
				}
				vm.Reset()
			}
		})
	}
}
