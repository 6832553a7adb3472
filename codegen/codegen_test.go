package codegen

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/kernels"
)

func build(t *testing.T, f func(tile.Meta) (*tile.Kernel, error), m tile.Meta) *tile.Kernel {
	t.Helper()
	k, err := f(m)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// all16 says every parameter is divisible by 16 (pointers 16-byte aligned).
func all16(k *tile.Kernel) []int {
	s := make([]int, len(k.Params))
	for i := range s {
		s[i] = 16
	}
	return s
}

func count(re, text string) int { return len(regexp.MustCompile(re).FindAllString(text, -1)) }

// TestVectorAccesses: 128-bit loads and stores where contiguity and
// alignment are known, scalar ones where they are not.
func TestVectorAccesses(t *testing.T) {
	va := build(t, kernels.VecAdd, tile.Meta{"BLOCK": 1024})
	sm := build(t, kernels.Softmax, tile.Meta{"BLOCK": 1024})
	cases := []struct {
		name           string
		k              *tile.Kernel
		spec           []int
		v4Loads, v4Sts int
		scalarLoads    int
	}{
		// 1024 elements, 128 threads: 8 per thread, two 16-byte runs
		{"vec_add aligned, n%16==0", va, all16(va), 4, 2, 0},
		{"vec_add, n unknown: masks may split a vector", va, []int{16, 16, 16, 1}, 0, 0, 16},
		{"vec_add, pointers unaligned", va, []int{4, 4, 4, 16}, 0, 0, 16},
		{"softmax, row stride 16k", sm, all16(sm), 2, 2, 0},
		{"softmax, row stride 781", sm, []int{16, 16, 16, 1}, 0, 0, 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ck, err := Compile(c.k, Options{Spec: c.spec})
			if err != nil {
				t.Fatal(err)
			}
			p := ck.PTX
			if n := count(`ld\.global\.v4\.f32`, p); n != c.v4Loads {
				t.Errorf("%d ld.global.v4.f32, want %d", n, c.v4Loads)
			}
			if n := count(`st\.global\.v4\.f32`, p); n != c.v4Sts {
				t.Errorf("%d st.global.v4.f32, want %d", n, c.v4Sts)
			}
			if n := count(`ld\.global\.f32`, p); n != c.scalarLoads {
				t.Errorf("%d scalar ld.global.f32, want %d", n, c.scalarLoads)
			}
		})
	}
}

func TestPTXHeaderAndTarget(t *testing.T) {
	k := build(t, kernels.VecAdd, tile.Meta{"BLOCK": 256})
	for _, arch := range []int{80, 90} {
		ck, err := Compile(k, Options{Arch: arch, NumWarps: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{".version 7.8\n", ".target sm_" + map[int]string{80: "80", 90: "90"}[arch] + "\n",
			".visible .entry vec_add(", ".param .u64 param_x", ".param .u32 param_n", ".maxntid 64, 1, 1"} {
			if !strings.Contains(ck.PTX, want) {
				t.Errorf("sm_%d: PTX lacks %q", arch, want)
			}
		}
		if ck.Threads() != 64 || ck.SharedBytes != 0 {
			t.Errorf("threads %d, shared %d; want 64, 0", ck.Threads(), ck.SharedBytes)
		}
	}
}

// TestReductionBroadcastIsFree: a row maximum broadcast back over its row
// needs no layout conversion: shared memory only for the cross-warp step,
// one barrier per reduction.
func TestReductionBroadcastIsFree(t *testing.T) {
	for _, c := range []struct {
		name     string
		k        *tile.Kernel
		barriers int
	}{
		{"softmax", build(t, kernels.Softmax, tile.Meta{"BLOCK": 4096}), 2},
		{"softmax_2d", build(t, kernels.Softmax2D, tile.Meta{"BM": 16, "BN": 64}), 0},
		{"layer_norm", build(t, kernels.LayerNorm, tile.Meta{"BLOCK": 1024}), 2},
	} {
		ck, err := Compile(c.k, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if n := count(`bar\.sync`, ck.PTX); n != c.barriers {
			t.Errorf("%s: %d barriers, want %d", c.name, n, c.barriers)
		}
		if n := count(`shfl\.sync\.bfly`, ck.PTX); n == 0 {
			t.Errorf("%s: no warp shuffles", c.name)
		}
	}
}

func TestDeterministic(t *testing.T) {
	k := build(t, kernels.Matmul, tile.Meta{"BM": 32, "BN": 32, "BK": 32})
	a, err := Compile(k, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		b, err := Compile(k, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if a.PTX != b.PTX {
			t.Fatal("two compilations of one kernel gave different PTX (the module cache keys on it)")
		}
	}
}

// TestAnonymousPTX: kernels that differ only in their names have the same
// PTX but for the name, which Anonymous leaves out (compiled modules are
// keyed by it); a kernel that differs otherwise has other anonymous PTX.
func TestAnonymousPTX(t *testing.T) {
	scale := func(name string, block int) *Kernel {
		b := tile.NewBuilder(name, tile.Meta{"BLOCK": block})
		x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
		offs := b.Add(b.Mul(b.ProgramID(0), block), b.Arange(0, block))
		b.Store(b.AddPtr(y, offs), b.Mul(b.Load(b.AddPtr(x, offs), nil, nil), 0.5), nil)
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		c, err := Compile(k, Options{Spec: all16(k)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := scale("fused_3_elementwise", 1024), scale("fused_12_elementwise", 1024)
	if a.PTX == b.PTX || a.Anonymous() != b.Anonymous() {
		t.Fatalf("PTX of kernels named %s and %s: equal %v, anonymous equal %v", a.Name, b.Name, a.PTX == b.PTX, a.Anonymous() == b.Anonymous())
	}
	if strings.Contains(b.Anonymous(), "fused_12") || !strings.Contains(b.Anonymous(), ".visible .entry (") {
		t.Fatalf("the name is still in the anonymous PTX:\n%s", b.Anonymous()[:300])
	}
	c := scale("fused_3_elementwise", 2048)
	if c.Anonymous() == a.Anonymous() {
		t.Fatal("kernels with other blocks have the same anonymous PTX")
	}
	// Hash, the modules' key, is the anonymous PTX's SHA-256, the same
	// when asked again
	for _, k := range []*Kernel{a, b, c} {
		if h := k.Hash(); h != sha256.Sum256([]byte(k.Anonymous())) || k.Hash() != h {
			t.Fatalf("%s: Hash is not the SHA-256 of the anonymous PTX", k.Name)
		}
	}
	if a.Hash() != b.Hash() || a.Hash() == c.Hash() {
		t.Fatalf("hashes: %s and %s equal %v (want true), %s and %s (BLOCK 2048) equal %v (want false)", a.Name, b.Name, a.Hash() == b.Hash(), a.Name, c.Name, a.Hash() == c.Hash())
	}
}

func TestDumpStages(t *testing.T) {
	k := build(t, kernels.Softmax, tile.Meta{"BLOCK": 128})
	dir := t.TempDir()
	if _, err := Compile(k, Options{DumpDir: dir}); err != nil {
		t.Fatal(err)
	}
	env := t.TempDir()
	t.Setenv("TILEFUSE_DUMP", env)
	if _, err := Compile(k, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, env} {
		for ext, want := range map[string]string{
			".tile":   "tt.func @softmax(",
			".axes":   "contig=128 div=1 const=1",
			".plan":   "// result: blocked<shape=[128]",
			".layout": "blocked<shape=[128]",
			".ptx":    ".entry softmax(",
		} {
			b, err := os.ReadFile(filepath.Join(d, "softmax"+ext))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), want) {
				t.Errorf("%s%s lacks %q", d, ext, want)
			}
		}
	}
}

func TestCompileErrors(t *testing.T) {
	k := build(t, kernels.VecAdd, tile.Meta{"BLOCK": 128})
	for _, c := range []struct {
		opt  Options
		want string
	}{
		{Options{NumWarps: 3}, "num_warps 3 is not a power of two"},
		{Options{Arch: 75}, "target sm_75"},
	} {
		if _, err := Compile(k, c.opt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.opt, err, c.want)
		}
	}
	if _, err := Compile(nil, Options{}); err == nil {
		t.Error("nil kernel accepted")
	}
	// every f64 op has a lowering: erf, the longest, compiles
	b := tile.NewBuilder("erf64", nil)
	x := b.Ptr("x", tile.F64)
	r := b.Arange(0, 32)
	b.Store(b.AddPtr(x, r), b.Erf(b.Load(b.AddPtr(x, r), nil, nil)), nil)
	k64, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(k64, Options{}); err != nil {
		t.Errorf("f64 erf: %v", err)
	}
}

// TestTF32UsesTensorCores: a dot with TF32 precision goes through
// mma.sync.m16n8k8 on TF32-rounded operands; IEEE stays on FMAs.
func TestTF32UsesTensorCores(t *testing.T) {
	for _, c := range []struct {
		tf32     int
		mma, fma bool
	}{{0, false, true}, {1, true, false}} {
		k := build(t, kernels.Matmul, tile.Meta{"BM": 64, "BN": 32, "BK": 32, "TF32": c.tf32})
		ck, err := Compile(k, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(ck.PTX, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"); got != c.mma {
			t.Errorf("TF32=%d: mma.sync present = %v", c.tf32, got)
		}
		// A truncated (and.b32), B rounded (cvt.rn on sm_90), as the interpreter
		if got := strings.Contains(ck.PTX, ", 0xffffe000;"); got != c.mma {
			t.Errorf("TF32=%d: and.b32 …, 0xffffe000 present = %v", c.tf32, got)
		}
		if got := strings.Contains(ck.PTX, "cvt.rn.tf32.f32"); got != c.mma {
			t.Errorf("TF32=%d: cvt.rn.tf32 present = %v", c.tf32, got)
		}
		if got := strings.Contains(ck.PTX, "fma.rn.f32"); got != c.fma {
			t.Errorf("TF32=%d: fma.rn.f32 present = %v", c.tf32, got)
		}
	}
}

// TestStreamingHint: a streaming load or store becomes ld/st.global.cs.
func TestStreamingHint(t *testing.T) {
	for _, stream := range []int{0, 1} {
		k := build(t, kernels.Softmax, tile.Meta{"BLOCK": 1024, "STREAM": stream})
		if stream == 1 && !strings.Contains(k.String(), "{cache = streaming}") {
			t.Errorf("the dump does not show the hint:\n%v", k)
		}
		ck, err := Compile(k, Options{Spec: all16(k)})
		if err != nil {
			t.Fatal(err)
		}
		lds, sts := count(`ld\.global\.cs\.v4\.f32`, ck.PTX), count(`st\.global\.cs\.v4\.f32`, ck.PTX)
		if want := 2 * stream; lds != want || sts != want {
			t.Errorf("STREAM=%d: %d ld.global.cs and %d st.global.cs, want %d each", stream, lds, sts, want)
		}
	}
}

// TestBiasLoadTakesConsumerLayout: a [1,N] row loaded for broadcasting over
// a [M,N] tile is loaded in the tile's layout: no conversion through shared
// memory (LayerNorm2D's w and b).
func TestBiasLoadTakesConsumerLayout(t *testing.T) {
	k := build(t, kernels.LayerNorm2D, tile.Meta{"BM": 4, "BN": 1024})
	ck, err := Compile(k, Options{NumWarps: 4})
	if err != nil {
		t.Fatal(err)
	}
	if ck.SharedBytes != 0 || strings.Contains(ck.PTX, "bar.sync") {
		t.Errorf("LayerNorm2D with a warp per row uses %d B of shared memory and barriers; want none", ck.SharedBytes)
	}
}

// TestConversionsThroughSharedMemory: a transposed tile added to a plain one,
// and a reshape that moves elements between threads, go through shared
// memory fenced by barriers.
func TestConversionsThroughSharedMemory(t *testing.T) {
	for _, k := range []*tile.Kernel{
		build(t, kernels.AddTransposed, tile.Meta{"B": 32}),
		build(t, kernels.PairSums, tile.Meta{"BLOCK": 256}),
	} {
		ck, err := Compile(k, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if ck.SharedBytes == 0 || count(`bar\.sync`, ck.PTX) < 2 || count(`st\.shared`, ck.PTX) == 0 {
			t.Errorf("%s: %d B shared, %d barriers: no conversion through shared memory", k.Name, ck.SharedBytes, count(`bar\.sync`, ck.PTX))
		}
	}
}

// TestLargeSharedMemory: big TF32 tiles need more than 48 KB of dynamic
// shared memory (the cuda package raises the limit with cuFuncSetAttribute).
func TestLargeSharedMemory(t *testing.T) {
	k := build(t, kernels.Matmul, tile.Meta{"BM": 64, "BN": 64, "BK": 64, "TF32": 1})
	ck, err := Compile(k, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ck.SharedBytes <= 48<<10 {
		t.Fatalf("%d B of shared memory; the case meant to exceed 48 KB does not", ck.SharedBytes)
	}
}

// TestBlockedCopiesAlongPowersOfTwo: newBlocked puts the lanes and warps a
// block leaves over (copies) along a dimension that is a power of two, so
// that a dimension of three times one keeps an exact tile: [1, 96] at 4
// warps (the CPU's column tail, lowered to PTX by FuzzFusion) had its
// copies along the 96, a tile of 128; shapes of powers of two keep theirs
// where they were.
func TestBlockedCopiesAlongPowersOfTwo(t *testing.T) {
	for _, c := range []struct {
		shape      []int
		warps, vec int
		tpw, wpc   []int
	}{
		{[]int{1, 96}, 4, 4, []int{4, 8}, []int{4, 1}},
		{[]int{2, 192}, 8, 4, []int{2, 16}, []int{8, 1}},
		{[]int{96, 1}, 4, 4, []int{32, 1}, []int{1, 4}},
		{[]int{1, 64}, 4, 4, []int{1, 32}, []int{4, 1}},
		{[]int{4, 8}, 4, 4, []int{4, 8}, []int{4, 1}},
	} {
		t.Run(fmt.Sprint(c.shape), func(t *testing.T) {
			b := newBlocked(c.shape, c.warps, c.vec)
			if err := b.tilesExactly(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(b.TPW, c.tpw) || !slices.Equal(b.WPC, c.wpc) {
				t.Errorf("%s: lanes %v, warps %v; want %v, %v", b.key(), b.TPW, b.WPC, c.tpw, c.wpc)
			}
		})
	}
}

// TestTransposeThroughSmem: a block loaded along its rows and stored
// transposed (kernels.Transpose, 64×64 at 4 warps, pointers and sizes
// 16-byte aligned) is stored in the canonical layout of its transpose
// (coalescedStore: lanes along the output's contiguous rows, 16 bytes a
// thread) after a conversion through shared memory, so that both its
// loads and its stores are 16 bytes wide: 8 of each a thread, no scalar
// global access (before, its stores were 32 scalar ones a thread, a warp's
// touching 32 rows). The conversion's rows are padded to 65 words (mad by
// 65): a warp's scalar reads and writes of one slot fall at most 2 to a
// bank, where unpadded rows of 64 words put a warp's reads of a column
// 16 to a bank.
func TestTransposeThroughSmem(t *testing.T) {
	k := build(t, kernels.Transpose, tile.Meta{"BM": 64, "BN": 64})
	ck, err := Compile(k, Options{Spec: all16(k)})
	if err != nil {
		t.Fatal(err)
	}
	p := ck.PTX
	for _, c := range []struct {
		re   string
		want int
	}{
		{`ld\.global\.v4\.f32`, 8}, {`st\.global\.v4\.f32`, 8}, {`ld\.global\.f32`, 0}, {`st\.global\.f32`, 0},
		{`st\.shared\.f32`, 32}, {`ld\.shared\.f32`, 32}, {`mad\.lo\.s32 %r\d+, %r\d+, 65,`, 1},
	} {
		if n := count(c.re, p); n < c.want || c.want == 0 && n != 0 {
			t.Errorf("%d of %s, want %d", n, c.re, c.want)
		}
	}
	// the conversion's two sides, as convert addresses them: the load's
	// canonical layout and the transposed one its consumer reads in
	b := newBlocked([]int{64, 64}, 4, 4)
	from, to := plain(b), Layout{B: b, Src: []int{1, 0}}
	worst := func(lay Layout, pitch int) int {
		most := 0
		for _, s := range b.slots() {
			banks := map[int]map[int]bool{}
			for lane := range 32 {
				c := b.coordOf(lane, 0, s)
				r, col := c[lay.Src[0]], c[lay.Src[1]]
				addr := r*pitch + col
				if banks[addr%32] == nil {
					banks[addr%32] = map[int]bool{}
				}
				banks[addr%32][addr] = true
				most = max(most, len(banks[addr%32]))
			}
		}
		return most
	}
	if laneDim(&from) == laneDim(&to) {
		t.Fatalf("the two sides walk the same dimension (%d): no padding", laneDim(&from))
	}
	for _, c := range []struct {
		name        string
		lay         Layout
		pitch, most int
	}{
		{"writes, padded", from, 65, 2}, {"reads, padded", to, 65, 2}, {"reads, unpadded", to, 64, 16},
	} {
		if got := worst(c.lay, c.pitch); got != c.most {
			t.Errorf("%s: %d-way bank conflicts, want %d", c.name, got, c.most)
		}
	}
}

// TestTanhStraightLine: f32 tanh's lowering divides by rcp.approx, not
// rcp.rn, whose check and branch to a slow path split a product's
// epilogue into blocks that ptxas did not schedule across (on the H200,
// 2026-12-03: gelu(x·W+b) 4096³ at TF32 239 → 288 TFLOP/s, the BERT
// layer 1.29 → 1.26 ms); the conformance table checks its error (4 ulp)
// on the GPU. Likewise f32 sigmoid (rcp.approx and a Newton step: gelu
// written as x·sigmoid ran 310 → 260 TFLOP/s with rcp.rn; its bound, 3
// ulp, checked on the GPU too).
func TestTanhStraightLine(t *testing.T) {
	for _, op := range []tile.Op{tile.OpTanh, tile.OpSigmoid} {
		k := build(t, kernels.Unary(op), tile.Meta{"BLOCK": 1024})
		ck, err := Compile(k, Options{Spec: all16(k)})
		if err != nil {
			t.Fatal(err)
		}
		if n := count(`rcp\.rn`, ck.PTX); n != 0 {
			t.Errorf("%d rcp.rn in %v", n, op)
		}
		if n := count(`rcp\.approx\.f32`, ck.PTX); n == 0 {
			t.Errorf("no rcp.approx.f32 in %v", op)
		}
	}
}

// TestExpForm: f32 exp is ex2.approx of x·log₂e corrected by one FMA with
// d = x − t·ln2 (two FMAs against ln2's high and low parts) and one NaN
// test, no finiteness tests: seven instructions beside ex2's (expf; the
// conformance table checks its 2 ulp on every backend, the GPU's
// ex2.approx included, with overflow, ±∞ and NaN among the inputs).
func TestExpForm(t *testing.T) {
	k := build(t, kernels.Unary(tile.OpExp), tile.Meta{"BLOCK": 128})
	ck, err := Compile(k, Options{Spec: all16(k)})
	if err != nil {
		t.Fatal(err)
	}
	ex2 := count(`ex2\.approx\.f32`, ck.PTX)
	if ex2 == 0 {
		t.Fatal("no ex2.approx.f32")
	}
	if n := count(`testp\.`, ck.PTX); n != 0 {
		t.Errorf("%d testp in exp", n)
	}
	for re, per := range map[string]int{`setp\.nan\.f32`: 1, `fma\.rn\.f32`: 3, `mul\.rn\.f32`: 1, `selp\.f32`: 1} {
		if n := count(re, ck.PTX); n != per*ex2 {
			t.Errorf("%d %s for %d exponentials, want %d", n, re, ex2, per*ex2)
		}
	}
}

// TestExp2FlushFree: an f32 exp2 whose every user adds a constant of at
// least 2⁻¹⁰⁰ in magnitude (GELU's 1 + 2^t) is ex2.approx.ftz (a subnormal
// 2^t adds nothing to such a constant), as is one built by Exp2Flush; any
// other use keeps ex2.approx, which gives subnormal results.
func TestExp2FlushFree(t *testing.T) {
	cases := []struct {
		name string
		use  func(b *tile.Builder, e *tile.Value) *tile.Value
		ftz  bool
	}{
		{"plus one", func(b *tile.Builder, e *tile.Value) *tile.Value { return b.Rsqrt(b.Add(e, b.Const(1, tile.F32))) }, true},
		{"one plus", func(b *tile.Builder, e *tile.Value) *tile.Value { return b.Add(b.Const(1, tile.F32), e) }, true},
		{"minus 2⁻⁹⁰", func(b *tile.Builder, e *tile.Value) *tile.Value { return b.Add(e, b.Const(-0x1p-90, tile.F32)) }, true},
		{"stored", func(_ *tile.Builder, e *tile.Value) *tile.Value { return e }, false},
		{"plus 2⁻¹¹⁰", func(b *tile.Builder, e *tile.Value) *tile.Value { return b.Add(e, b.Const(0x1p-110, tile.F32)) }, false},
		{"plus itself", func(b *tile.Builder, e *tile.Value) *tile.Value { return b.Add(e, e) }, false},
		{"stored, Exp2Flush", nil, true},
		{"plus one and times two", func(b *tile.Builder, e *tile.Value) *tile.Value {
			return b.Mul(b.Add(e, b.Const(1, tile.F32)), b.Mul(e, b.Const(2, tile.F32)))
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("exp2_use", tile.Meta{"BLOCK": 256})
			x, y, n := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32), b.Param("n", tile.I32)
			BLOCK := b.BlockSize("BLOCK")
			offs := b.Add(b.Mul(b.ProgramID(0), BLOCK), b.Arange(0, BLOCK))
			mask := b.Lt(offs, n)
			ld := b.Load(b.AddPtr(x, offs), mask, nil)
			if c.use == nil { // flagged: whatever reads it
				b.Store(b.AddPtr(y, offs), b.Exp2Flush(ld), mask)
			} else {
				b.Store(b.AddPtr(y, offs), c.use(b, b.Exp2(ld)), mask)
			}
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			ck, err := Compile(k, Options{Spec: all16(k)})
			if err != nil {
				t.Fatal(err)
			}
			ftz, plain := count(`ex2\.approx\.ftz\.f32`, ck.PTX), count(`ex2\.approx\.f32`, ck.PTX)
			if c.ftz && (ftz == 0 || plain != 0) || !c.ftz && (ftz != 0 || plain == 0) {
				t.Errorf("ex2.approx.ftz %d, ex2.approx %d; want ftz %v", ftz, plain, c.ftz)
			}
		})
	}
}
