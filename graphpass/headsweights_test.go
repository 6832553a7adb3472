package graphpass

import (
	"testing"

	"github.com/tilefuse/tilefuse/tile/interp"
	"github.com/tilefuse/tilefuse/tile/tiletest"
	G "gorgonia.org/gorgonia"
)

// TestHeadsWeightsEach: on a CPU the heads' weights are stacked by
// programs that each copy one block of every weight (EACH = 1, a 1-D grid
// of at least two programs a core where blocks of 256 allow), not one
// weight's block under 3H masks; a GPU keeps the masked form (one program
// a weight's block). Each kernel, run on the reference interpreter over
// seeded weights into a poisoned stack, writes every weight where the
// stack keeps it, and nothing past the stack (sizes no multiple of the
// block included).
func TestHeadsWeightsEach(t *testing.T) {
	for _, c := range []struct {
		name     string
		d, h     int
		target   Target
		each     bool
		block    int
		programs int // the grid's first axis
	}{
		{"CPU(16), 256×32 weights", 256, 8, CPU(16), true, 256, 32},
		{"CPU(2), 256×32 weights", 256, 8, CPU(2), true, 1024, 8},
		{"CPU(16), 40×20 weights (a masked tail)", 40, 2, CPU(16), true, 256, 4},
		{"CPU(1), 12×6 weights", 12, 2, CPU(1), true, 128, 1},
		{"H200, 256×32 weights", 256, 8, H200, false, 1024, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			dh := c.d / c.h
			g := G.NewGraph()
			out, _ := multiHead(g, 2, 4, c.d, c.h, 0.5)
			gr, err := Import(g)
			if err != nil {
				t.Fatal(err)
			}
			var grp *Group
			for _, p := range Partition(gr, Options{MatMul: true, WriteOut: map[*G.Node]bool{out: true}, Target: c.target}) {
				if p.Kind == HeadsWeightsGroup {
					grp = p
				}
			}
			if grp == nil {
				t.Fatal("no heads_weights group")
			}
			k, err := Emit(grp, c.target, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := k.Tile.Meta["EACH"] == 1; got != c.each {
				t.Errorf("EACH = %d, want the every-weight form %v", k.Tile.Meta["EACH"], c.each)
			}
			if k.Tile.Meta["BLOCK"] != c.block || k.Grid[0] != c.programs {
				t.Errorf("BLOCK %d, grid %v: want BLOCK %d and %d programs", k.Tile.Meta["BLOCK"], k.Grid, c.block, c.programs)
			}
			if c.each && k.Grid[1] > 1 || !c.each && k.Grid[1] != 3*c.h {
				t.Errorf("grid %v: want %v", k.Grid, map[bool]string{true: "one axis", false: "a program a weight's block"}[c.each])
			}
			size := c.d * dh
			rng := tiletest.RNG(c.name)
			var args []any
			vals := map[*Node][]float32{}
			for _, in := range grp.Inputs {
				vals[in] = tiletest.Uniform(rng, size, -1, 1)
				args = append(args, vals[in])
			}
			if len(args) != 3*c.h || len(grp.heads.w) != 3*c.h {
				t.Fatalf("%d inputs, %d weights: want %d", len(args), len(grp.heads.w), 3*c.h)
			}
			const poison = float32(-7777)
			stack := make([]float32, 3*c.h*size+64)
			for i := range stack {
				stack[i] = poison
			}
			if err := interp.Interpret(k.Tile, k.Grid, append(args, stack)...); err != nil {
				t.Fatal(err)
			}
			for p := range 3 * c.h {
				w := vals[grp.heads.w[p]] // the stack's order: the q's, the k's, the v's
				for j := range size {
					if got := stack[p*size+j]; got != w[j] {
						t.Fatalf("stack[%d·%d + %d] = %g, want weight %d's %g", p, size, j, got, p, w[j])
					}
				}
			}
			for i := 3 * c.h * size; i < len(stack); i++ {
				if stack[i] != poison {
					t.Fatalf("stack[%d] past the stack written: %g", i, stack[i])
				}
			}
		})
	}
}
