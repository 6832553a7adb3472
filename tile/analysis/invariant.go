package analysis

import "github.com/tilefuse/tilefuse/tile"

// Scope is where a value must be the same to be invariant.
type Scope uint8

const (
	// Launch: the same in every program of a launch. Such a value depends
	// only on parameters, constants, ranges and the grid's size; a backend
	// may compute it once per launch (the CPU executor does, once per worker).
	Launch Scope = iota
	// Program: the same throughout one program. It may depend on the program
	// ids too; a backend may compute it once, ahead of the program's loops
	// (the PTX generator's prologue).
	Program
)

func (s Scope) String() string {
	switch s {
	case Launch:
		return "launch"
	case Program:
		return "program"
	}
	return "scope(?)"
}

// Invariant reports, by value ID, which values are invariant over scope: no
// load, store, atomic add, loop or loop-carried value is; a value computed
// only from invariant operands is, wherever it stands (inside a loop body
// too). pinned, if not nil, names values that a backend keeps where they are
// (the PTX generator's reductions and dots): they are not invariant, and
// neither is what is computed from them.
func Invariant(k *tile.Kernel, s Scope, pinned func(*tile.Value) bool) []bool {
	inv := make([]bool, k.NumValues())
	k.Walk(func(v *tile.Value) {
		switch v.Op {
		case tile.OpLoad, tile.OpStore, tile.OpAtomicAdd, tile.OpFor, tile.OpForResult, tile.OpBlockArg, tile.OpYield:
			return
		case tile.OpProgramID:
			if s == Launch {
				return
			}
		}
		if pinned != nil && pinned(v) {
			return
		}
		for _, a := range v.Args {
			if !inv[a.ID] {
				return
			}
		}
		inv[v.ID] = true
	})
	return inv
}
