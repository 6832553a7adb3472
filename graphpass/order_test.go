package graphpass

import (
	"fmt"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// TestTileOrder: the tile each program of a grouped grid (GROUP_M) takes,
// run in the reference interpreter: every tile once, in groups of g rows
// of tiles (fewer in the last where g does not divide the rows), each
// group column by column; g = 1 and g ≥ the rows keep the 2-D grid.
func TestTileOrder(t *testing.T) {
	for _, c := range []struct{ g, gm, gn int }{
		{2, 4, 3}, {3, 7, 5}, {8, 16, 32}, {8, 10, 3}, {5, 6, 1}, {1, 4, 4}, {4, 4, 4}, {9, 4, 4},
	} {
		t.Run(fmt.Sprintf("GROUP_M=%d %dx%d", c.g, c.gm, c.gn), func(t *testing.T) {
			b := tile.NewBuilder("order", tile.Meta{})
			out := b.Ptr("out", tile.I32)
			pm, pn, grouped := tileOrder(b, c.g, c.gm, c.gn)
			grid := tile.Grid{c.gm, c.gn}
			if grouped {
				grid = tile.Grid{c.gm * c.gn, 1}
			}
			if want := c.g > 1 && c.g < c.gm; grouped != want {
				t.Fatalf("grouped %v, want %v", grouped, want)
			}
			pid := b.Add(b.ProgramID(0), b.Mul(b.ProgramID(1), grid[0]))
			b.Store(b.AddPtr(out, b.Mul(pid, 2)), pm, nil)
			b.Store(b.AddPtr(out, b.Add(b.Mul(pid, 2), 1)), pn, nil)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			got := make([]int32, 2*c.gm*c.gn)
			for i := range got {
				got[i] = -1
			}
			if err := interp.Interpret(k, grid, got); err != nil {
				t.Fatal(err)
			}
			// the expected order: program ids in launch order (axis 0
			// fastest), each taking the next tile of its group's walk
			var want []int32
			if !grouped {
				for pn := range c.gn {
					for pm := range c.gm {
						want = append(want, int32(pm), int32(pn))
					}
				}
			} else {
				for first := 0; first < c.gm; first += c.g {
					size := min(c.g, c.gm-first)
					for pn := range c.gn {
						for pm := first; pm < first+size; pm++ {
							want = append(want, int32(pm), int32(pn))
						}
					}
				}
			}
			seen := map[[2]int32]bool{}
			for i := 0; i < len(got); i += 2 {
				tl := [2]int32{got[i], got[i+1]}
				if seen[tl] || tl[0] < 0 || int(tl[0]) >= c.gm || tl[1] < 0 || int(tl[1]) >= c.gn {
					t.Fatalf("program %d takes tile %v: out of range or twice", i/2, tl)
				}
				seen[tl] = true
				if got[i] != want[i] || got[i+1] != want[i+1] {
					t.Fatalf("program %d takes tile %v, want (%d, %d)", i/2, tl, want[i], want[i+1])
				}
			}
		})
	}
}
