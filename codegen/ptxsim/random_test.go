package ptxsim_test

import (
	"errors"
	"testing"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestRandomKernels lowers a thousand of tiletest's random kernels with
// codegen, for sm_80 and sm_90 in turn (at 4, 1, 8 and 2 warps in turn where
// the kernel does not ask for its own), runs the PTX in the simulator with
// racecheck and initcheck on, and compares the outputs with the reference
// interpreter's within each kernel's error bound (tiletest.Random). The
// large ones (more than a few million element operations) are left to the
// CPU backends' tests: the simulator takes seconds each; the few that need
// more shared memory than the target has (large f64 products through it)
// are refused by Compile (codegen.ErrSharedMemory), as they should be. (The generator
// found the TF32 conversions of dot(x, x) of 2026-12-07.)
func TestRandomKernels(t *testing.T) {
	ran, refused := onSimulator(t, 1000, tiletest.Random, tiletest.CompareRandom)
	t.Logf("%d random kernels ran, %d refused by Compile (more shared memory than the target has)", ran, refused)
	if ran < 950 {
		t.Fatalf("only %d of 1000 random kernels ran: the rest are large or refused", ran)
	}
}

// TestRandomMoreKernels is TestRandomKernels for 300 of RandomMore's
// kernels (rank-3 reductions, integer reductions, nested loops).
func TestRandomMoreKernels(t *testing.T) {
	ran, refused := onSimulator(t, 300, tiletest.RandomMore, tiletest.CompareRandomMore)
	t.Logf("%d random kernels ran, %d refused by Compile (more shared memory than the target has)", ran, refused)
	if ran < 270 {
		t.Fatalf("only %d of 300 random kernels ran: the rest are large or refused", ran)
	}
}

// onSimulator runs n random kernels of gen in the simulator (sm_80 and
// sm_90 in turn, at 4, 1, 8 and 2 warps in turn where the kernel does not
// ask for its own, racecheck and initcheck on) against the interpreter,
// the large ones left out, failing t at a disagreement: how many ran, and
// how many Compile refused for want of shared memory.
func onSimulator(t *testing.T, n int, gen func([]byte) tiletest.Case, compare func(tiletest.Launcher, []byte) error) (ran, refused int) {
	t.Helper()
	for i, d := range tiletest.RandomData(n, 128) {
		c := gen(d)
		if c.Large {
			continue
		}
		sim := &ptxsim.Launcher{Arch: []int{80, 90}[i%2], NumWarps: tiletest.RandomWarps(c, i/2), Racecheck: true, Initcheck: true}
		err := compare(sim, d)
		if errors.Is(err, codegen.ErrSharedMemory) {
			refused++
			continue
		}
		if err != nil {
			t.Fatalf("%s, num_warps %d: %v", sim.Name(), sim.NumWarps, err)
		}
		ran++
	}
	return ran, refused
}

// FuzzKernels is TestRandomKernels and TestRandomMoreKernels over a
// fuzzer's inputs (sm_90): go test ./codegen/ptxsim -run '^$' -fuzz FuzzKernels.
func FuzzKernels(f *testing.F) {
	for _, d := range tiletest.RandomData(8, 128) {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, c := range []struct {
			c       tiletest.Case
			compare func(tiletest.Launcher, []byte) error
		}{{tiletest.Random(data), tiletest.CompareRandom}, {tiletest.RandomMore(data), tiletest.CompareRandomMore}} {
			if c.c.Large {
				continue // the simulator takes seconds
			}
			sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true}
			if err := c.compare(sim, data); err != nil && !errors.Is(err, codegen.ErrSharedMemory) {
				t.Fatal(err)
			}
		}
	})
}
