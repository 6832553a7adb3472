package fusion_test

import (
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/ops"
)

// TestFoldedExtraOutputs: a group that reads only constants is folded into
// a constant at compile time; when it has extra outputs each becomes a
// constant of its own. A PartOp reading a folded constant ran on the CPU
// (it slices host memory) but the GPU backend has no kernel outputs to cut
// it from ("part 0 of 2 of ..., which has 0 outputs": TestFuzzGraphsOnGPU,
// H200, 2026-12-01). The graph is that fuzz input's: the gradient of
// Sum(x·(−0.125)) with at most 5 ops a kernel, on the GPU's target.
func TestFoldedExtraOutputs(t *testing.T) {
	fg, err := fzBuild([]byte("\xf3\xce\xc2K%\xcc˞H\xc6O\x98\xe9\x1b\x10\xdb"), tensor.Dtype{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := fusion.Compile(fg.g, fusion.WithMaxGroup(fg.maxGrp), fusion.WithTarget(graphpass.H200), fusion.WithMatMulFusion(false))
	if err != nil {
		t.Fatal(err)
	}
	parts := 0
	for _, n := range c.Graph.AllNodes() {
		if _, ok := n.Op().(*fusion.PartOp); !ok {
			continue
		}
		parts++
		for it := c.Graph.From(n.ID()); it.Next(); {
			if a := it.Node().(*G.Node); ops.IsConst(a.Op()) {
				t.Errorf("%v cuts its value from the constant %v: fold each output into a constant of its own", n.Name(), a.Name())
			}
		}
	}
	t.Logf("%d parts of kernels left in the graph", parts)
	// and the values are right on the CPU
	fzCheck(t, []byte("\xf3\xce\xc2K%\xcc˞H\xc6O\x98\xe9\x1b\x10\xdb"), fusion.CPU)
}
