package fusion

import (
	"math"
	"runtime"
	"time"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// SetSolverLauncher makes s run its kernels through l (a tiletest.Launcher:
// the PTX simulator, or a GPU through host buffers) instead of the CPU
// executor.
func SetSolverLauncher(s *Solver, l interface {
	Launch(k *tile.Kernel, grid tile.Grid, args ...any) error
}) {
	s.launch = l.Launch
}

// InputChecker is residency's run-time check of the inputs (resident.go)
// over fixed values, for BenchmarkInputCheck.
type InputChecker struct {
	hs   []held
	vals []G.Value
}

// NewInputChecker holds vals as a run of the CUDA backend does after seeing
// them twice: uploaded, hashed.
func NewInputChecker(vals []G.Value) *InputChecker {
	c := &InputChecker{hs: make([]held, len(vals)), vals: vals}
	for range 2 {
		c.Check()
	}
	return c
}

// Check is one run's check: the inputs it would upload, the bytes hashed.
func (c *InputChecker) Check() (uploads int, hashed int64) {
	p := planInputs(c.hs, c.vals, CheckContents)
	for i, up := range p.up {
		if up {
			uploads++
			c.hs[i].took(c.vals[i], p.bytes[i], p.sums[i], p.hashed[i])
		}
	}
	return uploads, p.hashedB
}

// ExecOf is the CPU executable form a FusedOp runs (for checking that
// kernels of the same text share one).
func ExecOf(f *FusedOp) any { return f.exec }

// SetTuneTimer makes WithAutotune measure kernels with f (which must leave
// the kernel's outputs in args, as the backends' timers do) until the
// returned function restores the backend's own.
func SetTuneTimer(f func(k *graphpass.Kernel, args []any) (float64, error)) (restore func()) {
	tuneOverride = func(k *graphpass.Kernel, args []any, _ float64) (float64, error) { return f(k, args) }
	return func() { tuneOverride = nil }
}

// SetTuneLimitTimer is SetTuneTimer with the timer given the limit over
// which it may stop measuring (the tuner drops a candidate over it).
func SetTuneLimitTimer(f func(k *graphpass.Kernel, args []any, limit float64) (float64, error)) (restore func()) {
	tuneOverride = f
	return func() { tuneOverride = nil }
}

// SetTuneClock makes the tuner read the time from now (a fake clock)
// until the returned function restores time.Now.
func SetTuneClock(now func() time.Time) (restore func()) {
	tuneClock = now
	return func() { tuneClock = time.Now }
}

// CPUKernelTime is the CPU backend's measurement for WithAutotune.
func CPUKernelTime(k *graphpass.Kernel, args []any) (float64, error) {
	return cpuKernelTime(k, args, math.Inf(1), false)
}

// StepChecker is residency's check of a fused training step's inputs:
// the learnables stepped on the device (held, dirty), the batch let anew
// at every step (BenchmarkTrainStepHost).
type StepChecker struct {
	hs []held
}

// NewStepChecker holds the learnables of vals as after a fused solver's
// Step; the others as uploaded once.
func NewStepChecker(vals []G.Value, learnable []bool) *StepChecker {
	c := &StepChecker{hs: make([]held, len(vals))}
	for i, v := range vals {
		b, _ := valueBytes(v)
		c.hs[i].took(v, b, contentHash(b), true)
		c.hs[i].stepped, c.hs[i].dirty = learnable[i], learnable[i]
	}
	return c
}

// Check plans a run over vals: the inputs it uploads, the bytes hashed.
func (c *StepChecker) Check(vals []G.Value) (uploads int, hashed int64) {
	p := planInputs(c.hs, vals, CheckContents)
	for i, up := range p.up {
		if up {
			uploads++
			c.hs[i].took(vals[i], p.bytes[i], p.sums[i], p.hashed[i])
			c.hs[i].stepped = false
		}
	}
	return uploads, p.hashedB
}

// FingerprintLen is the length of g's canonical description under opts
// (0: not cached), for BenchmarkFingerprint.
func FingerprintLen(g *G.ExprGraph, opts ...Option) int {
	cfg, err := configure(opts)
	if err != nil {
		return 0
	}
	fp := fingerprintOf(g, &cfg)
	if fp == nil {
		return 0
	}
	return len(fp.key)
}

// SetRecycling makes the machines made after it recycle the memory of
// readable values of minBytes or more (at least 16: below, the tiny
// allocator shares an allocation between values) and, with poison, fill
// each buffer taken again with NaN unless it is zeroed, until restore.
func SetRecycling(minBytes int, poison bool) (restore func()) {
	m, p := minRecycled, poisonRecycled
	minRecycled, poisonRecycled = max(minBytes, 16), poison
	return func() { minRecycled, poisonRecycled = m, p }
}

// SetAskCollections turns the recycler's background collections on or off
// until restore.
func SetAskCollections(on bool) (restore func()) {
	a := askCollections
	askCollections = on
	return func() { askCollections = a }
}

// WaitFinalizers collects garbage and returns once every finalizer that
// collection queued has run (the recycler's among them): finalizers run one
// batch after another on one goroutine, so a sentinel's finalizer queued by
// a later collection runs after them.
func WaitFinalizers() {
	for range 2 {
		done := make(chan struct{})
		s := new([4]int64) // its own allocation (not the tiny allocator's)
		runtime.SetFinalizer(s, func(*[4]int64) { close(done) })
		s = nil
		runtime.GC()
		<-done
	}
}

// FetcherBytes is fetcherBytes.
func FetcherBytes(back int64) int64 { return fetcherBytes(back) }

// SetMaxFetcherBytes makes machines made until the returned function
// restores the default take at most n bytes of page-locked memory for
// their fetcher.
func SetMaxFetcherBytes(n int64) (restore func()) {
	old := maxFetcherBytes
	maxFetcherBytes = n
	return func() { maxFetcherBytes = old }
}

// TuneInputs are the tuner's input arguments for group grp's kernel k (its
// outputs left out).
func TuneInputs(grp *graphpass.Group, k *graphpass.Kernel) []any {
	args, _ := tuneArgs(grp, k)
	return args[:len(grp.Inputs)]
}

// WithMaxElements lowers the elements a tensor a kernel reads or writes may
// have with 32-bit offsets (graphpass.Options.MaxElements), so that tests
// run on small tensors what larger ones get: 64-bit kernels (a GPU, a CPU
// with the machine code), or nodes left to Gorgonia (other CPUs).
func WithMaxElements(n int) Option { return func(c *config) { c.maxElements = n } }
