package fusion_test

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
)

// Bugs FuzzFusion found, each as a plain test of the smallest graph that
// shows it (the fuzzer's own inputs are in testdata/fuzz/FuzzFusion).

// TestRowKernelReadsAPerRowValue: the backward of a softmax whose output is
// reduced along its rows fuses into a row kernel that reads a per-row value
// of another kernel at the row's index (one scalar per program). Its load
// took the row's lane mask (rows not a multiple of the block) and failed to
// compile: "broadcast: cannot broadcast tensor<128xi1> to i1".
func TestRowKernelReadsAPerRowValue(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		t.Run(dt.String(), func(t *testing.T) {
			build := func() (*G.ExprGraph, *G.Node, *G.Node, G.Nodes) {
				g := G.NewGraph()
				x := G.NewMatrix(g, dt, G.WithShape(5, 100), G.WithName("x"))
				y := G.Must(G.SoftMax(x))
				z := G.Must(G.BroadcastSub(y, G.Must(G.Max(y, 1)), nil, []byte{1}))
				loss := G.Must(G.Sum(G.Must(G.Square(G.Must(G.Exp(z))))))
				grads, err := G.Grad(loss, x)
				if err != nil {
					t.Fatal(err)
				}
				return g, x, loss, grads
			}
			rng := rand.New(rand.NewPCG(3, 3))
			xv := data(dt, rng, 5, 100)
			gRef, xRef, lossRef, gradRef := build()
			g, x, loss, grad := build()
			G.Let(xRef, xv)
			G.Let(x, xv.Clone())
			vmRef := G.NewTapeMachine(gRef)
			defer vmRef.Close()
			vm := fusion.NewTapeMachine(g)
			defer vm.Close()
			if err := vmRef.RunAll(); err != nil {
				t.Fatal(err)
			}
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			tol := 1e-12
			if dt == tensor.Float32 {
				tol = 1e-5
			}
			if a, b := scalar(lossRef.Value()), scalar(loss.Value()); math.Abs(a-b) > tol*math.Abs(a) {
				t.Fatalf("loss %v fused, %v in Gorgonia", b, a)
			}
			closeTo(t, "∂loss/∂x", floats(grad[0].Value()), floats(gradRef[0].Value()), tol)
		})
	}
}

// TestColumnVectorSoftmaxIsGorgonias: Gorgonia's SoftMax takes an (n, 1)
// matrix along axis 0 (a column vector), not along its rows of one; the
// fused machine gave 1 everywhere. Such a softmax is left to Gorgonia, and
// so is its backward (which Gorgonia takes along the last axis: its own,
// inconsistent, gradient).
func TestColumnVectorSoftmaxIsGorgonias(t *testing.T) {
	for _, log := range []bool{false, true} {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 1), G.WithName("x"))
		sm := G.SoftMax
		if log {
			sm = G.LogSoftMax
		}
		y := G.Must(sm(x))
		G.Must(G.Sum(y))
		vm := fusion.NewTapeMachine(g, fusion.WithKeep(y))
		defer vm.Close()
		G.Let(x, tensor.New(tensor.WithShape(4, 1), tensor.WithBacking([]float64{0, 1, 2, 3})))
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		want := make([]float64, 4)
		s := 0.0
		for i := range want {
			s += math.Exp(float64(i))
		}
		for i := range want {
			want[i] = math.Exp(float64(i)) / s
			if log {
				want[i] = float64(i) - math.Log(s)
			}
		}
		closeTo(t, "softmax along axis 0", floats(y.Value()), want, 1e-12)
	}
}

// TestLoopedRowKernelTakesNoExtraOutput: a softmax over a row longer than
// a row kernel holds in one block, read by the user (or by another kernel),
// was made an extra output of its user's elementwise kernel, which it then
// turned into a looped row kernel, and looped row kernels write one output:
// "extra outputs in a row group". It is a kernel of its own now.
func TestLoopedRowKernelTakesNoExtraOutput(t *testing.T) {
	const n = 9000
	g := G.NewGraph()
	x := G.NewVector(g, tensor.Float64, G.WithShape(n), G.WithName("x"))
	sm := G.Must(G.SoftMax(x))
	sq := G.Must(G.Square(sm))
	vm := fusion.NewTapeMachine(g, fusion.WithKeep(sm))
	defer vm.Close()
	rng := rand.New(rand.NewPCG(9, 0))
	xv := make([]float64, n)
	for i := range xv {
		xv[i] = rng.Float64()*2 - 1
	}
	G.Let(x, tensor.New(tensor.WithShape(n), tensor.WithBacking(xv)))
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	want, wantSq := softmaxRef(xv, 1, n), make([]float64, n)
	for i, p := range want {
		wantSq[i] = p * p
	}
	closeTo(t, "softmax", floats(sm.Value()), want, 1e-12)
	closeTo(t, "its square", floats(sq.Value()), wantSq, 1e-12)
}

// TestConcatOfOnesBackward: the backward of a Concat along an axis where an
// operand has size 1 slices a range of one, which Gorgonia's slice gives as
// a scalar for a node of shape (1, 1); Gorgonia's machine goes on, the
// fused machine stopped: "Node's expected shape is (1). Got () instead".
// Such a value now takes its node's shape.
func TestConcatOfOnesBackward(t *testing.T) {
	for _, c := range []struct {
		name  string
		shape tensor.Shape
	}{{"(1, 1)", tensor.Shape{1, 1}}, {"(1, 3)", tensor.Shape{1, 3}}} {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			x0 := G.NewMatrix(g, tensor.Float64, G.WithShape(c.shape...), G.WithName("x0"))
			x1 := G.NewMatrix(g, tensor.Float64, G.WithShape(c.shape...), G.WithName("x1"))
			loss := G.Must(G.Sum(G.Must(G.Square(G.Must(G.Concat(0, x1, x0))))))
			grads, err := G.Grad(loss, x0, x1)
			if err != nil {
				t.Fatal(err)
			}
			for _, opts := range [][]fusion.Option{{fusion.WithFusion(false)}, nil} {
				vm := fusion.NewTapeMachine(g, opts...)
				defer vm.Close()
				v0 := []float64{0.5, -1, 2}[:c.shape.TotalSize()]
				v1 := []float64{-3, 0.25, 1}[:c.shape.TotalSize()]
				G.Let(x0, tensor.New(tensor.WithShape(c.shape...), tensor.WithBacking(append([]float64(nil), v0...))))
				G.Let(x1, tensor.New(tensor.WithShape(c.shape...), tensor.WithBacking(append([]float64(nil), v1...))))
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				want0, want1 := make([]float64, len(v0)), make([]float64, len(v1))
				for i := range v0 {
					want0[i], want1[i] = 2*v0[i], 2*v1[i]
				}
				closeTo(t, "∂loss/∂x0", floats(grads[0].Value()), want0, 1e-15)
				closeTo(t, "∂loss/∂x1", floats(grads[1].Value()), want1, 1e-15)
			}
		})
	}
}

// TestReshapesWithTwoOutputs: a kernel of reshapes alone shares its input's
// memory (a view, nothing copied); one with an extra output (a reshape of a
// reshape to the same shape, the inner one kept) stacks two outputs and
// cannot be a view, but was run as one: "Node's expected shape is (2, 144).
// Got (144) instead".
func TestReshapesWithTwoOutputs(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  func(inner *G.Node) fusion.Option
	}{{"WithKeep", func(inner *G.Node) fusion.Option { return fusion.WithKeep(inner) }},
		{"WithReadAll", func(*G.Node) fusion.Option { return fusion.WithReadAll(true) }}} {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float64, G.WithShape(12, 12), G.WithName("x"))
			inner := G.Must(G.Reshape(x, tensor.Shape{144}))
			outer := G.Must(G.Reshape(inner, tensor.Shape{144}))
			vm := fusion.NewTapeMachine(g, c.opt(inner))
			defer vm.Close()
			xv := make([]float64, 144)
			for i := range xv {
				xv[i] = float64(i) - 70.5
			}
			G.Let(x, tensor.New(tensor.WithShape(12, 12), tensor.WithBacking(append([]float64(nil), xv...))))
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			if s := inner.Value().Shape(); !s.Eq(tensor.Shape{144}) {
				t.Fatalf("inner shape %v", s)
			}
			if s := outer.Value().Shape(); !s.Eq(tensor.Shape{144}) {
				t.Fatalf("outer shape %v", s)
			}
			closeTo(t, "inner", floats(inner.Value()), xv, 0)
			closeTo(t, "outer", floats(outer.Value()), xv, 0)
		})
	}
}

// TestRowStatisticAlongTheOtherAxis: in a square x, a row's statistic (its
// sum, its variance) is also a vector of the columns' length, and a user
// may broadcast it along the other axis (a per-column gain). A row kernel
// computes the statistic once, for its own row, and read it there for
// every column: wrong values, without an error. Such a statistic is a
// kernel of its own now.
func TestRowStatisticAlongTheOtherAxis(t *testing.T) {
	const n = 37
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		t.Run(dt.String(), func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewMatrix(g, dt, G.WithShape(n, n), G.WithName("x"))
			s := G.Must(G.Sum(x, 1))                                            // s[i] = Σ_j x[i,j]
			y := G.Must(G.BroadcastHadamardProd(x, s, nil, []byte{0}))          // y[i,j] = x[i,j]·s[j]
			z := G.Must(G.BroadcastSub(y, G.Must(G.Max(y, 1)), nil, []byte{1})) // and a row op after it
			vm := fusion.NewTapeMachine(g, fusion.WithKeep(y))
			defer vm.Close()
			rng := rand.New(rand.NewPCG(37, 1))
			xv := data(dt, rng, n, n)
			G.Let(x, xv)
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			xd := floats(xv)
			want, wantZ := make([]float64, n*n), make([]float64, n*n)
			for i := 0; i < n; i++ {
				m := math.Inf(-1)
				for j := 0; j < n; j++ {
					sj := 0.0
					for k := 0; k < n; k++ {
						sj += xd[j*n+k]
					}
					want[i*n+j] = xd[i*n+j] * sj
					m = math.Max(m, want[i*n+j])
				}
				for j := 0; j < n; j++ {
					wantZ[i*n+j] = want[i*n+j] - m
				}
			}
			tol := 1e-12
			if dt == tensor.Float32 {
				tol = 1e-5
			}
			closeTo(t, "x·Sum(x, 1) along axis 0", floats(y.Value()), want, tol)
			closeTo(t, "minus its row maximum", floats(z.Value()), wantZ, tol)
		})
	}
}

// TestBatchOfOneWithABroadcastEpilogue: a batched product of one batch
// whose epilogue adds a matrix broadcast along the batch axis. The product
// kernel hands its epilogue the tile's coordinates without a division, and
// gave a batch of one only the row's and column's: the broadcast asked for
// three, and compiling failed ("index out of range [2] with length 2").
func TestBatchOfOneWithABroadcastEpilogue(t *testing.T) {
	const m, k, n = 13, 7, 17
	for _, c := range []struct {
		name string
		opts []fusion.Option
	}{
		{"products fused", []fusion.Option{fusion.WithMatMulFusion(true)}},
		{"products fused, H200 target", []fusion.Option{fusion.WithMatMulFusion(true), fusion.WithTarget(graphpass.H200)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			a := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, m, k), G.WithName("a"))
			b := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, k, n), G.WithName("b"))
			bias := G.NewMatrix(g, tensor.Float64, G.WithShape(m, n), G.WithName("bias"))
			y := G.Must(G.BroadcastAdd(bias, G.Must(G.BatchedMatMul(a, b)), []byte{0}, nil))
			vm := fusion.NewTapeMachine(g, c.opts...)
			defer vm.Close()
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 13))
			av, bv, biasv := data(tensor.Float64, rng, m, k), data(tensor.Float64, rng, k, n), data(tensor.Float64, rng, m, n)
			av.Reshape(1, m, k)
			bv.Reshape(1, k, n)
			G.Let(a, av)
			G.Let(b, bv)
			G.Let(bias, biasv)
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			ad, bd, cd := floats(av), floats(bv), floats(biasv)
			want := make([]float64, m*n)
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					s := cd[i*n+j]
					for l := 0; l < k; l++ {
						s += ad[i*k+l] * bd[l*n+j]
					}
					want[i*n+j] = s
				}
			}
			closeTo(t, "bias + a·b", floats(y.Value()), want, 1e-12)
		})
	}
}
