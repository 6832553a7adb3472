//go:build tilefuse_cuda

package fusion_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tilefuse/tilefuse/fusion"
)

var (
	// the defaults keep the test to a couple of minutes in scripts/gpu-run.sh's
	// round; a longer run sets both (-fuzz.gpugraphs 3000 -fuzz.gputime 8m)
	fzGPUGraphs = flag.Int("fuzz.gpugraphs", 60, "TestFuzzGraphsOnGPU: random graphs to run after the seed corpus")
	fzGPUTime   = flag.Duration("fuzz.gputime", 2*time.Minute, "TestFuzzGraphsOnGPU: stop starting graphs after this long")
)

// TestFuzzGraphsOnGPU runs FuzzFusion's graphs on the CUDA backend: the
// seed corpus (f.Add's seeds and testdata/fuzz/FuzzFusion), then
// -fuzz.gpugraphs random byte strings (seeded, so a failure names its
// input and reruns), until -fuzz.gputime. Each graph runs unfused and fused
// (products left to Gorgonia, and fused) on the GPU and unfused in float32
// on the CPU, against the float64 reference on the CPU, at FuzzFusion's
// tolerances; Gorgonia's own machine is left out (FuzzFusion checks it on
// the CPU). A failing graph fails its subtest (named by its input, in Go's
// corpus encoding) and the run goes on.
func TestFuzzGraphsOnGPU(t *testing.T) {
	if err := fusion.Available(fusion.CUDA); err != nil {
		t.Skipf("no GPU: %v", err)
	}
	corpus, err := fzCorpus()
	if err != nil {
		t.Fatal(err)
	}
	if len(corpus) == 0 {
		t.Fatal("no testdata/fuzz/FuzzFusion: run from the repository's or the package's directory")
	}
	inputs := append(fzSeeds(false), corpus...)
	rng := rand.New(rand.NewPCG(2026, 12))
	for range *fzGPUGraphs {
		b := make([]byte, 8+rng.IntN(56))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		inputs = append(inputs, b)
	}
	start := time.Now()
	ran, failed, skipped := 0, 0, 0
	for i, data := range inputs {
		if time.Since(start) > *fzGPUTime {
			t.Logf("stopping after %v (-fuzz.gputime): %d of %d graphs run", *fzGPUTime, i, len(inputs))
			break
		}
		ok := t.Run(fmt.Sprintf("graph%d", i), func(t *testing.T) {
			defer func() {
				if t.Skipped() {
					skipped++
				}
			}()
			t.Logf("input: %q", data)
			fzCheck(t, data, fusion.CUDA)
		})
		ran++
		if !ok {
			failed++
		}
	}
	t.Logf("fuzz: %d graphs in %v: %d graphs agree on the GPU, %d failed, %d skipped (an empty tensor Gorgonia cannot build)",
		ran, time.Since(start).Round(time.Second), ran-failed-skipped, failed, skipped)
}
