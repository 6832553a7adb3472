package native_test

import (
	"flag"
	"fmt"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// colsCold makes BenchmarkColumns evict the input from the caches before
// each launch (a pass over 64 MB, not timed).
var colsCold = flag.Bool("cols.cold", false, "BenchmarkColumns: each launch from memory")

// BenchmarkColumns: graphpass's column sums for a 16-core native CPU target
// (the bench's colsum small and large: the parts kernel, then the combine)
// run natively, the parts' programs in one launch; "copy" is Go's copy of
// the input's bytes into a buffer of their size, for scale. SetBytes counts
// the input read once; -cpu 1 gives one core's rate.
func BenchmarkColumns(b *testing.B) {
	requireJIT(b)
	tg := graphpass.CPU(16)
	tg.Native = true
	for _, s := range []struct {
		name       string
		rows, cols int
	}{{"small", 1000, 777}, {"large", 8192, 1024}, {"64x777", 64, 777}, {"128x1024", 128, 1024}} {
		x := tiletest.Uniform(tiletest.RNG(s.name), s.rows*s.cols, -1, 1)
		b.Run(s.name+"/copy", func(b *testing.B) {
			y := make([]float32, len(x))
			b.SetBytes(4 * int64(len(x)))
			for b.Loop() {
				copy(y, x)
			}
		})
		k, _ := columnKernel(b, s.rows, s.cols, "sum", tg)
		for _, regs := range []bool{true, false} {
			name := "frame"
			if regs {
				name = "regs"
			}
			b.Run(fmt.Sprintf("%s/parts/%s", s.name, name), func(b *testing.B) {
				was := native.SetColLoops(regs)
				nk, err := native.Compile(k.Tile)
				native.SetColLoops(was)
				if err != nil {
					b.Fatal(err)
				}
				defer nk.Free()
				if regs && native.ColLoops(nk) == 0 {
					b.Skip("no column loop in registers here (AVX-512 only)")
				}
				args := []any{x}
				if k.Parts < 2 { // one chunk: the sums themselves
					args = append(args, make([]float32, s.cols))
				} else {
					for _, n := range k.ScratchSizes() {
						args = append(args, make([]float32, n))
					}
				}
				b.SetBytes(4 * int64(len(x)))
				big := make([]float32, 16<<20) // 64 MB: evicts x from every cache
				for b.Loop() {
					if *colsCold {
						b.StopTimer()
						for i := range big {
							big[i]++
						}
						b.StartTimer()
					}
					if err := nk.Launch(k.Grid, args...); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
