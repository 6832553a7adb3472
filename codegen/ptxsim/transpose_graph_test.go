package ptxsim_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// TestTransposeKernels: every kernel graphpass emits for the H200 from a
// graph of Gorgonia Transposes — a convolution's NHWC → NCHW after its
// product, with the ReLU, and the backward's permutations (training) — and
// of a convolution (its im2col past the image's edges: padding, stride,
// dilation; the filter's and the image's gradients, col2im) with a max
// pool of overlapping windows and its backward runs
// in the simulator (racecheck, initcheck) as in the interpreter: seeded
// inputs, outputs poisoned, sizes no block's multiple. At least one kernel
// reads a transposed operand.
func TestTransposeKernels(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(3*5*7, 9), G.WithName("x"))
	w := G.NewMatrix(g, tensor.Float32, G.WithShape(6, 9), G.WithName("w"))
	c := G.Must(G.Reshape(G.Must(G.Mul(x, G.Must(G.Transpose(w)))), tensor.Shape{3, 5, 7, 6}))
	a := G.Must(G.Rectify(G.Must(G.Transpose(c, 0, 3, 1, 2)))) // (3, 6, 5, 7)
	loss := G.Must(G.Sum(G.Must(G.Square(G.Must(G.Transpose(a, 1, 0, 3, 2))))))
	if _, err := G.Grad(loss, x, w); err != nil {
		t.Fatal(err)
	}
	// and a convolution past the image's edges (its im2col)
	im := G.NewTensor(g, tensor.Float32, 4, G.WithShape(2, 3, 11, 9), G.WithName("im"))
	f := G.NewTensor(g, tensor.Float32, 4, G.WithShape(4, 3, 5, 3), G.WithName("f"))
	cv := G.Must(G.Conv2d(im, f, tensor.Shape{5, 3}, []int{2, 1}, []int{2, 1}, []int{1, 2}))
	pool := G.Must(G.MaxPool2D(G.Must(G.Rectify(cv)), tensor.Shape{3, 2}, []int{1, 0}, []int{2, 1}))
	if _, err := G.Grad(G.Must(G.Sum(G.Must(G.Tanh(pool)))), f, im); err != nil {
		t.Fatal(err)
	}
	gr, err := graphpass.Import(g)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 5))
	kernels, transposed, im2col, windows := 0, 0, 0, 0
	for _, grp := range graphpass.Partition(gr, graphpass.Options{Target: graphpass.H200, MatMul: true}) {
		has, hasIm := false, false
		for _, m := range grp.Members {
			has = has || m.Info.Kind == ops.Transpose
			hasIm = hasIm || m.Info.Kind == ops.Im2Col
			switch m.Info.Kind {
			case ops.MaxPool, ops.MaxPoolDiff, ops.Col2Im:
				windows++
			}
		}
		if has {
			transposed++
		}
		if hasIm {
			im2col++
		}
		t.Run(fmt.Sprintf("group %d %v", grp.ID, grp.Kind), func(t *testing.T) {
			kern, err := graphpass.Emit(grp, graphpass.H200, tile.PrecIEEE)
			if err != nil {
				t.Fatal(err)
			}
			simAgainstInterp(t, grp, kern, rng, &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true, NumWarps: kern.Tile.Meta["num_warps"]})
			kernels++
		})
	}
	if kernels < 3 || transposed < 2 || im2col < 1 || windows < 3 {
		t.Fatalf("%d kernels ran, %d with a transpose, %d with an im2col, %d pools, pools' backwards and col2ims", kernels, transposed, im2col, windows)
	}
	t.Logf("%d kernels, %d with a transpose, %d with an im2col, %d pools, pools' backwards and col2ims", kernels, transposed, im2col, windows)
}

// simAgainstInterp runs group grp's kernel kern (f32) on the simulator sim
// and on the interpreter from the same seeded inputs, outputs poisoned
// with NaN (zeros where the kernel accumulates), and fails t where an
// output differs by more than 1e-5·max(1, |want|).
func simAgainstInterp(t *testing.T, grp *graphpass.Group, kern *graphpass.Kernel, rng *rand.Rand, sim *ptxsim.Launcher) {
	t.Helper()
	var args []any
	for _, in := range grp.Inputs {
		size := 1
		for _, d := range in.Info.Shape {
			size *= d
		}
		d := make([]float32, size)
		for i := range d {
			d[i] = float32(rng.Float64()*2 - 1)
		}
		args = append(args, d)
	}
	size := 1
	for _, d := range kern.Out {
		size *= d
	}
	outs := func() ([]any, [][]float32) {
		var as []any
		var fs [][]float32
		for range kern.Outs {
			o := make([]float32, size)
			for i := range o {
				o[i] = float32(math.NaN())
				if kern.Accumulates {
					o[i] = 0
				}
			}
			as, fs = append(as, o), append(fs, o)
		}
		return as, fs
	}
	wantArgs, want := outs()
	if err := interp.Interpret(kern.Tile, kern.Grid, append(args, wantArgs...)...); err != nil {
		t.Fatal(err)
	}
	gotArgs, got := outs()
	if err := sim.Launch(kern.Tile, kern.Grid, append(args, gotArgs...)...); err != nil {
		t.Fatal(err)
	}
	for o := range want {
		for i := range want[o] {
			g, w := float64(got[o][i]), float64(want[o][i])
			if !(math.Abs(g-w) <= 1e-5*max(1, math.Abs(w))) {
				t.Fatalf("output %d [%d]: %v in the simulator, %v in the interpreter", o, i, g, w)
			}
		}
	}
}
