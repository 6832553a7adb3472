package native_test

import (
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestStoresPastTheCaches: a row kernel's output store with the streaming
// hint (the kernels' STREAM = 1) is written past the caches (VMOVNTPS,
// body.go: ntStore) in its unmasked loops, ymm and zmm alike, and not
// without the hint; the outputs are the same bits as the kernel's without
// it and within the zmm tests' tolerances of the reference, on poisoned
// memory, with the output at every alignment of a vector (0 to 15 elements
// past a 64-byte boundary: a vector that is not aligned takes the plain
// store, which VMOVNTPS would fault on) and no element outside the output
// written.
func TestStoresPastTheCaches(t *testing.T) {
	requireJIT(t)
	for _, c := range storeCases(storeCase{name: "layernorm 9 rows of 4104 in blocks of 8192", wl: "layernorm", block: 8192, n: 4104, rows: 9, rel: 1e-5, abs: 1e-5}) {
		t.Run(c.name, func(t *testing.T) {
			k0, launch := rowKernelMeta(t, c.wl, tile.Meta{"BLOCK": c.block}, c.rows, c.n)
			k1, _ := rowKernelMeta(t, c.wl, tile.Meta{"BLOCK": c.block, "STREAM": 1}, c.rows, c.n)
			x := tiletest.Uniform(tiletest.RNG(c.name), c.rows*c.n, -4, 4)
			checkPastTheCaches(t, k0, k1, c.rows, c.rows*c.n, 16, c.rel, c.abs, func(l func(args ...any) error, y []float32) error {
				return launch(l, x, y)
			})
		})
	}
}

// scaleRows64 is y[r, c] = x[r, c]·2 − 1 over rows of n f64 (c < n, one row
// a program in a block of block lanes), its store with the streaming hint
// where stream is set.
func scaleRows64(t *testing.T, block int, stream bool) *tile.Kernel {
	t.Helper()
	b := tile.NewBuilder("scale64", tile.Meta{"BLOCK": block})
	x, y := b.Ptr("x", tile.F64), b.Ptr("y", tile.F64)
	n := b.Param("n", tile.I32)
	base := b.Mul(b.ProgramID(0), n)
	cols := b.Arange(0, b.BlockSize("BLOCK"))
	mask := b.Lt(cols, n)
	v := b.Sub(b.Mul(b.Load(b.AddPtr(x, b.Add(base, cols)), mask, nil), 2.0), 1.0)
	var hint []tile.CacheHint
	if stream {
		hint = []tile.CacheHint{tile.CacheStreaming}
	}
	b.Store(b.AddPtr(y, b.Add(base, cols)), v, mask, hint...)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestF64StoresPastTheCaches: TestStoresPastTheCaches for f64 rows (a zmm
// register of eight lanes, or two ymm halves without AVX-512), bit for bit
// the reference, the output at 0 to 7 elements past a 64-byte boundary.
func TestF64StoresPastTheCaches(t *testing.T) {
	requireJIT(t)
	for _, c := range []struct {
		name           string
		rows, n, block int
	}{
		{"37 rows of 256", 37, 256, 256},
		{"21 rows of 100 in blocks of 128", 21, 100, 128},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := make([]float64, c.rows*c.n)
			for i, v := range tiletest.Uniform(tiletest.RNG(c.name), len(x), -4, 4) {
				x[i] = float64(v) / 3
			}
			checkPastTheCaches(t, scaleRows64(t, c.block, false), scaleRows64(t, c.block, true), c.rows, c.rows*c.n, 8, 0, 0, func(l func(args ...any) error, y []float64) error {
				return l(x, y, c.n)
			})
		})
	}
}

// checkPastTheCaches compiles k0 (a store without the streaming hint) and
// k1 (the same kernel with it) for each ISA the CPU has and launches each
// over grid programs (launch passes the arguments, y the output of n
// elements) with y at 0 to pad−1 elements past the start of a poisoned
// buffer (a fresh allocation: 64-byte aligned): k1 has stores past the
// caches and k0 none, k1's output is k0's bit for bit and within rel and
// abs of the reference's (k0 on the interpreter), and no element around
// y is written.
func checkPastTheCaches[T float32 | float64](t *testing.T, k0, k1 *tile.Kernel, grid, n, pad int, rel, abs float64, launch func(l func(args ...any) error, y []T) error) {
	t.Helper()
	run := func(l func(args ...any) error, off int) []T {
		buf := make([]T, n+2*pad)
		nan := T(math.NaN())
		for i := range buf {
			buf[i] = nan
		}
		y := buf[off : off+n]
		if err := launch(l, y); err != nil {
			t.Fatal(err)
		}
		for i, v := range buf {
			if (i < off || i >= off+n) && v == v {
				t.Fatalf("offset %d: element %d outside the output written (%v)", off, i, v)
			}
		}
		return y
	}
	want := run(func(args ...any) error { return tiletest.Interp{}.Launch(k0, tile.Grid{grid}, args...) }, 0)
	for _, isa := range isas(t) {
		nk0, nk1 := compileFor(t, isa, k0), compileFor(t, isa, k1)
		if c := native.NTStores(nk0); c != 0 {
			t.Errorf("%s: %d stores past the caches without the hint", isa, c)
		}
		if native.NTStores(nk1) == 0 {
			t.Errorf("%s: no store past the caches with the hint", isa)
		}
		for off := range pad {
			plain := run(func(args ...any) error { return nk0.Launch(tile.Grid{grid}, args...) }, off)
			past := run(func(args ...any) error { return nk1.Launch(tile.Grid{grid}, args...) }, off)
			for i, v := range past {
				if math.Float64bits(float64(v)) != math.Float64bits(float64(plain[i])) {
					t.Fatalf("%s, offset %d: y[%d] = %v past the caches, %v without", isa, off, i, v, plain[i])
				}
				if d := math.Abs(float64(v) - float64(want[i])); !(d <= abs+rel*math.Abs(float64(want[i]))) {
					t.Fatalf("%s, offset %d: y[%d] = %v, reference %v", isa, off, i, v, want[i])
				}
			}
		}
	}
}
