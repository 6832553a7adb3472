package native_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestInPlaceNative: a one-phase elementwise kernel that loads buffers and
// stores them back at the same addresses, one element a lane (an
// optimizer's update: w += -η·m/(√v + ε), the state m, v and a zeroed
// gradient written in place), runs natively, bit for bit the reference
// (a masked tail: n not a multiple of the block or of 16,
// two programs); kernels where running the phase vector by vector could
// differ from the program (a load after a store to its buffer, a load of
// a neighbour's element, a reduction over a stored buffer) are declined.
func TestInPlaceNative(t *testing.T) {
	requireJIT(t)
	const block = 256
	for _, c := range []struct {
		name     string
		d        tile.DType
		declined string // "" where it compiles
		body     func(e inplaceEnv)
	}{
		{name: "an optimizer step, f32", d: tile.F32, body: adamLike},
		{name: "a load after a store to its buffer", d: tile.F32, declined: "after a store", body: func(e inplaceEnv) {
			b := e.b
			x := b.Load(e.w, e.mask, 0.0)
			b.Store(e.w, b.Mul(x, 2.0), e.mask)
			y := b.Load(e.w, e.mask, 0.0) // the reference reads 2x
			b.Store(e.g, b.Add(y, 1.0), e.mask)
		}},
		{name: "a neighbour's element", d: tile.F32, declined: "other addresses", body: func(e inplaceEnv) {
			b := e.b
			x := b.Load(b.AddPtr(e.pw, b.Add(e.offs, 1)), b.Lt(b.Add(e.offs, 1), b.Param("n1", tile.I32)), 0.0)
			b.Store(e.w, x, e.mask)
		}},
		{name: "sin, which may bail out part way", d: tile.F32, declined: "may bail out", body: func(e inplaceEnv) {
			b := e.b
			x := b.Load(e.w, e.mask, 0.0)
			b.Store(e.w, b.Sub(x, b.Mul(b.Sin(x), 0.01)), e.mask)
		}},
		{name: "a reduction over a stored buffer", d: tile.F32, declined: "more than one", body: func(e inplaceEnv) {
			b := e.b
			x := b.Load(e.w, e.mask, 0.0)
			b.Store(e.w, b.Sub(x, b.Sum(x, 0, true)), e.mask)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("inplace", nil)
			pw, pg, pm := b.Ptr("w", c.d), b.Ptr("g", c.d), b.Ptr("m", c.d)
			n := b.Param("n", tile.I32)
			offs := b.Add(b.Mul(b.ProgramID(0), block), b.Arange(0, block))
			e := inplaceEnv{b: b, w: b.AddPtr(pw, offs), g: b.AddPtr(pg, offs), m: b.AddPtr(pm, offs), mask: b.Lt(offs, n), offs: offs, pw: pw}
			c.body(e)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			for _, isa := range isas(t) {
				native.SetAVX512(isa != "avx2")
				nk, err := native.Compile(k)
				if c.declined != "" {
					if err == nil {
						nk.Free()
						t.Fatalf("%s: compiled natively, want declined (%s)", isa, c.declined)
					}
					if !errors.Is(err, native.ErrUnsupported) || !strings.Contains(err.Error(), c.declined) {
						t.Fatalf("%s: %v, want ErrUnsupported: %s", isa, err, c.declined)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: not compiled natively: %v\n%v", isa, err, k)
				}
				defer nk.Free()
				const size = 2*block - 37 // two programs, a masked tail
				grid := tile.Grid{2}
				rng := tiletest.RNG(c.name)
				w0, g0 := tiletest.Uniform(rng, 2*block, -1, 1), tiletest.Uniform(rng, 2*block, -1, 1)
				m0 := tiletest.Uniform(rng, 2*block, 0, 1)
				run := func(launch func(args ...any) error) [][]float64 {
					bufs := [][]float32{append([]float32(nil), w0...), append([]float32(nil), g0...), append([]float32(nil), m0...)}
					for _, buf := range bufs { // past n: poison, never touched
						for i := size; i < len(buf); i++ {
							buf[i] = float32(math.NaN())
						}
					}
					var args []any
					if c.d == tile.F64 {
						for _, buf := range bufs {
							x := make([]float64, len(buf))
							for i, v := range buf {
								x[i] = float64(v)
							}
							args = append(args, x)
						}
					} else {
						for _, buf := range bufs {
							args = append(args, buf)
						}
					}
					args = append(args, int32(size))
					for _, p := range k.Params[4:] {
						if p.Type.DType == tile.I32 {
							args = append(args, int32(size))
						} else if c.d == tile.F64 {
							args = append(args, 0.25)
						} else {
							args = append(args, float32(0.25))
						}
					}
					if err := launch(args...); err != nil {
						t.Fatal(err)
					}
					var out [][]float64
					for _, a := range args[:3] {
						switch x := a.(type) {
						case []float32:
							y := make([]float64, len(x))
							for i, v := range x {
								y[i] = float64(v)
							}
							out = append(out, y)
						case []float64:
							out = append(out, x)
						}
					}
					return out
				}
				want := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, grid, args...) })
				got := run(func(args ...any) error { return nk.Launch(grid, args...) })
				for bi := range want {
					for i := range want[bi] {
						if math.Float64bits(got[bi][i]) != math.Float64bits(want[bi][i]) {
							t.Fatalf("%s: buffer %d [%d] = %v, want %v", isa, bi, i, got[bi][i], want[bi][i])
						}
					}
				}
			}
		})
	}
}

// adamLike: m ← β·m + (1−β)·g, w ← w − η·m/(√(m·m) + ε), g ← 0, all in
// place, as fusion's solver kernels do (scalars as parameters).
func adamLike(e inplaceEnv) {
	b := e.b
	d := e.pw.Type.DType
	beta, eta, eps := b.Param("beta", d), b.Param("neg_eta", d), b.Param("eps", d)
	w, g, m := b.Load(e.w, e.mask, 0.0), b.Load(e.g, e.mask, 0.0), b.Load(e.m, e.mask, 0.0)
	m1 := b.Add(b.Mul(m, beta), b.Mul(g, b.Sub(b.Const(1, d), beta)))
	b.Store(e.m, m1, e.mask)
	b.Store(e.w, b.Add(w, b.Div(b.Mul(m1, eta), b.Add(b.Sqrt(b.Mul(m1, m1)), eps))), e.mask)
	b.Store(e.g, b.Full(0, d, 256), e.mask)
}

// inplaceEnv is what TestInPlaceNative's kernels are built from.
type inplaceEnv struct {
	b          *tile.Builder
	w, g, m    *tile.Value // pointer blocks at offs
	mask, offs *tile.Value
	pw         *tile.Value
}
