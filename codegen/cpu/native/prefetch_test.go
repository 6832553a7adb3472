package native_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/graphpass"
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

// TestColumnPartsNative: graphpass's column sums split over row chunks for
// a CPU target (Kernel.Parts: each program a chunk of rows of a column
// block, its sums a part of the scratch; Combine adds the parts in order)
// compile natively, both kernels, and on each ISA give the reference's
// parts and sums bit for bit (productOnEachISA: scratch and outputs
// poisoned; the ISAs the same bits), with tails in rows and columns and
// two sibling sums in one kernel; the estimated work of a part (a loop
// over [lo, min(lo + CHUNK, rows))) is its chunk's, not a guess.
func TestColumnPartsNative(t *testing.T) {
	requireJIT(t)
	tg := graphpass.CPU(16)
	tg.Native = true
	for _, c := range []struct {
		name       string
		rows, cols int
		siblings   bool
	}{
		{name: "8192×1024 (colsum large): 32 chunks of whole rows", rows: 8192, cols: 1024},
		{name: "1000×777 (colsum small): 768 columns and a tail of the last 16", rows: 1000, cols: 777},
		{name: "600×1100: 1024 columns and a tail of the last 96", rows: 600, cols: 1100},
		{name: "1001×777: Σ x and Σ x⊙y with a tail", rows: 1001, cols: 777, siblings: true},
		{name: "4097×1000: rows and columns off every block", rows: 4097, cols: 1000},
		{name: "3001×768: Σ x and Σ x⊙y in one kernel", rows: 3001, cols: 768, siblings: true},
		{name: "4095×33: 32 columns and a tail of the last 16, rows off the tile", rows: 4095, cols: 33},
		{name: "20000×12: fewer columns than a vector, masked parts and combining", rows: 20000, cols: 12},
	} {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() && c.rows*c.cols > 1<<22 {
				t.Skip("-short: 8M elements on the interpreter")
			}
			op := "sum"
			if c.siblings {
				op = "siblings"
			}
			k, grp := columnKernel(t, c.rows, c.cols, op, tg)
			if k.Parts < 2 || k.Combine == nil {
				t.Fatalf("%d parts: not split (meta %v)", k.Parts, k.Tile.Meta)
			}
			// the pool's estimate of a program's work (which sizes the
			// launch's workers and chunks) counts its chunk's rows: the
			// parts' estimates add up to the unsplit kernel's
			whole := tg
			whole.Tune = func(_ *graphpass.Group, m tile.Meta) { m["CHUNK"] = c.rows }
			ku, err := graphpass.Emit(grp, whole, tile.PrecIEEE)
			if err != nil || ku.Parts > 1 {
				t.Fatalf("unsplit: %v, %d parts", err, ku.Parts)
			}
			var works [2]float64
			for i, kk := range []*tile.Kernel{k.Tile, ku.Tile} {
				nk, err := native.Compile(kk)
				if err != nil {
					t.Fatal(err)
				}
				works[i] = native.Work(nk)
				nk.Free()
			}
			if r := works[0] * float64(k.Parts) / works[1]; r < 0.8 || r > 1.25 {
				t.Errorf("estimated work: %.0f ns a part × %d parts, %.0f ns unsplit (%.2f×)", works[0], k.Parts, works[1], r)
			}
			var ins []any
			for i := range grp.Inputs {
				ins = append(ins, tiletest.Uniform(tiletest.RNG(fmt.Sprint(c.name, i)), c.rows*c.cols, -2, 2))
			}
			// poisoned buffers of the given sizes, launched after args;
			// their elements end to end
			poisoned := func(launch func(args ...any) error, args []any, sizes []int) []float32 {
				var all []float32
				var bufs []any
				for _, n := range sizes {
					b := make([]float32, n)
					for i := range b {
						b[i] = float32(math.NaN())
					}
					bufs = append(bufs, b)
				}
				if err := launch(append(slices.Clone(args), bufs...)...); err != nil {
					t.Fatal(err)
				}
				for _, b := range bufs {
					all = append(all, b.([]float32)...)
				}
				return all
			}
			sizes := k.ScratchSizes()
			same := func(what string) func(isa string, got, want []float32) {
				return func(isa string, got, want []float32) {
					for i := range want {
						if want[i] != want[i] {
							t.Fatalf("%s: the reference left element %d unwritten", what, i)
						}
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s, %s: element %d = %v, want %v", isa, what, i, got[i], want[i])
						}
					}
				}
			}
			var parts []float32
			productOnEachISA(t, k.Tile, k.Grid, func(launch func(args ...any) error) []float32 {
				p := poisoned(launch, ins, sizes)
				if parts == nil {
					parts = p // the reference's, which the combine reads
				}
				return p
			}, same("parts"))
			var scratch []any
			for at, n := 0, 0; n < len(sizes); n++ {
				scratch = append(scratch, parts[at:at+sizes[n]])
				at += sizes[n]
			}
			outs := make([]int, k.Outs)
			for i := range outs {
				outs[i] = c.cols
			}
			productOnEachISA(t, k.Combine, k.CombineGrid, func(launch func(args ...any) error) []float32 {
				return poisoned(launch, scratch, outs)
			}, same("sums"))
		})
	}
}

// TestColumnsInlineNative: graphpass's column reductions small enough for
// one core (one chunk of whole rows: a block, a block and a tail, two
// blocks the last shifted) compile natively and give the reference's
// outputs bit for bit on each ISA (outputs poisoned): sums, sibling sums,
// a maximum with NaNs and signed zeros in the input, rows off the tile.
func TestColumnsInlineNative(t *testing.T) {
	requireJIT(t)
	tg := graphpass.CPU(16)
	tg.Native = true
	for _, c := range []struct {
		name       string
		rows, cols int
		op         string // "sum", "max", "siblings"
	}{
		{name: "64×777 sum: 768 and a tail of 16", rows: 64, cols: 777, op: "sum"},
		{name: "64×777 max: 768 and a tail of 16, NaNs and signed zeros", rows: 64, cols: 777, op: "max"},
		{name: "64×768 Σ x and Σ x⊙y: whole rows", rows: 64, cols: 768, op: "siblings"},
		{name: "20×1000 sum: two blocks of 512, the last shifted", rows: 20, cols: 1000, op: "sum"},
		{name: "7×33 sum: 32 and a tail of 16, rows off the tile", rows: 7, cols: 33, op: "sum"},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, grp := columnKernel(t, c.rows, c.cols, c.op, tg)
			if m := k.Tile.Meta; m["CHUNK"] != c.rows || m["BLOCK_O"] < 32 || k.Parts > 1 || m["BLOCK_O"] == 32 && c.cols > 64 {
				t.Fatalf("meta %v, %d parts: not one chunk of whole rows", m, k.Parts)
			}
			var ins []any
			for i := range grp.Inputs {
				d := tiletest.Uniform(tiletest.RNG(fmt.Sprint(c.name, i)), c.rows*c.cols, -2, 2)
				if c.op == "max" { // NaNs, a column of signed zeros, infinities
					for r := range c.rows {
						d[r*c.cols+3] = float32(math.Copysign(0, float64(r%2)-0.5))
					}
					d[5*c.cols+7], d[9*c.cols+7] = float32(math.NaN()), float32(math.Inf(1))
					d[2*c.cols+c.cols-1] = float32(math.NaN())
				}
				ins = append(ins, d)
			}
			outs := max(1, k.Outs)
			productOnEachISA(t, k.Tile, k.Grid, func(launch func(args ...any) error) []float32 {
				args := slices.Clone(ins)
				var bufs [][]float32
				for range outs {
					b := make([]float32, c.cols)
					for i := range b {
						b[i] = float32(math.NaN())
					}
					bufs = append(bufs, b)
					args = append(args, b)
				}
				if err := launch(args...); err != nil {
					t.Fatal(err)
				}
				var all []float32
				for _, b := range bufs {
					all = append(all, b...)
				}
				return all
			}, func(isa string, got, want []float32) {
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(c.op == "max" && got[i] != got[i] && want[i] != want[i]) {
						t.Fatalf("%s: element %d = %v, want %v", isa, i, got[i], want[i])
					}
				}
			})
		})
	}
}

// columnKernel is the one kernel graphpass makes for tg of a column
// reduction over a rows×cols matrix: op "sum" (Σ[0] x), "max" (max[0] x) or
// "siblings" (Σ[0] x and Σ[0] x⊙y), and its group.
func columnKernel(t testing.TB, rows, cols int, op string, tg graphpass.Target) (*graphpass.Kernel, *graphpass.Group) {
	t.Helper()
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(rows, cols), G.WithName("x"))
	switch op {
	case "max":
		G.Must(G.Max(x, 0))
	case "siblings":
		y := G.NewMatrix(g, tensor.Float32, G.WithShape(rows, cols), G.WithName("y"))
		G.Must(G.Sum(x, 0))
		G.Must(G.Sum(G.Must(G.HadamardProd(x, y)), 0))
	default:
		G.Must(G.Sum(x, 0))
	}
	gr, err := graphpass.Import(g)
	if err != nil {
		t.Fatal(err)
	}
	groups := graphpass.Partition(gr, graphpass.Options{Target: tg})
	if len(groups) != 1 {
		t.Fatalf("%d groups, want 1", len(groups))
	}
	k, err := graphpass.Emit(groups[0], tg, tile.PrecIEEE)
	if err != nil {
		t.Fatal(err)
	}
	return k, groups[0]
}
