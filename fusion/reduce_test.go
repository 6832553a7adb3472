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

// TestSplitReductions: for a GPU target, a sum with few outputs over many
// elements is spread over programs that add their parts into the output
// atomically (into a buffer zeroed before each launch: the test runs
// twice); a maximum is not split. For the CPU's own target nothing is split,
// and the sums are the same bits run after run. Against float64 sums,
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
