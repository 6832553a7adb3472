package graphpass

import (
	"fmt"
	"slices"

	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// An elementwise group is a DAG of elementwise, injective (broadcast,
// slice, concat) and scalar nodes computed over the output's elements, a
// block of them per program.
var elementwiseKind = groupKind{
	name: "elementwise",
	start: func(n *Node, opt Options) bool {
		return (n.Info.Kind.Elementwise() || n.Info.Kind.Injective()) && KernelOn(n, opt.Target)
	},
	// Any fusable node joins: a product makes the group a matmul group, a
	// row reduction or softmax over the group's shape a row group.
	join: func(n *Node, grp *Group, t Target) (GroupKind, bool) {
		switch k := n.Info.Kind; {
		case k.Product():
			if !takesProduct(n, grp) {
				return 0, false
			}
			grp.MatMul = n
			return MatMulGroup, true
		case k == ops.Reduce || k.Row():
			if takesRow(n, grp, t) {
				return RowGroup, true
			}
			if reshapeOfReduce(n, grp) { // a reduction stored under the reshape's shape
				grp.Full = nil
				return ReduceGroup, true
			}
			return 0, false
		}
		return ElementwiseGroup, true
	},
	remat:  true,
	extras: func(*Group, Target) bool { return true },
	tune: func(grp *Group, t Target, _ tile.Precision, meta tile.Meta) {
		if s, a, r, minRows, ok := lanesForm(grp, t); ok {
			bl := min(1024, pow2AtLeast(s[a]))
			if minRows > 1 {
				bl = max(8, min(256, bl)) // the transposes' blocks are turned in the frame
			}
			meta["BLOCK_L"] = bl
			meta["BLOCK_R"] = min(pow2AtLeast(s[r]), max(minRows, 512/bl))
			if f := lanesBlockF(grp, t, s, a, r, bl*meta["BLOCK_R"]); f > 1 {
				meta["BLOCK_F"] = f
			}
			return
		}
		if s := grp.Root.Info.Shape; !t.GPU() && len(s) >= 2 && transposes(grp) {
			meta["BLOCK_C"] = min(1024, pow2AtLeast(s[len(s)-1]))
			return
		}
		meta["BLOCK"] = min(t.perThread(8, 1024), pow2AtLeast(numel(grp.Root.Info.Shape)))
		if cpuStream(grp, t) {
			meta["STREAM"] = 3 // the stores past the caches
		}
	},
	space: elementwiseSpace,
	emit:  emitElementwise,
}

// emitElementwise: program p computes the flat indices [p·BLOCK,
// (p+1)·BLOCK) of the output. BLOCK: on a GPU 8 elements a thread (1024 at
// 4 warps), on the CPU 1024, or the output's size rounded up to a power of
// two if smaller. On the CPU a group with a transpose is written over rows
// instead (BLOCK_C: emitRows). STREAM = 3 (a CPU's: cpuStream) stores with
// the streaming hint.
func emitElementwise(e *emitter, out *tile.Value, k *Kernel) error {
	if _, ok := e.meta["BLOCK_C"]; ok {
		return emitRows(e, out, k)
	}
	if _, ok := e.meta["BLOCK_L"]; ok {
		return emitLanes(e, out, k)
	}
	b := e.b
	n := numel(e.grp.Root.Info.Shape)
	block, err := e.param("BLOCK")
	if err != nil {
		return err
	}
	bs := &blockSpace{e: e, lanes: b.Arange(0, block), block: block}
	bs.offs = b.Add(b.Mul(b.ProgramID(0), block), bs.lanes)
	e.space = bs.coords
	if n%block != 0 { // else every lane is in range: no mask
		e.mask = b.Lt(bs.offs, n)
	}
	stream, err := e.optParam("STREAM", 0)
	if err != nil {
		return err
	}
	var hint []tile.CacheHint
	switch stream {
	case 0:
	case 3:
		hint = []tile.CacheHint{tile.CacheStreaming}
	default:
		return fmt.Errorf("graphpass: %v: STREAM = %d: want 0 (no hint) or 3 (the stores)", e.grp, stream)
	}
	if err := e.store(out, bs.offs, hint...); err != nil {
		return err
	}
	k.Grid = tile.Grid{tile.CDiv(n, block)}
	return nil
}

// blockSpace is an elementwise kernel's index space: the block's flat
// indices offs = pid·block + lanes.
type blockSpace struct {
	e           *emitter
	offs, lanes *tile.Value
	block       int
}

// coords splits the block's own indices (nil for others): a coordinate
// whose whole period (its stride times its size) divides the block is the
// same in every program, (lanes/stride) mod size: the interpreter computes
// it once per launch, the GPU from the thread index alone. One whose stride
// divides the block is pid·(block/stride) + lanes/stride, mod its size: a
// scalar times a constant and an add per program. Others divide the flat
// index itself.
func (bs *blockSpace) coords(idx *tile.Value, s []int) []*tile.Value {
	if idx != bs.offs {
		return nil
	}
	b, bl := bs.e.b, bs.block
	div := func(x *tile.Value, d int) *tile.Value {
		if d == 1 {
			return x
		}
		return b.Div(x, d)
	}
	c := make([]*tile.Value, len(s))
	stride := 1
	for i := len(s) - 1; i >= 0; i-- {
		var q *tile.Value
		switch {
		case i > 0 && bl%(stride*s[i]) == 0:
			q = div(bs.lanes, stride)
		case bl%stride == 0:
			q = b.Add(b.Mul(b.ProgramID(0), bl/stride), div(bs.lanes, stride))
		default:
			q = div(bs.offs, stride)
		}
		if i > 0 {
			q = b.Rem(q, s[i])
		}
		c[i] = q
		stride *= s[i]
	}
	return c
}

// transposes reports whether group grp has a member, or computes again a
// value, that permutes axes.
func transposes(grp *Group) bool {
	for _, n := range append(slices.Clone(grp.Members), grp.Recompute...) {
		if n.Info.Kind == ops.Transpose && movesElements(n) {
			return true
		}
	}
	return false
}

// emitRows: program (r, j) computes columns [j·BLOCK_C, (j+1)·BLOCK_C) of
// row r of the output (its last axis; BLOCK_C the row's length rounded up
// to a power of two, at most 1024). Each lane's coordinates are the row's
// (scalars: the program's) and its column, so that a transpose's reads are
// the lanes of an affine address, a constant stride apart (ops merges the
// transpose's axes first: NHWC → NCHW reads each row of HW a stride of C
// apart), which the CPU's machine code loads lane by lane; in the flat
// form (emitElementwise) they are divisions of the lanes' flat indices,
// which it does not take.
func emitRows(e *emitter, out *tile.Value, k *Kernel) error {
	b := e.b
	s := e.grp.Root.Info.Shape
	c := s[len(s)-1]
	bc, err := e.param("BLOCK_C")
	if err != nil {
		return err
	}
	rs := &lineSpace{e: e, row: b.ProgramID(0), col: b.Arange(0, bc), c: c}
	tiles := tile.CDiv(c, bc)
	if tiles > 1 {
		rs.col = b.Add(b.Mul(b.ProgramID(1), bc), rs.col)
	}
	rs.offs = b.Add(b.Mul(rs.row, c), rs.col)
	e.space = rs.coords
	if c%bc != 0 {
		e.mask = b.Lt(rs.col, c)
	}
	if err := e.store(out, rs.offs); err != nil {
		return err
	}
	k.Grid = tile.Grid{numel(s) / c, tiles}
	return nil
}

// lineSpace is emitRows' index space: offs = row·c + col.
type lineSpace struct {
	e              *emitter
	offs, row, col *tile.Value
	c              int
}

// coords splits the space's own indices into coordinates of shape s
// whose last axis is m rows of the space's (m·c long): the last
// coordinate (row mod m)·c + col, the others the row's, row / m split
// (scalars). The last coordinate (over one axis: the index) is recorded as
// made of (row mod m, col) of shape (m, c), so that a read of it through
// another transpose splits it back into those (emitter.refineRuns), not
// by dividing the lanes. Nil for other indices and shapes.
func (rs *lineSpace) coords(idx *tile.Value, s []int) []*tile.Value {
	n := len(s)
	if idx != rs.offs || n == 0 || s[n-1]%rs.c != 0 {
		return nil
	}
	b := rs.e.b
	row, last := rs.row, rs.col
	var r *tile.Value // row mod m
	m := s[n-1] / rs.c
	if m > 1 {
		r = b.Rem(row, m)
		last = b.Add(b.Mul(r, rs.c), last)
		rs.e.recordFlat(last, []*tile.Value{r, rs.col}, []int{m, rs.c})
		row = b.Div(row, m)
	}
	if n == 1 {
		// s[0] is every element: row / m is 0 in every program, the index
		// the last coordinate's
		flat := b.Add(b.Mul(row, s[0]), last)
		if m > 1 {
			rs.e.recordFlat(flat, []*tile.Value{r, rs.col}, []int{m, rs.c})
		}
		return []*tile.Value{flat}
	}
	return append(rs.e.split(row, s[:n-1]), last)
}

// KernelOn reports whether node n becomes part of a kernel on target t. On
// a GPU every kind does (no copy to the host and back). On a CPU a
// Transpose does where kernels run as machine code (Target.Native), which
// takes its reads over rows (emitRows); on the executor a transpose with a
// ReLU ran at 0.5–1.5× Gorgonia's time (1M f32: 9.1 against 20.4 ms NHWC →
// NCHW, 12.0 against 8.0 a heads split), so Gorgonia runs it there. So do
// the window ops (Im2Col, Col2Im, MaxPool, MaxPoolDiff), written over
// blocks whose every index is an affine function of the lanes
// (emitLanes), which the machine code takes; on the executor an im2col
// ran far slower than Gorgonia's loop (a 3×3 convolution over 32×16×32×32
// f32: the run 26.9 → 167 ms, the im2col kernel alone 138 ms). A max pool
// and its backward move together (Gorgonia's backward reads a mask that
// its forward fills): the rule is the same for both.
func KernelOn(n *Node, t Target) bool {
	k := n.Info.Kind
	switch {
	case t.GPU():
		return true
	case k == ops.Transpose:
		return t.Native
	case k.Window():
		return t.Native
	}
	return true
}

// windowLanes is, on a CPU, the window op of group grp (a window op never
// joins another's group: canJoin) and the axes of its shape that
// emitLanes runs the lanes (a) and the rows (r) along, where every member
// between the window op and the root keeps its elements' order (so that
// the root's flat index is the window op's; a transpose of its operand
// is read as any operand is). Each lane's and row's indices must be
// affine: an im2col's
// output columns and rows (OW, OH: each lane reads the image a stride
// apart and stores a row of columns apart), a max pool's (PW, PH), a
// col2im's and a max pool backward's image columns (W) where the stride
// along them is 1, with its rows (H) where their stride is 1 too, else
// its channels (C); with a stride above 1 along the columns, the channels
// (C, rows along the batch: the window's arithmetic is a scalar's, each
// lane an image plane apart). Nil for other groups and on a GPU.
func windowLanes(grp *Group, t Target) (w *Node, a, r int) {
	if t.GPU() {
		return nil, 0, 0
	}
	for _, n := range grp.Members {
		if n.Info.Kind.Window() {
			if w != nil {
				return nil, 0, 0
			}
			w = n
		}
	}
	if w == nil || len(w.Info.Shape) != 4 || numel(w.Info.Shape) != numel(grp.Root.Info.Shape) {
		return nil, 0, 0
	}
	perm := rootPerm(grp, w)
	if !keepsOrder(grp, w) && perm == nil {
		return nil, 0, 0
	}
	switch sh, sw := w.Info.Window[4], w.Info.Window[5]; {
	case perm != nil:
		// the root is w's axes permuted: lanes along the axis that is its
		// last (its stores contiguous), where w's arithmetic along it is
		// affine (a max pool's backward of stride 2 along its channels;
		// its rows along the batch)
		if w.Info.Kind != ops.MaxPoolDiff || sh == 1 || sw == 1 || perm[len(perm)-1] != 1 {
			return nil, 0, 0
		}
		return w, 1, 0
	case w.Info.Kind == ops.Im2Col:
		return w, 2, 1
	case w.Info.Kind == ops.MaxPool && channelsLast(w, grp):
		return w, 1, 3
	case w.Info.Kind == ops.MaxPool:
		return w, 3, 2
	case sw == 1 && sh == 1:
		return w, 3, 2
	case sw == 1:
		return w, 3, 1
	}
	return w, 1, 0
}

// rootPerm is the permutation of window op w's axes that grp's root is
// (the root's flat index that of Transpose(w, perm)), where between w and
// the root there are only elementwise ops of w's shape, one transpose of
// it and then reshapes (a convolution's backward: the max pool's backward
// times ReLU's mask, transposed back to NHWC and reshaped to the
// product's rows), and no extra output (stored at the root's index); nil
// where the root is otherwise, or w's order kept.
func rootPerm(grp *Group, w *Node) []int {
	if len(grp.Extra) > 0 {
		return nil
	}
	var perm []int
	n := grp.Root
	for n != w {
		k := n.Info.Kind
		switch {
		case n.Group != grp:
			return nil
		case k == ops.Reshape && perm == nil && len(n.Inputs) == 1:
			n = n.Inputs[0]
			continue
		case k == ops.Reshape:
			return nil // a reshape between w and the transpose
		case k == ops.Transpose && perm == nil && len(n.Inputs) == 1 && sameShape(n.Inputs[0].Info.Shape, w.Info.Shape) && movesElements(n):
			perm = n.Info.Axes
			n = n.Inputs[0]
			continue
		case (k == ops.Unary || k == ops.Binary) && sameShape(n.Info.Shape, w.Info.Shape) && perm != nil:
			// along the operand that w reaches (the others are read at
			// the same index)
			i := slices.IndexFunc(n.Inputs, func(o *Node) bool { return o == w || readsMember(o, w, grp) && o.Group == grp })
			if i < 0 {
				return nil
			}
			n = n.Inputs[i]
			continue
		}
		return nil
	}
	if len(perm) != len(w.Info.Shape) {
		return nil
	}
	return perm
}

// channelsLast reports whether window op w reads its operand, through the
// elementwise ops of grp (members or computed again), from a transpose
// that takes its channels (axis 1) from its operand's last axis: NHWC →
// NCHW (a convolution's product, ReLU after the transpose computed again,
// rematerialise). A max pool's lanes then run along the channels, its
// window's reads contiguous (its output's stores a plane apart), against
// lanes along the columns, which read each lane alone (2×2 pools of the
// convnet, one core: 2.2 → 1.0 ms).
func channelsLast(w *Node, grp *Group) bool {
	in := func(n *Node) bool { return n.Group == grp || slices.Contains(grp.Recompute, n) }
	n := w.Inputs[0]
	for in(n) {
		switch k := n.Info.Kind; {
		case k == ops.Transpose:
			p := n.Info.Axes
			return len(p) == 4 && p[1] == 3 && len(n.Inputs) == 1
		case (k == ops.Unary || k == ops.Binary) && sameShape(n.Info.Shape, w.Inputs[0].Info.Shape):
			// along the operand of the same shape (ReLU's x·(x ≥ 0))
			next := slices.IndexFunc(n.Inputs, func(o *Node) bool { return sameShape(o.Info.Shape, n.Info.Shape) })
			if next < 0 {
				return false
			}
			n = n.Inputs[next]
		default:
			return false
		}
	}
	return false
}

// keepsOrder reports whether every member of grp that reads window op w
// (a member or joining) keeps its elements' order and number: the root's
// flat index is w's.
func keepsOrder(grp *Group, w *Node) bool {
	if numel(w.Info.Shape) != numel(grp.Root.Info.Shape) {
		return false
	}
	for _, n := range grp.Members {
		if n != w && readsMember(n, w, grp) && (movesElements(n) || numel(n.Info.Shape) != numel(w.Info.Shape)) {
			return false
		}
	}
	return true
}

// windowJoins reports whether window op w may join group grp on a CPU,
// where its kernel's indices must stay affine functions of the lanes
// (the machine code takes no others, and the executor is far slower than
// Gorgonia's loops): where the members between it and the root keep its
// order (emitLanes, windowLanes), or else where the group's rows run
// their lanes (emitRows: the root's last axis, followed down through the
// members' reshapes, elementwise ops and transposes, axis by axis) along
// w's channels (a convolution's backward: the max pool's backward read by
// the transpose back to the product's layout), along which w's arithmetic
// is a scalar's; the transposes' reads of each other, merged their own
// ways, split through the shapes' common refinement (emitter.refineRuns:
// the lanes' axis stays whole; before it, transposes other than NCHW →
// NHWC divided the lanes, which FuzzConvNet found). A window op that may
// not joins no group and roots one of its own, in the lanes form.
func windowJoins(w *Node, grp *Group) bool {
	if len(w.Info.Shape) != 4 {
		return false
	}
	if keepsOrder(grp, w) {
		return true
	}
	var walk func(n *Node, axis int) (int, bool)
	walk = func(n *Node, axis int) (int, bool) {
		if n == w {
			return axis, true
		}
		if n.Group != grp {
			return 0, false
		}
		for _, in := range n.Inputs {
			if ax, ok := axisRead(n, in, axis); ok {
				if a, ok := walk(in, ax); ok {
					return a, true
				}
			}
		}
		return 0, false
	}
	s := grp.Root.Info.Shape
	if len(s) == 0 || w.Info.Kind == ops.Im2Col {
		return false
	}
	a, ok := walk(grp.Root, len(s)-1)
	return ok && a == 1
}

// axisRead is the axis of operand in's shape that axis axis of n's reads
// as a whole (nil where none does: a broadcast, merged or split axes, an
// op that is not elementwise, a transpose or a reshape).
func axisRead(n, in *Node, axis int) (int, bool) {
	o, i := n.Info.Shape, in.Info.Shape
	switch k := n.Info.Kind; {
	case k == ops.Transpose && len(n.Info.Axes) == len(o) && len(i) == len(o):
		return n.Info.Axes[axis], true
	case k == ops.Reshape:
		trail := numel(o[axis+1:])
		for j := range i {
			if i[j] == o[axis] && numel(i[j+1:]) == trail {
				return j, true
			}
		}
	case k.Elementwise() && slices.Equal(o, i):
		return axis, true
	}
	return 0, false
}

// lanesForm is the shape and the axes emitLanes writes group grp over on
// target t (the lanes a, the rows r), and the fewest rows a block takes:
// a window op's (windowLanes; 1) or a transpose's (transposeTiles; 8, the
// machine code's transposed loads' tiles). False for other groups.
func lanesForm(grp *Group, t Target) (s []int, a, r, minRows int, ok bool) {
	if w, wa, wr := windowLanes(grp, t); w != nil {
		return w.Info.Shape, wa, wr, 1, true
	}
	if s, a, r, ok := transposeTiles(grp, t); ok {
		return s, a, r, 8, true
	}
	if s, a, r, ok := moveLanes(grp, t); ok {
		return s, a, r, 1, true
	}
	return nil, 0, 0, 0, false
}

// moveLanes is, on a CPU whose kernels are machine code, the shape (the
// root's) and the axes emitLanes runs the lanes (a: the root's last above
// 1) and the rows (r: the one before it above 1, else one of size 1)
// along, for a group whose flat form (emitElementwise) would divide its
// lanes: one with a Repeat, Slice, Concat or slice backward whose
// coordinates in a block of the flat form's size are not the same in
// every program (flatDivides: a slice of 32 columns, rows of 32 in a
// block of 1024), which the machine code does not take (such kernels ran
// on the executor: a BERT-like encoder's lone Concat of its heads, 21% of
// its unfused forward on the 2-core VM). Over rows and lanes each such
// op's coordinates are the block's, affine. Not for groups with a window
// op or a transpose that moves elements (their own forms), nor for a
// root of one axis.
func moveLanes(grp *Group, t Target) (s []int, a, r int, ok bool) {
	if t.GPU() || !t.Native {
		return nil, 0, 0, false
	}
	s = grp.Root.Info.Shape
	if len(s) < 2 {
		return nil, 0, 0, false
	}
	bl := min(t.perThread(8, 1024), pow2AtLeast(numel(s)))
	divides := false
	for _, n := range append(slices.Clone(grp.Members), grp.Recompute...) {
		switch k := n.Info.Kind; {
		case k.Window(), k == ops.Transpose && movesElements(n):
			return nil, 0, 0, false
		case k == ops.Repeat || k == ops.Slice || k == ops.Concat || k == ops.SliceIncr:
			divides = divides || flatDivides(n.Info.Shape, bl)
		}
	}
	if !divides {
		return nil, 0, 0, false
	}
	a = len(s) - 1
	for a > 0 && s[a] == 1 {
		a--
	}
	r = a - 1
	for r > 0 && s[r] == 1 {
		r--
	}
	if r < 0 { // one axis above 1, the first: rows along the one after it
		r = a + 1
	}
	return s, a, r, true
}

// flatDivides reports whether the coordinates of shape s over a flat
// block of bl lanes divide the lanes in some programs: an axis after the
// first whose period (its size times its stride) bl does not divide
// (emitter's blockSpace.coords).
func flatDivides(s []int, bl int) bool {
	for i := 1; i < len(s); i++ {
		if s[i] > 1 && numel(s[i:])%bl != 0 {
			return true
		}
	}
	return false
}

// transposeTiles is, on a CPU whose kernels are machine code, the shape
// (the root's) and the axes emitLanes runs the lanes (a: the root's last)
// and the rows (r) of a group with one transpose that moves elements
// along: r the axis that reads the transpose's operand's last (its
// elements one apart), so that the operand's reads are blocks of rows
// contiguous down their columns, which the machine code loads contiguous
// and turns in registers (native: transposed loads), where the rows form
// (emitRows) loads each lane alone. The members between the transpose
// and the root keep its order (keepsOrder: the root's flat index is the
// transpose's); the rows' axis at least 8 long (the machine code turns
// blocks in 8×8 tiles: a block is at least 8 lanes wide, masked past a
// shorter axis); f32 or f64 (turned in 4×4 tiles). Where the root merges
// that axis with others (a transpose flattened to one axis), the
// transpose's own shape. False for other groups.
func transposeTiles(grp *Group, t Target) (s []int, a, r int, ok bool) {
	if t.GPU() || !t.Native {
		return nil, 0, 0, false
	}
	var tr *Node
	for _, n := range grp.Members {
		switch {
		case n.Info.Kind.Window():
			return nil, 0, 0, false
		case n.Info.Kind == ops.Transpose && movesElements(n):
			if tr != nil {
				return nil, 0, 0, false
			}
			tr = n
		}
	}
	if tr == nil || (tr.Info.DType != tile.F32 && tr.Info.DType != tile.F64) || !keepsOrder(grp, tr) || len(tr.Inputs) != 1 {
		return nil, 0, 0, false
	}
	o, in, perm := tr.Info.Shape, tr.Inputs[0].Info.Shape, tr.Info.Axes
	if len(o) != len(in) || len(perm) != len(o) {
		return nil, 0, 0, false
	}
	last := len(in) - 1 // the operand's last axis above 1: its elements one apart
	for last > 0 && in[last] == 1 {
		last--
	}
	q := slices.Index(perm, last)
	if q < 0 {
		return nil, 0, 0, false
	}
	// the root's axis that is q's: its size, the same elements after it
	s = grp.Root.Info.Shape
	a, r = len(s)-1, -1
	for i := range s {
		if s[i] == o[q] && numel(s[i+1:]) == numel(o[q+1:]) {
			r = i
		}
	}
	if r < 0 || r == a {
		// a root that merges that axis with others (a transpose flattened
		// to one axis): the transpose's own shape, whose flat index is the
		// root's (keepsOrder)
		s, a, r = o, len(o)-1, q
	}
	if r == a || s[a] < 2 || s[r] < 8 {
		return nil, 0, 0, false
	}
	return s, a, r, true
}

// readsMember reports whether member n of group grp reads w, directly or
// through other members.
func readsMember(n, w *Node, grp *Group) bool {
	seen := map[*Node]bool{}
	var from func(x *Node) bool
	from = func(x *Node) bool {
		if x == w {
			return true
		}
		if seen[x] || x.Group != grp {
			return false
		}
		seen[x] = true
		return slices.ContainsFunc(x.Inputs, from)
	}
	return slices.ContainsFunc(n.Inputs, from)
}

// emitLanes: the group's window op w (windowLanes) over blocks [BLOCK_R,
// BLOCK_L] of its shape S, the lanes along axis a and the rows along axis
// r (windowLanes; BLOCK_L: S[a] rounded up to a power of two, at most
// 1024; BLOCK_R: S[r]'s, at most 512 elements a block), each program one
// block of the other axes' coordinates (scalars, the program id split);
// with BLOCK_F (lanesBlockF) blocks [BLOCK_F, BLOCK_R, BLOCK_L], BLOCK_F
// positions of the fastest of those axes (lanesFree) a program, masked
// past its end.
// The root's flat index is w's (windowLanes), so the store is an affine
// address whose lanes lie a stride of S[a+1]·…·S[3] apart, which the CPU's
// machine code writes lane by lane where that stride is not 1; every
// index w reads is affine in the rows and lanes too.
func emitLanes(e *emitter, out *tile.Value, k *Kernel) error {
	b := e.b
	s, a, r, _, ok := lanesForm(e.grp, e.t)
	if !ok {
		return fmt.Errorf("graphpass: %v: BLOCK_L in a group without a window op, a transpose over lanes or moves that divide a flat block", e.grp)
	}
	bl, err := e.param("BLOCK_L")
	if err != nil {
		return err
	}
	br, err := e.param("BLOCK_R")
	if err != nil {
		return err
	}
	bf, err := e.optParam("BLOCK_F", 1)
	if err != nil {
		return err
	}
	free := lanesFree(e.grp, s, a, r)
	if bf < 1 || bf > 1 && len(free) == 0 {
		return fmt.Errorf("graphpass: %v: BLOCK_F = %d: want 1, or more along a free axis", e.grp, bf)
	}
	shape := tile.Shp(br, bl)
	pos := map[int]int{r: 0, a: 1} // each blocked axis's place in the block
	if bf > 1 {
		shape = tile.Shp(bf, br, bl)
		pos = map[int]int{free[0]: 0, r: 1, a: 2}
	}
	// place is the block's index i (a vector along axis) expanded to the
	// block's rank at axis's place
	place := func(i *tile.Value, axis int) *tile.Value {
		for d := range shape.Rank {
			if d != pos[axis] {
				i = b.ExpandDims(i, d)
			}
		}
		return i
	}
	along := func(axis, block int, base func() *tile.Value) (*tile.Value, *tile.Value, int) {
		i := b.Arange(0, block)
		tiles := tile.CDiv(s[axis], block)
		if tiles > 1 {
			i = b.Add(b.Mul(base(), block), i)
		}
		var in *tile.Value
		if s[axis]%block != 0 {
			in = b.BroadcastTo(place(b.Lt(i, s[axis]), axis), shape)
		}
		return b.BroadcastTo(place(i, axis), shape), in, tiles
	}
	c := make([]*tile.Value, len(s))
	var rowIn, laneIn, freeIn *tile.Value
	var rows, lanes int
	c[r], rowIn, rows = along(r, br, func() *tile.Value { return b.ProgramID(1) })
	c[a], laneIn, lanes = along(a, bl, func() *tile.Value { return b.ProgramID(2) })
	// the other axes from the program id, the first of free the fastest
	// (lanesFree); with BLOCK_F, that one in blocks of BLOCK_F
	rest := b.ProgramID(0)
	programs := numel(s) / (s[a] * s[r])
	for j, i := range free {
		n := s[i]
		if j == 0 && bf > 1 {
			n = tile.CDiv(s[i], bf)
			programs = programs / s[i] * n
		}
		var at *tile.Value
		if j == len(free)-1 {
			at = rest
		} else {
			at = b.Rem(rest, n)
			rest = b.Div(rest, n)
		}
		if j == 0 && bf > 1 {
			c[i], freeIn, _ = along(i, bf, func() *tile.Value { return at })
			continue
		}
		c[i] = at
	}
	// the members' coordinates come from the flat index's record
	// (emitter.coords: the same axes, or runs of them merged)
	offs := e.flatten(c, s)
	if offs.Type.Shape != shape { // the lanes' and rows' axes of size 1: a scalar
		offs = b.Add(offs, b.Mul(c[a], 0))
		e.recordFlat(offs, c, s)
	}
	if w, _, _ := windowLanes(e.grp, e.t); w != nil {
		if perm := rootPerm(e.grp, w); perm != nil {
			// the root is w's axes permuted: stored at its own flat index,
			// which its transpose reads w's coordinates back from
			pc, ps := make([]*tile.Value, len(perm)), make([]int, len(perm))
			for i, p := range perm {
				pc[i], ps[i] = c[p], s[p]
			}
			offs = e.flatten(pc, ps)
			if offs.Type.Shape != shape {
				offs = b.Add(offs, b.Mul(c[a], 0))
				e.recordFlat(offs, pc, ps)
			}
		}
	}
	e.mask = e.and(e.and(rowIn, laneIn), freeIn)
	if err := e.store(out, offs); err != nil {
		return err
	}
	k.Grid = tile.Grid{programs, rows, lanes}
	return nil
}

// lanesBlockF is BLOCK_F for an im2col's blocks of area elements
// (emitLanes): where a block is smaller than 256 elements (an image of 7
// × 7 in 8 × 8 lanes) and the fastest free axis (lanesFree) is the
// batch (its patches stored column by column for a product), a program
// takes that many images, up to 256 elements: each program's
// scalar work (its coordinates split from the program id, the checks of
// its rows' ranges) was most of such a kernel's time on the CPU (one
// core of the 2-core VM, 3×3 im2col of 100×64×7×7 stored for a product:
// 3.37 → 2.88 ms). 1 where the block holds 256 or more, and for the
// other window ops: a col2im of the same images, its nine taps gathered,
// ran 2.46 → 4.71 ms so. Not along the patch's columns (an im2col stored
// row by row): the window's arithmetic divides them (a column's channel
// and tap), which the machine code does not do over lanes, so such a
// kernel ran on the executor (a convnet's unfused im2col of 7 × 7 images
// 15 → 198 ms on the 2-core VM). (On a GPU there is no lanes form.)
func lanesBlockF(grp *Group, t Target, s []int, a, r, area int) int {
	w, _, _ := windowLanes(grp, t)
	free := lanesFree(grp, s, a, r)
	if w == nil || w.Info.Kind != ops.Im2Col || area >= lanesBlockArea || len(free) == 0 || free[0] != 0 {
		return 1
	}
	return min(pow2AtLeast(s[free[0]]), lanesBlockArea/area)
}

// lanesBlockArea is the least block of a window op's lanes form on a CPU
// (lanesBlockF).
const lanesBlockArea = 256

// lanesFree are the axes of shape s other than emitLanes's lanes (a) and
// rows (r), in the order its programs walk them, the fastest first: the
// last axis first, or, where the root is stored column by column
// (columnMajor: an im2col's patches, [N, OH, OW, C·KH·KW] stored as
// [C·KH·KW, N·OH·OW]), the first, so that programs one after the other
// store one after the other; likewise where the group reads a product
// stored column by column (readsTransposedProduct: a col2im reading its
// patches' gradient as [C·KH·KW, N·OH·OW]), so that programs one after
// the other read one after the other (with the channels fastest each
// program read its nine taps' runs of an image's pixels, 78 KB apart,
// and the next program nine runs more: the 2-core VM's col2im of
// 100×32×14×14 took 2.4 ms, against 1.7 so).
func lanesFree(grp *Group, s []int, a, r int) []int {
	var free []int
	for i := len(s) - 1; i >= 0; i-- {
		if i != a && i != r {
			free = append(free, i)
		}
	}
	if grp.Root.colMajor || readsTransposedProduct(grp) {
		slices.Reverse(free)
	}
	return free
}

// readsTransposedProduct reports whether grp reads a product stored
// column by column (transposedProducts).
func readsTransposedProduct(grp *Group) bool {
	return slices.ContainsFunc(grp.Inputs, func(n *Node) bool { return n.colMajor && n.Info.Kind == ops.MatMul })
}
