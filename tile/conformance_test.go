package tile_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestConformance runs the whole conformance table on the interpreter.
func TestConformance(t *testing.T) {
	tiletest.Run(t, tiletest.Interp{}, tiletest.Cases())
}
