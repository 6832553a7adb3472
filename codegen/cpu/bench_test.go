package cpu_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/kernels"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// The executor's speed at 16M f32 elements. SetBytes counts the bytes a
// kernel must move (each input read once, each output written once), so the
// MB/s column is effective bandwidth; BenchmarkCopy16M is the machine's plain
// memory copy on the same data, for scale.

const n16M = 1 << 24

func BenchmarkCopy16M(b *testing.B) {
	x, y := make([]float32, n16M), make([]float32, n16M)
	b.SetBytes(8 * n16M)
	for b.Loop() {
		copy(y, x)
	}
}

func BenchmarkVecAdd16M(b *testing.B) {
	const block = 4096
	k, err := kernels.VecAdd(tile.Meta{"BLOCK": block})
	if err != nil {
		b.Fatal(err)
	}
	e, err := cpu.NewExec(k)
	if err != nil {
		b.Fatal(err)
	}
	rng := tiletest.RNG("bench")
	x, y, out := tiletest.Uniform(rng, n16M, -1, 1), tiletest.Uniform(rng, n16M, -1, 1), make([]float32, n16M)
	b.SetBytes(12 * n16M)
	for b.Loop() {
		if err := e.Launch(tile.Grid{tile.CDiv(n16M, block)}, x, y, out, n16M); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSoftmax16M(b *testing.B) {
	const rows, cols = 4096, 4096
	k, err := kernels.Softmax(tile.Meta{"BLOCK": cols})
	if err != nil {
		b.Fatal(err)
	}
	e, err := cpu.NewExec(k)
	if err != nil {
		b.Fatal(err)
	}
	x, y := tiletest.Uniform(tiletest.RNG("bench"), rows*cols, -4, 4), make([]float32, rows*cols)
	b.SetBytes(8 * rows * cols)
	for b.Loop() {
		if err := e.Launch(tile.Grid{rows}, x, y, cols, cols); err != nil {
			b.Fatal(err)
		}
	}
}
