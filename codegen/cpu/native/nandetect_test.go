package native_test

import (
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestNaNDetectNative: a paired zmm loop whose reductions are all row max
// and min, and which stores nothing, runs without tracking NaNs, only
// detecting them (fast.go: nanDetectOK), and runs the row again tracking
// them where it saw one: its results are those of the loop that tracks
// them throughout (native.SetNaNDetect(false)) and of the ymm code, bit for
// bit, on rows without NaN (ties of +0 and -0 among them), with a NaN in
// the first or the second vector of a pair, NaNs of several payloads
// in one lane (the last one wins), a row all NaN and one all -Inf, rows of a multiple
// of 32 lanes (the paired loop) and a tail (the masked loop); poisoned
// outputs. A phase that also stores keeps the tracking loop.
func TestNaNDetectNative(t *testing.T) {
	requireAVX512(t, "no paired zmm loop")
	const block = 128
	nan := func(payload uint32) float32 { return math.Float32frombits(0x7fc00000 | payload) }
	negZero := float32(math.Copysign(0, -1))
	for _, c := range []struct {
		name       string
		n, rows    int
		store      bool // the phase also stores x·2
		wantDetect bool
	}{
		{name: "max and min, rows of the block", n: block, rows: 12, wantDetect: true},
		{name: "max and min, a tail of 100", n: 100, rows: 12, wantDetect: true},
		{name: "and a store in the phase", n: block, rows: 12, store: true, wantDetect: false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("nan_detect", tile.Meta{"BLOCK": block})
			px, pmax, pmin, py := b.Ptr("x", tile.F32), b.Ptr("max", tile.F32), b.Ptr("min", tile.F32), b.Ptr("y", tile.F32)
			n := b.Param("n", tile.I32)
			row := b.ProgramID(0)
			cols := b.Arange(0, block)
			mask := b.Lt(cols, n)
			off := b.Add(b.Mul(row, n), cols)
			x := b.Load(b.AddPtr(px, off), mask, math.Inf(-1))
			b.Store(b.AddPtr(pmax, row), b.Max(x, 0), nil)
			xm := b.Load(b.AddPtr(px, off), mask, math.Inf(1))
			b.Store(b.AddPtr(pmin, row), b.Min(xm, 0), nil)
			if c.store {
				b.Store(b.AddPtr(py, off), b.Mul(x, 2.0), mask)
			}
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			xs := tiletest.Uniform(tiletest.RNG(c.name), c.rows*c.n, -4, 4)
			set := func(r, j int, v float32) { xs[r*c.n+min(j, c.n-1)] = v }
			// row 0: none; row 1: ties of ±0 at the max and the min
			for j := 0; j < c.n; j++ {
				set(1, j, []float32{0, negZero}[j%2])
			}
			set(2, 3, nan(1))  // the first vector of a pair
			set(3, 20, nan(2)) // the second
			set(4, 5, nan(3))  // several in one lane (5 mod 16): the last wins
			set(4, 37, nan(4))
			set(4, 69, nan(5))
			for j := 0; j < c.n; j++ { // all NaN, and all -Inf
				set(5, j, nan(uint32(j+6)))
				set(6, j, float32(math.Inf(-1)))
			}
			set(7, c.n-1, nan(9)) // the row's last lane
			run := func(avx512, detect bool) ([]float32, int) {
				wasA, wasD := native.SetAVX512(avx512), native.SetNaNDetect(detect)
				nk, err := native.Compile(k)
				native.SetAVX512(wasA)
				native.SetNaNDetect(wasD)
				if err != nil {
					t.Fatal(err)
				}
				defer nk.Free()
				out := make([]float32, 2*c.rows+c.rows*c.n)
				for i := range out {
					out[i] = float32(math.NaN())
				}
				if err := nk.Launch(tile.Grid{c.rows}, xs, out[:c.rows], out[c.rows:2*c.rows], out[2*c.rows:], c.n); err != nil {
					t.Fatal(err)
				}
				return out, native.NaNDetects(nk)
			}
			got, detects := run(true, true)
			if (detects > 0) != c.wantDetect {
				t.Errorf("%d loops detect NaNs, want some: %v", detects, c.wantDetect)
			}
			tracked, none := run(true, false)
			if none != 0 {
				t.Errorf("NaN detection off: %d loops detect NaNs", none)
			}
			ymm, _ := run(false, true)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(tracked[i]) || math.Float32bits(got[i]) != math.Float32bits(ymm[i]) {
					t.Fatalf("out[%d] = %#x detecting NaNs, %#x tracking them, %#x in ymm", i, math.Float32bits(got[i]), math.Float32bits(tracked[i]), math.Float32bits(ymm[i]))
				}
			}
			if g := got[4]; math.Float32bits(g) != math.Float32bits(nan(5)) && c.n == block {
				t.Errorf("row 4's max = %#x, want the last NaN %#x", math.Float32bits(g), math.Float32bits(nan(5)))
			}
		})
	}
}
