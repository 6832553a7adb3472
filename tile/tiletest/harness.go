package tiletest

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// Launcher runs a kernel over a grid on host buffers, as interp.Interpret
// does.
type Launcher interface {
	Name() string
	Launch(k *tile.Kernel, grid tile.Grid, args ...any) error
}

// Interp is the reference interpreter (package tile/interp) as a Launcher.
type Interp struct{}

func (Interp) Name() string { return "interp" }

func (Interp) Launch(k *tile.Kernel, grid tile.Grid, args ...any) error {
	return interp.Interpret(k, grid, args...)
}

// Case is one conformance test.
type Case struct {
	Name   string
	Kernel func() (*tile.Kernel, error)
	// Setup makes the launch arguments from rng, outputs poisoned, and returns
	// the grid and a check to run after the launch.
	Setup func(rng *rand.Rand) (tile.Grid, []any, func() error)
	// Large cases take seconds on the reference interpreter; -short skips them.
	Large bool
	// Tol bounds the difference between two backends' outputs (Compare).
	Tol Tol
}

// Seed is the base of every case's random stream; a case mixes in its name.
const Seed = 20261129

// RNG is the seeded random stream of the named case.
func RNG(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(Seed, h.Sum64()))
}

// Run runs every case on l as a subtest.
func Run(t *testing.T, l Launcher, cases []Case) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if c.Large && testing.Short() {
				t.Skip("large case: skipped with -short")
			}
			if err := RunCase(l, c); err != nil {
				t.Fatalf("%s on %s (seed %d): %v", c.Name, l.Name(), Seed, err)
			}
		})
	}
}

// RunCase builds, launches and checks one case.
func RunCase(l Launcher, c Case) error {
	k, err := c.Kernel()
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	grid, args, check := c.Setup(RNG(c.Name))
	if err := l.Launch(k, grid, args...); err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	return check()
}

// Compare runs c on launchers a and b from identical inputs, checks each
// result against the float64 reference, and checks that the two agree
// within c.Tol on every floating-point buffer.
func Compare(a, b Launcher, c Case) error {
	k, err := c.Kernel()
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	var outs [2][]any
	for i, l := range []Launcher{a, b} {
		grid, args, check := c.Setup(RNG(c.Name))
		if err := l.Launch(k, grid, args...); err != nil {
			return fmt.Errorf("%s: launch: %w", l.Name(), err)
		}
		if err := check(); err != nil {
			return fmt.Errorf("%s: %w", l.Name(), err)
		}
		outs[i] = args
	}
	for i, x := range outs[0] {
		var got, want []float64
		switch xs := x.(type) {
		case []float32:
			ys := outs[1][i].([]float32)
			for j := range xs {
				got, want = append(got, float64(xs[j])), append(want, float64(ys[j]))
			}
		case []float64:
			got, want = xs, outs[1][i].([]float64)
		case []int32:
			ys := outs[1][i].([]int32)
			for j := range xs {
				got, want = append(got, float64(xs[j])), append(want, float64(ys[j]))
			}
		default:
			continue
		}
		if err := closeAll(k.Params[i].Name, got, want, c.Tol); err != nil {
			return fmt.Errorf("%s against %s: %w", a.Name(), b.Name(), err)
		}
	}
	return nil
}

// closeAll is Close over the whole buffer (padding included).
func closeAll(what string, got, want []float64, tol Tol) error {
	bad := 0
	first := ""
	for i, w := range want {
		g := got[i]
		ok := g == w || math.IsNaN(g) && math.IsNaN(w) || math.Abs(g-w) <= tol.Abs+tol.Rel*math.Abs(w)
		if !ok {
			if bad == 0 {
				first = fmt.Sprintf("[%d] = %g vs %g", i, g, w)
			}
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("%s: %d of %d elements differ beyond %+v, first %s", what, bad, len(want), tol, first)
	}
	return nil
}

// Poison fills outputs before a launch: an odd value that no kernel computes.
const Poison = float32(-7.0e29)

// Pad is the number of poisoned elements after each output's end: a stray
// write there shows.
const Pad = 17

// Output is a poisoned output buffer of n elements plus Pad.
func Output(n int) []float32 {
	out := make([]float32, n+Pad)
	for i := range out {
		out[i] = Poison
	}
	return out
}

// Uniform is n values drawn uniformly from [lo, hi).
func Uniform(rng *rand.Rand, n int, lo, hi float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(lo + (hi-lo)*rng.Float64())
	}
	return x
}

// Tol is an absolute-or-relative tolerance: |got-want| ≤ Abs + Rel·|want|.
type Tol struct{ Abs, Rel float64 }

// Close checks got[:len(want)] against want within tol (NaN matches only
// NaN; infinities must match exactly), and that got's padding beyond
// len(want) still holds Poison.
func Close(what string, got []float32, want []float64, tol Tol) error {
	if len(got) < len(want) {
		return fmt.Errorf("%s: %d elements, want %d", what, len(got), len(want))
	}
	var bad []string
	nbad := 0
	for i, w := range want {
		g := float64(got[i])
		ok := false
		switch {
		case math.IsNaN(w):
			ok = math.IsNaN(g)
		case math.IsInf(w, 0):
			ok = g == w
		default:
			ok = math.Abs(g-w) <= tol.Abs+tol.Rel*math.Abs(w)
		}
		if !ok {
			nbad++
			if len(bad) < 5 {
				note := ""
				if got[i] == Poison {
					note = " (never written)"
				}
				bad = append(bad, fmt.Sprintf("[%d] = %g, want %g%s", i, g, w, note))
			}
		}
	}
	for i := len(want); i < len(got); i++ {
		if got[i] != Poison {
			return fmt.Errorf("%s: padding element %d (past the end %d) was written: %g", what, i, len(want), got[i])
		}
	}
	if nbad > 0 {
		return fmt.Errorf("%s: %d of %d elements outside tolerance %+v: %s", what, nbad, len(want), tol, strings.Join(bad, ", "))
	}
	return nil
}
