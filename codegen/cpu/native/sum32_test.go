package native_test

import (
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
)

// TestSum32Native: the measuring switch TILEFUSE_NATIVE_SUM32 (SetSum32:
// paired zmm loops sum rows in 32 partial sums) is off by default; on, the
// row kernels' paired loops with row sums take it (LayerNorm's two, softmax's
// one), and their results stay within the row sums' tolerance of the
// reference (2n·u·Σ|x| for a row of n: here 1e-5 relative and absolute for
// LayerNorm, 2e-6 relative for softmax), on poisoned outputs, with rows
// whose tail runs the masked loop (1000 of 1024, 96 of 128) and rows of
// the block. Skipped without AVX-512 (no zmm loop there).
func TestSum32Native(t *testing.T) {
	requireAVX512(t, "no paired zmm loop")
	if native.SetSum32(false) {
		t.Fatal("TILEFUSE_NATIVE_SUM32 is on in the test's environment: the default is off")
	}
	was := native.SetAVX512(true)
	defer native.SetAVX512(was)
	for _, c := range []struct {
		name           string
		wl             string
		block, n, rows int
		wantLoops      int // paired loops in 32 partial sums (each phase's two unmasked loops)
		rel, abs       float64
	}{
		{name: "layernorm rows of the block", wl: "layernorm", block: 1024, n: 1024, rows: 9, wantLoops: 4, rel: 1e-5, abs: 1e-5},
		{name: "layernorm rows of 1000 in blocks of 1024", wl: "layernorm", block: 1024, n: 1000, rows: 7, wantLoops: 4, rel: 1e-5, abs: 1e-5},
		{name: "softmax rows of the block", wl: "softmax", block: 1024, n: 1024, rows: 9, wantLoops: 2, rel: 2e-6, abs: 1e-9},
		{name: "layernorm rows of 96 in blocks of 128", wl: "layernorm", block: 128, n: 96, rows: 5, wantLoops: 4, rel: 1e-5, abs: 1e-5},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, run, want := rowCase(t, c.name, c.wl, c.block, c.rows, c.n)
			for _, on := range []bool{false, true} {
				native.SetSum32(on)
				nk, err := native.Compile(k)
				native.SetSum32(false)
				if err != nil {
					t.Fatal(err)
				}
				wantLoops := c.wantLoops
				if !on {
					wantLoops = 0
				}
				if got := native.Sum32Loops(nk); got != wantLoops {
					t.Errorf("sum32 %v: %d loops in 32 partial sums, want %d", on, got, wantLoops)
				}
				got := run(func(args ...any) error { return nk.Launch(tile.Grid{c.rows}, args...) })
				nk.Free()
				for i, v := range got {
					if d := math.Abs(float64(v) - float64(want[i])); !(d <= c.abs+c.rel*math.Abs(float64(want[i]))) {
						t.Fatalf("sum32 %v: y[%d] = %v, reference %v", on, i, v, want[i])
					}
				}
			}
		})
	}
}
