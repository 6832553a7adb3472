package ptxsim_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/kernels"
)

// kernelPTX wraps a body in an sm_80 entry with the given parameters and
// a generous register file.
func kernelPTX(name, params, body string) string {
	return `.version 7.8
.target sm_80
.address_size 64

.visible .entry ` + name + `(` + params + `)
.maxntid 128, 1, 1
{
	.reg .pred %p<8>;
	.reg .b16 %h<8>;
	.reg .b32 %r<64>;
	.reg .b64 %rd<32>;
	.reg .f32 %f<64>;
	.reg .f64 %fd<32>;
` + body + `
	ret;
}
`
}

// mustFault runs a kernel and returns its Fault, failing if it ran clean
// or failed otherwise.
func mustFault(t *testing.T, src, kernel string, cfg ptxsim.Config, mem *ptxsim.Memory, args ...any) *ptxsim.Fault {
	t.Helper()
	mod, err := ptxsim.Parse(src)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	err = mod.Launch(kernel, cfg, mem, args...)
	if err == nil {
		t.Fatalf("%s ran without a fault", kernel)
	}
	var f *ptxsim.Fault
	if !errors.As(err, &f) {
		t.Fatalf("%s: error is not a *Fault: %v", kernel, err)
	}
	t.Logf("reported: %v", err)
	return f
}

func mustRun(t *testing.T, src, kernel string, cfg ptxsim.Config, mem *ptxsim.Memory, args ...any) {
	t.Helper()
	mod, err := ptxsim.Parse(src)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if err := mod.Launch(kernel, cfg, mem, args...); err != nil {
		t.Fatalf("%s: %v", kernel, err)
	}
}

// readX copies x[tid] to y[tid] for every thread of a 128-thread CTA: a
// buffer shorter than 128 elements is read out of bounds.
const readXBody = `
	mov.u32 %r1, %tid.x;
	ld.param.u64 %rd1, [x];
	ld.param.u64 %rd2, [y];
	mul.wide.u32 %rd3, %r1, 4;
	add.s64 %rd4, %rd1, %rd3;
	add.s64 %rd5, %rd2, %rd3;
	ld.global.f32 %f1, [%rd4];
	st.global.f32 [%rd5], %f1;`

func TestOutOfBoundsRead(t *testing.T) {
	src := kernelPTX("read_x", ".param .u64 x, .param .u64 y", readXBody)
	mem := ptxsim.NewMemory()
	x := mem.Alloc("x", 4*100) // 100 elements for 128 threads
	y := mem.Alloc("y", 4*128)
	f := mustFault(t, src, "read_x", ptxsim.Config{Block: [3]int{128}, Grid: [3]int{2}}, mem, x, y)
	if f.Kind != "memcheck" || f.Kernel != "read_x" || !strings.HasPrefix(f.Instr, "ld.global.f32") || !f.HasAddr {
		t.Fatalf("fault %+v", f)
	}
	// the first thread past the end, in the first CTA: thread 100 reads x+400
	if f.CTA != [3]int{0, 0, 0} || f.Thread != [3]int{100, 0, 0} || f.Addr != x+400 || f.Warp != 3 || f.Lane != 4 {
		t.Fatalf("located at CTA %v thread %v warp %d lane %d address %#x, want CTA 0 thread 100 warp 3 lane 4 address %#x", f.CTA, f.Thread, f.Warp, f.Lane, f.Addr, x+400)
	}
	if !strings.Contains(f.Msg, "0 bytes past the end of buffer x") {
		t.Fatalf("message does not name the buffer: %s", f.Msg)
	}
	// the same kernel with a long enough buffer runs
	mem2 := ptxsim.NewMemory()
	mustRun(t, src, "read_x", ptxsim.Config{Block: [3]int{128}}, mem2, mem2.Alloc("x", 512), mem2.Alloc("y", 512))
}

func TestMisalignedVectorLoad(t *testing.T) {
	src := kernelPTX("misaligned", ".param .u64 x", `
	ld.param.u64 %rd1, [x];
	add.s64 %rd2, %rd1, 4;
	ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd2];`)
	mem := ptxsim.NewMemory()
	x := mem.Alloc("x", 64)
	f := mustFault(t, src, "misaligned", ptxsim.Config{Block: [3]int{32}}, mem, x)
	if f.Kind != "memcheck" || !strings.Contains(f.Msg, "misaligned") || f.Addr != x+4 {
		t.Fatalf("fault %+v", f)
	}
}

func TestSharedOutOfBounds(t *testing.T) {
	src := kernelPTX("smem_oob", "", `
	.shared .align 4 .b8 buf[256];
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, buf;
	mad.lo.s32 %r3, %r1, 4, %r2;
	st.shared.u32 [%r3], %r1;`)
	f := mustFault(t, src, "smem_oob", ptxsim.Config{Block: [3]int{128}}, ptxsim.NewMemory())
	if f.Kind != "memcheck" || f.Thread != [3]int{64, 0, 0} || !strings.Contains(f.Msg, "256 bytes of shared memory") {
		t.Fatalf("fault %+v", f)
	}
}

// exchange: each thread writes its id to buf[tid], then reads buf[127-tid],
// written by another warp: without the barrier that is a race.
func exchangePTX(barrier bool) string {
	bar := ""
	if barrier {
		bar = "bar.sync 0;"
	}
	return kernelPTX("exchange", ".param .u64 y", `
	.shared .align 4 .b8 buf[512];
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, buf;
	mad.lo.s32 %r3, %r1, 4, %r2;
	add.u32 %r10, %r1, 1;
	st.shared.u32 [%r3], %r10;
	`+bar+`
	sub.u32 %r4, 127, %r1;
	mad.lo.s32 %r5, %r4, 4, %r2;
	ld.shared.u32 %r6, [%r5];
	ld.param.u64 %rd1, [y];
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r6;`)
}

func TestRacecheckMissingBarrier(t *testing.T) {
	mem := ptxsim.NewMemory()
	y := mem.Alloc("y", 512)
	f := mustFault(t, exchangePTX(false), "exchange", ptxsim.Config{Block: [3]int{128}, Racecheck: true}, mem, y)
	// warps run in order: warp 0 reads buf[96..127] before warp 3 writes
	// them, or a later warp overwrites what an earlier one read; either
	// way the report names the store and the load
	both := f.Instr + f.Msg
	if f.Kind != "racecheck" || !strings.Contains(both, "ld.shared.u32") || !strings.Contains(both, "st.shared.u32") {
		t.Fatalf("fault %+v", f)
	}
	// with the barrier: no hazard, and every thread reads its partner's id
	mem = ptxsim.NewMemory()
	y = mem.Alloc("y", 512)
	mustRun(t, exchangePTX(true), "exchange", ptxsim.Config{Block: [3]int{128}, Racecheck: true}, mem, y)
	got := make([]uint32, 128)
	if err := mem.Read(y, got); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != uint32(127-i+1) {
			t.Fatalf("y[%d] = %d, want %d", i, v, 127-i+1)
		}
	}
	// racecheck off: the missing barrier runs (warps in order), unreported
	mem = ptxsim.NewMemory()
	mustRun(t, exchangePTX(false), "exchange", ptxsim.Config{Block: [3]int{128}}, mem, mem.Alloc("y", 512))
}

// cpAsyncPTX copies 128 floats into shared memory with cp.async (16 bytes a
// thread, 32 threads), then every thread reads one of them back out.
func cpAsyncPTX(wait, barrier bool) string {
	w := ""
	if wait {
		w = "cp.async.wait_group 0;"
	}
	if barrier {
		w += "\n\tbar.sync 0;"
	}
	return kernelPTX("stage", ".param .u64 x, .param .u64 y", `
	.shared .align 16 .b8 buf[512];
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, buf;
	ld.param.u64 %rd1, [x];
	ld.param.u64 %rd2, [y];
	setp.lt.u32 %p1, %r1, 32;
	mad.lo.s32 %r3, %r1, 16, %r2;
	mul.wide.u32 %rd3, %r1, 16;
	add.s64 %rd4, %rd1, %rd3;
	@%p1 cp.async.cg.shared.global [%r3], [%rd4], 16;
	cp.async.commit_group;
	`+w+`
	mad.lo.s32 %r4, %r1, 4, %r2;
	ld.shared.f32 %f1, [%r4];
	mul.wide.u32 %rd5, %r1, 4;
	add.s64 %rd6, %rd2, %rd5;
	st.global.f32 [%rd6], %f1;`)
}

func TestCpAsyncReadBeforeWait(t *testing.T) {
	x := make([]float32, 128)
	for i := range x {
		x[i] = float32(i) + 0.5
	}
	run := func(wait, barrier, race bool) (*ptxsim.Memory, uint64, error) {
		mem := ptxsim.NewMemory()
		xa, _ := mem.AllocCopy("x", x)
		ya := mem.Alloc("y", 512)
		mod, err := ptxsim.Parse(cpAsyncPTX(wait, barrier))
		if err != nil {
			t.Fatal(err)
		}
		return mem, ya, mod.Launch("stage", ptxsim.Config{Block: [3]int{128}, Racecheck: race}, mem, xa, ya)
	}
	// no wait at all: the read meets a copy still in flight
	_, _, err := run(false, true, false)
	var f *ptxsim.Fault
	if !errors.As(err, &f) || f.Kind != "async" || !strings.HasPrefix(f.Instr, "ld.shared.f32") || !strings.Contains(f.Msg, "cp.async") {
		t.Fatalf("read before cp.async.wait_group: %v", err)
	}
	t.Logf("reported: %v", err)
	// waiting for one's own copy is not enough for the other threads' data:
	// warp 0's copies land at its wait, and the other warps read them with
	// no barrier between
	_, _, err = run(true, false, true)
	if !errors.As(err, &f) || f.Kind != "racecheck" || !strings.Contains(f.Msg, "cp.async") {
		t.Fatalf("wait without a barrier: %v", err)
	}
	t.Logf("reported: %v", err)
	// wait, then barrier: correct
	mem, ya, err := run(true, true, true)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 128)
	if err := mem.Read(ya, got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != x[i] {
			t.Fatalf("y[%d] = %v, want %v", i, got[i], x[i])
		}
	}
}

func TestDivergentShuffle(t *testing.T) {
	src := kernelPTX("divergent_shfl", "", `
	mov.u32 %r1, %tid.x;
	setp.lt.u32 %p1, %r1, 16;
	@!%p1 bra $L_skip;
	shfl.sync.bfly.b32 %r2, %r1, 1, 31, -1;
$L_skip:`)
	f := mustFault(t, src, "divergent_shfl", ptxsim.Config{Block: [3]int{32}}, ptxsim.NewMemory())
	if f.Kind != "sync" || !strings.Contains(f.Msg, "membermask") {
		t.Fatalf("fault %+v", f)
	}
}

func TestDivergentBraUni(t *testing.T) {
	src := kernelPTX("bra_uni", "", `
	mov.u32 %r1, %tid.x;
	setp.lt.u32 %p1, %r1, 5;
	@%p1 bra.uni $L_skip;
	add.u32 %r2, %r1, 1;
$L_skip:`)
	f := mustFault(t, src, "bra_uni", ptxsim.Config{Block: [3]int{64}}, ptxsim.NewMemory())
	if f.Kind != "sync" || !strings.Contains(f.Msg, "bra.uni") {
		t.Fatalf("fault %+v", f)
	}
}

func TestEndlessLoop(t *testing.T) {
	src := kernelPTX("endless", "", `
$L_top:
	add.u32 %r1, %r1, 1;
	bra.uni $L_top;`)
	f := mustFault(t, src, "endless", ptxsim.Config{Block: [3]int{32}, MaxSteps: 10000}, ptxsim.NewMemory())
	if f.Kind != "exec" || !strings.Contains(f.Msg, "does not end") {
		t.Fatalf("fault %+v", f)
	}
}

func TestBarrierDeadlock(t *testing.T) {
	// warp 0 waits at barrier 1, the others at barrier 0: neither completes
	src := kernelPTX("deadlock", "", `
	mov.u32 %r1, %tid.x;
	setp.lt.u32 %p1, %r1, 32;
	@%p1 bra $L_w0;
	bar.sync 0;
	bra.uni $L_end;
$L_w0:
	bar.sync 1;
$L_end:`)
	f := mustFault(t, src, "deadlock", ptxsim.Config{Block: [3]int{64}}, ptxsim.NewMemory())
	if f.Kind != "sync" || !strings.Contains(f.Msg, "deadlock") {
		t.Fatalf("fault %+v", f)
	}
}

// TestGeneratedKernelOutOfBounds: a codegen kernel launched on buffers
// shorter than its n reads out of bounds, and the report names the kernel,
// the PTX line and the thread, as compute-sanitizer does.
func TestGeneratedKernelOutOfBounds(t *testing.T) {
	k, err := kernels.VecAdd(tile.Meta{"BLOCK": 128})
	if err != nil {
		t.Fatal(err)
	}
	x, y, z := make([]float32, 200), make([]float32, 200), make([]float32, 300)
	err = (&ptxsim.Launcher{Arch: 80}).Launch(k, tile.Grid{3}, x, y, z, 300)
	var f *ptxsim.Fault
	if !errors.As(err, &f) || f.Kind != "memcheck" || f.Kernel != "vec_add" || !strings.Contains(f.Instr, "ld.global") {
		t.Fatalf("vec_add over short buffers: %v", err)
	}
	if f.CTA[0] != 1 || f.Line == 0 || !strings.Contains(f.Msg, "0 bytes past the end of buffer x") {
		t.Fatalf("fault located at CTA %v thread %v line %d (%s): element 200, the first past x's end, is in CTA 1", f.CTA, f.Thread, f.Line, f.Msg)
	}
	t.Logf("reported: %v", err)
}

func TestParseErrorsNameTheLine(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"unknown opcode", "frobnicate.b32 %r1, %r2;", "frobnicate.b32 is not simulated"},
		{"undeclared register", "mov.u32 %q1, 0;", "%q1 is not a declared register"},
		{"missing label", "bra $L_nowhere;", "label $L_nowhere is not defined"},
		{"bad guard", "@%r1 mov.u32 %r2, 0;", "guard %r1 is not a declared .pred"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ptxsim.Parse(kernelPTX("bad", "", "\n\t"+c.body))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "line 15 ") {
				t.Fatalf("error %v, want one naming line 15 and %q", err, c.want)
			}
		})
	}
}
