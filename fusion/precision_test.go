package fusion

import (
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// TestDefaultPrecisionPerKernel: without WithPrecision, the CUDA backend
// writes each matrix product at graphpass.DefaultPrecision — on the H200 a
// 512×256×256 product in 3xTF32 (the block-summed swapped form), a
// 64-column one in ieee — while WithPrecision(ieee) keeps both on the FMA
// and the CPU backend never takes 3xTF32 by default; the autotuner's
// candidates for a default 3xTF32 product are block-summed forms only.
// (Stages to emit only: no device is needed to choose.)
func TestDefaultPrecisionPerKernel(t *testing.T) {
	graph := func() *G.ExprGraph {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float32, G.WithShape(512, 256), G.WithName("x"))
		w := G.NewMatrix(g, tensor.Float32, G.WithShape(256, 256), G.WithName("w"))
		v := G.NewMatrix(g, tensor.Float32, G.WithShape(256, 64), G.WithName("v"))
		y := G.Must(G.Tanh(G.Must(G.Mul(x, w))))
		G.Must(G.Mul(y, v))
		return g
	}
	// the dots' precisions of the compilation's kernels, by the product's columns
	precs := func(c *compilation) map[int]tile.Precision {
		out := map[int]tile.Precision{}
		for grp, k := range c.kernels {
			if grp.Kind != graphpass.MatMulGroup {
				continue
			}
			k.Tile.Walk(func(v *tile.Value) {
				if v.Op == tile.OpDot {
					out[grp.MatMul.Info.Shape[1]] = v.Prec
				}
			})
		}
		return out
	}
	for _, c := range []struct {
		name     string
		opts     []Option
		wide, nn tile.Precision // 512×256 and 512×64
	}{
		{"CUDA on the H200, no WithPrecision", []Option{WithBackend(CUDA), WithTarget(graphpass.H200)}, tile.PrecTF32x3, tile.PrecIEEE},
		{"CUDA on the H200, WithPrecision(ieee)", []Option{WithBackend(CUDA), WithTarget(graphpass.H200), WithPrecision(tile.PrecIEEE)}, tile.PrecIEEE, tile.PrecIEEE},
		{"CUDA on the H200, WithPrecision(tf32)", []Option{WithBackend(CUDA), WithTarget(graphpass.H200), WithPrecision(tile.PrecTF32)}, tile.PrecTF32, tile.PrecTF32},
		{"the CPU with the H200's kernels, no WithPrecision", []Option{WithBackend(CPU), WithTarget(graphpass.H200), WithMatMulFusion(true)}, tile.PrecIEEE, tile.PrecIEEE},
	} {
		t.Run(c.name, func(t *testing.T) {
			comp := compileThrough(t, graph(), "emit", c.opts...)
			got := precs(comp)
			if len(got) != 2 || got[256] != c.wide || got[64] != c.nn {
				t.Fatalf("dots by columns %v, want 256: %v, 64: %v", got, c.wide, c.nn)
			}
			for grp := range comp.kernels {
				if prec, cands := comp.candidates(grp); prec == tile.PrecTF32x3 && !comp.cfg.precisionSet {
					for _, m := range cands {
						if !graphpass.BlockSummed(m) {
							t.Errorf("%v: candidate %v is not block-summed", grp, m)
						}
					}
				}
			}
		})
	}
}
