package graphpass

import (
	"fmt"
	"math"
	"os"

	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// Kernel is a group's tile kernel and how to launch it.
type Kernel struct {
	Tile  *tile.Kernel
	Grid  tile.Grid
	Out   []int      // the output's shape (every output's, when there are several)
	DType tile.DType // the output's dtype (likewise)
	Outs  int        // the number of outputs: the root, then the group's Extra
	// Accumulates: the kernel adds into its output (a reduction split over
	// programs, each adding its part atomically), which must be zeros first
	Accumulates bool
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

// Emit writes the group's kernel. Elementwise groups run over the output's
// elements in blocks; reduction groups give each program a block of outputs
// and loop over the reduced elements. Every value is computed by gen, from
// the group's op DAG, for a block of flat indices into its own shape.
func Emit(grp *Group, prec tile.Precision) (*Kernel, error) {
	root := grp.Root
	d := root.Info.DType
	b := tile.NewBuilder(fmt.Sprintf("fused_%d_%s", grp.ID, grp.Kind), nil)
	e := &emitter{b: b, grp: grp, prec: prec, ptr: map[*Node]*tile.Value{}, memo: map[memoKey]*tile.Value{}}
	for i, in := range grp.Inputs {
		e.ptr[in] = b.Ptr(fmt.Sprintf("in%d", i), in.Info.DType)
	}
	out := b.Ptr("out", d)
	for i, x := range grp.Extra {
		if x.Info.DType != d || !sameShape(x.Info.Shape, root.Info.Shape) {
			return nil, fmt.Errorf("graphpass: %v: extra output %v is %v %v, the root %v %v", grp, x, x.Info.DType, x.Info.Shape, d, root.Info.Shape)
		}
		e.extra = append(e.extra, b.Ptr(fmt.Sprintf("out%d", i+1), d))
	}
	if len(grp.Extra) > 0 && (grp.Kind == ReduceGroup || grp.Kind == AttentionGroup || grp.Kind == RowGroup && looped(grp.Full)) {
		return nil, fmt.Errorf("graphpass: %v: extra outputs in a %v group", grp, grp.Kind)
	}
	k := &Kernel{Out: root.Info.Shape, DType: d, Outs: 1 + len(grp.Extra)}
	switch grp.Kind {
	case ElementwiseGroup:
		n := numel(root.Info.Shape)
		block := min(1024, pow2AtLeast(n))
		e.lanes, e.block = b.Arange(0, block), block
		offs := b.Add(b.Mul(b.ProgramID(0), block), e.lanes)
		e.offs = offs
		if n%block != 0 { // else every lane is in range: no mask
			e.mask = b.Lt(offs, n)
		}
		if err := e.store(out, offs); err != nil {
			return nil, err
		}
		k.Grid = tile.Grid{tile.CDiv(n, block)}
	case ReduceGroup:
		if err := e.reduce(out, k); err != nil {
			return nil, err
		}
	case MatMulGroup:
		if err := e.matmul(out, k); err != nil {
			return nil, err
		}
	case AttentionGroup:
		if err := e.attention(out, k); err != nil {
			return nil, err
		}
	case RowGroup:
		full := grp.Full
		n := full[len(full)-1]
		rows := numel(full) / n
		k.Grid = tile.Grid{rows}
		if looped(full) {
			if err := e.rowLooped(out, n); err != nil {
				return nil, err
			}
			break
		}
		block := pow2AtLeast(n)
		cols := b.Arange(0, block)
		e.cols = cols
		if block != n {
			e.mask = b.Lt(cols, n)
		}
		e.rowIdx = b.Add(b.Mul(b.ProgramID(0), n), cols)
		if err := e.store(out, e.rowIdx); err != nil {
			return nil, err
		}
	}
	tk, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("graphpass: %v: %w", grp, err)
	}
	k.Tile = tk
	return k, nil
}

// store computes the root and each extra output at idx, flat indices of
// the shape they share, and stores them under the mask.
func (e *emitter) store(out, idx *tile.Value) error {
	ptrs := append([]*tile.Value{out}, e.extra...)
	for i, n := range append([]*Node{e.grp.Root}, e.grp.Extra...) {
		v, err := e.gen(n, idx)
		if err != nil {
			return err
		}
		e.b.Store(e.b.AddPtr(ptrs[i], idx), v, e.mask)
	}
	return nil
}

type memoKey struct {
	n   *Node
	idx *tile.Value
}

type emitter struct {
	err    error
	prec   tile.Precision // of matmul groups' dots
	mmAcc  *tile.Value    // matmul groups: the product's tile
	rowIdx *tile.Value    // row groups: the flat indices of this program's row
	cols   *tile.Value    // row groups: the column of each lane
	b      *tile.Builder
	grp    *Group
	extra  []*tile.Value // pointers of the extra outputs
	ptr    map[*Node]*tile.Value
	mask   *tile.Value // lanes in range; nil where the sizes leave every lane in range
	// elementwise groups: the block's flat indices offs = pid·block + lanes
	offs, lanes *tile.Value
	block       int
	memo        map[memoKey]*tile.Value
	// looped row groups: each softmax's row maximum and Σe^(x-max)
	stats map[*Node][2]*tile.Value
}

// coords splits flat row-major indices into per-dimension coordinates of shape s.
func (e *emitter) coords(idx *tile.Value, s []int) []*tile.Value {
	if idx == e.rowIdx && e.rowIdx != nil && sameShape(s, e.grp.Full) {
		// a row group's own indices: the row is the program id (one scalar,
		// split over the leading dimensions), the column the lane
		return append(e.split(e.b.ProgramID(0), s[:len(s)-1]), e.cols)
	}
	return e.split(idx, s)
}

// split turns row-major flat indices into coordinates of shape s (the first
// one unbounded).
func (e *emitter) split(idx *tile.Value, s []int) []*tile.Value {
	if idx == e.offs && e.offs != nil {
		return e.splitBlock(s)
	}
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

// splitBlock is split of an elementwise block's indices pid·B + lanes. A
// coordinate whose whole period (its stride times its size) divides B is
// the same in every program, (lanes/stride) mod size: the interpreter
// computes it once per launch, the GPU from the thread index alone. One
// whose stride divides B is pid·(B/stride) + lanes/stride, mod its size:
// a scalar times a constant and an add per program. Others divide the
// flat index itself.
func (e *emitter) splitBlock(s []int) []*tile.Value {
	b, bl := e.b, e.block
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
			q = div(e.lanes, stride)
		case bl%stride == 0:
			q = b.Add(b.Mul(b.ProgramID(0), bl/stride), div(e.lanes, stride))
		default:
			q = div(e.offs, stride)
		}
		if i > 0 {
			q = b.Rem(q, s[i])
		}
		c[i] = q
		stride *= s[i]
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
	return idx
}

// gen computes node n at the flat indices idx of its own shape.
func (e *emitter) gen(n *Node, idx *tile.Value) (*tile.Value, error) {
	key := memoKey{n, idx}
	if v, ok := e.memo[key]; ok {
		return v, nil
	}
	b := e.b
	var v *tile.Value
	inGroup := n.Group == e.grp
	switch {
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
			if e.mask != nil {
				m = b.BroadcastTo(e.mask, idx.Type.Shape)
			}
			v = b.Load(b.AddPtr(p, idx), m, nil)
		}
	case n.Info.Kind.Writable(): // elementwise and injective ops: the catalogue writes them
		var err error
		if v, err = ops.Write(site{e, n}, &n.Info, n.inShapes(), idx); err != nil {
			return nil, err
		}
	default:
		in := func(i int, at *tile.Value) (*tile.Value, error) { return e.gen(n.Inputs[i], at) }
		switch n.Info.Kind {
		case ops.Reduce: // a row reduction inside a row group: once per row, whatever idx
			if r, ok := e.memo[memoKey{n, nil}]; ok {
				return r, nil
			}
			x, err := in(0, e.rowIdx)
			if err != nil {
				return nil, err
			}
			identity := 0.0
			if n.Info.Reduce == tile.OpReduceMax {
				identity = -inf
			}
			v = b.Reduce(n.Info.Reduce, e.inRange(x, identity), 0)
			e.memo[memoKey{n, nil}] = v
		case ops.MatMul, ops.BatchedMatMul: // the group's product: its tile, computed by matmul() or attention()
			if e.mmAcc == nil {
				return nil, fmt.Errorf("graphpass: %v: product %v outside its tile", e.grp, n)
			}
			v = e.mmAcc
		case ops.Softmax: // along the row: max, exp, sum in the block
			if st, ok := e.stats[n]; ok { // a looped row: the statistics are known
				x, err := in(0, idx)
				if err != nil {
					return nil, err
				}
				z := b.Sub(x, st[0])
				if n.Info.Log {
					v = b.Sub(z, b.Log(st[1]))
				} else {
					v = b.Mul(b.Exp(z), b.Div(1.0, st[1]))
				}
				break
			}
			x, err := in(0, e.rowIdx)
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
				v = b.Sub(z, b.Log(s))
			} else {
				v = b.Mul(ez, b.Div(1.0, s))
			}
		case ops.SoftmaxGrad: // along the row, from (x, y, dy): y ⊙ (dy − Σ dy⊙y); log-softmax: dy − e^y Σ dy
			y, err := in(1, e.rowIdx)
			if err != nil {
				return nil, err
			}
			dy, err := in(2, e.rowIdx)
			if err != nil {
				return nil, err
			}
			if n.Info.Log {
				v = b.Sub(dy, b.Mul(b.Exp(y), b.Sum(e.inRange(dy, 0.0), 0)))
			} else {
				v = b.Mul(y, b.Sub(dy, b.Sum(e.inRange(b.Mul(dy, y), 0.0), 0)))
			}
		default:
			return nil, fmt.Errorf("graphpass: %v: %v inside a group", n, n.Info.Kind)
		}
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

// site is node n of the group being written, as the ops catalogue sees it.
type site struct {
	e *emitter
	n *Node
}

func (s site) Builder() *tile.Builder                             { return s.e.b }
func (s site) Coords(idx *tile.Value, sh []int) []*tile.Value     { return s.e.coords(idx, sh) }
func (s site) Flatten(c []*tile.Value, sh []int) *tile.Value      { return s.e.flatten(c, sh) }
func (s site) Operand(i int, at *tile.Value) (*tile.Value, error) { return s.e.gen(s.n.Inputs[i], at) }

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

// reduce writes a reduction group: program p handles outputs
// [p·BO, (p+1)·BO) and loops over the reduced elements BR at a time.
func (e *emitter) reduce(out *tile.Value, k *Kernel) error {
	b, root := e.b, e.grp.Root
	x := root.Inputs[0]
	isReduced := map[int]bool{}
	for _, a := range root.Info.Axes {
		isReduced[a] = true
	}
	// Neighbouring dimensions that are both kept or both reduced merge into
	// one, and dimensions of size 1 drop out: the flat index into x is the
	// same, with fewer divisions to split it (a full sum reads x in order).
	var inS []int
	var reduced []bool
	for i, dsz := range x.Info.Shape {
		switch {
		case dsz == 1:
		case len(inS) > 0 && reduced[len(reduced)-1] == isReduced[i]:
			inS[len(inS)-1] *= dsz
		default:
			inS, reduced = append(inS, dsz), append(reduced, isReduced[i])
		}
	}
	if len(inS) == 0 { // one element
		inS, reduced = []int{1}, []bool{true}
	}
	var keptS, redS []int
	for i, dsz := range inS {
		if reduced[i] {
			redS = append(redS, dsz)
		} else {
			keptS = append(keptS, dsz)
		}
	}
	no, nr := numel(keptS), numel(redS)
	br := min(1024, pow2AtLeast(nr))
	bo := max(1, min(pow2AtLeast(no), 4096/br))
	// few outputs over many elements: the reduced range is split over
	// programs too (program axis 1), each adding its part into the output
	// atomically; sums only (there is no atomic max)
	split, chunk := 1, nr
	if programs := tile.CDiv(no, bo); root.Info.Reduce == tile.OpReduceSum && programs < minPrograms {
		split = min(tile.CDiv(nr, 4*br), tile.CDiv(minPrograms, programs))
		if split > 1 {
			chunk = tile.CDiv(tile.CDiv(nr, split), br) * br
			split = tile.CDiv(nr, chunk)
		}
	}
	var lo, hi any = 0, nr
	if split > 1 {
		l := b.Mul(b.ProgramID(1), chunk)
		lo, hi = l, b.Minimum(b.Add(l, chunk), nr)
	}
	o := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bo), b.Arange(0, bo)), 1) // [BO,1]
	// nil: every output in range
	var maskO *tile.Value
	if no%bo != 0 {
		maskO = b.Lt(o, no)
	}
	rk := b.ExpandDims(b.Arange(0, br), 0) // [1,BR]
	d := root.Info.DType
	identity := 0.0
	if root.Info.Reduce == tile.OpReduceMax {
		identity = -inf
	}
	acc := b.For(lo, hi, br, []*tile.Value{b.Full(identity, d, bo, br)}, func(r0 *tile.Value, c []*tile.Value) []*tile.Value {
		r := b.Add(rk, r0)
		mask := maskO
		if nr%br != 0 { // else every step is whole (chunk is a multiple of br)
			mask = e.and(maskO, b.Lt(r, nr))
		}
		// input coordinates: kept ones from o, reduced ones from r
		co, cr := e.coords(b.BroadcastTo(o, tile.Shp(bo, br)), keptS), e.coords(b.BroadcastTo(r, tile.Shp(bo, br)), redS)
		full := make([]*tile.Value, len(inS))
		for i, j, l := 0, 0, 0; i < len(inS); i++ {
			if reduced[i] {
				full[i] = cr[l]
				l++
			} else {
				full[i] = co[j]
				j++
			}
		}
		e.mask = mask
		v, err := e.gen(x, e.flatten(full, inS))
		if err != nil {
			e.err = err
			return c
		}
		v = e.inRange(v, identity)
		if root.Info.Reduce == tile.OpReduceMax {
			return []*tile.Value{b.Maximum(c[0], v)}
		}
		return []*tile.Value{b.Add(c[0], v)}
	})
	if e.err != nil {
		return e.err
	}
	res := b.Reduce(root.Info.Reduce, acc[0], 1)
	k.Grid = tile.Grid{tile.CDiv(no, bo)}
	var storeMask *tile.Value
	if maskO != nil {
		storeMask = b.Reshape(maskO, bo)
	}
	if split > 1 {
		b.AtomicAdd(b.AddPtr(out, b.Reshape(o, bo)), res, storeMask)
		k.Grid[1], k.Accumulates = split, true
		return nil
	}
	b.Store(b.AddPtr(out, b.Reshape(o, bo)), res, storeMask)
	return nil
}

// minPrograms is the fewest programs a reduction is spread over when its
// outputs are few (about two per SM of an H200).
const minPrograms = 256

var inf = math.Inf(1)

// matmul writes a matmul group: program (i, j) computes the product's
// BM×BN tile with a K loop of dots, then the epilogue over that tile.
func (e *emitter) matmul(out *tile.Value, k *Kernel) error {
	b, mm := e.b, e.grp.MatMul
	s := mm.Info.Shape
	batch, aS := 1, mm.Inputs[0].Info.Shape
	if mm.Info.Kind == ops.BatchedMatMul { // program axis 2 walks the batch
		batch, s, aS = s[0], s[1:], aS[1:]
	}
	m, n := s[0], s[1]
	kk := aS[1]
	if mm.Info.TransA {
		kk = aS[0]
	}
	bm, bk := matmulBlock(batch*m*n), 32
	bn := bm
	pa, pb := e.ptr[mm.Inputs[0]], e.ptr[mm.Inputs[1]]
	if pa == nil || pb == nil {
		return fmt.Errorf("graphpass: %v: the product's operands are not inputs of the kernel", e.grp)
	}
	if batch > 1 {
		z := b.ProgramID(2)
		pa, pb = b.AddPtr(pa, b.Mul(z, m*kk)), b.AddPtr(pb, b.Mul(z, kk*n))
	}
	// element (r, c) of A is at r·sar + c·sac; likewise B
	sar, sac := kk, 1
	if mm.Info.TransA {
		sar, sac = 1, m
	}
	sbr, sbc := n, 1
	if mm.Info.TransB {
		sbr, sbc = 1, kk
	}
	rm := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm)), 1) // [BM,1]
	rn := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), bn), b.Arange(0, bn)), 0) // [1,BN]
	rkRow, rkCol := b.ExpandDims(b.Arange(0, bk), 0), b.ExpandDims(b.Arange(0, bk), 1)
	d := mm.Info.DType
	mul := func(x *tile.Value, c int) *tile.Value {
		if c == 1 {
			return x
		}
		return b.Mul(x, c)
	}
	// the tiles' offsets at k0 = 0, once; the loop adds k0's step along K.
	// Masks only where the sizes leave lanes out of range.
	offA, offB := b.Add(mul(rm, sar), mul(rkRow, sac)), b.Add(mul(rkCol, sbr), mul(rn, sbc))
	var inM, inN *tile.Value
	if m%bm != 0 {
		inM = b.Lt(rm, m)
	}
	if n%bn != 0 {
		inN = b.Lt(rn, n)
	}
	acc := b.For(0, kk, bk, []*tile.Value{b.Zeros(d, bm, bn)}, func(k0 *tile.Value, c []*tile.Value) []*tile.Value {
		maskA, maskB := inM, inN
		if kk%bk != 0 {
			maskA, maskB = e.and(inM, b.Lt(b.Add(rkRow, k0), kk)), e.and(b.Lt(b.Add(rkCol, k0), kk), inN)
		}
		av := e.loadOr0(b.AddPtr(pa, b.Add(offA, mul(k0, sac))), e.fullMask(maskA, bm, bk))
		bv := e.loadOr0(b.AddPtr(pb, b.Add(offB, mul(k0, sbr))), e.fullMask(maskB, bk, bn))
		return []*tile.Value{b.Dot(av, bv, c[0], e.prec)}
	})
	e.mmAcc = acc[0]
	idx := b.Add(b.Mul(rm, n), rn) // [BM,BN] flat indices of the output
	if batch > 1 {
		idx = b.Add(idx, b.Mul(b.ProgramID(2), m*n))
	}
	e.mask = e.fullMask(e.and(inM, inN), bm, bn)
	if err := e.store(out, idx); err != nil {
		return err
	}
	k.Grid = tile.Grid{tile.CDiv(m, bm), tile.CDiv(n, bn)}
	if batch > 1 {
		k.Grid[2] = batch
	}
	return nil
}

// matmulBlock is the side of a matmul group's output tile: 64 when the
// product has enough 64×64 tiles to fill a large GPU (132 SMs) once, else
// 32 (measured on the H200: a 1024×1024×1024 product 1.6× faster at 64, the
// encoder's 1024×32 per-head products slower). TILEFUSE_MATMUL_BLOCK=32 or
// 64 overrides it (for measuring both).
func matmulBlock(outputs int) int {
	switch os.Getenv("TILEFUSE_MATMUL_BLOCK") {
	case "32":
		return 32
	case "64":
		return 64
	}
	if outputs >= 132*64*64 {
		return 64
	}
	return 32
}

// rowChunk is the block a looped row group walks its row with.
const rowChunk = 2048

// rowLooped writes a row group whose row is longer than MaxRow: program p
// walks row p in blocks of rowChunk, once per reduction and softmax (inputs
// first, each pass recomputing its operand from the group's inputs and the
// row statistics found before it; a softmax keeps a running maximum and a
// rescaled sum per lane), then once more to write the output.
func (e *emitter) rowLooped(out *tile.Value, n int) error {
	b := e.b
	lanes := b.Arange(0, rowChunk)
	row := b.Mul(b.ProgramID(0), n)
	outer := e.memo // the row statistics, valid in every pass
	enter := func(c0 *tile.Value) {
		e.cols = b.Add(lanes, c0)
		if n%rowChunk != 0 {
			e.mask = b.Lt(e.cols, n)
		}
		e.rowIdx = b.Add(row, e.cols)
		e.memo = make(map[memoKey]*tile.Value, len(outer))
		for k, v := range outer {
			e.memo[k] = v
		}
	}
	e.stats = map[*Node][2]*tile.Value{}
	for _, r := range e.rowOrder() {
		x := r.Inputs[0]
		dx := x.Info.DType
		if r.Info.Kind == ops.Reduce {
			identity := 0.0
			if r.Info.Reduce == tile.OpReduceMax {
				identity = -inf
			}
			res := b.For(0, n, rowChunk, []*tile.Value{b.Full(identity, dx, rowChunk)}, func(c0 *tile.Value, c []*tile.Value) []*tile.Value {
				enter(c0)
				v, err := e.gen(x, e.rowIdx)
				if err != nil {
					e.err = err
					return c
				}
				v = e.inRange(v, identity)
				if r.Info.Reduce == tile.OpReduceMax {
					return []*tile.Value{b.Maximum(c[0], v)}
				}
				return []*tile.Value{b.Add(c[0], v)}
			})
			e.memo = outer
			if e.err != nil {
				return e.err
			}
			outer[memoKey{r, nil}] = b.Reduce(r.Info.Reduce, res[0], 0)
			continue
		}
		// softmax: per lane, the running maximum m and l = Σ e^(x-m)
		res := b.For(0, n, rowChunk, []*tile.Value{b.Full(-inf, dx, rowChunk), b.Zeros(dx, rowChunk)}, func(c0 *tile.Value, c []*tile.Value) []*tile.Value {
			enter(c0)
			v, err := e.gen(x, e.rowIdx)
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
		e.stats[r] = [2]*tile.Value{m, b.Sum(b.Mul(res[1], b.Exp(b.Sub(lane, m))), 0)}
	}
	b.For(0, n, rowChunk, nil, func(c0 *tile.Value, c []*tile.Value) []*tile.Value {
		enter(c0)
		v, err := e.gen(e.grp.Root, e.rowIdx)
		if err != nil {
			e.err = err
			return c
		}
		b.Store(b.AddPtr(out, e.rowIdx), v, e.mask)
		return c
	})
	e.memo = outer
	return e.err
}

// rowOrder lists a row group's reductions and softmaxes, each after those
// its operand depends on.
func (e *emitter) rowOrder() []*Node {
	var order []*Node
	seen := map[*Node]bool{}
	var visit func(n *Node)
	visit = func(n *Node) {
		if seen[n] || n.Group != e.grp {
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
	visit(e.grp.Root)
	return order
}
