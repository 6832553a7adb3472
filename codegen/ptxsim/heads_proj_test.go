package ptxsim_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// TestHeadsProjWgmmaInSimulator: the heads' projections (x·W_p for every
// head's q, k and v, one batched kernel into the stack) at TF32 for the
// H200 run on the swapped wgmma form (a head's 64 columns at 4 warps) and,
// in the simulator (racecheck, initcheck), agree with the interpreter:
// 2 heads of 64 over 300 tokens (no multiple of the 128 rows a program
// takes), model 128, at the default's 128 rows and the tuner's 64 and 256.
func TestHeadsProjWgmmaInSimulator(t *testing.T) {
	const b, s, d, h = 2, 150, 128, 2
	dh := d / h
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(b*s, d), G.WithName("x"))
	var outs G.Nodes
	for i := 0; i < h; i++ {
		proj := func(name string) *G.Node {
			w := G.NewMatrix(g, tensor.Float32, G.WithShape(d, dh), G.WithName(fmt.Sprintf("%s%d", name, i)))
			return G.Must(G.Reshape(G.Must(G.Mul(x, w)), tensor.Shape{b, s, dh}))
		}
		q, k, v := proj("wq"), proj("wk"), proj("wv")
		scores := G.Must(G.Mul(G.Must(G.BatchedMatMul(q, k, false, true)), G.NewConstant(float32(1/math.Sqrt(float64(dh))))))
		att := G.Must(G.BatchedMatMul(G.Must(G.SoftMax(scores)), v, false, false))
		outs = append(outs, G.Must(G.Reshape(att, tensor.Shape{b * s, dh})))
	}
	G.Must(G.Concat(1, outs...))
	gr, err := graphpass.Import(g)
	if err != nil {
		t.Fatal(err)
	}
	var pg *graphpass.Group
	for _, grp := range graphpass.Partition(gr, graphpass.Options{Target: graphpass.H200, MatMul: true, Precision: tile.PrecTF32}) {
		if grp.Kind == graphpass.HeadsProjGroup {
			pg = grp
		}
	}
	if pg == nil {
		t.Fatal("no heads_proj group")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, bm := range []int{128, 64, 256} {
		t.Run(fmt.Sprintf("%d rows", bm), func(t *testing.T) {
			cands := graphpass.Candidates(pg, graphpass.H200, tile.PrecTF32)
			var meta tile.Meta
			for _, c := range cands {
				if c["BLOCK_M"] == bm {
					meta = c
				}
			}
			if meta == nil || meta["wgmma"] != 2 || meta["BLOCK_N"] != 64 || cands[0]["BLOCK_M"] != 128 {
				t.Fatalf("no swapped candidate of %d rows: %v", bm, cands)
			}
			kern, err := graphpass.Emit(pg, graphpass.TuneTo(graphpass.H200, meta), tile.PrecTF32)
			if err != nil {
				t.Fatal(err)
			}
			var args []any
			for _, in := range pg.Inputs {
				a := make([]float32, tensorSize(in.Info.Shape))
				for i := range a {
					a[i] = float32(rng.Float64()*2 - 1)
				}
				args = append(args, a)
			}
			n := 3 * h * b * s * dh
			out := func() []float32 {
				o := make([]float32, n)
				for i := range o {
					o[i] = float32(math.NaN())
				}
				return o
			}
			want, got := out(), out()
			if err := interp.Interpret(kern.Tile, kern.Grid, append(args, want)...); err != nil {
				t.Fatal(err)
			}
			sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true, NumWarps: meta["num_warps"]}
			if err := sim.Launch(kern.Tile, kern.Grid, append(args, got)...); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(sim.Last.PTX, "wgmma.mma_async") {
				t.Fatal("not on wgmma")
			}
			for i := range want {
				if w, g := float64(want[i]), float64(got[i]); !(math.Abs(g-w) <= 1e-5*max(1, math.Abs(w))) {
					t.Fatalf("[%d]: simulator %v, interpreter %v", i, g, w)
				}
			}
		})
	}
}
