package cpu

import (
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

type integer interface{ ~int32 | ~int64 }
type float interface{ ~float32 | ~float64 }
type number interface{ integer | float }

// ---- pointers and memory ----

func addPtrL[O integer](d, p []int64, off []O) {
	p, off = p[:len(d)], off[:len(d)]
	for i := range d {
		d[i] = p[i] + int64(off[i])
	}
}

func (c *compiler) memory(v *tile.Value) (instr, error) {
	root := c.roots[v.Args[0].ID]
	if root == nil {
		return nil, fmt.Errorf("pointer has no root parameter")
	}
	contig := c.lanes[v.Args[0].ID].Contiguous
	scratch := -1
	if contig {
		scratch = c.scratch(tile.I64, v.Args[0].Type.Shape.Numel())
	}
	rowW := c.rowPath(v) // rows of a 2-D tile, each contiguous: a copy per row
	switch v.Args[0].Type.DType {
	case tile.F32:
		return memInstr[float32](v, root, contig, scratch, rowW)
	case tile.F64:
		return memInstr[float64](v, root, contig, scratch, rowW)
	case tile.I32:
		return memInstr[int32](v, root, contig, scratch, rowW)
	}
	return nil, fmt.Errorf("pointer to %v", v.Args[0].Type.DType)
}

func oob(v, root *tile.Value, lane int, off int64, n int, verb string) error {
	return &tile.ExecError{Value: v.String(), Msg: fmt.Sprintf("lane %d %s offset %d of %s, outside its %d elements", lane, verb, off, root.Name, n)}
}

// window returns buf[base : base+n] when every lane of a contiguous access
// is enabled and inside buf, or nil: then the lane-by-lane path runs and
// reports any fault precisely.
func window[T any](buf []T, base int64, m []bool, n int) []T {
	if base < 0 || base+int64(n) > int64(len(buf)) || !allTrue(m) {
		return nil
	}
	return buf[base : base+int64(n)]
}

// allTrue reports whether every element of m is true, eight at a time (a Go
// bool is one byte holding 0 or 1).
func allTrue(m []bool) bool {
	const ones = 0x0101010101010101
	if len(m) >= 8 {
		words := unsafe.Slice((*uint64)(unsafe.Pointer(&m[0])), len(m)/8)
		for _, w := range words {
			if w != ones {
				return false
			}
		}
		m = m[len(words)*8:]
	}
	for _, on := range m {
		if !on {
			return false
		}
	}
	return true
}

// lanes gives the element offset of each lane: ptr itself, or for a
// contiguous block whose lanes were not computed, base + i in scratch.
func lanes(ptr []int64, contig bool, scratch []int64) []int64 {
	if !contig {
		return ptr
	}
	base := ptr[0]
	for i := range scratch {
		scratch[i] = base + int64(i)
	}
	return scratch
}

// rowLanes fills in a contiguous row's addresses from its lane 0 (a
// rowFirst pointer computes lane 0 of each row alone; for one computed in
// full it rewrites the same values).
func rowLanes(row []int64) {
	for j := 1; j < len(row); j++ {
		row[j] = row[0] + int64(j)
	}
}

// loadLanes loads lanes [lo, hi) one by one: enabled ones (m nil: all) from
// buf, the others from oth (or 0).
func loadLanes[T number](v, root *tile.Value, buf, dst []T, ptr []int64, m []bool, oth []T, lo, hi int) error {
	n := uint64(len(buf))
	for i := lo; i < hi; i++ {
		o := ptr[i]
		switch {
		case m == nil || m[i]:
			if uint64(o) >= n {
				return oob(v, root, i, o, len(buf), "reads")
			}
			dst[i] = buf[o]
		case oth != nil:
			dst[i] = oth[i]
		default:
			dst[i] = 0
		}
	}
	return nil
}

// memInstr compiles load, store and atomic_add. contig says the pointer
// block is contiguous (analysis.Axes): a fully enabled access is then a copy,
// and only lane 0 of the pointer block is read (lanes rebuilds the others in
// the scratch slot for a partial access). rowW > 0 says each row of rowW
// lanes is contiguous: a fully enabled row in bounds is then a copy, the
// others go lane by lane.
func memInstr[T number](v, root *tile.Value, contig bool, scratch, rowW int) (instr, error) {
	p := v.Args[0].ID
	pi := int(root.Aux)
	switch v.Op {
	case tile.OpLoad:
		d := v.ID
		mask, other := -1, -1
		if len(v.Args) > 1 {
			mask = v.Args[1].ID
		}
		if len(v.Args) > 2 {
			other = v.Args[2].ID
		}
		return func(f *frame) error {
			buf, dst, ptr := f.bufs[pi].([]T), get[T](f, d), get[int64](f, p)
			if contig {
				var m []bool
				if mask >= 0 {
					m = get[bool](f, mask)
				}
				if w := window(buf, ptr[0], m, len(dst)); w != nil {
					copy(dst, w)
					return nil
				}
				ptr = lanes(ptr, contig, get[int64](f, scratch))
			}
			ptr = ptr[:len(dst)]
			var m []bool
			var oth []T
			if mask >= 0 {
				m = get[bool](f, mask)[:len(dst)]
				if other >= 0 {
					oth = get[T](f, other)[:len(dst)]
				}
			}
			if rowW == 0 {
				return loadLanes(v, root, buf, dst, ptr, m, oth, 0, len(dst))
			}
			for r := 0; r < len(dst); r += rowW {
				var mr []bool
				if m != nil {
					mr = m[r : r+rowW]
				}
				if w := window(buf, ptr[r], mr, rowW); w != nil {
					copy(dst[r:r+rowW], w)
					continue
				}
				rowLanes(ptr[r : r+rowW]) // only lane 0 of a row may have been computed
				if err := loadLanes(v, root, buf, dst, ptr, m, oth, r, r+rowW); err != nil {
					return err
				}
			}
			return nil
		}, nil
	case tile.OpStore:
		x := v.Args[1].ID
		mask := -1
		if len(v.Args) > 2 {
			mask = v.Args[2].ID
		}
		return func(f *frame) error {
			buf, val, ptr := f.bufs[pi].([]T), get[T](f, x), get[int64](f, p)
			n := uint64(len(buf))
			var m []bool
			if mask >= 0 {
				m = get[bool](f, mask)[:len(val)]
			}
			if contig {
				if w := window(buf, ptr[0], m, len(val)); w != nil {
					copy(w, val)
					return nil
				}
				ptr = lanes(ptr, contig, get[int64](f, scratch))
			}
			ptr = ptr[:len(val)]
			lo, hi, step := 0, len(val), len(val)
			if rowW > 0 {
				step = rowW
			}
			for r := lo; r < hi; r += step {
				var mr []bool
				if m != nil {
					mr = m[r : r+step]
				}
				if rowW > 0 {
					if w := window(buf, ptr[r], mr, step); w != nil {
						copy(w, val[r:r+step])
						continue
					}
					rowLanes(ptr[r : r+step]) // only lane 0 of a row may have been computed
				}
				for i := r; i < r+step; i++ {
					if m != nil && !m[i] {
						continue
					}
					o := ptr[i]
					if uint64(o) >= n {
						return oob(v, root, i, o, len(buf), "writes")
					}
					buf[o] = val[i]
				}
			}
			return nil
		}, nil
	case tile.OpAtomicAdd:
		d, x := v.ID, v.Args[1].ID
		mask := -1
		if len(v.Args) > 2 {
			mask = v.Args[2].ID
		}
		return func(f *frame) error {
			buf, val, ptr, old := f.bufs[pi].([]T), get[T](f, x), get[int64](f, p), get[T](f, d)
			if contig {
				ptr = lanes(ptr, contig, get[int64](f, scratch))
			}
			ptr = ptr[:len(val)]
			n := uint64(len(buf))
			var m []bool
			if mask >= 0 {
				m = get[bool](f, mask)[:len(val)]
			}
			for i, o := range ptr {
				if m != nil && !m[i] {
					old[i] = 0
					continue
				}
				if uint64(o) >= n {
					return oob(v, root, i, o, len(buf), "adds to")
				}
				old[i] = atomicAdd(&buf[o], val[i])
			}
			return nil
		}, nil
	}
	return nil, fmt.Errorf("not a memory op")
}

// atomicAdd adds x to *p atomically and returns the old value.
func atomicAdd[T number](p *T, x T) T {
	switch q := any(p).(type) {
	case *int32:
		return T(atomic.AddInt32(q, int32(x)) - int32(x))
	case *float32:
		u := (*uint32)(unsafe.Pointer(q))
		for {
			o := atomic.LoadUint32(u)
			nv := math.Float32bits(math.Float32frombits(o) + float32(x))
			if atomic.CompareAndSwapUint32(u, o, nv) {
				return T(math.Float32frombits(o))
			}
		}
	case *float64:
		u := (*uint64)(unsafe.Pointer(q))
		for {
			o := atomic.LoadUint64(u)
			nv := math.Float64bits(math.Float64frombits(o) + float64(x))
			if atomic.CompareAndSwapUint64(u, o, nv) {
				return T(math.Float64frombits(o))
			}
		}
	case *int64:
		return T(atomic.AddInt64(q, int64(x)) - int64(x))
	}
	panic("unreachable: atomicAdd on an unsupported type")
}

// ---- binary ----

func (c *compiler) binary(v *tile.Value) (instr, error) {
	d, x, y := v.ID, v.Args[0].ID, v.Args[1].ID
	switch v.Args[0].Type.DType {
	case tile.F32:
		return binFloat[float32](v, d, x, y)
	case tile.F64:
		return binFloat[float64](v, d, x, y)
	case tile.I32:
		return binInt[int32](v, d, x, y)
	case tile.I64:
		return binInt[int64](v, d, x, y)
	case tile.I1:
		return binBool(v, d, x, y)
	}
	return nil, fmt.Errorf("%v on %v", v.Op, v.Args[0].Type)
}

func addL[T number](d, a, b []T) {
	a, b = a[:len(d)], b[:len(d)]
	for i := range d {
		d[i] = a[i] + b[i]
	}
}

func subL[T number](d, a, b []T) {
	a, b = a[:len(d)], b[:len(d)]
	for i := range d {
		d[i] = a[i] - b[i]
	}
}

func mulL[T number](d, a, b []T) {
	a, b = a[:len(d)], b[:len(d)]
	for i := range d {
		d[i] = a[i] * b[i]
	}
}

func binFloat[T float](v *tile.Value, d, x, y int) (instr, error) {
	if f, ok := any(vecBinF32(v.Op)).(func(d, a, b []T)); ok && f != nil { // float32 with AVX
		return mk2(d, x, y, f), nil
	}
	switch v.Op {
	case tile.OpAdd:
		return mk2(d, x, y, addL[T]), nil
	case tile.OpSub:
		return mk2(d, x, y, subL[T]), nil
	case tile.OpMul:
		return mk2(d, x, y, mulL[T]), nil
	case tile.OpDiv:
		return mk2(d, x, y, func(d, a, b []T) {
			a, b = a[:len(d)], b[:len(d)]
			for i := range d {
				d[i] = a[i] / b[i]
			}
		}), nil
	case tile.OpRem:
		return mk2(d, x, y, func(d, a, b []T) {
			a, b = a[:len(d)], b[:len(d)]
			for i := range d {
				d[i] = T(math.Mod(float64(a[i]), float64(b[i])))
			}
		}), nil
	case tile.OpMin:
		return mk2(d, x, y, func(d, a, b []T) {
			a, b = a[:len(d)], b[:len(d)]
			for i := range d {
				if p := a[i]; p != p || p < b[i] {
					d[i] = p
				} else {
					d[i] = b[i]
				}
			}
		}), nil
	case tile.OpMax:
		return mk2(d, x, y, func(d, a, b []T) {
			a, b = a[:len(d)], b[:len(d)]
			for i := range d {
				if p := a[i]; p != p || p > b[i] {
					d[i] = p
				} else {
					d[i] = b[i]
				}
			}
		}), nil
	case tile.OpPow:
		return mk2(d, x, y, func(d, a, b []T) {
			a, b = a[:len(d)], b[:len(d)]
			for i := range d {
				d[i] = T(interp.Pow64(float64(a[i]), float64(b[i])))
			}
		}), nil
	}
	return nil, fmt.Errorf("%v on floats", v.Op)
}

func binInt[T integer](v *tile.Value, d, x, y int) (instr, error) {
	switch v.Op {
	case tile.OpAdd:
		return mk2(d, x, y, addL[T]), nil
	case tile.OpSub:
		return mk2(d, x, y, subL[T]), nil
	case tile.OpMul:
		return mk2(d, x, y, mulL[T]), nil
	case tile.OpDiv, tile.OpRem:
		rem := v.Op == tile.OpRem
		return mk2(d, x, y, func(d, a, b []T) {
			a, b = a[:len(d)], b[:len(d)]
			if divPow2(d, a, b, rem) {
				return
			}
			for i := range d {
				switch {
				case b[i] == 0: // defined here, unspecified on the GPU: x/0 = -1, x%0 = x
					if rem {
						d[i] = a[i]
					} else {
						d[i] = -1
					}
				case b[i] == -1: // MinInt / -1 wraps, as on the GPU; Go would trap
					if rem {
						d[i] = 0
					} else {
						d[i] = -a[i]
					}
				case rem:
					d[i] = a[i] % b[i]
				default:
					d[i] = a[i] / b[i]
				}
			}
		}), nil
	case tile.OpMin:
		return mk2(d, x, y, func(d, a, b []T) {
			a, b = a[:len(d)], b[:len(d)]
			for i := range d {
				d[i] = min(a[i], b[i])
			}
		}), nil
	case tile.OpMax:
		return mk2(d, x, y, func(d, a, b []T) {
			a, b = a[:len(d)], b[:len(d)]
			for i := range d {
				d[i] = max(a[i], b[i])
			}
		}), nil
	case tile.OpAnd:
		return mk2(d, x, y, func(d, a, b []T) {
			a, b = a[:len(d)], b[:len(d)]
			for i := range d {
				d[i] = a[i] & b[i]
			}
		}), nil
	case tile.OpOr:
		return mk2(d, x, y, func(d, a, b []T) {
			a, b = a[:len(d)], b[:len(d)]
			for i := range d {
				d[i] = a[i] | b[i]
			}
		}), nil
	case tile.OpXor:
		return mk2(d, x, y, func(d, a, b []T) {
			a, b = a[:len(d)], b[:len(d)]
			for i := range d {
				d[i] = a[i] ^ b[i]
			}
		}), nil
	}
	return nil, fmt.Errorf("%v on ints", v.Op)
}

func binBool(v *tile.Value, d, x, y int) (instr, error) {
	var fn func(d, a, b []bool)
	switch v.Op {
	case tile.OpAnd:
		fn = func(d, a, b []bool) {
			a, b = a[:len(d)], b[:len(d)]
			for i := range d {
				d[i] = a[i] && b[i]
			}
		}
	case tile.OpOr:
		fn = func(d, a, b []bool) {
			a, b = a[:len(d)], b[:len(d)]
			for i := range d {
				d[i] = a[i] || b[i]
			}
		}
	case tile.OpXor:
		fn = func(d, a, b []bool) {
			a, b = a[:len(d)], b[:len(d)]
			for i := range d {
				d[i] = a[i] != b[i]
			}
		}
	default:
		return nil, fmt.Errorf("%v on i1", v.Op)
	}
	return mk2(d, x, y, fn), nil
}

// ---- comparisons ----

func (c *compiler) compare(v *tile.Value) (instr, error) {
	d, x, y := v.ID, v.Args[0].ID, v.Args[1].ID
	switch v.Args[0].Type.DType {
	case tile.F32:
		return cmpInstr[float32](v.Op, d, x, y)
	case tile.F64:
		return cmpInstr[float64](v.Op, d, x, y)
	case tile.I32:
		return cmpInstr[int32](v.Op, d, x, y)
	case tile.I64:
		return cmpInstr[int64](v.Op, d, x, y)
	case tile.I1:
		switch v.Op {
		case tile.OpEq:
			return mk2(d, x, y, func(d, a, b []bool) {
				for i := range d {
					d[i] = a[i] == b[i]
				}
			}), nil
		case tile.OpNe:
			return mk2(d, x, y, func(d, a, b []bool) {
				for i := range d {
					d[i] = a[i] != b[i]
				}
			}), nil
		}
	}
	return nil, fmt.Errorf("%v on %v", v.Op, v.Args[0].Type)
}

func cmpInstr[T number](op tile.Op, d, x, y int) (instr, error) {
	var fn func(d []bool, a, b []T)
	switch op {
	case tile.OpEq:
		fn = func(d []bool, a, b []T) {
			a, b = a[:len(d)], b[:len(d)]
			for i := range d {
				d[i] = a[i] == b[i]
			}
		}
	case tile.OpNe:
		fn = func(d []bool, a, b []T) {
			a, b = a[:len(d)], b[:len(d)]
			for i := range d {
				d[i] = a[i] != b[i]
			}
		}
	case tile.OpLt:
		fn = func(d []bool, a, b []T) {
			a, b = a[:len(d)], b[:len(d)]
			for i := range d {
				d[i] = a[i] < b[i]
			}
		}
	case tile.OpLe:
		fn = func(d []bool, a, b []T) {
			a, b = a[:len(d)], b[:len(d)]
			for i := range d {
				d[i] = a[i] <= b[i]
			}
		}
	case tile.OpGt:
		fn = func(d []bool, a, b []T) {
			a, b = a[:len(d)], b[:len(d)]
			for i := range d {
				d[i] = a[i] > b[i]
			}
		}
	case tile.OpGe:
		fn = func(d []bool, a, b []T) {
			a, b = a[:len(d)], b[:len(d)]
			for i := range d {
				d[i] = a[i] >= b[i]
			}
		}
	default:
		return nil, fmt.Errorf("%v is not a comparison", op)
	}
	return mk2(d, x, y, fn), nil
}

// ---- unary ----

func (c *compiler) unary(v *tile.Value) (instr, error) {
	d, x := v.ID, v.Args[0].ID
	switch v.Args[0].Type.DType {
	case tile.F32:
		return unaryFloat[float32](v.Op, d, x)
	case tile.F64:
		return unaryFloat[float64](v.Op, d, x)
	case tile.I32:
		return unaryInt[int32](v.Op, d, x)
	case tile.I64:
		return unaryInt[int64](v.Op, d, x)
	case tile.I1:
		if v.Op == tile.OpNot {
			return mk1(d, x, func(d, a []bool) {
				for i := range d {
					d[i] = !a[i]
				}
			}), nil
		}
	}
	return nil, fmt.Errorf("%v on %v", v.Op, v.Args[0].Type)
}

// mathL applies a float64 function elementwise, rounding to T.
func mathL[T float](fn func(float64) float64) func(d, a []T) {
	return func(d, a []T) {
		a = a[:len(d)]
		for i := range d {
			d[i] = T(fn(float64(a[i])))
		}
	}
}

func unaryFloat[T float](op tile.Op, d, x int) (instr, error) {
	var fn func(d, a []T)
	switch op {
	case tile.OpNeg:
		fn = func(d, a []T) {
			a = a[:len(d)]
			for i := range d {
				d[i] = -a[i]
			}
		}
	case tile.OpAbs:
		fn = func(d, a []T) {
			a = a[:len(d)]
			for i := range d {
				d[i] = T(math.Abs(float64(a[i])))
			}
		}
	case tile.OpSign:
		fn = func(d, a []T) {
			a = a[:len(d)]
			for i := range d {
				switch p := a[i]; {
				case p > 0:
					d[i] = 1
				case p < 0:
					d[i] = -1
				default:
					d[i] = p // ±0 and NaN
				}
			}
		}
	case tile.OpExp:
		fn = expL[T]
	case tile.OpTanh:
		fn = tanhL[T]
	case tile.OpSqrt:
		fn = func(d, a []T) {
			a = a[:len(d)]
			for i := range d {
				d[i] = T(math.Sqrt(float64(a[i])))
			}
		}
	case tile.OpRsqrt:
		fn = func(d, a []T) {
			a = a[:len(d)]
			for i := range d {
				d[i] = T(1 / math.Sqrt(float64(a[i])))
			}
		}
	case tile.OpFloor:
		fn = func(d, a []T) {
			a = a[:len(d)]
			for i := range d {
				d[i] = T(math.Floor(float64(a[i])))
			}
		}
	case tile.OpCeil:
		fn = func(d, a []T) {
			a = a[:len(d)]
			for i := range d {
				d[i] = T(math.Ceil(float64(a[i])))
			}
		}
	default:
		m, ok := interp.Func64(op) // the spec's own definition
		if !ok {
			return nil, fmt.Errorf("%v on floats", op)
		}
		fn = mathL[T](m)
	}
	return mk1(d, x, fn), nil
}

func expL[T float](d, a []T) {
	if d32, ok := any(d).([]float32); ok {
		expSlice32(d32, any(a).([]float32))
		return
	}
	a = a[:len(d)]
	for i := range d {
		d[i] = T(interp.Exp64(float64(a[i])))
	}
}

func tanhL[T float](d, a []T) {
	if d32, ok := any(d).([]float32); ok {
		tanhSlice32(d32, any(a).([]float32))
		return
	}
	a = a[:len(d)]
	for i := range d {
		d[i] = T(math.Tanh(float64(a[i])))
	}
}

func unaryInt[T integer](op tile.Op, d, x int) (instr, error) {
	var fn func(d, a []T)
	switch op {
	case tile.OpNeg:
		fn = func(d, a []T) {
			for i := range d {
				d[i] = -a[i]
			}
		}
	case tile.OpNot:
		fn = func(d, a []T) {
			for i := range d {
				d[i] = ^a[i]
			}
		}
	case tile.OpAbs:
		fn = func(d, a []T) {
			for i := range d {
				if a[i] < 0 {
					d[i] = -a[i]
				} else {
					d[i] = a[i]
				}
			}
		}
	case tile.OpSign:
		fn = func(d, a []T) {
			for i := range d {
				switch {
				case a[i] > 0:
					d[i] = 1
				case a[i] < 0:
					d[i] = -1
				default:
					d[i] = 0
				}
			}
		}
	default:
		return nil, fmt.Errorf("%v on ints", op)
	}
	return mk1(d, x, fn), nil
}

// ---- casts ----

func castInstr(v *tile.Value) (instr, error) {
	d, x := v.ID, v.Args[0].ID
	from, to := v.Args[0].Type.DType, v.Type.DType
	if from == to {
		return func(f *frame) error { copyVal(f.vals[d], f.vals[x]); return nil }, nil
	}
	if to == tile.I1 {
		switch from {
		case tile.I32:
			return mk1(d, x, toBool[int32]), nil
		case tile.I64:
			return mk1(d, x, toBool[int64]), nil
		case tile.F32:
			return mk1(d, x, toBool[float32]), nil
		case tile.F64:
			return mk1(d, x, toBool[float64]), nil
		}
	}
	switch from {
	case tile.I1:
		switch to {
		case tile.I32:
			return mk1(d, x, fromBool[int32]), nil
		case tile.I64:
			return mk1(d, x, fromBool[int64]), nil
		case tile.F32:
			return mk1(d, x, fromBool[float32]), nil
		case tile.F64:
			return mk1(d, x, fromBool[float64]), nil
		}
	case tile.I32:
		return castFrom[int32](d, x, to)
	case tile.I64:
		return castFrom[int64](d, x, to)
	case tile.F32:
		return castFrom[float32](d, x, to)
	case tile.F64:
		return castFrom[float64](d, x, to)
	}
	return nil, fmt.Errorf("cast %v to %v", from, to)
}

func toBool[S number](d []bool, a []S) {
	for i := range d {
		d[i] = a[i] != 0
	}
}

func fromBool[D number](d []D, a []bool) {
	for i := range d {
		if a[i] {
			d[i] = 1
		} else {
			d[i] = 0
		}
	}
}

func castFrom[S number](d, x int, to tile.DType) (instr, error) {
	switch to {
	case tile.I32:
		return mk1(d, x, convert[S, int32]), nil
	case tile.I64:
		return mk1(d, x, convert[S, int64]), nil
	case tile.F32:
		return mk1(d, x, convert[S, float32]), nil
	case tile.F64:
		return mk1(d, x, convert[S, float64]), nil
	}
	return nil, fmt.Errorf("cast to %v", to)
}

// convert converts elementwise. Floats to ints truncate toward zero and
// saturate; NaN gives 0 (PTX cvt.rzi semantics).
func convert[S, D number](d []D, a []S) {
	var zd D
	var zs S
	_, to32 := any(zd).(int32)
	_, to64 := any(zd).(int64)
	_, fromF32 := any(zs).(float32)
	_, fromF64 := any(zs).(float64)
	if (to32 || to64) && (fromF32 || fromF64) {
		var lo, hi int64 = math.MinInt32, math.MaxInt32
		if to64 {
			lo, hi = math.MinInt64, math.MaxInt64
		}
		flo, fhi := float64(lo), float64(hi)
		for i := range d {
			switch x := float64(a[i]); {
			case x != x:
				d[i] = 0
			case x <= flo:
				d[i] = D(lo)
			case x >= fhi:
				d[i] = D(hi)
			default:
				d[i] = D(x)
			}
		}
		return
	}
	for i := range d {
		d[i] = D(a[i])
	}
}

// ---- reductions ----

type reduceOp struct{ v *tile.Value }

func (r reduceOp) boolF() (instr, error) { return nil, fmt.Errorf("reduction of i1") }
func (r reduceOp) i32() (instr, error)   { return reduceInstr[int32](r.v) }
func (r reduceOp) i64() (instr, error)   { return reduceInstr[int64](r.v) }
func (r reduceOp) f32() (instr, error)   { return reduceInstr[float32](r.v) }
func (r reduceOp) f64() (instr, error)   { return reduceInstr[float64](r.v) }

// reduceInstr views the operand as [outer, n, inner] around the reduced axis
// and combines the n slices of length inner in order.
func reduceInstr[T number](v *tile.Value) (instr, error) {
	s := v.Args[0].Type.Shape
	ax := int(v.Aux)
	outer, n, inner := 1, s.Dims[ax], 1
	for i := 0; i < ax; i++ {
		outer *= s.Dims[i]
	}
	for i := ax + 1; i < s.Rank; i++ {
		inner *= s.Dims[i]
	}
	var combine func(acc, row []T)
	switch v.Op {
	case tile.OpReduceSum:
		combine = addInto[T]
	case tile.OpReduceMax:
		combine = maxInto[T]
	case tile.OpReduceMin:
		combine = minInto[T]
	default:
		return nil, fmt.Errorf("%v is not a reduction", v.Op)
	}
	return mk1(v.ID, v.Args[0].ID, func(d, a []T) {
		for o := 0; o < outer; o++ {
			acc := d[o*inner : o*inner+inner]
			base := o * n * inner
			if inner == 1 {
				acc[0] = reduceRow(v.Op, a[base:base+n])
				continue
			}
			copy(acc, a[base:base+inner])
			for k := 1; k < n; k++ {
				combine(acc, a[base+k*inner:base+k*inner+inner])
			}
		}
	}), nil
}

// sum16 is the sum of len(x) elements, a multiple of 16, in sixteen
// partial sums combined pairwise (s[j]+s[j+8], then +[j+4], +[j+2], then the
// two): the order the vector kernel adds in.
func sum16(x []float32) float32 {
	var s [16]float32
	for i := 0; i < len(x); i += 16 {
		for j := range s {
			s[j] += x[i+j]
		}
	}
	for w := 8; w >= 1; w /= 2 {
		for j := 0; j < w; j++ {
			s[j] += s[j+w]
		}
	}
	return s[0]
}

// reduceRow reduces one contiguous row.
func reduceRow[T number](op tile.Op, row []T) T {
	r := row[0]
	switch op {
	case tile.OpReduceSum:
		if r32, ok := any(row).([]float32); ok {
			return any(sumRow32(r32)).(T)
		}
		// four partial sums in lanes i mod 4, combined pairwise: shorter
		// dependency chains than one running sum, and no less accurate
		var s [4]T
		i := 0
		for ; i+4 <= len(row); i += 4 {
			s[0] += row[i]
			s[1] += row[i+1]
			s[2] += row[i+2]
			s[3] += row[i+3]
		}
		for ; i < len(row); i++ {
			s[0] += row[i]
		}
		return (s[0] + s[1]) + (s[2] + s[3])
	case tile.OpReduceMax:
		if r32, ok := any(row).([]float32); ok {
			if m, ok := maxRow32(r32); ok {
				return any(m).(T)
			}
		}
		for _, p := range row[1:] {
			if p > r || p != p {
				r = p
			}
		}
	case tile.OpReduceMin:
		for _, p := range row[1:] {
			if p < r || p != p {
				r = p
			}
		}
	}
	return r
}

func addInto[T number](acc, row []T) {
	row = row[:len(acc)]
	for j := range acc {
		acc[j] += row[j]
	}
}

// maxInto and minInto keep NaN once seen: NaN compares false, and a NaN
// operand replaces the accumulator.
func maxInto[T number](acc, row []T) {
	row = row[:len(acc)]
	for j := range acc {
		if p := row[j]; p > acc[j] || p != p {
			acc[j] = p
		}
	}
}

func minInto[T number](acc, row []T) {
	row = row[:len(acc)]
	for j := range acc {
		if p := row[j]; p < acc[j] || p != p {
			acc[j] = p
		}
	}
}

// ---- dot ----

func (c *compiler) dot(v *tile.Value) (instr, error) {
	a, b, acc := v.Args[0], v.Args[1], v.Args[2]
	m, k, n := a.Type.Shape.Dims[0], a.Type.Shape.Dims[1], b.Type.Shape.Dims[1]
	d, ai, bi, ci := v.ID, a.ID, b.ID, acc.ID
	if a.Type.DType == tile.F64 {
		return func(f *frame) error {
			dotF64(get[float64](f, d), get[float64](f, ai), get[float64](f, bi), get[float64](f, ci), m, k, n)
			return nil
		}, nil
	}
	switch v.Prec {
	case tile.PrecTF32, tile.PrecTF32TB, tile.PrecBF16:
		// copies of the operands as the dot sees them first
		// (tile.Precision.Operands)
		roundA, roundB := v.Prec.Operands()
		sa, sb := c.scratch(tile.F32, m*k), c.scratch(tile.F32, k*n)
		return func(f *frame) error {
			ra, rb := get[float32](f, sa), get[float32](f, sb)
			for i, x := range get[float32](f, ai) {
				ra[i] = roundA(x)
			}
			for i, x := range get[float32](f, bi) {
				rb[i] = roundB(x)
			}
			dotF32(get[float32](f, d), ra, rb, get[float32](f, ci), m, k, n)
			return nil
		}, nil
	case tile.PrecTF32x3:
		// acc + a_lo·b_hi + a_hi·b_lo + a_hi·b_hi, as the interpreter
		ah, al := c.scratch(tile.F32, m*k), c.scratch(tile.F32, m*k)
		bh, bl := c.scratch(tile.F32, k*n), c.scratch(tile.F32, k*n)
		return func(f *frame) error {
			rah, ral, rbh, rbl := get[float32](f, ah), get[float32](f, al), get[float32](f, bh), get[float32](f, bl)
			for i, x := range get[float32](f, ai) {
				rah[i], ral[i] = tile.SplitTF32(x)
			}
			for i, x := range get[float32](f, bi) {
				rbh[i], rbl[i] = tile.SplitTF32(x)
			}
			out := get[float32](f, d)
			dotF32(out, ral, rbh, get[float32](f, ci), m, k, n)
			dotF32(out, rah, rbl, out, m, k, n)
			dotF32(out, rah, rbh, out, m, k, n)
			return nil
		}, nil
	}
	return func(f *frame) error {
		dotF32(get[float32](f, d), get[float32](f, ai), get[float32](f, bi), get[float32](f, ci), m, k, n)
		return nil
	}, nil
}

// dotL computes d = acc + a·b for a [m,k], b [k,n], accumulating in T, in
// the order of k (dotF32 and dotF64 are this with fused multiply-adds on
// CPUs that have them).
func dotL[T float](d, a, b, acc []T, m, k, n int) {
	copy(d, acc)
	for i := 0; i < m; i++ {
		drow := d[i*n : i*n+n]
		arow := a[i*k : i*k+k]
		for kk, aik := range arow {
			brow := b[kk*n : kk*n+n]
			for j := range drow {
				drow[j] += aik * brow[j]
			}
		}
	}
}

// divPow2 is the common case of index arithmetic: every divisor the same
// power of two and every dividend non-negative, where a shift and a mask
// give a/b and a%b without a division per lane. It reports whether it
// handled d.
func divPow2[T integer](d, a, b []T, rem bool) bool {
	if len(b) == 0 {
		return false
	}
	p := b[0]
	if p <= 0 || p&(p-1) != 0 {
		return false
	}
	for i := range b {
		if b[i] != p || a[i] < 0 {
			return false
		}
	}
	if rem {
		for i := range d {
			d[i] = a[i] & (p - 1)
		}
		return true
	}
	shift := bits.TrailingZeros64(uint64(p))
	for i := range d {
		d[i] = a[i] >> shift
	}
	return true
}
