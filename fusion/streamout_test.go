package fusion_test

import (
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

// TestFreshRowOutputsPastTheCaches: on the CPU backend, a softmax of
// 4096×1024 f32 whose value the user reads, which each run writes into
// memory of its own by default, is a kernel whose stores carry the
// streaming hint (written past the caches by the machine code:
// graphpass's cpuStream) where kernels run as machine code, and with
// WithReuseOutputs(true) one without it; each way three runs' values agree
// with Gorgonia's.
func TestFreshRowOutputsPastTheCaches(t *testing.T) {
	build := func() (*G.ExprGraph, *G.Node, *G.Node) {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float32, G.WithShape(4096, 1024), G.WithName("x"))
		e := G.Must(G.Exp(G.Must(G.BroadcastSub(x, G.Must(G.Max(x, 1)), nil, []byte{1}))))
		y := G.Must(G.BroadcastHadamardDiv(e, G.Must(G.Sum(e, 1)), nil, []byte{1}))
		return g, x, y
	}
	for _, reuse := range []bool{false, true} {
		name := "memory of its own"
		if reuse {
			name = "memory reused"
		}
		t.Run(name, func(t *testing.T) {
			gRef, xRef, yRef := build()
			g, x, y := build()
			letTwins(t, rand.New(rand.NewPCG(37, 1)), []*G.Node{xRef}, []*G.Node{x}, nil)
			dir := t.TempDir()
			vm := fusion.NewTapeMachine(g, fusion.WithBackend(fusion.CPU), fusion.WithReuseOutputs(reuse), fusion.WithDumpDir(dir))
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
			if got, want := strings.Contains(string(ir), "{cache = streaming}"), !reuse && jit.Supported(); got != want {
				t.Errorf("stores with the streaming hint: %v, want %v\n%s", got, want, ir)
			}
			runTwins(t, gRef, vm)
			for run := range 3 {
				if run > 0 {
					if err := vm.RunAll(); err != nil {
						t.Fatal(err)
					}
				}
				sameAsGorgonia(t, "softmax", y, yRef, 1e-6)
			}
		})
	}
}
