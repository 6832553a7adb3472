package ptxsim_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
)

// producerConsumerPTX is a warp-specialised pipeline on sm_90: warp 0 (one
// elected lane) streams tiles of 128 floats into two shared stages with
// cp.async.bulk, completing on a "full" mbarrier per stage; warp 1 waits
// on it (try_wait.parity), sums a float of the tile per lane, and releases
// the stage on an "empty" mbarrier that the producer waits on before
// reusing it. wait is the consumer's wait (correct: the try_wait loop).
func producerConsumerPTX(consumerWait string) string {
	return strings.NewReplacer(".version 7.8", ".version 8.0", ".target sm_80", ".target sm_90").Replace(kernelPTX("pc", ".param .u64 x, .param .u64 y, .param .u32 ntiles", `
	.shared .align 16 .b8 stage[1024];
	.shared .align 8 .b8 full[16];
	.shared .align 8 .b8 empty[16];
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, %laneid;
	shr.u32 %r2, %r0, 5;
	mov.u32 %r3, stage;
	mov.u32 %r4, full;
	mov.u32 %r5, empty;
	ld.param.u64 %rd1, [x];
	ld.param.u32 %r6, [ntiles];
	setp.eq.u32 %p1, %r0, 0;
	@%p1 mbarrier.init.shared::cta.b64 [%r4], 1;
	@%p1 mbarrier.init.shared::cta.b64 [%r4+8], 1;
	@%p1 mbarrier.init.shared::cta.b64 [%r5], 32;
	@%p1 mbarrier.init.shared::cta.b64 [%r5+8], 32;
	bar.sync 0;
	mov.u32 %r7, 0;
	setp.ne.u32 %p2, %r2, 0;
	@%p2 bra.uni $L_consumer;
$L_produce:
	setp.ge.u32 %p3, %r7, %r6;
	@%p3 bra.uni $L_done;
	and.b32 %r8, %r7, 1;
	shr.u32 %r9, %r7, 1;
	and.b32 %r9, %r9, 1;
	xor.b32 %r9, %r9, 1;
	mad.lo.s32 %r10, %r8, 8, %r5;
	setp.lt.u32 %p4, %r7, 2;
	@%p4 bra.uni $L_fill;
$L_wait_empty:
	mbarrier.try_wait.parity.shared::cta.b64 %p5, [%r10], %r9;
	@!%p5 bra.uni $L_wait_empty;
$L_fill:
	elect.sync %r11|%p6, -1;
	mad.lo.s32 %r12, %r8, 8, %r4;
	mad.lo.s32 %r13, %r8, 512, %r3;
	mul.wide.u32 %rd2, %r7, 512;
	add.s64 %rd3, %rd1, %rd2;
	@%p6 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r12], 512;
	@%p6 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r13], [%rd3], 512, [%r12];
	add.u32 %r7, %r7, 1;
	bra.uni $L_produce;
$L_consumer:
	mov.f32 %f1, 0f00000000;
	mad.lo.s32 %r14, %r1, 4, %r3;
$L_consume:
	setp.ge.u32 %p3, %r7, %r6;
	@%p3 bra.uni $L_store;
	and.b32 %r8, %r7, 1;
	shr.u32 %r9, %r7, 1;
	and.b32 %r9, %r9, 1;
	mad.lo.s32 %r12, %r8, 8, %r4;
`+consumerWait+`
	mad.lo.s32 %r15, %r8, 512, %r14;
	ld.shared.f32 %f2, [%r15];
	add.f32 %f1, %f1, %f2;
	mad.lo.s32 %r10, %r8, 8, %r5;
	mbarrier.arrive.shared::cta.b64 _, [%r10];
	add.u32 %r7, %r7, 1;
	bra.uni $L_consume;
$L_store:
	ld.param.u64 %rd4, [y];
	mul.wide.u32 %rd5, %r1, 4;
	add.s64 %rd6, %rd4, %rd5;
	st.global.f32 [%rd6], %f1;
$L_done:`))
}

const consumerTryWait = `$L_wait_full:
	mbarrier.try_wait.parity.shared::cta.b64 %p5, [%r12], %r9;
	@!%p5 bra.uni $L_wait_full;`

func TestMbarrierPipeline(t *testing.T) {
	const tiles = 9
	x := make([]float32, tiles*128)
	for i := range x {
		x[i] = float32(i%251) + 0.25
	}
	run := func(src string) ([]float32, error) {
		mod, err := ptxsim.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		mem := ptxsim.NewMemory()
		xa, _ := mem.AllocCopy("x", x)
		ya := mem.Alloc("y", 32*4)
		err = mod.Launch("pc", ptxsim.Config{Block: [3]int{64}, Racecheck: true, Initcheck: true, MaxSteps: 1 << 20}, mem, xa, ya, uint32(tiles))
		y := make([]float32, 32)
		mem.Read(ya, y)
		return y, err
	}
	y, err := run(producerConsumerPTX(consumerTryWait))
	if err != nil {
		t.Fatal(err)
	}
	for l := range y {
		want := float32(0)
		for i := 0; i < tiles; i++ {
			want += x[i*128+l]
		}
		if y[l] != want {
			t.Fatalf("y[%d] = %v, want %v", l, y[l], want)
		}
	}
	// the consumer reads the stage without waiting for the copy: here
	// before the producer has issued it (warps run in turn)
	_, err = run(producerConsumerPTX(""))
	var f *ptxsim.Fault
	if !errors.As(err, &f) || f.Kind != "initcheck" || !strings.Contains(f.Instr, "ld.shared.f32") || f.Warp != 1 {
		t.Fatalf("read without waiting: %v", err)
	}
	t.Logf("reported: %v", err)
	// waiting on the wrong parity: the wait succeeds at once, before the copy
	_, err = run(producerConsumerPTX(strings.Replace(consumerTryWait, "%r9;", "1;", 1)))
	if !errors.As(err, &f) || f.Kind != "initcheck" {
		t.Fatalf("wrong parity: %v", err)
	}
	// the producer expects more bytes than it copies: the phase never
	// completes and the consumer waits for ever
	_, err = run(strings.Replace(producerConsumerPTX(consumerTryWait), "_, [%r12], 512;", "_, [%r12], 1024;", 1))
	if !errors.As(err, &f) || f.Kind != "sync" || !strings.Contains(f.Msg, "mbarrier phase") || !strings.Contains(f.Instr, "try_wait") {
		t.Fatalf("expect_tx of more than is copied: %v", err)
	}
	t.Logf("reported: %v", err)
}

// TestCpAsyncMbarrierArrive: every thread's cp.async completes on an
// mbarrier (cp.async.mbarrier.arrive.noinc); waiting on it makes all the
// threads' data visible without cp.async.wait_group.
func TestCpAsyncMbarrierArrive(t *testing.T) {
	src := kernelPTX("cp_mbar", ".param .u64 x, .param .u64 y", `
	.shared .align 16 .b8 buf[512];
	.shared .align 8 .b8 bar[8];
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, buf;
	mov.u32 %r2, bar;
	setp.eq.u32 %p1, %r0, 0;
	@%p1 mbarrier.init.shared.b64 [%r2], 128;
	bar.sync 0;
	ld.param.u64 %rd1, [x];
	mul.wide.u32 %rd2, %r0, 4;
	add.s64 %rd3, %rd1, %rd2;
	mad.lo.s32 %r3, %r0, 4, %r1;
	cp.async.ca.shared.global [%r3], [%rd3], 4;
	cp.async.mbarrier.arrive.noinc.shared.b64 [%r2];
$L_wait:
	mbarrier.test_wait.parity.shared.b64 %p2, [%r2], 0;
	@!%p2 bra $L_wait;
	sub.u32 %r4, 127, %r0;
	mad.lo.s32 %r5, %r4, 4, %r1;
	ld.shared.f32 %f1, [%r5];
	ld.param.u64 %rd4, [y];
	add.s64 %rd5, %rd4, %rd2;
	st.global.f32 [%rd5], %f1;`)
	ptxasCheck(t, src)
	x := make([]float32, 128)
	for i := range x {
		x[i] = float32(i) * 1.5
	}
	mem := ptxsim.NewMemory()
	xa, _ := mem.AllocCopy("x", x)
	ya := mem.Alloc("y", 512)
	mustRun(t, src, "cp_mbar", ptxsim.Config{Block: [3]int{128}, Racecheck: true}, mem, xa, ya)
	y := make([]float32, 128)
	mem.Read(ya, y)
	for i := range y {
		if y[i] != x[127-i] {
			t.Fatalf("y[%d] = %v, want %v", i, y[i], x[127-i])
		}
	}
}

// TestCpAsyncMbarrierArriveTwice: a thread's copies into two buffers, each
// followed by cp.async.mbarrier.arrive.noinc on a barrier of its own (as a
// producer fills two stages before a consumer waits): the second arrival
// also tracks the first buffer's copies, still in flight, yet a thread
// that waits on the first barrier only reads the first buffer without a
// race (the copies keep the first arrival's release).
func TestCpAsyncMbarrierArriveTwice(t *testing.T) {
	src := kernelPTX("cp_mbar2", ".param .u64 x, .param .u64 y", `
	.shared .align 16 .b8 buf[1024];
	.shared .align 8 .b8 bar[16];
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, buf;
	mov.u32 %r2, bar;
	setp.eq.u32 %p1, %r0, 0;
	@%p1 mbarrier.init.shared.b64 [%r2], 128;
	@%p1 mbarrier.init.shared.b64 [%r2+8], 128;
	bar.sync 0;
	ld.param.u64 %rd1, [x];
	mul.wide.u32 %rd2, %r0, 4;
	add.s64 %rd3, %rd1, %rd2;
	mad.lo.s32 %r3, %r0, 4, %r1;
	cp.async.ca.shared.global [%r3], [%rd3], 4;
	cp.async.mbarrier.arrive.noinc.shared.b64 [%r2];
	cp.async.ca.shared.global [%r3+512], [%rd3+512], 4;
	cp.async.mbarrier.arrive.noinc.shared.b64 [%r2+8];
$L_wait:
	mbarrier.test_wait.parity.shared.b64 %p2, [%r2], 0;
	@!%p2 bra $L_wait;
	sub.u32 %r4, 127, %r0;
	mad.lo.s32 %r5, %r4, 4, %r1;
	ld.shared.f32 %f1, [%r5];
	ld.param.u64 %rd4, [y];
	add.s64 %rd5, %rd4, %rd2;
	st.global.f32 [%rd5], %f1;
$L_wait2:
	mbarrier.test_wait.parity.shared.b64 %p3, [%r2+8], 0;
	@!%p3 bra $L_wait2;
	ld.shared.f32 %f2, [%r5+512];
	st.global.f32 [%rd5+512], %f2;`)
	ptxasCheck(t, src)
	x := make([]float32, 256)
	for i := range x {
		x[i] = float32(i) * 1.5
	}
	mem := ptxsim.NewMemory()
	xa, _ := mem.AllocCopy("x", x)
	ya := mem.Alloc("y", 1024)
	mustRun(t, src, "cp_mbar2", ptxsim.Config{Block: [3]int{128}, Racecheck: true}, mem, xa, ya)
	y := make([]float32, 256)
	mem.Read(ya, y)
	for i := range y {
		if want := x[128*(i/128)+127-i%128]; y[i] != want {
			t.Fatalf("y[%d] = %v, want %v", i, y[i], want)
		}
	}
}
