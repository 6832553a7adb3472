package native_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestPrefixRows: a phase over blocks [br, bc] of an r×c matrix whose
// rows are wider than c (bc = 16, c = 14 or 15 or 9: every row's last
// lanes masked off) runs its rows unmasked over their first c lanes
// where every store's mask holds there (native.PrefixRows): y = 2·x + 1
// stored as it is (a contiguous store, its last vector under the
// constant mask of its lanes) or transposed (a scatter of those lanes
// only), f32 and f64. Where a store is not under the prefix (a second
// store of every lane) or the phase reduces, the rows keep their masked
// loop. Every result bit for bit the reference's, on poisoned outputs
// whose elements past each row's prefix are never stored (y's rows are
// wider than c, or y transposed holds bc rows).
func TestPrefixRows(t *testing.T) {
	requireJIT(t)
	for _, c := range []struct {
		name       string
		dt         tile.DType
		r, c, br   int
		transposed bool
		extra      bool // a second, unmasked store of every lane into z
		wantPrefix int
	}{
		{name: "f32 20×14 in 4×16, as stored", dt: tile.F32, r: 20, c: 14, br: 4, wantPrefix: 1},
		{name: "f32 20×14 in 4×16, transposed", dt: tile.F32, r: 20, c: 14, br: 4, transposed: true, wantPrefix: 1},
		{name: "f32 13×9 in 2×16, transposed (the last row past the matrix)", dt: tile.F32, r: 13, c: 9, br: 2, transposed: true, wantPrefix: 1},
		{name: "f64 20×15 in 4×16, as stored", dt: tile.F64, r: 20, c: 15, br: 4, wantPrefix: 1},
		{name: "f64 20×14 in 4×16, transposed", dt: tile.F64, r: 20, c: 14, br: 4, transposed: true, wantPrefix: 1},
		{name: "f32 a second store of every lane: masked rows", dt: tile.F32, r: 20, c: 14, br: 4, extra: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			const bc, pitch = 16, 20
			b := tile.NewBuilder("prefix", nil)
			px, py := b.Ptr("x", c.dt), b.Ptr("y", c.dt)
			var pz *tile.Value
			if c.extra {
				pz = b.Ptr("z", c.dt)
			}
			i := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), c.br), b.Arange(0, c.br)), 1)
			j := b.ExpandDims(b.Arange(0, bc), 0)
			mask := b.And(b.Lt(i, c.r), b.Lt(j, c.c))
			v := b.Load(b.AddPtr(px, b.Add(b.Mul(i, c.c), j)), mask, 0.0)
			w := b.Add(b.Mul(v, 2.0), 1.0)
			// y's rows pitch apart (gaps past each row's c elements), or y
			// transposed in a buffer of bc rows: a lane past the prefix
			// stored lands on a poisoned element
			at := b.Add(b.Mul(i, pitch), j)
			if c.transposed {
				at = b.Add(b.Mul(j, c.r), i)
			}
			b.Store(b.AddPtr(py, at), w, mask)
			if c.extra {
				b.Store(b.AddPtr(pz, b.Add(b.Mul(b.ProgramID(0), c.br*bc), b.Add(b.Mul(b.BroadcastTo(b.Sub(i, b.Mul(b.ProgramID(0), c.br)), tile.Shp(c.br, bc)), bc), b.BroadcastTo(j, tile.Shp(c.br, bc))))), w, nil)
			}
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			grid := tile.Grid{(c.r + c.br - 1) / c.br}
			zn := grid[0] * c.br * bc
			for _, isa := range isas(t) {
				nk := compileFor(t, isa, k)
				if got := native.PrefixRows(nk); got != c.wantPrefix {
					t.Errorf("%s: %d phases with prefix rows, want %d", isa, got, c.wantPrefix)
				}
				rng := tiletest.RNG(c.name)
				x := make([]float64, c.r*c.c)
				for i := range x {
					x[i] = rng.Float64()*2 - 1
				}
				n := c.r * pitch
				if c.transposed {
					n = bc * c.r
				}
				run := func(launch func(args ...any) error) ([]float64, error) {
					if !c.extra {
						return launchIn(c.dt, x, n, n, launch)
					}
					var z []float64
					y, err := launchIn(c.dt, x, n, n, func(args ...any) error {
						zz, err := launchIn(c.dt, nil, zn, zn, func(zargs ...any) error { return launch(args[0], args[1], zargs[1]) })
						z = zz
						return err
					})
					return append(y, z...), err
				}
				got, want, ok := againstReference(t, isa, nk, k, grid, false, run)
				if !ok {
					continue
				}
				sameBits64(t, isa, got, want, 0)
			}
		})
	}
}
