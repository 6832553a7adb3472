package analysis

import "github.com/tilefuse/tilefuse/tile"

// Live reports, by value ID, the values a kernel's effects depend on: stores,
// atomic adds, loads (which may fault, and so are never dropped), loops and
// what they yield, parameters, and everything those read. A backend may skip
// the others: a value computed and never used (say an index built for a
// broadcast that was folded away) is dead.
func Live(k *tile.Kernel) []bool {
	live := make([]bool, k.NumValues())
	var all []*tile.Value
	k.Walk(func(v *tile.Value) { all = append(all, v) })
	for changed := true; changed; {
		changed = false
		for i := len(all) - 1; i >= 0; i-- { // users come after what they use
			v := all[i]
			if !live[v.ID] {
				switch v.Op {
				case tile.OpStore, tile.OpAtomicAdd, tile.OpLoad, tile.OpFor, tile.OpYield, tile.OpParam, tile.OpBlockArg:
					live[v.ID] = true
				default:
					continue
				}
			}
			for _, a := range v.Args {
				if !live[a.ID] {
					live[a.ID] = true
					changed = true
				}
			}
		}
	}
	return live
}

// Users lists, by value ID, the values that take each value as an operand,
// in program order (a value that uses another twice is listed twice).
func Users(k *tile.Kernel) [][]*tile.Value {
	users := make([][]*tile.Value, k.NumValues())
	k.Walk(func(v *tile.Value) {
		for _, a := range v.Args {
			users[a.ID] = append(users[a.ID], v)
		}
	})
	return users
}

// LoopNeeds reports, by value ID, the values a loop body needs: those that
// stand in one, and every value they are computed from. A backend that
// computes invariant values once, ahead of everything, may keep to these
// where a kernel has loops, so that values only the code after the loops
// reads (an epilogue's offsets and masks) do not hold registers across them.
func LoopNeeds(k *tile.Kernel) []bool {
	need := make([]bool, k.NumValues())
	var mark func(v *tile.Value)
	mark = func(v *tile.Value) {
		if need[v.ID] {
			return
		}
		need[v.ID] = true
		for _, a := range v.Args {
			mark(a)
		}
	}
	var walk func(b *tile.Block, inLoop bool)
	walk = func(b *tile.Block, inLoop bool) {
		for _, v := range b.Values {
			if inLoop {
				mark(v)
			}
			if v.Op == tile.OpFor && v.Body != nil {
				walk(v.Body, true)
			}
		}
	}
	if k.Body != nil {
		walk(k.Body, false)
	}
	return need
}
