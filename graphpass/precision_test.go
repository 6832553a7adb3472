package graphpass

import (
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/tile"
)

// TestDefaultPrecision: where the user chose no precision, a matrix
// product at least 256 on each side on the H200 is written in 3xTF32 (the
// swapped wgmma form, block-summed); smaller products, targets without
// Hopper's shared memory (an A100's 163 KiB: mma.sync's one accumulator)
// and the CPU stay ieee.
func TestDefaultPrecision(t *testing.T) {
	a100 := GPU(108, 1024, 163<<10)
	for _, c := range []struct {
		name    string
		m, k, n int
		ta      bool
		tgt     Target
		want    tile.Precision
	}{
		{"4096³ on the H200", 4096, 4096, 4096, false, H200, tile.PrecTF32x3},
		{"the BERT layer's 4096×768×3072 on the H200", 4096, 3072, 768, false, H200, tile.PrecTF32x3},
		{"a weight gradient Aᵀ·B 768×3072×4096 on the H200 (staged)", 768, 4096, 3072, true, H200, tile.PrecTF32x3},
		{"K = 64 on the H200", 4096, 64, 4096, false, H200, tile.PrecIEEE},
		{"128³ on the H200 (slower in 3xTF32)", 128, 128, 128, false, H200, tile.PrecIEEE},
		{"256³ on the H200", 256, 256, 256, false, H200, tile.PrecTF32x3},
		{"100 columns on the H200", 1000, 512, 100, false, H200, tile.PrecIEEE},
		{"4096³ on an A100", 4096, 4096, 4096, false, a100, tile.PrecIEEE},
		{"4096³ on the CPU", 4096, 4096, 4096, false, CPU(16), tile.PrecIEEE},
	} {
		t.Run(c.name, func(t *testing.T) {
			grp := productGroup(t, c.m, c.k, c.n, c.ta, false, func(*G.ExprGraph, *G.Node) {})
			got := DefaultPrecision(grp, c.tgt)
			if got != c.want {
				t.Fatalf("%v, want %v", got, c.want)
			}
			if got == tile.PrecTF32x3 && !BlockSummed(defaultMeta(grp, c.tgt, got)) {
				t.Fatalf("3xTF32 chosen, but its kernel's meta %v is not the block-summed form", defaultMeta(grp, c.tgt, got))
			}
		})
	}
}
