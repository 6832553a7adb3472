package interp_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestConformance runs the whole conformance table on the reference
// interpreter, against each case's float64 reference.
func TestConformance(t *testing.T) {
	tiletest.Run(t, tiletest.Interp{}, tiletest.Cases())
}

// TestSemantics checks masks, faults, grids, atomics and loops.
func TestSemantics(t *testing.T) {
	tiletest.RunSemantics(t, tiletest.Interp{})
}

// TestOps checks each op's values at special inputs.
func TestOps(t *testing.T) {
	tiletest.RunOps(t, tiletest.Interp{})
}
