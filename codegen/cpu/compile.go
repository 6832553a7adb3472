package cpu

import (
	"fmt"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/analysis"
)

// compiler turns a kernel into a tree of instr closures: one per op, each a
// loop over typed slices.
type compiler struct {
	e         *Exec
	roots     []*tile.Value       // by value ID: a pointer's parameter (analysis.Roots)
	lanes     []analysis.AxisInfo // by value ID
	invariant []bool              // by value ID: the same in every program of a launch
	launch    []instr             // computes the invariant values, once per worker and launch
	lane0Only []bool              // by value ID: a contiguous pointer block read only for its lane 0
	lane0Val  []bool              // by value ID: integer index math whose every use needs only lane 0
	folded    []bool              // by value ID: an integer splat its users read as a scalar (never filled)
	rowFirst  []int               // by value ID: the row length W of an address value computed at row starts only
	live      []bool              // by value ID: its value is needed (analysis.Live)
}

// markLane0Only finds contiguous pointer blocks whose every use is as the
// address of a load, store or atomic_add: those read only lane 0 of it.
func (c *compiler) markLane0Only(k *tile.Kernel) {
	c.lane0Only = make([]bool, k.NumValues())
	other := make([]bool, k.NumValues())
	k.Walk(func(v *tile.Value) {
		for i, a := range v.Args {
			mem := i == 0 && (v.Op == tile.OpLoad || v.Op == tile.OpStore || v.Op == tile.OpAtomicAdd)
			if !mem {
				other[a.ID] = true
			}
		}
	})
	var all []*tile.Value
	users := make([][]*tile.Value, k.NumValues())
	k.Walk(func(v *tile.Value) {
		c.lane0Only[v.ID] = v.Op == tile.OpAddPtr && c.lanes[v.ID].Contiguous && !other[v.ID]
		all = append(all, v)
		for _, a := range v.Args {
			users[a.ID] = append(users[a.ID], v)
		}
	})
	c.markLane0Values(all, users)
	c.markFoldedSplats(all, users)
	c.markRowFirst(all, users)
}

// rowPath reports the row length of a load or store that copies its
// pointer block row by row (memory), or 0.
func (c *compiler) rowPath(u *tile.Value) int {
	if (u.Op != tile.OpLoad && u.Op != tile.OpStore) || len(u.Args) == 0 {
		return 0
	}
	p := u.Args[0]
	li := c.lanes[p.ID]
	if w := analysis.LastDim(p.Type.Shape); !li.Contiguous && li.RowContiguous() && w > 1 {
		return w
	}
	return 0
}

// markRowFirst finds the integer adds and addptrs of a 2-D tile whose every
// use is the address of a load or store that goes row by row, or another
// such value of the same row length: only the lane 0 of each row is
// computed (the memory op rebuilds a row's other lanes when it needs them).
// The tiles of a matmul's K loop cost one pass over their rows instead of
// one over their lanes.
func (c *compiler) markRowFirst(all []*tile.Value, users [][]*tile.Value) {
	c.rowFirst = make([]int, len(c.lanes))
	for i := len(all) - 1; i >= 0; i-- {
		v := all[i]
		w := analysis.LastDim(v.Type.Shape)
		if w <= 1 || v.Type.Shape.Rank < 2 || c.lane0Val[v.ID] || len(users[v.ID]) == 0 {
			continue
		}
		switch {
		case v.Op == tile.OpAdd && (v.Type.DType == tile.I32 || v.Type.DType == tile.I64) && !v.Type.Ptr:
		case v.Op == tile.OpAddPtr && !c.lane0Only[v.ID]:
		default:
			continue
		}
		ok := true
		for _, u := range users[v.ID] {
			address := c.rowPath(u) == w && u.Args[0] == v && (u.Op != tile.OpStore || u.Args[1] != v)
			if !address && c.rowFirst[u.ID] != w {
				ok = false
				break
			}
		}
		if ok {
			c.rowFirst[v.ID] = w
		}
	}
}

// addInstr computes an integer add or addptr at every w-th lane (w = 1:
// all of them), from its operands' lanes there, or a folded splat's scalar.
func (c *compiler) addInstr(v *tile.Value, w int) (instr, error) {
	d := v.ID
	x, y := v.Args[0], v.Args[1]
	scalar := false
	if c.folded[x.ID] {
		x, y = y, x
	}
	if c.folded[y.ID] {
		y, scalar = y.Args[0], true
	}
	xi, yi := x.ID, y.ID
	switch {
	case v.Op == tile.OpAddPtr && y.Type.DType == tile.I32:
		return func(f *frame) error {
			addRows(get[int64](f, d), get[int64](f, xi), get[int32](f, yi), w, scalar)
			return nil
		}, nil
	case v.Op == tile.OpAddPtr || v.Type.DType == tile.I64:
		return func(f *frame) error {
			addRows(get[int64](f, d), get[int64](f, xi), get[int64](f, yi), w, scalar)
			return nil
		}, nil
	}
	return func(f *frame) error {
		addRows(get[int32](f, d), get[int32](f, xi), get[int32](f, yi), w, scalar)
		return nil
	}, nil
}

// addRows sets d[i] = a[i] + b[i] (b[0] when scalar) at the start of each
// row of w lanes.
func addRows[T int32 | int64, U int32 | int64](d, a []T, b []U, w int, scalar bool) {
	a = a[:len(d)]
	if scalar {
		s := T(b[0])
		for i := 0; i < len(d); i += w {
			d[i] = a[i] + s
		}
		return
	}
	b = b[:len(d)]
	for i := 0; i < len(d); i += w {
		d[i] = a[i] + T(b[i])
	}
}

// markFoldedSplats finds the integer splats of a scalar whose every user is
// an integer add or the offset of an addptr that is computed lane by lane:
// those users add the scalar itself (addInstr), and the splat is never
// filled. In a matmul's K loop that saves a pass over the tile per operand
// and step, where the dot itself is only a few passes' worth.
func (c *compiler) markFoldedSplats(all []*tile.Value, users [][]*tile.Value) {
	c.folded = make([]bool, len(c.lanes))
	for _, v := range all {
		if v.Op != tile.OpSplat || v.Type.Ptr || !v.Args[0].Type.Shape.IsScalar() || c.lane0Val[v.ID] || len(users[v.ID]) == 0 {
			continue
		}
		if v.Type.DType != tile.I32 && v.Type.DType != tile.I64 {
			continue
		}
		ok := true
		for _, u := range users[v.ID] {
			switch {
			case u.Op == tile.OpAdd && !c.lane0Val[u.ID] && u.Args[0].Op != u.Args[1].Op: // not two splats
			case u.Op == tile.OpAddPtr && !c.lane0Only[u.ID] && u.Args[1] == v:
			default:
				ok = false
			}
		}
		c.folded[v.ID] = ok
	}
}

// markLane0Values finds the integer values (offsets, and the splats and
// integer arithmetic they come from) whose every use is the offset of a
// lane0Only address or another such value: only their lane 0 is computed,
// into a slot of one element. An elementwise block's offsets pid·B + lanes
// cost a splat and an add over every lane otherwise, more than a load or
// store that becomes a copy. Lane 0 of these ops depends on lane 0 of their
// operands alone, and their loops run over their result's length.
func (c *compiler) markLane0Values(all []*tile.Value, users [][]*tile.Value) {
	c.lane0Val = make([]bool, len(c.lanes))
	eligible := func(v *tile.Value) bool {
		if v.Type.Ptr || (v.Type.DType != tile.I32 && v.Type.DType != tile.I64) {
			return false
		}
		switch {
		case v.Op == tile.OpSplat:
			return true
		case v.Op == tile.OpCast:
			return v.Args[0].Type.DType == tile.I32 || v.Args[0].Type.DType == tile.I64
		}
		return v.Op.IsBinary()
	}
	for i := len(all) - 1; i >= 0; i-- { // users come after what they use
		v := all[i]
		if !eligible(v) || len(users[v.ID]) == 0 {
			continue
		}
		ok := true
		for _, u := range users[v.ID] {
			offset := c.lane0Only[u.ID] && len(u.Args) > 1 && u.Args[1] == v && u.Args[0] != v
			if !offset && !c.lane0Val[u.ID] {
				ok = false
				break
			}
		}
		c.lane0Val[v.ID] = ok
	}
}

func (c *compiler) slot(v *tile.Value) {
	s := &c.e.slots[v.ID]
	s.kind = storageKind(v.Type)
	s.numel = v.Type.Shape.Numel()
	if c.lane0Val != nil && c.lane0Val[v.ID] {
		s.numel = 1
	}
	s.used = true
}

// scratch adds a storage slot that no value names, for an op's temporaries.
func (c *compiler) scratch(k tile.DType, numel int) int {
	c.e.slots = append(c.e.slots, slotInfo{kind: k, numel: numel, alias: -1, used: true})
	return len(c.e.slots) - 1
}

func (c *compiler) alias(v, of *tile.Value) {
	c.slot(v)
	c.e.slots[v.ID].alias = of.ID
}

func (c *compiler) block(b *tile.Block, loop *tile.Value) ([]instr, error) {
	for _, a := range b.Args {
		c.slot(a)
	}
	var code []instr
	for _, v := range b.Values {
		if !c.live[v.ID] {
			continue
		}
		in, err := c.value(v, loop)
		if err != nil {
			return nil, fmt.Errorf("cpu: @%s: %s: %w", c.e.k.Name, v, err)
		}
		switch {
		case in == nil:
		case c.invariant[v.ID]:
			c.launch = append(c.launch, in)
		default:
			code = append(code, in)
		}
	}
	return code, nil
}

func get[T any](f *frame, id int) []T { return f.vals[id].([]T) }

// value compiles one op; it returns nil for ops with no run-time work.
func (c *compiler) value(v *tile.Value, loop *tile.Value) (instr, error) {
	if !v.Type.IsVoid() {
		c.slot(v)
	}
	d := v.ID
	arg := func(i int) int { return v.Args[i].ID }
	switch {
	case v.Op == tile.OpConst || v.Op == tile.OpArange:
		return nil, nil // filled when the frame is made
	case v.Op == tile.OpProgramID:
		ax := v.Aux
		return func(f *frame) error { get[int32](f, d)[0] = f.pid[ax]; return nil }, nil
	case v.Op == tile.OpNumPrograms:
		ax := v.Aux
		return func(f *frame) error { get[int32](f, d)[0] = f.nprog[ax]; return nil }, nil
	case v.Op == tile.OpExpandDims || v.Op == tile.OpReshape:
		c.alias(v, v.Args[0])
		return nil, nil
	case v.Op == tile.OpForResult:
		f := v.Args[0]
		c.alias(v, f.Body.Args[v.Aux+1])
		return nil, nil
	case v.Op == tile.OpSplat && c.folded[v.ID]:
		return nil, nil // its users read the scalar (addInstr)
	case c.rowFirst[v.ID] > 0: // lane 0 of each row
		return c.addInstr(v, c.rowFirst[v.ID])
	case (v.Op == tile.OpAdd || v.Op == tile.OpAddPtr && !c.lane0Only[v.ID]) && (c.folded[v.Args[0].ID] || c.folded[v.Args[1].ID]):
		return c.addInstr(v, 1)
	case v.Op.IsShape():
		return byKind(storageKind(v.Type), shapeOp{v: v})
	case v.Op == tile.OpAddPtr && c.lane0Only[v.ID]:
		x, y := arg(0), arg(1)
		if v.Args[1].Type.DType == tile.I32 {
			return func(f *frame) error {
				get[int64](f, d)[0] = get[int64](f, x)[0] + int64(get[int32](f, y)[0])
				return nil
			}, nil
		}
		return func(f *frame) error { get[int64](f, d)[0] = get[int64](f, x)[0] + get[int64](f, y)[0]; return nil }, nil
	case v.Op == tile.OpAddPtr:
		if v.Args[1].Type.DType == tile.I32 {
			return mk2(d, arg(0), arg(1), addPtrL[int32]), nil
		}
		return mk2(d, arg(0), arg(1), addPtrL[int64]), nil
	case v.Op == tile.OpLoad || v.Op == tile.OpStore || v.Op == tile.OpAtomicAdd:
		return c.memory(v)
	case v.Op.IsBinary():
		return c.binary(v)
	case v.Op.IsCompare():
		return c.compare(v)
	case v.Op.IsUnary():
		return c.unary(v)
	case v.Op == tile.OpSelect:
		return byKind(storageKind(v.Type), selectOp{d, arg(0), arg(1), arg(2)})
	case v.Op == tile.OpCast:
		return castInstr(v)
	case v.Op.IsReduce():
		return byKind(v.Type.DType, reduceOp{v: v})
	case v.Op == tile.OpDot:
		return c.dot(v)
	case v.Op == tile.OpFor:
		return c.forLoop(v)
	case v.Op == tile.OpYield:
		return nil, nil // handled by the loop
	}
	return nil, fmt.Errorf("the interpreter has no rule for %v", v.Op)
}

// kindFunc builds an instr for one storage dtype; byKind picks the
// instantiation. Each method body is generic over the element type.
type kindFunc interface {
	boolF() (instr, error)
	i32() (instr, error)
	i64() (instr, error)
	f32() (instr, error)
	f64() (instr, error)
}

func byKind(k tile.DType, f kindFunc) (instr, error) {
	switch k {
	case tile.I1:
		return f.boolF()
	case tile.I32:
		return f.i32()
	case tile.I64:
		return f.i64()
	case tile.F32:
		return f.f32()
	case tile.F64:
		return f.f64()
	}
	return nil, fmt.Errorf("no storage for dtype %v", k)
}

func mk1[T, R any](d, x int, fn func(d []R, a []T)) instr {
	return func(f *frame) error { fn(get[R](f, d), get[T](f, x)); return nil }
}

func mk2[T, U, R any](d, x, y int, fn func(d []R, a []T, b []U)) instr {
	return func(f *frame) error { fn(get[R](f, d), get[T](f, x), get[U](f, y)); return nil }
}

// ---- shape ops ----

type shapeOp struct{ v *tile.Value }

func (s shapeOp) boolF() (instr, error) { return shapeInstr[bool](s.v) }
func (s shapeOp) i32() (instr, error)   { return shapeInstr[int32](s.v) }
func (s shapeOp) i64() (instr, error)   { return shapeInstr[int64](s.v) }
func (s shapeOp) f32() (instr, error)   { return shapeInstr[float32](s.v) }
func (s shapeOp) f64() (instr, error)   { return shapeInstr[float64](s.v) }

func shapeInstr[T any](v *tile.Value) (instr, error) {
	d, x := v.ID, v.Args[0].ID
	switch v.Op {
	case tile.OpSplat:
		if f, ok := any(func(d, a []float32) { splat32(d, a[0]) }).(func(d, a []T)); ok {
			return mk1(d, x, f), nil
		}
		return mk1(d, x, func(d, a []T) {
			s := a[0]
			for i := range d {
				d[i] = s
			}
		}), nil
	case tile.OpBroadcast:
		in, out := pad3(v.Args[0].Type.Shape), pad3(v.Type.Shape)
		// source strides, 0 along broadcast dimensions
		var st [3]int
		acc := 1
		for i := 2; i >= 0; i-- {
			if in[i] != 1 {
				st[i] = acc
			}
			acc *= in[i]
		}
		return mk1(d, x, func(d, a []T) {
			o := 0
			for i := 0; i < out[0]; i++ {
				for j := 0; j < out[1]; j++ {
					base := i*st[0] + j*st[1]
					row := d[o : o+out[2]]
					if st[2] == 0 {
						s := a[base]
						for k := range row {
							row[k] = s
						}
					} else {
						copy(row, a[base:base+out[2]])
					}
					o += out[2]
				}
			}
		}), nil
	case tile.OpTrans:
		m, n := v.Args[0].Type.Shape.Dims[0], v.Args[0].Type.Shape.Dims[1]
		return mk1(d, x, func(d, a []T) {
			for i := 0; i < m; i++ {
				row := a[i*n : i*n+n]
				for j, x := range row {
					d[j*m+i] = x
				}
			}
		}), nil
	}
	return nil, fmt.Errorf("no shape rule for %v", v.Op)
}

// pad3 writes s as three dimensions, leading ones of size 1.
func pad3(s tile.Shape) [3]int {
	out := [3]int{1, 1, 1}
	for i := 0; i < s.Rank; i++ {
		out[3-s.Rank+i] = s.Dims[i]
	}
	return out
}

// ---- select ----

type selectOp struct{ d, c, a, b int }

func (s selectOp) boolF() (instr, error) { return selectInstr[bool](s), nil }
func (s selectOp) i32() (instr, error)   { return selectInstr[int32](s), nil }
func (s selectOp) i64() (instr, error)   { return selectInstr[int64](s), nil }
func (s selectOp) f32() (instr, error)   { return selectInstr[float32](s), nil }
func (s selectOp) f64() (instr, error)   { return selectInstr[float64](s), nil }

func selectInstr[T any](s selectOp) instr {
	return func(f *frame) error {
		d, c, a, b := get[T](f, s.d), get[bool](f, s.c), get[T](f, s.a), get[T](f, s.b)
		c, a, b = c[:len(d)], a[:len(d)], b[:len(d)]
		for i := range d {
			if c[i] {
				d[i] = a[i]
			} else {
				d[i] = b[i]
			}
		}
		return nil
	}
}

// ---- loops ----

func (c *compiler) forLoop(v *tile.Value) (instr, error) {
	body, err := c.block(v.Body, v)
	if err != nil {
		return nil, err
	}
	lo, hi, st := v.Args[0].ID, v.Args[1].ID, v.Args[2].ID
	is64 := v.Args[0].Type.DType == tile.I64
	args := v.Body.Args
	inits := v.Args[3:]
	yield := v.Body.Values[len(v.Body.Values)-1]
	// A yielded value that shares storage with a carried value must be staged
	// so that one carried value is not overwritten before it is read.
	argStore := map[int]bool{}
	for _, a := range args[1:] {
		argStore[c.e.root(a.ID)] = true
	}
	stage := false
	for _, y := range yield.Args {
		if argStore[c.e.root(y.ID)] {
			stage = true
		}
	}
	var stageIDs []int
	if stage {
		for _, a := range args[1:] {
			stageIDs = append(stageIDs, c.scratch(storageKind(a.Type), a.Type.Shape.Numel()))
		}
	}
	ivID := args[0].ID
	loopID := v.String()
	return func(f *frame) error {
		for i, in := range inits {
			copyVal(f.vals[args[i+1].ID], f.vals[in.ID])
		}
		var l, h, s int64
		if is64 {
			l, h, s = get[int64](f, lo)[0], get[int64](f, hi)[0], get[int64](f, st)[0]
		} else {
			l, h, s = int64(get[int32](f, lo)[0]), int64(get[int32](f, hi)[0]), int64(get[int32](f, st)[0])
		}
		if s <= 0 && l < h {
			return &tile.ExecError{Value: loopID, Msg: fmt.Sprintf("step %d is not positive", s)}
		}
		for iv := l; iv < h; iv += s {
			if is64 {
				get[int64](f, ivID)[0] = iv
			} else {
				get[int32](f, ivID)[0] = int32(iv)
			}
			if err := runCode(body, f); err != nil {
				return err
			}
			if stage {
				for i, y := range yield.Args {
					copyVal(f.vals[stageIDs[i]], f.vals[y.ID])
				}
				for i := range yield.Args {
					copyVal(f.vals[args[i+1].ID], f.vals[stageIDs[i]])
				}
			} else {
				for i, y := range yield.Args {
					copyVal(f.vals[args[i+1].ID], f.vals[y.ID])
				}
			}
		}
		return nil
	}, nil
}

func copyVal(dst, src any) {
	switch d := dst.(type) {
	case []bool:
		copy(d, src.([]bool))
	case []int32:
		copy(d, src.([]int32))
	case []int64:
		copy(d, src.([]int64))
	case []float32:
		copy(d, src.([]float32))
	case []float64:
		copy(d, src.([]float64))
	}
}
