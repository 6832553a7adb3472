package tile_test

import (
	"fmt"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// A vector add written as in Triton: each program instance handles one block
// of BLOCK elements, the mask keeps the last one inside n.
func Example() {
	b := tile.NewBuilder("vec_add", tile.Meta{"BLOCK": 128})
	x, y, out := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32), b.Ptr("out", tile.F32)
	n := b.Param("n", tile.I32)
	BLOCK := b.BlockSize("BLOCK")
	offs := b.Add(b.Mul(b.ProgramID(0), BLOCK), b.Arange(0, BLOCK))
	mask := b.Lt(offs, n)
	sum := b.Add(b.Load(b.AddPtr(x, offs), mask, nil), b.Load(b.AddPtr(y, offs), mask, nil))
	b.Store(b.AddPtr(out, offs), sum, mask)
	k, err := b.Build() // semantic checks, then the verifier
	if err != nil {
		panic(err)
	}

	const N = 1000
	xs, ys, zs := make([]float32, N), make([]float32, N), make([]float32, N)
	for i := range xs {
		xs[i], ys[i] = float32(i), 0.5
	}
	grid := tile.Grid{tile.CDiv(N, 128)} // 8 programs; the last one handles 104 elements
	if err := interp.Interpret(k, grid, xs, ys, zs, N); err != nil {
		panic(err)
	}
	fmt.Println(grid, zs[0], zs[999])
	// Output: [8 0 0] 0.5 999.5
}
