package tiletest_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestRandomKernels: every random kernel builds, runs on the reference
// interpreter, writes every output element in range with a finite value
// and nothing past it (its check); and the generator reaches every kind
// of op it is meant to make, so the backends' random tests cover them.
func TestRandomKernels(t *testing.T) {
	seen := map[tile.Op]int{}
	masked, large := 0, 0
	for _, d := range tiletest.RandomData(600, 128) {
		c := tiletest.Random(d)
		k, err := c.Kernel()
		if err != nil {
			t.Fatalf("%s (data %x): %v", c.Name, d, err)
		}
		if c.Large {
			large++
		}
		if err := tiletest.RunCase(tiletest.Interp{}, c); err != nil {
			t.Fatalf("%s (data %x): %v\n%s", c.Name, d, err, k)
		}
		k.Walk(func(v *tile.Value) {
			seen[v.Op]++
			if v.Op == tile.OpLoad && len(v.Args) > 1 {
				masked++
			}
		})
	}
	for _, o := range []tile.Op{
		tile.OpLoad, tile.OpStore, tile.OpAtomicAdd, tile.OpDot, tile.OpFor, tile.OpTrans, tile.OpSelect,
		tile.OpReduceSum, tile.OpReduceMax, tile.OpReduceMin, tile.OpCast, tile.OpRem,
		tile.OpAdd, tile.OpSub, tile.OpMul, tile.OpDiv, tile.OpMax, tile.OpMin,
		tile.OpAnd, tile.OpOr, tile.OpXor, tile.OpNot, tile.OpEq, tile.OpLt,
		tile.OpTanh, tile.OpSigmoid, tile.OpErf, tile.OpNeg, tile.OpAbs, tile.OpExp,
		tile.OpExpm1, tile.OpExp2, tile.OpSin, tile.OpCos, tile.OpSqrt, tile.OpRsqrt,
		tile.OpLog, tile.OpLog2, tile.OpLog1p, tile.OpFloor, tile.OpCeil, tile.OpSign, tile.OpPow,
	} {
		if seen[o] < 3 {
			t.Errorf("%v in %d of 600 random kernels' values: the generator should make it more often", o, seen[o])
		}
	}
	if masked < 100 || large > 60 {
		t.Errorf("%d masked loads, %d large kernels", masked, large)
	}
	t.Logf("ops: %v; %d large", seen, large)
}
