package fusion_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
)

// TestSplitReductions: for a GPU target, a sum with few outputs over many
// elements is spread over programs that add their parts into the output
// atomically (into a buffer zeroed before each launch: the test runs
// twice); a maximum is not split. For the CPU's own target nothing adds
// atomically (column sums as native code split into partial sums that a
// second kernel adds in order: TestColumnSiblingReductions), and the sums
// are the same bits run after run. Against float64 sums,
// shapes off every block.
func TestSplitReductions(t *testing.T) {
	t.Run("cpu target", func(t *testing.T) { checkSplitReductions(t, 1e-12, false) })
	t.Run("h200 target", func(t *testing.T) { checkSplitReductions(t, 1e-12, true, fusion.WithTarget(graphpass.H200)) })
}

// checkSplitReductions: splits says whether the target splits sums.
func checkSplitReductions(t *testing.T, tol float64, splits bool, opts ...fusion.Option) {
	cases := []struct {
		name  string
		shape [2]int
		build func(x *G.Node) *G.Node
		want  func(x []float64, r, c int) []float64
		split bool // where the target splits sums
	}{
		{"sum of tanh over all", [2]int{70, 130}, func(x *G.Node) *G.Node { return G.Must(G.Sum(G.Must(G.Tanh(x)))) },
			func(x []float64, r, c int) []float64 {
				s := 0.0
				for _, v := range x {
					s += math.Tanh(v)
				}
				return []float64{s}
			}, true},
		{"column sums of squares", [2]int{9000, 3}, func(x *G.Node) *G.Node { return G.Must(G.Sum(G.Must(G.Square(x)), 0)) },
			func(x []float64, r, c int) []float64 {
				s := make([]float64, c)
				for i, v := range x {
					s[i%c] += v * v
				}
				return s
			}, true},
		{"column sums 1000×777 (the column form on a GPU target)", [2]int{1000, 777}, func(x *G.Node) *G.Node { return G.Must(G.Sum(x, 0)) },
			colSums, true},
		{"column sums 4095×33", [2]int{4095, 33}, func(x *G.Node) *G.Node { return G.Must(G.Sum(x, 0)) },
			colSums, true},
		{"column sums of one row, 1×5000", [2]int{1, 5000}, func(x *G.Node) *G.Node { return G.Must(G.Sum(x, 0)) },
			colSums, false},
		{"column sums of one column, 5000×1", [2]int{5000, 1}, func(x *G.Node) *G.Node { return G.Must(G.Sum(x, 0)) },
			colSums, true},
		{"column maxima 1000×777", [2]int{1000, 777}, func(x *G.Node) *G.Node { return G.Must(G.Max(x, 0)) },
			func(x []float64, r, c int) []float64 {
				m := make([]float64, c)
				for j := range m {
					m[j] = math.Inf(-1)
				}
				for i, v := range x {
					m[i%c] = math.Max(m[i%c], v)
				}
				return m
			}, false},
		{"max over all", [2]int{70, 130}, func(x *G.Node) *G.Node { return G.Must(G.Max(x)) },
			func(x []float64, r, c int) []float64 {
				m := math.Inf(-1)
				for _, v := range x {
					m = math.Max(m, v)
				}
				return []float64{m}
			}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float64, G.WithShape(c.shape[0], c.shape[1]), G.WithName("x"))
			y := c.build(x)
			vm := fusion.NewTapeMachine(g, opts...)
			defer vm.Close()
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			split := false
			for _, n := range vm.Compiled().Graph.AllNodes() {
				if f, ok := n.Op().(*fusion.FusedOp); ok {
					split = split || f.Accumulates()
				}
			}
			if split != (c.split && splits) {
				t.Fatalf("split %v, want %v:\n%v", split, c.split, vm.Report())
			}
			rng := rand.New(rand.NewPCG(4, 4))
			d := make([]float64, c.shape[0]*c.shape[1])
			var first []float64
			for run := 0; run < 3; run++ {
				if run < 2 { // the third run repeats the second's inputs
					for i := range d {
						d[i] = rng.Float64()*4 - 2
					}
				}
				if err := G.Let(x, tensor.New(tensor.WithShape(c.shape[0], c.shape[1]), tensor.WithBacking(d))); err != nil {
					t.Fatal(err)
				}
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				got, want := floats(y.Value()), c.want(d, c.shape[0], c.shape[1])
				if y.IsScalar() {
					got = []float64{scalar(y.Value())}
				}
				if len(got) != len(want) {
					t.Fatalf("run %d: %d values, want %d", run, len(got), len(want))
				}
				for i := range want {
					if !(math.Abs(got[i]-want[i]) <= tol*(1+math.Abs(want[i]))) {
						t.Fatalf("run %d: [%d] = %v, want %v", run, i, got[i], want[i])
					}
					if run == 2 && !split && math.Float64bits(got[i]) != math.Float64bits(first[i]) {
						t.Fatalf("the same inputs again: [%d] = %v, then %v", i, first[i], got[i])
					}
				}
				first = append(first[:0], got...)
				vm.Reset()
			}
		})
	}
}

// colSums is the column sums of x read as r×c.
func colSums(x []float64, r, c int) []float64 {
	s := make([]float64, c)
	for i, v := range x {
		s[i%c] += v
	}
	return s
}

// TestColumnSiblingReductions: a LayerNorm's bias and gain gradients,
// Reshape(Σ[0] dy) and Reshape(Σ[0] dy⊙x̂), are one kernel with two
// outputs that reads dy once, on the CPU backend for the CPU's target
// (the column form unsplit: the same bits run after run) and for the
// H200's (the column form split over row chunks); float32 sums against
// float64 ones within 1e-5·Σ|terms| per output, at shapes off every block.
//
// As native code (jit.Supported) a CPU target splits them over row chunks
// into partial sums that a second kernel adds in order
// (FusedOp.Parts): on 16 cores' target too (at 8192×1024 32 chunks of
// 256 rows), the outputs reused and poisoned (NaN) between runs, every
// sum written again and the same bits run after run.
func TestColumnSiblingReductions(t *testing.T) {
	shapes := [][2]int{{1000, 777}, {4095, 33}, {4096, 768}}
	native := jit.Supported()
	t.Run("cpu target", func(t *testing.T) { checkColumnSiblings(t, shapes, true, native) })
	t.Run("h200 target", func(t *testing.T) { checkColumnSiblings(t, shapes, false, false, fusion.WithTarget(graphpass.H200)) })
	t.Run("cpu target of 16 cores, outputs reused", func(t *testing.T) {
		tg := splittingCPU(t)
		checkColumnSiblings(t, append(shapes, [2]int{4097, 1000}, [2]int{8192, 1024}), true, true, fusion.WithTarget(tg), fusion.WithReuseOutputs(true))
	})
}

// checkColumnSiblings: sameBits says whether the sums must be the same
// bits run after run (a target that does not split them with atomics);
// parts whether the kernel writes partial results (FusedOp.Parts) where
// the shape holds two chunks of 16K elements.
func checkColumnSiblings(t *testing.T, shapes [][2]int, sameBits, parts bool, opts ...fusion.Option) {
	for _, sh := range shapes {
		t.Run(fmt.Sprintf("%dx%d", sh[0], sh[1]), func(t *testing.T) {
			r, c := sh[0], sh[1]
			g := G.NewGraph()
			dy := G.NewMatrix(g, tensor.Float32, G.WithShape(r, c), G.WithName("dy"))
			xh := G.NewMatrix(g, tensor.Float32, G.WithShape(r, c), G.WithName("xhat"))
			db := G.Must(G.Reshape(G.Must(G.Sum(dy, 0)), tensor.Shape{c}))
			dg := G.Must(G.Reshape(G.Must(G.Sum(G.Must(G.HadamardProd(dy, xh)), 0)), tensor.Shape{c}))
			vm := fusion.NewTapeMachine(g, opts...)
			defer vm.Close()
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			kernels, split := 0, 0
			for _, n := range vm.Compiled().Graph.AllNodes() {
				if f, ok := n.Op().(*fusion.FusedOp); ok && !f.IsView() {
					kernels++
					split = max(split, f.Parts())
				}
			}
			if kernels != 1 {
				t.Fatalf("%d kernels, want 1:\n%v", kernels, vm.Report())
			}
			if want := parts && r*c >= 2*16384; (split > 1) != want {
				t.Fatalf("%d partial results, want split %v", split, want)
			}
			if parts && r == 8192 && c == 1024 && split != 32 {
				t.Fatalf("%d chunks at 8192×1024, want 32", split)
			}
			rng := rand.New(rand.NewPCG(uint64(r), uint64(c)))
			d, x := make([]float32, r*c), make([]float32, r*c)
			for i := range d {
				d[i], x[i] = float32(rng.Float64()*4-2), float32(rng.Float64()*4-2)
			}
			if err := G.Let(dy, tensor.New(tensor.WithShape(r, c), tensor.WithBacking(d))); err != nil {
				t.Fatal(err)
			}
			if err := G.Let(xh, tensor.New(tensor.WithShape(r, c), tensor.WithBacking(x))); err != nil {
				t.Fatal(err)
			}
			wantB, wantG, scaleB, scaleG := make([]float64, c), make([]float64, c), make([]float64, c), make([]float64, c)
			for i := range d {
				p := float64(d[i]) * float64(x[i])
				wantB[i%c] += float64(d[i])
				wantG[i%c] += p
				scaleB[i%c] += math.Abs(float64(d[i]))
				scaleG[i%c] += math.Abs(p)
			}
			var first []float32
			for run := range 2 {
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				gotB, gotG := db.Value().Data().([]float32), dg.Value().Data().([]float32)
				for j := range c {
					if !(math.Abs(float64(gotB[j])-wantB[j]) <= 1e-5*scaleB[j]) || !(math.Abs(float64(gotG[j])-wantG[j]) <= 1e-5*scaleG[j]) {
						t.Fatalf("run %d column %d: Σdy %v want %v, Σdy⊙x̂ %v want %v", run, j, gotB[j], wantB[j], gotG[j], wantG[j])
					}
				}
				if sameBits && run == 1 && !slices.Equal(first, append(slices.Clone(gotB), gotG...)) {
					t.Fatal("the sums differ run after run")
				}
				first = append(slices.Clone(gotB), gotG...)
				for j := range c { // poisoned: reused outputs must be written again
					gotB[j], gotG[j] = float32(math.NaN()), float32(math.NaN())
				}
				vm.Reset()
			}
		})
	}
}

// TestColumnPartsDo: a kernel of partial results run through FusedOp.Do
// (as Gorgonia's own machine runs the compiled graph: fresh memory, no
// step to keep scratch in) gives RunAll's sums bit for bit.
func TestColumnPartsDo(t *testing.T) {
	const r, c = 1000, 777
	tg := splittingCPU(t)
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(r, c), G.WithName("x"))
	y := G.Must(G.Sum(x, 0))
	rng := rand.New(rand.NewPCG(9, 9))
	d := make([]float32, r*c)
	for i := range d {
		d[i] = float32(rng.Float64()*4 - 2)
	}
	in := tensor.New(tensor.WithShape(r, c), tensor.WithBacking(d))
	if err := G.Let(x, in); err != nil {
		t.Fatal(err)
	}
	vm := fusion.NewTapeMachine(g, fusion.WithTarget(tg))
	defer vm.Close()
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(y.Value().Data().([]float32))
	var op *fusion.FusedOp
	for _, n := range vm.Compiled().Graph.AllNodes() {
		if f, ok := n.Op().(*fusion.FusedOp); ok && f.Parts() > 1 {
			op = f
		}
	}
	if op == nil {
		t.Fatal("no kernel of partial results")
	}
	for run := range 2 {
		v, err := op.Do(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := v.Data().([]float32); !slices.Equal(got, want) {
			t.Fatalf("run %d: Do's sums differ from RunAll's", run)
		}
	}
}

// splittingCPU is a 16-core CPU target whose kernels run as machine code,
// the target that splits column sums over row chunks (graphpass
// tuneColumnParts); the test is skipped where there is no native code.
func splittingCPU(t *testing.T) graphpass.Target {
	t.Helper()
	if !jit.Supported() {
		t.Skip("no native code here (not amd64 with AVX2 and FMA, or -tags purego): the CPU target does not split column sums")
	}
	tg := graphpass.CPU(16)
	tg.Native = true
	return tg
}
