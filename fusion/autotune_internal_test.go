package fusion

import (
	"math"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
)

// TestSameOuts: a candidate's outputs match the default's within
// 1e-3·(1+|b|) in f32 and 1e-9·(1+|b|) in f64, or within ntol·max|b| where
// the products round their operands, NaN only where the default has NaN;
// the error names the output and the element.
func TestSameOuts(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		name      string
		got, want []any
		d         tile.DType
		ntol      float64
		err       string
	}{
		{"equal", []any{[]float32{1, 2, 3}}, []any{[]float32{1, 2, 3}}, tile.F32, 0, ""},
		{"within f32's tolerance", []any{[]float32{1, 2.0029, 3}}, []any{[]float32{1, 2, 3}}, tile.F32, 0, ""},
		{"past f32's tolerance", []any{[]float32{1, 2, 3}, []float32{1, 2, 3.005}}, []any{[]float32{1, 2, 3}, []float32{1, 2, 3}}, tile.F32, 0, "output 1 [2] = 3.005"},
		{"NaN where the default has NaN", []any{[]float32{nan, 1}}, []any{[]float32{nan, 1}}, tile.F32, 0, ""},
		{"NaN where the default has none", []any{[]float32{1, nan}}, []any{[]float32{1, 1}}, tile.F32, 0, "output 0 [1] = NaN"},
		{"a number where the default has NaN", []any{[]float32{1, 1}}, []any{[]float32{1, nan}}, tile.F32, 0, "output 0 [1] = 1, the default's NaN"},
		// the heads' dQ of the BERT layer in TF32 on the H200: every other
		// tiling -906.32 at an element where the default has -907.25
		{"tf32: within 8 units of TF32 of the largest", []any{[]float32{-906.32, 2000}}, []any{[]float32{-907.25, 2000}}, tile.F32, 8 * 0x1p-11, ""},
		{"tf32: past it", []any{[]float32{-890, 2000}}, []any{[]float32{-907.25, 2000}}, tile.F32, 8 * 0x1p-11, "output 0 [0] = -890"},
		{"ieee: the same difference fails", []any{[]float32{-906.32, 2000}}, []any{[]float32{-907.25, 2000}}, tile.F32, 0, "output 0 [0]"},
		{"tf32: NaN where the default has none", []any{[]float32{nan, 2000}}, []any{[]float32{1, 2000}}, tile.F32, 8 * 0x1p-11, "output 0 [0] = NaN"},
		{"within f64's tolerance", []any{[]float64{1 + 1e-10}}, []any{[]float64{1}}, tile.F64, 0, ""},
		{"past f64's tolerance", []any{[]float64{1 + 1e-8}}, []any{[]float64{1}}, tile.F64, 0, "output 0 [0]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := sameOuts(c.got, c.want, c.d, c.ntol)
			if c.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("got %v, want an error with %q", err, c.err)
			}
		})
	}
}

// BenchmarkSameOuts: the check of a peer-size row kernel's output (16M
// f32 elements).
func BenchmarkSameOuts(b *testing.B) {
	x := make([]float32, 1<<24)
	for i := range x {
		x[i] = float32(i%1000) / 7
	}
	got, want := []any{x}, []any{append([]float32(nil), x...)}
	b.SetBytes(8 << 24)
	for b.Loop() {
		if err := sameOuts(got, want, tile.F32, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDotTol: a kernel's tolerance of products is that of its least
// accurate dot: 8·2⁻¹¹ for either TF32 precision (graphpass writes flash
// attention's as tile.PrecTF32TB: without it the tuner rejected every
// wgmma dQ candidate, whose sums run in another order, on the H200),
// 8·2⁻⁸ for bf16, none for ieee and 3xTF32 or without dots.
func TestDotTol(t *testing.T) {
	kernel := func(precs ...tile.Precision) *tile.Kernel {
		b := tile.NewBuilder("dots", nil)
		out := b.Ptr("out", tile.F32)
		acc := b.Zeros(tile.F32, 16, 16)
		for _, p := range precs {
			acc = b.Dot(b.Full(1, tile.F32, 16, 16), b.Full(2, tile.F32, 16, 16), acc, p)
		}
		idx := b.Add(b.Mul(b.ExpandDims(b.Arange(0, 16), 1), b.Const(16, tile.I32)), b.ExpandDims(b.Arange(0, 16), 0))
		b.Store(b.AddPtr(out, idx), acc, nil)
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	for _, c := range []struct {
		name  string
		precs []tile.Precision
		want  float64
	}{
		{"no dots", nil, 0},
		{"ieee", []tile.Precision{tile.PrecIEEE}, 0},
		{"tf32x3", []tile.Precision{tile.PrecTF32x3}, 0},
		{"tf32", []tile.Precision{tile.PrecTF32}, 8 * 0x1p-11},
		{"tf32tb", []tile.Precision{tile.PrecTF32TB}, 8 * 0x1p-11},
		{"bf16", []tile.Precision{tile.PrecBF16}, 8 * 0x1p-8},
		{"tf32tb and bf16", []tile.Precision{tile.PrecTF32TB, tile.PrecBF16}, 8 * 0x1p-8},
		{"ieee and tf32tb", []tile.Precision{tile.PrecIEEE, tile.PrecTF32TB}, 8 * 0x1p-11},
	} {
		if got := dotTol(kernel(c.precs...)); got != c.want {
			t.Errorf("%s: dotTol %g, want %g", c.name, got, c.want)
		}
	}
}
