package native_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestTransposedLoads: y = 2·xᵀ + 1 for an r×c matrix x (f32, f64), written over
// blocks [br, bc] of y (program (p, q): y's rows [p·br, …), its columns
// [q·bc, …)), so that each block of x is loaded one element apart down
// its rows and c apart along its lanes (a transpose's read: NHWC → NCHW).
// Where both sides of the block are multiples of eight the load is packed
// transposed and turned back in the frame (native.TransLoads: f32 in 8×8
// tiles, f64 in 4×4; its users
// read rows), else loaded lane by lane, and where a shape op reads it
// (Trans: the block read back at swapped lanes, contiguous as it is) never
// packed; every result bit for bit the reference's, with tails in both
// directions, on a poisoned output.
func TestTransposedLoads(t *testing.T) {
	requireJIT(t)
	for _, c := range []struct {
		name      string
		dt        tile.DType
		r, c      int // x's
		br, bc    int // the block over y
		viaTrans  bool
		wantTrans int
	}{
		{dt: tile.F32, name: "f32 28×32 in 16×32 blocks (an NHWC → NCHW of 28 columns)", r: 28, c: 32, br: 16, bc: 32, wantTrans: 1},
		{dt: tile.F32, name: "f32 64×64 in 8×64 blocks, no mask", r: 64, c: 64, br: 8, bc: 64, wantTrans: 1},
		{dt: tile.F32, name: "f32 13×21 in 8×16 blocks, tails both ways", r: 13, c: 21, br: 8, bc: 16, wantTrans: 1},
		{dt: tile.F32, name: "f32 40×24 in 32×8 blocks", r: 40, c: 24, br: 32, bc: 8, wantTrans: 1},
		{dt: tile.F32, name: "f32 a side of 4: lane by lane", r: 12, c: 10, br: 4, bc: 16},
		{dt: tile.F32, name: "f32 read through a transpose of the block: as it is", r: 24, c: 16, br: 16, bc: 8, viaTrans: true},
		{dt: tile.F64, name: "f64 28×32 in 16×32 blocks (an NHWC → NCHW of 28 columns)", r: 28, c: 32, br: 16, bc: 32, wantTrans: 1},
		{dt: tile.F64, name: "f64 64×64 in 8×64 blocks, no mask", r: 64, c: 64, br: 8, bc: 64, wantTrans: 1},
		{dt: tile.F64, name: "f64 13×21 in 8×16 blocks, tails both ways", r: 13, c: 21, br: 8, bc: 16, wantTrans: 1},
		{dt: tile.F64, name: "f64 40×24 in 32×8 blocks", r: 40, c: 24, br: 32, bc: 8, wantTrans: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("trans", nil)
			px, py := b.Ptr("x", c.dt), b.Ptr("y", c.dt)
			j := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), c.br), b.Arange(0, c.br)), 1) // y's rows: x's columns
			i := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), c.bc), b.Arange(0, c.bc)), 0) // y's columns: x's rows
			mask := b.And(b.Lt(j, c.c), b.Lt(i, c.r))
			var v *tile.Value
			if c.viaTrans { // the block [bc, br] of x as stored, transposed
				xi := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), c.bc), b.Arange(0, c.bc)), 1)
				xj := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), c.br), b.Arange(0, c.br)), 0)
				v = b.Trans(b.Load(b.AddPtr(px, b.Add(b.Mul(xi, c.c), xj)), b.And(b.Lt(xi, c.r), b.Lt(xj, c.c)), 0.0))
			} else {
				v = b.Load(b.AddPtr(px, b.Add(b.Mul(i, c.c), j)), mask, 0.0)
			}
			b.Store(b.AddPtr(py, b.Add(b.Mul(j, c.r), i)), b.Add(b.Mul(v, 2.0), 1.0), mask)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			grid := tile.Grid{(c.c + c.br - 1) / c.br, (c.r + c.bc - 1) / c.bc}
			for _, isa := range isas(t) {
				nk := compileFor(t, isa, k)
				if got := native.TransLoads(nk); got != c.wantTrans {
					t.Errorf("%s: %d transposed loads, want %d", isa, got, c.wantTrans)
				}
				rng := tiletest.RNG(c.name)
				x := make([]float64, c.r*c.c)
				for i := range x {
					x[i] = rng.Float64()*2 - 1
				}
				n := c.r * c.c
				run := func(launch func(args ...any) error) ([]float64, error) { return launchIn(c.dt, x, n, n, launch) }
				got, want, ok := againstReference(t, isa, nk, k, grid, false, run)
				if !ok {
					continue
				}
				sameBits64(t, isa, got, want, len(want))
			}
		})
	}
}

// TestTransposedLoadsInALoop: transposed loads in a loop's body — y =
// Σ_s (x_sᵀ) over the steps s of a loop, x_s the s-th r×c matrix of x, a
// carried [br, bc] block adding each step's block of x_sᵀ (its columns
// one element apart down the block's rows) — are packed and turned each
// iteration (native.TransLoads), the sums bit for bit the reference's.
func TestTransposedLoadsInALoop(t *testing.T) {
	requireJIT(t)
	const r, c, br, bc, steps = 24, 16, 16, 8, 5
	for _, dt := range []tile.DType{tile.F32, tile.F64} {
		t.Run(dt.String(), func(t *testing.T) {
			b := tile.NewBuilder("trans_loop", nil)
			px, py := b.Ptr("x", dt), b.Ptr("y", dt)
			j := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), br), b.Arange(0, br)), 1)
			i := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), bc), b.Arange(0, bc)), 0)
			acc := b.For(0, steps, 1, []*tile.Value{b.Zeros(dt, br, bc)}, func(s *tile.Value, carried []*tile.Value) []*tile.Value {
				v := b.Load(b.AddPtr(px, b.Add(b.Add(b.Mul(i, c), j), b.Mul(s, r*c))), nil, nil)
				return []*tile.Value{b.Add(carried[0], v)}
			})
			b.Store(b.AddPtr(py, b.Add(b.Mul(j, r), i)), acc[0], nil)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			grid := tile.Grid{c / br, r / bc}
			for _, isa := range isas(t) {
				nk := compileFor(t, isa, k)
				if got := native.TransLoads(nk); got != 1 {
					t.Errorf("%s: %d transposed loads, want 1", isa, got)
				}
				rng := tiletest.RNG("trans_loop")
				x := make([]float64, steps*r*c)
				for i := range x {
					x[i] = rng.Float64()*2 - 1
				}
				run := func(launch func(args ...any) error) ([]float64, error) { return launchIn(dt, x, r*c, r*c, launch) }
				got, want, ok := againstReference(t, isa, nk, k, grid, false, run)
				if !ok {
					continue
				}
				sameBits64(t, isa, got, want, len(want))
			}
		})
	}
}

// TestTransposedFrameReads: a block the kernel computed (a product's
// result, a loop-carried block) read through a transpose, y = (Mᵀ + ½)
// or y = Mᵀ for M [r, c] stored as y's [c, r]: the phase reads the frame
// block across its rows, lanes r elements apart (lane by lane; until
// 2026-12-07 the machine code read such lanes as contiguous ones and
// stored M's next elements: every element off the diagonal wrong). The
// operands are small integers, so every product and sum is exact and the
// results are the reference's bit for bit, on a poisoned output; a side
// of four gives a phase narrower than a vector.
func TestTransposedFrameReads(t *testing.T) {
	requireJIT(t)
	for _, c := range []struct {
		name    string
		dt      tile.DType
		carry   bool // M a loop's carried sum, else a product's result
		r, c, k int
		plus    bool // an op between the transpose and the store
	}{
		{name: "f32 product 16×32, K 16, stored as it is", dt: tile.F32, r: 16, c: 32, k: 16},
		{name: "f32 product 96×64, K 32, plus a half", dt: tile.F32, r: 96, c: 64, k: 32, plus: true},
		{name: "f32 product 64×96, K 64, plus a half", dt: tile.F32, r: 64, c: 96, k: 64, plus: true},
		{name: "f64 product 32×16, K 16, plus a half", dt: tile.F64, r: 32, c: 16, k: 16, plus: true},
		{name: "f64 product 64×32, K 32, stored as it is", dt: tile.F64, r: 64, c: 32, k: 32},
		{name: "f32 carried 32×16, plus a half", dt: tile.F32, carry: true, r: 32, c: 16, plus: true},
		{name: "f32 carried 4×16 (a phase of four lanes)", dt: tile.F32, carry: true, r: 4, c: 16},
		{name: "f64 carried 16×64, plus a half", dt: tile.F64, carry: true, r: 16, c: 64, plus: true},
		{name: "f64 carried 4×16 (a phase of four lanes)", dt: tile.F64, carry: true, r: 4, c: 16, plus: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("trans_frame", nil)
			px, py := b.Ptr("x", c.dt), b.Ptr("y", c.dt)
			block := func(at, rows, cols int) *tile.Value { // rows×cols of x at element at, row-major
				i := b.ExpandDims(b.Arange(0, rows), 1)
				j := b.ExpandDims(b.Arange(0, cols), 0)
				return b.Load(b.AddPtr(px, b.Add(b.Add(b.Mul(i, cols), j), at)), nil, nil)
			}
			var m *tile.Value
			n := c.r * c.k // x holds a [r, k] then b [k, c]
			if c.carry {
				n = 3 * c.r * c.c // three [r, c] blocks, added
				m = b.For(0, 3, 1, []*tile.Value{b.Zeros(c.dt, c.r, c.c)}, func(it *tile.Value, acc []*tile.Value) []*tile.Value {
					i := b.ExpandDims(b.Arange(0, c.r), 1)
					j := b.ExpandDims(b.Arange(0, c.c), 0)
					at := b.Add(b.Add(b.Mul(i, c.c), j), b.Mul(it, c.r*c.c))
					return []*tile.Value{b.Add(acc[0], b.Load(b.AddPtr(px, at), nil, nil))}
				})[0]
			} else {
				n += c.k * c.c
				m = b.Dot(block(0, c.r, c.k), block(c.r*c.k, c.k, c.c), b.Zeros(c.dt, c.r, c.c), tile.PrecIEEE)
			}
			v := b.Trans(m) // [c, r]
			if c.plus {
				v = b.Add(v, 0.5)
			}
			i := b.ExpandDims(b.Arange(0, c.c), 1)
			j := b.ExpandDims(b.Arange(0, c.r), 0)
			b.Store(b.AddPtr(py, b.Add(b.Mul(i, c.r), j)), v, nil)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			rng := tiletest.RNG(c.name)
			x := make([]float64, n)
			for q := range x {
				x[q] = float64(rng.IntN(9) - 4)
			}
			out := c.r * c.c
			for _, isa := range isas(t) {
				nk := compileFor(t, isa, k)
				run := func(launch func(args ...any) error) ([]float64, error) {
					return launchIn(c.dt, x, out+8, out, launch)
				}
				got, want, ok := againstReference(t, isa, nk, k, tile.Grid{1}, false, run)
				if !ok {
					continue
				}
				sameBits64(t, isa, got, want, out)
			}
		})
	}
}

// TestTransposedKeptValue: a computed value kept in the frame (exp of a
// block, stored as it is, which puts it in a phase of its own) and also
// stored through a transpose, f32 and f64, with AVX2 and AVX-512: the
// transposed store holds the other store's elements bit for bit (read
// across the frame block's rows lane by lane; until 2026-12-07 they were
// its row's next elements), both on poisoned outputs; the first store
// within the math's bound of the reference. Square blocks too, where the
// transpose is read a level after the value.
func TestTransposedKeptValue(t *testing.T) {
	requireJIT(t)
	for _, c := range []struct {
		name string
		dt   tile.DType
		r, c int
	}{
		{"f32 32×16", tile.F32, 32, 16},
		{"f32 16×64", tile.F32, 16, 64},
		{"f32 32×4 (stored in a phase of four lanes)", tile.F32, 32, 4},
		{"f64 32×16", tile.F64, 32, 16},
		{"f64 8×32", tile.F64, 8, 32},
		// square: eᵀ has e's shape, so its store would be in e's own
		// phase, reading e at other lanes; it is read a level later
		// (declined before 2026-12-07's fifty-fifth session)
		{"f32 16×16 (square)", tile.F32, 16, 16},
		{"f32 8×8 (square)", tile.F32, 8, 8},
		{"f32 4×4 (square, a phase of four lanes)", tile.F32, 4, 4},
		{"f64 16×16 (square)", tile.F64, 16, 16},
		{"f64 2×2 (square)", tile.F64, 2, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("trans_kept", nil)
			px, py := b.Ptr("x", c.dt), b.Ptr("y", c.dt)
			i, j := b.ExpandDims(b.Arange(0, c.r), 1), b.ExpandDims(b.Arange(0, c.c), 0)
			e := b.Exp(b.Load(b.AddPtr(px, b.Add(b.Mul(i, c.c), j)), nil, nil)) // [r, c]
			b.Store(b.AddPtr(py, b.Add(b.Mul(i, c.c), j)), e, nil)
			ti, tj := b.ExpandDims(b.Arange(0, c.c), 1), b.ExpandDims(b.Arange(0, c.r), 0)
			b.Store(b.AddPtr(py, b.Add(b.Add(b.Mul(ti, c.r), tj), c.r*c.c)), b.Trans(e), nil) // y's second half: eᵀ [c, r]
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			rng := tiletest.RNG(c.name)
			n := c.r * c.c
			x := make([]float64, n)
			for q := range x {
				x[q] = rng.Float64()*4 - 2
			}
			for _, isa := range isas(t) {
				nk := compileFor(t, isa, k)
				got, err := launchIn(c.dt, x, 2*n+8, 2*n, func(args ...any) error { return nk.Launch(tile.Grid{1}, args...) })
				if err != nil {
					t.Fatalf("%s: %v", isa, err)
				}
				for q := 0; q < c.r; q++ {
					for p := 0; p < c.c; p++ {
						a, bt := got[q*c.c+p], got[n+p*c.r+q]
						if math.IsNaN(a) || math.Float64bits(a) != math.Float64bits(bt) {
							t.Fatalf("%s: e[%d, %d] = %v stored, %v through the transpose", isa, q, p, a, bt)
						}
						if want := math.Exp(x[q*c.c+p]); math.Abs(a-want) > 1e-6*want {
							t.Fatalf("%s: e[%d, %d] = %v, want %v", isa, q, p, a, want)
						}
					}
				}
				for q := 2 * n; q < len(got); q++ {
					if !math.IsNaN(got[q]) {
						t.Fatalf("%s: element %d past the outputs written: %v", isa, q, got[q])
					}
				}
			}
		})
	}
}

// TestTransposedCarryInit: a loop-carried block whose initial value is a
// transpose of a value the kernel computed, y = trans(f(x)) plus zero to
// two blocks of x, for f a value kept in the frame (exp, a square root)
// or a formula recomputed where it is read (abs, a product by a
// constant): the loop's prologue reads f(x) through the transpose. Until
// 2026-12-07 a kept f(x) was never written to its block (only an initial
// value that was itself kept was), so y began from whatever the frame
// held, silently; a random kernel of FuzzKernels found it. f32 and f64, square and
// not, against the reference.
func TestTransposedCarryInit(t *testing.T) {
	requireJIT(t)
	fs := map[string]func(b *tile.Builder, x *tile.Value) *tile.Value{
		"exp":  func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Exp(x) },
		"sqrt": func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Sqrt(b.Add(b.Abs(b.Add(x, x)), 1.0)) },
		"abs":  func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Abs(x) },
		"mul":  func(b *tile.Builder, x *tile.Value) *tile.Value { return b.Mul(x, 3.0) },
	}
	for _, dt := range []tile.DType{tile.F32, tile.F64} {
		for _, sh := range [][2]int{{8, 8}, {8, 16}, {32, 16}, {96, 128}} {
			for name, f := range fs {
				for trips := range 3 {
					r, c := sh[0], sh[1]
					cs := tiletest.Case{
						Name: fmt.Sprintf("%v/%dx%d/%s/%d", dt, r, c, name, trips),
						Tol:  tiletest.Tol{Abs: 1e-5, Rel: 1e-6},
						Kernel: func() (*tile.Kernel, error) {
							b := tile.NewBuilder("trans_carry_init", nil)
							px, py := b.Ptr("x", dt), b.Ptr("y", dt)
							i, j := b.ExpandDims(b.Arange(0, r), 1), b.ExpandDims(b.Arange(0, c), 0)
							x := b.Load(b.AddPtr(px, b.Add(b.Mul(i, c), j)), nil, nil)
							it, jt := b.ExpandDims(b.Arange(0, c), 1), b.ExpandDims(b.Arange(0, r), 0)
							at := b.Add(b.Mul(it, r), jt)
							res := b.For(0, trips, 1, []*tile.Value{b.Trans(f(b, x))}, func(_ *tile.Value, acc []*tile.Value) []*tile.Value {
								return []*tile.Value{b.Add(acc[0], b.Load(b.AddPtr(px, at), nil, nil))}
							})
							b.Store(b.AddPtr(py, at), res[0], nil)
							return b.Build()
						},
						Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
							x := tiletest.Uniform(rng, r*c, -2, 2)
							if dt == tile.F64 {
								x64, y := make([]float64, r*c), make([]float64, r*c+tiletest.Pad)
								for q := range x {
									x64[q] = float64(x[q])
								}
								for q := range y {
									y[q] = math.NaN()
								}
								return tile.Grid{1}, []any{x64, y}, func() error { return nil }
							}
							return tile.Grid{1}, []any{x, tiletest.Output(r * c)}, func() error { return nil }
						},
					}
					if err := tiletest.Compare(launcher{}, tiletest.Interp{}, cs); err != nil {
						t.Errorf("%s: %v", cs.Name, err)
					}
				}
			}
		}
	}
}
