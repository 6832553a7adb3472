package cpu_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestRandomKernels runs a thousand of tiletest's random kernels on the
// executor and on the reference interpreter from the same inputs: their
// outputs agree within each kernel's error bound (tiletest.Random).
func TestRandomKernels(t *testing.T) {
	for _, d := range tiletest.RandomData(1000, 128) {
		if err := tiletest.CompareRandom(launcher{}, d); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRandomMoreKernels is TestRandomKernels for 300 of RandomMore's
// kernels (rank-3 reductions, integer reductions, nested loops).
func TestRandomMoreKernels(t *testing.T) {
	for _, d := range tiletest.RandomData(300, 128) {
		if err := tiletest.CompareRandomMore(launcher{}, d); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzKernels is TestRandomKernels and TestRandomMoreKernels over a
// fuzzer's inputs: go test ./codegen/cpu -run '^$' -fuzz FuzzKernels.
func FuzzKernels(f *testing.F) {
	for _, d := range tiletest.RandomData(8, 128) {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := tiletest.CompareRandom(launcher{}, data); err != nil {
			t.Fatal(err)
		}
		if err := tiletest.CompareRandomMore(launcher{}, data); err != nil {
			t.Fatal(err)
		}
	})
}
