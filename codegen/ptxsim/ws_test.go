package ptxsim_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// TestWarpSpecialisedHandOver: the warp-specialised product (ws = 1:
// producer warps copy, consumer warps run the wgmmas, full and empty
// mbarriers between them; a producer warpgroup, or with ws_warps = 8 as
// many warps as the consumers) agrees with the interpreter in the simulator
// under racecheck and initcheck at 200×136×200 (no multiple of the 256×128
// tile or of K's 32; 7 iterations, so that each of the 4 stages is filled
// twice but one), TF32 and bf16; and the simulator catches each
// hand-over taken away: consumers that do not wait on full read a stage
// before its copies land, a producer that does not wait on empty rewrites
// a stage that consumers still read, consumers that never release a stage
// leave the producer waiting for ever, and a producer that never hands one
// over the consumers.
func TestWarpSpecialisedHandOver(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds in the simulator")
	}
	const m, n, k = 200, 136, 200
	drop := func(re string) func(string) string {
		return func(s string) string { return regexp.MustCompile(re).ReplaceAllString(s, "") }
	}
	// consumers and producer apply an edit to the consumers' or the
	// producer's code only
	split := func(s string) (string, string) {
		i := strings.Index(s, "\n$L_ws_consumer_")
		return s[:i], s[i:]
	}
	consumers := func(edit func(string) string) func(string) string {
		return func(s string) string { p, c := split(s); return p + edit(c) }
	}
	producer := func(edit func(string) string) func(string) string {
		return func(s string) string { p, c := split(s); return edit(p) + c }
	}
	for _, c := range []struct {
		name  string
		prec  tile.Precision
		pw    int // producer warps
		edit  func(string) string
		kinds []string // the faults expected, any of them; none: it must agree
	}{
		{"tf32", tile.PrecTF32, 4, nil, nil},
		{"bf16", tile.PrecBF16, 4, nil, nil},
		{"tf32 8 producer warps", tile.PrecTF32, 8, nil, nil},
		{"bf16 8 producer warps", tile.PrecBF16, 8, nil, nil},
		{"tf32 consumers skip the full wait", tile.PrecTF32, 4, drop(`\t@!%p\d+ bra \$L_ws_full_\d+;\n`), []string{"async", "racecheck", "initcheck"}},
		{"bf16 consumers skip the full wait", tile.PrecBF16, 4, drop(`\t@!%p\d+ bra \$L_ws_full_\d+;\n`), []string{"async", "racecheck", "initcheck"}},
		{"tf32 producer skips the empty wait", tile.PrecTF32, 4, drop(`\t@!%p\d+ bra \$L_ws_empty_\d+;\n`), []string{"async", "racecheck", "wgmma"}},
		{"tf32 8 producer warps skip the empty wait", tile.PrecTF32, 8, drop(`\t@!%p\d+ bra \$L_ws_empty_\d+;\n`), []string{"async", "racecheck", "wgmma"}},
		{"tf32 consumers never release", tile.PrecTF32, 4, consumers(drop(`\t@%p\d+ mbarrier\.arrive\.shared::cta\.b64 _, \[%r\d+\];\n`)), []string{"sync"}},
		// TF32's copies complete on full themselves (no pass); bf16's
		// warps hand the stage over after their pass
		{"tf32 producer's copies never arrive", tile.PrecTF32, 4, producer(drop(`\tcp\.async\.mbarrier\.arrive\.noinc\.shared\.b64 \[%r\d+\];\n`)), []string{"sync"}},
		{"bf16 producer never hands over", tile.PrecBF16, 4, producer(drop(`\tmbarrier\.arrive\.shared::cta\.b64 _, \[%r\d+\];\n`)), []string{"sync"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rows := 256
			if c.pw == 8 { // 16 warps' 128 registers a thread hold 128×128's accumulators, not 256×128's
				rows = 128
			}
			kern := residualProduct(t, m, n, k, rows, false, c.prec, 0)
			kern.Meta["ws"], kern.Meta["ws_warps"] = 1, c.pw
			rng := rand.New(rand.NewPCG(3, 17))
			fill := func(size int) []float32 {
				d := make([]float32, size)
				for i := range d {
					d[i] = float32(rng.Float64()*2 - 1)
				}
				return d
			}
			a, bb, bias, r := fill(m*k), fill(k*n), fill(n), fill(m*n)
			grid := tile.Grid{tile.CDiv(m, rows), tile.CDiv(n, 128)}
			run := func(launch func(args ...any) error) ([2][]float32, error) {
				var outs [2][]float32
				for i := range outs {
					outs[i] = make([]float32, m*n)
					for j := range outs[i] {
						outs[i][j] = float32(math.NaN())
					}
				}
				return outs, launch(a, bb, bias, r, outs[0], outs[1])
			}
			sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true, Edit: c.edit}
			got, err := run(func(args ...any) error { return sim.Launch(kern, grid, args...) })
			if sim.Last == nil || sim.Last.ProducerWarps != c.pw {
				t.Fatalf("not the warp-specialised form (%v)", err)
			}
			if c.kinds != nil {
				var f *ptxsim.Fault
				if !errors.As(err, &f) {
					t.Fatalf("got %v, want a fault of kind %v", err, c.kinds)
				}
				for _, kind := range c.kinds {
					if f.Kind == kind {
						t.Logf("reported: %v", err)
						return
					}
				}
				t.Fatalf("got %v, want a fault of kind %v", err, c.kinds)
			}
			if err != nil {
				t.Fatal(err)
			}
			want, err := run(func(args ...any) error { return interp.Interpret(kern, grid, args...) })
			if err != nil {
				t.Fatal(err)
			}
			for o := range got {
				for i := range got[o] {
					g, w := float64(got[o][i]), float64(want[o][i])
					if math.IsNaN(g) || math.Abs(g-w) > 1e-5*max(1, math.Abs(w)) {
						t.Fatalf("output %d element (%d, %d): %v, want %v", o, i/n, i%n, g, w)
					}
				}
			}
		})
	}
}
