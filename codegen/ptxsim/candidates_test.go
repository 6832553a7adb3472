package ptxsim_test

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// TestAttentionCandidatesInSimulator: every candidate the autotuner may
// try for a TF32 attention forward on the H200 (graphpass.Candidates: 64
// or 128 resident queries at 16 or 32 rows a warp, 32 or 64 keys a step,
// 3 stages, the 168-register cap, and the halved and doubled sides) runs
// in the simulator under racecheck and initcheck and agrees with the
// interpreter running the same kernel: 150 queries and 130 keys (no
// multiple of any block), head dim 64, a causal −∞ mask (blocks above the
// diagonal skipped), a scale. The GPU's tuner keeps the fastest candidate
// that computes what the default does; this shows none of them races.
func TestAttentionCandidatesInSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: two dozen attention kernels in the simulator")
	}
	const sq, sk, d = 150, 130, 64
	g := G.NewGraph()
	rng := rand.New(rand.NewPCG(11, 12))
	vals := map[string][]float32{}
	in := func(name string, s int) *G.Node {
		x := make([]float32, s*d)
		for i := range x {
			x[i] = float32(rng.Float64()*2 - 1)
		}
		vals[name] = x
		return G.NewTensor(g, tensor.Float32, 3, G.WithShape(1, s, d), G.WithName(name))
	}
	q, k, v := in("q", sq), in("k", sk), in("v", sk)
	m := make([]float32, sq*sk)
	for i := range sq {
		for j := i + 1; j < sk; j++ {
			m[i*sk+j] = float32(math.Inf(-1))
		}
	}
	c := G.NewConstant(tensor.New(tensor.WithShape(sq, sk), tensor.WithBacking(m)), G.In(g))
	sc := G.Must(G.BroadcastAdd(G.Must(G.Mul(G.Must(G.BatchedMatMul(q, k, false, true)), G.NewConstant(float32(0.125)))), c, nil, []byte{0}))
	G.Must(G.BatchedMatMul(G.Must(G.SoftMax(sc)), v, false, false))
	gr, err := graphpass.Import(g)
	if err != nil {
		t.Fatal(err)
	}
	t0 := graphpass.H200
	groups := graphpass.Partition(gr, graphpass.Options{Target: t0, MatMul: true})
	if len(groups) != 1 || groups[0].Kind != graphpass.AttentionGroup {
		t.Fatalf("groups %v, want one attention group", groups)
	}
	grp := groups[0]
	cands := graphpass.Candidates(grp, t0, tile.PrecTF32)
	if len(cands) < 20 {
		t.Fatalf("%d candidates: %v", len(cands), cands)
	}
	for _, meta := range cands {
		t.Run(meta.String(), func(t *testing.T) {
			kern, err := graphpass.Emit(grp, graphpass.TuneTo(t0, meta), tile.PrecTF32)
			if err != nil {
				t.Fatal(err)
			}
			var args []any
			for _, x := range grp.Inputs {
				src, ok := vals[x.G.Name()]
				if !ok {
					t.Fatalf("input %v", x.G)
				}
				args = append(args, append([]float32(nil), src...))
			}
			want, got := make([]float32, sq*d), make([]float32, sq*d)
			for i := range got {
				want[i], got[i] = float32(math.NaN()), float32(math.NaN())
			}
			if err := interp.Interpret(kern.Tile, kern.Grid, append(args, want)...); err != nil {
				t.Fatal(err)
			}
			sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true, NumWarps: meta["num_warps"]}
			if err := sim.Launch(kern.Tile, kern.Grid, append(args, got)...); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				g, w := float64(got[i]), float64(want[i])
				if !(math.Abs(g-w) <= 1e-3+1e-2*math.Abs(w)) {
					t.Fatalf("out[%d] = %v in the simulator, %v in the interpreter", i, g, w)
				}
			}
		})
	}
}
