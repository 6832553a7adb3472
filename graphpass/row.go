package graphpass

import (
	"fmt"

	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// A row group holds reductions along the last axis (and Gorgonia's SoftMax
// and its backward) together with the consumers that broadcast them back
// over their rows, one row per program. Rows longer than maxRow are walked
// in blocks (looped), once per reduction, then once more for the output.
var rowKind = groupKind{
	name: "row",
	start: func(n *Node, opt Options) bool {
		return n.Info.Kind == ops.Softmax || n.Info.Kind == ops.SoftmaxGrad && !looped(n.Info.Shape, opt.Target)
	},
	join: func(n *Node, grp *Group, t Target) (GroupKind, bool) {
		switch k := n.Info.Kind; {
		case k.Product():
			return 0, false
		case k == ops.Reduce || k.Row():
			return RowGroup, takesRow(n, grp, t)
		}
		return RowGroup, true
	},
	extras: func(grp *Group, t Target) bool { return !looped(grp.Full, t) },
	tune:   tuneRow,
	emit:   emitRow,
}

// maxRow is the longest row a row group holds in one block: on a GPU 64
// elements a thread (8192 at 4 warps); on the CPU 8192. Longer rows are
// walked in blocks, once per reduction (see rowEmit.looped).
func maxRow(t Target) int { return t.perThread(64, 8192) }

// looped reports whether rows of the shape full are walked in blocks
// (longer than maxRow): such a row group writes one output and computes no
// softmax backward.
func looped(full []int, t Target) bool { return len(full) > 0 && full[len(full)-1] > maxRow(t) }

// tuneRow: a row in one block of its length rounded up to a power of two
// (BLOCK), or looped over blocks of CHUNK: on a GPU 16 elements a thread
// (2048 at 4 warps), on the CPU 2048.
func tuneRow(grp *Group, t Target, _ tile.Precision, meta tile.Meta) {
	n := grp.Full[len(grp.Full)-1]
	if looped(grp.Full, t) {
		meta["CHUNK"] = t.perThread(16, 2048)
		return
	}
	meta["BLOCK"] = pow2AtLeast(n)
}

// rowReduce reports whether n reduces only the last axis of its input.
func rowReduce(n *Node) bool {
	in := n.Inputs[0].Info.Shape
	return n.Info.Kind == ops.Reduce && len(n.Info.Axes) == 1 && len(in) > 0 && n.Info.Axes[0] == len(in)-1
}

// takesRow reports whether grp, an elementwise or row group, can take n, a
// reduction or a softmax (or its backward), as a row group: n reduces the
// last axis of grp's shape, and a looped row has no extra outputs.
func takesRow(n *Node, grp *Group, t Target) bool {
	full := n.Info.Shape
	if n.Info.Kind == ops.Reduce {
		if !rowReduce(n) {
			return false
		}
		full = n.Inputs[0].Info.Shape
	}
	return sameShape(full, grp.Full) && (len(grp.Extra) == 0 || !looped(full, t))
}

// rowEmit is a row kernel being written: this program's row.
type rowEmit struct {
	e    *emitter
	idx  *tile.Value // the flat indices of this program's row (of the block, when looped)
	cols *tile.Value // the column of each lane
	// looped rows: each softmax's row maximum and Σe^(x-max)
	stats map[*Node][2]*tile.Value
}

// emitRow: program p computes row p, in one block of the row's length
// rounded up to a power of two, or looped.
func emitRow(e *emitter, out *tile.Value, k *Kernel) error {
	b := e.b
	r := &rowEmit{e: e}
	e.space, e.member = r.coords, r.member
	full := e.grp.Full
	n := full[len(full)-1]
	rows := numel(full) / n
	k.Grid = tile.Grid{rows}
	if looped(full, e.t) {
		chunk, err := e.param("CHUNK")
		if err != nil {
			return err
		}
		return r.looped(out, n, chunk)
	}
	block, err := e.param("BLOCK")
	if err != nil {
		return err
	}
	if block < n {
		return fmt.Errorf("graphpass: %v: BLOCK = %d holds no row of %d", e.grp, block, n)
	}
	r.cols = b.Arange(0, block)
	if block != n {
		e.mask = b.Lt(r.cols, n)
	}
	r.idx = b.Add(b.Mul(b.ProgramID(0), n), r.cols)
	return e.store(out, r.idx)
}

// coords: the row's own indices are the program id (one scalar, split over
// the leading dimensions) and the column the lane; nil for others.
func (r *rowEmit) coords(idx *tile.Value, s []int) []*tile.Value {
	if idx != r.idx || r.idx == nil || !sameShape(s, r.e.grp.Full) {
		return nil
	}
	return append(r.e.split(r.e.b.ProgramID(0), s[:len(s)-1]), r.cols)
}

// member computes the row's reductions and softmaxes, along the row
// whatever idx.
func (r *rowEmit) member(n *Node, idx *tile.Value) (*tile.Value, error) {
	e, b := r.e, r.e.b
	in := func(i int, at *tile.Value) (*tile.Value, error) {
		v, err := e.gen(n.Inputs[i], at)
		if err == nil && v.Type.Shape.IsScalar() && !at.Type.Shape.IsScalar() {
			v = b.BroadcastTo(v, at.Type.Shape) // a value made of constants alone is one scalar
		}
		return v, err
	}
	switch n.Info.Kind {
	case ops.Reduce: // once per row
		if v, ok := e.memo[memoKey{n, nil}]; ok {
			return v, nil
		}
		x, err := in(0, r.idx)
		if err != nil {
			return nil, err
		}
		identity := 0.0
		if n.Info.Reduce == tile.OpReduceMax {
			identity = -inf
		}
		v := b.Reduce(n.Info.Reduce, e.inRange(x, identity), 0)
		e.memo[memoKey{n, nil}] = v
		return v, nil
	case ops.Softmax: // along the row: max, exp, sum in the block
		if st, ok := r.stats[n]; ok { // a looped row: the statistics are known
			x, err := in(0, idx)
			if err != nil {
				return nil, err
			}
			z := b.Sub(x, st[0])
			if n.Info.Log {
				return b.Sub(z, b.Log(st[1])), nil
			}
			return b.Mul(b.Exp(z), b.Div(1.0, st[1])), nil
		}
		x, err := in(0, r.idx)
		if err != nil {
			return nil, err
		}
		x = e.inRange(x, -inf)
		m := b.Max(x, 0)
		m = b.Where(b.Eq(m, -inf), 0.0, m) // a row of -inf: no NaN from -inf - -inf
		z := b.Sub(x, m)
		ez := b.Exp(z)
		s := b.Sum(ez, 0)
		if n.Info.Log {
			return b.Sub(z, b.Log(s)), nil
		}
		return b.Mul(ez, b.Div(1.0, s)), nil
	case ops.SoftmaxGrad: // along the row, from (x, y, dy): y ⊙ (dy − Σ dy⊙y); log-softmax: dy − e^y Σ dy
		y, err := in(1, r.idx)
		if err != nil {
			return nil, err
		}
		dy, err := in(2, r.idx)
		if err != nil {
			return nil, err
		}
		if n.Info.Log {
			return b.Sub(dy, b.Mul(b.Exp(y), b.Sum(e.inRange(dy, 0.0), 0))), nil
		}
		return b.Mul(y, b.Sub(dy, b.Sum(e.inRange(b.Mul(dy, y), 0.0), 0))), nil
	}
	return nil, fmt.Errorf("graphpass: %v: %v inside a group", n, n.Info.Kind)
}

// looped writes a row group whose row is longer than MaxRow: program p
// walks row p in blocks of chunk, once per reduction and softmax (inputs
// first, each pass recomputing its operand from the group's inputs and the
// row statistics found before it; a softmax keeps a running maximum and a
// rescaled sum per lane), then once more to write the output.
func (r *rowEmit) looped(out *tile.Value, n, chunk int) error {
	e, b := r.e, r.e.b
	lanes := b.Arange(0, chunk)
	row := b.Mul(b.ProgramID(0), n)
	outer := e.memo // the row statistics, valid in every pass
	enter := func(c0 *tile.Value) {
		r.cols = b.Add(lanes, c0)
		if n%chunk != 0 {
			e.mask = b.Lt(r.cols, n)
		}
		r.idx = b.Add(row, r.cols)
		e.memo = make(map[memoKey]*tile.Value, len(outer))
		for k, v := range outer {
			e.memo[k] = v
		}
	}
	r.stats = map[*Node][2]*tile.Value{}
	for _, red := range r.order() {
		x := red.Inputs[0]
		dx := x.Info.DType
		if red.Info.Kind == ops.Reduce {
			identity := 0.0
			if red.Info.Reduce == tile.OpReduceMax {
				identity = -inf
			}
			res := b.For(0, n, chunk, []*tile.Value{b.Full(identity, dx, chunk)}, func(c0 *tile.Value, c []*tile.Value) []*tile.Value {
				enter(c0)
				v, err := e.gen(x, r.idx)
				if err != nil {
					e.err = err
					return c
				}
				v = e.inRange(v, identity)
				if red.Info.Reduce == tile.OpReduceMax {
					return []*tile.Value{b.Maximum(c[0], v)}
				}
				return []*tile.Value{b.Add(c[0], v)}
			})
			e.memo = outer
			if e.err != nil {
				return e.err
			}
			outer[memoKey{red, nil}] = b.Reduce(red.Info.Reduce, res[0], 0)
			continue
		}
		// softmax: per lane, the running maximum m and l = Σ e^(x-m)
		res := b.For(0, n, chunk, []*tile.Value{b.Full(-inf, dx, chunk), b.Zeros(dx, chunk)}, func(c0 *tile.Value, c []*tile.Value) []*tile.Value {
			enter(c0)
			v, err := e.gen(x, r.idx)
			if err != nil {
				e.err = err
				return c
			}
			v = e.inRange(v, -inf)
			m := b.Maximum(c[0], v)
			ms := b.Where(b.Eq(m, -inf), 0.0, m) // no NaN from -inf - -inf
			l := b.Add(b.Mul(c[1], b.Exp(b.Sub(c[0], ms))), b.Exp(b.Sub(v, ms)))
			return []*tile.Value{m, l}
		})
		e.memo = outer
		if e.err != nil {
			return e.err
		}
		m := b.Max(res[0], 0)
		m = b.Where(b.Eq(m, -inf), 0.0, m)
		lane := b.Where(b.Eq(res[0], -inf), 0.0, res[0])
		r.stats[red] = [2]*tile.Value{m, b.Sum(b.Mul(res[1], b.Exp(b.Sub(lane, m))), 0)}
	}
	b.For(0, n, chunk, nil, func(c0 *tile.Value, c []*tile.Value) []*tile.Value {
		enter(c0)
		v, err := e.gen(e.grp.Root, r.idx)
		if err != nil {
			e.err = err
			return c
		}
		b.Store(b.AddPtr(out, r.idx), v, e.mask)
		return c
	})
	e.memo = outer
	return e.err
}

// order lists a row group's reductions and softmaxes, each after those its
// operand depends on.
func (r *rowEmit) order() []*Node {
	var order []*Node
	seen := map[*Node]bool{}
	var visit func(n *Node)
	visit = func(n *Node) {
		if seen[n] || n.Group != r.e.grp {
			return
		}
		seen[n] = true
		for _, in := range n.Inputs {
			visit(in)
		}
		if n.Info.Kind == ops.Reduce || n.Info.Kind == ops.Softmax {
			order = append(order, n)
		}
	}
	visit(r.e.grp.Root)
	return order
}
