package tile_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// TestFlattenGrid: a kernel whose programs read their coordinates on all
// three axes and the grid's sizes (inside a loop too), run over its grid,
// and its flattened copy run over the one axis of as many programs, write
// the same values; 64-bit indices (Index64) too; the copy's grid is X·Y·Z
// programs on axis 0, and a grid past 2³¹ − 1 programs is refused.
func TestFlattenGrid(t *testing.T) {
	for _, c := range []struct {
		name string
		grid tile.Grid
		i64  bool
	}{
		{"x y z", tile.Grid{3, 5, 7}, false},
		{"x y", tile.Grid{4, 6, 0}, false},
		{"y z only", tile.Grid{1, 9, 2}, false},
		{"x y z, 64-bit indices", tile.Grid{3, 5, 7}, true},
		{"one axis", tile.Grid{11, 1, 1}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			const blk = 8
			b := tile.NewBuilder("coords", tile.Meta{"BLOCK": blk})
			if c.i64 {
				b.Index64()
			}
			out := b.Ptr("out", tile.F32)
			x, y, z := b.ProgramID(0), b.ProgramID(1), b.ProgramID(2)
			nx, ny := b.NumPrograms(0), b.NumPrograms(1)
			// program (x, y, z) writes its block: lane i holds x + 10y + 100z + 1000i, plus Σ over a loop of 3 of nx·ny
			flat := b.Add(x, b.Mul(nx, b.Add(y, b.Mul(ny, z))))
			lanes := b.Arange(0, blk)
			val := b.Add(b.Add(b.Add(x, b.Mul(y, 10)), b.Mul(z, 100)), b.Mul(lanes, 1000))
			acc := b.For(0, 3, 1, []*tile.Value{b.Cast(val, tile.F32)}, func(k *tile.Value, cv []*tile.Value) []*tile.Value {
				return []*tile.Value{b.Add(cv[0], b.Cast(b.Mul(b.ProgramID(1), b.NumPrograms(2)), tile.F32))}
			})
			b.Store(b.AddPtr(out, b.Add(b.Mul(flat, blk), lanes)), acc[0], nil)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			g, _ := c.grid.Norm()
			n := g[0] * g[1] * g[2] * blk
			want, got := make([]float32, n), make([]float32, n)
			if err := interp.Interpret(k, c.grid, want); err != nil {
				t.Fatal(err)
			}
			before := k.String()
			fk, fg, err := k.FlattenGrid(c.grid)
			if err != nil {
				t.Fatal(err)
			}
			if fg != (tile.Grid{g[0] * g[1] * g[2], 1, 1}) {
				t.Fatalf("flattened grid %v", fg)
			}
			if err := interp.Interpret(fk, fg, got); err != nil {
				t.Fatalf("%v\n%v", err, fk)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("flattened: %v\nwant %v\n%v", got, want, fk)
			}
			if strings.Count(fk.String(), "get_program_id") != 1 || strings.Contains(fk.String(), "get_num_programs") {
				t.Fatalf("the copy reads the grid other than by its one program id:\n%v", fk)
			}
			if k.String() != before {
				t.Fatalf("the kernel itself changed:\n%v", k)
			}
		})
	}
	k, _ := tile.NewBuilder("empty", nil).Build()
	if _, _, err := k.FlattenGrid(tile.Grid{1 << 20, 1 << 12, 1}); err == nil || !strings.Contains(err.Error(), "programs") {
		t.Fatalf("a grid of 2³² programs: %v", err)
	}
}
