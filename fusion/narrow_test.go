package fusion_test

import (
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
)

// TestNarrowReductionsNative: sums and maxima down the columns of fewer
// than 8 columns (a bias's gradient over 3 classes) take blocks of 8
// lanes, masked past the columns, on a CPU whose kernels are machine code
// (graphpass minColumnLanes), where blocks of 4 or 2 ran on the executor;
// float64 rows of 1 or 2 (a LogSoftMax over two classes, a sum of pairs)
// blocks of 4 (minRowF64), where blocks of 1 and 2 did; fused and
// unfused, float32 and float64, 2-D and 3-D (the leading axes merged),
// rows no multiple of the block. Every kernel is
// machine code, none falls back when run, and the values are Gorgonia's
// within 1e-6 (float32) and 1e-12 (float64) of |want| + 1.
func TestNarrowReductionsNative(t *testing.T) {
	needMachineCode(t, "")
	for _, c := range []struct {
		name  string
		dt    tensor.Dtype
		shape []int
		op    func(x *G.Node) (*G.Node, error)
	}{
		{"sum of 3 columns, float32", tensor.Float32, []int{1001, 3}, func(x *G.Node) (*G.Node, error) { return G.Sum(x, 0) }},
		{"sum of 4 columns, float64", tensor.Float64, []int{77, 4}, func(x *G.Node) (*G.Node, error) { return G.Sum(x, 0) }},
		{"sum over two leading axes of 2 columns", tensor.Float32, []int{9, 13, 2}, func(x *G.Node) (*G.Node, error) { return G.Sum(x, 0, 1) }},
		{"max of 3 columns, float64", tensor.Float64, []int{300, 3}, func(x *G.Node) (*G.Node, error) { return G.Max(x, 0) }},
		{"sums of pairs, float64", tensor.Float64, []int{50, 2}, func(x *G.Node) (*G.Node, error) { return G.Sum(x, 1) }},
		{"log-softmax over two classes, float64", tensor.Float64, []int{37, 2}, func(x *G.Node) (*G.Node, error) { return G.LogSoftMax(x) }},
	} {
		forModes(t, c.name, func(t *testing.T, fused bool) {
			build := func(g *G.ExprGraph) (*G.Node, *G.Node) {
				x := G.NewTensor(g, c.dt, len(c.shape), G.WithShape(c.shape...), G.WithName("x"))
				return x, G.Must(c.op(G.Must(G.Tanh(x))))
			}
			tol := 1e-12
			if c.dt == tensor.Float32 {
				tol = 1e-6
			}
			nativeTwinOne(t, fused, 8, 3, tol, build)
		})
	}
}

// TestRetiledForMachineCode: a reduction whose input reads through a
// transpose merged with another axis (a row r of the sum at (r mod d,
// r div d) of the transpose) divides its block's lanes, which the machine
// code declines; the kernel is written again narrower (fusion
// retileForMachineCode: graphpass.Narrower, a block of outputs within one
// quotient) and runs as machine code, where it ran on the executor. Fused
// (the transpose, the reshape and the sum one kernel), float32 and
// float64, rows and columns no multiple of a block; every kernel machine
// code, none falls back when run, the values Gorgonia's within 1e-5
// (float32) and 1e-12 (float64) of |want| + 1.
func TestRetiledForMachineCode(t *testing.T) {
	needMachineCode(t, "")
	for _, c := range []struct {
		name  string
		dt    tensor.Dtype
		tol   float64
		build func(g *G.ExprGraph, dt tensor.Dtype) (in, out *G.Node)
	}{
		{"row sums of a transpose merged with the rows, float32", tensor.Float32, 1e-5, func(g *G.ExprGraph, dt tensor.Dtype) (*G.Node, *G.Node) {
			x := G.NewTensor(g, dt, 3, G.WithShape(17, 61, 4), G.WithName("x"))
			r := G.Must(G.Reshape(G.Must(G.Transpose(x, 0, 2, 1)), tensor.Shape{68, 61}))
			return x, G.Must(G.Sum(r, 1))
		}},
		{"row sums of a transpose merged with the rows, float64", tensor.Float64, 1e-12, func(g *G.ExprGraph, dt tensor.Dtype) (*G.Node, *G.Node) {
			x := G.NewTensor(g, dt, 3, G.WithShape(9, 37, 3), G.WithName("x"))
			r := G.Must(G.Reshape(G.Must(G.Transpose(x, 0, 2, 1)), tensor.Shape{27, 37}))
			return x, G.Must(G.Sum(G.Must(G.Exp(r)), 1))
		}},
		{"maxima of rows of a transpose, float32", tensor.Float32, 0, func(g *G.ExprGraph, dt tensor.Dtype) (*G.Node, *G.Node) {
			x := G.NewTensor(g, dt, 3, G.WithShape(5, 100, 6), G.WithName("x"))
			r := G.Must(G.Reshape(G.Must(G.Transpose(x, 0, 2, 1)), tensor.Shape{30, 100}))
			return x, G.Must(G.Max(r, 1))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			nativeTwinOne(t, true, 5, 5, c.tol, func(g *G.ExprGraph) (*G.Node, *G.Node) { return c.build(g, c.dt) })
		})
	}
}

// TestInnerWholeReductions: reductions over axes that are not one run
// (NCHW's per-channel sums over N, H and W; three separate runs of a 5-D
// input) hold the last reduced axis whole in the tile's lanes and walk
// the others one index at a time on a CPU whose kernels are machine code
// (graphpass innerWhole: INNER), where the flat form's blocks crossed the
// last axis's boundary and every launch went to the executor (or the
// machine code declined the kernel). Fused with a producer and alone,
// float32 and float64, last axes no block's multiple (63, 100, 7, 4); every
// kernel machine code, none falls back when run, the values Gorgonia's
// within 1e-5 (float32) and 1e-12 (float64) of |want| + 1, maxima bit for
// bit.
func TestInnerWholeReductions(t *testing.T) {
	needMachineCode(t, "")
	for _, c := range []struct {
		name  string
		dt    tensor.Dtype
		shape []int
		axes  []int
		op    func(x *G.Node, axes ...int) (*G.Node, error)
		pre   func(x *G.Node) (*G.Node, error) // nil: the input itself
		tol   float64
	}{
		{"NCHW sums over N, H and W, float32", tensor.Float32, []int{6, 5, 7, 9}, []int{0, 2, 3}, G.Sum, nil, 1e-5},
		{"NCHW sums of squares over N, H and W, float64", tensor.Float64, []int{3, 11, 10, 10}, []int{0, 2, 3}, G.Sum, G.Square, 1e-12},
		{"sums over axes 0 and 2 of an axis of 4, float64", tensor.Float64, []int{127, 17, 4}, []int{0, 2}, G.Sum, nil, 1e-12},
		{"maxima over axes 0 and 2, float32", tensor.Float32, []int{8, 16, 100}, []int{0, 2}, G.Max, nil, 0},
		{"sums over axes 0, 2 and 4 of five, float32", tensor.Float32, []int{3, 4, 5, 6, 7}, []int{0, 2, 4}, G.Sum, G.Exp, 1e-5},
	} {
		t.Run(c.name, func(t *testing.T) {
			build := func(g *G.ExprGraph) (*G.Node, *G.Node) {
				x := G.NewTensor(g, c.dt, len(c.shape), G.WithShape(c.shape...), G.WithName("x"))
				y := x
				if c.pre != nil {
					y = G.Must(c.pre(x))
				}
				return x, G.Must(c.op(y, c.axes...))
			}
			nativeTwinOne(t, true, 6, 6, c.tol, build)
		})
	}
}

// nativeTwinOne builds a one-input graph twice (build), gives both inputs
// the same seeded values, runs Gorgonia's machine on one and a fused (or
// unfused) machine whose kernels must all be machine code on the other
// (nativeTwinRun: none falls back when run), and compares the outputs
// within tol (sameAsGorgonia).
func nativeTwinOne(t *testing.T, fused bool, seed1, seed2 uint64, tol float64, build func(g *G.ExprGraph) (in, out *G.Node)) {
	t.Helper()
	gRef, g := G.NewGraph(), G.NewGraph()
	inRef, outRef := build(gRef)
	in, out := build(g)
	letTwins(t, rand.New(rand.NewPCG(seed1, seed2)), []*G.Node{inRef}, []*G.Node{in}, nil)
	nativeTwinRun(t, gRef, g, fused)
	sameAsGorgonia(t, "out", out, outRef, tol)
}

// TestExecutorLaunchesCounted: a machine counts the launches of its
// kernels that are machine code but that the machine code hands to the
// executor at run time (Stats.ExecutorLaunches): a sum over axes 0 and 2
// whose last axis (5000) is longer than the CPU holds whole (graphpass
// innerWhole), so that its flat blocks of 1024 cross multiples of 5000,
// which the machine code checks as each block starts: one such launch a
// run, the values still Gorgonia's; none for NCHW's sums, whose last axis
// the kernel holds whole, nor where machine code is off (the executor by
// choice, not a hand-off).
func TestExecutorLaunchesCounted(t *testing.T) {
	needMachineCode(t, "")
	for _, c := range []struct {
		name   string
		shape  []int
		axes   []int
		native bool
		want   int // a run
	}{
		{"a last reduced axis of 5000", []int{2, 3, 5000}, []int{0, 2}, true, 1},
		{"NCHW's sums, the last axis whole", []int{6, 5, 7, 9}, []int{0, 2, 3}, true, 0},
		{"a last reduced axis of 5000, machine code off", []int{2, 3, 5000}, []int{0, 2}, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			build := func(g *G.ExprGraph) (*G.Node, *G.Node) {
				x := G.NewTensor(g, tensor.Float32, len(c.shape), G.WithShape(c.shape...), G.WithName("x"))
				return x, G.Must(G.Sum(x, c.axes...))
			}
			gRef, g := G.NewGraph(), G.NewGraph()
			inRef, outRef := build(gRef)
			in, out := build(g)
			letTwins(t, rand.New(rand.NewPCG(7, 7)), []*G.Node{inRef}, []*G.Node{in}, nil)
			vm := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CPU), fusion.WithNativeCPU(c.native))
			defer vm.Close()
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			for run := 1; run <= 2; run++ {
				runTwins(t, gRef, vm)
				if got := vm.Stats().ExecutorLaunches; got != run*c.want {
					t.Fatalf("after run %d: %d launches handed to the executor, want %d\n%v", run, got, run*c.want, vm.Report())
				}
			}
			sameAsGorgonia(t, "out", out, outRef, 1e-4)
		})
	}
}
