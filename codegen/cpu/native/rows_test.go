package native_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/kernels"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// rowKernel is the bench's row kernel wl (kernels.LayerNorm or
// kernels.Softmax) in blocks of block lanes, and a launch of it over rows
// rows of n (the row stride n) on x into y (LayerNorm's weights, bias,
// mean and rstd fixed by the seed).
func rowKernel(tb testing.TB, wl string, block, rows, n int) (*tile.Kernel, func(launch func(args ...any) error, x, y []float32) error) {
	tb.Helper()
	return rowKernelMeta(tb, wl, tile.Meta{"BLOCK": block}, rows, n)
}

// rowKernelMeta is rowKernel with the kernel's meta-parameters given.
func rowKernelMeta(tb testing.TB, wl string, meta tile.Meta, rows, n int) (*tile.Kernel, func(launch func(args ...any) error, x, y []float32) error) {
	tb.Helper()
	var k *tile.Kernel
	var err error
	if wl == "layernorm" {
		k, err = kernels.LayerNorm(meta)
	} else {
		k, err = kernels.Softmax(meta)
	}
	if err != nil {
		tb.Fatal(err)
	}
	rng := tiletest.RNG("rows")
	w, bias := tiletest.Uniform(rng, n, 0.5, 1.5), tiletest.Uniform(rng, n, -1, 1)
	mean, rstd := make([]float32, rows), make([]float32, rows)
	return k, func(launch func(args ...any) error, x, y []float32) error {
		if wl == "layernorm" {
			return launch(x, y, w, bias, mean, rstd, n, n, float32(1e-5))
		}
		return launch(x, y, n, n)
	}
}

// storeCase is a row kernel (rowKernel's wl) of rows rows of n elements in
// blocks of block, with its tolerances against the reference.
type storeCase struct {
	name     string
	wl       string
	block, n int
	rows     int
	rel, abs float64
}

// storeCases are the row kernels the store tests (TestRowStoreHints,
// TestStoresPastTheCaches) run: rows of the vector's multiple and not, then
// the test's own case.
func storeCases(own storeCase) []storeCase {
	return []storeCase{
		{name: "layernorm 37 rows of 1024", wl: "layernorm", block: 1024, n: 1024, rows: 37, rel: 1e-5, abs: 1e-5},
		{name: "softmax 37 rows of 1024", wl: "softmax", block: 1024, n: 1024, rows: 37, rel: 2e-6, abs: 1e-9},
		{name: "softmax 21 rows of 1000 in blocks of 1024", wl: "softmax", block: 1024, n: 1000, rows: 21, rel: 2e-6, abs: 1e-9},
		own,
	}
}

// TestRowStoreHints: the row kernels' stores of a row in zmm loops hint
// the next program's row for writing (prefetchw, body.go: prefetchStore)
// where the CPU has AVX-512 and not without; the hint changes no result:
// bit for bit the code without hints, and within the tolerances of the
// zmm tests (zmm_test.go) of the reference, on poisoned outputs, with
// rows whose last program hints past the buffer's end (a hint never
// faults) and rows shorter than the block (masked loops).
func TestRowStoreHints(t *testing.T) {
	requireJIT(t)
	for _, c := range storeCases(storeCase{name: "layernorm 5 rows of 96 in blocks of 128", wl: "layernorm", block: 128, n: 96, rows: 5, rel: 1e-5, abs: 1e-5}) {
		t.Run(c.name, func(t *testing.T) {
			hints := rowSwitch{"hints", "prefetchw in the code", native.SetStoreHints, native.PrefetchesW}
			hints.check(t, c.name, c.wl, c.block, c.rows, c.n, c.rel, c.abs, func(isa string) bool { return isa == "avx512" })
		})
	}
}

// rowSwitch is a code generator's switch that must change no result of
// the row kernels: set turns it on or off (returning the setting before),
// count is how many places of a compiled kernel show it (what names them).
type rowSwitch struct {
	name, what string
	set        func(on bool) (was bool)
	count      func(*native.Kernel) int
}

// check compiles the row kernel of wl (rows of n in blocks of block) with
// the switch off and on for each ISA the CPU has: the code shows the
// switch exactly where shows(isa) and it is on, and the outputs, on
// poisoned memory, are the same bits both ways and within rel and abs of
// the reference.
func (sw rowSwitch) check(t *testing.T, name, wl string, block, rows, n int, rel, abs float64, shows func(isa string) bool) {
	t.Helper()
	k, run, want := rowCase(t, name, wl, block, rows, n)
	for _, isa := range isas(t) {
		native.SetAVX512(isa == "avx512")
		var outs [2][]float32
		for i, on := range []bool{false, true} {
			was := sw.set(on)
			nk, err := native.Compile(k)
			sw.set(was)
			if err != nil {
				t.Fatal(err)
			}
			if got, wantSome := sw.count(nk) > 0, on && shows(isa); got != wantSome {
				t.Errorf("%s, %s %v: %d %s, want some: %v", isa, sw.name, on, sw.count(nk), sw.what, wantSome)
			}
			outs[i] = run(func(args ...any) error { return nk.Launch(tile.Grid{rows}, args...) })
			nk.Free()
		}
		for i, v := range outs[1] {
			if math.Float32bits(v) != math.Float32bits(outs[0][i]) {
				t.Fatalf("%s: y[%d] = %v with %s, %v without", isa, i, v, sw.name, outs[0][i])
			}
			if d := math.Abs(float64(v) - float64(want[i])); !(d <= abs+rel*math.Abs(float64(want[i]))) {
				t.Fatalf("%s: y[%d] = %v, reference %v", isa, i, v, want[i])
			}
		}
	}
}

// BenchmarkRows: the row kernels (kernels.LayerNorm and kernels.Softmax,
// rows of 1024 f32, one row a program) run natively, on rows that stay in
// the caches (64 and 256) and rows that do not (4096); SetBytes counts
// each input read once and each output written once; ns/row is a launch's
// time over its rows.
func BenchmarkRows(b *testing.B) {
	requireJIT(b)
	const cols = 1024
	for _, wl := range []string{"layernorm", "softmax"} {
		for _, rows := range []int{1, 64, 256, 4096} {
			b.Run(fmt.Sprintf("%s/%dx%d", wl, rows, cols), func(b *testing.B) {
				launch, l, x, y := rowBench(b, wl, rows, cols)
				b.SetBytes(8 * int64(rows) * cols)
				for b.Loop() {
					if err := launch(l, x, y); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows), "ns/row")
			})
		}
	}
}

// rowBench compiles the row kernel wl over rows of cols (one row a
// program, freed when b ends) and gives rowKernel's launch of it, its
// native launcher over rows programs, seeded inputs and an output.
func rowBench(b *testing.B, wl string, rows, cols int) (launch func(l func(args ...any) error, x, y []float32) error, l func(args ...any) error, x, y []float32) {
	b.Helper()
	k, launch := rowKernel(b, wl, cols, rows, cols)
	nk, err := native.Compile(k)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nk.Free() })
	x, y = tiletest.Uniform(tiletest.RNG("rows"), rows*cols, -4, 4), make([]float32, rows*cols)
	return launch, func(args ...any) error { return nk.Launch(tile.Grid{rows}, args...) }, x, y
}

// rowCase is the row kernel wl over rows of n in blocks of block, with
// seeded inputs (named by name): the kernel, a run of it through a
// launcher into an output poisoned with NaNs, and the reference
// interpreter's output.
func rowCase(t *testing.T, name, wl string, block, rows, n int) (k *tile.Kernel, run func(l func(args ...any) error) []float32, want []float32) {
	t.Helper()
	k, launch := rowKernel(t, wl, block, rows, n)
	x := tiletest.Uniform(tiletest.RNG(name), rows*n, -4, 4)
	run = func(l func(args ...any) error) []float32 {
		y := make([]float32, rows*n)
		for i := range y {
			y[i] = float32(math.NaN())
		}
		if err := launch(l, x, y); err != nil {
			t.Fatal(err)
		}
		return y
	}
	want = run(func(args ...any) error { return tiletest.Interp{}.Launch(k, tile.Grid{rows}, args...) })
	return k, run, want
}
