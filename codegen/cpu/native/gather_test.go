package native_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestMaskedGatherNative: masked loads whose lanes lie a constant stride
// of more than one element apart — a transpose's reads, y[c, r] = 2·x[r, c]
// for an r×c matrix x, program p writing rows [p·BR, (p+1)·BR) of y in a
// block [BR, BC] masked to the matrix — run natively, in f32 and f64, bit
// for bit the reference's. The masked-off lanes' addresses lie past x's
// end where the matrix ends (their elements are not read), and a mask
// that lets a lane past the end through falls back (ErrFallback). f32
// loads with a value for masked-off lanes (other) take it there.
func TestMaskedGatherNative(t *testing.T) {
	requireJIT(t)
	for _, c := range []struct {
		name         string
		dt           tile.DType
		rows, cols   int // x's
		br, bc       int // the block: rows of y (x's columns), columns of y (x's rows)
		other        bool
		pastTheEnd   bool // the mask lets one row of x too many through
		wantFallback bool
		// xrows: x's rows in memory (0: rows), the mask reading rows of
		// them: where a row of lanes lies in x, the unmasked loop reads
		// every lane and clears the masked-off ones (fast.go: rowChecked;
		// wantChecked: planned so, as every block of lanes wider than the
		// mask is; rows whose lanes leave x run the masked loop)
		xrows       int
		wantChecked bool
	}{
		{name: "f32 5×3, one row a program", dt: tile.F32, rows: 5, cols: 3, br: 1, bc: 8, wantChecked: true},
		{name: "f32 28×32, rows of 28 in 32 lanes", dt: tile.F32, rows: 28, cols: 32, br: 1, bc: 32},
		{name: "f32 49×128, 4 rows a program", dt: tile.F32, rows: 49, cols: 128, br: 4, bc: 64},
		{name: "f32 13×7, 2 rows a program, the last program half out", dt: tile.F32, rows: 13, cols: 7, br: 2, bc: 16, wantChecked: true},
		{name: "f32 19×5, masked-off lanes take -1", dt: tile.F32, rows: 19, cols: 5, br: 1, bc: 32, other: true},
		{name: "f32 13×7 in 16 rows of x: each row read whole", dt: tile.F32, rows: 13, cols: 7, br: 2, bc: 16, xrows: 16, wantChecked: true},
		{name: "f32 13×7 in 16 rows of x, masked-off lanes take -1", dt: tile.F32, rows: 13, cols: 7, br: 2, bc: 16, xrows: 16, other: true, wantChecked: true},
		{name: "f32 6×5 in 9 rows of x, one row a program", dt: tile.F32, rows: 6, cols: 5, br: 1, bc: 8, xrows: 9, wantChecked: true},
		{name: "f32 a lane past the end falls back", dt: tile.F32, rows: 9, cols: 4, br: 1, bc: 16, pastTheEnd: true, wantFallback: true, wantChecked: true},
		{name: "f64 5×3, one row a program", dt: tile.F64, rows: 5, cols: 3, br: 1, bc: 8},
		{name: "f64 28×32", dt: tile.F64, rows: 28, cols: 32, br: 1, bc: 32},
		{name: "f64 13×7, 2 rows a program", dt: tile.F64, rows: 13, cols: 7, br: 2, bc: 16},
		{name: "f64 a lane past the end falls back", dt: tile.F64, rows: 9, cols: 4, br: 1, bc: 16, pastTheEnd: true, wantFallback: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("gather_masked", nil)
			px, py := b.Ptr("x", c.dt), b.Ptr("y", c.dt)
			yr := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), c.br), b.Arange(0, c.br)), 1) // x's column
			yc := b.ExpandDims(b.Arange(0, c.bc), 0)                                     // x's row
			limit := c.rows
			if c.pastTheEnd {
				limit++
			}
			mask := b.And(b.Lt(yr, c.cols), b.Lt(yc, limit))
			var other any
			if c.other {
				other = -1.0
			}
			v := b.Load(b.AddPtr(px, b.Add(b.Mul(yc, c.cols), yr)), mask, other)
			b.Store(b.AddPtr(py, b.Add(b.Mul(yr, c.rows), yc)), b.Mul(v, 2.0), b.And(b.Lt(yr, c.cols), b.Lt(yc, c.rows)))
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			grid := tile.Grid{(c.cols + c.br - 1) / c.br}
			xrows := max(c.rows, c.xrows)
			for _, isa := range isas(t) {
				nk := compileFor(t, isa, k)
				if n := native.RowChecked(nk); c.wantChecked != (n > 0) {
					t.Fatalf("%s: %d masked accesses checked once a row; want some: %v", isa, n, c.wantChecked)
				}
				rng := tiletest.RNG(c.name)
				x := make([]float64, xrows*c.cols)
				for i := range x {
					x[i] = rng.Float64()*2 - 1
				}
				run := func(launch func(args ...any) error) ([]float64, error) {
					return launchIn(c.dt, x, c.rows*c.cols, c.rows*c.cols, launch)
				}
				got, want, ok := againstReference(t, isa, nk, k, grid, c.wantFallback, run)
				if !ok {
					continue
				}
				sameBits64(t, isa, got, want, len(want))
			}
		})
	}
}

// launchIn launches with a copy of x and the first n of size elements of
// y, poisoned with NaN (those past n show a store let through), in type
// dt (f32: converted there and back), and returns all of y.
func launchIn(dt tile.DType, x []float64, size, n int, launch func(args ...any) error) ([]float64, error) {
	y := make([]float64, size)
	for i := range y {
		y[i] = math.NaN()
	}
	if dt == tile.F64 {
		return y, launch(append([]float64(nil), x...), y[:n])
	}
	x32, y32 := make([]float32, len(x)), make([]float32, size)
	for i := range x {
		x32[i] = float32(x[i])
	}
	for i := range y32 {
		y32[i] = float32(y[i])
	}
	err := launch(x32, y32[:n])
	for i := range y {
		y[i] = float64(y32[i])
	}
	return y, err
}

// sameBits64 fails t unless got is want bit for bit, and where stored (the
// first stored elements) no NaN: each one of them written.
func sameBits64(t *testing.T, what string, got, want []float64, stored int) {
	t.Helper()
	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) || i < stored && math.IsNaN(got[i]) {
			t.Fatalf("%s: element %d = %v natively, %v on the reference", what, i, got[i], want[i])
		}
	}
}

// againstReference launches nk, then the reference interpreter, over
// grid through run (each with fresh, poisoned outputs) and returns both
// results; where wantFallback, it checks that nk falls back instead (a
// lane past a buffer's end) and returns ok false.
func againstReference[T any](t *testing.T, isa string, nk *native.Kernel, k *tile.Kernel, grid tile.Grid, wantFallback bool, run func(launch func(args ...any) error) ([]T, error)) (got, want []T, ok bool) {
	t.Helper()
	got, err := run(func(args ...any) error { return nk.Launch(grid, args...) })
	if wantFallback {
		if !errors.Is(err, native.ErrFallback) {
			t.Fatalf("%s: a lane past the end: got %v, want ErrFallback", isa, err)
		}
		return nil, nil, false
	}
	if err != nil {
		t.Fatalf("%s: %v", isa, err)
	}
	want, err = run(func(args ...any) error { return tiletest.Interp{}.Launch(k, grid, args...) })
	if err != nil {
		t.Fatal(err)
	}
	return got, want, true
}

// TestScatterNative: stores whose lanes lie a constant stride of more than
// one element apart — a transpose written from the rows it reads, y[c, r]
// = 2·x[r, c] for an r×c matrix x, program p reading rows [p·BR, (p+1)·BR)
// of x in a block [BR, BC] — run natively in f32 and f64, bit for bit the
// reference's, masked (rows and columns past the matrix: their addresses
// lie past y's end and are not written) and unmasked (whole blocks: the
// row's range checked once); every element of y not stored keeps its
// poison. A mask that lets a lane past the end through falls back.
func TestScatterNative(t *testing.T) {
	requireJIT(t)
	for _, c := range []struct {
		name         string
		dt           tile.DType
		rows, cols   int // x's
		br, bc       int // the block over x
		unmasked     bool
		pastTheEnd   bool
		wantFallback bool
	}{
		{name: "f32 6×8 unmasked, 2 rows a program", dt: tile.F32, rows: 6, cols: 8, br: 2, bc: 8, unmasked: true},
		{name: "f32 4×16 unmasked, two vectors a row", dt: tile.F32, rows: 4, cols: 16, br: 1, bc: 16, unmasked: true},
		{name: "f32 28×28 in 32 lanes", dt: tile.F32, rows: 28, cols: 28, br: 1, bc: 32},
		{name: "f32 13×7, 2 rows a program, the last half out", dt: tile.F32, rows: 13, cols: 7, br: 2, bc: 8},
		{name: "f32 9×3 in 4 lanes (a partial vector)", dt: tile.F32, rows: 9, cols: 3, br: 1, bc: 4},
		{name: "f32 a lane past the end falls back", dt: tile.F32, rows: 9, cols: 4, br: 1, bc: 8, pastTheEnd: true, wantFallback: true},
		{name: "f64 6×8 unmasked, 2 rows a program", dt: tile.F64, rows: 6, cols: 8, br: 2, bc: 8, unmasked: true},
		{name: "f64 28×28 in 32 lanes", dt: tile.F64, rows: 28, cols: 28, br: 1, bc: 32},
		{name: "f64 13×7, 2 rows a program, the last half out", dt: tile.F64, rows: 13, cols: 7, br: 2, bc: 8},
		{name: "f64 9×3 in 4 lanes (a partial vector)", dt: tile.F64, rows: 9, cols: 3, br: 1, bc: 4},
		{name: "f64 a lane past the end falls back", dt: tile.F64, rows: 9, cols: 4, br: 1, bc: 8, pastTheEnd: true, wantFallback: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("scatter", nil)
			px, py := b.Ptr("x", c.dt), b.Ptr("y", c.dt)
			xr := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), c.br), b.Arange(0, c.br)), 1)
			xc := b.ExpandDims(b.Arange(0, c.bc), 0)
			var in, out *tile.Value
			if !c.unmasked {
				in = b.And(b.Lt(xr, c.rows), b.Lt(xc, c.cols))
				out = in
				if c.pastTheEnd {
					out = b.And(b.Lt(xr, c.rows), b.Lt(xc, c.cols+1))
				}
			}
			v := b.Load(b.AddPtr(px, b.Add(b.Mul(xr, c.cols), xc)), in, nil)
			b.Store(b.AddPtr(py, b.Add(b.Mul(xc, c.rows), xr)), b.Mul(v, 2.0), out)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			grid := tile.Grid{(c.rows + c.br - 1) / c.br}
			for _, isa := range isas(t) {
				nk := compileFor(t, isa, k)
				rng := tiletest.RNG(c.name)
				x := make([]float64, c.rows*c.cols)
				for i := range x {
					x[i] = rng.Float64()*2 - 1
				}
				n := c.rows * c.cols
				run := func(launch func(args ...any) error) ([]float64, error) {
					// room past the end: a lane let through would write there
					return launchIn(c.dt, x, n+c.rows, n, launch)
				}
				got, want, ok := againstReference(t, isa, nk, k, grid, c.wantFallback, run)
				if !ok {
					continue
				}
				sameBits64(t, isa, got, want, n)
			}
		})
	}
}

// TestStridedFastRows: a phase whose accesses all lie a stride apart
// between lanes — y[c, r] = 2·x[c, r] for cols×rows matrices (f32, f64) read in
// blocks [br, cols] of their transposes: a gather and a scatter — under
// masks that hold over whole rows of most programs has an unmasked row
// loop (native.FastPhases): rows whose masks hold (and whose lanes, a
// stride apart, lie in the buffers: checked once a row) load and store
// lane by lane without the per-lane tests, the others take the masked
// loop; the results are the reference's bit for bit, the last program's
// second row (past the matrices) never touched.
func TestStridedFastRows(t *testing.T) {
	requireJIT(t)
	const rows, cols, br = 13, 16, 2
	for _, dt := range []tile.DType{tile.F32, tile.F64} {
		b := tile.NewBuilder("strided_fast", nil)
		px, py := b.Ptr("x", dt), b.Ptr("y", dt)
		r := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), br), b.Arange(0, br)), 1)
		c := b.ExpandDims(b.Arange(0, cols), 0)
		mask := b.And(b.Lt(r, rows), b.Lt(c, cols))
		at := b.Add(b.Mul(c, rows), r)
		v := b.Load(b.AddPtr(px, at), mask, nil)
		b.Store(b.AddPtr(py, at), b.Mul(v, 2.0), mask)
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		grid := tile.Grid{(rows + br - 1) / br}
		for _, isa := range isas(t) {
			nk := compileFor(t, isa, k)
			if native.FastPhases(nk) == 0 {
				t.Fatalf("%v %s: no unmasked row loop", dt, isa)
			}
			rng := tiletest.RNG("TestStridedFastRows")
			x := make([]float64, rows*cols)
			for i := range x {
				x[i] = rng.Float64()*2 - 1
			}
			n := rows * cols
			run := func(launch func(args ...any) error) ([]float64, error) { return launchIn(dt, x, n, n, launch) }
			got, want, _ := againstReference(t, isa, nk, k, grid, false, run)
			sameBits64(t, fmt.Sprint(dt, " ", isa), got, want, len(want))
			// y one element short: the row that stores its last element, its
			// masks holding, must not pass the row's range check (lanes a
			// stride apart: its last lane 15·13 elements on), and the launch
			// falls back with the element past the end untouched
			y, err := launchIn(dt, x, n, n-1, func(args ...any) error { return nk.Launch(grid, args...) })
			if !errors.Is(err, native.ErrFallback) {
				t.Fatalf("%v %s: y one short: got %v, want ErrFallback", dt, isa, err)
			}
			if last := y[n-1]; !math.IsNaN(last) {
				t.Fatalf("%v %s: the element past y's end was written (%v)", dt, isa, last)
			}
		}
	}
}

// TestScalarDivConst: a scalar i32 divided by a constant (a program id
// split into coordinates, each program's) is computed by a multiplication
// (scalarDivConst) with the reference's truncated quotient and remainder
// (the sign of the dividend) at dividends from −2³¹ to 2³¹−1 and divisors
// from 1 to 2³¹−1, powers of two and their neighbours among them; each
// result is used as an index, so a wrong one reads another element.
func TestScalarDivConst(t *testing.T) {
	requireJIT(t)
	divisors := []int64{1, 2, 3, 5, 7, 9, 10, 16, 17, 31, 49, 288, 1000, 1 << 16, 1<<16 + 1, 641 * 6700417 % (1 << 31), 1<<30 - 1, 1 << 30, 1<<31 - 1}
	rng := tiletest.RNG("TestScalarDivConst")
	ns := []int32{0, 1, -1, 2, -2, 8, -8, 9, -9, math.MaxInt32, math.MinInt32, math.MinInt32 + 1, math.MaxInt32 - 1}
	for range 200 {
		ns = append(ns, int32(rng.Uint32()))
	}
	for _, isa := range isas(t) {
		for _, d := range divisors {
			b := tile.NewBuilder("div_const", nil)
			px, py := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
			n := b.Param("n", tile.I32)
			q, r := b.Div(n, int(d)), b.Rem(n, int(d))
			// as indices: x[q mod 8 + 8·(r mod 8)], the mods of nonnegatives
			qi := b.Rem(b.Add(b.Rem(q, 8), 8), 8)
			ri := b.Rem(b.Add(b.Rem(r, 8), 8), 8)
			v := b.Load(b.AddPtr(px, b.Add(b.Splat(b.Add(qi, b.Mul(ri, 8)), tile.Shp(1)), b.Arange(0, 1))), nil, nil)
			b.Store(b.AddPtr(py, b.Arange(0, 1)), v, nil)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			nk := compileFor(t, isa, k)
			x := make([]float32, 64)
			for i := range x {
				x[i] = float32(i)
			}
			for _, nv := range ns {
				y := []float32{-1}
				if err := nk.Launch(tile.Grid{1}, x, y, nv); err != nil {
					t.Fatalf("%s: n %d / %d: %v", isa, nv, d, err)
				}
				qw, rw := int64(nv)/d, int64(nv)%d
				want := float32((qw%8+8)%8 + 8*((rw%8+8)%8))
				if y[0] != want {
					t.Fatalf("%s: n %d, d %d: index %v, want %v (q %d, r %d)", isa, nv, d, y[0], want, qw, rw)
				}
			}
		}
	}
}

// TestMaskedGatherOtherNative: a masked gather whose masked-off lanes take
// other, stored whole so that those lanes show: y[p, j] = x[j·s + p] for j
// < 19, else other (−1.5, and NaN), rows of 32, f32 and f64 (f64 declined
// such a load before the fifty-fourth session: it took masked-off lanes as
// 0 only), on each ISA, bit for bit the interpreter's.
func TestMaskedGatherOtherNative(t *testing.T) {
	requireJIT(t)
	const s, bc, nread = 5, 32, 19
	for _, dt := range []tile.DType{tile.F32, tile.F64} {
		for _, other := range []float64{-1.5, math.NaN()} {
			t.Run(fmt.Sprintf("%v other %v", dt, other), func(t *testing.T) {
				b := tile.NewBuilder("gather_other", nil)
				px, py := b.Ptr("x", dt), b.Ptr("y", dt)
				p := b.ProgramID(0)
				j := b.Arange(0, bc)
				v := b.Load(b.AddPtr(px, b.Add(b.Mul(j, s), b.Splat(p, tile.Shp(bc)))), b.Lt(j, nread), other)
				b.Store(b.AddPtr(py, b.Add(b.Splat(b.Mul(p, bc), tile.Shp(bc)), j)), v, nil)
				k, err := b.Build()
				if err != nil {
					t.Fatal(err)
				}
				rng := tiletest.RNG("gather other")
				x := make([]float64, s*nread)
				for i := range x {
					x[i] = rng.Float64()*2 - 1
				}
				for _, isa := range isas(t) {
					nk := compileFor(t, isa, k)
					run := func(launch func(args ...any) error) ([]float64, error) {
						return launchIn(dt, x, s*bc, s*bc, launch)
					}
					got, want, _ := againstReference(t, isa, nk, k, tile.Grid{s}, false, run)
					sameBits64(t, isa, got, want, 0)
					for i, g := range got {
						if j := i % bc; j >= nread && math.Float64bits(g) != math.Float64bits(float64(float32(other))) && !(math.IsNaN(other) && math.IsNaN(g)) {
							t.Fatalf("%s: y[%d] = %v, want other %v", isa, i, g, other)
						}
					}
				}
			})
		}
	}
}
