package fusion_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
)

func randMatrix(rng *rand.Rand, r, c int, scale float64) *tensor.Dense {
	v := make([]float64, r*c)
	for i := range v {
		v[i] = (rng.Float64()*2 - 1) * scale
	}
	return tensor.New(tensor.WithShape(r, c), tensor.WithBacking(v))
}

func softmaxRef(x []float64, r, c int) []float64 {
	out := make([]float64, len(x))
	for i := 0; i < r; i++ {
		row := x[i*c : i*c+c]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, v)
		}
		s := 0.0
		for _, v := range row {
			s += math.Exp(v - m)
		}
		for j, v := range row {
			out[i*c+j] = math.Exp(v-m) / s
		}
	}
	return out
}

func closeTo(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] && !(math.Abs(got[i]-want[i]) <= tol*(1+math.Abs(want[i]))) && !(math.IsNaN(got[i]) && math.IsNaN(want[i])) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

// TestSoftmaxPatternsAreOneKernel: softmax written op by op, and Gorgonia's
// SoftMax op, each become one row kernel; both match a float64 reference,
// also on a row far below x[0,0], where Gorgonia's own SoftMax gives NaN.
// Rows longer than 8192 (the row kind's maxRow) are walked in blocks (a
// looped kernel).
func TestSoftmaxPatternsAreOneKernel(t *testing.T) {
	for _, sz := range [][2]int{{37, 781}, {6, 10007}} {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) { checkSoftmaxPatterns(t, sz[0], sz[1]) })
	}
}

// gpuRowShapes are row shapes that take each form of the row kernels the
// H200's target writes: one row a program with masked columns (781), 4
// rows a program with the last program's rows masked (601×100), a row of
// up to 32768 in one block at 16 warps where the group reads only the row
// (a softmax) and walked in blocks otherwise (20000), and a row walked in
// blocks in two passes with the maximum and the sum of exponentials in the
// first (40000).
var gpuRowShapes = [][2]int{{37, 781}, {601, 100}, {6, 20000}, {5, 40000}}

// TestRowKernelsOfTheGPUTarget: the H200's row kernels (rows per program,
// warps, blocks held or walked), run by the CPU executor against the same
// float64 references as the CPU's own.
func TestRowKernelsOfTheGPUTarget(t *testing.T) {
	for _, sz := range gpuRowShapes {
		if testing.Short() && sz[1] > 10000 {
			continue
		}
		t.Run(fmt.Sprintf("softmax %dx%d", sz[0], sz[1]), func(t *testing.T) {
			checkSoftmaxPatterns(t, sz[0], sz[1], fusion.WithTarget(graphpass.H200))
		})
		t.Run(fmt.Sprintf("layernorm %dx%d", sz[0], sz[1]), func(t *testing.T) {
			checkLayerNorm(t, sz[0], sz[1], fusion.WithTarget(graphpass.H200))
		})
	}
}

func checkSoftmaxPatterns(t *testing.T, r, c int, opts ...fusion.Option) {
	rng := rand.New(rand.NewPCG(11, 12))
	xv := randMatrix(rng, r, c, 5)
	d := xv.Data().([]float64)
	for j := 0; j < c; j++ {
		d[3*c+j] -= 1000        // far below x[0,0]
		d[4*c+j] = math.Inf(-1) // a row of -Inf: NaN, as the unfused ops give
	}
	d[1], d[c-2] = math.Inf(-1), math.Inf(-1) // -Inf in part of a row: 0 there
	want := softmaxRef(d, r, c)
	logWant := make([]float64, len(want))
	for i, p := range want {
		logWant[i] = math.Log(p)
	}
	for _, form := range []string{"op by op", "Gorgonia SoftMax", "Gorgonia LogSoftMax"} {
		t.Run(form, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float64, G.WithShape(r, c), G.WithName("x"))
			var y *G.Node
			if form == "op by op" {
				m := G.Must(G.Max(x, 1))
				e := G.Must(G.Exp(G.Must(G.BroadcastSub(x, m, nil, []byte{1}))))
				y = G.Must(G.BroadcastHadamardDiv(e, G.Must(G.Sum(e, 1)), nil, []byte{1}))
			} else if form == "Gorgonia SoftMax" {
				y = G.Must(G.SoftMax(x))
			} else {
				y = G.Must(G.LogSoftMax(x))
			}
			vm := oneKernel(t, g, "row", false, opts...)
			lowersToPTX(t, vm)
			G.Let(x, xv.Clone())
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			if form == "Gorgonia LogSoftMax" {
				closeTo(t, "log-softmax", floats(y.Value()), logWant, 1e-12)
				return
			}
			closeTo(t, "softmax", floats(y.Value()), want, 1e-12)
		})
	}
}

// TestLayerNormPatternIsOneKernel writes LayerNorm as users do (Mean,
// broadcast Sub, Square, Mean, Add eps, InverseSqrt, broadcast Mul and Add):
// one row kernel, matching a float64 reference.
func TestLayerNormPatternIsOneKernel(t *testing.T) {
	for _, sz := range [][2]int{{19, 300}, {3, 12289}} {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) { checkLayerNorm(t, sz[0], sz[1]) })
	}
}

func checkLayerNorm(t *testing.T, r, c int, opts ...fusion.Option) {
	const eps = 1e-5
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(r, c), G.WithName("x"))
	gamma := G.NewVector(g, tensor.Float64, G.WithShape(c), G.WithName("gamma"))
	beta := G.NewVector(g, tensor.Float64, G.WithShape(c), G.WithName("beta"))
	mu := G.Must(G.Mean(x, 1))
	xc := G.Must(G.BroadcastSub(x, mu, nil, []byte{1}))
	v := G.Must(G.Mean(G.Must(G.Square(xc)), 1))
	rstd := G.Must(G.InverseSqrt(G.Must(G.Add(v, G.NewConstant(eps)))))
	y := G.Must(G.BroadcastHadamardProd(xc, rstd, nil, []byte{1}))
	y = G.Must(G.BroadcastAdd(G.Must(G.BroadcastHadamardProd(y, gamma, nil, []byte{0})), beta, nil, []byte{0}))
	vm := oneKernel(t, g, "row", false, opts...)
	lowersToPTX(t, vm)
	rng := rand.New(rand.NewPCG(3, 4))
	xv, gv, bv := randMatrix(rng, r, c, 3), randMatrix(rng, 1, c, 1), randMatrix(rng, 1, c, 1)
	gv.Reshape(c)
	bv.Reshape(c)
	G.Let(x, xv)
	G.Let(gamma, gv)
	G.Let(beta, bv)
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	xd, gd, bd := xv.Data().([]float64), gv.Data().([]float64), bv.Data().([]float64)
	want := make([]float64, r*c)
	for i := 0; i < r; i++ {
		row := xd[i*c : i*c+c]
		m, s := 0.0, 0.0
		for _, v := range row {
			m += v
		}
		m /= float64(c)
		for _, v := range row {
			s += (v - m) * (v - m)
		}
		rs := 1 / math.Sqrt(s/float64(c)+eps)
		for j, v := range row {
			want[i*c+j] = (v-m)*rs*gd[j] + bd[j]
		}
	}
	closeTo(t, "layer norm", floats(y.Value()), want, 1e-12)
}

// oneKernel makes a machine for g and checks that g became one kernel of
// kind (and, when alone, that nothing was left to Gorgonia). The machine
// closes when the test ends.
func oneKernel(t *testing.T, g *G.ExprGraph, kind string, alone bool, opts ...fusion.Option) *fusion.Machine {
	t.Helper()
	vm := fusion.NewTapeMachine(g, opts...)
	t.Cleanup(func() { vm.Close() })
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	rep := vm.Report()
	if rep.Kernels() != 1 || rep.Groups[0].Kind != kind || alone && len(rep.Unfused) != 0 {
		t.Fatalf("want one %s kernel:\n%v", kind, rep)
	}
	return vm
}
