package ptxsim_test

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
)

// tmaStorePTX loads a box of x into shared memory by a tensor copy (thread
// 0, an mbarrier) and stores it back to y at another origin by a tensor
// store (thread 0, a bulk group), with the same swizzle both ways; early
// and late are lines placed after the store's commit and after its
// wait_group.read.
func tmaStorePTX(early, late string) string {
	return strings.NewReplacer(".version 7.8", ".version 8.0", ".target sm_80", ".target sm_90a").Replace(kernelPTX("tmastore",
		".param .align 64 .b8 tmx[128], .param .align 64 .b8 tmy[128], .param .s32 c0, .param .s32 c1, .param .s32 d0, .param .s32 d1, .param .u32 bytes", `
	.shared .align 1024 .b8 tile[8192];
	.shared .align 8 .b8 bar[8];
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, tile;
	mov.u32 %r2, bar;
	ld.param.s32 %r3, [c0];
	ld.param.s32 %r4, [c1];
	ld.param.s32 %r9, [d0];
	ld.param.s32 %r10, [d1];
	ld.param.u32 %r5, [bytes];
	setp.eq.u32 %p1, %r0, 0;
	@%p1 mbarrier.init.shared::cta.b64 [%r2], 1;
	bar.sync 0;
	mov.b64 %rd1, tmx;
	cvta.param.u64 %rd2, %rd1;
	mov.b64 %rd3, tmy;
	cvta.param.u64 %rd4, %rd3;
	@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], %r5;
	@%p1 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1], [%rd2, {%r3, %r4}], [%r2];
$L_wait:
	mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;
	@!%p2 bra.uni $L_wait;
	@%p1 cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd4, {%r9, %r10}], [%r1];
	@%p1 cp.async.bulk.commit_group;
	`+early+`
	@%p1 cp.async.bulk.wait_group.read 0;
	`+late))
}

// TestTensorStore: a box loaded by a tensor copy and stored by a tensor
// store with the same swizzle lands in y as it was in x (the store undoes
// the copy's layout), zeros where the box was outside x, and nothing
// outside y's tensor or the box is written (y's other elements keep their
// NaN); a write to the store's source before its wait_group.read is a
// Fault, after it none.
func TestTensorStore(t *testing.T) {
	for _, c := range []struct {
		name                string
		cols, rows          int // both tensors: rows of cols floats
		box0, box1, swizzle int
		c0, c1, d0, d1      int32
		early, late         string
		fault               string
	}{
		{name: "inside, no swizzle", cols: 16, rows: 8, box0: 8, box1: 4, c0: 4, c1: 2, d0: 0, d1: 3},
		{name: "128-byte swizzle", cols: 64, rows: 40, box0: 32, box1: 16, swizzle: 128, c0: 32, c1: 8, d0: 0, d1: 20},
		{name: "past y's edges and x's", cols: 40, rows: 20, box0: 32, box1: 16, swizzle: 128, c0: 16, c1: 9, d0: 20, d1: -4},
		{name: "64-byte swizzle", cols: 16, rows: 16, box0: 16, box1: 8, swizzle: 64, c0: 0, c1: 0, d0: 0, d1: 8},
		{name: "the source written before the wait", cols: 16, rows: 8, box0: 8, box1: 4, early: "@%p1 st.shared.b32 [%r1+16], %r0;", fault: "tensor store"},
		{name: "the source written after the wait", cols: 16, rows: 8, box0: 8, box1: 4, late: "@%p1 st.shared.b32 [%r1+16], %r0;"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := ptxsim.NewMemory()
			x := make([]float32, c.rows*c.cols)
			for i := range x {
				x[i] = float32(i + 1)
			}
			y := make([]float32, c.rows*c.cols)
			for i := range y {
				y[i] = float32(math.NaN())
			}
			xa, err := mem.AllocCopy("x", x)
			if err != nil {
				t.Fatal(err)
			}
			ya, err := mem.AllocCopy("y", y)
			if err != nil {
				t.Fatal(err)
			}
			tmap := func(addr uint64) []byte {
				b, err := ptxsim.EncodeTensorMap(ptxsim.TensorMap{Addr: addr, ElemBytes: 4, Dims: []uint64{uint64(c.cols), uint64(c.rows)},
					Strides: []uint64{uint64(4 * c.cols)}, Box: []uint32{uint32(c.box0), uint32(c.box1)}, Swizzle: c.swizzle})
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			src := tmaStorePTX(c.early, c.late)
			args := []any{tmap(xa), tmap(ya), c.c0, c.c1, c.d0, c.d1, uint32(4 * c.box0 * c.box1)}
			cfg := ptxsim.Config{Block: [3]int{128}, Racecheck: true, MaxSteps: 1 << 22}
			if c.fault != "" {
				f := mustFault(t, src, "tmastore", cfg, mem, args...)
				if f.Kind != "async" || !strings.Contains(f.Msg, c.fault) {
					t.Fatalf("%v: want an async fault about the %s", f, c.fault)
				}
				return
			}
			mod, err := ptxsim.Parse(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := mod.Launch("tmastore", cfg, mem, args...); err != nil {
				t.Fatal(err)
			}
			if err := mem.Read(ya, y); err != nil {
				t.Fatal(err)
			}
			for r := range c.rows {
				for col := range c.cols {
					got := y[r*c.cols+col]
					br, bc := r-int(c.d1), col-int(c.d0) // y's element in the box
					if br < 0 || br >= c.box1 || bc < 0 || bc >= c.box0 {
						if !math.IsNaN(float64(got)) {
							t.Fatalf("y[%d][%d] = %v outside the box: written", r, col, got)
						}
						continue
					}
					xr, xc := int(c.c1)+br, int(c.c0)+bc
					want := float32(0)
					if xr >= 0 && xr < c.rows && xc >= 0 && xc < c.cols {
						want = x[xr*c.cols+xc]
					}
					if got != want {
						t.Fatalf("y[%d][%d] = %v, want %v (box element %d, %d)", r, col, got, want, br, bc)
					}
				}
			}
		})
	}
}

// TestBulkStore: cp.async.bulk.global.shared::cta.bulk_group writes its
// shared bytes to global memory when its group retires (wait_group.read);
// a write to its source before that, a size or an address not a multiple
// of 16, and a destination past its buffer are faults.
func TestBulkStore(t *testing.T) {
	src := func(size, dstOff int, early string) string {
		return strings.NewReplacer(".version 7.8", ".version 8.0", ".target sm_80", ".target sm_90a").Replace(kernelPTX("bulkstore", ".param .u64 y", `
	.shared .align 16 .b8 buf[64];
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, buf;
	mul.lo.u32 %r2, %r0, 4;
	add.u32 %r3, %r1, %r2;
	add.u32 %r4, %r0, 100;
	st.shared.u32 [%r3], %r4;
	fence.proxy.async.shared::cta;
	bar.sync 0;
	ld.param.u64 %rd1, [y];
	add.s64 %rd2, %rd1, `+itoa(dstOff)+`;
	setp.eq.u32 %p1, %r0, 0;
	mov.u32 %r5, `+itoa(size)+`;
	@%p1 cp.async.bulk.global.shared::cta.bulk_group [%rd2], [%r1+16], %r5;
	@%p1 cp.async.bulk.commit_group;
	`+early+`
	@%p1 cp.async.bulk.wait_group.read 0;`))
	}
	run := func(size, dstOff int, early string) (*ptxsim.Fault, []uint32) {
		mem := ptxsim.NewMemory()
		ya, _ := mem.AllocCopy("y", make([]uint32, 12))
		mod, err := ptxsim.Parse(src(size, dstOff, early))
		if err != nil {
			t.Fatal(err)
		}
		err = mod.Launch("bulkstore", ptxsim.Config{Block: [3]int{16}}, mem, ya)
		got := make([]uint32, 12)
		mem.Read(ya, got)
		if err == nil {
			return nil, got
		}
		f, ok := err.(*ptxsim.Fault)
		if !ok {
			t.Fatalf("not a fault: %v", err)
		}
		t.Logf("reported: %v", err)
		return f, got
	}
	if f, got := run(32, 16, ""); f != nil {
		t.Fatal(f)
	} else if want := []uint32{0, 0, 0, 0, 104, 105, 106, 107, 108, 109, 110, 111}; !slices.Equal(got, want) {
		t.Fatalf("y %v, want %v", got, want)
	}
	for _, c := range []struct {
		name         string
		size, dstOff int
		early        string
		kind         string
	}{
		{"size 24", 24, 16, "", "memcheck"},
		{"destination 8 bytes in", 32, 8, "", "memcheck"},
		{"past y's end", 32, 32, "", "memcheck"},
		{"the source rewritten before the wait", 32, 16, "@%p1 st.shared.u32 [%r1+20], %r0;", "async"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, _ := run(c.size, c.dstOff, c.early)
			if f == nil || f.Kind != c.kind {
				t.Fatalf("fault %v, want one of kind %s", f, c.kind)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
