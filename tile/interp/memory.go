package interp

import (
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/tilefuse/tilefuse/tile"
)

func addPtr(v *tile.Value, x ptrs, off any) (any, error) {
	r := ptrs{param: x.param, off: make([]int64, len(x.off))}
	switch o := off.(type) {
	case []int32:
		for i := range r.off {
			r.off[i] = x.off[i] + int64(o[i])
		}
	case []int64:
		for i := range r.off {
			r.off[i] = x.off[i] + o[i]
		}
	default:
		return nil, fault(v, "offset of type %T", off)
	}
	return r, nil
}

// mask gives operand i of v as a mask, or nil (every lane enabled) when v
// has no operand i.
func (p *program) mask(v *tile.Value, i int) []bool {
	if i < len(v.Args) {
		return p.arg(v, i).([]bool)
	}
	return nil
}

func (p *program) load(v *tile.Value) (any, error) {
	ptr := p.arg(v, 0).(ptrs)
	m := p.mask(v, 1)
	var other any
	if len(v.Args) > 2 {
		other = p.arg(v, 2)
	}
	switch buf := p.bufs[ptr.param].(type) {
	case []float32:
		return loadLanes(p, v, buf, ptr, m, other)
	case []float64:
		return loadLanes(p, v, buf, ptr, m, other)
	case []int32:
		return loadLanes(p, v, buf, ptr, m, other)
	}
	return nil, fault(v, "buffer of type %T", p.bufs[ptr.param])
}

// loadLanes reads every enabled lane from buf; a disabled lane is not read
// and takes other's lane, or 0 without other.
func loadLanes[T number](p *program, v *tile.Value, buf []T, ptr ptrs, m []bool, other any) (any, error) {
	d := make([]T, len(ptr.off))
	for i, o := range ptr.off {
		switch {
		case m == nil || m[i]:
			if o < 0 || o >= int64(len(buf)) {
				return nil, p.outside(v, ptr, i, o, len(buf), "reads")
			}
			d[i] = buf[o]
		case other != nil:
			d[i] = other.([]T)[i]
		}
	}
	return d, nil
}

func (p *program) outside(v *tile.Value, ptr ptrs, lane int, off int64, n int, verb string) error {
	return fault(v, "lane %d %s offset %d of %s, outside its %d elements", lane, verb, off, p.k.Params[ptr.param].Name, n)
}

func (p *program) store(v *tile.Value) error {
	ptr := p.arg(v, 0).(ptrs)
	m := p.mask(v, 2)
	switch buf := p.bufs[ptr.param].(type) {
	case []float32:
		return storeLanes(p, v, buf, ptr, p.arg(v, 1).([]float32), m)
	case []float64:
		return storeLanes(p, v, buf, ptr, p.arg(v, 1).([]float64), m)
	case []int32:
		return storeLanes(p, v, buf, ptr, p.arg(v, 1).([]int32), m)
	}
	return fault(v, "buffer of type %T", p.bufs[ptr.param])
}

// storeLanes writes the enabled lanes in lane order (of two lanes with one
// address, the later one's value stays); a disabled lane is not written.
func storeLanes[T number](p *program, v *tile.Value, buf []T, ptr ptrs, x []T, m []bool) error {
	for i, o := range ptr.off {
		if m != nil && !m[i] {
			continue
		}
		if o < 0 || o >= int64(len(buf)) {
			return p.outside(v, ptr, i, o, len(buf), "writes")
		}
		buf[o] = x[i]
	}
	return nil
}

func (p *program) atomicAdd(v *tile.Value) (any, error) {
	ptr := p.arg(v, 0).(ptrs)
	m := p.mask(v, 2)
	switch buf := p.bufs[ptr.param].(type) {
	case []float32:
		return atomicLanes(p, v, buf, ptr, p.arg(v, 1).([]float32), m)
	case []float64:
		return atomicLanes(p, v, buf, ptr, p.arg(v, 1).([]float64), m)
	case []int32:
		return atomicLanes(p, v, buf, ptr, p.arg(v, 1).([]int32), m)
	}
	return nil, fault(v, "buffer of type %T", p.bufs[ptr.param])
}

// atomicLanes adds each enabled lane's value atomically, in lane order, and
// gives the values found there before; a disabled lane is untouched and
// gives 0.
func atomicLanes[T number](p *program, v *tile.Value, buf []T, ptr ptrs, x []T, m []bool) (any, error) {
	old := make([]T, len(x))
	for i, o := range ptr.off {
		if m != nil && !m[i] {
			continue
		}
		if o < 0 || o >= int64(len(buf)) {
			return nil, p.outside(v, ptr, i, o, len(buf), "adds to")
		}
		old[i] = atomicAddElem(&buf[o], x[i])
	}
	return old, nil
}

// atomicAddElem adds x to *q atomically and returns the old value.
func atomicAddElem[T number](q *T, x T) T {
	switch q := any(q).(type) {
	case *int32:
		return T(atomic.AddInt32(q, int32(x)) - int32(x))
	case *float32:
		u := (*uint32)(unsafe.Pointer(q))
		for {
			o := atomic.LoadUint32(u)
			if atomic.CompareAndSwapUint32(u, o, math.Float32bits(math.Float32frombits(o)+float32(x))) {
				return T(math.Float32frombits(o))
			}
		}
	case *float64:
		u := (*uint64)(unsafe.Pointer(q))
		for {
			o := atomic.LoadUint64(u)
			if atomic.CompareAndSwapUint64(u, o, math.Float64bits(math.Float64frombits(o)+float64(x))) {
				return T(math.Float64frombits(o))
			}
		}
	}
	panic("interp: atomic add on a buffer that is not f32, f64 or i32") // BindArgs admits no other
}
