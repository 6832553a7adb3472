package ptxsim_test

import (
	"fmt"
	"math"
	"sort"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
)

// runWarp runs body on one CTA of n threads; the body leaves a 32-bit result
// in %r20 that is stored to out[tid]. assemble runs ptxas on it too.
func runWarp(t *testing.T, n int, body string, assemble bool) []uint32 {
	t.Helper()
	src := kernelPTX("warp", ".param .u64 out", `
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, %laneid;
	mov.u32 %r20, 0;
`+body+`
	ld.param.u64 %rd1, [out];
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r20;`)
	if assemble {
		ptxasCheck(t, src)
	}
	mem := ptxsim.NewMemory()
	o := mem.Alloc("out", 4*n)
	mustRun(t, src, "warp", ptxsim.Config{Block: [3]int{n}, Racecheck: true}, mem, o)
	got := make([]uint32, n)
	mem.Read(o, got)
	return got
}

// TestShuffle checks shfl.sync in every mode and segment width against
// CUDA's __shfl*_sync definitions (c = (32-width)<<8 | clamp, clamp 0 for
// up and 31 otherwise).
func TestShuffle(t *testing.T) {
	for _, mode := range []string{"up", "down", "bfly", "idx"} {
		for _, width := range []int{32, 16, 8, 1} {
			for _, b := range []int{0, 1, 3, 5, 17} {
				clamp := 31
				if mode == "up" {
					clamp = 0
				}
				c := (32-width)<<8 | clamp
				t.Run(fmt.Sprintf("%s/width=%d/b=%d", mode, width, b), func(t *testing.T) {
					// each lane shuffles 1000+lane; the predicate says whether it came from another lane
					got := runWarp(t, 32, fmt.Sprintf(`
	add.u32 %%r3, %%r2, 1000;
	shfl.sync.%s.b32 %%r4|%%p1, %%r3, %d, %d, -1;
	selp.u32 %%r5, 65536, 0, %%p1;
	add.u32 %%r20, %%r4, %%r5;`, mode, b, c), width == 16 && b == 3)
					for lane := 0; lane < 32; lane++ {
						base := lane &^ (width - 1)
						src, ok := lane, true
						switch mode {
						case "up":
							if lane-base >= b {
								src = lane - b
							} else {
								ok = false
							}
						case "down":
							if lane-base+b < width {
								src = lane + b
							} else {
								ok = false
							}
						case "bfly":
							if j := lane ^ b; j <= base+width-1 {
								src = j
							} else {
								ok = false
							}
						case "idx":
							src = base + b%width
						}
						want := uint32(1000 + src)
						if ok {
							want += 65536
						}
						if got[lane] != want {
							t.Fatalf("lane %d: got %d (from lane %d, in range %v), want lane %d in range %v",
								lane, got[lane]&0xffff-1000, got[lane]&0xffff-1000, got[lane] >= 65536, src, ok)
						}
					}
				})
			}
		}
	}
}

func TestVoteAndRedux(t *testing.T) {
	got := runWarp(t, 64, `
	rem.u32 %r3, %r1, 3;
	setp.eq.u32 %p1, %r3, 0;
	vote.sync.ballot.b32 %r4, %p1, -1;
	vote.sync.any.pred %p2, %p1, -1;
	vote.sync.all.pred %p3, %p1, -1;
	setp.lt.u32 %p5, %r1, 100;
	vote.sync.uni.pred %p4, %p5, -1;
	redux.sync.add.u32 %r5, %r2, -1;
	redux.sync.max.s32 %r6, %r1, -1;
	activemask.b32 %r7;
	xor.b32 %r20, %r4, %r5;
	xor.b32 %r20, %r20, %r6;
	xor.b32 %r20, %r20, %r7;
	selp.u32 %r8, 1, 0, %p2;
	selp.u32 %r9, 2, 0, %p3;
	selp.u32 %r10, 4, 0, %p4;
	or.b32 %r8, %r8, %r9;
	or.b32 %r8, %r8, %r10;
	shl.b32 %r8, %r8, 28;
	xor.b32 %r20, %r20, %r8;`, true)
	for tid, g := range got {
		w := tid / 32
		var ballot uint32
		for l := 0; l < 32; l++ {
			if (32*w+l)%3 == 0 {
				ballot |= 1 << l
			}
		}
		want := ballot ^ 496 ^ uint32(32*w+31) ^ 0xffffffff ^ (1|4)<<28 // any, not all, uniform
		if g != want {
			t.Fatalf("thread %d: %#x, want %#x", tid, g, want)
		}
	}
}

// TestReconvergence: lanes that split at a branch (if/else, and a loop
// whose trip count differs per lane) meet again after it, where a shuffle
// needs them all.
func TestReconvergence(t *testing.T) {
	got := runWarp(t, 64, `
	setp.lt.u32 %p1, %r2, 10;
	@!%p1 bra $L_else;
	mul.lo.u32 %r3, %r2, 2;
	bra.uni $L_join;
$L_else:
	add.u32 %r3, %r2, 100;
$L_join:
	mov.u32 %r4, 0;
	mov.u32 %r5, 0;
$L_loop:
	setp.ge.u32 %p2, %r5, %r2;
	@%p2 bra $L_done;
	add.u32 %r4, %r4, %r5;
	add.u32 %r5, %r5, 1;
	bra $L_loop;
$L_done:
	sub.u32 %r6, 31, %r2;
	shfl.sync.idx.b32 %r7, %r3, %r6, 31, -1;
	shfl.sync.bfly.b32 %r8, %r4, 1, 31, -1;
	mul.lo.u32 %r20, %r7, 100000;
	add.u32 %r20, %r20, %r8;`, true)
	for tid, g := range got {
		lane := tid % 32
		src := 31 - lane
		v3 := src + 100
		if src < 10 {
			v3 = 2 * src
		}
		p := lane ^ 1
		want := uint32(v3*100000 + p*(p-1)/2)
		if g != want {
			t.Fatalf("thread %d: %d, want %d", tid, g, want)
		}
	}
}

func TestAtomics(t *testing.T) {
	src := kernelPTX("atomics", ".param .u64 g, .param .u64 out", `
	.shared .align 4 .b8 s[16];
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, s;
	setp.eq.u32 %p1, %r1, 0;
	@%p1 st.shared.u32 [%r2], 0;
	@%p1 st.shared.f32 [%r2+4], 0f00000000;
	bar.sync 0;
	ld.param.u64 %rd1, [g];
	atom.global.add.u32 %r3, [%rd1], 1;
	atom.shared.add.u32 %r4, [%r2], %r1;
	cvt.rn.f32.u32 %f1, %r1;
	atom.shared.add.f32 %f2, [%r2+4], %f1;
	atom.global.inc.u32 %r5, [%rd1+4], 9;
	sub.s32 %r6, 50, %r1;
	atom.global.max.s32 %r7, [%rd1+8], %r6;
	atom.global.exch.b32 %r8, [%rd1+12], %r1;
	red.global.add.f32 [%rd1+16], %f1;
	atom.global.cas.b32 %r9, [%rd1+20], %r1, 1000;
	bar.sync 0;
	ld.shared.u32 %r10, [%r2];
	ld.shared.f32 %f3, [%r2+4];
	@%p1 st.global.u32 [%rd1+24], %r10;
	@%p1 st.global.f32 [%rd1+28], %f3;
	ld.param.u64 %rd2, [out];
	mul.wide.u32 %rd3, %r1, 4;
	add.s64 %rd4, %rd2, %rd3;
	st.global.u32 [%rd4], %r3;`)
	ptxasCheck(t, src)
	mem := ptxsim.NewMemory()
	g, _ := mem.AllocCopy("g", []int32{0, 0, -1000, -1, 0, 0, 0, 0})
	out := mem.Alloc("out", 4*128)
	mustRun(t, src, "atomics", ptxsim.Config{Block: [3]int{128}, Grid: [3]int{1}}, mem, g, out)
	gs := make([]int32, 8)
	mem.Read(g, gs)
	olds := make([]uint32, 128)
	mem.Read(out, olds)
	sort.Slice(olds, func(i, j int) bool { return olds[i] < olds[j] })
	for i, o := range olds {
		if o != uint32(i) {
			t.Fatalf("atom.add returned %v: each old value once", olds)
		}
	}
	f := func(i int) float32 { return float32frombits(uint32(gs[i])) }
	// 128 increments modulo 10 (inc wraps to 0 past 9); max of 50-tid is 50;
	// the exchange leaves some thread's id; cas succeeds once (thread 0)
	if gs[0] != 128 || gs[1] != 128%10 || gs[2] != 50 || gs[3] < 0 || gs[3] > 127 || f(4) != 127*128/2 || gs[5] != 1000 || gs[6] != 127*128/2 || f(7) != 127*128/2 {
		t.Fatalf("global results %v (f32 sums %v, %v)", gs, f(4), f(7))
	}
}

func float32frombits(b uint32) float32 { return math.Float32frombits(b) }
