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

// The canonical GMMA shared-memory layouts as CUTLASS's make_gmma_desc
// states them (cute/atom/mma_traits_sm90_gmma.hpp), in CuTe notation,
// evaluated here generically, independently of the simulator's formulas:
//
//	Major-K  INTERLEAVE: Swizzle<0,4,3> o ((8,m),(T,2)):((1T,SBO),(1,LBO))
//	Major-K  B32/B64/B128: Swizzle<1|2|3,4,3> o ((8,m),(T,2)):((2T|4T|8T,SBO),(1,T))
//	Major-MN INTERLEAVE: Swizzle<0,4,3> o ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))
//	Major-MN B32/B64/B128: Swizzle<1|2|3,4,3> o ((T,2|4|8,m),(8,k)):((1,T,LBO),(2T|4T|8T,SBO))
//
// Element strides are in elements (e bytes), SBO and LBO in bytes; the
// swizzle acts on the byte address.
type mode struct {
	shape  []int
	stride []int64 // elements, or bytes where isByte
	bytes  []bool
}

// offset evaluates a coordinate colexicographically over a mode.
func (md mode) offset(c int, e int64) int64 {
	var off int64
	for i, s := range md.shape {
		x := int64(c % s)
		c /= s
		if md.bytes[i] {
			off += x * md.stride[i]
		} else {
			off += x * md.stride[i] * e
		}
	}
	return off
}

func swizzleBits(a int64, b int) int64 {
	yyy := int64((1<<b)-1) << 7
	return a ^ (a&yyy)>>3
}

// gmmaLayout gives the byte address (before the start) of element (r, k).
func gmmaLayout(kMajor bool, width int, e, rows, sbo, lbo int64) func(r, k int) int64 {
	T := int(16 / e)
	var rm, km mode
	switch {
	case kMajor && width == 0:
		rm = mode{[]int{8, int(rows) / 8}, []int64{int64(T), sbo}, []bool{false, true}}
		km = mode{[]int{T, 2}, []int64{1, lbo}, []bool{false, true}}
	case kMajor:
		c := width / 16
		rm = mode{[]int{8, int(rows) / 8}, []int64{int64(c * T), sbo}, []bool{false, true}}
		km = mode{[]int{T, 2}, []int64{1, int64(T)}, []bool{false, false}}
	case width == 0:
		rm = mode{[]int{T, 1, int(rows) / T}, []int64{1, int64(T), sbo}, []bool{false, false, true}}
		km = mode{[]int{8, 2}, []int64{int64(T), lbo}, []bool{false, true}}
	default:
		c := width / 16
		rm = mode{[]int{T, c, max(1, int(rows)/(T*c))}, []int64{1, int64(T), lbo}, []bool{false, false, true}}
		km = mode{[]int{8, 2}, []int64{int64(c * T), sbo}, []bool{false, true}}
	}
	return func(r, k int) int64 { return rm.offset(r, e) + km.offset(k, e) }
}

type wgCase struct {
	name    string
	typ     string // tf32, bf16, f16
	n       int
	aMajorK bool
	bMajorK bool
	aWidth  int
	bWidth  int
	aRegs   bool
	f16Acc  bool
}

func TestWgmma(t *testing.T) {
	cases := []wgCase{
		{"tf32/K-major/none", "tf32", 16, true, true, 0, 0, false, false},
		{"tf32/K-major/32B", "tf32", 16, true, true, 32, 32, false, false},
		{"tf32/K-major/64B", "tf32", 24, true, true, 64, 64, false, false},
		{"tf32/K-major/128B", "tf32", 32, true, true, 128, 128, false, false},
		{"bf16/K-major/128B", "bf16", 64, true, true, 128, 128, false, false},
		{"bf16/K-major/none", "bf16", 8, true, true, 0, 0, false, false},
		{"bf16/MN-major/128B", "bf16", 64, false, false, 128, 128, false, false},
		{"bf16/MN-major/128B/N=128", "bf16", 128, false, false, 128, 128, false, false},
		{"bf16/MN-major/64B+none", "bf16", 32, false, false, 64, 0, false, false},
		{"bf16/A-K-32B/B-MN-32B", "bf16", 16, true, false, 32, 32, false, false},
		{"bf16/A-registers/B-MN-128B", "bf16", 64, true, false, 0, 128, true, false},
		{"tf32/A-registers/B-K-128B", "tf32", 16, true, true, 0, 128, true, false},
		{"f16/f16-accumulator/K-128B", "f16", 32, true, true, 128, 128, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runWgmma(t, c) })
	}
	// the PTX ISA leaves undefined an access to a wgmma's accumulators or A
	// registers before the wgmma.wait_group that retires it, and a register
	// a wgmma takes that was written after the last wgmma.fence: faults of
	// kind "wgmma", located at the offending instruction
	for _, h := range []struct {
		name  string
		c     wgCase
		edit  func(string) string
		instr string
	}{
		{"accumulator_read_before_wait", cases[4], func(s string) string {
			return strings.Replace(s, "wgmma.wait_group.sync.aligned 0;", "", 1)
		}, "st.global.f32"},
		{"A_register_written_in_flight", cases[11], func(s string) string {
			return strings.Replace(s, "\twgmma.commit_group.sync.aligned;\n", "\twgmma.commit_group.sync.aligned;\n\tmov.u32 %r31, 0;\n", 1)
		}, "mov.u32 %r31, 0"},
		{"A_register_read_in_flight", cases[11], func(s string) string {
			return strings.Replace(s, "\twgmma.commit_group.sync.aligned;\n", "\twgmma.commit_group.sync.aligned;\n\tadd.u32 %r50, %r32, 1;\n", 1)
		}, "add.u32 %r50, %r32, 1"},
		{"no_fence_after_writing_A", cases[11], func(s string) string {
			return strings.Replace(s, "\twgmma.fence.sync.aligned;\n", "", 1)
		}, "wgmma.mma_async"},
		{"fence_before_the_write", cases[11], func(s string) string {
			return strings.Replace(s, "\twgmma.fence.sync.aligned;\n", "\twgmma.fence.sync.aligned;\n\tmov.u32 %r33, %r33;\n", 1)
		}, "wgmma.mma_async"},
		// and shared memory that a wgmma in flight reads must not change
		// before a wgmma.wait_group retires it (each thread its own word
		// of B: no race between warps)
		{"B_written_in_flight", cases[3], func(s string) string {
			return strings.Replace(s, "\twgmma.commit_group.sync.aligned;\n", "\twgmma.commit_group.sync.aligned;\n\tmov.u32 %r60, 2139095039;\n\tmad.lo.u32 %r46, %r1, 4, %r3;\n\tst.shared.b32 [%r46], %r60;\n", 1)
		}, "st.shared.b32 [%r46]"},
	} {
		t.Run(h.name, func(t *testing.T) {
			err := runWgmmaEdit(t, h.c, h.edit)
			var f *ptxsim.Fault
			if !errors.As(err, &f) || f.Kind != "wgmma" || !strings.Contains(f.Instr, h.instr) {
				t.Fatalf("got %v, want a wgmma fault at %q", err, h.instr)
			}
		})
	}
}

func runWgmma(t *testing.T, c wgCase) {
	if err := runWgmmaEdit(t, c, nil); err != nil {
		t.Fatal(err)
	}
}

// runWgmmaEdit runs the case's kernel, edited by edit when it is not nil,
// and checks its result; it returns the launch's error.
func runWgmmaEdit(t *testing.T, c wgCase, edit func(string) string) error {
	const M = 64
	e := int64(2)
	K := 16
	if c.typ == "tf32" {
		e, K = 4, 8
	}
	N := c.n
	rng := rand.New(rand.NewPCG(uint64(N), uint64(c.aWidth+2*c.bWidth)))
	A, abits := make([]float64, M*K), make([]uint64, M*K)
	B, bbits := make([]float64, K*N), make([]uint64, K*N)
	for i := range A {
		A[i], abits[i] = quantise(c.typ, rng.Float64()*2-1)
	}
	for i := range B {
		B[i], bbits[i] = quantise(c.typ, rng.Float64()*2-1)
	}
	// canonical strides for a packed tile
	strides := func(kMajor bool, width int, rows int64) (sbo, lbo int64) {
		T := 16 / e
		switch {
		case kMajor && width == 0:
			return 128, rows / 8 * 128
		case kMajor:
			return 8 * int64(width), 16
		case width == 0:
			return 128, rows / T * 128
		}
		perRow := int64(width) / e
		return max(1, rows/perRow) * 8 * int64(width), 8 * int64(width)
	}
	place := func(img []byte, bits []uint64, rows, cols int, kMajor bool, width int, at func(r, k int) uint64) {
		sbo, lbo := strides(kMajor, width, int64(rows))
		lay := gmmaLayout(kMajor, width, e, int64(rows), sbo, lbo)
		used := map[int64]bool{}
		for r := 0; r < rows; r++ {
			for k := 0; k < K; k++ {
				a := lay(r, k)
				b := swizzleBits(a, map[int]int{0: 0, 32: 1, 64: 2, 128: 3}[width])
				if used[b] || int(b)+int(e) > len(img) {
					t.Fatalf("the test's layout puts (%d,%d) at %d, taken or outside %d bytes", r, k, b, len(img))
				}
				used[b] = true
				putBits(img[b:], e, at(r, k))
			}
		}
	}
	const region = 8192
	aImg, bImg := make([]byte, region), make([]byte, region)
	place(aImg, abits, M, K, c.aMajorK, c.aWidth, func(r, k int) uint64 { return abits[r*K+k] })
	place(bImg, bbits, N, K, c.bMajorK, c.bWidth, func(n, k int) uint64 { return bbits[k*N+n] })
	desc := func(kMajor bool, width int, rows int64) uint64 {
		sbo, lbo := strides(kMajor, width, rows)
		sw := map[int]uint64{0: 0, 128: 1, 64: 2, 32: 3}[width]
		return uint64(lbo>>4)<<16 | uint64(sbo>>4)<<32 | sw<<62
	}
	src := wgmmaPTX(c, N, K, desc(c.aMajorK, c.aWidth, M), desc(c.bMajorK, c.bWidth, int64(N)))
	if edit != nil {
		src = edit(src)
	}
	mod, err := ptxsim.Parse(src)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	mem := ptxsim.NewMemory()
	aa, _ := mem.AllocCopy("aimg", aImg)
	ba, _ := mem.AllocCopy("bimg", bImg)
	// A's register fragments, lane-major: 4 registers per thread of each warp
	afrag := make([]uint32, 128*4)
	for tid := 0; tid < 128; tid++ {
		w, l := tid/32, tid%32
		g, tg := l>>2, l%4
		for r := 0; r < 4; r++ {
			if c.typ == "tf32" { // a0 (g,t) a1 (g+8,t) a2 (g,t+4) a3 (g+8,t+4)
				row, col := 16*w+g+8*(r%2), tg+4*(r/2)
				afrag[tid*4+r] = uint32(abits[row*K+col])
				continue
			}
			for h := 0; h < 2; h++ { // a_{2r+h}: row g (+8 for r odd), col 2t+h (+8 for r >= 2)
				row, col := 16*w+g+8*(r%2), 2*tg+h+8*(r/2)
				afrag[tid*4+r] |= uint32(abits[row*K+col]) << (16 * h)
			}
		}
	}
	fa, _ := mem.AllocCopy("afrag", afrag)
	da := mem.Alloc("d", M*N*4)
	if err := mod.Launch("wg", ptxsim.Config{Block: [3]int{128}, Racecheck: true, Initcheck: true}, mem, aa, ba, fa, da); err != nil {
		return err
	}
	D := make([]float32, M*N)
	mem.Read(da, D)
	for i := 0; i < M; i++ {
		for j := 0; j < N; j++ {
			want := 0.0
			for k := 0; k < K; k++ {
				want += A[i*K+k] * B[k*N+j]
			}
			want *= 2 // two chained wgmmas: A·B, then + A·B
			tol := 1e-5 * (1 + math.Abs(want))
			if c.f16Acc {
				tol = 4e-3 * (1 + math.Abs(want))
			}
			if got := float64(D[i*N+j]); math.Abs(got-want) > tol {
				t.Fatalf("D[%d][%d] = %v, want %v", i, j, got, want)
			}
		}
	}
	return nil
}

func putBits(b []byte, n int64, v uint64) {
	for i := int64(0); i < n; i++ {
		b[i] = byte(v >> (8 * i))
	}
}

// wgmmaPTX: 128 threads copy the two operand images into shared memory,
// build the descriptors from the regions' addresses, run two chained
// wgmmas (D = A·B, then D += A·B) in one group, wait, and store D
// row-major by the accumulator layout (converted to f32 where it is f16).
func wgmmaPTX(c wgCase, N, K int, descA, descB uint64) string {
	typ := c.typ
	dt := "f32"
	nd := N / 2
	if c.f16Acc {
		dt, nd = "f16", N/4
	}
	var dregs []string
	for i := 0; i < nd; i++ {
		dregs = append(dregs, fmt.Sprintf("%%d%d", i))
	}
	dv := "{" + strings.Join(dregs, ", ") + "}"
	aop := "%rd20"
	if c.aRegs {
		aop = "{%r30, %r31, %r32, %r33}"
	}
	trans := ""
	if typ != "tf32" {
		if !c.aRegs {
			trans = fmt.Sprintf(", %d", map[bool]int{true: 0, false: 1}[c.aMajorK])
		}
		trans += fmt.Sprintf(", %d", map[bool]int{true: 0, false: 1}[c.bMajorK])
	}
	mma := func(scale string) string {
		return fmt.Sprintf("\twgmma.mma_async.sync.aligned.m64n%dk%d.%s.%s.%s %s, %s, %%rd21, %s, 1, 1%s;\n", N, K, dt, typ, typ, dv, aop, scale, trans)
	}
	var store strings.Builder
	for i := 0; i < nd; i++ {
		per := 1
		if c.f16Acc {
			per = 2
		}
		for h := 0; h < per; h++ {
			j := i*per + h
			// row 16w + g + 8(j/2%2), column 8(j/4) + 2t + j%2
			fmt.Fprintf(&store, "\tadd.u32 %%r41, %%r40, %d;\n\tmad.lo.u32 %%r42, %%r41, %d, %%r43;\n\tadd.u32 %%r42, %%r42, %d;\n\tmul.wide.u32 %%rd31, %%r42, 4;\n\tadd.s64 %%rd32, %%rd30, %%rd31;\n",
				8*(j/2%2), N, 8*(j/4)+j%2)
			if c.f16Acc {
				fmt.Fprintf(&store, "\tmov.b32 {%%h1, %%h2}, %%d%d;\n\tcvt.f32.f16 %%f1, %%h%d;\n\tst.global.f32 [%%rd32], %%f1;\n", i, h+1)
			} else {
				fmt.Fprintf(&store, "\tst.global.f32 [%%rd32], %%d%d;\n", i)
			}
		}
	}
	dtype := ".f32"
	if c.f16Acc {
		dtype = ".b32"
	}
	return fmt.Sprintf(`.version 8.0
.target sm_90a
.address_size 64

.visible .entry wg(.param .u64 aimg, .param .u64 bimg, .param .u64 afrag, .param .u64 d)
.maxntid 128, 1, 1
{
	.reg .pred %%p<4>;
	.reg .b16 %%h<4>;
	.reg .b32 %%r<64>;
	.reg .b64 %%rd<40>;
	.reg .f32 %%f<4>;
	.reg %s %%d<%d>;
	.shared .align 1024 .b8 As[8192];
	.shared .align 1024 .b8 Bs[8192];
	mov.u32 %%r1, %%tid.x;
	ld.param.u64 %%rd1, [aimg];
	ld.param.u64 %%rd2, [bimg];
	mov.u32 %%r2, As;
	mov.u32 %%r3, Bs;
	mov.u32 %%r4, %%r1;
$L_copy:
	mul.wide.u32 %%rd3, %%r4, 16;
	add.s64 %%rd4, %%rd1, %%rd3;
	add.s64 %%rd5, %%rd2, %%rd3;
	ld.global.v4.b32 {%%r10, %%r11, %%r12, %%r13}, [%%rd4];
	ld.global.v4.b32 {%%r14, %%r15, %%r16, %%r17}, [%%rd5];
	mad.lo.u32 %%r5, %%r4, 16, %%r2;
	mad.lo.u32 %%r6, %%r4, 16, %%r3;
	st.shared.v4.b32 [%%r5], {%%r10, %%r11, %%r12, %%r13};
	st.shared.v4.b32 [%%r6], {%%r14, %%r15, %%r16, %%r17};
	add.u32 %%r4, %%r4, 128;
	setp.lt.u32 %%p1, %%r4, 512;
	@%%p1 bra.uni $L_copy;
	bar.sync 0;
	fence.proxy.async.shared::cta;
	cvt.u64.u32 %%rd10, %%r2;
	shr.u64 %%rd10, %%rd10, 4;
	and.b64 %%rd10, %%rd10, 16383;
	or.b64 %%rd20, %%rd10, %d;
	cvt.u64.u32 %%rd11, %%r3;
	shr.u64 %%rd11, %%rd11, 4;
	and.b64 %%rd11, %%rd11, 16383;
	or.b64 %%rd21, %%rd11, %d;
	ld.param.u64 %%rd12, [afrag];
	mul.wide.u32 %%rd13, %%r1, 16;
	add.s64 %%rd14, %%rd12, %%rd13;
	ld.global.v4.b32 {%%r30, %%r31, %%r32, %%r33}, [%%rd14];
	setp.ne.u32 %%p2, %%r1, %%r1;
	setp.eq.u32 %%p3, %%r1, %%r1;
	wgmma.fence.sync.aligned;
%s%s	wgmma.commit_group.sync.aligned;
	wgmma.wait_group.sync.aligned 0;
	shr.u32 %%r40, %%r1, 5;
	mul.lo.u32 %%r40, %%r40, 16;
	and.b32 %%r44, %%r1, 31;
	shr.u32 %%r45, %%r44, 2;
	add.u32 %%r40, %%r40, %%r45;
	and.b32 %%r43, %%r44, 3;
	shl.b32 %%r43, %%r43, 1;
	ld.param.u64 %%rd30, [d];
%s	ret;
}
`, dtype, nd, int64(descA), int64(descB), mma("%p2"), mma("%p3"), store.String())
}
