package native_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/codegen/cpu/pool"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestLaunchAll: LaunchAll of an optimizer-like update in place over
// tensors of many sizes (one element, a masked tail, whole blocks, a
// hundred programs), one dispatch on the pool, leaves every buffer bit for
// bit as the reference running each launch leaves it, the elements past
// each tensor's n (NaN) untouched; with the split threshold at 0 every
// worker takes part (each launch's programs spread over several workers),
// and at its default the small launches run with the large ones. A launch
// whose buffers overlap where it stores falls back (ErrFallback), for all.
func TestLaunchAll(t *testing.T) {
	requireJIT(t)
	const block = 256
	b := tile.NewBuilder("launchall", nil)
	pw, pg, pm := b.Ptr("w", tile.F32), b.Ptr("g", tile.F32), b.Ptr("m", tile.F32)
	n := b.Param("n", tile.I32)
	offs := b.Add(b.Mul(b.ProgramID(0), block), b.Arange(0, block))
	adamLike(inplaceEnv{b: b, w: b.AddPtr(pw, offs), g: b.AddPtr(pg, offs), m: b.AddPtr(pm, offs), mask: b.Lt(offs, n), offs: offs, pw: pw})
	k, nk := buildNative(t, b)
	defer nk.Free()
	sizes := []int{1, 255, 256, 700, 4096, 100*block - 3, 17}
	for _, split := range []float64{0, -1} {
		t.Run(fmt.Sprintf("split threshold %v", split), func(t *testing.T) {
			if split >= 0 {
				defer native.SetParallelNs(native.SetParallelNs(split))
			}
			rng := tiletest.RNG(t.Name())
			mk := func() ([][]any, []tile.Grid) {
				var sets [][]any
				var grids []tile.Grid
				for _, size := range sizes {
					progs := tile.CDiv(size, block)
					var args []any
					for i := range 3 {
						buf := tiletest.Uniform(rng, progs*block+5, float64(i)-1, 1)
						for j := size; j < len(buf); j++ {
							buf[j] = float32(math.NaN())
						}
						args = append(args, buf)
					}
					args = append(args, int32(size), float32(0.9), float32(-1e-3), float32(1e-8))
					sets = append(sets, args)
					grids = append(grids, tile.Grid{progs})
				}
				return sets, grids
			}
			sets, grids := mk()
			clone := func() [][]any {
				out := make([][]any, len(sets))
				for i, args := range sets {
					for _, a := range args {
						if buf, ok := a.([]float32); ok {
							a = append([]float32(nil), buf...)
						}
						out[i] = append(out[i], a)
					}
				}
				return out
			}
			want, got := clone(), clone()
			for i := range want {
				if err := (tiletest.Interp{}).Launch(k, grids[i], want[i]...); err != nil {
					t.Fatal(err)
				}
			}
			var ls []native.Launch1
			for i := range got {
				ls = append(ls, native.Launch1{Grid: grids[i], Args: got[i]})
			}
			if err := nk.LaunchAll(ls); err != nil {
				t.Fatalf("LaunchAll: %v (pool of %d)", err, pool.Default().Workers())
			}
			for i := range want {
				for bi := range 3 {
					w, g := want[i][bi].([]float32), got[i][bi].([]float32)
					for j := range w {
						if math.Float32bits(w[j]) != math.Float32bits(g[j]) {
							t.Fatalf("tensor %d (size %d), buffer %d [%d] = %v, want %v", i, sizes[i], bi, j, g[j], w[j])
						}
					}
				}
			}
		})
	}
	t.Run("overlapping buffers", func(t *testing.T) {
		buf := make([]float32, 2*block)
		ok := []any{make([]float32, block), make([]float32, block), make([]float32, block), int32(block), float32(0.9), float32(-1e-3), float32(1e-8)}
		bad := []any{buf, buf[block/2:], make([]float32, block), int32(block), float32(0.9), float32(-1e-3), float32(1e-8)}
		if err := nk.LaunchAll([]native.Launch1{{Grid: tile.Grid{1}, Args: ok}, {Grid: tile.Grid{1}, Args: bad}}); err != native.ErrFallback {
			t.Fatalf("LaunchAll with w and g overlapping: %v, want ErrFallback", err)
		}
	})
}
