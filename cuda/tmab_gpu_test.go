//go:build tilefuse_cuda

package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/tile"
)

// unmaskedBProduct is C = A·B at precision prec in bm×bn tiles as product
// builds it, B's load without a mask (n a multiple of bn, k of 32): the
// form whose B tensor copies apply (tma_b); A masked by its rows where m
// is not whole tiles.
func unmaskedBProduct(t *testing.T, m, n, k, bm, bn int, prec tile.Precision, meta tile.Meta) *tile.Kernel {
	t.Helper()
	const bk = 32
	if n%bn != 0 || k%bk != 0 {
		t.Fatalf("%dx%dx%d: B's load would need a mask at %dx%d tiles", m, n, k, bm, bn)
	}
	b := tile.NewBuilder("tmab_product", meta)
	pa, pb, pc := b.Ptr("a", tile.F32), b.Ptr("b", tile.F32), b.Ptr("c", tile.F32)
	rm := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm)), 1)
	rn := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), bn), b.Arange(0, bn)), 0)
	rkRow, rkCol := b.ExpandDims(b.Arange(0, bk), 0), b.ExpandDims(b.Arange(0, bk), 1)
	offA, offB := b.Add(b.Mul(rm, k), rkRow), b.Add(b.Mul(rkCol, n), rn)
	inM := b.Lt(rm, m)
	acc := b.For(0, k, bk, []*tile.Value{b.Zeros(tile.F32, bm, bn)}, func(k0 *tile.Value, c []*tile.Value) []*tile.Value {
		var av *tile.Value
		if m%bm != 0 {
			av = b.Load(b.AddPtr(pa, b.Add(offA, k0)), inM, 0.0)
		} else {
			av = b.Load(b.AddPtr(pa, b.Add(offA, k0)), nil, nil)
		}
		bv := b.Load(b.AddPtr(pb, b.Add(offB, b.Mul(k0, n))), nil, nil)
		return []*tile.Value{b.Dot(av, bv, c[0], prec)}
	})
	b.Store(b.AddPtr(pc, b.Add(b.Mul(rm, n), rn)), acc[0], b.And(inM, b.Lt(rn, n)))
	kk, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return kk
}

// TestTensorCopiesOfBOnGPU: the swapped wgmma loop with B's tiles copied
// by tensor copies too, on the device, gives the same result, bit for bit,
// as the same kernel with B's cp.async copies (the same operands reach the
// same wgmmas), within the precision's tolerance of the float64 product,
// through Launch and through a packed launch whose B is set anew (its map
// encoded again); outputs poisoned with NaN. TF32: four-dimensional copies
// (tma_b = 1; codegen.TensorMap's Paired form, which cuTensorMapEncodeTiled
// must take: strides out of order), without a CTA barrier in the loop
// (tma_b = 2: empty mbarriers), and from a producer warp of their own
// (ws = 2). bf16: three-dimensional copies (tma_b = 1; the Groups32 form,
// its strides out of order too). ptxsim runs the same forms under
// racecheck (cmd/tilefuse TestTensorCopiesOfB, TestTensorCopiesOfBBF16).
func TestTensorCopiesOfBOnGPU(t *testing.T) {
	if dev.Arch < 90 {
		t.Skipf("device %s is sm_%d: tensor copies and wgmma need sm_90a (Hopper)", dev.Name, dev.Arch)
	}
	gpu := &Launcher{Dev: dev}
	refs := map[[3]int][2][]float64{}
	tf32Forms, bf16Forms := []tile.Meta{{"tma_b": 1}, {"tma_b": 2}, {"ws": 2}}, []tile.Meta{{"tma_b": 1}}
	for _, c := range []struct {
		name    string
		m, n, k int
		bm, bn  int
		meta    tile.Meta
		prec    tile.Precision
	}{
		{"256x128 8 warps 4 stages", 512, 256, 96, 256, 128, tile.Meta{"num_warps": 8, "num_stages": 4}, tile.PrecTF32},
		{"256x128 8 warps 4 stages, 1024³", 1024, 1024, 1024, 256, 128, tile.Meta{"num_warps": 8, "num_stages": 4}, tile.PrecTF32},
		{"128x64 4 warps 3 stages", 384, 192, 160, 128, 64, tile.Meta{"num_warps": 4, "num_stages": 3}, tile.PrecTF32},
		{"256x128 A's rows masked", 300, 256, 288, 256, 128, tile.Meta{"num_warps": 8, "num_stages": 4}, tile.PrecTF32},
		{"bf16 256x128 8 warps 4 stages", 512, 256, 96, 256, 128, tile.Meta{"num_warps": 8, "num_stages": 4}, tile.PrecBF16},
		{"bf16 192x128 8 warps 4 stages, A's rows masked", 430, 256, 288, 192, 128, tile.Meta{"num_warps": 8, "num_stages": 4}, tile.PrecBF16},
		{"bf16 256x128 8 warps 3 stages, 1024³", 1024, 1024, 1024, 256, 128, tile.Meta{"num_warps": 8, "num_stages": 3}, tile.PrecBF16},
	} {
		t.Run(fmt.Sprintf("%s/%dx%dx%d", c.name, c.m, c.n, c.k), func(t *testing.T) {
			m, n, k := c.m, c.n, c.k
			a, b := seededOperands(m, n, k)
			grid := tile.Grid{tile.CDiv(m, c.bm), tile.CDiv(n, c.bn)}
			base := launchPoisoned(t, gpu, unmaskedBProduct(t, m, n, k, c.bm, c.bn, c.prec, withMeta(tile.Meta{"wgmma": 2, "tma": 1, "tma_b": 0}, c.meta)), grid, a, b, m, n)
			forms, tol, copy := tf32Forms, 4e-3, "cp.async.bulk.tensor.4d"
			if c.prec == tile.PrecBF16 {
				forms, tol, copy = bf16Forms, 2e-2, "cp.async.bulk.tensor.3d"
			}
			nearFloat64(t, refs, [3]int{m, n, k}, a, b, base, tol)
			for _, form := range forms {
				kt := unmaskedBProduct(t, m, n, k, c.bm, c.bn, c.prec, withMeta(withMeta(tile.Meta{"wgmma": 2, "tma": 1}, c.meta), form))
				ck, err := codegen.Compile(kt, codegen.Options{NumWarps: c.meta["num_warps"], Arch: dev.Target(), Spec: []int{16, 16, 16}})
				if err != nil {
					t.Fatal(err)
				}
				if len(ck.TensorMaps) != 2 || ck.TensorMaps[1].Paired != (c.prec == tile.PrecTF32) || ck.TensorMaps[1].Groups32 != (c.prec == tile.PrecBF16) || !strings.Contains(ck.PTX, copy) {
					t.Fatalf("%v: not B's tensor copies: %v", form, ck.TensorMaps)
				}
				if ws := form["ws"] == 2; ws != (ck.ProducerWarps > 0) {
					t.Fatalf("%v: %d producer warps", form, ck.ProducerWarps)
				}
				got := launchPoisoned(t, gpu, kt, grid, a, b, m, n)
				sameBits(t, got, base, n, [2]string{fmt.Sprint(form), "B by cp.async"})
				// a packed launch, B first a buffer of zeros, then set anew
				packed := packedAnew(t, ck, kt, grid, a, b, m, n, 1)
				sameBits(t, packed, base, n, [2]string{fmt.Sprint(form, ", packed"), "B by cp.async"})
			}
		})
	}
}
