package tile

// Lane facts that both the interpreter and code generation use, in the manner
// of Triton's AxisInfo analysis: a value is Uniform when every lane holds the
// same value, and Contiguous when, in row-major lane order, lane i holds
// lane 0's value plus i (integers) or points i elements past lane 0 (pointers).
// A contiguous pointer block reads or writes one unbroken window of memory.

// LaneInfo is what is known about a value's lanes.
type LaneInfo struct {
	Uniform    bool
	Contiguous bool
}

// AnalyzeLanes computes LaneInfo for every value of k, by value ID.
// Loop-carried values are assumed to be neither uniform nor contiguous.
func AnalyzeLanes(k *Kernel) []LaneInfo {
	info := make([]LaneInfo, k.NumValues())
	k.Walk(func(v *Value) {
		if v.ID < 0 || v.ID >= len(info) {
			return
		}
		info[v.ID] = laneInfo(v, info)
	})
	return info
}

func laneInfo(v *Value, info []LaneInfo) LaneInfo {
	scalar := v.Type.Shape.IsScalar()
	arg := func(i int) LaneInfo {
		a := v.Args[i]
		if a.ID < 0 || a.ID >= len(info) {
			return LaneInfo{}
		}
		li := info[a.ID]
		if a.Type.Shape.IsScalar() {
			li.Uniform = true
		}
		return li
	}
	switch v.Op {
	case OpParam, OpConst, OpProgramID, OpNumPrograms:
		return LaneInfo{Uniform: true, Contiguous: scalar}
	case OpArange:
		return LaneInfo{Contiguous: true, Uniform: v.Type.Shape.Numel() == 1}
	case OpSplat:
		return LaneInfo{Uniform: true, Contiguous: v.Type.Shape.Numel() == 1}
	case OpBroadcast:
		return LaneInfo{Uniform: arg(0).Uniform}
	case OpReshape, OpExpandDims:
		return arg(0) // row-major lane order is unchanged
	case OpAdd, OpAddPtr:
		a, b := arg(0), arg(1)
		c := (a.Contiguous && b.Uniform || a.Uniform && b.Contiguous) && indexLike(v.Type)
		return LaneInfo{Uniform: a.Uniform && b.Uniform, Contiguous: c}
	case OpSub:
		a, b := arg(0), arg(1)
		return LaneInfo{Uniform: a.Uniform && b.Uniform, Contiguous: a.Contiguous && b.Uniform && indexLike(v.Type)}
	}
	if v.Op.IsElementwise() {
		u := true
		for i := range v.Args {
			u = u && arg(i).Uniform
		}
		return LaneInfo{Uniform: u}
	}
	return LaneInfo{Uniform: scalar}
}

// indexLike reports whether t can hold indices or addresses: ints and pointers.
func indexLike(t Type) bool { return t.Ptr || t.DType.IsInt() }
