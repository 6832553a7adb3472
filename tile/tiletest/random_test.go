package tiletest_test

import (
	"strings"
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

// TestRandomMoreKernels: RandomMore's kernels build and run on the
// reference interpreter as Random's do, and make its added forms often:
// reductions of three-dimensional reshapes along each axis, integer
// reductions, loops nested in loops, 64-bit indices.
func TestRandomMoreKernels(t *testing.T) {
	const n = 300
	axes := map[int]int{} // a rank-3 reduction's axis
	ints, nested, large, wide := 0, 0, 0, 0
	for _, d := range tiletest.RandomData(n, 128) {
		c := tiletest.RandomMore(d)
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
		isNested := false
		if strings.Contains(k.String(), "-> i64") {
			wide++
		}
		k.Walk(func(v *tile.Value) {
			if v.Op.IsReduce() && len(v.Args) == 1 {
				if v.Args[0].Type.Shape.Rank == 3 {
					axes[int(v.Aux)]++
				}
				if v.Type.DType == tile.I32 {
					ints++
				}
			}
			if v.Op == tile.OpFor {
				for _, w := range v.Body.Values {
					if w.Op == tile.OpFor {
						isNested = true
					}
				}
			}
		})
		if isNested {
			nested++
		}
	}
	t.Logf("rank-3 reductions by axis %v, %d integer reductions, %d kernels with nested loops, %d in 64 bits, %d large", axes, ints, nested, wide, large)
	for axis := 0; axis < 3; axis++ {
		if axes[axis] < 20 {
			t.Errorf("%d reductions along axis %d of a rank-3 block in %d kernels", axes[axis], axis, n)
		}
	}
	if ints < 40 || nested < 15 || wide < n/6 || large > n/10 {
		t.Errorf("%d integer reductions, %d kernels with nested loops, %d in 64 bits, %d large in %d kernels", ints, nested, wide, large, n)
	}
}
