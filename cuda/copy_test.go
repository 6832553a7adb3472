package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestParallelCopy: parallelCopy leaves dst equal to src and the bytes
// after it untouched (poisoned), for sizes below, at and around the piece
// and at odd lengths, on 1 to 8 workers; it starts goroutines only where
// there are at least two pieces.
func TestParallelCopy(t *testing.T) {
	cases := []struct {
		name    string
		n       int
		workers int
		started int // goroutines started: -1 any
	}{
		{"empty", 0, 4, 0},
		{"one byte", 1, 4, 0},
		{"under two pieces", 2*copyPiece - 1, 4, 0},
		{"two pieces", 2 * copyPiece, 4, 1},
		{"odd, 3 workers", 3*copyPiece + 4097, 3, 2},
		{"odd, 8 workers", 9*copyPiece + 13, 8, 7},
		{"one worker", 5*copyPiece + 7, 1, 0},
		{"default workers", 1<<20 + 1, 0, -1},
		{"1.6 MB batch: one core", 512*784*4 + 512*16*4, 4, 0},
		{"12.6 MB output", 8 * 512 * 768 * 4, 4, 3},
	}
	rng := rand.New(rand.NewPCG(4, 4))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := make([]byte, c.n)
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			dst := make([]byte, c.n+100)
			for i := range dst {
				dst[i] = 0xA5
			}
			got := parallelCopy(dst, src, c.workers)
			if c.started >= 0 && got != c.started {
				t.Fatalf("%d goroutines started, want %d", got, c.started)
			}
			for i := range src {
				if dst[i] != src[i] {
					t.Fatalf("dst[%d] = %#x, want %#x", i, dst[i], src[i])
				}
			}
			for i := c.n; i < len(dst); i++ {
				if dst[i] != 0xA5 {
					t.Fatalf("dst[%d] = %#x past the copy, want the poison 0xa5", i, dst[i])
				}
			}
		})
	}
}

// BenchmarkParallelCopy: the batch of mlp_train large (1.6 MB) copied by
// one core and by parallelCopy, as the Stager copies it into pinned memory.
func BenchmarkParallelCopy(b *testing.B) {
	// mlp_train large's batch (1.6 MB), and a BERT-base layer's output (12.6 MB)
	for _, size := range []int{512*784*4 + 512*16*4, 8 * 512 * 768 * 4} {
		src := make([]byte, size)
		dst := make([]byte, len(src))
		copy(dst, src) // its pages in before the first timing
		for _, w := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("bytes=%d/workers=%d", size, w), func(b *testing.B) {
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					parallelCopy(dst, src, w)
				}
			})
		}
	}
}
