package native_test

import (
	"errors"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// ranElsewhere reports whether err says the machine code did not run the
// kernel (a shape the generator does not take, or a launch it gives the
// executor): not a disagreement.
func ranElsewhere(err error) bool {
	return errors.Is(err, native.ErrUnsupported) || errors.Is(err, native.ErrFallback) || errors.Is(err, errStrideFallback)
}

// TestRandomKernels runs a thousand of tiletest's random kernels as
// machine code and on the reference interpreter from the same inputs:
// their outputs agree within each kernel's error bound (tiletest.Random).
// Kernels the machine code does not take are counted; most must run (on
// 2026-12-07, fifty-fifth session, 999 of the thousand did, one of them
// but for programs that bailed out; the other falls back at launch. Of
// the 999, 5 sum f64 rows of 1 or 2, which ran once such rows' other
// lanes were left out of the sum (f64.go), and 7 compute a square block
// and read it transposed, which ran once such a transpose was read a
// level later (plan.go). In the fifty-fourth session 987 ran (918
// before it): 16 cast a float to i32 and back, which ran once tile's
// FoldIntRoundTrips computed it in the float, 37 take remainders across
// a vector (`(i + j) % 3 == 0`), which ran once remconst.go computed them
// per lane, and 16 gather f64 lanes under a mask whose other is not 0 (8
// of them in the copy specialized for a stride), which ran once such a
// gather blended other in. Before the fifty-third session's changes 683
// ran: 150 added atomically, 81 passed a stride other than 1
// (special.go), 14 reduced columns narrower than 8, and 110 took f64
// scalar parameters until TestF64ParamsNative's change.)
// (The generator found the transposed frame reads of 2026-12-07 in 8 of
// these thousand.)
func TestRandomKernels(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no native code here: needs amd64 with AVX2 and FMA")
	}
	before := partials.Load()
	ran, other := asMachineCode(t, 1000, tiletest.CompareRandom)
	t.Logf("%d random kernels ran as machine code (%d of them but for programs that bailed out), %d not", ran, partials.Load()-before, other)
	if ran < 995 {
		t.Fatalf("only %d of 1000 random kernels ran as machine code", ran)
	}
}

// TestRandomMoreKernels is TestRandomKernels for 300 of RandomMore's
// kernels: reductions along each axis of a block reshaped to three
// dimensions, integer reductions (argmax, counts), loops nested in loops,
// a quarter indexing in 64 bits. (2026-12-07, fifty-eighth session: 285
// ran, 66 of the 79 in 64 bits; 265 before a parameter widened to i64 was
// seen through, plan.go scalarOf, and 206 before the session's nested
// loops, reshapes of frame blocks and i64 comparisons.)
func TestRandomMoreKernels(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no native code here: needs amd64 with AVX2 and FMA")
	}
	ran, other := asMachineCode(t, 300, tiletest.CompareRandomMore)
	t.Logf("%d of RandomMore's kernels ran as machine code, %d not", ran, other)
	if ran < 282 {
		t.Fatalf("only %d of 300 of RandomMore's kernels ran as machine code", ran)
	}
}

// asMachineCode compares n random kernels (of compare's generator) as
// machine code with the interpreter, failing t at a disagreement: how
// many ran, and how many the machine code left to the executor.
func asMachineCode(t *testing.T, n int, compare func(tiletest.Launcher, []byte) error) (ran, other int) {
	t.Helper()
	for _, d := range tiletest.RandomData(n, 128) {
		err := compare(launcher{}, d)
		switch {
		case err == nil:
			ran++
		case ranElsewhere(err):
			other++
		default:
			t.Fatal(err)
		}
	}
	return ran, other
}

// FuzzKernels is TestRandomKernels and TestRandomMoreKernels over a
// fuzzer's inputs: go test ./codegen/cpu/native -run '^$' -fuzz FuzzKernels.
func FuzzKernels(f *testing.F) {
	for _, d := range tiletest.RandomData(8, 128) {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !jit.Supported() {
			t.Skip("no native code here: needs amd64 with AVX2 and FMA")
		}
		if err := tiletest.CompareRandom(launcher{}, data); err != nil && !ranElsewhere(err) {
			t.Fatal(err)
		}
		if err := tiletest.CompareRandomMore(launcher{}, data); err != nil && !ranElsewhere(err) {
			t.Fatal(err)
		}
	})
}
