package fusion_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// TestTuneArgsStack: the tuner's inputs for a heads_grad kernel of the
// BERT layer at TF32 on the H200 (which has candidates: xᵀ copied once,
// on wgmma) hold the backward kernel's whole value where the kernel reads
// it through its stack (an internal value whose shape, [0] before, gave it
// 1 element: the default faulted on the H200 with an illegal address and
// every later launch of the tuner's context failed; now the shape is the
// group's outputs' elements, checked here against them once the partition
// is done), and every other input as many elements as its shape.
func TestTuneArgsStack(t *testing.T) {
	wl, _ := bench.Lookup("encoder_fwd_bwd")
	sp, err := wl.Build(bench.Peer)
	if err != nil {
		t.Fatal(err)
	}
	gr, err := graphpass.Import(sp.Graph)
	if err != nil {
		t.Fatal(err)
	}
	stacks := 0
	for _, grp := range graphpass.Partition(gr, graphpass.Options{Target: graphpass.H200, MatMul: true, Precision: tile.PrecTF32}) {
		if grp.Kind != graphpass.HeadsGradGroup {
			continue
		}
		if len(graphpass.Candidates(grp, graphpass.H200, tile.PrecTF32)) < 2 {
			t.Errorf("%v: no candidates to tune", grp)
		}
		k, err := graphpass.Emit(grp, graphpass.H200, tile.PrecTF32)
		if err != nil {
			t.Fatal(err)
		}
		args := fusion.TuneInputs(grp, k)
		for i, in := range grp.Inputs {
			want := max(1, numelOf(in.Info.Shape))
			if in.Internal() && in.Group != nil && in.Group.Stack == in {
				stacks++
				want = 0
				for _, o := range append([]*graphpass.Node{in.Group.Root}, in.Group.Extra...) {
					want += numelOf(o.Info.Shape)
				}
			}
			if got := len(args[i].([]float32)); got != want || want < 2 {
				t.Errorf("%v: input %d (%v): %d elements, want %d", grp, i, in, got, want)
			}
		}
	}
	if stacks != 2 {
		t.Errorf("%d heads_grad inputs read through a stack, want 2", stacks)
	}
}

func numelOf(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}
