package tile_test

import (
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// TestCSE: repeated pure values (index arithmetic, masks, the same
// elementwise op) are merged, loads never (a store lies between two
// equal loads), a loop's body reuses values from around it but not the
// other way; the copy verifies and computes what k does, bit for bit, on
// the reference interpreter, and k is unchanged.
func TestCSE(t *testing.T) {
	const n, block = 200, 64
	build := func() *tile.Kernel {
		b := tile.NewBuilder("cse", nil)
		x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
		offs := func() *tile.Value { return b.Add(b.Mul(b.ProgramID(0), block), b.Arange(0, block)) }
		o1, o2 := offs(), offs() // the same index twice
		m1, m2 := b.Lt(o1, n), b.Lt(o2, n)
		v1 := b.Load(b.AddPtr(x, o1), m1, 0.0)
		e1, e2 := b.Exp(v1), b.Exp(v1)
		b.Store(b.AddPtr(x, o2), b.Mul(e1, 2.0), m2)
		v2 := b.Load(b.AddPtr(x, o2), m2, 0.0) // x as just stored: not v1
		acc := b.For(0, 3, 1, []*tile.Value{b.Add(e2, v2)}, func(iv *tile.Value, c []*tile.Value) []*tile.Value {
			inner := b.Add(b.Mul(b.ProgramID(0), block), b.Arange(0, block)) // repeats o1 from around the loop
			return []*tile.Value{b.Add(b.Add(c[0], b.Cast(b.Lt(inner, n), tile.F32)), b.Sigmoid(v2))}
		})[0]
		b.Store(b.AddPtr(y, offs()), b.Add(acc, b.Sigmoid(v2)), b.Lt(offs(), n)) // the body's sigmoid is not visible here
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k := build()
	before := k.String()
	c, removed := k.CSE()
	if k.String() != before {
		t.Fatalf("k changed:\n%s\nwas\n%s", k, before)
	}
	if err := c.Verify(); err != nil {
		t.Fatalf("the copy does not verify: %v\n%s", err, c)
	}
	if removed < 10 {
		t.Errorf("%d values removed, want the repeated index, mask, exp and the loop's index (≥ 10)\n%s", removed, c)
	}
	if got, want := c.Count(tile.OpLoad), k.Count(tile.OpLoad); got != want {
		t.Errorf("%d loads, want %d: loads are never merged", got, want)
	}
	if got := c.Count(tile.OpExp); got != 1 {
		t.Errorf("%d exps, want 1", got)
	}
	if got := c.Count(tile.OpSigmoid); got != 2 {
		t.Errorf("%d sigmoids, want 2: the loop body's and the one after the loop", got)
	}
	run := func(k *tile.Kernel) ([]float32, []float32) {
		x, y := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i] = float32(i%17)/8 - 1
		}
		if err := interp.Interpret(k, tile.Grid{tile.CDiv(n, block)}, x, y); err != nil {
			t.Fatal(err)
		}
		return x, y
	}
	wx, wy := run(k)
	gx, gy := run(c)
	for i := range wx {
		if math.Float32bits(gx[i]) != math.Float32bits(wx[i]) || math.Float32bits(gy[i]) != math.Float32bits(wy[i]) {
			t.Fatalf("element %d: x %v, y %v after CSE; %v, %v before", i, gx[i], gy[i], wx[i], wy[i])
		}
	}
	// nothing left to merge
	if _, again := c.CSE(); again != 0 {
		t.Errorf("CSE of the copy removed %d more", again)
	}
}
