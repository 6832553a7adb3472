package native_test

import (
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestColumnFormPrefetch: graphpass's column form of a column sum (each
// program a band of bo columns, a [br, bo] tile added down the rows in a
// loop, reduced across its rows at the end; the rows n elements apart)
// hints the strided rows prefetchRows on into L2 in zmm (prefetcht1: the
// hint changes no result) and not without AVX-512; the sums are bit for
// bit the reference's, with tails in rows (a masked last step) and
// columns (a masked last band), on a poisoned output.
func TestColumnFormPrefetch(t *testing.T) {
	requireJIT(t)
	for _, c := range []struct {
		name      string
		m, n      int
		br, bo    int
		wantHints bool
		tailsRows bool
	}{
		{name: "1000×777 in 32-column bands (colsum small on 16 cores)", m: 1000, n: 777, br: 128, bo: 32, wantHints: true},
		{name: "256×1024 in 128-column bands", m: 256, n: 1024, br: 32, bo: 128, wantHints: true},
		{name: "rows no wider than the band: no hint", m: 100, n: 32, br: 32, bo: 32},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("colsum", nil)
			px, py := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
			cols := b.Add(b.Mul(b.ProgramID(0), c.bo), b.Arange(0, c.bo))
			col := b.ExpandDims(cols, 0)
			rr := b.ExpandDims(b.Arange(0, c.br), 1)
			acc := b.For(0, c.m, c.br, []*tile.Value{b.Zeros(tile.F32, c.br, c.bo)}, func(r0 *tile.Value, cv []*tile.Value) []*tile.Value {
				rows := b.Add(rr, r0)
				m := b.And(b.Lt(rows, c.m), b.Lt(col, c.n))
				v := b.Load(b.AddPtr(px, b.Add(b.Mul(rows, c.n), col)), m, 0.0)
				return []*tile.Value{b.Add(cv[0], v)}
			})[0]
			b.Store(b.AddPtr(py, cols), b.Sum(acc, 0), b.Lt(cols, c.n))
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			x := tiletest.Uniform(tiletest.RNG(c.name), c.m*c.n, -1, 1)
			grid := tile.Grid{(c.n + c.bo - 1) / c.bo}
			run := func(launch func(args ...any) error) []float32 {
				y := make([]float32, c.n)
				for i := range y {
					y[i] = float32(math.NaN())
				}
				if err := launch(x, y); err != nil {
					t.Fatal(err)
				}
				return y
			}
			want := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, grid, args...) })
			for _, isa := range isas(t) {
				native.SetAVX512(isa != "avx2")
				nk, err := native.Compile(k)
				if err != nil {
					t.Fatalf("%s: not compiled natively: %v\n%v", isa, err, k)
				}
				defer nk.Free()
				if n := native.PrefetchesL2(nk); (n > 0) != (c.wantHints && isa != "avx2") {
					t.Errorf("%s: %d prefetcht1 hints of strided rows", isa, n)
				}
				got := run(func(args ...any) error { return nk.Launch(grid, args...) })
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s: y[%d] = %v (%#x), want %v (%#x)", isa, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
				}
			}
		})
	}
}
