package cpu

import (
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/analysis"
)

// TestDeadValuesAreNotCompiled: values nothing stores, loads or loops on
// (here an index chain computed for a broadcast that was not needed) get
// no instruction; the kernel's result is unchanged.
func TestDeadValuesAreNotCompiled(t *testing.T) {
	build := func(dead bool) *tile.Kernel {
		b := tile.NewBuilder("dce", nil)
		out, n := b.Ptr("out", tile.F32), b.Param("n", tile.I32)
		offs := b.Add(b.Mul(b.ProgramID(0), 64), b.Arange(0, 64))
		if dead {
			b.Mul(b.Rem(b.Div(offs, n), n), 3) // unused
		}
		b.Store(b.AddPtr(out, offs), b.Cast(offs, tile.F32), b.Lt(offs, n))
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	withDead, without := build(true), build(false)
	e1, err := NewExec(withDead)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := NewExec(without)
	if err != nil {
		t.Fatal(err)
	}
	if len(e1.code)+len(e1.launch) != len(e2.code)+len(e2.launch) {
		t.Fatalf("with a dead chain: %d+%d instructions, without: %d+%d", len(e1.code), len(e1.launch), len(e2.code), len(e2.launch))
	}
	live := analysis.Live(withDead)
	dead := 0
	withDead.Walk(func(v *tile.Value) {
		if !live[v.ID] {
			dead++
		}
	})
	if dead != 7 { // two splats of n, div, rem, const 3 and its splat, mul
		t.Logf("%v", withDead)
		t.Fatalf("%d dead values, want 7", dead)
	}
	out := make([]float32, 100)
	if err := e1.Launch(tile.Grid{2}, out, 100); err != nil {
		t.Fatal(err)
	}
	if out[99] != 99 {
		t.Fatalf("out[99] = %v", out[99])
	}
}
