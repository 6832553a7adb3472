package fusion_test

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/fusion"
)

// TestFreshOutputsPastTheCaches: on the CPU backend, a softmax of
// 4096×1024 f32 and GELU's tanh form over 1M+37 f32 elements (a count no
// multiple of the block: its last block masked), whose values the user
// reads, which each run writes into memory of its own by default, are
// kernels whose stores carry the streaming hint (written past the caches by
// the machine code: graphpass's cpuStream) where kernels run as machine
// code, and with WithReuseOutputs(true) kernels without it; each way three
// runs' values agree with Gorgonia's.
func TestFreshOutputsPastTheCaches(t *testing.T) {
	softmax := func() (*G.ExprGraph, *G.Node, *G.Node) {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float32, G.WithShape(4096, 1024), G.WithName("x"))
		e := G.Must(G.Exp(G.Must(G.BroadcastSub(x, G.Must(G.Max(x, 1)), nil, []byte{1}))))
		y := G.Must(G.BroadcastHadamardDiv(e, G.Must(G.Sum(e, 1)), nil, []byte{1}))
		return g, x, y
	}
	gelu := func() (*G.ExprGraph, *G.Node, *G.Node) {
		g := G.NewGraph()
		x := G.NewVector(g, tensor.Float32, G.WithShape(1<<20+37), G.WithName("x"))
		c := func(v float64) *G.Node { return G.NewConstant(float32(v)) }
		must := G.Must
		u := must(G.Mul(must(G.Add(x, must(G.Mul(must(G.Cube(x)), c(0.044715))))), c(math.Sqrt(2/math.Pi))))
		return g, x, must(G.Mul(must(G.HadamardProd(x, must(G.Add(must(G.Tanh(u)), c(1))))), c(0.5)))
	}
	for _, c := range []struct {
		name  string
		build func() (*G.ExprGraph, *G.Node, *G.Node)
		reuse bool
	}{
		{"softmax, memory of its own", softmax, false},
		{"softmax, memory reused", softmax, true},
		{"gelu, memory of its own", gelu, false},
		{"gelu, memory reused", gelu, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			gRef, xRef, yRef := c.build()
			g, x, y := c.build()
			letTwins(t, rand.New(rand.NewPCG(37, 1)), []*G.Node{xRef}, []*G.Node{x}, nil)
			dir := t.TempDir()
			vm := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CPU), fusion.WithReuseOutputs(c.reuse), fusion.WithDumpDir(dir))
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { vm.Close() })
			tiles, err := filepath.Glob(filepath.Join(dir, "*.tile"))
			if err != nil || len(tiles) != 1 {
				t.Fatalf("%d kernels dumped (%v), want 1", len(tiles), err)
			}
			ir, err := os.ReadFile(tiles[0])
			if err != nil {
				t.Fatal(err)
			}
			if got, want := strings.Contains(string(ir), "{cache = streaming}"), !c.reuse && jit.Supported(); got != want {
				t.Errorf("stores with the streaming hint: %v, want %v\n%s", got, want, ir)
			}
			runTwins(t, gRef, vm)
			for run := range 3 {
				if run > 0 {
					if err := vm.RunAll(); err != nil {
						t.Fatal(err)
					}
				}
				sameAsGorgonia(t, c.name, y, yRef, 1e-6)
			}
		})
	}
}
