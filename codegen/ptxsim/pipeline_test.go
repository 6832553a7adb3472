package ptxsim_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
)

// ldmatrixMmaPTX is the canonical sm_80 tensor-core step (CUTLASS's and
// Triton's): A (16×16) and B (16×8, k-major rows) of .bf16 staged in shared
// memory row-major; ldmatrix.x4 gives mma's A fragment (lanes 0-15 address
// rows 0-15 at column 0, lanes 16-31 the same rows at column 8);
// ldmatrix.x2.trans gives its B fragment (lanes 0-15 address k rows 0-15);
// D is stored by the accumulator layout (c0,c1 at row g, columns 2t, 2t+1;
// c2,c3 eight rows below).
const ldmatrixMmaBody = `
	.shared .align 16 .b8 As[512];
	.shared .align 16 .b8 Bs[256];
	mov.u32 %r0, %laneid;
	mov.u32 %r5, As;
	mov.u32 %r7, Bs;
	ld.param.u64 %rd1, [a];
	mul.wide.u32 %rd2, %r0, 16;
	add.s64 %rd3, %rd1, %rd2;
	ld.global.v4.b32 {%r1, %r2, %r3, %r4}, [%rd3];
	mad.lo.s32 %r6, %r0, 16, %r5;
	st.shared.v4.b32 [%r6], {%r1, %r2, %r3, %r4};
	setp.lt.u32 %p1, %r0, 16;
	ld.param.u64 %rd4, [b];
	add.s64 %rd5, %rd4, %rd2;
	@%p1 ld.global.v4.b32 {%r1, %r2, %r3, %r4}, [%rd5];
	mad.lo.s32 %r8, %r0, 16, %r7;
	@%p1 st.shared.v4.b32 [%r8], {%r1, %r2, %r3, %r4};
	bar.warp.sync -1;
	and.b32 %r9, %r0, 15;
	shr.u32 %r10, %r0, 4;
	mul.lo.s32 %r11, %r9, 32;
	mad.lo.s32 %r11, %r10, 16, %r11;
	add.s32 %r11, %r11, %r5;
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r20, %r21, %r22, %r23}, [%r11];
	mad.lo.s32 %r12, %r9, 16, %r7;
	ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%r24, %r25}, [%r12];
	mov.f32 %f1, 0f00000000;
	mov.f32 %f2, 0f00000000;
	mov.f32 %f3, 0f00000000;
	mov.f32 %f4, 0f00000000;
	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f5, %f6, %f7, %f8}, {%r20, %r21, %r22, %r23}, {%r24, %r25}, {%f1, %f2, %f3, %f4};
	shr.u32 %r13, %r0, 2;
	and.b32 %r14, %r0, 3;
	mul.lo.s32 %r15, %r13, 8;
	mad.lo.s32 %r15, %r14, 2, %r15;
	ld.param.u64 %rd6, [d];
	mul.wide.u32 %rd7, %r15, 4;
	add.s64 %rd8, %rd6, %rd7;
	st.global.v2.f32 [%rd8], {%f5, %f6};
	st.global.v2.f32 [%rd8+256], {%f7, %f8};`

func bf16Matrix(rng *rand.Rand, n int) ([]uint16, []float64) {
	bits := make([]uint16, n)
	vals := make([]float64, n)
	for i := range bits {
		_, b := quantise("bf16", rng.Float64()*2-1)
		bits[i] = uint16(b)
		vals[i] = float64(math.Float32frombits(uint32(b) << 16))
	}
	return bits, vals
}

func TestLdmatrixFeedsMma(t *testing.T) {
	src := kernelPTX("ldmatrix_mma", ".param .u64 a, .param .u64 b, .param .u64 d", ldmatrixMmaBody)
	ptxasCheck(t, src)
	rng := rand.New(rand.NewPCG(3, 4))
	abits, A := bf16Matrix(rng, 16*16)
	bbits, B := bf16Matrix(rng, 16*8)
	mem := ptxsim.NewMemory()
	aa, _ := mem.AllocCopy("a", abits)
	ba, _ := mem.AllocCopy("b", bbits)
	da := mem.Alloc("d", 16*8*4)
	mustRun(t, src, "ldmatrix_mma", ptxsim.Config{Block: [3]int{32}, Racecheck: true}, mem, aa, ba, da)
	D := make([]float32, 16*8)
	if err := mem.Read(da, D); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 16; i++ {
		for j := 0; j < 8; j++ {
			want := 0.0
			for k := 0; k < 16; k++ {
				want += A[i*16+k] * B[k*8+j]
			}
			if got := float64(D[i*8+j]); math.Abs(got-want) > 1e-6*(1+math.Abs(want)) {
				t.Fatalf("D[%d][%d] = %v, want %v", i, j, got, want)
			}
		}
	}
}

// TestStmatrix: ldmatrix then stmatrix with the same addresses copies the
// four 8×8 blocks of a 16×16 .b16 matrix; with .trans on one side only,
// each block comes out transposed in place.
func TestStmatrix(t *testing.T) {
	for _, c := range []struct {
		name             string
		ldTrans, stTrans string
		transposed       bool
	}{
		{"copy", "", "", false},
		{"copy_trans_trans", ".trans", ".trans", false},
		{"transpose_blocks", "", ".trans", true},
		{"transpose_blocks_on_load", ".trans", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := `
	.shared .align 16 .b8 In[512];
	.shared .align 16 .b8 Out[512];
	mov.u32 %r0, %laneid;
	mov.u32 %r5, In;
	mov.u32 %r7, Out;
	ld.param.u64 %rd1, [a];
	mul.wide.u32 %rd2, %r0, 16;
	add.s64 %rd3, %rd1, %rd2;
	ld.global.v4.b32 {%r1, %r2, %r3, %r4}, [%rd3];
	mad.lo.s32 %r6, %r0, 16, %r5;
	st.shared.v4.b32 [%r6], {%r1, %r2, %r3, %r4};
	bar.warp.sync -1;
	and.b32 %r9, %r0, 15;
	shr.u32 %r10, %r0, 4;
	mul.lo.s32 %r11, %r9, 32;
	mad.lo.s32 %r11, %r10, 16, %r11;
	add.s32 %r12, %r11, %r5;
	add.s32 %r13, %r11, %r7;
	ldmatrix.sync.aligned.m8n8.x4` + c.ldTrans + `.shared.b16 {%r20, %r21, %r22, %r23}, [%r12];
	stmatrix.sync.aligned.m8n8.x4` + c.stTrans + `.shared.b16 [%r13], {%r20, %r21, %r22, %r23};
	bar.warp.sync -1;
	mad.lo.s32 %r14, %r0, 16, %r7;
	ld.shared.v4.b32 {%r1, %r2, %r3, %r4}, [%r14];
	ld.param.u64 %rd4, [d];
	add.s64 %rd5, %rd4, %rd2;
	st.global.v4.b32 [%rd5], {%r1, %r2, %r3, %r4};`
			src := strings.Replace(kernelPTX("st_matrix", ".param .u64 a, .param .u64 d", body), ".target sm_80", ".target sm_90", 1)
			ptxasCheck(t, src)
			in := make([]uint16, 256)
			for i := range in {
				in[i] = uint16(i)
			}
			mem := ptxsim.NewMemory()
			aa, _ := mem.AllocCopy("a", in)
			da := mem.Alloc("d", 512)
			mustRun(t, src, "st_matrix", ptxsim.Config{Block: [3]int{32}}, mem, aa, da)
			out := make([]uint16, 256)
			mem.Read(da, out)
			for r := 0; r < 16; r++ {
				for col := 0; col < 16; col++ {
					want := in[r*16+col]
					if c.transposed { // within its 8×8 block
						br, bc := r/8*8, col/8*8
						want = in[(br+col-bc)*16+bc+r-br]
					}
					if out[r*16+col] != want {
						t.Fatalf("out[%d][%d] = %d, want %d", r, col, out[r*16+col], want)
					}
				}
			}
		})
	}
}

// pipelinePTX sums tiles of 128 floats through a two-stage cp.async
// pipeline (threads 0-31 copy 16 bytes each, all 64 threads read a float
// another thread copied): the shape of a multi-stage matmul's K loop. wait
// is the wait_group depth (1 is right) and secondBarrier the barrier that
// keeps the next copy out of the stage still being read.
func pipelinePTX(wait string, secondBarrier bool) string {
	bar2 := ""
	if secondBarrier {
		bar2 = "bar.sync 0;"
	}
	return kernelPTX("pipeline", ".param .u64 x, .param .u64 y, .param .u32 ntiles", `
	.shared .align 16 .b8 stage[1024];
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, stage;
	ld.param.u64 %rd1, [x];
	ld.param.u32 %r2, [ntiles];
	setp.lt.u32 %p1, %r0, 32;
	mul.wide.u32 %rd2, %r0, 16;
	add.s64 %rd3, %rd1, %rd2;
	mad.lo.s32 %r3, %r0, 16, %r1;
	@%p1 cp.async.cg.shared.global [%r3], [%rd3], 16;
	cp.async.commit_group;
	@%p1 cp.async.cg.shared.global [%r3+512], [%rd3+512], 16;
	cp.async.commit_group;
	mov.f32 %f1, 0f00000000;
	mov.u32 %r4, 0;
	mad.lo.s32 %r5, %r0, 4, 5;
	and.b32 %r5, %r5, 127;
	shl.b32 %r5, %r5, 2;
	add.s32 %r5, %r5, %r1;
$L_loop:
	cp.async.wait_group `+wait+`;
	bar.sync 0;
	and.b32 %r6, %r4, 1;
	mad.lo.s32 %r7, %r6, 512, %r5;
	ld.shared.f32 %f2, [%r7];
	add.f32 %f1, %f1, %f2;
	`+bar2+`
	add.s32 %r8, %r4, 2;
	setp.lt.u32 %p2, %r8, %r2;
	and.pred %p3, %p2, %p1;
	mul.wide.u32 %rd4, %r8, 512;
	add.s64 %rd5, %rd3, %rd4;
	mad.lo.s32 %r9, %r6, 512, %r3;
	@%p3 cp.async.cg.shared.global [%r9], [%rd5], 16;
	cp.async.commit_group;
	add.s32 %r4, %r4, 1;
	setp.lt.u32 %p4, %r4, %r2;
	@%p4 bra.uni $L_loop;
	ld.param.u64 %rd6, [y];
	mul.wide.u32 %rd7, %r0, 4;
	add.s64 %rd8, %rd6, %rd7;
	st.global.f32 [%rd8], %f1;`)
}

func TestCpAsyncPipeline(t *testing.T) {
	const tiles = 7
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, tiles*128)
	for i := range x {
		x[i] = float32(rng.IntN(1000))
	}
	run := func(src string, race bool) ([]float32, error) {
		mod, err := ptxsim.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		mem := ptxsim.NewMemory()
		xa, _ := mem.AllocCopy("x", x)
		ya := mem.Alloc("y", 64*4)
		err = mod.Launch("pipeline", ptxsim.Config{Block: [3]int{64}, Racecheck: race}, mem, xa, ya, uint32(tiles))
		y := make([]float32, 64)
		mem.Read(ya, y)
		return y, err
	}
	good := pipelinePTX("1", true)
	ptxasCheck(t, good)
	y, err := run(good, true)
	if err != nil {
		t.Fatal(err)
	}
	for tid := range y {
		want := float32(0)
		for i := 0; i < tiles; i++ {
			want += x[i*128+(tid*4+5)%128]
		}
		if y[tid] != want {
			t.Fatalf("y[%d] = %v, want %v", tid, y[tid], want)
		}
	}
	// waiting for all but the newest two groups leaves tile i in flight
	_, err = run(pipelinePTX("2", true), false)
	var f *ptxsim.Fault
	if !errors.As(err, &f) || f.Kind != "async" || !strings.Contains(f.Instr, "ld.shared.f32") {
		t.Fatalf("wait_group 2: %v", err)
	}
	// without the second barrier the next copy is issued into the stage
	// that other warps are still reading
	_, err = run(pipelinePTX("1", false), true)
	if !errors.As(err, &f) || f.Kind != "async" && f.Kind != "racecheck" {
		t.Fatalf("no second barrier: %v", err)
	}
	t.Logf("reported: %v", err)
}

// TestCpAsyncZeroFill: a src-size below cp-size fills the rest with zeros,
// and ignore-src copies zeros without reading the source; a src-size of
// 12 (not a power of two: realigned copies, codegen/realign.go) reads from
// a source aligned to cp-size only.
func TestCpAsyncZeroFill(t *testing.T) {
	src := kernelPTX("zfill", ".param .u64 x, .param .u64 y", `
	.shared .align 16 .b8 buf[80];
	mov.u32 %r1, buf;
	ld.param.u64 %rd1, [x];
	ld.param.u64 %rd2, [y];
	mov.u32 %r2, 8;
	cp.async.ca.shared.global [%r1], [%rd1], 16, %r2;
	setp.eq.u32 %p1, %r2, 8;
	add.s64 %rd3, %rd1, 4096;
	cp.async.ca.shared.global [%r1+16], [%rd3], 16, %p1;
	cp.async.cg.shared.global [%r1+32], [%rd1+16], 16, 0;
	cp.async.ca.shared.global [%r1+48], [%rd1+16], 8;
	mov.u32 %r7, 12;
	cp.async.cg.shared.global [%r1+64], [%rd1+16], 16, %r7;
	cp.async.wait_all;
	ld.shared.v4.u32 {%r3, %r4, %r5, %r6}, [%r1];
	st.global.v4.u32 [%rd2], {%r3, %r4, %r5, %r6};
	ld.shared.v4.u32 {%r3, %r4, %r5, %r6}, [%r1+16];
	st.global.v4.u32 [%rd2+16], {%r3, %r4, %r5, %r6};
	ld.shared.v4.u32 {%r3, %r4, %r5, %r6}, [%r1+32];
	st.global.v4.u32 [%rd2+32], {%r3, %r4, %r5, %r6};
	ld.shared.v4.u32 {%r3, %r4, %r5, %r6}, [%r1+48];
	st.global.v4.u32 [%rd2+48], {%r3, %r4, %r5, %r6};
	ld.shared.v4.u32 {%r3, %r4, %r5, %r6}, [%r1+64];
	st.global.v4.u32 [%rd2+64], {%r3, %r4, %r5, %r6};`)
	ptxasCheck(t, src)
	mem := ptxsim.NewMemory()
	xa, _ := mem.AllocCopy("x", []uint32{1, 2, 3, 4, 5, 6, 7, 8})
	ya, _ := mem.AllocCopy("y", make([]uint32, 20))
	mustRun(t, src, "zfill", ptxsim.Config{Block: [3]int{1}}, mem, xa, ya)
	got := make([]uint32, 20)
	mem.Read(ya, got)
	want := []uint32{1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 6, 0, 0, 5, 6, 7, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("shared after the copies %v, want %v", got, want)
		}
	}
}

// TestCpAsyncRangePastEnd: a cp.async whose src-size reads inside a buffer
// but whose cp-size range passes its end is a memcheck fault, as
// compute-sanitizer reports it (a 16-byte copy of a buffer's last 4
// bytes); src-size 0 reads nothing and is not.
func TestCpAsyncRangePastEnd(t *testing.T) {
	for _, c := range []struct {
		name  string
		size  int
		fault bool
	}{
		{"src-size 4 of the last 4 bytes", 4, true},
		{"src-size 0", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := kernelPTX("tail", ".param .u64 x", fmt.Sprintf(`
	.shared .align 16 .b8 buf[16];
	mov.u32 %%r1, buf;
	ld.param.u64 %%rd1, [x];
	mov.u32 %%r2, %d;
	cp.async.cg.shared.global [%%r1], [%%rd1+16], 16, %%r2;
	cp.async.wait_all;`, c.size))
			ptxasCheck(t, src)
			mem := ptxsim.NewMemory()
			xa, _ := mem.AllocCopy("x", []uint32{1, 2, 3, 4, 5}) // 20 bytes: 4 past the 16
			if !c.fault {
				mustRun(t, src, "tail", ptxsim.Config{Block: [3]int{1}}, mem, xa)
				return
			}
			f := mustFault(t, src, "tail", ptxsim.Config{Block: [3]int{1}}, mem, xa)
			if f.Kind != "memcheck" || !strings.Contains(f.Msg, "src-size 4") {
				t.Fatalf("fault %v, want memcheck naming the src-size", f)
			}
		})
	}
}
