package analysis_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/analysis"
)

// loopKernel is a row sum over blocks of 16 with a loop-carried pointer,
// plus values of each kind of invariance and a dead one.
func loopKernel(t *testing.T) (*tile.Kernel, map[string]*tile.Value) {
	return named(t, "loop", func(b *tile.Builder, mark func(string, *tile.Value) *tile.Value) {
		x, out, n := b.Ptr("x", tile.F32), b.Ptr("out", tile.F32), b.Param("n", tile.I32)
		mark("x", x)
		mark("n", n)
		mark("nprog", b.NumPrograms(0))
		mark("twoN", b.Mul(n, 2))               // launch-invariant
		mark("dead", b.Mul(b.Arange(0, 16), 3)) // used by nothing
		pid := mark("pid", b.ProgramID(0))      // program-invariant only
		row := mark("row", b.Mul(pid, n))       // program-invariant only
		p0 := mark("p0", b.AddPtr(x, b.Add(row, b.Arange(0, 16))))
		acc := b.For(0, n, 16, []*tile.Value{p0, b.Zeros(tile.F32, 16)}, func(iv *tile.Value, c []*tile.Value) []*tile.Value {
			mark("iv", iv)
			mark("carried", c[0])
			mark("inLoopInv", b.Add(b.Mul(n, 4), 1)) // invariant although inside the loop
			ld := mark("ld", b.Load(c[0], nil, nil))
			mark("fromLoad", b.Mul(ld, 2.0))
			return []*tile.Value{b.AddPtr(c[0], 16), b.Add(c[1], ld)}
		})
		mark("ptrOut", acc[0])
		s := mark("sum", b.Sum(acc[1], 0))
		b.Store(b.AddPtr(out, pid), s, nil)
	})
}

func TestInvariant(t *testing.T) {
	k, v := loopKernel(t)
	for _, c := range []struct {
		scope  analysis.Scope
		pinned func(*tile.Value) bool
		yes    []string
		no     []string
	}{
		{analysis.Launch, nil, []string{"x", "n", "nprog", "twoN", "dead", "inLoopInv"}, []string{"pid", "row", "p0", "iv", "carried", "ld", "fromLoad", "ptrOut", "sum"}},
		{analysis.Program, nil, []string{"x", "n", "nprog", "twoN", "pid", "row", "p0", "inLoopInv"}, []string{"iv", "carried", "ld", "fromLoad", "ptrOut", "sum"}},
		{analysis.Program, func(v *tile.Value) bool { return v.Op == tile.OpMul }, []string{"x", "n", "pid"}, []string{"twoN", "row", "p0", "inLoopInv", "ld"}},
	} {
		name := c.scope.String()
		if c.pinned != nil {
			name += "_pinned_muls"
		}
		t.Run(name, func(t *testing.T) {
			inv := analysis.Invariant(k, c.scope, c.pinned)
			for _, n := range c.yes {
				if !inv[v[n].ID] {
					t.Errorf("%s (%v) is not invariant over the %v", n, v[n], c.scope)
				}
			}
			for _, n := range c.no {
				if inv[v[n].ID] {
					t.Errorf("%s (%v) is invariant over the %v", n, v[n], c.scope)
				}
			}
		})
	}
}

func TestLive(t *testing.T) {
	k, v := loopKernel(t)
	live := analysis.Live(k)
	for _, n := range []string{"x", "n", "pid", "row", "p0", "iv", "carried", "ld", "sum"} {
		if !live[v[n].ID] {
			t.Errorf("%s (%v) is not live", n, v[n])
		}
	}
	// ptrOut: a loop result nobody reads
	for _, n := range []string{"dead", "twoN", "nprog", "inLoopInv", "fromLoad", "ptrOut"} {
		if live[v[n].ID] {
			t.Errorf("%s (%v) is live", n, v[n])
		}
	}
	// the stores and the loop itself
	k.Walk(func(x *tile.Value) {
		if (x.Op == tile.OpStore || x.Op == tile.OpFor || x.Op == tile.OpYield) && !live[x.ID] {
			t.Errorf("%v is not live", x)
		}
	})
}

func TestLoopNeeds(t *testing.T) {
	k, v := loopKernel(t)
	need := analysis.LoopNeeds(k)
	// what the loop body computes, and what those read from outside it
	for _, n := range []string{"inLoopInv", "ld", "fromLoad", "n"} {
		if !need[v[n].ID] {
			t.Errorf("%s (%v) is needed in the loop but not marked", n, v[n])
		}
	}
	// the loop's operands and what only the code after it reads
	for _, n := range []string{"p0", "row", "pid", "sum", "ptrOut", "twoN", "dead"} {
		if need[v[n].ID] {
			t.Errorf("%s (%v) is marked as needed in the loop", n, v[n])
		}
	}
}

func TestUsers(t *testing.T) {
	k, v := loopKernel(t)
	users := analysis.Users(k)
	if got := users[v["dead"].ID]; len(got) != 0 {
		t.Errorf("dead value has users %v", got)
	}
	ld := users[v["ld"].ID]
	if len(ld) != 2 || ld[0].Op != tile.OpMul || ld[1].Op != tile.OpAdd {
		t.Errorf("users of the load: %v, want the mul and the add, in order", ld)
	}
	for _, u := range users[v["carried"].ID] {
		found := false
		for _, a := range u.Args {
			found = found || a == v["carried"]
		}
		if !found {
			t.Errorf("%v listed as a user of %v", u, v["carried"])
		}
	}
}

func TestRoots(t *testing.T) {
	k, v := loopKernel(t)
	roots := analysis.Roots(k)
	x := v["x"]
	for _, n := range []string{"x", "p0", "carried", "ptrOut"} {
		if roots[v[n].ID] != x {
			t.Errorf("root of %s (%v) is %v, want %%x", n, v[n], roots[v[n].ID])
		}
	}
	for _, n := range []string{"n", "row", "ld"} {
		if roots[v[n].ID] != nil {
			t.Errorf("%s (%v) is not a pointer but has root %v", n, v[n], roots[v[n].ID])
		}
	}
	k.Walk(func(p *tile.Value) {
		if p.Type.Ptr && roots[p.ID] == nil {
			t.Errorf("pointer %v has no root", p)
		}
	})
	out := k.Param("out")
	k.Walk(func(s *tile.Value) {
		if s.Op == tile.OpStore && roots[s.Args[0].ID] != out {
			t.Errorf("store %v: root %v, want %%out", s, roots[s.Args[0].ID])
		}
	})
}
