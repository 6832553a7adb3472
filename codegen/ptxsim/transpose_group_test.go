package ptxsim_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// TestTransposeGroupInSimulator: the transpose kernel graphpass writes
// for a weight gradient xᵀ·dY at TF32 on the H200 (x 1100×260: tails
// along both dimensions) runs in the simulator (racecheck, initcheck)
// with 16-byte loads and stores and writes exactly the interpreter's
// transpose into a poisoned output; and the product then reads the copy
// as A (its kernel's inputs hold the copy, not x).
func TestTransposeGroupInSimulator(t *testing.T) {
	const k, m, n = 1100, 260, 300
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(k, m), G.WithName("x"))
	w := G.NewMatrix(g, tensor.Float32, G.WithShape(m, n), G.WithName("w"))
	loss := G.Must(G.Sum(G.Must(G.Square(G.Must(G.Mul(x, w))))))
	if _, err := G.Grad(loss, w); err != nil {
		t.Fatal(err)
	}
	gr, err := graphpass.Import(g)
	if err != nil {
		t.Fatal(err)
	}
	groups := graphpass.Partition(gr, graphpass.Options{Target: graphpass.H200, MatMul: true, Precision: tile.PrecTF32})
	var tg *graphpass.Group
	for i, grp := range groups {
		if grp.Kind != graphpass.TransposeGroup {
			continue
		}
		tg = grp
		if i+1 >= len(groups) || groups[i+1].Kind != graphpass.MatMulGroup || !slices.Contains(groups[i+1].Inputs, grp.Root) {
			t.Fatalf("the transpose group is not followed by the product that reads its copy: %v", groups)
		}
		for _, in := range groups[i+1].Inputs {
			if in.G == x {
				t.Fatalf("the product still reads x: %v", groups[i+1].Inputs)
			}
		}
	}
	if tg == nil {
		t.Fatalf("no transpose group: %v", groups)
	}
	kern, err := graphpass.Emit(tg, graphpass.H200, tile.PrecTF32)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	in := make([]float32, k*m)
	for i := range in {
		in[i] = float32(rng.Float64()*2 - 1)
	}
	poisoned := func() []float32 {
		o := make([]float32, k*m)
		for i := range o {
			o[i] = float32(math.NaN())
		}
		return o
	}
	want, got := poisoned(), poisoned()
	if err := interp.Interpret(kern.Tile, kern.Grid, in, want); err != nil {
		t.Fatal(err)
	}
	sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true, NumWarps: graphpass.H200.NumWarps}
	if err := sim.Launch(kern.Tile, kern.Grid, in, got); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sim.Last.PTX, "ld.global.v4.f32") || !strings.Contains(sim.Last.PTX, "st.global.v4.f32") {
		t.Errorf("the transpose's global accesses are not 16 bytes wide")
	}
	for i := range want {
		if r, c := i/k, i%k; want[i] != in[c*m+r] || math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("[%d][%d]: simulator %v, interpreter %v, x %v", r, c, got[i], want[i], in[c*m+r])
		}
	}
}
