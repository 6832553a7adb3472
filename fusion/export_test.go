package fusion

import (
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
	tuneOverride = f
	return func() { tuneOverride = nil }
}

// CPUKernelTime is the CPU backend's measurement for WithAutotune.
func CPUKernelTime(k *graphpass.Kernel, args []any) (float64, error) {
	return cpuKernelTime(k, args, false)
}
