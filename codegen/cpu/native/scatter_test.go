package native_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/kernels"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestScatterAtomicsNative: atomic adds at an affine base plus offsets
// loaded as i32 data (ints.go: kScatter) as machine code, each lane's
// element checked against its buffer: the histogram kernel (i32 adds, its
// bins a non-negative remainder of loaded values by a parameter) over
// several programs with a tail, against counts computed here; f32 and f64
// adds of integer-valued floats (exact in any order) at indices with
// repeats, at a base that moves with the program; an index past the
// buffer falls back for the whole launch with the buffer as it was, and
// the executor reports the fault (loads and stores take such pointers
// too: TestGatherIdxNative, TestScatterStoreNative). Each was declined before 2026-12-07's fifty-sixth
// session ("i32 atomics", "atomic add through a pointer that is not
// affine").
func TestScatterAtomicsNative(t *testing.T) {
	requireJIT(t)
	rng := rand.New(rand.NewPCG(56, 4))
	t.Run("histogram", func(t *testing.T) {
		for _, c := range []struct{ n, bins, block int }{{10000, 37, 1024}, {100, 1, 128}, {1001, 8, 64}} {
			k, err := kernels.Histogram(tile.Meta{"BLOCK": c.block})
			if err != nil {
				t.Fatal(err)
			}
			x := make([]int32, c.n)
			for i := range x {
				x[i] = int32(rng.IntN(4001) - 2000)
			}
			x[0], x[c.n-1] = math.MinInt32, math.MaxInt32
			want := make([]int32, c.bins+3)
			for _, v := range x {
				want[((v%int32(c.bins))+int32(c.bins))%int32(c.bins)]++
			}
			for _, isa := range isas(t) {
				nk := compileFor(t, isa, k)
				got := make([]int32, c.bins+3)
				if err := nk.Launch(tile.Grid{tile.CDiv(c.n, c.block)}, x, got, c.n, c.bins); err != nil {
					t.Fatalf("%s: n %d bins %d: %v", isa, c.n, c.bins, err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("%s: n %d bins %d: counts %v, want %v", isa, c.n, c.bins, got, want)
				}
			}
		}
	})
	for _, dt := range []tile.DType{tile.F32, tile.F64} {
		t.Run(fmt.Sprintf("%v scatter add", dt), func(t *testing.T) {
			const n, m, block = 700, 50, 64
			b := tile.NewBuilder("scatter_add", nil)
			px, pi, po := b.Ptr("x", dt), b.Ptr("idx", tile.I32), b.Ptr("out", dt)
			pn := b.Param("n", tile.I32)
			offs := b.Add(b.Mul(b.ProgramID(0), block), b.Arange(0, block))
			mask := b.Lt(offs, pn)
			idx := b.Load(b.AddPtr(pi, offs), mask, int32(0))
			// out[p mod 2 + idx]: a base that moves with the program
			base := b.AddPtr(po, b.Splat(b.Rem(b.ProgramID(0), 2), tile.Shp(block)))
			b.AtomicAdd(b.AddPtr(base, idx), b.Load(b.AddPtr(px, offs), mask, nil), mask)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			xs, is := make([]float64, n), make([]int32, n)
			for i := range xs {
				xs[i], is[i] = float64(rng.IntN(200)-100), int32(rng.IntN(m))
			}
			for _, isa := range isas(t) {
				nk := compileFor(t, isa, k)
				got, want := make([]float64, m+1), make([]float64, m+1)
				for i := range got {
					got[i] = float64(i)
					want[i] = float64(i)
				}
				for i := range xs {
					want[(i/block)%2+int(is[i])] += xs[i]
				}
				err := launchTyped(dt, xs, got, func(x, out any) error { return nk.Launch(tile.Grid{tile.CDiv(n, block)}, x, is, out, n) })
				if err != nil {
					t.Fatalf("%s: %v", isa, err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("%s: out %v, want %v", isa, got, want)
				}
			}
		})
	}
	t.Run("an index past the buffer", func(t *testing.T) {
		k, err := kernels.Histogram(tile.Meta{"BLOCK": 64})
		if err != nil {
			t.Fatal(err)
		}
		// bins 9 but counts of 5: values with x mod 9 ≥ 5 fault
		x := []int32{1, 2, 3, 4, 0, 1, 2, 7}
		for _, isa := range isas(t) {
			nk := compileFor(t, isa, k)
			counts := []int32{10, 20, 30, 40, 50}
			before := slices.Clone(counts)
			err := nk.Launch(tile.Grid{1}, x, counts, len(x), 9)
			if !errors.Is(err, native.ErrFallback) {
				t.Fatalf("%s: launch: %v, want ErrFallback", isa, err)
			}
			if !slices.Equal(counts, before) {
				t.Fatalf("%s: after the fallback counts = %v, want them as they were, %v", isa, counts, before)
			}
			if err := (tiletest.Interp{}).Launch(k, tile.Grid{1}, x, slices.Clone(before), len(x), 9); err == nil {
				t.Fatalf("the reference ran an add past the buffer without a fault")
			}
		}
	})
}

// launchTyped runs launch with x and out as dt's slices (f32: converted
// there and back).
func launchTyped(dt tile.DType, x, out []float64, launch func(x, out any) error) error {
	if dt == tile.F64 {
		return launch(x, out)
	}
	x32, o32 := make([]float32, len(x)), make([]float32, len(out))
	for i := range x {
		x32[i] = float32(x[i])
	}
	for i := range out {
		o32[i] = float32(out[i])
	}
	err := launch(x32, o32)
	for i := range out {
		out[i] = float64(o32[i])
	}
	return err
}

// TestGatherIdxNative: loads of f32 and i32 elements at an affine base
// plus offsets loaded as i32 data (body.go: gatherIdx) as machine code,
// against the reference bit for bit on poisoned outputs: a gather x[idx[i]]
// with a tail (masked-off lanes' offsets are garbage, never read), with
// another value for masked-off lanes, a cross-entropy's pick
// logp[i·10 + label[i]] (a base whose lanes move), an i32 gather; an
// offset past the buffer falls back and the reference faults. Declined
// before 2026-12-07's fifty-sixth session ("load through a pointer that is
// not affine").
func TestGatherIdxNative(t *testing.T) {
	requireJIT(t)
	rng := rand.New(rand.NewPCG(56, 5))
	const n, m = 300, 97
	xs := make([]float32, (n+32)*10)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	is := make([]int32, n+64)
	for i := range is {
		is[i] = int32(rng.IntN(m))
		if i >= n {
			is[i] = math.MaxInt32 // past the tail: never read
		}
	}
	xi := make([]int32, m)
	for i := range xi {
		xi[i] = int32(rng.Uint32())
	}
	for _, c := range []struct {
		name  string
		dt    tile.DType
		build func(b *tile.Builder, x, idx, out, pn *tile.Value)
	}{
		{"x[idx[i]], a tail", tile.F32, func(b *tile.Builder, x, idx, out, pn *tile.Value) {
			offs := b.Add(b.Mul(b.ProgramID(0), 64), b.Arange(0, 64))
			mask := b.Lt(offs, pn)
			j := b.Load(b.AddPtr(idx, offs), mask, int32(0))
			b.Store(b.AddPtr(out, offs), b.Load(b.AddPtr(x, j), mask, nil), mask)
		}},
		{"x[idx[i]] or 7 where idx[i] is odd", tile.F32, func(b *tile.Builder, x, idx, out, pn *tile.Value) {
			offs := b.Add(b.Mul(b.ProgramID(0), 64), b.Arange(0, 64))
			mask := b.Lt(offs, pn)
			j := b.Load(b.AddPtr(idx, offs), mask, int32(0))
			even := b.And(mask, b.Eq(b.Rem(j, int32(2)), int32(0)))
			b.Store(b.AddPtr(out, offs), b.Load(b.AddPtr(x, j), even, 7.0), mask)
		}},
		{"−logp[i·10 + label[i]]", tile.F32, func(b *tile.Builder, x, idx, out, pn *tile.Value) {
			offs := b.Add(b.Mul(b.ProgramID(0), 32), b.Arange(0, 32))
			mask := b.Lt(offs, pn)
			lab := b.Rem(b.Load(b.AddPtr(idx, offs), mask, int32(0)), int32(10))
			row := b.AddPtr(x, b.Mul(offs, int32(10)))
			b.Store(b.AddPtr(out, offs), b.Neg(b.Load(b.AddPtr(row, lab), mask, nil)), mask)
		}},
		{"f64 x[idx[i]], a tail", tile.F64, func(b *tile.Builder, x, idx, out, pn *tile.Value) {
			offs := b.Add(b.Mul(b.ProgramID(0), 64), b.Arange(0, 64))
			mask := b.Lt(offs, pn)
			j := b.Load(b.AddPtr(idx, offs), mask, int32(0))
			b.Store(b.AddPtr(out, offs), b.Load(b.AddPtr(x, j), mask, nil), mask)
		}},
		{"f64 x[idx[i]] or 7 where idx[i] is odd", tile.F64, func(b *tile.Builder, x, idx, out, pn *tile.Value) {
			offs := b.Add(b.Mul(b.ProgramID(0), 64), b.Arange(0, 64))
			mask := b.Lt(offs, pn)
			j := b.Load(b.AddPtr(idx, offs), mask, int32(0))
			even := b.And(mask, b.Eq(b.Rem(j, int32(2)), int32(0)))
			b.Store(b.AddPtr(out, offs), b.Mul(b.Load(b.AddPtr(x, j), even, 7.0), 3.0), mask)
		}},
		{"f64 −logp[i·10 + label[i]], blocks of 4", tile.F64, func(b *tile.Builder, x, idx, out, pn *tile.Value) {
			offs := b.Add(b.Mul(b.ProgramID(0), 4), b.Arange(0, 4))
			mask := b.Lt(offs, pn)
			lab := b.Rem(b.Load(b.AddPtr(idx, offs), mask, int32(0)), int32(10))
			row := b.AddPtr(x, b.Mul(offs, int32(10)))
			b.Store(b.AddPtr(out, offs), b.Neg(b.Load(b.AddPtr(row, lab), mask, nil)), mask)
		}},
		{"i32 x[idx[i]]", tile.I32, func(b *tile.Builder, x, idx, out, pn *tile.Value) {
			offs := b.Add(b.Mul(b.ProgramID(0), 64), b.Arange(0, 64))
			mask := b.Lt(offs, pn)
			j := b.Load(b.AddPtr(idx, offs), mask, int32(0))
			b.Store(b.AddPtr(out, offs), b.Add(b.Load(b.AddPtr(x, j), mask, nil), int32(1)), mask)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("gather_idx", nil)
			px, pi, po, pn := b.Ptr("x", c.dt), b.Ptr("idx", tile.I32), b.Ptr("out", c.dt), b.Param("n", tile.I32)
			c.build(b, px, pi, po, pn)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			grid := tile.Grid{tile.CDiv(n, 32)}
			if strings.Contains(c.name, "blocks of 4") {
				grid = tile.Grid{tile.CDiv(n, 4)}
			}
			bitsAgainstReference(t, k, grid, func(launch func(args ...any) error) []uint32 {
				if c.dt == tile.F64 {
					x64 := make([]float64, len(xs))
					for i := range xs {
						x64[i] = float64(xs[i]) + float64(i)*0x1p-40 // bits below f32's
					}
					out := make([]float64, n+8)
					for i := range out {
						out[i] = math.NaN()
					}
					if err := launch(x64, is, out, n); err != nil {
						t.Fatal(err)
					}
					return bitsF64(out)
				}
				if c.dt == tile.I32 {
					out := make([]int32, n+8)
					for i := range out {
						out[i] = -0x5a5a5a5b
					}
					if err := launch(xi, is, out, n); err != nil {
						t.Fatal(err)
					}
					return bitsI32(out)
				}
				out := make([]float32, n+8)
				for i := range out {
					out[i] = float32(math.NaN())
				}
				if err := launch(xs, is, out, n); err != nil {
					t.Fatal(err)
				}
				return bitsF32(out)
			})
		})
	}
	for _, dt := range []tile.DType{tile.F32, tile.F64} {
		t.Run(fmt.Sprintf("%v: an offset past the buffer", dt), func(t *testing.T) {
			b := tile.NewBuilder("gather_idx", nil)
			px, pi, po := b.Ptr("x", dt), b.Ptr("idx", tile.I32), b.Ptr("out", dt)
			r := b.Arange(0, 8)
			b.Store(b.AddPtr(po, r), b.Load(b.AddPtr(px, b.Load(b.AddPtr(pi, r), nil, nil)), nil, nil), nil)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			x, out := any(xs[:8]), any(make([]float32, 8))
			if dt == tile.F64 {
				x, out = make([]float64, 8), make([]float64, 8)
			}
			for _, idx := range [][]int32{{0, 1, 2, 3, 4, 5, 6, -1}, {0, 1, 2, 8, 4, 5, 6, 7}} {
				for _, isa := range isas(t) {
					nk := compileFor(t, isa, k)
					if err := nk.Launch(tile.Grid{1}, x, idx, out); !errors.Is(err, native.ErrFallback) {
						t.Fatalf("%s: launch with offsets %v: %v, want ErrFallback", isa, idx, err)
					}
				}
				if err := (tiletest.Interp{}).Launch(k, tile.Grid{1}, x, idx, out); err == nil {
					t.Fatalf("the reference read past the buffer at offsets %v without a fault", idx)
				}
			}
		})
	}
}

// TestEmbeddingNative: an i32 index loaded once a program and used in the
// addresses of a row (an embedding's lookup: out[p, :] = table[idx[p], :],
// rows of 64 and of 100 with a tail; a masked index load whose other is a
// row of its own) as machine code, against the reference bit for bit on
// poisoned outputs; an index past the table falls back and the reference
// faults. Declined before 2026-12-07's fifty-sixth session ("scalar
// load").
func TestEmbeddingNative(t *testing.T) {
	requireJIT(t)
	rng := rand.New(rand.NewPCG(56, 6))
	const rows, progs = 40, 23
	for _, c := range []struct {
		name   string
		d      int
		masked bool
	}{{"rows of 64", 64, false}, {"rows of 100, a tail", 100, false}, {"the index masked: row 3 past n", 64, true}} {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("embedding", nil)
			pt, pi, po, pn := b.Ptr("table", tile.F32), b.Ptr("idx", tile.I32), b.Ptr("out", tile.F32), b.Param("n", tile.I32)
			p := b.ProgramID(0)
			var row *tile.Value
			if c.masked {
				row = b.Load(b.AddPtr(pi, p), b.Lt(p, pn), int32(3))
			} else {
				row = b.Load(b.AddPtr(pi, p), nil, nil)
			}
			d := b.Arange(0, 128)
			m := b.Lt(d, c.d)
			v := b.Load(b.AddPtr(pt, b.Add(b.Mul(row, int32(c.d)), d)), m, nil)
			b.Store(b.AddPtr(po, b.Add(b.Mul(p, int32(c.d)), d)), b.Mul(v, 2.0), m)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			table := tiletest.Uniform(rng, rows*c.d, -1, 1)
			idx := make([]int32, progs)
			for i := range idx {
				idx[i] = int32(rng.IntN(rows))
			}
			idx[0], idx[1] = 0, rows-1
			run := func(launch func(args ...any) error, idx []int32) ([]float32, error) {
				out := make([]float32, progs*c.d+8)
				for i := range out {
					out[i] = float32(math.NaN())
				}
				return out, launch(table, idx, out, progs-5)
			}
			want, err := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, tile.Grid{progs}, args...) }, idx)
			if err != nil {
				t.Fatal(err)
			}
			bad := slices.Clone(idx)
			bad[7] = rows // past the table
			for _, isa := range isas(t) {
				nk := compileFor(t, isa, k)
				got, err := run(func(args ...any) error { return nk.Launch(tile.Grid{progs}, args...) }, idx)
				if err != nil {
					t.Fatalf("%s: %v", isa, err)
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s: out[%d] = %v natively, %v on the reference", isa, i, got[i], want[i])
					}
				}
				if _, err := run(func(args ...any) error { return nk.Launch(tile.Grid{progs}, args...) }, bad); !errors.Is(err, native.ErrFallback) {
					t.Fatalf("%s: an index past the table: %v, want ErrFallback", isa, err)
				}
			}
			if _, err := run(func(args ...any) error { return tiletest.Interp{}.Launch(k, tile.Grid{progs}, args...) }, bad); err == nil {
				t.Fatal("the reference read past the table without a fault")
			}
		})
	}
}

// TestScatterStoreNative: stores at an affine base plus offsets loaded as
// i32 data (body.go: scatterIdx) as machine code, against the reference
// bit for bit on poisoned outputs: out[perm[i]] = 2·x[i] for f32, i32 and
// f64 with a tail (a permutation: every element written once), and at a
// base that moves with the lanes (out[i·3 + k[i]], k < 3); an offset past
// the buffer falls back; a kernel that also loads from the buffer it
// scatters to is declined. Declined before 2026-12-07's fifty-sixth session
// ("store through a pointer that is not affine").
func TestScatterStoreNative(t *testing.T) {
	requireJIT(t)
	const n = 203
	rng := rand.New(rand.NewPCG(56, 8))
	perm := make([]int32, n+32)
	for i, p := range rng.Perm(n) {
		perm[i] = int32(p)
	}
	for i := n; i < len(perm); i++ {
		perm[i] = math.MaxInt32 // past the tail: never read as an offset
	}
	k3 := make([]int32, n)
	for i := range k3 {
		k3[i] = int32(rng.IntN(3))
	}
	for _, dt := range []tile.DType{tile.F32, tile.I32, tile.F64} {
		for _, moving := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v moving base %v", dt, moving), func(t *testing.T) {
				b := tile.NewBuilder("scatter_store", nil)
				px, pi, po, pn := b.Ptr("x", dt), b.Ptr("idx", tile.I32), b.Ptr("out", dt), b.Param("n", tile.I32)
				offs := b.Add(b.Mul(b.ProgramID(0), int32(32)), b.Arange(0, 32))
				m := b.Lt(offs, pn)
				j := b.Load(b.AddPtr(pi, offs), m, int32(0))
				base := po
				if moving {
					base = b.AddPtr(b.Splat(po, tile.Shp(32)), b.Mul(offs, int32(3)))
				}
				b.Store(b.AddPtr(base, j), b.Add(b.Load(b.AddPtr(px, offs), m, nil), b.Load(b.AddPtr(px, offs), m, nil)), m)
				k, err := b.Build()
				if err != nil {
					t.Fatal(err)
				}
				idx := perm
				if moving {
					idx = k3
				}
				size := n
				if moving {
					size = 3 * n
				}
				grid := tile.Grid{tile.CDiv(n, 32)}
				bitsAgainstReference(t, k, grid, func(launch func(args ...any) error) []uint32 {
					switch dt {
					case tile.F32:
						x, out := tiletest.Uniform(tiletest.RNG("scatter_store"), n, -2, 2), make([]float32, size+8)
						for i := range out {
							out[i] = float32(math.NaN())
						}
						if err := launch(x, idx, out, n); err != nil {
							t.Fatal(err)
						}
						return bitsF32(out)
					case tile.I32:
						x, out := make([]int32, n), make([]int32, size+8)
						for i := range x {
							x[i] = int32(i*7919 - 500000)
						}
						for i := range out {
							out[i] = -0x5a5a5a5b
						}
						if err := launch(x, idx, out, n); err != nil {
							t.Fatal(err)
						}
						return bitsI32(out)
					}
					x, out := make([]float64, n), make([]float64, size+8)
					for i := range x {
						x[i] = float64(i)*0.37 - 20
					}
					for i := range out {
						out[i] = math.NaN()
					}
					if err := launch(x, idx, out, n); err != nil {
						t.Fatal(err)
					}
					bits := make([]uint32, 2*len(out))
					for i, v := range out {
						u := math.Float64bits(v)
						bits[2*i], bits[2*i+1] = uint32(u), uint32(u>>32)
					}
					return bits
				})
			})
		}
	}
	t.Run("an offset past the buffer", func(t *testing.T) {
		b := tile.NewBuilder("scatter_store", nil)
		px, pi, po := b.Ptr("x", tile.F32), b.Ptr("idx", tile.I32), b.Ptr("out", tile.F32)
		r := b.Arange(0, 8)
		b.Store(b.AddPtr(po, b.Load(b.AddPtr(pi, r), nil, nil)), b.Load(b.AddPtr(px, r), nil, nil), nil)
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		for _, isa := range isas(t) {
			nk := compileFor(t, isa, k)
			if err := nk.Launch(tile.Grid{1}, make([]float32, 8), []int32{0, 1, 2, 3, 4, 5, 6, 8}, make([]float32, 8)); !errors.Is(err, native.ErrFallback) {
				t.Fatalf("%s: launch: %v, want ErrFallback", isa, err)
			}
		}
	})
	t.Run("loads from the buffer it scatters to: declined", func(t *testing.T) {
		b := tile.NewBuilder("scatter_store", nil)
		pi, po := b.Ptr("idx", tile.I32), b.Ptr("out", tile.F32)
		r := b.Arange(0, 8)
		v := b.Load(b.AddPtr(po, r), nil, nil)
		b.Store(b.AddPtr(po, b.Load(b.AddPtr(pi, r), nil, nil)), v, nil)
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := native.Compile(k); !errors.Is(err, native.ErrUnsupported) || !strings.Contains(err.Error(), "stores to") {
			t.Fatalf("Compile: %v; want it declined", err)
		}
	})
}
