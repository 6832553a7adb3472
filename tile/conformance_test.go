package tile_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// execLauncher is the CPU executor as a Launcher.
type execLauncher struct{}

func (execLauncher) Name() string { return "exec" }

func (execLauncher) Launch(k *tile.Kernel, grid tile.Grid, args ...any) error {
	return tile.Interpret(k, grid, args...)
}

// TestConformance runs the whole conformance table on the executor.
func TestConformance(t *testing.T) {
	tiletest.Run(t, execLauncher{}, tiletest.Cases())
}

// TestSemantics checks masks, faults, grids, atomics and loops on the executor.
func TestSemantics(t *testing.T) {
	tiletest.RunSemantics(t, execLauncher{})
}
