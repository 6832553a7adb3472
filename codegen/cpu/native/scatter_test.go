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
// the executor reports the fault; a load or store through such a pointer
// is still declined. Each was declined before 2026-12-07's fifty-sixth
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
	t.Run("a load through loaded offsets: declined", func(t *testing.T) {
		b := tile.NewBuilder("gather", nil)
		px, pi, po := b.Ptr("x", tile.F32), b.Ptr("idx", tile.I32), b.Ptr("out", tile.F32)
		r := b.Arange(0, 16)
		v := b.Load(b.AddPtr(px, b.Load(b.AddPtr(pi, r), nil, nil)), nil, nil)
		b.Store(b.AddPtr(po, r), v, nil)
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := native.Compile(k); !errors.Is(err, native.ErrUnsupported) || !strings.Contains(err.Error(), "not affine") {
			t.Fatalf("Compile: %v; want it declined (a pointer that is not affine)", err)
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
