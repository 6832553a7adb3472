package ptxsim_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// BenchmarkConformanceMatmul is the simulator's speed on an FMA dot
// (matmul 130×70×90, 32×32×32 blocks) and on softmax rows.
func BenchmarkConformance(b *testing.B) {
	for _, name := range []string{"matmul/130x70x90", "matmul/130x70x90_tf32", "softmax/64x781/BLOCK=1024/scale=1/infs=false"} {
		var c tiletest.Case
		for _, x := range tiletest.Cases() {
			if x.Name == name {
				c = x
			}
		}
		b.Run(name, func(b *testing.B) {
			sim := &ptxsim.Launcher{Arch: 80, Workers: 1}
			for b.Loop() {
				if err := tiletest.RunCase(sim, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
