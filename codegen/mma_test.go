package codegen

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
)

// TestMMALayoutIsTheFragment: every thread holds, in the mma layout, the
// accumulator elements the PTX ISA gives its lane in each m16n8 tile of its
// warp (c0..c3 at (g,2t) (g,2t+1) (g+8,2t) (g+8,2t+1), g = lane/4,
// t = lane%4), the warps' tiles covering the block once.
func TestMMALayoutIsTheFragment(t *testing.T) {
	for _, c := range []struct{ m, n, wm, wn int }{
		{16, 8, 1, 1}, {32, 32, 2, 2}, {64, 64, 2, 2}, {128, 128, 2, 4}, {128, 256, 2, 4}, {64, 32, 4, 1},
	} {
		t.Run(fmt.Sprintf("%dx%d_warps%dx%d", c.m, c.n, c.wm, c.wn), func(t *testing.T) {
			b := mmaLayout(c.m, c.n, c.wm, c.wn)
			p := &pipe{acc: b}
			slots := b.slots()
			idx := &lval{regs: make([]string, len(slots))}
			for i := range slots {
				idx.regs[i] = fmt.Sprint(i)
			}
			mt, nt := c.m/c.wm/16, c.n/c.wn/8
			seen := map[[2]int]int{}
			for warp := 0; warp < c.wm*c.wn; warp++ {
				wr, wc := warp/c.wn*(c.m/c.wm), warp%c.wn*(c.n/c.wn)
				for lane := 0; lane < 32; lane++ {
					g, tq := lane/4, lane%4
					for i := 0; i < mt; i++ {
						for j := 0; j < nt; j++ {
							regs := p.accRegs(idx, i, j)
							want := [4][2]int{{g, 2 * tq}, {g, 2*tq + 1}, {g + 8, 2 * tq}, {g + 8, 2*tq + 1}}
							for r, reg := range regs {
								var si int
								fmt.Sscan(reg, &si)
								got := b.coordOf(lane, warp, slots[si])
								w := [2]int{wr + 16*i + want[r][0], wc + 8*j + want[r][1]}
								if got[0] != w[0] || got[1] != w[1] {
									t.Fatalf("warp %d lane %d tile (%d,%d) c%d: holds %v, want %v", warp, lane, i, j, r, got, w)
								}
								seen[w]++
							}
						}
					}
				}
			}
			if len(seen) != c.m*c.n {
				t.Fatalf("%d of %d elements held", len(seen), c.m*c.n)
			}
			for e, n := range seen {
				if n != 1 {
					t.Fatalf("element %v held %d times", e, n)
				}
			}
		})
	}
}

func TestMMAWarps(t *testing.T) {
	for _, c := range []struct {
		m, n, warps, wm, wn int
		ok                  bool
	}{
		{64, 64, 4, 2, 2, true},
		{128, 128, 8, 2, 4, true}, // 64x32 warp tiles: fewer B fragments than 32x64
		{128, 256, 8, 2, 4, true},
		{32, 32, 4, 2, 2, true},
		{16, 64, 4, 1, 4, true},
		{16, 16, 4, 0, 0, false}, // 4 warps have no whole m16n8 tiles
	} {
		wm, wn, ok := mmaWarps(c.m, c.n, c.warps)
		if ok != c.ok || ok && (wm != c.wm || wn != c.wn) {
			t.Errorf("%dx%d, %d warps: %dx%d %v, want %dx%d %v", c.m, c.n, c.warps, wm, wn, ok, c.wm, c.wn, c.ok)
		}
	}
}

// TestOperandTilesConflictFree: the swizzles chosen for a stage's A and B
// tiles make every fragment read conflict-free, keep each 16-byte chunk
// whole and map each row's elements one to one.
func TestOperandTilesConflictFree(t *testing.T) {
	for _, s := range [][3]int{{64, 64, 32}, {128, 128, 32}, {128, 256, 32}, {32, 32, 32}, {64, 64, 64}, {16, 8, 8}, {32, 16, 16}} {
		m, n, k := s[0], s[1], s[2]
		t.Run(fmt.Sprintf("%dx%dx%d", m, n, k), func(t *testing.T) {
			a, b := operandTiles(m, n, k)
			for _, c := range []struct {
				name   string
				t      smemTile
				groups [][]access
			}{
				{"A", a, nil}, {"B", b, nil},
			} {
				var groups [][]access
				if c.name == "A" {
					for r := 0; r < m; r += 16 {
						for col := 0; col < k; col += 8 {
							groups = append(groups, ldmatrixGroups(r, col)...)
						}
					}
				} else {
					for r := 0; r < k; r += 8 {
						for col := 0; col < n; col += 8 {
							groups = append(groups, bFragGroups(r, col)...)
						}
					}
				}
				for _, g := range groups {
					if n := c.t.conflicts(g); n != 0 {
						t.Errorf("%s %v: %d-way conflict at %v", c.name, c.t, n+1, g[0])
					}
				}
				seen := map[int]bool{}
				for r := 0; r < c.t.Rows; r++ {
					for col := 0; col < c.t.Cols; col++ {
						a := c.t.addr(r, col)
						if seen[a] || a < c.t.Off || a >= c.t.Off+c.t.bytes() || (col%4 != 0 && a != c.t.addr(r, col-1)+4) {
							t.Fatalf("%s %v: element (%d,%d) at %d", c.name, c.t, r, col, a)
						}
						seen[a] = true
					}
				}
			}
		})
	}
}

// compilePipe compiles k with opts, its stages dumped, and returns the
// kernel and its .pipe dump (the pipelined loops' plans).
func compilePipe(t *testing.T, k *tile.Kernel, opts Options) (*Kernel, string) {
	t.Helper()
	opts.DumpDir = t.TempDir()
	ck, err := Compile(k, opts)
	if err != nil {
		t.Fatal(err)
	}
	pipe, err := os.ReadFile(filepath.Join(opts.DumpDir, k.Name+".pipe"))
	if err != nil {
		t.Fatal(err)
	}
	return ck, string(pipe)
}

// TestPipelinedDot: a TF32 K loop runs on the tensor cores with its
// accumulator in registers: operands copied by cp.async into a ring of
// stages, A's fragments by ldmatrix, one wait and one barrier per
// iteration, the epilogue storing from the mma layout (no accumulator tile
// through shared memory). IEEE stays on FMAs.
func TestPipelinedDot(t *testing.T) {
	k := constMatmul(t, 256, 256, 256, 64, 64, 32, tile.PrecTF32)
	ck, pipe := compilePipe(t, k, Options{Spec: all16(k)})
	if want := "dot %"; !strings.Contains(pipe, want) || !strings.Contains(pipe, "3 stages of 16384 B") {
		t.Errorf("the .pipe dump does not show the plan:\n%s", pipe)
	}
	p := ck.PTX
	loop := p[strings.Index(p, "$L_pipe_3:"):strings.Index(p, "$L_pipe_end_4:")]
	for _, c := range []struct {
		re   string
		in   string
		want int
	}{
		// per iteration: 4 k steps × 2×4 m16n8 tiles of a 32×32 warp tile
		{`mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32\.tf32\.f32`, loop, 32},
		{`ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16`, loop, 4 * 2},
		// A's fragments truncated, B's rounded
		{`and\.b32 %r\d+, %r\d+, 0xffffe000`, loop, 4 * 2 * 4},
		{`cvt\.rna?\.tf32\.f32`, loop, 4 * 4 * 2},
		// 64×32 + 32×64 floats, 16 bytes a copy, 128 threads
		{`cp\.async\.cg\.shared\.global \[%r\d+(\+-?\d+)?\], \[%rd\d+(\+-?\d+)?\], 16`, loop, 8},
		{`cp\.async\.wait_group 1`, loop, 1},
		{`bar\.sync`, loop, 1},
		{`st\.shared`, p, 0},
		{`st\.global\.v2\.f32`, p, 16},
	} {
		if n := count(c.re, c.in); n != c.want {
			t.Errorf("%d × %s, want %d", n, c.re, c.want)
		}
	}
	if ck.SharedBytes != 3*(64*32+32*64)*4 {
		t.Errorf("%d B of shared memory, want 3 stages of 16 KB", ck.SharedBytes)
	}
	ieee := constMatmul(t, 256, 256, 256, 64, 64, 32, tile.PrecIEEE)
	ci, err := Compile(ieee, Options{Spec: all16(ieee)})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ci.PTX, "cp.async") || strings.Contains(ci.PTX, "mma.sync") {
		t.Error("an IEEE dot was pipelined onto the tensor cores")
	}
}

// constMatmul is C = A·B for row-major m×k and k×n matrices of known sizes
// (as the fusion pass writes its matmul groups): bm×bn tiles, bk steps.
func constMatmul(t *testing.T, m, n, k, bm, bn, bk int, prec tile.Precision) *tile.Kernel {
	t.Helper()
	b := tile.NewBuilder("mm", tile.Meta{"num_stages": 3})
	pa, pb, pc := b.Ptr("a", tile.F32), b.Ptr("b", tile.F32), b.Ptr("c", tile.F32)
	rm := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm)), 1)
	rn := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), bn), b.Arange(0, bn)), 0)
	offA := b.Add(b.Mul(rm, k), b.ExpandDims(b.Arange(0, bk), 0))
	offB := b.Add(b.Mul(b.ExpandDims(b.Arange(0, bk), 1), n), rn)
	acc := b.For(0, k, bk, []*tile.Value{b.Zeros(tile.F32, bm, bn)}, func(k0 *tile.Value, c []*tile.Value) []*tile.Value {
		av := b.Load(b.AddPtr(pa, b.Add(offA, k0)), nil, nil)
		bv := b.Load(b.AddPtr(pb, b.Add(offB, b.Mul(k0, n))), nil, nil)
		return []*tile.Value{b.Dot(av, bv, c[0], prec)}
	})
	b.Store(b.AddPtr(pc, b.Add(b.Mul(rm, n), rn)), acc[0], nil)
	kk, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return kk
}

// TestMaxRegisters: the meta-parameter max_registers caps the registers a
// thread may use (.maxnreg), so that more CTAs fit an SM.
func TestMaxRegisters(t *testing.T) {
	k := constMatmul(t, 256, 256, 256, 64, 64, 32, tile.PrecTF32)
	for _, r := range []int{0, 128} {
		k.Meta["max_registers"] = r
		ck, err := Compile(k, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Contains(ck.PTX, ".maxnreg 128\n"), r == 128; got != want {
			t.Errorf("max_registers=%d: .maxnreg present = %v", r, got)
		}
	}
}

// TestWgmmaDot: with the meta-parameter wgmma = 1 on sm_90, a pipelined
// TF32 K loop runs on warpgroup MMAs (.version 8.0, .target sm_90a):
// per iteration B is transposed into one of two K-major 128-byte-swizzled
// tiles (rounded), fenced for the async proxy, the previous iteration's
// wgmmas are waited for, and each warpgroup issues one wgmma per k step of
// 8 with A's fragments in registers, committed and left running; the tiles
// are 1024-aligned. Without it, and on sm_80, the loop
// stays on mma.sync with .version 7.8. (CUDA 11.8's ptxas cannot assemble
// sm_90a: the GPU round does, and the simulator runs it.)
func TestWgmmaDot(t *testing.T) {
	k := constMatmul(t, 256, 256, 256, 128, 256, 32, tile.PrecTF32)
	k.Meta["wgmma"] = 1
	ck, err := Compile(k, Options{Arch: 90, NumWarps: 8, Spec: all16(k)})
	if err != nil {
		t.Fatal(err)
	}
	p := ck.PTX
	loop := p[strings.Index(p, "$L_pipe_3:"):strings.Index(p, "$L_pipe_end_4:")]
	for _, c := range []struct {
		re   string
		in   string
		want int
	}{
		{`\.version 8\.0\n\.target sm_90a\n`, p, 1},
		{`\.extern \.shared \.align 1024 \.b8 smem\[\];`, p, 1},
		{`wgmma\.mma_async\.sync\.aligned\.m64n256k8\.f32\.tf32\.tf32 \{(%f\d+, ){127}%f\d+\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, %p\d+, 1, 1;`, loop, 4},
		{`wgmma\.fence\.sync\.aligned`, loop, 1},
		{`wgmma\.commit_group\.sync\.aligned`, loop, 1},
		{`wgmma\.wait_group\.sync\.aligned 0`, loop, 1},
		{`fence\.proxy\.async\.shared::cta`, loop, 1},
		{`bar\.sync`, loop, 2},
		// B 32×256 by 256 threads: 8 chunks of 4 columns a thread, each one
		// 16-byte read and 4 rounded 4-byte writes
		{`ld\.shared\.v4\.b32`, loop, 8},
		{`st\.shared\.b32`, loop, 32},
		{`ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16`, loop, 4},
		{`and\.b32 %r\d+, %r\d+, 0xffffe000`, loop, 16}, // A's fragments, truncated
		{`cvt\.rna?\.tf32\.f32`, loop, 32},              // B's words, rounded
		{`mma\.sync`, p, 0},
	} {
		if n := count(c.re, c.in); n != c.want {
			t.Errorf("%d × %s, want %d", n, c.re, c.want)
		}
	}
	if want := 3*(128*32+32*256)*4 + 2*256*128; ck.SharedBytes != want {
		t.Errorf("%d B of shared memory, want %d (3 stages, then two K-major B)", ck.SharedBytes, want)
	}
	if n := count(`wgmma\.wait_group\.sync\.aligned 0`, p[strings.Index(p, "$L_pipe_end_4:"):]); n != 1 {
		t.Errorf("%d waits for the last wgmmas after the loop, want 1", n)
	}
	for _, c := range []struct {
		name string
		wg   int
		arch int
	}{{"no meta-parameter", 0, 90}, {"sm_80", 1, 80}} {
		k.Meta["wgmma"] = c.wg
		ck, err := Compile(k, Options{Arch: c.arch, NumWarps: 8, Spec: all16(k)})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(ck.PTX, "wgmma") || !strings.Contains(ck.PTX, ".version 7.8") || !strings.Contains(ck.PTX, "mma.sync") {
			t.Errorf("%s: not the mma.sync kernel", c.name)
		}
	}
}

// TestWgmmaSwapped: with wgmma = 2 on sm_90 a TF32 K loop computes Cᵀ =
// Bᵀ·Aᵀ: A's tile is copied by cp.async into a K-major 128-byte-swizzled
// tile (each stage 1024-aligned), rounded in place by the thread that copied
// it and fenced for the async proxy; B's fragments (wgmma's A: 16 columns
// of C a warp) are read with ld.shared and rounded in registers; one wgmma
// m64n256k8 a k step of 8 per warpgroup, committed and left running while
// the next iteration proceeds (wait_group 1), two iterations unrolled so
// that their fragments are registers of their own; stages issued two ahead
// of four; no transposition through shared memory, one barrier an
// iteration; the epilogue stores from the accumulator of Cᵀ (scalar stores:
// a thread's elements of a row are 8 columns apart).
func TestWgmmaSwapped(t *testing.T) {
	k := constMatmul(t, 4096, 4096, 4096, 256, 128, 32, tile.PrecTF32)
	k.Meta["wgmma"] = 2
	k.Meta["num_stages"] = 4
	k.Meta["tma"] = 0 // A by cp.async (tensor copies: TestTensorCopiesOfA)
	ck, pipe := compilePipe(t, k, Options{Arch: 90, NumWarps: 8, Spec: all16(k)})
	if !strings.Contains(pipe, "wgmma m64n256k8 tf32 on Cᵀ = Bᵀ·Aᵀ") || !strings.Contains(pipe, "4 stages of 49152 B (2 ahead") {
		t.Errorf("the .pipe dump does not show the swapped plan:\n%s", pipe)
	}
	p := ck.PTX
	loop := p[strings.Index(p, "$L_pipe_3:"):strings.Index(p, "$L_pipe_end_4:")]
	for _, c := range []struct {
		re   string
		in   string
		want int
	}{
		{`\.version 8\.0\n\.target sm_90a\n`, p, 1},
		{`\.extern \.shared \.align 1024 \.b8 smem\[\];`, p, 1},
		// two iterations a trip: 4 k steps each
		{`wgmma\.mma_async\.sync\.aligned\.m64n256k8\.f32\.tf32\.tf32 \{(%f\d+, ){127}%f\d+\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, %p\d+, 1, 1;`, loop, 8},
		{`wgmma\.fence\.sync\.aligned`, loop, 2},
		{`wgmma\.commit_group\.sync\.aligned`, loop, 2},
		{`wgmma\.wait_group\.sync\.aligned 1`, loop, 2},
		{`wgmma\.wait_group\.sync\.aligned 0`, loop, 0},
		{`cp\.async\.wait_group 1`, loop, 2},
		{`fence\.proxy\.async\.shared::cta`, loop, 2},
		{`bar\.sync`, loop, 2},
		// A 256×32 and B 32×128 by 256 threads: 8 + 4 16-byte copies an
		// iteration; A read by the tensor cores as it landed (no pass),
		// Bᵀ's fragments rounded in registers
		{`cp\.async\.cg\.shared\.global \[%r\d+(\+-?\d+)?\], \[%rd\d+(\+-?\d+)?\], 16`, loop, 2 * 12},
		{`ld\.shared\.v4\.b32`, loop, 0},
		{`st\.shared\.v4\.b32`, loop, 0},
		{`ld\.shared\.b32`, loop, 2 * 16},
		{`and\.b32 %r\d+, %r\d+, 0xffffe000`, loop, 0},
		{`cvt\.rna?\.tf32\.f32`, loop, 2 * 16},
		{`st\.shared\.b32`, loop, 0},
		{`ldmatrix`, p, 0},
		{`mma\.sync`, p, 0},
		{`st\.global\.f32`, p, 128},
	} {
		if n := count(c.re, c.in); n != c.want {
			t.Errorf("%d × %s, want %d", n, c.re, c.want)
		}
	}
	if want := 4 * 49152; ck.SharedBytes != want {
		t.Errorf("%d B of shared memory, want %d (4 stages)", ck.SharedBytes, want)
	}
	if n := count(`wgmma\.wait_group\.sync\.aligned 0`, p[strings.Index(p, "$L_pipe_end_4:"):]); n != 1 {
		t.Errorf("%d waits for the last wgmmas after the loop, want 1", n)
	}
	// 3xTF32: A's low parts beside its tile, B's split in registers, three
	// wgmmas a k step into a block accumulator, which is added in f32 once
	// retired. By default one block over two iterations: each iteration's
	// wgmmas run while the next stage is split and its fragments loaded
	// (into the other of two sets); the first starts the block from zero,
	// the second adds onto it and retires the first (wait_group 1) before
	// its barrier, then both (wait_group 0) and adds the block; the stage
	// before the loop is made ready once; at the one exit, the last block
	// is added
	x3 := constMatmul(t, 4096, 4096, 4096, 64, 128, 32, tile.PrecTF32x3)
	x3.Meta["wgmma"] = 2
	x3.Meta["num_stages"] = 6
	x3.Meta["tma"] = 0 // A by cp.async (tensor copies: cmd/tilefuse TestTensorCopies3xTF32)
	ck, err := Compile(x3, Options{Arch: 90, NumWarps: 8, Spec: all16(x3)})
	if err != nil {
		t.Fatal(err)
	}
	p = ck.PTX
	pre := p[strings.Index(p, "$L_pipe_filled_2:"):strings.Index(p, "$L_pipe_3:")]
	loop = p[strings.Index(p, "$L_pipe_3:"):strings.Index(p, "$L_pipe_exit_4:")]
	exit := p[strings.Index(p, "$L_pipe_exit_4:"):strings.Index(p, "$L_pipe_end_5:")]
	for _, c := range []struct {
		re   string
		in   string
		want int
	}{
		{`wgmma\.mma_async\.sync\.aligned\.m64n64k8\.f32\.tf32\.tf32 \{(%f\d+, ){31}%f\d+\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, %p\d+, 1, 1;`, loop, 2 * 4 * 3},
		{`wgmma\.wait_group\.sync\.aligned 1`, loop, 1},
		{`wgmma\.wait_group\.sync\.aligned 0`, loop, 1},
		{`, %p\d+, 1, 1;`, loop, 2 * 4 * 3},
		{`add\.f32`, loop, 32},
		{`add\.f32`, exit, 32},
		{`wgmma\.wait_group\.sync\.aligned 0`, exit, 1},
		{`bar\.sync`, pre, 1},
		{`ld\.shared\.b32`, pre, 16},
		{`bar\.sync`, loop, 2},
		{`st\.shared\.v4\.b32`, loop, 2 * 2 * 2},
		{`sub\.f32`, loop, 2 * (8 + 16)},
		{`cvt\.rna?\.tf32\.f32`, loop, 2 * 2 * (8 + 16)},
	} {
		if n := count(c.re, c.in); n != c.want {
			t.Errorf("3xTF32: %d × %s, want %d", n, c.re, c.want)
		}
	}
	if want := 6 * (64*128*2 + 32*128*4); ck.SharedBytes != want {
		t.Errorf("3xTF32: %d B of shared memory, want %d (6 stages of A, its low parts and B)", ck.SharedBytes, want)
	}
	// the block starts from zero (scale-d false) in the first of its two
	// iterations only
	if m := regexp.MustCompile(`setp\.ne\.u32 (%p\d+), 1, 1;`).FindStringSubmatch(p); m == nil {
		t.Error("3xTF32: no zero scale-d predicate")
	} else if n := strings.Count(loop, ", "+m[1]+", 1, 1;"); n != 1 {
		t.Errorf("3xTF32: %d wgmmas start the block from zero, want 1", n)
	}
	// x3_blocks = 2: a block per unrolled iteration, each iteration's
	// wgmmas left running under the next one's (wait_group 1), the other
	// iteration's block added in the loop, the last one's at each of the
	// two exits
	x3.Meta["x3_blocks"] = 2
	ck, err = Compile(x3, Options{Arch: 90, NumWarps: 8, Spec: all16(x3)})
	if err != nil {
		t.Fatal(err)
	}
	p = ck.PTX
	loop = p[strings.Index(p, "$L_pipe_3:"):strings.Index(p, "$L_pipe_exit_5:")]
	exits := p[strings.Index(p, "$L_pipe_exit_5:"):strings.Index(p, "$L_pipe_end_4:")]
	for _, c := range []struct {
		re   string
		in   string
		want int
	}{
		{`wgmma\.mma_async\.sync\.aligned\.m64n64k8\.f32\.tf32\.tf32 \{(%f\d+, ){31}%f\d+\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, %p\d+, 1, 1;`, loop, 2 * 4 * 3},
		{`wgmma\.wait_group\.sync\.aligned 1`, loop, 2},
		{`add\.f32`, loop, 2 * 32},
		{`add\.f32`, exits, 2 * 32},
		{`wgmma\.wait_group\.sync\.aligned 0`, exits, 2},
		// A 64×32 by 256 threads: 2 chunks of 4 a thread, split into two tiles
		{`st\.shared\.v4\.b32`, loop, 2 * 2 * 2},
		{`sub\.f32`, loop, 2 * (8 + 16)},
		{`cvt\.rna?\.tf32\.f32`, loop, 2 * 2 * (8 + 16)},
	} {
		if n := count(c.re, c.in); n != c.want {
			t.Errorf("3xTF32: %d × %s, want %d", n, c.re, c.want)
		}
	}
	if n := count(`, %p\d+, 1, 1;`, loop); n != 24 {
		t.Errorf("%d wgmmas", n)
	}
	if want := 6 * (64*128*2 + 32*128*4); ck.SharedBytes != want {
		t.Errorf("3xTF32: %d B of shared memory, want %d (6 stages of A, its low parts and B)", ck.SharedBytes, want)
	}
	// bf16: the copying thread converts A into the stage's bf16 tile
	// (first in the stage, 64-byte swizzle); B's fragment pairs (k+2t,
	// k+2t+1) packed by cvt.rn.bf16x2; two m64n256k16 an iteration
	bf := constMatmul(t, 4096, 4096, 4096, 256, 128, 32, tile.PrecBF16)
	bf.Meta["wgmma"] = 2
	bf.Meta["num_stages"] = 4
	bf.Meta["tma"] = 0 // A by cp.async (TestTensorCopiesOfA has its tensor copies)
	ck, err = Compile(bf, Options{Arch: 90, NumWarps: 8, Spec: all16(bf)})
	if err != nil {
		t.Fatal(err)
	}
	p = ck.PTX
	loop = p[strings.Index(p, "$L_pipe_3:"):strings.Index(p, "$L_pipe_end_4:")]
	for _, c := range []struct {
		re   string
		want int
	}{
		{`wgmma\.mma_async\.sync\.aligned\.m64n256k16\.f32\.bf16\.bf16 \{(%f\d+, ){127}%f\d+\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, %p\d+, 1, 1, 0;`, 2 * 2},
		// A: 8 chunks of 4 a thread, 2 packs and one 8-byte store each; B:
		// 16 words, 8 packs
		{`cvt\.rn\.bf16x2\.f32`, 2 * (8*2 + 8)},
		{`st\.shared\.v2\.b32 \[%r\d+\]`, 2 * 8},
		{`ld\.shared\.b32`, 2 * 16},
		{`cvt\.rna?\.tf32`, 0},
	} {
		if n := count(c.re, loop); n != c.want {
			t.Errorf("bf16: %d × %s, want %d", n, c.re, c.want)
		}
	}
	if want := 3 * (256*64 + 49152); ck.SharedBytes != want {
		t.Errorf("bf16: %d B of shared memory, want %d (3 stages, each with its bf16 tile)", ck.SharedBytes, want)
	}
	if !strings.Contains(p, "cp.async.wait_group 1;") {
		t.Errorf("bf16: not 2 stages ahead")
	}
	for _, c := range []struct {
		name        string
		arch, warps int
		prec        tile.Precision
	}{{"sm_80", 80, 8, tile.PrecTF32}, {"one warp per 32 columns", 90, 4, tile.PrecTF32}, {"ieee", 90, 8, tile.PrecIEEE}} {
		k := constMatmul(t, 4096, 4096, 4096, 256, 128, 32, c.prec)
		k.Meta["wgmma"] = 2
		ck, err := Compile(k, Options{Arch: c.arch, NumWarps: c.warps, Spec: all16(k)})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(ck.PTX, "wgmma") || strings.Contains(ck.PTX, "sm_90a") {
			t.Errorf("%s: wgmma where the swapped form does not apply", c.name)
		}
	}
}

// TestSlotwiseEpilogue: after a wgmma loop the epilogue is emitted slot by
// slot, each element's chain ending in its store before the next begins
// (op by op over 128 accumulator registers, tanh(2·acc + b) spilled): the
// stores are spread through the tanh code, not after all of it, and the
// bias row is loaded once per distinct column.
func TestSlotwiseEpilogue(t *testing.T) {
	const m, n, k, bm, bn = 512, 256, 64, 256, 128
	b := tile.NewBuilder("mm_epi", tile.Meta{"num_stages": 4, "wgmma": 2})
	pa, pb, pbias, pc := b.Ptr("a", tile.F32), b.Ptr("b", tile.F32), b.Ptr("bias", tile.F32), b.Ptr("c", tile.F32)
	rm := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm)), 1)
	rn := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), bn), b.Arange(0, bn)), 0)
	offA := b.Add(b.Mul(rm, k), b.ExpandDims(b.Arange(0, 32), 0))
	offB := b.Add(b.Mul(b.ExpandDims(b.Arange(0, 32), 1), n), rn)
	acc := b.For(0, k, 32, []*tile.Value{b.Zeros(tile.F32, bm, bn)}, func(k0 *tile.Value, c []*tile.Value) []*tile.Value {
		av := b.Load(b.AddPtr(pa, b.Add(offA, k0)), nil, nil)
		bv := b.Load(b.AddPtr(pb, b.Add(offB, b.Mul(k0, n))), nil, nil)
		return []*tile.Value{b.Dot(av, bv, c[0], tile.PrecTF32)}
	})
	bias := b.BroadcastTo(b.Load(b.AddPtr(pbias, rn), nil, nil), tile.Shp(bm, bn))
	y := b.Tanh(b.Add(b.Mul(acc[0], 2.0), bias))
	b.Store(b.AddPtr(pc, b.Add(b.Mul(rm, n), rn)), y, nil)
	kk, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	ck, err := Compile(kk, Options{Arch: 90, NumWarps: 8, Spec: all16(kk)})
	if err != nil {
		t.Fatal(err)
	}
	epi := ck.PTX[regexp.MustCompile(`\$L_pipe_end_\d+:`).FindStringIndex(ck.PTX)[0]:]
	stores := regexp.MustCompile(`st\.global\.f32`).FindAllStringIndex(epi, -1)
	tanh := regexp.MustCompile(`tanh|ex2`).FindAllStringIndex(epi, -1)
	if len(stores) != 128 || len(tanh) == 0 {
		t.Fatalf("%d stores, %d tanh instructions in the epilogue", len(stores), len(tanh))
	}
	if stores[0][0] > tanh[len(tanh)/8][0] || stores[len(stores)/2][0] > tanh[len(tanh)*3/4][0] {
		t.Errorf("the stores come after the tanh code (first store at %d, last tanh at %d): not slot by slot", stores[0][0], tanh[len(tanh)-1][0])
	}
	if n := count(`ld\.global\.f32`, epi); n != 2 {
		t.Errorf("%d bias loads, want 2 (a thread's columns n = 16·warp + g and g + 8)", n)
	}
}

// TestPipelinedPrecisions: bf16 K loops run m16n8k16 on operands packed
// (and rounded) by cvt.rn.bf16x2, two ldmatrix.x4 of A a k16 step; 3xTF32
// runs three m16n8k8 per tile on high and low TF32 parts.
func TestPipelinedPrecisions(t *testing.T) {
	for _, c := range []struct {
		prec tile.Precision
		re   map[string]int // per iteration of 64x64x32 with 4 warps (32x32 warp tiles: 2x4 m16n8 tiles)
	}{
		{tile.PrecBF16, map[string]int{
			`mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16\.bf16\.f32`: 2 * 2 * 4,
			`cvt\.rn\.bf16x2\.f32`:              2 * (2*4 + 4*2),
			`ldmatrix\.sync\.aligned\.m8n8\.x4`: 2 * 2 * 2,
			`cvt\.rna?\.tf32`:                   0,
		}},
		{tile.PrecTF32x3, map[string]int{
			`mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32\.tf32\.f32`: 3 * 4 * 2 * 4,
			`sub\.f32`:             4 * (2*4 + 4*2),
			`cvt\.rna?\.tf32\.f32`: 2 * 4 * (2*4 + 4*2),
		}},
	} {
		k := constMatmul(t, 256, 256, 256, 64, 64, 32, c.prec)
		ck, err := Compile(k, Options{Spec: all16(k)})
		if err != nil {
			t.Fatal(err)
		}
		loop := ck.PTX[strings.Index(ck.PTX, "$L_pipe_3:"):strings.Index(ck.PTX, "$L_pipe_end_4:")]
		for re, want := range c.re {
			if n := count(re, loop); n != want {
				t.Errorf("%v: %d × %s, want %d", c.prec, n, re, want)
			}
		}
	}
}

// TestTransposedTilesConflictFree: the tiles of operands stored transposed
// in memory (A as [k][m], B as [n][k]) serve their fragment reads without
// bank conflicts, at the pipelined loops' tile sizes; unswizzled, the same
// reads conflict (8-way for B's rows of 32 words), so the swizzle is what
// makes them free.
func TestTransposedTilesConflictFree(t *testing.T) {
	for _, s := range [][3]int{{64, 64, 32}, {128, 128, 32}, {256, 128, 32}, {128, 64, 32}, {32, 32, 32}, {64, 64, 64}} {
		m, n, k := s[0], s[1], s[2]
		at, ag := transposedATile(m, k)
		bt, bg := transposedBTile(n, k, false)
		st, sg := transposedBTile(n, k, true)
		// the swapped bf16 form's B stored [n][k]: read in pairs of k,
		// the swizzle chosen for those reads (matchPipe)
		pt, pg := st, bf16PairGroups(n, k)
		pt.Swz = chooseSwizzle(pt, pg, 8)
		for _, c := range []struct {
			name   string
			t      smemTile
			groups [][]access
		}{{"Aᵀ", at, ag}, {"Bᵀ mma.sync", bt, bg}, {"Bᵀ swapped", st, sg}, {"Bᵀ swapped bf16", pt, pg}} {
			t.Run(fmt.Sprintf("%s %dx%dx%d", c.name, m, n, k), func(t *testing.T) {
				if len(c.groups) == 0 {
					t.Fatal("no reads")
				}
				plain := c.t
				plain.Swz = swizzle{1, 1, 1}
				before := 0
				for _, g := range c.groups {
					if n := c.t.conflicts(g); n != 0 {
						t.Errorf("%v: %d-way conflict at %v", c.t, n+1, g[0])
					}
					before += plain.conflicts(g)
				}
				if c.t.Cols >= 32 {
					if before == 0 {
						t.Errorf("the reads do not conflict without the swizzle: the test checks nothing")
					}
				}
				seen := map[int]bool{}
				for r := 0; r < c.t.Rows; r++ {
					for col := 0; col < c.t.Cols; col++ {
						a := c.t.addr(r, col)
						if seen[a] || a < 0 || a >= c.t.bytes() {
							t.Fatalf("element (%d,%d) at %d", r, col, a)
						}
						seen[a] = true
					}
				}
			})
		}
	}
}

// TestStagedCopiesConflictFree: the staged swapped form's copies of Aᵀ
// (stagedCopyBlocked) write the K-major tile (128-byte swizzle), one
// element of each copy at a time, without bank conflicts, and their
// 16-byte copies into the staging tile and reads back (a quarter warp at a
// time) too; with a warp's lanes along m (newBlocked, as the other
// transposed operands are copied) the transposing stores conflict 16-way.
func TestStagedCopiesConflictFree(t *testing.T) {
	const k = 32
	for _, c := range []struct{ m, warps int }{{64, 8}, {128, 8}, {192, 8}, {256, 8}, {64, 4}} {
		t.Run(fmt.Sprintf("%dx%d %d warps", c.m, k, c.warps), func(t *testing.T) {
			ak := smemTile{Rows: c.m, Cols: k, Swz: swizzle{1, 1, 8}}
			stg := smemTile{Rows: k, Cols: c.m, Swz: swizzle{1, 2, 8}}
			// the copies' (k, m0) of each lane of warp w at slot offsets (rk, rm)
			lanes := func(b *Blocked, w, rk, rm int) [32][2]int {
				var out [32][2]int
				for lane := range out {
					for d := range 2 {
						l := (lane >> b.laneShift(d)) & (b.TPW[d] - 1)
						wp := (w >> b.warpShift(d)) & (b.WPC[d] - 1)
						off := []int{rk, rm}[d]
						out[lane][d] = (wp*b.warpTile(d) + l*b.SPT[d] + off) % b.Shape[d]
					}
				}
				return out
			}
			worst := func(b *Blocked) (stores, copies int) {
				for w := range c.warps {
					for rk := 0; rk < k; rk += b.tile(0) {
						for rm := 0; rm < c.m; rm += b.tile(1) {
							ls := lanes(b, w, rk, rm)
							for e := range 4 {
								var g []access
								for _, x := range ls {
									g = append(g, access{x[1] + e, x[0], 1})
								}
								stores = max(stores, ak.conflicts(g))
							}
							for q := 0; q < 32; q += 8 {
								var g []access
								for _, x := range ls[q : q+8] {
									g = append(g, access{x[0], x[1], 4})
								}
								copies = max(copies, stg.conflicts(g))
							}
						}
					}
				}
				return stores, copies
			}
			b := stagedCopyBlocked(k, c.m, c.warps)
			if err := b.tilesExactly(); err != nil {
				t.Fatal(err)
			}
			if s, cp := worst(b); s != 0 || cp != 0 {
				t.Errorf("%s: %d-way conflicts storing into the K-major tile, %d-way copying", b.key(), s+1, cp+1)
			}
			if s, _ := worst(newBlocked([]int{k, c.m}, c.warps, 4)); s == 0 {
				t.Errorf("lanes along m store without conflicts: the test checks nothing")
			}
		})
	}
}

// TestTmaBOffsets: B's tile as its tensor copy lays it out holds every
// element once, and the swapped form's fragment reads (a warp's rows t < 4
// of its columns g < 8, then g + 8, at rows kk + t and kk + t + 4) touch 32
// different banks each.
func TestTmaBOffsets(t *testing.T) {
	for _, bn := range []int{64, 128, 256} {
		const bk = 32
		seen := map[int]bool{}
		for k := range bk {
			for n := range bn {
				o := tmaBOffset(bk, k, n)
				if o < 0 || o >= 4*bk*bn || o%4 != 0 || seen[o] {
					t.Fatalf("BLOCK_N %d: (%d, %d) at %d: outside the tile, not a word, or taken twice", bn, k, n, o)
				}
				seen[o] = true
			}
		}
		for w := range bn / 16 {
			for kk := 0; kk < bk; kk += 8 {
				for _, dk := range []int{0, 4} {
					for _, dn := range []int{0, 8} {
						banks := map[int]bool{}
						for lane := range 32 {
							g, tt := lane>>2, lane&3
							banks[tmaBOffset(bk, kk+dk+tt, 16*w+g+dn)/4%32] = true
						}
						if len(banks) != 32 {
							t.Errorf("BLOCK_N %d warp %d rows %d+%d columns +%d: %d banks of 32", bn, w, kk, dk, dn, len(banks))
						}
					}
				}
			}
		}
	}
}

// TestTmaBF16Offsets: B's tile as its bf16 tensor copy lays it out
// (TensorMap.Groups32) holds every element once, and the bf16 fragment
// reads (a warp's rows kk + 2t + h, t < 4, of its columns g < 8, then
// g + 8; kk a multiple of 8, h = 0 or 1) touch 32 different banks each;
// in TF32's layout of interleaved pairs (tmaBOffset) the same reads
// conflict two ways, which is why bf16 has a layout of its own.
func TestTmaBF16Offsets(t *testing.T) {
	for _, bn := range []int{64, 128, 256} {
		const bk = 32
		seen := map[int]bool{}
		for k := range bk {
			for n := range bn {
				o := tmaBF16Offset(bk, k, n)
				if o < 0 || o >= 4*bk*bn || o%4 != 0 || seen[o] {
					t.Fatalf("BLOCK_N %d: (%d, %d) at %d: outside the tile, not a word, or taken twice", bn, k, n, o)
				}
				seen[o] = true
			}
		}
		paired := 0
		for w := range bn / 16 {
			for kk := 0; kk < bk; kk += 8 {
				for h := range 2 {
					for _, dn := range []int{0, 8} {
						banks, pairedBanks := map[int]bool{}, map[int]bool{}
						for lane := range 32 {
							g, tt := lane>>2, lane&3
							banks[tmaBF16Offset(bk, kk+2*tt+h, 16*w+g+dn)/4%32] = true
							pairedBanks[tmaBOffset(bk, kk+2*tt+h, 16*w+g+dn)/4%32] = true
						}
						if len(banks) != 32 {
							t.Errorf("BLOCK_N %d warp %d rows %d+2t+%d columns +%d: %d banks of 32", bn, w, kk, h, dn, len(banks))
						}
						if len(pairedBanks) < 32 {
							paired++
						}
					}
				}
			}
		}
		if paired == 0 {
			t.Errorf("BLOCK_N %d: TF32's layout reads bf16's fragments without conflicts too: the test's reason is gone", bn)
		}
	}
}
