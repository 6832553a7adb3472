//go:build tilefuse_cuda

package cuda

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/tile"
)

// wsProduct is C = A·B for row-major m×k A and k×n B of known sizes, as
// graphpass writes its products: bm×bn tiles of C, a K loop of 32, masks
// on every edge, meta-parameters meta (the wgmma form, warps, stages).
func wsProduct(t *testing.T, m, n, k, bm, bn int, prec tile.Precision, meta tile.Meta) *tile.Kernel {
	return product(t, "ws_product", m, n, k, bm, bn, prec, "rows and k", meta)
}

// product is C = A·B in bm×bn tiles named name, A's load masked by its
// rows' and K's bounds ("rows and k"), by its rows' alone ("rows") or not
// at all (""); B's load and the store masked on every edge.
func product(t *testing.T, name string, m, n, k, bm, bn int, prec tile.Precision, maskA string, meta tile.Meta) *tile.Kernel {
	t.Helper()
	const bk = 32
	b := tile.NewBuilder(name, meta)
	pa, pb, pc := b.Ptr("a", tile.F32), b.Ptr("b", tile.F32), b.Ptr("c", tile.F32)
	rm := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm)), 1)
	rn := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), bn), b.Arange(0, bn)), 0)
	rkRow, rkCol := b.ExpandDims(b.Arange(0, bk), 0), b.ExpandDims(b.Arange(0, bk), 1)
	offA, offB := b.Add(b.Mul(rm, k), rkRow), b.Add(b.Mul(rkCol, n), rn)
	inM, inN := b.Lt(rm, m), b.Lt(rn, n)
	acc := b.For(0, k, bk, []*tile.Value{b.Zeros(tile.F32, bm, bn)}, func(k0 *tile.Value, c []*tile.Value) []*tile.Value {
		var mask *tile.Value
		switch maskA {
		case "rows and k":
			mask = b.And(inM, b.Lt(b.Add(rkRow, k0), k))
		case "rows":
			mask = inM
		}
		var other any // zero where masked
		if mask != nil {
			other = 0.0
		}
		av := b.Load(b.AddPtr(pa, b.Add(offA, k0)), mask, other)
		bv := b.Load(b.AddPtr(pb, b.Add(offB, b.Mul(k0, n))), b.And(b.Lt(b.Add(rkCol, k0), k), inN), 0.0)
		return []*tile.Value{b.Dot(av, bv, c[0], prec)}
	})
	b.Store(b.AddPtr(pc, b.Add(b.Mul(rm, n), rn)), acc[0], b.And(inM, inN))
	kk, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return kk
}

// TestWarpSpecialisedProductOnGPU: the warp-specialised form of the
// swapped wgmma K loop (ws = 1: a producer warpgroup copying the stages,
// or with ws_warps = 8 as many warps as the consumers, consumer warps
// running the wgmmas, full and empty mbarriers between them, setmaxnreg
// past 8 warps) runs on the device at shapes no multiple of the
// tile (and of K's 32), TF32, bf16 and 3xTF32, with the pass over the
// copies 1 or 2 iterations behind them (bf16, 3xTF32) and without one
// (TF32, read by the tensor cores as it landed: cp.async.mbarrier.arrive.noinc). Each result is the same, bit for bit, as
// the same kernel's without ws (the same operands and wgmmas in the same
// order: the form only moves the copies to other warps), and within tol of
// Σ|a||b| of the float64 product in every element (outputs poisoned with
// NaN). ptxsim's TestWarpSpecialisedHandOver and cmd/tilefuse's
// TestPeerKernelsInSimulator run the same forms under racecheck.
func TestWarpSpecialisedProductOnGPU(t *testing.T) {
	if dev.Arch < 90 {
		t.Skipf("device %s is sm_%d: the warp-specialised wgmma form needs sm_90a (Hopper)", dev.Name, dev.Arch)
	}
	gpu := &Launcher{Dev: dev}
	refs := map[[3]int][2][]float64{}
	shapes := [][3]int{{200, 136, 72}, {1000, 1000, 1000}, {4095, 4097, 33}}
	for _, c := range []struct {
		name   string
		prec   tile.Precision
		bm, bn int
		meta   tile.Meta
		tol    float64
	}{
		{"tf32 256x128 8+4 warps 4 stages", tile.PrecTF32, 256, 128, tile.Meta{"num_warps": 8, "num_stages": 4}, 4e-3},
		{"tf32 128x64 4+4 warps 3 stages", tile.PrecTF32, 128, 64, tile.Meta{"num_warps": 4, "num_stages": 3}, 4e-3},
		{"tf32 256x128 8+4 warps producer 40 registers", tile.PrecTF32, 256, 128, tile.Meta{"num_warps": 8, "num_stages": 4, "ws_regs": 40}, 4e-3},
		{"tf32 128x128 8+8 warps", tile.PrecTF32, 128, 128, tile.Meta{"num_warps": 8, "num_stages": 4, "ws_warps": 8}, 4e-3},
		{"bf16 192x128 8+4 warps 4 stages lag 1", tile.PrecBF16, 192, 128, tile.Meta{"num_warps": 8, "num_stages": 4, "ws_lag": 1}, 1e-2},
		{"bf16 128x128 8+8 warps", tile.PrecBF16, 128, 128, tile.Meta{"num_warps": 8, "num_stages": 4, "ws_warps": 8}, 1e-2},
		{"bf16 256x128 8+4 warps 3 stages", tile.PrecBF16, 256, 128, tile.Meta{"num_warps": 8, "num_stages": 3}, 1e-2},
		{"bf16 128x128 8+4 warps 5 stages", tile.PrecBF16, 128, 128, tile.Meta{"num_warps": 8, "num_stages": 5}, 1e-2},
		// without ws, 3xTF32 is compared in its form with a block an
		// iteration (x3_blocks = 2), whose sums the producer's form keeps
		{"3xTF32 64x128 8+4 warps 6 stages", tile.PrecTF32x3, 64, 128, tile.Meta{"num_warps": 8, "num_stages": 6, "x3_blocks": 2}, 1e-5},
	} {
		for _, sh := range shapes {
			m, n, k := sh[0], sh[1], sh[2]
			t.Run(fmt.Sprintf("%s/%dx%dx%d", c.name, m, n, k), func(t *testing.T) {
				a, b := seededOperands(m, n, k)
				grid := tile.Grid{tile.CDiv(m, c.bm), tile.CDiv(n, c.bn)}
				run := func(ws int) []float32 {
					meta := withMeta(tile.Meta{"wgmma": 2, "ws": ws}, c.meta)
					return launchPoisoned(t, gpu, wsProduct(t, m, n, k, c.bm, c.bn, c.prec, meta), grid, a, b, m, n)
				}
				// the form the device runs: the producer's warps beside the
				// consumers, the driver's JIT taking the PTX, and enough
				// registers allocated for setmaxnreg's split (else the
				// consumers' setmaxnreg.inc would wait for ever: Load
				// reports it)
				meta := withMeta(tile.Meta{"wgmma": 2, "ws": 1}, c.meta)
				nw := meta["num_warps"]
				ck, err := codegen.Compile(wsProduct(t, m, n, k, c.bm, c.bn, c.prec, meta), codegen.Options{NumWarps: nw, Arch: dev.Target(), Spec: []int{16, 16, 16}})
				if err != nil {
					t.Fatal(err)
				}
				f, err := dev.Load(ck)
				if err != nil {
					t.Fatal(err)
				}
				pw := 4
				if w := meta["ws_warps"]; w != 0 {
					pw = w
				}
				if ck.ProducerWarps != pw || f.Threads != 32*(nw+pw) || !strings.Contains(ck.PTX, "mbarrier.try_wait") {
					t.Fatalf("not the warp-specialised form: %d producer warps, %v", ck.ProducerWarps, f)
				}
				if ck.RegisterPool() > f.Regs*f.Threads { // Load refuses such a kernel
					t.Fatalf("%v: setmaxnreg's split %v needs %d registers", f, ck.RegSplit, ck.RegisterPool())
				}
				t.Log(f)
				got, base := run(1), run(0)
				sameBits(t, got, base, n, [2]string{"with ws", "without"})
				nearFloat64(t, refs, sh, a, b, got, c.tol)
			})
		}
	}
}

// wsReference is the float64 product of a (m×k) and b (k×n) and Σ|a||b|
// per element, computed once a shape (the inputs are seeded by the shape).
func wsReference(refs map[[3]int][2][]float64, sh [3]int, a, b []float32) (ref, mag []float64) {
	if r, ok := refs[sh]; ok {
		return r[0], r[1]
	}
	m, n, k := sh[0], sh[1], sh[2]
	ref, mag = make([]float64, m*n), make([]float64, m*n)
	for i := 0; i < m; i++ {
		for kk := 0; kk < k; kk++ {
			x := float64(a[i*k+kk])
			row, mrow := ref[i*n:(i+1)*n], mag[i*n:(i+1)*n]
			for j, y := range b[kk*n : (kk+1)*n] {
				p := x * float64(y)
				row[j] += p
				mrow[j] += math.Abs(p)
			}
		}
	}
	refs[sh] = [2][]float64{ref, mag}
	return ref, mag
}

// seededOperands are A (m×k) and B (k×n), uniform in ±1, seeded by the shape.
func seededOperands(m, n, k int) (a, b []float32) {
	rng := rand.New(rand.NewPCG(uint64(m), uint64(n*k)))
	a, b = make([]float32, m*k), make([]float32, k*n)
	for i := range a {
		a[i] = float32(rng.Float64()*2 - 1)
	}
	for i := range b {
		b[i] = float32(rng.Float64()*2 - 1)
	}
	return a, b
}

// withMeta is base with extra's entries added (extra's win).
func withMeta(base, extra tile.Meta) tile.Meta {
	m := maps.Clone(base)
	maps.Copy(m, extra)
	return m
}

// launchPoisoned launches kern over grid on a and b into an m×n output
// poisoned with NaN, and returns it.
func launchPoisoned(t *testing.T, gpu *Launcher, kern *tile.Kernel, grid tile.Grid, a, b []float32, m, n int) []float32 {
	t.Helper()
	out := make([]float32, m*n)
	for i := range out {
		out[i] = float32(math.NaN())
	}
	if err := gpu.Launch(kern, grid, a, b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameBits fails t at the first element (of rows n wide) where got and
// want differ in their bits; what names the two forms.
func sameBits(t *testing.T, got, want []float32, n int, what [2]string) {
	t.Helper()
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("element (%d, %d): %v %s, %v %s", i/n, i%n, got[i], what[0], want[i], what[1])
		}
	}
}

// nearFloat64 fails t where got (the product of a and b, shape sh: m, n,
// k) is NaN or off the float64 product by more than tol of Σ|a||b|, and
// logs the largest such error.
func nearFloat64(t *testing.T, refs map[[3]int][2][]float64, sh [3]int, a, b, got []float32, tol float64) {
	t.Helper()
	ref, mag := wsReference(refs, sh, a, b)
	n, worst := sh[1], 0.0
	for i := range got {
		e := math.Abs(float64(got[i])-ref[i]) / mag[i]
		if math.IsNaN(e) || e > tol {
			t.Fatalf("element (%d, %d): %v, float64 %v (error %.2g of Σ|a||b|, tolerance %.2g)", i/n, i%n, got[i], ref[i], e, tol)
		}
		worst = max(worst, e)
	}
	t.Logf("max error %.2g of Σ|a||b|", worst)
}
