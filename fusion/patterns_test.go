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
// rows a program with the last program's rows masked (601×100), rows held
// in one block with LayerNorm's γ and β loaded late (4000 at 8 warps,
// masked; 8192 at 16), a row of up to 32768 in one block at 16 warps where
// the group reads only the row (a softmax) or loads γ and β late (float32
// only) and walked in blocks otherwise (these float64 LayerNorms' 20000),
// and a row walked in
// blocks in two passes with the maximum and the sum of exponentials in the
// first (40000).
var gpuRowShapes = [][2]int{{37, 781}, {601, 100}, {9, 4000}, {8, 8192}, {6, 20000}, {5, 40000}}

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

// TestSquaresAboutARowValue: a row walked in blocks takes a sum of squares
// about a value known from an earlier sum of the same row, Σ (x − c)², in
// that sum's pass (the mean and variance of LayerNorm in one pass: two
// passes over the row instead of three), from each lane's running mean and
// squared deviations (Welford's), so that rows whose mean is large against
// their spread keep their digits: LayerNorm of rows at 1e5 ± 3 (Σx² −
// (Σx)²/n would leave about 1e-7 of the variance; the mean's own rounding
// leaves about 1e-11 of the output, hence the tolerance of 1e-9 there) and
// a sum of squares about half the
// mean, on the CPU's and the H200's targets, at widths with and without
// lanes past the row's end in the last block, against float64 references.
func TestSquaresAboutARowValue(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []fusion.Option
		r, c int
	}{
		{"cpu 3x12289", nil, 3, 12289},
		{"cpu 4x16384", nil, 4, 16384},
		{"h200 5x40000", []fusion.Option{fusion.WithTarget(graphpass.H200)}, 5, 40000},
		{"h200 3x32768", []fusion.Option{fusion.WithTarget(graphpass.H200)}, 3, 32768},
	} {
		t.Run("layernorm offset "+tc.name, func(t *testing.T) { checkLayerNormOffset(t, tc.r, tc.c, 1e5, tc.opts...) })
		t.Run("about half the mean "+tc.name, func(t *testing.T) { checkSquaresAboutHalfMean(t, tc.r, tc.c, tc.opts...) })
	}
}

// checkSquaresAboutHalfMean: y = x · Σ (x − mean/2)², one row kernel,
// against float64.
func checkSquaresAboutHalfMean(t *testing.T, r, c int, opts ...fusion.Option) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(r, c), G.WithName("x"))
	half := G.Must(G.Mul(G.Must(G.Mean(x, 1)), G.NewConstant(0.5)))
	v := G.Must(G.Sum(G.Must(G.Square(G.Must(G.BroadcastSub(x, half, nil, []byte{1})))), 1))
	y := G.Must(G.BroadcastHadamardProd(x, v, nil, []byte{1}))
	vm := oneKernel(t, g, "row", false, opts...)
	rng := rand.New(rand.NewPCG(5, 6))
	xv := randMatrix(rng, r, c, 3)
	d := xv.Data().([]float64)
	for i := range d {
		d[i] += 2 // a mean of 2: half of it is not the mean
	}
	G.Let(x, xv)
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, r*c)
	for i := 0; i < r; i++ {
		row := d[i*c : i*c+c]
		m := 0.0
		for _, v := range row {
			m += v
		}
		h := m / float64(c) * 0.5
		s := 0.0
		for _, v := range row {
			s += (v - h) * (v - h)
		}
		for j, v := range row {
			want[i*c+j] = v * s
		}
	}
	closeTo(t, "x·Σ(x − mean/2)²", floats(y.Value()), want, 1e-12)
}

func checkLayerNorm(t *testing.T, r, c int, opts ...fusion.Option) {
	checkLayerNormOffset(t, r, c, 0, opts...)
}

// checkLayerNormOffset is checkLayerNorm with off added to every x.
func checkLayerNormOffset(t *testing.T, r, c int, off float64, opts ...fusion.Option) {
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
	for i, xd := 0, xv.Data().([]float64); i < len(xd); i++ {
		xd[i] += off
	}
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
	tol := 1e-12
	if off != 0 {
		tol = 1e-9
	}
	closeTo(t, "layer norm", floats(y.Value()), want, tol)
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
