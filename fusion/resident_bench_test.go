package fusion_test

import (
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/fusion"
)

// BenchmarkInputCheck is the host cost that CheckContents adds to a run of
// the CUDA backend over unchanged inputs: hashing every input the device
// holds, for the bench's large workloads (the MLP's and the encoder
// block's parameters and batch, all float32). It needs no GPU. Report
// MB/s with the bytes hashed per run.
func BenchmarkInputCheck(b *testing.B) {
	for _, name := range []string{"mlp_train", "encoder_fwd_bwd"} {
		w, _ := bench.Lookup(name)
		s, err := w.Build("large")
		if err != nil {
			b.Fatal(err)
		}
		var vals []G.Value
		for _, v := range s.Inputs {
			vals = append(vals, v)
		}
		b.Run(name+"/large", func(b *testing.B) {
			c := fusion.NewInputChecker(vals)
			ups, hashed := c.Check()
			if ups != 0 {
				b.Fatalf("%d uploads of unchanged inputs", ups)
			}
			b.SetBytes(hashed)
			for b.Loop() {
				c.Check()
			}
		})
	}
}
