package codegen

import (
	"fmt"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/analysis"
)

// TestRenameRowSlices: a row slice of one accumulator layout is a row slice
// of another with the same rows (a running maximum of 64×32 scores used on
// a 64×128 accumulator): the same registers, no conversion, each slot
// taking the register of the slot with its row. Layouts that place rows
// elsewhere (the canonical blocked layout; two warps along the columns)
// are not renamed.
func TestRenameRowSlices(t *testing.T) {
	l := newLowerer(nil, Options{NumWarps: 4})
	sh := tile.Shp(64, 1)
	s := &Layout{B: l.intern(mmaLayout(64, 32, 4, 1)), Src: []int{0, -1}}
	acc := &Layout{B: l.intern(mmaLayout(64, 128, 4, 1)), Src: []int{0, -1}}
	x := &lval{lay: s, regs: make([]string, nslots(s))}
	for i, sl := range s.B.slots() {
		x.regs[i] = fmt.Sprintf("row%d", sl.Off[0])
	}
	y := l.rename(x, acc, sh)
	if y == nil {
		t.Fatal("row slices of two accumulators with the same rows were not renamed")
	}
	for i, sl := range acc.B.slots() {
		if want := fmt.Sprintf("row%d", sl.Off[0]); y.regs[i] != want {
			t.Errorf("slot %d (row offset %d) holds %s, want %s", i, sl.Off[0], y.regs[i], want)
		}
	}
	for _, c := range []struct {
		name string
		to   *Layout
	}{
		{"canonical", &Layout{B: l.intern(newBlocked([]int{64, 1}, 4, 4)), Src: []int{0, 1}}},
		{"warps along the columns", &Layout{B: l.intern(mmaLayout(64, 128, 2, 2)), Src: []int{0, -1}}},
	} {
		if l.rename(x, c.to, sh) != nil {
			t.Errorf("%s: renamed", c.name)
		}
	}
}

// TestAffineLoads: the address of a block of keys loaded transposed ([d,
// bn], the head dim contiguous: Kᵀ) is affine with 4 bytes along the first
// dimension and 4·d along the second; its mask (keys < n, head dim < 96)
// is constant on runs of 32 along the head dim, and on runs of 2 along the
// keys where n = 30 (the block start is a multiple of 32).
func TestAffineLoads(t *testing.T) {
	const d, bn, n, dv = 128, 32, 30, 96
	b := tile.NewBuilder("k", nil)
	pk := b.Ptr("k", tile.F32)
	var ptr, mask *tile.Value
	b.For(0, n, bn, nil, func(n0 *tile.Value, _ []*tile.Value) []*tile.Value {
		rn := b.ExpandDims(b.Add(b.Arange(0, bn), n0), 0)
		rd := b.ExpandDims(b.Arange(0, d), 1)
		ptr = b.AddPtr(pk, b.Add(b.Mul(rn, dv), rd))
		mask = b.And(b.BroadcastTo(b.Lt(rn, n), tile.Shp(d, bn)), b.BroadcastTo(b.Lt(rd, dv), tile.Shp(d, bn)))
		b.Load(ptr, mask, 0.0)
		return nil
	})
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	l := newLowerer(k, Options{NumWarps: 4, Spec: []int{16}})
	l.axes = analysis.Axes(k, l.opt.Spec)
	memo := map[*tile.Value]*affine{}
	a := l.affineOf(ptr, memo)
	if a == nil || a.Coef[0] != 4 || a.Coef[1] != 4*dv || a.Div < 16 {
		t.Fatalf("address %+v, want coefficients [4 %d] and a base divisible by 16", a, 4*dv)
	}
	if r := l.runs(mask, 0, memo); r != 32 {
		t.Errorf("mask runs along the head dim: %d, want 32", r)
	}
	if r := l.runs(mask, 1, memo); r != 2 {
		t.Errorf("mask runs along the keys: %d, want 2", r)
	}
}
