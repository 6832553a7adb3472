package tile

// Lane facts that both the interpreter and code generation use, in the manner
// of Triton's AxisInfo analysis: a value is Uniform when every lane holds the
// same value, and Contiguous when, in row-major lane order, lane i holds
// lane 0's value plus i (integers) or points i elements past lane 0 (pointers).
// A contiguous pointer block reads or writes one unbroken window of memory.

// LaneInfo is what is known about a value's lanes.
//
// Rows are the runs of lanes along the last axis. RowContiguous: each row is
// contiguous on its own (lane j of a row holds its lane 0 plus j), as the
// offsets of a 2-D tile of a row-major matrix are; RowUniform: every lane of
// a row holds the same value, as a [R,1] block broadcast along its rows.
type LaneInfo struct {
	Uniform       bool
	Contiguous    bool
	RowContiguous bool
	RowUniform    bool
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
	li := lanes1D(v, info)
	r := rowInfo(v, info)
	li.RowContiguous = r.RowContiguous || li.Contiguous
	li.RowUniform = r.RowUniform || li.Uniform
	return li
}

// lanes1D is Uniform and Contiguous over all lanes.
func lanes1D(v *Value, info []LaneInfo) LaneInfo {
	scalar := v.Type.Shape.IsScalar()
	arg := func(i int) LaneInfo { return argInfo(v, i, info) }
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
		a := arg(0) // row-major lane order is unchanged
		return LaneInfo{Uniform: a.Uniform, Contiguous: a.Contiguous}
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

// rowInfo is RowContiguous and RowUniform (lanes1D's facts imply them too).
func rowInfo(v *Value, info []LaneInfo) LaneInfo {
	w := lastDim(v.Type.Shape)
	if w == 1 { // rows of one lane
		return LaneInfo{RowContiguous: true, RowUniform: true}
	}
	arg := func(i int) LaneInfo { return argInfo(v, i, info) }
	switch v.Op {
	case OpSplat:
		return LaneInfo{RowUniform: true}
	case OpBroadcast:
		a := arg(0)
		if lastDim(v.Args[0].Type.Shape) == 1 { // along the rows
			return LaneInfo{RowUniform: true}
		}
		return LaneInfo{RowContiguous: a.RowContiguous, RowUniform: a.RowUniform}
	case OpExpandDims, OpReshape:
		if lastDim(v.Args[0].Type.Shape) == w { // the rows are the same runs
			a := arg(0)
			return LaneInfo{RowContiguous: a.RowContiguous, RowUniform: a.RowUniform}
		}
		return LaneInfo{}
	case OpAdd, OpAddPtr:
		a, b := arg(0), arg(1)
		c := (a.RowContiguous && b.RowUniform || a.RowUniform && b.RowContiguous) && indexLike(v.Type)
		return LaneInfo{RowContiguous: c, RowUniform: a.RowUniform && b.RowUniform}
	case OpSub:
		a, b := arg(0), arg(1)
		return LaneInfo{RowContiguous: a.RowContiguous && b.RowUniform && indexLike(v.Type), RowUniform: a.RowUniform && b.RowUniform}
	}
	if v.Op.IsElementwise() {
		u := true
		for i := range v.Args {
			u = u && arg(i).RowUniform
		}
		return LaneInfo{RowUniform: u}
	}
	return LaneInfo{}
}

func argInfo(v *Value, i int, info []LaneInfo) LaneInfo {
	a := v.Args[i]
	if a.ID < 0 || a.ID >= len(info) {
		return LaneInfo{}
	}
	li := info[a.ID]
	if a.Type.Shape.IsScalar() {
		li.Uniform, li.RowUniform = true, true
	}
	return li
}

// lastDim is the length of a shape's rows (1 for a scalar).
func lastDim(s Shape) int {
	if s.Rank == 0 {
		return 1
	}
	return s.Dims[s.Rank-1]
}

// indexLike reports whether t can hold indices or addresses: ints and pointers.
func indexLike(t Type) bool { return t.Ptr || t.DType.IsInt() }
