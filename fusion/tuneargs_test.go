package fusion_test

import (
	"slices"
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

// TestTuneArgsScale: the tuner's inputs keep products near 1, as a model's
// are (tuneScale): in the encoder block (large, a 16-core CPU running
// machine code, and the H200), every product group whose operands are
// both its inputs gives its first element, from those inputs, in [0.25,
// 2.25] (operands in [0.5, 1.5)/√K: K terms each in [0.25, 2.25]/K), where
// unscaled inputs gave about K (FF1: 256, its GELU saturated and its exp
// underflowing); a group without products keeps inputs in [0.5, 1.5).
func TestTuneArgsScale(t *testing.T) {
	wl, _ := bench.Lookup("encoder_fwd_bwd")
	sp, err := wl.Build("large")
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range []struct {
		name string
		t    graphpass.Target
	}{{"cpu16", graphpass.Target{Cores: 16, Native: true}}, {"h200", graphpass.H200}} {
		t.Run(tg.name, func(t *testing.T) {
			gr, err := graphpass.Import(sp.Graph)
			if err != nil {
				t.Fatal(err)
			}
			products, plain := 0, 0
			for _, grp := range graphpass.Partition(gr, graphpass.Options{Target: tg.t, MatMul: true}) {
				k, err := graphpass.Emit(grp, tg.t, tile.PrecIEEE)
				if err != nil {
					t.Fatal(err)
				}
				args := fusion.TuneInputs(grp, k)
				mm := grp.MatMul
				if mm == nil {
					if grp.Kind != graphpass.ElementwiseGroup && grp.Kind != graphpass.RowGroup {
						continue
					}
					plain++
					for i, a := range args {
						for _, v := range a.([]float32) {
							if !(v >= 0.5 && v < 1.5) {
								t.Fatalf("%v: input %d holds %v, want [0.5, 1.5)", grp, i, v)
							}
						}
					}
					continue
				}
				ia, ib := slices.Index(grp.Inputs, mm.Inputs[0]), slices.Index(grp.Inputs, mm.Inputs[1])
				sa, sb := mm.Inputs[0].Info.Shape, mm.Inputs[1].Info.Shape
				if ia < 0 || ib < 0 || len(sa) != 2 || len(sb) != 2 {
					continue
				}
				a, b := args[ia].([]float32), args[ib].([]float32)
				kk, as, bs := sa[1], 1, sb[1] // A[0][q] at q·as, B[q][0] at q·bs
				if mm.Info.TransA {
					kk, as = sa[0], sa[1]
				}
				if mm.Info.TransB {
					bs = 1
				}
				sum := 0.0
				for q := 0; q < kk; q++ {
					sum += float64(a[q*as]) * float64(b[q*bs])
				}
				if !(sum >= 0.25 && sum <= 2.25) {
					t.Errorf("%v: its product's first element %v from the tuner's inputs (K %d), want [0.25, 2.25]", grp, sum, kk)
				}
				products++
			}
			if products < 4 || plain < 2 {
				t.Errorf("%d product groups and %d plain ones checked, want at least 4 and 2", products, plain)
			}
		})
	}
}
