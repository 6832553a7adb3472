package ops

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMergeTranspose: a transpose over merged axes reads the same operand
// element for every output element as over its own axes (random shapes
// with axes of size 1 among them, every pattern of ranks 1 to 5), and the
// convolutions' transposes merge as expected.
func TestMergeTranspose(t *testing.T) {
	for _, c := range []struct {
		in, pattern                   []int
		wantOut, wantFrom, wantPatter []int
	}{
		{[]int{100, 28, 28, 32}, []int{0, 3, 1, 2}, []int{100, 32, 784}, []int{100, 784, 32}, []int{0, 2, 1}},
		{[]int{100, 32, 28, 28}, []int{0, 2, 3, 1}, []int{100, 784, 32}, []int{100, 32, 784}, []int{0, 2, 1}},
		{[]int{8, 12, 64, 64}, []int{0, 2, 1, 3}, []int{8, 64, 12, 64}, []int{8, 12, 64, 64}, []int{0, 2, 1, 3}},
		{[]int{4, 5, 6}, []int{0, 1, 2}, []int{120}, []int{120}, []int{0}},
		{[]int{1, 7, 1, 9}, []int{3, 2, 1, 0}, []int{9, 7}, []int{7, 9}, []int{1, 0}},
		{[]int{1, 1}, []int{1, 0}, []int{1}, []int{1}, []int{0}},
	} {
		t.Run(fmt.Sprint(c.in, c.pattern), func(t *testing.T) {
			out := make([]int, len(c.in))
			for i, a := range c.pattern {
				out[i] = c.in[a]
			}
			o, f, p := mergeTranspose(out, c.in, c.pattern)
			if !slices.Equal(o, c.wantOut) || !slices.Equal(f, c.wantFrom) || !slices.Equal(p, c.wantPatter) {
				t.Fatalf("got %v ← %v by %v, want %v ← %v by %v", o, f, p, c.wantOut, c.wantFrom, c.wantPatter)
			}
		})
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for n := 0; n < 3000; n++ {
		rank := 1 + rng.IntN(5)
		in := make([]int, rank)
		for i := range in {
			in[i] = 1 + rng.IntN(4)
		}
		pattern := rng.Perm(rank)
		out := make([]int, rank)
		for i, a := range pattern {
			out[i] = in[a]
		}
		o, f, p := mergeTranspose(out, in, pattern)
		total := 1
		for _, s := range out {
			total *= s
		}
		for idx := 0; idx < total; idx++ {
			if got, want := source(idx, o, f, p), source(idx, out, in, pattern); got != want {
				t.Fatalf("%v by %v (merged %v ← %v by %v): element %d reads %d, want %d", in, pattern, o, f, p, idx, got, want)
			}
		}
	}
}

// source is the operand's flat index output element idx of a transpose
// (output shape out, operand shape in) reads.
func source(idx int, out, in, pattern []int) int {
	c := make([]int, len(out))
	for i := len(out) - 1; i >= 0; i-- {
		c[i] = idx % out[i]
		idx /= out[i]
	}
	ci := make([]int, len(in))
	for i, a := range pattern {
		ci[a] = c[i]
	}
	flat := 0
	for i, s := range in {
		flat = flat*s + ci[i]
	}
	return flat
}
