package analysis

import "github.com/tilefuse/tilefuse/tile"

// Roots gives, by value ID, the pointer parameter each pointer value derives
// from (nil for the other values). Select does not take pointers, so every
// pointer of a verified kernel has exactly one root, known statically: that
// of the pointer it offsets, splats or reshapes, or for a loop-carried
// pointer, that of its initial value.
func Roots(k *tile.Kernel) []*tile.Value {
	roots := make([]*tile.Value, k.NumValues())
	of := func(v *tile.Value) *tile.Value {
		if v.ID >= 0 && v.ID < len(roots) {
			return roots[v.ID]
		}
		return nil
	}
	var walk func(b *tile.Block, loop *tile.Value)
	set := func(v, loop *tile.Value) {
		if !v.Type.Ptr {
			return
		}
		switch v.Op {
		case tile.OpParam:
			roots[v.ID] = v
		case tile.OpAddPtr, tile.OpSplat, tile.OpBroadcast, tile.OpExpandDims, tile.OpReshape, tile.OpTrans:
			roots[v.ID] = of(v.Args[0])
		case tile.OpForResult:
			if f := v.Args[0]; 3+int(v.Aux) < len(f.Args) {
				roots[v.ID] = of(f.Args[3+v.Aux])
			}
		case tile.OpBlockArg:
			if loop != nil && v.Aux > 0 && 2+int(v.Aux) < len(loop.Args) {
				roots[v.ID] = of(loop.Args[2+v.Aux])
			}
		}
	}
	walk = func(b *tile.Block, loop *tile.Value) {
		for _, a := range b.Args {
			set(a, loop)
		}
		for _, v := range b.Values {
			set(v, loop)
			if v.Op == tile.OpFor && v.Body != nil {
				walk(v.Body, v)
			}
		}
	}
	for _, p := range k.Params {
		set(p, nil)
	}
	if k.Body != nil {
		walk(k.Body, nil)
	}
	return roots
}
