package fusion_test

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/fusion"
)

// knownDeclines are what the machine code still declines in FuzzFusion's
// seed programs (the reasons fusion.GroupInfo.Executor gives), each found
// in a fuzz run and not yet taken up: f64 phases with more live values
// than registers.
var knownDeclines = regexp.MustCompile(`not enough vector registers|f64 reductions past the accumulator registers`)

// TestFuzzSeedsMachineCode: every kernel of FuzzFusion's seed programs
// (and its corpus in testdata), compiled as its CPU legs compile them
// (unfused, and fused with and without products), is machine code where
// the CPU has it, but for the reasons knownDeclines lists: a kernel the
// code generator declines runs on the executor, several times slower,
// and before the forty-fourth session thousands of the fuzzer's kernels
// did (integer divisions of lanes by flat blocks, f64 rows of 1 or 2,
// column blocks under 8 lanes) without a test saying so. Compiles only.
func TestFuzzSeedsMachineCode(t *testing.T) {
	if !jit.Supported() {
		t.Skip("no machine code in this build (not amd64 with AVX2 and FMA, or -tags purego)")
	}
	corpus, err := fzCorpus()
	if err != nil {
		t.Fatal(err)
	}
	kernels, known := 0, map[string]int{}
	for i, data := range append(fzSeeds(testing.Short()), corpus...) {
		if len(data) > fzMaxInput {
			data = data[:fzMaxInput]
		}
		fg, err := fzBuild(data, tensor.Dtype{}) // the program's own type
		if err != nil || fg.zero {
			continue // the generator's or Gorgonia's refusal: FuzzFusion says so
		}
		legs := []struct {
			name string
			opts []fusion.Option
		}{
			{"unfused", []fusion.Option{fusion.WithFusion(false)}},
			{"fused", []fusion.Option{fusion.WithMatMulFusion(false)}},
			{"fused with products", []fusion.Option{fusion.WithMatMulFusion(true)}},
			{"fused with products, 64-bit offsets past 32 elements", []fusion.Option{fusion.WithMatMulFusion(true), fusion.WithMaxElements(32)}},
		}
		for _, l := range legs {
			fg, err := fzBuild(data, fg.prog)
			if err != nil {
				t.Fatal(err)
			}
			vm := fusion.NewTapeMachine(fg.g, append(fzOptions(fg, l.opts), fusion.WithBackend(fusion.CPU))...)
			if err := vm.Err(); err != nil {
				vm.Close()
				continue // FuzzFusion reports compile errors
			}
			for _, g := range vm.Report().Groups {
				kernels++
				switch {
				case g.Executor == "":
				case knownDeclines.MatchString(g.Executor):
					known[knownDeclines.FindString(g.Executor)]++
				default:
					t.Errorf("program %d (%s, %s): kernel %s (%s) on the executor: %s\n%s", i, fg.prog, l.name, g.Kernel, strings.Join(g.Ops, ", "), g.Executor, fg)
				}
			}
			vm.Close()
		}
	}
	var lines []string
	for k, n := range known {
		lines = append(lines, fmt.Sprintf("%d × %s", n, k))
	}
	sort.Strings(lines)
	t.Logf("%d kernels; known declines: %v", kernels, lines)
}
