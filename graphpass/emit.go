package graphpass

import (
	"fmt"
	"math"
	"slices"

	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// Kernel is a group's tile kernel and how to launch it.
type Kernel struct {
	Tile  *tile.Kernel
	Grid  tile.Grid
	Out   []int      // the output's shape (every output's, when there are several, but see Shapes)
	DType tile.DType // the output's dtype (every output's)
	Outs  int        // the number of outputs: the root, then the group's Extra
	// Shapes is each output's shape where they differ (attention's output
	// and log-sum-exp); nil where every output has shape Out.
	Shapes [][]int
	// OnePointer: the kernel takes one pointer to all its outputs, output i
	// at the offset of the elements of the outputs before it (Group.OnePointer).
	OnePointer bool
	// Accumulates: the kernel adds into its output (a reduction split over
	// programs, each adding its part atomically), which must be zeros first
	Accumulates bool
	// Parts, where more than 1: the kernel writes Parts partial results of
	// each output instead of the output (the CPU's column form split over
	// row chunks), each output parameter pointing to Parts·numel(Shape(i))
	// elements of scratch, part p at p·numel(Shape(i)); Combine, launched
	// over CombineGrid after it, adds them in order p = 0, 1, … into the
	// outputs. Combine's parameters: each output's scratch, then the
	// outputs as the kernel takes them. So the sums are the same bits run
	// after run, whatever order the programs run in.
	Parts       int
	Combine     *tile.Kernel
	CombineGrid tile.Grid
}

// ScratchSizes are the elements of each output parameter of a kernel that
// writes partial results (Parts > 1): Parts times the output's.
func (k *Kernel) ScratchSizes() []int {
	var sizes []int
	for i := range max(1, k.Outs) {
		sizes = append(sizes, k.Parts*max(1, numel(k.Shape(i))))
	}
	return sizes
}

// Shape is output i's shape.
func (k *Kernel) Shape(i int) []int {
	if k.Shapes != nil {
		return k.Shapes[i]
	}
	return k.Out
}

// Kernel parameters: one pointer per group input (a scalar input is a
// one-element buffer), then one per output: the root's, then each extra
// output's.

func pow2AtLeast(n int) int {
	p := 1
	for p < n {
		p *= 2
	}
	return p
}

func numel(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// Emit writes the group's kernel for target t (the one Partition was given):
// its meta-parameters chosen by its kind's tune (then t.Tune), its
// parameters here, its body by its kind's emit. Every value is computed by
// gen, from the group's op DAG, for a block of flat indices into its own
// shape.
func Emit(grp *Group, t Target, prec tile.Precision) (*Kernel, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	kind := groupKinds[grp.Kind]
	meta := tile.Meta{}
	if kind.tune != nil {
		kind.tune(grp, t, prec, meta)
	}
	if _, ok := meta["num_warps"]; t.GPU() && !ok {
		meta["num_warps"] = t.NumWarps
	}
	if t.Tune != nil {
		t.Tune(grp, meta)
	}
	root := grp.Root
	d := root.Info.DType
	b := tile.NewBuilder(fmt.Sprintf("fused_%d_%s", grp.ID, grp.Kind), meta)
	if grp.index64 {
		b.Index64()
	}
	e := &emitter{b: b, grp: grp, t: t, prec: prec, meta: meta, ptr: map[*Node]*tile.Value{}, memo: map[memoKey]*tile.Value{}, recompute: map[*Node]bool{}}
	for _, n := range grp.Recompute {
		e.recompute[n] = true
	}
	for i, in := range grp.Inputs {
		e.ptr[in] = b.Ptr(fmt.Sprintf("in%d", i), in.Info.DType)
	}
	out := b.Ptr("out", d)
	k := &Kernel{Out: root.Info.Shape, DType: d, Outs: 1 + len(grp.Extra), OnePointer: grp.OnePointer}
	for i, x := range grp.Extra {
		switch {
		case x.Info.DType != d:
			return nil, fmt.Errorf("graphpass: %v: extra output %v is %v, the root %v", grp, x, x.Info.DType, d)
		case !sameShape(x.Info.Shape, root.Info.Shape) && !kind.anyShape && !(perRow(x, grp.Full) && sameShape(grp.Full, root.Info.Shape)):
			return nil, fmt.Errorf("graphpass: %v: extra output %v is %v, the root %v", grp, x, x.Info.Shape, root.Info.Shape)
		case !sameShape(x.Info.Shape, root.Info.Shape) && k.Shapes == nil:
			k.Shapes = [][]int{root.Info.Shape}
			for _, y := range grp.Extra[:i] {
				k.Shapes = append(k.Shapes, y.Info.Shape)
			}
		}
		if k.Shapes != nil {
			k.Shapes = append(k.Shapes, x.Info.Shape)
		}
		if !grp.OnePointer {
			e.extra = append(e.extra, b.Ptr(fmt.Sprintf("out%d", i+1), d))
		}
	}
	if grp.OnePointer && k.Shapes == nil && len(grp.Extra) > 0 { // laid end to end: one vector
		k.Shapes = [][]int{root.Info.Shape}
		for _, x := range grp.Extra {
			k.Shapes = append(k.Shapes, x.Info.Shape)
		}
	}
	if len(grp.Extra) > 0 && !takesExtras(grp, t) && !kind.anyShape {
		return nil, fmt.Errorf("graphpass: %v: extra outputs in a %v group", grp, grp.Kind)
	}
	if err := kind.emit(e, out, k); err != nil {
		return nil, err
	}
	tk, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("graphpass: %v: %w", grp, err)
	}
	k.Tile = tk
	if lim := t.maxGridYZ(); t.GPU() && (k.Grid[1] > lim || k.Grid[2] > lim) {
		// a batch or rows past what a launch's second and third axes
		// hold (attention over batch × heads past 65535): the programs
		// on axis 0, each computing its coordinates
		if c := meta["cluster"]; c > 1 {
			return nil, fmt.Errorf("graphpass: %v: grid %v passes %d programs on axis 1 or 2, and clusters of %d CTAs do not run flattened", grp, k.Grid, lim, c)
		}
		if k.Tile, k.Grid, err = tk.FlattenGrid(k.Grid); err != nil {
			return nil, fmt.Errorf("graphpass: %v: %w", grp, err)
		}
	}
	return k, nil
}

// outPtr is the pointer to output n of the kernel (its root or an extra
// output): its own parameter, or with one pointer for all outputs, out at
// n's offset.
func (e *emitter) outPtr(out *tile.Value, n *Node) (*tile.Value, error) {
	if !e.grp.OnePointer {
		if n == e.grp.Root {
			return out, nil
		}
		for i, x := range e.grp.Extra {
			if x == n {
				return e.extra[i], nil
			}
		}
		return nil, fmt.Errorf("graphpass: %v: %v is not an output of the kernel", e.grp, n)
	}
	at, err := e.outOffset(n)
	if err != nil || at == 0 {
		return out, err
	}
	return e.b.AddPtr(out, at), nil
}

// outOffset is where output n lies in the kernel's outputs laid end to end
// (the root, then the extra outputs).
func (e *emitter) outOffset(n *Node) (int, error) {
	at := 0
	for _, x := range e.grp.outputs() {
		if x == n {
			return at, nil
		}
		at += numel(x.Info.Shape)
	}
	return 0, fmt.Errorf("graphpass: %v: %v is not an output of the kernel", e.grp, n)
}

// store computes the root and each extra output at idx, flat indices of
// the shape they share, and stores them under the mask (with the cache
// hint, if any). A per-row extra output (perRow: a LayerNorm's 1/σ) is
// computed at its row's index, idx / n for rows of n, and stored by the
// lanes of the row's first column only. Where beforeStore is set, every
// output is computed first, then beforeStore is called, then they are
// stored.
func (e *emitter) store(out, idx *tile.Value, hint ...tile.CacheHint) error {
	b := e.b
	ptrs := append([]*tile.Value{out}, e.extra...)
	vals, ats, masks := make([]*tile.Value, len(ptrs)), make([]*tile.Value, len(ptrs)), make([]*tile.Value, len(ptrs))
	for i, n := range e.grp.outputs() {
		at, mask := idx, e.mask
		if !sameShape(n.Info.Shape, e.grp.Root.Info.Shape) && perRow(n, e.grp.Full) {
			full := e.grp.Full
			cols := full[len(full)-1]
			if cols == 1 {
				// one column: each row's own index
			} else if !e.t.GPU() {
				// the row's index and its first column from the block's
				// coordinates (the lanes form's, a row kernel's row and
				// lanes), not divisions of its lanes, which the CPU's
				// machine code does not take
				c := e.coords(idx, full)
				at, mask = e.flatten(c[:len(c)-1], full[:len(full)-1]), e.and(mask, b.Eq(c[len(c)-1], 0))
				if at.Type.Shape != idx.Type.Shape { // the rows' axes of size 1: a scalar
					at = b.BroadcastTo(at, idx.Type.Shape)
				}
			} else {
				at, mask = b.Div(idx, cols), e.and(mask, b.Eq(b.Rem(idx, cols), 0))
			}
		}
		v, err := e.gen(n, at)
		if err != nil {
			return err
		}
		if !v.Type.Shape.IsScalar() && v.Type.Shape != at.Type.Shape || v.Type.Shape.IsScalar() && !at.Type.Shape.IsScalar() {
			v = b.BroadcastTo(v, at.Type.Shape) // a row's value, held once a row
		}
		if n.colMajor { // stored column by column (columnMajor)
			c := e.coords(at, n.Info.Shape)
			at = e.flatten([]*tile.Value{c[1], c[0]}, []int{n.Info.Shape[1], n.Info.Shape[0]})
		}
		if e.beforeStore == nil {
			b.Store(b.AddPtr(ptrs[i], at), v, mask, hint...)
			continue
		}
		vals[i], ats[i], masks[i] = v, at, mask
	}
	if e.beforeStore == nil {
		return nil
	}
	e.beforeStore()
	for i := range vals { // every output computed, then the loads before the stores
		b.Store(b.AddPtr(ptrs[i], ats[i]), vals[i], masks[i], hint...)
	}
	return nil
}

// perRow reports whether x holds one value for each row of full (the
// rows' shape, full without its last axis, with or without a trailing 1):
// an extra output an elementwise or row group over full computes at its
// rows' indices (store).
func perRow(x *Node, full []int) bool {
	if len(full) < 2 || len(x.Info.Shape) == 0 {
		return false
	}
	return sameShape(trimTrailingOnes(x.Info.Shape), trimTrailingOnes(full[:len(full)-1])) && numel(x.Info.Shape)*full[len(full)-1] == numel(full)
}

// hasPerRowExtra reports whether an extra output of grp is per row.
func hasPerRowExtra(grp *Group) bool {
	for _, x := range grp.Extra {
		if !sameShape(x.Info.Shape, grp.Full) && perRow(x, grp.Full) {
			return true
		}
	}
	return false
}

type memoKey struct {
	n     *Node
	idx   *tile.Value
	under *tile.Value // the mask of OperandWhere's reads (emitter.under)
}

// emitter is one kernel being written: what every group kind shares.
type emitter struct {
	err   error
	t     Target
	meta  tile.Meta      // the kernel's meta-parameters
	prec  tile.Precision // of products' dots
	b     *tile.Builder
	grp   *Group
	extra []*tile.Value // pointers of the extra outputs
	ptr   map[*Node]*tile.Value
	mask  *tile.Value // lanes in range; nil where the sizes leave every lane in range
	// under: while OperandWhere reads an operand on the CPU, its lanes'
	// condition (mask includes it; a value computed under it is memoised
	// apart from one computed on every lane)
	under *tile.Value
	memo  map[memoKey]*tile.Value
	flats map[*tile.Value][]flatOf // flat indices flatten made, by what, in the order recorded
	// refining: the flat indices whose coordinates refineRuns is making
	// (a coordinate flattened from itself alone splits by division there)
	refining map[*tile.Value]bool
	// halves: (1 + t)/2 of tanhSums' tanhs, by the tanh and indices (a
	// product group's epilogue: one scope)
	halves map[memoKey]*tile.Value
	// recompute: members of other groups this kernel computes (Group.Recompute)
	recompute map[*Node]bool
	// set by the group kind's emit:
	// space splits the kind's own indices into coordinates faster than
	// split does (nil for others);
	space func(idx *tile.Value, s []int) []*tile.Value
	// member computes the members the ops catalogue does not write
	// (products, row reductions and softmaxes).
	member func(n *Node, idx *tile.Value) (*tile.Value, error)
	// override, if not nil, gives how to compute a node outside the group
	// that the kind writes itself instead of loading it (nil: load it).
	override func(n *Node) func(idx *tile.Value) (*tile.Value, error)
	// maskOf, if set, is the mask of a load at indices of shape s (nil:
	// every lane in range), where e.mask does not broadcast to every
	// index shape the kind computes at (a row kernel's [BLOCK_M,1] rows).
	maskOf func(s tile.Shape) *tile.Value
	// stream, if set, says which loads read data no other program reads
	// (a load at idx gets the streaming cache hint).
	stream func(idx *tile.Value) bool
	// keep: loads at an index every program and iteration shares
	// (rowInvariant; with loopsShared, every program, whatever the
	// iteration of a loop whose bounds are constants: a walked row's γ at
	// its block's columns) get the keep cache hint; keepRow, if set, says
	// which other loads get it (a walked row's loads in the passes before
	// the last, which reads them again from L2). stream takes precedence.
	keep, loopsShared bool
	keepRow           func(idx *tile.Value) bool
	// beforeStore, if set, is called by store once the outputs are
	// computed, before they are stored (a persistent row kernel loads its
	// next row there).
	beforeStore func()
	// onLoad, if set, is told of every load of an input (at idx).
	onLoad func(n *Node, idx *tile.Value)
	// rowReciprocal: a division by a value the same along each row (a
	// scalar, or [BLOCK_M,1], against a block of the row) is one
	// reciprocal a row and a product per element (divideByRow).
	rowReciprocal bool
}

// divideByRow writes x / y as x · (1/y) where y is the same along each row
// of x (its block is a scalar or [BLOCK_M,1] against x's row block): one
// division a row instead of one an element, as the hand-written kernels
// do (softmax 8192×4096 on the H200: 68 → 62 registers). The product
// rounds twice: within 1.5 ulp of the quotient, as Triton's and
// torch.compile's f32 division. Nil where n is not such a division.
func (e *emitter) divideByRow(n *Node, idx *tile.Value) (*tile.Value, error) {
	if n.Info.Kind != ops.Binary || n.Info.Binary != tile.OpDiv || n.Info.Cmp {
		return nil, nil
	}
	x, err := e.gen(n.Inputs[0], idx)
	if err != nil {
		return nil, err
	}
	y, err := e.gen(n.Inputs[1], idx)
	if err != nil {
		return nil, err
	}
	xs, ys := x.Type.Shape, y.Type.Shape
	perRow := !xs.IsScalar() && xs.Numel() > 1 && (ys.IsScalar() || xs.Rank == 2 && ys.Rank == 2 && ys.Dims[0] == xs.Dims[0] && ys.Dims[1] == 1 && xs.Dims[1] > 1)
	if !perRow {
		return nil, nil
	}
	return e.b.Mul(x, e.b.Div(1.0, y)), nil
}

// optParam is the kernel's meta-parameter name where it is set, else def.
func (e *emitter) optParam(name string, def int) (int, error) {
	if _, ok := e.meta[name]; !ok {
		return def, nil
	}
	return e.param(name)
}

// param is the kernel's meta-parameter name (its kind's tune set it; a
// Target.Tune may have changed it), at least 1.
func (e *emitter) param(name string) (int, error) {
	v := e.b.Meta(name)
	if err := e.b.Err(); err != nil {
		return 0, fmt.Errorf("graphpass: %v: %w", e.grp, err)
	}
	if v < 1 {
		return 0, fmt.Errorf("graphpass: %v: meta-parameter %s = %d", e.grp, name, v)
	}
	return v, nil
}

// coords splits flat row-major indices into per-dimension coordinates of shape s.
// Indices flatten made from coordinates of the same shape split into
// those coordinates (a transpose's reads through another transpose: the
// divisions and remainders of the indices would undo the multiplies and
// adds that made them, which the CPU's machine code does not see through).
func (e *emitter) coords(idx *tile.Value, s []int) []*tile.Value {
	recs := e.flats[idx]
	for i := len(recs) - 1; i >= 0; i-- { // the latest record of shape s
		if f := recs[i]; slices.Equal(f.s, s) {
			c := slices.Clone(f.c)
			for i := range c {
				if c[i] == nil {
					c[i] = e.b.Const(0, tile.I32)
				}
			}
			return c
		}
	}
	if !e.refining[idx] {
		if e.refining == nil {
			e.refining = map[*tile.Value]bool{}
		}
		e.refining[idx] = true
		defer delete(e.refining, idx)
		for i := len(recs) - 1; i >= 0; i-- {
			if f := recs[i]; !(len(recs) > 1 && f.identity(idx)) {
				if c := e.refineRuns(f, s); c != nil {
					return c
				}
			}
		}
	}
	if e.space != nil {
		if c := e.space(idx, s); c != nil {
			return c
		}
	}
	return e.split(idx, s)
}

// refineRuns is the coordinates in shape s of the flat indices that f's
// coordinates make, through the common refinement of the two shapes: the
// sizes into which both split as runs of consecutive axes ((B, C, H·W) and
// (B, C·H, W) both split into (B, C, H, W)), where it exists. Each of f's
// coordinates splits over its run of the refinement (one part: it stays as
// it is, a lane's affine), and each of s's is its run's parts flattened
// (affine where they are), so that indices read through transposes over
// merged axes, through window ops reading a transpose written over merged
// axes, and through chained transposes merged differently ((B, 4, 8·3)
// read as (B, 4·8, 3)) keep their lanes whole wherever an axis of the
// refinement holds them, where dividing the flat index would divide the
// lanes (which the CPU's machine code does not take); a coordinate split
// over several parts is itself split by coords (flattened coordinates of
// those parts split into them). Axes of size 1 have
// no part: coordinate 0. Nil where the shapes have no common refinement
// (6·4 and 4·6) or a coordinate is missing.
func (e *emitter) refineRuns(f flatOf, s []int) []*tile.Value {
	type part struct{ size, from, to int } // a refinement axis: part of f's axis from and of s's axis to
	var parts []part
	i, j := 0, 0
	rf, rs := 1, 1 // what is left of f.s[i] and s[j]
	if len(f.s) > 0 {
		rf = f.s[0]
	}
	if len(s) > 0 {
		rs = s[0]
	}
	for i < len(f.s) || j < len(s) {
		switch {
		case i < len(f.s) && rf == 1:
			if i++; i < len(f.s) {
				rf = f.s[i]
			}
		case j < len(s) && rs == 1:
			if j++; j < len(s) {
				rs = s[j]
			}
		case i == len(f.s) || j == len(s) || rf < 1 || rs < 1:
			return nil
		case rf%rs == 0: // s's axis ends first (or both): the outer part of f's
			parts = append(parts, part{rs, i, j})
			rf, rs = rf/rs, 1
		case rs%rf == 0:
			parts = append(parts, part{rf, i, j})
			rs, rf = rs/rf, 1
		default:
			return nil
		}
	}
	// each of f's coordinates over its parts
	coord := make([]*tile.Value, len(parts))
	for p := 0; p < len(parts); {
		q := p
		for q < len(parts) && parts[q].from == parts[p].from {
			q++
		}
		c := f.c[parts[p].from]
		if c == nil {
			return nil
		}
		sizes := make([]int, 0, q-p)
		for _, pt := range parts[p:q] {
			sizes = append(sizes, pt.size)
		}
		if e.refining[c] { // the indices themselves (an identity record)
			copy(coord[p:q], e.split(c, sizes))
		} else { // a coordinate itself flattened splits as it was made
			copy(coord[p:q], e.coords(c, sizes))
		}
		p = q
	}
	// each of s's coordinates from its parts
	out := make([]*tile.Value, len(s))
	p := 0
	for j := range s {
		q := p
		for q < len(parts) && parts[q].to == j {
			q++
		}
		switch q - p {
		case 0:
			out[j] = e.b.Const(0, tile.I32)
		case 1:
			out[j] = coord[p]
		default:
			sizes := make([]int, 0, q-p)
			for _, pt := range parts[p:q] {
				sizes = append(sizes, pt.size)
			}
			out[j] = e.flatten(coord[p:q], sizes)
		}
		p = q
	}
	return out
}

// split turns row-major flat indices into coordinates of shape s (the first
// one unbounded).
func (e *emitter) split(idx *tile.Value, s []int) []*tile.Value {
	c := make([]*tile.Value, len(s))
	rest := idx
	for i := len(s) - 1; i >= 0; i-- {
		if i == 0 {
			c[i] = rest
			break
		}
		c[i] = e.b.Rem(rest, s[i])
		rest = e.b.Div(rest, s[i])
	}
	return c
}

func (e *emitter) flatten(c []*tile.Value, s []int) *tile.Value {
	var idx *tile.Value
	stride := 1
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] != 1 {
			t := c[i]
			if stride != 1 {
				t = e.b.Mul(t, stride)
			}
			if idx == nil {
				idx = t
			} else {
				idx = e.b.Add(idx, t)
			}
		}
		stride *= s[i]
	}
	if idx == nil {
		return e.b.Mul(c[0], 0)
	}
	e.recordFlat(idx, c, s)
	return idx
}

// recordFlat records that flat indices idx of shape s are coordinates c
// (flats). A coordinate along an axis of size 1 is not in idx: recorded
// as nil, 0 where it is asked for (as split gives). On a GPU only shapes
// without such axes are recorded (their kernels as measured; the CPU's
// machine code needs the coordinates, not divisions of the lanes).
func (e *emitter) recordFlat(idx *tile.Value, c []*tile.Value, s []int) {
	if slices.Contains(s, 1) && e.t.GPU() {
		return
	}
	if e.flats == nil {
		e.flats = map[*tile.Value][]flatOf{}
	}
	cc := slices.Clone(c)
	for i := range s {
		if s[i] == 1 {
			cc[i] = nil
		}
	}
	e.flats[idx] = append(e.flats[idx], flatOf{c: cc, s: slices.Clone(s)})
}

// flatOf is what flat indices were made of (emitter.flatten): the
// coordinates c of shape s.
type flatOf struct {
	c []*tile.Value
	s []int
}

// identity reports whether f records flat indices idx as themselves, the
// only coordinate not 0 (flatten over one axis that is not 1): nothing to
// split them by where they have another record.
func (f flatOf) identity(idx *tile.Value) bool {
	return slices.Contains(f.c, idx)
}

// gen computes node n at the flat indices idx of its own shape.
func (e *emitter) gen(n *Node, idx *tile.Value) (*tile.Value, error) {
	key := memoKey{n, idx, e.under}
	if v, ok := e.memo[key]; ok {
		return v, nil
	}
	b := e.b
	var v *tile.Value
	inGroup := n.Group == e.grp || e.recompute[n]
	switch {
	case e.override != nil && e.override(n) != nil: // the kind computes it in place of a load (a causal mask)
		var err error
		if v, err = e.override(n)(idx); err != nil {
			return nil, err
		}
	case n.Info.Kind == ops.Constant && !inGroup:
		v = b.Const(n.Info.Value, n.Info.DType)
	case !inGroup:
		p := e.ptr[n]
		if p == nil {
			return nil, fmt.Errorf("graphpass: %v: operand %v is neither in the group nor an input", e.grp, n)
		}
		if len(n.Info.Shape) == 0 {
			v = b.Load(p, nil, nil) // a scalar: every lane uses it
		} else {
			var m *tile.Value
			switch {
			case e.under != nil && idx.Type.Shape.IsScalar():
				// under OperandWhere's condition a scalar index may lie
				// outside the operand too (the lanes' block of an operand
				// broadcast along them): it is read under the mask
				if !e.mask.Type.Shape.IsScalar() {
					idx = b.BroadcastTo(idx, e.mask.Type.Shape)
				}
				m = e.mask
			case e.maskOf != nil:
				m = e.maskOf(idx.Type.Shape)
			case e.mask != nil && !idx.Type.Shape.IsScalar():
				// a scalar index (a row group's row, the program id) is in
				// range: every lane reads that one element
				m = b.BroadcastTo(e.mask, idx.Type.Shape)
			}
			at := idx
			if n.colMajor { // stored column by column (columnMajor, transposedProducts)
				c := e.coords(idx, n.Info.Shape)
				at = e.flatten([]*tile.Value{c[1], c[0]}, []int{n.Info.Shape[1], n.Info.Shape[0]})
			}
			var hint []tile.CacheHint
			switch {
			case e.stream != nil && e.stream(idx):
				hint = []tile.CacheHint{tile.CacheStreaming}
			case e.keepRow != nil && e.keepRow(idx), e.keep && rowInvariant(idx, e.loopsShared):
				hint = []tile.CacheHint{tile.CacheKeep}
			}
			v = b.Load(b.AddPtr(p, at), m, nil, hint...)
			if e.onLoad != nil {
				e.onLoad(n, idx)
			}
		}
	case n.Info.Kind.Writable(): // elementwise and injective ops: the catalogue writes them
		var err error
		if e.rowReciprocal {
			if v, err = e.divideByRow(n, idx); err != nil {
				return nil, err
			}
		}
		if v == nil {
			if v, err = e.roundedProduct(n, idx); err != nil {
				return nil, err
			}
		}
		if v == nil {
			if v, err = e.tanhPlusOne(n, idx); err != nil {
				return nil, err
			}
		}
		if v == nil {
			if v, err = e.tanhSums(n, idx); err != nil {
				return nil, err
			}
		}
		if v == nil {
			if v, err = ops.Write(site{e, n}, &n.Info, n.inShapes(), idx); err != nil {
				return nil, err
			}
		}
	case e.member != nil: // what only the group's kind computes
		var err error
		if v, err = e.member(n, idx); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("graphpass: %v: %v inside a group", n, n.Info.Kind)
	}
	if err := b.Err(); err != nil {
		return nil, fmt.Errorf("graphpass: %v at %v: %w", e.grp, n, err)
	}
	if n.Info.DType != 0 && v.Type.DType != n.Info.DType && !v.Type.Ptr {
		v = b.Cast(v, n.Info.DType)
	}
	e.memo[key] = v
	return v, nil
}

// tanhPlusOne writes n = tanh(u) + 1 (either order; GELU's tanh form,
// ½·x·(1 + tanh(u))) from e^(−2u), where n is a sum of a one-element
// constant 1 and a tanh of n's shape in the group that nothing else
// reads (plusOneTanh): the same value, 1 + tanh(u) = 2/(1 + e^(−2u)),
// in fewer instructions (an exp and a division; a tanh is an exp, a
// division and a polynomial, both computed where lanes take either) and
// more accurately for u < 0, where 1 + tanh(u) cancels (at u = −5.5 the
// f32 sum keeps 12 bits of 24). On a GPU 2·sigmoid(2u) (the scalings by
// 2 are exact), in a rounded epilogue 2·halfSum (roundedHalfSum); on a
// CPU 2/(1 + e^(−2u)) by the exp and the division themselves, since the
// CPU's sigmoid is the exact one of two parts (codegen/cpu/native:
// sigmoid32), slower than the tanh (the chain's kernel alone on one of
// the 2-core VM's cores, 64K elements: tanh 27.4 µs, sigmoid 31.6, exp
// and division 18.7, and 16.6 with −2 folded into u's constants; its
// large size (4M) on the H200 machine's 16-core host, r38a, before the
// folding, 0.40–0.43 → 0.30–0.31 ms in turn three times). Else nil.
func (e *emitter) tanhPlusOne(n *Node, idx *tile.Value) (*tile.Value, error) {
	t := e.plusOneTanh(n)
	if t == nil {
		return nil, nil
	}
	b := e.b
	if !e.t.GPU() {
		d, err := e.onePlusExp(t, idx)
		if err != nil {
			return nil, err
		}
		return b.Div(b.Const(2, d.Type.DType), d), nil
	}
	if e.roundedEpilogue(t.Inputs[0]) {
		h, err := e.roundedHalfSum(t, idx)
		if err != nil {
			return nil, err
		}
		return b.Mul(h, b.Const(2, h.Type.DType)), nil
	}
	u, err := e.gen(t.Inputs[0], idx)
	if err != nil {
		return nil, err
	}
	dt := u.Type.DType
	return b.Mul(b.Sigmoid(b.Mul(u, b.Const(2, dt))), b.Const(2, dt)), nil
}

// plusOneTanh is the tanh of n = tanh(u) + 1 that tanhPlusOne rewrites,
// or nil.
func (e *emitter) plusOneTanh(n *Node) *Node {
	if n.Info.Kind != ops.Binary || n.Info.Binary != tile.OpAdd || n.Info.Cmp || len(n.Inputs) != 2 {
		return nil
	}
	t, one := n.Inputs[0], n.Inputs[1]
	if t.Info.Kind == ops.Constant {
		t, one = one, t
	}
	if one.Info.Kind != ops.Constant || one.Info.Value != 1 || numel(one.Info.Shape) != 1 ||
		t.Info.Kind != ops.Unary || t.Info.Name != "tanh" || len(t.Inputs) != 1 || !sameShape(t.Info.Shape, n.Info.Shape) ||
		t.Group != e.grp || e.recompute[t] || !e.private(t) || !e.readOnlyBy(t, n) {
		return nil
	}
	return t
}

// readOnlyBy reports whether n is the one user of m, and uses it once,
// among the nodes this group computes (its members and what it
// recomputes): users in other groups compute m themselves where it is
// private (not written out), as a training graph's backward recomputes
// GELU's tanh from the pre-activation.
func (e *emitter) readOnlyBy(m, n *Node) bool {
	uses := 0
	for _, u := range m.Users {
		if !e.inGroup(u) {
			continue
		}
		if u != n {
			return false
		}
		uses++
	}
	return uses == 1
}

// roundedHalfSum is (1 + tanh(u))/2 = 1/(1 + e^(−2u)) for the tanh t of
// u, in a rounded epilogue, as r² with r = 1/√(1 + 2^(−2u·log₂e)): ex2
// (flushing subnormals, which 1 + ignores: Exp2Flush) and rsqrt, each within
// 2 ulp, on an argument rounded once (relative error about |2u|·2⁻²⁴ in
// e^(−2u), which moves the sigmoid by less), in place of the exact exp's
// range reduction and the reciprocal's correction. Where u is a product in
// the group that only the tanh reads (GELU's √(2/π)·(x + 0.044715·x³)),
// its constant factors and −2·log₂e are one constant (roundedProduct).
func (e *emitter) roundedHalfSum(t *Node, idx *tile.Value) (*tile.Value, error) {
	b := e.b
	arg, err := e.scaled(t.Inputs[0], t, -2*math.Log2E, idx)
	if err != nil {
		return nil, err
	}
	r := b.Rsqrt(b.Add(b.Exp2Flush(arg), b.Const(1, arg.Type.DType)))
	return b.Mul(r, r), nil
}

// halfSum is (1 + tanh(u))/2 = 1/(1 + e^(−2u)) for the tanh t of u: on a
// GPU in a rounded epilogue (roundedHalfSum), on a CPU by its exp and a
// division (onePlusExp).
func (e *emitter) halfSum(t *Node, idx *tile.Value) (*tile.Value, error) {
	if e.t.GPU() {
		return e.roundedHalfSum(t, idx)
	}
	d, err := e.onePlusExp(t, idx)
	if err != nil {
		return nil, err
	}
	return e.b.Div(e.b.Const(1, d.Type.DType), d), nil
}

// onePlusExp is 1 + e^(−2u) for the tanh t of u, −2 folded into u's
// constants (scaled): a CPU's denominator of 1 + tanh(u) = 2/(1 + e^(−2u)).
func (e *emitter) onePlusExp(t *Node, idx *tile.Value) (*tile.Value, error) {
	arg, err := e.scaled(t.Inputs[0], t, -2, idx)
	if err != nil {
		return nil, err
	}
	return e.b.Add(e.b.Const(1, arg.Type.DType), e.b.Exp(arg)), nil
}

// scaled is c·u for u an operand of user, u's constant factors folded
// into c where u is a product user alone reads (product).
// Where that leaves c·(y + a·y³) (GELU's inner sum, y·y·y or cube(y)),
// y·(c + c·a·y²): a multiply, a multiply-add (ptxas contracts them) and a
// multiply, one fewer than the cube's two, the multiply-add and c.
func (e *emitter) scaled(u, user *Node, c float64, idx *tile.Value) (*tile.Value, error) {
	var p flatProduct
	switch {
	case e.isProduct(u) && e.absorbed(u, user):
		var ok bool
		if p, ok = e.product(u, c); !ok {
			p = flatProduct{c: c, factors: []*Node{u}, half: []bool{false}}
		}
	default:
		p = flatProduct{c: c, factors: []*Node{u}, half: []bool{false}}
	}
	if len(p.factors) == 1 && !p.half[0] {
		owner := user
		if p.factors[0] != u {
			owner = nil // inside u: product checked it is u's alone
		}
		if y, a, ok := e.cubic(p.factors[0], owner); ok {
			b := e.b
			yv, err := e.gen(y, idx)
			if err != nil {
				return nil, err
			}
			dt := yv.Type.DType
			return b.Mul(yv, b.Add(b.Mul(b.Mul(yv, yv), b.Const(p.c*a, dt)), b.Const(p.c, dt))), nil
		}
	}
	return e.genProduct(p, idx)
}

// cubic matches v = y + a·y³ (either order; y³ as y·y·y or cube(y), the
// constant a anywhere in its product), where v and its parts are the
// group's own and read once (by user, where user is not nil).
func (e *emitter) cubic(v, user *Node) (y *Node, a float64, ok bool) {
	if v.Info.Kind != ops.Binary || v.Info.Binary != tile.OpAdd || v.Info.Cmp || len(v.Inputs) != 2 || v.Info.DType != tile.F32 ||
		!e.private(v) || !e.readOnce(v, user) {
		return nil, 0, false
	}
	for i := range 2 {
		y, cu := v.Inputs[i], v.Inputs[1-i]
		if !sameShape(y.Info.Shape, v.Info.Shape) || !e.isProduct(cu) || !e.absorbed(cu, v) {
			continue
		}
		p, ok := e.product(cu, 1)
		if !ok || slices.Contains(p.half, true) {
			continue
		}
		f := p.factors
		switch {
		case len(f) == 3 && f[0] == y && f[1] == y && f[2] == y:
			return y, p.c, true
		case len(f) == 1 && f[0].Info.Kind == ops.Unary && f[0].Info.Name == "cube" && len(f[0].Inputs) == 1 && f[0].Inputs[0] == y &&
			e.private(f[0]) && e.readOnce(f[0], nil):
			return y, p.c, true
		}
	}
	return nil, 0, false
}

// flatProduct is a product of n's shape flattened (product): c times
// its factors, each a node of that shape, or a half sum (1 + tanh(u))/2
// (roundedHalfSum) where half is set; consts counts the constants
// multiplied into c.
type flatProduct struct {
	c       float64
	factors []*Node
	half    []bool
	consts  int
}

// isProduct reports whether n is an elementwise f32 product.
func (e *emitter) isProduct(n *Node) bool {
	return n.Info.Kind == ops.Binary && n.Info.Binary == tile.OpMul && !n.Info.Cmp && len(n.Inputs) == 2 && n.Info.DType == tile.F32
}

// absorbed reports whether m, an operand of user, is computed only for
// user, where user's writing may take it apart: in the group, not
// written out, read by user alone and once in the group (readOnlyBy), of
// user's shape.
func (e *emitter) absorbed(m, user *Node) bool {
	return e.private(m) && e.readOnlyBy(m, user) && sameShape(m.Info.Shape, user.Info.Shape) && m.Info.DType == user.Info.DType
}

// readOnce is readOnlyBy(m, user), or where user is nil, whether one node
// of the group reads m, once.
func (e *emitter) readOnce(m, user *Node) bool {
	if user != nil {
		return e.readOnlyBy(m, user)
	}
	var only *Node
	for _, u := range m.Users {
		if e.inGroup(u) {
			if only != nil {
				return false
			}
			only = u
		}
	}
	return only != nil
}

// private reports whether m is computed in the group for the group alone:
// a member not written out, or a member of another group recomputed here.
func (e *emitter) private(m *Node) bool {
	return (m.Group == e.grp || e.recompute[m]) && m != e.grp.Root && !slices.Contains(e.grp.Extra, m)
}

// product flattens the product n, times c: one-element constants
// multiplied into c, the products and the sums 1 + tanh(u) that only it
// reads taken apart (the latter as 2 times their half, in a rounded
// epilogue), the rest factors. Not ok where an operand is broadcast.
func (e *emitter) product(n *Node, c float64) (p flatProduct, ok bool) {
	p.c = c
	var walk func(n *Node) bool
	walk = func(n *Node) bool {
		for _, in := range n.Inputs {
			switch {
			case in.Info.Kind == ops.Constant && numel(in.Info.Shape) == 1:
				p.c *= in.Info.Value
				p.consts++
			case e.isProduct(in) && e.absorbed(in, n):
				if !walk(in) {
					return false
				}
			case !sameShape(in.Info.Shape, n.Info.Shape):
				return false
			case e.t.GPU() && e.absorbed(in, n) && e.plusOneTanh(in) != nil && e.roundedEpilogue(in):
				p.factors, p.half = append(p.factors, in), append(p.half, true)
				p.c *= 2
			default:
				p.factors, p.half = append(p.factors, in), append(p.half, false)
			}
		}
		return true
	}
	return p, walk(n) && len(p.factors) > 0
}

// genProduct computes p: its factors' product, times p.c unless that is 1.
func (e *emitter) genProduct(p flatProduct, idx *tile.Value) (*tile.Value, error) {
	b := e.b
	var v *tile.Value
	for i, f := range p.factors {
		var x *tile.Value
		var err error
		if p.half[i] {
			x, err = e.roundedHalfSum(e.plusOneTanh(f), idx)
		} else {
			x, err = e.gen(f, idx)
		}
		if err != nil {
			return nil, err
		}
		if v == nil {
			v = x
		} else {
			v = b.Mul(v, x)
		}
	}
	if p.c != 1 {
		v = b.Mul(v, b.Const(p.c, v.Type.DType))
	}
	return v, nil
}

// roundedProduct writes a product n in a rounded epilogue (one a GPU's
// TF32 or bf16 product's values feed: roundedEpilogue) flattened
// (product), where that saves multiplications: its one-element constants
// multiplied into one (GELU's ½ and the 2 of 1 + tanh(u) = 2·r², which
// cancel), in f64 and rounded once, reassociated as the rounded
// product's own error allows many times over. Else nil.
func (e *emitter) roundedProduct(n *Node, idx *tile.Value) (*tile.Value, error) {
	if !e.t.GPU() || !e.isProduct(n) || !e.roundedEpilogue(n) {
		return nil, nil
	}
	p, ok := e.product(n, 1)
	if !ok || p.consts < 2 && !slices.Contains(p.half, true) {
		return nil, nil
	}
	return e.genProduct(p, idx)
}

// tanhSums writes, in the epilogue of a GPU's TF32 or bf16 product and in
// any group on a CPU, n = 1 + t (either order) as 2h and n = 1 − t·t as
// 4h(1 − h), h = (1 + t)/2 = 1/(1 + e^(−2u)) (halfSum), for a tanh t =
// tanh(u) that the group reads only through such sums (tanhSumsOnly;
// GELU's gradient, ½·g·(1 + t) + ½·g·x·(1 − t²)·u′, where the backward
// recomputes t from the pre-activation): on the GPU ex2 and rsqrt
// (roundedHalfSum), on a CPU an exp and a division (as tanhPlusOne), once
// for both in place of the tanh's exponential, reciprocal and polynomial.
// Both are within a few ulp of 1 of the sums as the graph writes them,
// and nearer where those cancel: 2h where u < 0 (1 + t), 4h(1 − h) where
// u < 0 too (1 − t·t, with t near −1); where u > 0 4h(1 − h) loses its
// relative accuracy as 1 − t·t does, below 2⁻²⁴ (of its precision), and
// its term with it. On the GPU u need not come from the product: the sums
// meet the product's rounding, 2⁻¹¹ of g, in the term they are in. On a
// CPU (2026-12-05, thirty-eighth session) the 2-core VM's encoder
// forward+backward large ran its GELU gradient's product 1.43–1.45 →
// 1.38–1.40 ms, the step level within its spread. Else nil.
func (e *emitter) tanhSums(n *Node, idx *tile.Value) (*tile.Value, error) {
	t, square := e.tanhSum(n)
	if t == nil {
		return nil, nil
	}
	// under OperandWhere's condition apart, as gen memoises: a half sum
	// computed from loads masked by one window tap's condition is not
	// the value of lanes another tap reads (a max pool's backward over
	// a recomputed tanh, FuzzConvNet's 1761d2f64928ef50)
	key := memoKey{n: t, idx: idx, under: e.under}
	if e.halves == nil {
		e.halves = map[memoKey]*tile.Value{}
	}
	h, ok := e.halves[key]
	if !ok {
		var err error
		if h, err = e.halfSum(t, idx); err != nil {
			return nil, err
		}
		e.halves[key] = h
	}
	b := e.b
	dt := h.Type.DType
	if square {
		return b.Mul(b.Mul(h, b.Sub(b.Const(1, dt), h)), b.Const(4, dt)), nil
	}
	return b.Mul(h, b.Const(2, dt)), nil
}

// tanhSum is the tanh t of n = 1 + t or n = 1 − t·t (square set) that
// tanhSums rewrites, or nil.
func (e *emitter) tanhSum(n *Node) (t *Node, square bool) {
	if e.t.GPU() && (!e.roundedGroup() || n.Info.DType != tile.F32) || n.Info.Kind != ops.Binary || n.Info.Cmp || len(n.Inputs) != 2 {
		return nil, false
	}
	a, c := n.Inputs[0], n.Inputs[1]
	switch n.Info.Binary {
	case tile.OpAdd:
		if a.Info.Kind == ops.Constant {
			a, c = c, a
		}
		if isOne(c) && e.tanhSumsOnly(a) && sameShape(a.Info.Shape, n.Info.Shape) {
			return a, false
		}
	case tile.OpSub:
		if isOne(a) && e.isSquare(c) && e.tanhSumsOnly(c.Inputs[0]) && sameShape(c.Info.Shape, n.Info.Shape) {
			return c.Inputs[0], true
		}
	}
	return nil, false
}

// isOne reports whether c is a one-element constant 1.
func isOne(c *Node) bool {
	return c.Info.Kind == ops.Constant && c.Info.Value == 1 && numel(c.Info.Shape) == 1
}

// isSquare reports whether m is t·t of one node t, private to the group
// (of either float type: tanhSumsOnly asks f32 of a GPU's).
func (e *emitter) isSquare(m *Node) bool {
	return isBinary(m, tile.OpMul) && m.Inputs[0] == m.Inputs[1] && e.private(m) && sameShape(m.Inputs[0].Info.Shape, m.Info.Shape)
}

// tanhSumsOnly reports whether t is a tanh (f32 on a GPU) that the group
// computes for itself and reads only as 1 + t, or as t·t (its own, of t's
// shape) read only by 1 − t·t.
func (e *emitter) tanhSumsOnly(t *Node) bool {
	if t.Info.Kind != ops.Unary || t.Info.Name != "tanh" || len(t.Inputs) != 1 || e.t.GPU() && t.Info.DType != tile.F32 || !e.private(t) {
		return false
	}
	return geluTanhUses(t, e.inGroup, e.isSquare)
}

// inGroup reports whether the group's kernel computes u: a member, or a
// member of another group it recomputes.
func (e *emitter) inGroup(u *Node) bool { return u.Group == e.grp || e.recompute[u] }

// geluTanhUses reports whether the nodes that in admits read t, and read
// it only as 1 + t (either order) or as t·t (that square admits, where
// square is not nil) which they read only as 1 − t·t: GELU's and its
// derivative's uses of their tanh, which a TF32 or bf16 product's
// epilogue computes by ex2 and rsqrt (tanhPlusOne, tanhSums), and which
// the wave model therefore does not count as heavy (heavyEpilogue).
func geluTanhUses(t *Node, in, square func(*Node) bool) bool {
	uses := 0
	for _, u := range t.Users {
		if !in(u) {
			continue
		}
		uses++
		switch {
		case isBinary(u, tile.OpAdd) && (u.Inputs[0] == t && isOne(u.Inputs[1]) || u.Inputs[1] == t && isOne(u.Inputs[0])):
		case isBinary(u, tile.OpMul) && u.Inputs[0] == t && u.Inputs[1] == t && (square == nil || square(u)):
			for _, w := range u.Users {
				if in(w) && !(isBinary(w, tile.OpSub) && isOne(w.Inputs[0]) && w.Inputs[1] == u) {
					return false
				}
			}
		default:
			return false
		}
	}
	return uses > 0
}

// isBinary reports whether n is the elementwise binary op (not a
// comparison) of two operands.
func isBinary(n *Node, op tile.Op) bool {
	return n.Info.Kind == ops.Binary && n.Info.Binary == op && !n.Info.Cmp && len(n.Inputs) == 2
}

// roundedGroup reports whether the group is a product formed in TF32 or
// bf16 with its epilogue.
func (e *emitter) roundedGroup() bool {
	return e.grp.MatMul != nil && e.grp.Kind == MatMulGroup && (e.prec == tile.PrecTF32 || e.prec == tile.PrecBF16)
}

// roundedEpilogue reports whether x, a value of the group, is computed
// from the group's matrix product formed in TF32 or bf16 (f32 values): its
// relative error is then the operands' rounding, 2⁻¹¹ (TF32) or 2⁻⁸
// (bf16) of the terms, far above a few ulp of f32 more in the epilogue,
// as attention's P = 2^(x·log₂e − m·log₂e) with these precisions.
func (e *emitter) roundedEpilogue(x *Node) bool {
	mm := e.grp.MatMul
	if mm == nil || e.grp.Kind != MatMulGroup || x.Info.DType != tile.F32 || e.prec != tile.PrecTF32 && e.prec != tile.PrecBF16 {
		return false
	}
	seen := map[*Node]bool{}
	var from func(n *Node) bool
	from = func(n *Node) bool {
		if n == mm {
			return true
		}
		if seen[n] || n.Group != e.grp {
			return false
		}
		seen[n] = true
		return slices.ContainsFunc(n.Inputs, from)
	}
	return from(x)
}

// site is node n of the group being written, as the ops catalogue sees it.
type site struct {
	e *emitter
	n *Node
}

func (s site) Builder() *tile.Builder                             { return s.e.b }
func (s site) Coords(idx *tile.Value, sh []int) []*tile.Value     { return s.e.coords(idx, sh) }
func (s site) Flatten(c []*tile.Value, sh []int) *tile.Value      { return s.e.flatten(c, sh) }
func (s site) Operand(i int, at *tile.Value) (*tile.Value, error) { return s.e.gen(s.n.Inputs[i], at) }
func (s site) OperandWhere(i int, ok, at *tile.Value, inBounds func() *tile.Value) (*tile.Value, error) {
	return s.e.genWhere(s.n.Inputs[i], ok, at, inBounds)
}
func (s site) Masked() bool { return !s.e.t.GPU() && s.e.maskOf == nil }

// genWhere computes n at indices at on the lanes where ok holds (the
// others' values unspecified, their indices possibly outside n): on a GPU
// at inBounds() on every lane (a load per lane costs no more than a
// predicate, and the kernels stay as they were measured); on the CPU with
// the loads under ok, so that indices stay affine functions of the lanes
// (no clamps), as the machine code takes them. A kind that masks loads by
// their shape (maskOf) reads every lane too, and so does a read at one
// index for every lane (a scalar: its clamps are a scalar's, and a load
// at a scalar index is not masked).
func (e *emitter) genWhere(n *Node, ok, at *tile.Value, inBounds func() *tile.Value) (*tile.Value, error) {
	if e.t.GPU() || e.maskOf != nil || at.Type.Shape.IsScalar() {
		return e.gen(n, inBounds())
	}
	mask, under := e.mask, e.under
	defer func() { e.mask, e.under = mask, under }()
	e.under = e.and(under, ok)
	e.mask = e.and(mask, ok)
	return e.gen(n, at)
}

// inShapes are the shapes of n's operands.
func (n *Node) inShapes() [][]int {
	s := make([][]int, len(n.Inputs))
	for i, in := range n.Inputs {
		s[i] = in.Info.Shape
	}
	return s
}

// inRange is x on the lanes in range and other on the rest (x itself when
// every lane is in range).
func (e *emitter) inRange(x *tile.Value, other float64) *tile.Value {
	if e.mask == nil {
		return x
	}
	return e.b.Where(e.mask, x, other)
}

// and is the conjunction of two masks, either of which may be nil (all
// lanes in range).
func (e *emitter) and(x, y *tile.Value) *tile.Value {
	switch {
	case x == nil:
		return y
	case y == nil:
		return x
	}
	return e.b.And(x, y)
}

// loadOr0 loads the lanes under mask and gives 0 for the others (nil: every
// lane loads).
func (e *emitter) loadOr0(ptr, mask *tile.Value) *tile.Value {
	if mask == nil {
		return e.b.Load(ptr, nil, nil)
	}
	return e.b.Load(ptr, mask, 0.0)
}

// fullMask broadcasts a mask of [r,1] or [1,c] lanes to the tile [r,c]
// (nil stays nil: every lane in range).
func (e *emitter) fullMask(m *tile.Value, r, c int) *tile.Value {
	if m == nil {
		return nil
	}
	return e.b.BroadcastTo(m, tile.Shp(r, c))
}

var inf = math.Inf(1)
