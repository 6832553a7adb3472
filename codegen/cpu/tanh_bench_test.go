package cpu

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkTanhSlice32: the interpreter's float32 tanh over 64K values in
// ±3 (the GELU's range), for comparing implementations.
func BenchmarkTanhSlice32(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	a, d := make([]float32, 1<<16), make([]float32, 1<<16)
	for i := range a {
		a[i] = float32(rng.Float64()*6 - 3)
	}
	b.SetBytes(8 << 16)
	for b.Loop() {
		tanhSlice32(d, a)
	}
}
