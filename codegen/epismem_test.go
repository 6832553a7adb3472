package codegen

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
)

// TestEpiSmemBanks: the swapped form's accumulator stored into the
// [m][n+epiPad] tile of epilogueThroughSmem, register by register, puts
// the 32 lanes of a warp in 32 different banks (a tile without the
// padding would be 4-way conflicted), and the canonical row-major layout's
// reads back are 16-byte aligned runs of 4 of one row.
func TestEpiSmemBanks(t *testing.T) {
	for _, c := range []struct {
		name    string
		m, n, w int
	}{
		{"256x128", 256, 128, 8},
		{"192x128", 192, 128, 8},
		{"64x128", 64, 128, 8},
		{"128x64", 128, 64, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			conflicts := func(pad int) int {
				acc := mmaLayout(c.n, c.m, c.w, 1) // of Cᵀ: [n, m]
				worst := 1
				for _, s := range acc.slots() {
					for warp := 0; warp < c.w; warp++ {
						count := map[int]int{}
						for lane := 0; lane < 32; lane++ {
							co := acc.coordOf(lane, warp, s) // (column of C, row of C)
							count[(co[1]*(c.n+pad)+co[0])%32]++
						}
						for _, k := range count {
							worst = max(worst, k)
						}
					}
				}
				return worst
			}
			if got := conflicts(epiPad); got != 1 {
				t.Errorf("padded by %d: %d lanes in one bank", epiPad, got)
			}
			if got := conflicts(0); got == 1 {
				t.Errorf("unpadded: no conflict, so the padding is not what avoids them")
			}
			to := newBlocked([]int{c.m, c.n}, c.w, 4)
			if to.SPT[1] != 4 || ((c.n+epiPad)*4)%16 != 0 {
				t.Errorf("row-major layout %s: runs of %d, row stride %d B", to.key(), to.SPT[1], (c.n+epiPad)*4)
			}
		})
	}
}

// maskedProduct is C = A·B over an m×k A and a k×n B, row-major, every
// access masked (rows, columns and K's tail), in the swapped form at
// bm×128 tiles, 8 warps, 4 stages, with the meta-parameters extra.
func maskedProduct(t *testing.T, m, n, k, bm int, extra tile.Meta) *tile.Kernel {
	t.Helper()
	return maskedProductKeep(t, m, n, k, bm, extra, false)
}

// maskedProductKeep is maskedProduct, and where keep is set the store's
// mask also reads a keep-mask over the output's columns, loaded after the
// loop from a fourth parameter (keep[j] > 0).
func maskedProductKeep(t *testing.T, m, n, k, bm int, extra tile.Meta, keep bool) *tile.Kernel {
	t.Helper()
	const bn, bk = 128, 32
	meta := tile.Meta{"num_stages": 4, "wgmma": 2, "num_warps": 8}
	maps.Copy(meta, extra)
	b := tile.NewBuilder("mm_masked", meta)
	pa, pb, pc := b.Ptr("a", tile.F32), b.Ptr("b", tile.F32), b.Ptr("c", tile.F32)
	rm := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm)), 1)
	rn := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), bn), b.Arange(0, bn)), 0)
	rkRow, rkCol := b.ExpandDims(b.Arange(0, bk), 0), b.ExpandDims(b.Arange(0, bk), 1)
	inM, inN := b.Lt(rm, m), b.Lt(rn, n)
	acc := b.For(0, k, bk, []*tile.Value{b.Zeros(tile.F32, bm, bn)}, func(k0 *tile.Value, c []*tile.Value) []*tile.Value {
		av := b.Load(b.AddPtr(pa, b.Add(b.Add(b.Mul(rm, k), rkRow), k0)), b.And(inM, b.Lt(b.Add(rkRow, k0), k)), 0.0)
		bv := b.Load(b.AddPtr(pb, b.Add(b.Mul(b.Add(rkCol, k0), n), rn)), b.And(b.Lt(b.Add(rkCol, k0), k), inN), 0.0)
		return []*tile.Value{b.Dot(av, bv, c[0], tile.PrecTF32)}
	})
	mask := b.And(inM, inN)
	if keep {
		pk := b.Ptr("keep", tile.F32)
		mask = b.And(mask, b.Gt(b.Load(b.AddPtr(pk, rn), inN, 0.0), 0.0))
	}
	b.Store(b.AddPtr(pc, b.Add(b.Mul(rm, n), rn)), acc[0], mask)
	kk, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return kk
}

// TestEpiSmemRaggedRows: with epi_smem = 1 the accumulator is read back
// from shared memory in runs of as many consecutive elements of a row a
// thread as the output's stores may cover: 4 (16-byte stores) where rows
// are 16-byte aligned, 2 where they are 8-byte aligned, else 1, lanes
// along the columns, so that a warp's store of one slot covers 32·run
// consecutive elements of one row (128 contiguous bytes at run 1; with
// runs of 4 a scalar store of a warp spanned 512 bytes at a 16-byte
// stride). Checked on the store's planned layout, lane by lane, and on the
// PTX's widths of the read-back and of the stores.
func TestEpiSmemRaggedRows(t *testing.T) {
	spt := regexp.MustCompile(`shape=\[(\d+) (\d+)\] spt=\[(\d+) (\d+)\] tpw=\[(\d+) (\d+)\] wpc=\[(\d+) (\d+)\]`)
	for _, c := range []struct {
		name    string
		m, n, k int
		bm      int
		run     int
	}{
		{"4095x4097x33 256x128", 4095, 4097, 33, 256, 1},
		{"195x197x33 128x128", 195, 197, 33, 128, 1},
		{"130x130x50 128x128", 130, 130, 50, 128, 2},
		{"4096x4096x50 256x128", 4096, 4096, 50, 256, 4},
		{"300x200x64 64x128", 300, 200, 64, 64, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := maskedProduct(t, c.m, c.n, c.k, c.bm, tile.Meta{"epi_smem": 1})
			opts := Options{Arch: 90, NumWarps: 8, Spec: all16(k), DumpDir: t.TempDir()}
			ck, err := Compile(k, opts)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := os.ReadFile(filepath.Join(opts.DumpDir, k.Name+".plan"))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(string(plan), "\n")
			var b *Blocked
			for i, line := range lines {
				if strings.Contains(line, "store ") && i+1 < len(lines) {
					mm := spt.FindStringSubmatch(lines[i+1])
					if mm == nil {
						t.Fatalf("no blocked access layout for the store: %s", lines[i+1])
					}
					v := make([]int, 8)
					for j := range v {
						v[j], _ = strconv.Atoi(mm[j+1])
					}
					b = &Blocked{Shape: v[0:2], SPT: v[2:4], TPW: v[4:6], WPC: v[6:8]}
				}
			}
			if b == nil {
				t.Fatalf("no store in the plan:\n%s", plan)
			}
			if b.SPT[1] != c.run {
				t.Errorf("store layout %s: runs of %d a thread, want %d", b.key(), b.SPT[1], c.run)
			}
			// every warp's access of one slot: 32 lanes over 32·run
			// consecutive columns of one row, lane i at run·i
			for warp := 0; warp < 8; warp++ {
				for _, s := range b.slots() {
					if s.S[1]%b.SPT[1] != 0 {
						continue // inside a run: the access starts at its first
					}
					c0 := b.coordOf(0, warp, s)
					for lane := 1; lane < 32; lane++ {
						co := b.coordOf(lane, warp, s)
						if co[0] != c0[0] || co[1] != c0[1]+lane*c.run {
							t.Fatalf("layout %s, warp %d slot %v: lane %d at %v, lane 0 at %v", b.key(), warp, s, lane, co, c0)
						}
					}
				}
			}
			epi := ck.PTX[strings.LastIndex(ck.PTX, "$L_pipe_end"):]
			wantLd, wantSt := map[int]string{1: "ld.shared.f32", 2: "ld.shared.v2.f32", 4: "ld.shared.v4.f32"}[c.run],
				map[int]string{1: "st.global.f32", 2: "st.global.v2.f32", 4: "st.global.v4.f32"}[c.run]
			if !strings.Contains(epi, wantLd) || !strings.Contains(epi, wantSt) {
				t.Errorf("epilogue without %s and %s", wantLd, wantSt)
			}
			for _, w := range []string{"ld.shared.f32", "ld.shared.v2.f32", "ld.shared.v4.f32", "st.global.f32", "st.global.v2.f32", "st.global.v4.f32"} {
				if w != wantLd && w != wantSt && strings.Contains(epi, w) {
					t.Errorf("epilogue with %s at runs of %d", w, c.run)
				}
			}
		})
	}
}

// TestSwappedKTail: with k_tail = 1, a swapped loop whose K is a constant
// no multiple of BLOCK_K runs in its last iteration only the k steps of 8
// that start before K (one at K = 33, three at K = 50), on a path of its
// own beside the full iteration's four (both unrolled iterations); K = 64,
// or k_tail unset, has no such path. Its copies past those steps are not
// issued (tailCopyLimit: a limit kEnd − k of the copied iteration, kEnd 40
// at K = 33 and 56 at K = 50, each copy guarded by its k coordinate below
// it), and the fragments of the steps it skips are loaded only on the
// full iteration's side (4 ld.shared a step and unrolled iteration).
func TestSwappedKTail(t *testing.T) {
	for _, c := range []struct {
		name  string
		k     int
		tail  int
		steps int // in the last iteration; 0: no tail path
	}{
		{"K=33", 33, 1, 1},
		{"K=50", 50, 1, 3},
		{"K=64", 64, 1, 0},
		{"K=33 without k_tail", 33, 0, 0},
	} {
		kEnd := 32 + 8*c.steps
		t.Run(c.name, func(t *testing.T) {
			k := maskedProduct(t, 195, 197, c.k, 128, tile.Meta{"epi_smem": 1, "num_stages": 3, "k_tail": c.tail})
			ck, err := Compile(k, Options{Arch: 90, NumWarps: 8, Spec: all16(k)})
			if err != nil {
				t.Fatal(err)
			}
			p := ck.PTX
			paths := regexp.MustCompile(`(?s)\n\$L_wg_ktail_\d+:\n(.*?)wgmma.commit_group`).FindAllStringSubmatch(p, -1)
			limits := regexp.MustCompile(`sub\.s32 (%r\d+), (\d+), %r\d+;`).FindAllStringSubmatch(p, -1)
			guardedCopies := regexp.MustCompile(`@%p\d+ cp\.async\.`).FindAllString(p, -1)
			guardedFrags := regexp.MustCompile(`@!?%p\d+ ld\.shared\.b32`).FindAllString(p, -1)
			if c.steps == 0 {
				if len(paths) != 0 || len(limits) != 0 || len(guardedCopies) != 0 || len(guardedFrags) != 0 {
					t.Fatalf("%d tail paths, %d copy limits, %d guarded copies, %d guarded fragment loads", len(paths), len(limits), len(guardedCopies), len(guardedFrags))
				}
				return
			}
			if len(limits) == 0 {
				t.Fatal("no limit on the copies")
			}
			for _, m := range limits {
				if m[2] != strconv.Itoa(kEnd) {
					t.Errorf("copies limited by %s − k, want %d − k", m[2], kEnd)
				}
			}
			if len(guardedCopies) == 0 {
				t.Error("no copy guarded by its k coordinate")
			}
			if want := 2 * 4 * (4 - c.steps); len(guardedFrags) != want {
				t.Errorf("%d guarded fragment loads, want %d", len(guardedFrags), want)
			}
			if len(paths) != 2 {
				t.Fatalf("%d tail paths, want one per unrolled iteration", len(paths))
			}
			for _, m := range paths {
				if n := strings.Count(m[1], "wgmma.mma_async"); n != c.steps {
					t.Errorf("%d wgmmas on the tail path, want %d", n, c.steps)
				}
			}
			if n := strings.Count(p, "wgmma.mma_async"); n != 2*(4+c.steps) {
				t.Errorf("%d wgmmas, want %d", n, 2*(4+c.steps))
			}
		})
	}
}

// TestEpiLate: the meta-parameter epi_late places the invariant values
// that only the epilogue asks for in its layouts (here the rows' and
// columns' masks of the store, in the row-major layout of epi_smem): 0 in
// the prologue, held across the K loop; 1 and 2 after the loop, 1 before
// the epilogue's round trip through shared memory (asked for right after
// the loop), 2 where the stores ask for them, after it. Without the
// meta-parameter the kernel's choice (chooseEpiLate) is 2 here: the rows
// are masked (not whole tiles) and the loop runs twice (K = 33).
func TestEpiLate(t *testing.T) {
	setp := regexp.MustCompile(`(?m)^\tsetp\.`)
	compile := func(extra tile.Meta) string {
		k := maskedProduct(t, 195, 197, 33, 128, maps.Clone(extra))
		ck, err := Compile(k, Options{Arch: 90, NumWarps: 8, Spec: all16(k)})
		if err != nil {
			t.Fatal(err)
		}
		return ck.PTX
	}
	type where struct{ before, between, after int } // setp before the loop, between its end and the first st.shared, after that
	at := func(ptx string) where {
		end := strings.LastIndex(ptx, "$L_pipe_end")
		sts := end + strings.Index(ptx[end:], "st.shared.f32")
		if end < 0 || sts < end {
			t.Fatalf("no loop end or no epilogue through shared memory")
		}
		loop := strings.Index(ptx, "wgmma.mma_async")
		return where{len(setp.FindAllString(ptx[:loop], -1)), len(setp.FindAllString(ptx[end:sts], -1)), len(setp.FindAllString(ptx[sts:], -1))}
	}
	base := tile.Meta{"epi_smem": 1, "num_stages": 3, "k_tail": 1}
	var w [3]where
	for e := range w {
		w[e] = at(compile(with(base, "epi_late", e)))
		t.Logf("epi_late %d: setp before the loop %d, between its end and the epilogue's stores into shared memory %d, after %d", e, w[e].before, w[e].between, w[e].after)
	}
	if w[0].before <= w[1].before || w[1].before != w[2].before {
		t.Errorf("setp before the loop: %d, %d, %d: want the epilogue's masks out of the prologue with 1 and 2", w[0].before, w[1].before, w[2].before)
	}
	if w[1].between <= w[2].between || w[2].between != w[0].between {
		t.Errorf("setp between the loop's end and the epilogue's round trip: %d, %d, %d: want the masks there with 1 only", w[0].between, w[1].between, w[2].between)
	}
	if w[2].after <= w[0].after {
		t.Errorf("setp after the round trip: %d with 2, %d with 0: want the masks there with 2", w[2].after, w[0].after)
	}
	if got, want := compile(base), compile(with(base, "epi_late", 2)); got != want {
		t.Error("without epi_late: not the kernel of epi_late = 2 (masked rows, two iterations)")
	}
}

func with(m tile.Meta, k string, v int) tile.Meta {
	out := maps.Clone(m)
	out[k] = v
	return out
}

// TestEpiLateLoadedMask: with epi_late = 1 the stores' operands asked for
// right after the loop are the invariant ones, which read no load: a mask
// that reads a load after the loop (a keep-mask over the output's columns)
// is left to the store, and the kernel compiles, the load after the loop.
func TestEpiLateLoadedMask(t *testing.T) {
	kk := maskedProductKeep(t, 195, 197, 33, 128, tile.Meta{"num_stages": 3, "epi_smem": 1, "epi_late": 1}, true)
	ck, err := Compile(kk, Options{Arch: 90, NumWarps: 8, Spec: all16(kk)})
	if err != nil {
		t.Fatal(err)
	}
	end := strings.LastIndex(ck.PTX, "$L_pipe_end")
	if end < 0 || !strings.Contains(ck.PTX[end:], "ld.global") {
		t.Error("the keep-mask's load not after the loop")
	}
}
