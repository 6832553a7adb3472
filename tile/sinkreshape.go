package tile

// SinkReshapes returns a copy of k in which each reshape that regroups
// dimensions (one that does more than insert or remove dimensions of size
// 1) of an elementwise value, a load or a splat is made of that value's
// operands reshaped instead, down to values of other kinds:
//
//	reshape(f(a, b))       = f(reshape(a), reshape(b))   f elementwise (select and cast too)
//	reshape(load(p, m, o)) = load(reshape(p), reshape(m), reshape(o))
//	reshape(splat(s))      = splat(s)
//	reshape(reshape(y))    = reshape(y)
//	reshape(expand_dims(y)) = reshape(y)
//	reshape(broadcast(y))  = broadcast(reshape(y))   where the reshape only splits dimensions
//
// (the last with y's dimensions split as the broadcast's are, those of 1
// into dimensions of 1: a row's sum broadcast along the row, then the
// rows split in two, is the sum split in two and broadcast).
// Each side is the same value, element for element, since a reshape keeps
// the elements' row-major order and these ops act on each element alone.
// What is left is reshapes of integer ranges (aranges), reductions,
// products, loops' values and the other shape ops. A code generator that
// holds integer blocks as affine functions of the lane index
// (codegen/cpu/native) reshapes an arange by its coefficients, so that a
// kernel that loads [BLOCK] and reduces it as [BLOCK/2, 2] (Triton's
// pairwise sums) becomes a load of [BLOCK/2, 2] at reshaped addresses.
//
// A reshaped copy of a value is placed right after the value (a load's
// copy reads the memory the load reads); the value stays where other
// users read it as it is. The copy keeps k's parameters, name and value
// IDs, the new values numbered after k's; moved is how many reshapes it
// replaced. Where there is none it returns k itself. k is not changed.
func (k *Kernel) SinkReshapes() (c *Kernel, moved int) {
	sinkable := func(v *Value, s Shape) bool {
		if v.Type.Shape.IsScalar() {
			return false
		}
		switch {
		case v.Op.IsElementwise(), v.Op == OpLoad, v.Op == OpSplat, v.Op == OpReshape, v.Op == OpExpandDims:
			return true
		case v.Op == OpBroadcast:
			_, ok := splitBroadcast(v.Args[0].Type.Shape, v.Type.Shape, s)
			return ok
		}
		return false
	}
	regroups := func(v *Value) bool {
		return v.Op == OpReshape && len(v.Args) == 1 && !UnitReshape(v.Args[0].Type.Shape, v.Type.Shape)
	}
	// need: the shapes each value is wanted in, found from the users back
	var order []*Value
	k.Walk(func(v *Value) { order = append(order, v) })
	need := map[*Value][]Shape{}
	want := func(v *Value, s Shape) {
		if v.Type.Shape == s || !sinkable(v, s) {
			return
		}
		for _, t := range need[v] {
			if t == s {
				return
			}
		}
		need[v] = append(need[v], s)
	}
	for i := len(order) - 1; i >= 0; i-- {
		v := order[i]
		if regroups(v) {
			want(v.Args[0], v.Type.Shape)
		}
		for _, s := range need[v] {
			switch v.Op {
			case OpSplat:
			case OpReshape, OpExpandDims:
				want(v.Args[0], s)
			case OpBroadcast:
				ys, _ := splitBroadcast(v.Args[0].Type.Shape, v.Type.Shape, s)
				want(v.Args[0], ys)
			default: // elementwise, load: every operand has v's shape
				for _, a := range v.Args {
					want(a, s)
				}
			}
		}
	}
	found := false
	k.Walk(func(v *Value) {
		if regroups(v) && len(need[v.Args[0]]) > 0 {
			found = true
		}
	})
	if !found {
		return k, 0
	}
	c, m := copyKernel(k)
	shaped := map[*Value]map[Shape]*Value{} // the copies made, by value and shape
	var block func(b *Block) *Block
	block = func(b *Block) *Block {
		if b == nil {
			return nil
		}
		nb := copyArgs(b, k, c, m)
		emit := emitter(c, nb)
		// as is v (of k) in shape s, in c: its copy made for s, v's copy
		// where it has that shape, else a reshape of v's copy
		var as func(v *Value, s Shape) *Value
		as = func(v *Value, s Shape) *Value {
			if q := shaped[v][s]; q != nil {
				return q
			}
			q := m[v]
			if q == nil {
				q = v // made outside the kernel's values, as remap keeps it
			}
			if v.Type.Shape == s {
				return q
			}
			return emit(OpReshape, Type{DType: v.Type.DType, Ptr: v.Type.Ptr, Shape: s}, q)
		}
		for _, v := range b.Values {
			var q *Value
			if regroups(v) {
				q = shaped[v.Args[0]][v.Type.Shape]
			}
			if q != nil {
				moved++
			} else {
				q = copyValue(v, k, c, m)
				if v.Op == OpFor {
					q.Body = block(v.Body)
				}
				nb.Values = append(nb.Values, q)
			}
			m[v] = q
			for _, s := range need[v] {
				t := Type{DType: v.Type.DType, Ptr: v.Type.Ptr, Shape: s}
				var r *Value
				switch v.Op {
				case OpSplat:
					r = emit(OpSplat, t, q.Args[0])
				case OpReshape, OpExpandDims:
					r = as(v.Args[0], s)
				case OpBroadcast:
					ys, _ := splitBroadcast(v.Args[0].Type.Shape, v.Type.Shape, s)
					r = emit(OpBroadcast, t, as(v.Args[0], ys))
				default:
					args := make([]*Value, len(v.Args))
					for i, a := range v.Args {
						args[i] = as(a, s)
					}
					r = &Value{}
					*r = *q
					r.ID, r.Type, r.Args = c.nextID, t, args
					c.nextID++
					nb.Values = append(nb.Values, r)
				}
				if shaped[v] == nil {
					shaped[v] = map[Shape]*Value{}
				}
				shaped[v][s] = r
			}
		}
		return nb
	}
	c.Body = block(k.Body)
	return c, moved
}

// splitBroadcast is the shape y (of ys) is to be reshaped to so that its
// broadcast to s and then reshaped to t is y's reshape broadcast to t:
// where the reshape from s to t only splits s's dimensions (each one into
// a run of t's whose product it is; dimensions of 1 anywhere), y's are
// split as s's are, and those y broadcasts (of 1) into dimensions of 1.
func splitBroadcast(ys, s, t Shape) (Shape, bool) {
	if ys.Rank != s.Rank || t.Rank > MaxRank {
		return Shape{}, false
	}
	out := Shape{Rank: t.Rank}
	j := 0
	for d := 0; d < s.Rank; d++ {
		n := s.Dims[d]
		if n == 1 {
			continue
		}
		for j < t.Rank && t.Dims[j] == 1 {
			out.Dims[j] = 1
			j++
		}
		prod := 1
		for prod < n && j < t.Rank {
			prod *= t.Dims[j]
			out.Dims[j] = t.Dims[j]
			if ys.Dims[d] == 1 {
				out.Dims[j] = 1
			}
			j++
		}
		if prod != n {
			return Shape{}, false
		}
	}
	for ; j < t.Rank; j++ {
		if t.Dims[j] != 1 {
			return Shape{}, false
		}
		out.Dims[j] = 1
	}
	return out, true
}

// UnitReshape reports whether a reshape from s to t only inserts or
// removes dimensions of size 1 (the elements keep their places along
// every other dimension).
func UnitReshape(s, t Shape) bool {
	var a, b []int
	for i := 0; i < s.Rank; i++ {
		if s.Dims[i] != 1 {
			a = append(a, s.Dims[i])
		}
	}
	for i := 0; i < t.Rank; i++ {
		if t.Dims[i] != 1 {
			b = append(b, t.Dims[i])
		}
	}
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
