package ptxsim_test

import (
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
)

// tmaPTX copies one box of a 2-D f32 tensor into shared memory with
// cp.async.bulk.tensor (thread 0, completing on an mbarrier whose
// transactions it expects), waits on the mbarrier in every thread, then
// copies the box's bytes as they lie in shared memory to y.
func tmaPTX() string {
	return strings.NewReplacer(".version 7.8", ".version 8.0", ".target sm_80", ".target sm_90a").Replace(kernelPTX("tma",
		".param .align 64 .b8 tmap[128], .param .u64 y, .param .s32 c0, .param .s32 c1, .param .u32 bytes", `
	.shared .align 1024 .b8 tile[8192];
	.shared .align 8 .b8 bar[8];
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, tile;
	mov.u32 %r2, bar;
	ld.param.s32 %r3, [c0];
	ld.param.s32 %r4, [c1];
	ld.param.u32 %r5, [bytes];
	setp.eq.u32 %p1, %r0, 0;
	@%p1 mbarrier.init.shared::cta.b64 [%r2], 1;
	bar.sync 0;
	mov.b64 %rd1, tmap;
	cvta.param.u64 %rd2, %rd1;
	@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], %r5;
	@%p1 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1], [%rd2, {%r3, %r4}], [%r2];
$L_wait:
	mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;
	@!%p2 bra.uni $L_wait;
	ld.param.u64 %rd3, [y];
	shl.b32 %r6, %r0, 2;
$L_copy:
	setp.ge.u32 %p3, %r6, %r5;
	@%p3 bra.uni $L_done;
	add.u32 %r7, %r1, %r6;
	ld.shared.b32 %r8, [%r7];
	cvt.u64.u32 %rd4, %r6;
	add.s64 %rd5, %rd3, %rd4;
	st.global.b32 [%rd5], %r8;
	add.u32 %r6, %r6, 512;
	bra.uni $L_copy;
$L_done:`))
}

// TestTensorCopy: the simulator's TMA against a float64-free reference
// built here element by element: the box at the origin, zeros outside the
// tensor, each element at the shared address of its box row and column
// with the swizzle applied as codegen's K-major wgmma tiles lay theirs out
// (smemTile.addr: byte 16·((c/4) ^ phase(r)) + 4·(c%4) of row r, phase
// r%8 for the 128-byte swizzle, (r/2)%4 for the 64-byte one with its
// 64-byte rows), which the H200 reads correctly through wgmma descriptors.
func TestTensorCopy(t *testing.T) {
	for _, c := range []struct {
		name                string
		cols, rows, pitch   int // the tensor: rows of cols floats, pitch floats apart
		box0, box1, swizzle int
		c0, c1              int32
	}{
		{name: "inside, no swizzle", cols: 10, rows: 6, pitch: 12, box0: 8, box1: 4, c0: 1, c1: 1},
		{name: "past the right and bottom edges", cols: 10, rows: 6, pitch: 12, box0: 8, box1: 4, c0: 4, c1: 3},
		{name: "before the left and top edges", cols: 10, rows: 6, pitch: 12, box0: 8, box1: 4, c0: -2, c1: -1},
		{name: "128-byte swizzle, rows of 128 bytes, a corner outside", cols: 40, rows: 20, pitch: 40, box0: 32, box1: 16, swizzle: 128, c0: 16, c1: 9},
		{name: "128-byte swizzle inside", cols: 64, rows: 32, pitch: 68, box0: 32, box1: 32, swizzle: 128, c0: 32, c1: 0},
		{name: "64-byte swizzle", cols: 16, rows: 8, pitch: 16, box0: 16, box1: 8, swizzle: 64},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := make([]float32, c.rows*c.pitch)
			for i := range x {
				x[i] = float32(i + 1)
			}
			mem := ptxsim.NewMemory()
			xa, err := mem.AllocCopy("x", x)
			if err != nil {
				t.Fatal(err)
			}
			bytes := c.box0 * c.box1 * 4
			ya := mem.Alloc("y", bytes)
			tm, err := ptxsim.EncodeTensorMap(ptxsim.TensorMap{Addr: xa, ElemBytes: 4, Dims: []uint64{uint64(c.cols), uint64(c.rows)},
				Strides: []uint64{uint64(4 * c.pitch)}, Box: []uint32{uint32(c.box0), uint32(c.box1)}, Swizzle: c.swizzle})
			if err != nil {
				t.Fatal(err)
			}
			mod, err := ptxsim.Parse(tmaPTX())
			if err != nil {
				t.Fatal(err)
			}
			if err := mod.Launch("tma", ptxsim.Config{Block: [3]int{128}, Racecheck: true, Initcheck: true, MaxSteps: 1 << 22},
				mem, tm, ya, c.c0, c.c1, uint32(bytes)); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, bytes/4)
			if err := mem.Read(ya, got); err != nil {
				t.Fatal(err)
			}
			rowBytes := 4 * c.box0
			for r := range c.box1 {
				for col := range c.box0 {
					gr, gc := int(c.c1)+r, int(c.c0)+col
					want := float32(0)
					if gr >= 0 && gr < c.rows && gc >= 0 && gc < c.cols {
						want = x[gr*c.pitch+gc]
					}
					// the byte offset codegen's swizzled tile gives (r, col)
					off := r*rowBytes + 4*col
					if c.swizzle != 0 {
						line, in := off/128, off%128 // 128-byte lines: rows r of 128 bytes, or pairs of 64-byte rows
						phase := line % (c.swizzle / 16)
						off = line*128 + 16*((in/16)^phase) + in%16
					}
					if got[off/4] != want {
						t.Fatalf("box (%d, %d) at shared byte %d: %v, want %v", r, col, off, got[off/4], want)
					}
				}
			}
		})
	}
}

// TestTensorCopyFaults: what the simulator reports of a tensor copy that
// cannot be right.
func TestTensorCopyFaults(t *testing.T) {
	mem := ptxsim.NewMemory()
	x := make([]float32, 64)
	xa, _ := mem.AllocCopy("x", x)
	ya := mem.Alloc("y", 4096)
	good := ptxsim.TensorMap{Addr: xa, ElemBytes: 4, Dims: []uint64{8, 8}, Strides: []uint64{32}, Box: []uint32{8, 8}}
	for _, c := range []struct {
		name string
		m    func() ([]byte, error)
		want string
	}{
		{"no tensor map in the parameter", func() ([]byte, error) { return make([]byte, 128), nil }, "no tensor map"},
		{"a tensor larger than its buffer", func() ([]byte, error) {
			m := good
			m.Dims = []uint64{8, 9}
			return ptxsim.EncodeTensorMap(m)
		}, "cp.async.bulk.tensor reads"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tm, err := c.m()
			if err != nil {
				t.Fatal(err)
			}
			f := mustFault(t, tmaPTX(), "tma", ptxsim.Config{Block: [3]int{128}, MaxSteps: 1 << 20}, mem, tm, ya, int32(0), int32(1), uint32(256))
			if f.Kind != "memcheck" || !strings.Contains(f.Msg, c.want) || !strings.Contains(f.Instr, "cp.async.bulk.tensor") {
				t.Fatalf("%v: want a memcheck fault %q at the tensor copy", f, c.want)
			}
		})
	}
	// maps cuTensorMapEncodeTiled would refuse are refused when encoded
	for _, m := range []ptxsim.TensorMap{
		{Addr: xa, ElemBytes: 4, Dims: []uint64{8, 8}, Strides: []uint64{36}, Box: []uint32{8, 8}},                  // stride not a multiple of 16
		{Addr: xa, ElemBytes: 4, Dims: []uint64{64, 8}, Strides: []uint64{256}, Box: []uint32{64, 8}, Swizzle: 128}, // rows of 256 bytes
		{Addr: xa + 4, ElemBytes: 4, Dims: []uint64{8, 8}, Strides: []uint64{32}, Box: []uint32{8, 8}},              // unaligned
		{Addr: xa, ElemBytes: 4, Dims: []uint64{8, 8}, Strides: []uint64{32}, Box: []uint32{8, 300}},                // box past 256
	} {
		if _, err := ptxsim.EncodeTensorMap(m); err == nil {
			t.Errorf("%+v: encoded", m)
		}
	}
}
