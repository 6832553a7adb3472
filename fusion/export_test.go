package fusion

import "github.com/tilefuse/tilefuse/tile"

// SetSolverLauncher makes s run its kernels through l (a tiletest.Launcher:
// the PTX simulator, or a GPU through host buffers) instead of the CPU
// executor.
func SetSolverLauncher(s *Solver, l interface {
	Launch(k *tile.Kernel, grid tile.Grid, args ...any) error
}) {
	s.launch = l.Launch
}
