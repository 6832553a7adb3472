package codegen_test

import (
	"math"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/tile"
)

// tmaProduct is C = A·B (row-major m×k A, k×n B) in bm×bn tiles of the
// swapped wgmma form, A's load masked by its rows' bound where maskA is
// "rows", by that and K's where "rows and k" (unmasked where ""), as
// graphpass writes its products.
func tmaProduct(t *testing.T, m, n, k, bm, bn int, prec tile.Precision, maskA string, meta tile.Meta) *tile.Kernel {
	t.Helper()
	const bk = 32
	b := tile.NewBuilder("tma_product", meta)
	pa, pb, pc := b.Ptr("a", tile.F32), b.Ptr("b", tile.F32), b.Ptr("c", tile.F32)
	rm := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm)), 1)
	rn := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), bn), b.Arange(0, bn)), 0)
	rkRow, rkCol := b.ExpandDims(b.Arange(0, bk), 0), b.ExpandDims(b.Arange(0, bk), 1)
	offA, offB := b.Add(b.Mul(rm, k), rkRow), b.Add(b.Mul(rkCol, n), rn)
	inM, inN := b.Lt(rm, m), b.Lt(rn, n)
	acc := b.For(0, k, bk, []*tile.Value{b.Zeros(tile.F32, bm, bn)}, func(k0 *tile.Value, c []*tile.Value) []*tile.Value {
		var mask *tile.Value
		switch maskA {
		case "rows":
			mask = inM
		case "rows and k":
			mask = b.And(inM, b.Lt(b.Add(rkRow, k0), k))
		}
		av := b.Load(b.AddPtr(pa, b.Add(offA, k0)), mask, nil)
		bv := b.Load(b.AddPtr(pb, b.Add(offB, b.Mul(k0, n))), b.And(b.Lt(b.Add(rkCol, k0), k), inN), 0.0)
		return []*tile.Value{b.Dot(av, bv, c[0], prec)}
	})
	storeMask := b.And(inM, inN)
	if maskA == "rows" {
		storeMask = inN // every row of the grid's tiles: those past m must be zeros
	}
	b.Store(b.AddPtr(pc, b.Add(b.Mul(rm, n), rn)), acc[0], storeMask)
	kk, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return kk
}

// TestTensorCopiesOfA: with tma = 1 the swapped TF32 loop copies A's tiles
// by cp.async.bulk.tensor through a tensor map after the kernel's
// parameters (rows of k floats, boxes 32×BLOCK_M, the 128-byte swizzle of
// the wgmma tile) where A's load is unmasked, and keeps cp.async where it
// is masked in other ways (or tma_k = 0 where it is masked along k); at
// bf16, whose pass over A's copies converts them, the pass waits for the
// tensor copies first (TestBF16TensorCopiesByDefault: where tma is not
// given). Each kernel runs in
// the simulator with racecheck and initcheck against the exact product of
// small integers.
func TestTensorCopiesOfA(t *testing.T) {
	for _, c := range []struct {
		name            string
		m, n, k, bm, bn int
		prec            tile.Precision
		maskA           string
		wantTensor      bool
		rows            int64 // the map's rows (0: from the argument)
		cols            int64 // the map's columns (0: its rows' length)
		tmaK            int   // meta-parameter tma_k (0: absent; -1: tma_k = 0)
	}{
		{"256x128, B and C masked", 512, 200, 96, 256, 128, tile.PrecTF32, "", true, 0, 0, 0},
		{"128x64, 5 iterations", 384, 136, 160, 128, 64, tile.PrecTF32, "", true, 0, 0, 0},
		{"A's rows masked: a map of m rows", 300, 200, 96, 256, 128, tile.PrecTF32, "rows", true, 300, 0, 0},
		{"A's rows masked, 128x64", 200, 100, 64, 128, 64, tile.PrecTF32, "rows", true, 200, 0, 0},
		{"A masked along k too, tma_k = 0: cp.async", 300, 200, 96, 256, 128, tile.PrecTF32, "rows and k", false, 0, 0, -1},
		{"A masked along k too: a map of m rows and k columns (tma_k's default)", 300, 200, 96, 256, 128, tile.PrecTF32, "rows and k", true, 300, 96, 0},
		{"A masked along k too, tma_k: a map of m rows and k columns", 300, 200, 96, 256, 128, tile.PrecTF32, "rows and k", true, 300, 96, 1},
		// rows of 100 floats: 16-byte aligned, not whole BLOCK_K steps;
		// the last step's box past column 100 reads zeros, not the next row
		{"k = 100, masked, tma_k: rows not whole steps", 300, 200, 100, 256, 128, tile.PrecTF32, "rows and k", true, 300, 100, 1},
		{"k = 100, masked, tma_k, 128x64", 200, 100, 100, 128, 64, tile.PrecTF32, "rows and k", true, 200, 100, 1},
		{"k = 98, tma_k: rows not 16-byte aligned, cp.async", 300, 200, 98, 256, 128, tile.PrecTF32, "rows and k", false, 0, 0, 1},
		// bf16's pass over A's copies (the conversion into the stage's
		// bf16 tile) waits for the tensor copies first
		{"bf16 (a pass over A's copies, after they land)", 256, 128, 64, 256, 128, tile.PrecBF16, "", true, 0, 0, 0},
		{"bf16, A masked along rows and k", 300, 200, 100, 256, 128, tile.PrecBF16, "rows and k", true, 300, 100, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			nw := c.bn / 16
			meta := tile.Meta{"wgmma": 2, "tma": 1, "num_warps": nw, "num_stages": 3}
			if c.tmaK != 0 {
				meta["tma_k"] = max(c.tmaK, 0)
			}
			kk := tmaProduct(t, c.m, c.n, c.k, c.bm, c.bn, c.prec, c.maskA, meta)
			ck, err := codegen.Compile(kk, codegen.Options{NumWarps: nw, Arch: 90, Spec: []int{16, 16, 16}})
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range ck.PTX {
				if r >= 0x80 { // ptxas stops at the first non-ASCII byte, comments included
					t.Fatalf("a non-ASCII character at byte %d of the PTX: %q", i, ck.PTX[max(0, i-40):i+4])
				}
			}
			if got := strings.Contains(ck.PTX, "cp.async.bulk.tensor.2d"); got != c.wantTensor {
				t.Fatalf("tensor copies %v, want %v", got, c.wantTensor)
			}
			if c.wantTensor {
				want := codegen.TensorMap{Param: 0, ElemBytes: 4, Inner: int64(c.k), Rows: c.rows, Cols: c.cols, Box: [2]int{32, c.bm}, Swizzle: 128}
				if len(ck.TensorMaps) != 1 || ck.TensorMaps[0] != want {
					t.Fatalf("tensor maps %v, want [%v]", ck.TensorMaps, want)
				}
				for _, s := range []string{".param .align 64 .b8 tmap_0[128]", "// " + want.String(), "mbarrier.arrive.expect_tx", "cvta.param.u64"} {
					if !strings.Contains(ck.PTX, s) {
						t.Fatalf("no %q in the PTX", s)
					}
				}
			} else if len(ck.TensorMaps) != 0 || strings.Contains(ck.PTX, "tmap_") {
				t.Fatalf("tensor maps %v where A is copied by cp.async", ck.TensorMaps)
			}
			// A's buffer and C hold the grid's rows; A's rows past m are
			// NaN, which its mask reads as zeros (C's rows there are 0)
			rowsGrid := tile.CDiv(c.m, c.bm) * c.bm
			a, b, out := make([]float32, rowsGrid*c.k), make([]float32, c.k*c.n), make([]float32, rowsGrid*c.n)
			for i := range a {
				a[i] = float32(i%7) - 3
				if i >= c.m*c.k {
					a[i] = float32(math.NaN())
				}
			}
			for i := range b {
				b[i] = float32(i%5) - 2
			}
			for i := range out {
				out[i] = float32(1e30)
			}
			sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true}
			if err := sim.Launch(kk, tile.Grid{tile.CDiv(c.m, c.bm), tile.CDiv(c.n, c.bn)}, a, b, out); err != nil {
				t.Fatal(err)
			}
			exactProduct(t, "", a, b, out, c.m, c.n, c.k)
			if c.maskA == "rows" {
				for i := c.m * c.n; i < len(out); i++ {
					if out[i] != 0 {
						t.Fatalf("C[%d][%d] = %v past A's rows, want 0 (their mask)", i/c.n, i%c.n, out[i])
					}
				}
			}
		})
	}
}

// TestBF16TensorCopiesByDefault: without the meta-parameter tma, bf16's A
// is copied by tensor copies at tiles of tmaBF16Rows rows or more (192 and
// 256, as measured), by cp.async at smaller ones; tma = 0 and 1 decide.
func TestBF16TensorCopiesByDefault(t *testing.T) {
	for _, c := range []struct {
		name   string
		bm, bn int
		tma    int // -1: absent
		want   bool
	}{
		{"256 rows", 256, 128, -1, true},
		{"192 rows", 192, 128, -1, true},
		{"128 rows", 128, 64, -1, false},
		{"256 rows, tma = 0", 256, 128, 0, false},
		{"128 rows, tma = 1", 128, 64, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			nw := c.bn / 16
			meta := tile.Meta{"wgmma": 2, "num_warps": nw, "num_stages": 3}
			if c.tma >= 0 {
				meta["tma"] = c.tma
			}
			kk := tmaProduct(t, 2*c.bm, 2*c.bn, 96, c.bm, c.bn, tile.PrecBF16, "", meta)
			ck, err := codegen.Compile(kk, codegen.Options{NumWarps: nw, Arch: 90, Spec: []int{16, 16, 16}})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(ck.PTX, "cp.async.bulk.tensor.2d"); got != c.want {
				t.Fatalf("tensor copies %v, want %v", got, c.want)
			}
			if !strings.Contains(ck.PTX, "cvt.rn.bf16x2.f32") {
				t.Fatal("no conversion pass")
			}
		})
	}
}

// exactProduct fails t (what names the form) where out, m×n, is not
// exactly the product of a (m×k) and b (k×n): their small integers' sums,
// exact in float32 and in TF32 or bf16 operands.
func exactProduct(t *testing.T, what string, a, b, out []float32, m, n, k int) {
	t.Helper()
	for i := range m {
		for j := range n {
			s := 0.0
			for x := range k {
				s += float64(a[i*k+x]) * float64(b[x*n+j])
			}
			if float64(out[i*n+j]) != s {
				t.Fatalf("%sC[%d][%d] = %v, want %v", what, i, j, out[i*n+j], s)
			}
		}
	}
}

// TestTensorMapRows: a map's rows are the mask's bound where it has one
// (an error where the argument ends before its last row starts), else as
// many as the argument holds, its last row possibly shorter than the
// stride (a view of fewer columns).
func TestTensorMapRows(t *testing.T) {
	for _, c := range []struct {
		name    string
		rows    int64 // TensorMap.Rows
		bytes   int64
		want    int64
		wantErr bool
	}{
		{name: "whole rows", bytes: 4 * 96 * 10, want: 10},
		{name: "a last row of 40 columns", bytes: 4 * (96*9 + 40), want: 10},
		{name: "the mask's bound", rows: 7, bytes: 4 * 96 * 10, want: 7},
		{name: "the mask's bound past the argument", rows: 11, bytes: 4 * 96 * 10, wantErr: true},
		{name: "the mask's last row starting in the argument", rows: 10, bytes: 4 * (96*9 + 1), want: 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := codegen.TensorMap{ElemBytes: 4, Inner: 96, Rows: c.rows, Box: [2]int{32, 256}, Swizzle: 128}
			got, err := m.RowsIn(c.bytes)
			if (err != nil) != c.wantErr || got != c.want {
				t.Fatalf("RowsIn(%d) = %d, %v; want %d (error %v)", c.bytes, got, err, c.want, c.wantErr)
			}
		})
	}
}
