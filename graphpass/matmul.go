package graphpass

import (
	"fmt"
	"maps"

	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// A matmul group is a matrix product (2-D, or batched over 3-D operands)
// and its elementwise epilogue, one output tile per program (program axis
// 2 walks the batch), under Options.MatMul.
var matmulKind = groupKind{
	name:  "matmul",
	start: func(n *Node, opt Options) bool { return opt.MatMul && productFuses(n) },
	open:  func(grp *Group) { grp.MatMul = grp.Root },
	// elementwise producers of the epilogue join; products, reductions and
	// softmaxes do not
	join: func(n *Node, grp *Group, t Target) (GroupKind, bool) {
		k := n.Info.Kind
		return MatMulGroup, !k.Product() && k != ops.Reduce && !k.Row()
	},
	remat:  true,
	extras: func(*Group, Target) bool { return true },
	tune:   tuneMatMul,
	space:  matmulSpace,
	emit:   emitMatMul,
}

// matmulSpace: on a GPU, a bare 2-D product (nothing else in its group)
// with fewer output tiles than SMs and K long enough: K split in 2 and 4
// (SPLIT_K), and where the wave rule took tiles under 128×128 on the
// tensor cores, 128×128 tiles with K split in 4 (the BERT layer's weight
// gradient 768×768 with K = 4096: 144 tiles of 64×64 against 36 of
// 128×128 in 4 parts). Not measured yet: the autotuner and tilefuse peer
// -tune measure them; the heuristic does not take them.
//
// Where the wave model chooses (waves.go), its other tilings instead, the
// cheapest estimates first (at most maxWaveCandidates); for store-bound
// products (storeBound) storeBoundCandidates.
//
// Where the heuristic took the tiles in groups of rows (GROUP_M), the
// default order too.
func matmulSpace(grp *Group, t Target, prec tile.Precision, def tile.Meta) []tile.Meta {
	out := matmulTiles(grp, t, prec, def)
	if def["GROUP_M"] > 1 {
		out = append(out, with(def, "GROUP_M", 1))
	}
	return out
}

func matmulTiles(grp *Group, t Target, prec tile.Precision, def tile.Meta) []tile.Meta {
	if ws, ok := productWaveShape(grp); ok && waveModelApplies(t, prec, ws) {
		return waveCandidates(t, prec, ws)
	} else if ok && storeBound(t, prec, ws) {
		return storeBoundCandidates(def, ws)
	}
	mm := grp.MatMul
	s := mm.Info.Shape
	if !t.GPU() && t.Native && prec == tile.PrecIEEE && def["BLOCK_M"] != 0 {
		return cpuProductSpace(mm, def)
	}
	if !t.GPU() || !bareProduct(grp) || def["wgmma"] != 0 {
		return nil
	}
	m, n, k := s[0], s[1], productK(mm)
	bm, bn, bk := def["BLOCK_M"], def["BLOCK_N"], def["BLOCK_K"]
	if bm == 0 || bn == 0 || bk == 0 || tile.CDiv(m, bm)*tile.CDiv(n, bn) >= t.SMs {
		return nil
	}
	var out []tile.Meta
	for _, split := range []int{2, 4} {
		if k >= split*4*bk {
			out = append(out, with(def, "SPLIT_K", split))
		}
	}
	if prec != tile.PrecIEEE && (bm < 128 || bn < 128) && m >= 128 && n >= 128 && k >= 16*bk {
		out = append(out, with(def, "BLOCK_M", 128, "BLOCK_N", 128, "num_warps", 8, "SPLIT_K", 4))
	}
	return out
}

// cpuProductSpace: on a CPU whose kernels run as machine code, output
// tiles of 64–256 a side (square, or one side twice the other) and K steps
// of 32–128, none larger than the product needs. On the 2-core VM
// (linear_gelu large, 1024³, one core, tilefuse tune, 2026-12-01) the
// heuristic's 128×128×32 ran 14.2–14.9 ms and the best of these
// 12.4–13.6 (256×256 or 256×128 with K steps of 64 or 128), the ranking
// not stable from run to run: a choice for the tuner, not the heuristic.
func cpuProductSpace(mm *Node, def tile.Meta) []tile.Meta {
	s := mm.Info.Shape
	m, n, k := s[len(s)-2], s[len(s)-1], productK(mm)
	seen := map[string]bool{def.String(): true}
	var out []tile.Meta
	for _, side := range [][2]int{{64, 64}, {128, 128}, {128, 256}, {256, 128}, {256, 256}} {
		for _, bk := range []int{32, 64, 128} {
			c := with(def, "BLOCK_M", min(side[0], max(tile.MinDotDim, pow2AtLeast(m))), "BLOCK_N", min(side[1], max(tile.MinDotDim, pow2AtLeast(n))), "BLOCK_K", min(bk, max(32, pow2AtLeast(k))))
			if !seen[c.String()] {
				seen[c.String()] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// takesProduct reports whether grp, an elementwise group, can take the
// product n as its matmul: its first, over the group's shape, read by its
// epilogue at its own indices only.
func takesProduct(n *Node, grp *Group) bool {
	return grp.MatMul == nil && sameShape(n.Info.Shape, grp.Full) && productFuses(n) && !hasPerRowExtra(grp) && !readsPermuted(n, grp)
}

// readsPermuted reports whether a member of grp reads n, through members
// only, at indices other than its own: an injective op that moves elements
// (a Transpose not the identity, a Slice, a Concat, a Repeat, a Reshape to
// another shape, an Im2Col, …) between n and the group's outputs. The
// product joins only groups of its own shape, but such ops can keep the
// shape while moving its elements (a square product transposed; rows
// rolled, Concat(Slice(p, 20:40), Slice(p, 0:20)), which gave every
// element wrong), and the epilogue holds the product one tile at a time
// (productTile): it cannot read another tile's elements.
func readsPermuted(n *Node, grp *Group) bool {
	seen := map[*Node]bool{}
	var walk func(x *Node) bool
	walk = func(x *Node) bool {
		for _, u := range x.Users {
			if u.Group != grp || seen[u] {
				continue
			}
			seen[u] = true
			if movesElements(u) {
				return true
			}
			if walk(u) {
				return true
			}
		}
		return false
	}
	return walk(n)
}

// movesElements reports whether injective node n reads an operand element
// at other than its own index (elementwise ops and identities do not).
func movesElements(n *Node) bool {
	k := n.Info.Kind
	if !k.Injective() {
		return false
	}
	switch k {
	case ops.Reshape:
		return false // row-major order kept: the same flat index
	case ops.Transpose:
		for i, a := range n.Info.Axes {
			if a != i {
				return true
			}
		}
		return false
	}
	return true
}

// productFuses reports whether n is a product a matmul group computes: a
// 2-D one, or a batched one over 3-D operands of one batch size.
func productFuses(n *Node) bool {
	switch n.Info.Kind {
	case ops.MatMul:
		return true
	case ops.BatchedMatMul:
		a, b := n.Inputs[0].Info.Shape, n.Inputs[1].Info.Shape
		return len(a) == 3 && len(b) == 3 && a[0] == b[0] && len(n.Info.Shape) == 3
	}
	return false
}

// productTile is the member function of a kernel that computes a product
// tile by tile: a product is acc, the current tile, at the tile's own flat
// indices *at only. Asked at other indices (an op that moves elements
// between the product and the group's outputs, which readsPermuted keeps
// out of the group) it fails rather than give the tile's elements there.
func productTile(e *emitter, acc *tile.Value, at **tile.Value) func(n *Node, idx *tile.Value) (*tile.Value, error) {
	return func(n *Node, idx *tile.Value) (*tile.Value, error) {
		if !n.Info.Kind.Product() || acc == nil {
			return nil, fmt.Errorf("graphpass: %v: %v %v outside its tile", e.grp, n.Info.Kind, n)
		}
		if idx != *at {
			return nil, fmt.Errorf("graphpass: %v: product %v read at other indices than its tile's", e.grp, n)
		}
		return acc, nil
	}
}

// emitMatMul: program (i, j) computes the product's BM×BN tile with a K
// loop of dots, then the epilogue over that tile.
func emitMatMul(e *emitter, out *tile.Value, k *Kernel) error {
	b, mm := e.b, e.grp.MatMul
	s := mm.Info.Shape
	batch := 1
	if mm.Info.Kind == ops.BatchedMatMul { // program axis 2 walks the batch
		batch, s = s[0], s[1:]
	}
	m, n, kk := s[0], s[1], productK(mm)
	bm, err := e.param("BLOCK_M")
	if err != nil {
		return err
	}
	bn, err := e.param("BLOCK_N")
	if err != nil {
		return err
	}
	bk, err := e.param("BLOCK_K")
	if err != nil {
		return err
	}
	pa, pb := e.ptr[mm.Inputs[0]], e.ptr[mm.Inputs[1]]
	transA := e.grp.transA()
	if e.grp.aT != nil { // A transposed by its own kernel: read as A·B
		pa = e.ptr[e.grp.aT]
	}
	if e.grp.aPad != nil { // copied into aligned rows (padOperands)
		pa = e.ptr[e.grp.aPad]
	}
	if e.grp.bPad != nil {
		pb = e.ptr[e.grp.bPad]
	}
	if pa == nil || pb == nil {
		return fmt.Errorf("graphpass: %v: the product's operands are not inputs of the kernel", e.grp)
	}
	// element (r, c) of A is at r·sar + c·sac; likewise B. An operand
	// stored column by column (columnMajor) is read as its transpose is.
	sar, sac := kk, 1
	if transA != (e.grp.aT == nil && mm.Inputs[0].colMajor) {
		sar, sac = 1, m
	}
	sbr, sbc := n, 1
	if mm.Info.TransB != mm.Inputs[1].colMajor {
		sbr, sbc = 1, kk
	}
	// kLoop is the K the loop runs over; bRows and bCols B's extent as
	// the buffer it reads holds it. Operands copied into aligned rows
	// (padOperands): A's copy has kLoop columns (zeros past K), B's
	// bRows×bCols (zeros past K and n); a B read as it is keeps its K
	// rows, masked where the loop passes them. A batch's copies are
	// padded matrix by matrix
	kLoop, bRows, bCols := kk, kk, n
	if ps := shapeOf(e.grp.aPad); ps != nil {
		sar, sac = ps[len(ps)-1], 1
		kLoop = sar
	}
	switch ps := shapeOf(e.grp.bPad); {
	case ps == nil:
	case mm.Info.TransB: // Bᵀ's copy: n×kLoop
		bRows, bCols = ps[len(ps)-1], ps[len(ps)-2]
		sbr, sbc = 1, bRows
	default:
		bRows, bCols = ps[len(ps)-2], ps[len(ps)-1]
		sbr, sbc = bCols, 1
	}
	// a product stored column by column (transposedProducts) is computed
	// as its transpose, (A·B)ᵀ = Bᵀ·Aᵀ: B read as the first operand, A as
	// the second, each as its transpose; the tiles BLOCK_N × BLOCK_M
	// (BLOCK_M still along the product's rows), stored row by row
	swapped := mm.colMajor
	if swapped {
		if batch > 1 || e.grp.Root != mm || len(e.grp.Extra) > 0 || e.grp.aPad != nil || e.grp.bPad != nil || e.grp.aT != nil {
			return fmt.Errorf("graphpass: %v: a product stored column by column is a bare 2-D product reading its operands as stored", e.grp)
		}
		pa, pb = pb, pa
		sar, sac, sbr, sbc = sbc, sbr, sac, sar
		m, n, bm, bn = n, m, bn, bm
		bRows, bCols = kk, n
	}
	if batch > 1 {
		z := b.ProgramID(2)
		pa, pb = b.AddPtr(pa, b.Mul(z, m*kLoop)), b.AddPtr(pb, b.Mul(z, bRows*bCols))
	}
	gm, gn := tile.CDiv(m, bm), tile.CDiv(n, bn)
	if g, set := e.meta["GROUP_M"]; set && g < 1 {
		return fmt.Errorf("graphpass: %v: GROUP_M = %d: want 1 (the default order) or more rows of tiles a group", e.grp, g)
	}
	pm, pn, group := tileOrder(b, e.meta["GROUP_M"], gm, gn)
	rm := b.ExpandDims(b.Add(b.Mul(pm, bm), b.Arange(0, bm)), 1) // [BM,1]
	rn := b.ExpandDims(b.Add(b.Mul(pn, bn), b.Arange(0, bn)), 0) // [1,BN]
	rkRow, rkCol := b.ExpandDims(b.Arange(0, bk), 0), b.ExpandDims(b.Arange(0, bk), 1)
	d := mm.Info.DType
	mul := func(x *tile.Value, c int) *tile.Value { return mulBy(b, x, c) }
	// the tiles' offsets at k0 = 0, once (step); the loop adds k0's step
	// along K. Masks only where the sizes leave lanes out of range.
	var inM, inN, bN *tile.Value
	if m%bm != 0 {
		inM = b.Lt(rm, m)
	}
	if n%bn != 0 {
		inN = b.Lt(rn, n)
	}
	switch { // B's loads masked where its buffer's columns end
	case bCols == n:
		bN = inN
	case gn*bn > bCols:
		bN = b.Lt(rn, bCols)
	}
	// SPLIT_K = s > 1 (a bare 2-D product only: nothing but the product in
	// the group): program axis 2 takes the s-th part of K, and the parts
	// are added atomically into the zeroed output (Kernel.Accumulates), so
	// that a product with few output tiles and a long K fills the GPU
	var lo, hi any = 0, kLoop
	split := 1
	if s, ok := e.meta["SPLIT_K"]; ok && s > 1 {
		if batch > 1 || e.grp.Root != mm || len(e.grp.Extra) > 0 {
			return fmt.Errorf("graphpass: %v: SPLIT_K = %d takes a bare 2-D product", e.grp, s)
		}
		split = s
		lo, hi = kPart(b, b.ProgramID(2), kLoop, bk, split)
	}
	// one K loop of BLOCK_K steps, masked along K where BLOCK_K does not
	// divide K; on a CPU whose kernels run as machine code (which computes
	// a masked step's zeros as any others) the steps that fit whole
	// unmasked, then the rest of K in one step of its own, the smallest
	// power of two (at least tile.MinDotDim) that holds it (K = 784 with
	// BLOCK_K 64: 12 steps of 64 and one of 16)
	step := func(bk int, rkRow, rkCol *tile.Value, masked bool) func(k0 *tile.Value, c []*tile.Value) []*tile.Value {
		offA, offB := b.Add(mul(rm, sar), mul(rkRow, sac)), b.Add(mul(rkCol, sbr), mul(rn, sbc))
		return func(k0 *tile.Value, c []*tile.Value) []*tile.Value {
			maskA, maskB := inM, bN
			if masked {
				maskA = e.and(inM, b.Lt(b.Add(rkRow, k0), kLoop))
			}
			if masked || bRows < kLoop {
				maskB = e.and(b.Lt(b.Add(rkCol, k0), bRows), bN)
			}
			av := e.loadOr0(b.AddPtr(pa, b.Add(offA, mul(k0, sac))), e.fullMask(maskA, bm, bk))
			bv := e.loadOr0(b.AddPtr(pb, b.Add(offB, mul(k0, sbr))), e.fullMask(maskB, bk, bn))
			return []*tile.Value{b.Dot(av, bv, c[0], e.prec)}
		}
	}
	// On a CPU whose kernels run as machine code, a product at ieee whose
	// operands are both read across their rows (A stored [K][M], B stored
	// [N][K]: a convolution's weight gradient from patches stored column
	// by column, its forward product over them, and a col2im's product
	// computed as its transpose above, Wᵀ·dYᵀ) is computed as its
	// transpose, dot(B's tile [BN,BK], A's tile [BK,BM]), whose operand
	// tiles are both contiguous along their rows, where the product as
	// written turns B's tile back in 8×8 tiles every K step
	// (BenchmarkSwappedProducts, one core of the 2-core VM, the convnet's
	// shapes: level to 8% faster by the medians); the epilogue and the
	// store read the [BN,BM] accumulator through a transpose. Each element
	// is the same fused multiply-adds in the same k order: the same bits.
	// Not at other precisions: TF32 truncates A and rounds B (the tensor
	// cores' reading), which a swap would exchange.
	swapDot := !e.t.GPU() && e.t.Native && e.prec == tile.PrecIEEE && sar == 1 && sac != 1 && sbr == 1 && sbc != 1
	if swapDot {
		rnC := b.ExpandDims(b.Add(b.Mul(pn, bn), b.Arange(0, bn)), 1) // [BN,1]
		rmR := b.ExpandDims(b.Add(b.Mul(pm, bm), b.Arange(0, bm)), 0) // [1,BM]
		var inMR, bNC *tile.Value                                     // inM and bN along the swapped tiles' sides
		if inM != nil {
			inMR = b.Lt(rmR, m)
		}
		if bN != nil { // rn < bCols (n where B's buffer has n columns)
			bNC = b.Lt(rnC, bCols)
		}
		step = func(bk int, _, _ *tile.Value, masked bool) func(k0 *tile.Value, c []*tile.Value) []*tile.Value {
			rkRow, rkCol := b.ExpandDims(b.Arange(0, bk), 0), b.ExpandDims(b.Arange(0, bk), 1)
			offX, offY := b.Add(mul(rnC, sbc), mul(rkRow, sbr)), b.Add(mul(rkCol, sac), mul(rmR, sar))
			return func(k0 *tile.Value, c []*tile.Value) []*tile.Value {
				maskX, maskY := bNC, inMR
				if masked || bRows < kLoop {
					maskX = e.and(bNC, b.Lt(b.Add(rkRow, k0), bRows))
				}
				if masked {
					maskY = e.and(b.Lt(b.Add(rkCol, k0), kLoop), inMR)
				}
				xv := e.loadOr0(b.AddPtr(pb, b.Add(offX, mul(k0, sbr))), e.fullMask(maskX, bn, bk))
				yv := e.loadOr0(b.AddPtr(pa, b.Add(offY, mul(k0, sac))), e.fullMask(maskY, bk, bm))
				return []*tile.Value{b.Dot(xv, yv, c[0], e.prec)}
			}
		}
	}
	zeros := func() *tile.Value {
		if swapDot {
			return b.Zeros(d, bn, bm)
		}
		return b.Zeros(d, bm, bn)
	}
	var acc []*tile.Value
	if rest := kk % bk; split == 1 && rest != 0 && !e.t.GPU() && e.t.Native {
		acc = []*tile.Value{zeros()}
		if whole := kk - rest; whole > 0 {
			acc = b.For(0, whole, bk, acc, step(bk, rkRow, rkCol, false))
		}
		bt := max(tile.MinDotDim, pow2AtLeast(rest))
		rkRow, rkCol := b.ExpandDims(b.Arange(0, bt), 0), b.ExpandDims(b.Arange(0, bt), 1)
		acc = b.For(kk-rest, kk, bt, acc, step(bt, rkRow, rkCol, rest != bt))
	} else {
		acc = b.For(lo, hi, bk, []*tile.Value{zeros()}, step(bk, rkRow, rkCol, kLoop%bk != 0))
	}
	if swapDot {
		acc = []*tile.Value{b.Trans(acc[0])}
	}
	// the output's coordinates: i64 where only the output side is past
	// 32-bit offsets (Group.out64), the K loop's staying i32
	orow, ocol, oz := rm, rn, (*tile.Value)(nil)
	if batch > 1 {
		oz = b.ProgramID(2)
	}
	if e.grp.out64 {
		orow, ocol = b.Cast(rm, tile.I64), b.Cast(rn, tile.I64)
		if oz != nil {
			oz = b.Cast(oz, tile.I64)
		}
	}
	idx := b.Add(b.Mul(orow, n), ocol) // [BM,BN] flat indices of the output
	if batch > 1 {
		idx = b.Add(idx, b.Mul(oz, m*n))
	}
	e.member = productTile(e, acc[0], &idx)
	// the tile's own indices split into the rows and columns it has: no
	// division (a bias row is then loaded once per column a thread holds)
	e.space = func(at *tile.Value, s []int) []*tile.Value {
		if at != idx || !sameShape(s, e.grp.Full) {
			return nil
		}
		c := []*tile.Value{b.BroadcastTo(orow, tile.Shp(bm, bn)), b.BroadcastTo(ocol, tile.Shp(bm, bn))}
		switch {
		case batch > 1:
			c = append([]*tile.Value{b.Splat(oz, tile.Shp(bm, bn))}, c...)
		case len(s) == 3: // a batch of one: its coordinate is 0
			c = append([]*tile.Value{b.Zeros(orow.Type.DType, bm, bn)}, c...)
		}
		return c
	}
	e.mask = e.fullMask(e.and(inM, inN), bm, bn)
	k.Grid = tile.Grid{gm, gn}
	if group {
		k.Grid = tile.Grid{gm * gn, 1}
	}
	switch {
	case split > 1 && !e.t.GPU():
		// on a CPU each part into its own part of the scratch, added in
		// order by the kernel's Combine (Kernel.Parts): the same bits run
		// after run; its block a power of two (a few tiles' elements: the
		// combine is short, and GPU code lowers it too)
		b.Store(b.AddPtr(b.AddPtr(out, b.Mul(b.ProgramID(2), m*n)), idx), acc[0], e.mask)
		comb, grid, err := combineParts(fmt.Sprintf("fused_%d_%s_combine", e.grp.ID, e.grp.Kind), d, m*n, split, 1, min(1024, pow2AtLeast(m*n)))
		if err != nil {
			return fmt.Errorf("graphpass: %v: %w", e.grp, err)
		}
		k.Grid[2], k.Parts, k.Combine, k.CombineGrid = split, split, comb, grid
		return nil
	case split > 1:
		b.AtomicAdd(b.AddPtr(out, idx), acc[0], e.mask)
		k.Grid[2], k.Accumulates = split, true
		return nil
	}
	if swapped { // idx is the transpose's own: stored as it is
		b.Store(b.AddPtr(out, idx), acc[0], e.mask)
		return nil
	}
	if err := e.store(out, idx); err != nil {
		return err
	}
	if batch > 1 {
		k.Grid[2] = batch
	}
	return nil
}

// tileOrder gives the row and column of the output tile a program
// computes. By default they are program coordinates 0 and 1: programs are
// launched with coordinate 0 fastest, so a wave of SMs takes every row of
// tiles in a few columns, and reads all of A. With GROUP_M = g (1 < g <
// gm, Triton's name) the grid is one axis of gm·gn programs, taken in
// groups of g rows of tiles (the last group may hold fewer), each group
// column by column: a wave then covers about g rows and wave/g columns,
// whose panels of A and B are fewer bytes to hold in L2 (at 4096³ in
// 256×128 tiles, 132 programs: 4 MB a row of tiles, 2 MB a column; 16
// rows and 9 columns, 86 MB, a wave in the default order, 8 rows and 17
// columns, 66 MB, at g = 8). group reports that the grid is one axis.
func tileOrder(b *tile.Builder, g, gm, gn int) (pm, pn *tile.Value, group bool) {
	if g <= 1 || g >= gm {
		return b.ProgramID(0), b.ProgramID(1), false
	}
	pid, width := b.ProgramID(0), g*gn
	first := b.Mul(b.Div(pid, width), g)
	var size any = g
	if gm%g != 0 {
		size = b.Minimum(b.Sub(gm, first), g)
	}
	in := b.Rem(pid, width)
	return b.Add(first, b.Rem(in, size)), b.Div(in, size), true
}

// kPart is the range [lo, hi) of K that part (a program coordinate) of a
// K split into split parts of whole BLOCK_K steps takes (SPLIT_K; the
// last parts may be short or empty).
func kPart(b *tile.Builder, part *tile.Value, kk, bk, split int) (lo, hi *tile.Value) {
	chunk := tile.CDiv(tile.CDiv(kk, bk), split) * bk
	start := b.Mul(part, chunk)
	return start, b.Minimum(b.Add(start, chunk), kk)
}

// tuneMatMul chooses BLOCK_M×BLOCK_N output tiles and BLOCK_K along K.
//
// TF32 and bf16 products at least 128 on every side with a wave of
// 128×128 tiles (or bare with K ≥ 2048), on a GPU with the H200's shared
// memory: the wave model (waves.go) chooses the form, tile and SPLIT_K.
// The rules below are for the others.
//
// TF32, bf16 and 3xTF32 on a GPU run on the tensor cores (codegen pipelines the K loop:
// cp.async stages, mma.sync, the accumulator in registers): the tile is
// the largest of 128, 64 and 32 on a side, each side no larger than the
// product's (rounded up to a power of two, at least 32), of which the
// product has at least a wave of tiles (one per SM); BLOCK_K 32; num_stages 3,
// fewer where the target's shared memory holds fewer (at least 2); 8 warps
// on 128×128 tiles (64×32 warp tiles: 4 warps' 64×64 warp tiles need 255
// registers and spill), else 4. TF32 products with a wave of 128×256 tiles
// take them with wgmma = 1 (on the H200, 2026-12-01, matmul 4096³: wgmma
// 128×256 212 TFLOP/s, mma.sync 128×128 150, 128×256 173; gelu(x·W+b)
// 174 against 136; at 64×64 tiles and at K ≤ 50 wgmma was slower, so
// smaller products keep mma.sync); those with a wave of 256×128 tiles take
// the swapped form, wgmma = 2, 4 stages (third round: matmul 4096³ 234.8
// against 210.9, gelu(x·W+b) 180.8 against 173.3; 3 stages 196.2, 128×128
// 183.1). 3xTF32 takes the swapped form (third round, 4096³: 128×128
// 72.2 TFLOP/s and gelu(x·W+b) 81.3, 64×128 72.7 and 61.2, errors 6.0e-7,
// against mma.sync's 58.2 with 3.2e-5; SGEMM 51.0 with 3.5e-6).
//
// IEEE products on the CPU as native code (Target.Native: packed blocks
// and a 12×32 micro-kernel): the largest of 128, 64 and 32 on a side (each side no
// larger than the product's, rounded up to a power of two, at least 16) of
// which the product has at least four tiles a core. A product 16 wide
// takes 16-column tiles (one core of the 2-core VM, 2026-12-02, K steps
// of 64, best of 200: 512×16 over K 1024 304 µs at 32×32, 142 at 32×16,
// 135 at 64×16; Aᵀ×B 1024×16 over K 512 299, 159, 136: 32 columns computed
// twice the product's). On the H200's 16-core host the same rule's 64×64
// tiles for mlp_step's 784×1024 and 512×1024 products ran faster than any
// larger tile, in isolation and in the step (2026-12-02: Aᵀ×B 784×1024
// over K 512 1.01 ms at 64×64, 1.06 at 128×128, 1.76 at 256×256; mlp_step
// large 2.52–2.63 ms against 4.17–4.30 with a model that chose 256×256;
// `tilefuse tune` kept 64×64 as well). Larger
// tiles pack each operand block fewer times (one core, 2026-12-01, with
// the unmasked packs: BenchmarkDot 1024³ 72 GFLOP/s at 64×64, 86 at
// 128×128; gelu(x·W+b) 1024³ 50–56 ms at 64×64, 44–51 at 128×128).
// BLOCK_K is the largest power of two up to 64 that K holds, and
// emitMatMul runs the rest of K in a step of its own: the micro-kernel
// loads and stores its accumulators once a step, and a masked step
// computes its zeros (2-core VM, one core, 128×128 tiles, thread CPU
// time, steps of 32 → 64 with the tail step, min of 12 alternating:
// 1024³ 149 → 161 GFLOP/s, 512×1024 over K 784 160 → 168, Aᵀ×B
// 784×1024 over K 512 143 → 150, A×Bᵀ 512×1024 over K 1024 155 → 163,
// over K 16 0.28 → 0.16 ms). A side whose tiles would pad the product by
// more than an eighth is halved while that pads less (mlp_step's weight
// gradient, 784 rows: 64-row tiles, 832 computed, not 896; same VM, one
// core, 784×1024 over K 512: 6.75 → 6.0 ms).
//
// TF32 products over a short K (at most storeBoundK: one or two steps of
// 32) at least 128 on each side of the output, with a wave of 128×128
// tiles, are bound by their output's stores (storeBound): the swapped
// form at 128×128 (storeBoundMeta), 8 warps, 3 stages, registers capped at
// 128 (two CTAs an SM); where the output is whole tiles of 128×128 its
// epilogue stored from the accumulator's registers (storeBoundDirect),
// else through shared memory (epi_smem = 1: lanes on consecutive columns);
// where the output's rows are an odd number of words and A's not 16-byte
// aligned, 256 rows and 2 stages (storeBoundOddRows).
//
// Otherwise (IEEE products, FMAs on CUDA cores, and the CPU's executor,
// which measured slower at 128: linear_gelu 1024³ 0.38–0.51 s against
// 0.63–1.1 with -tags purego) the tile's side is 64 when the product has
// enough 64×64 tiles to fill the GPU's SMs once, else 32 (measured on the
// H200, 132 SMs: a 1024×1024×1024 product 1.6× faster at 64, the encoder's
// 1024×32 per-head products slower); the CPU keeps the H200's rule there,
// with which the executor's tables were measured.
// x3NarrowRate is the rate of 3xTF32's 64×128 tiles against its 128×128
// tiles where both fill the SMs alike (the H200, 2026-12-03, r19b: 4096³
// 86.6 against 100.5 TFLOP/s, one CTA an SM either way; with tensor copies
// and GROUP_M, 2026-12-04, r27f: 92.2 against 109.9, 0.84, no choice of the
// BERT layer's products changed by it).
const x3NarrowRate = 0.86

// waveFill is the part of the SMs' time that tiles programs of one CTA an
// SM keep busy over their waves: tiles / (wave · ⌈tiles / wave⌉).
func waveFill(tiles, wave int) float64 {
	return float64(tiles) / float64(wave*tile.CDiv(tiles, wave))
}

func tuneMatMul(grp *Group, t Target, prec tile.Precision, meta tile.Meta) {
	tuneMatMulTiles(grp, t, prec, meta)
	splitLongK(grp, t, meta)
	groupTiles(grp, t, meta)
}

// productK is product mm's K: its A's last axis, or the one before where
// it reads A transposed.
func productK(mm *Node) int {
	a := mm.Inputs[0].Info.Shape
	if mm.Info.TransA {
		return a[len(a)-2]
	}
	return a[len(a)-1]
}

// bareProduct reports whether grp is a 2-D product and nothing else (no
// epilogue, no further output): one whose K may be split in parts that add
// into its output.
func bareProduct(grp *Group) bool {
	mm := grp.MatMul
	return mm.Info.Kind == ops.MatMul && grp.Root == mm && len(grp.Extra) == 0 && len(mm.Info.Shape) == 2 && len(mm.Inputs) == 2
}

// splitLongK: on a GPU, a bare 2-D product (nothing else in its group)
// whose output is a few tiles (at most a quarter of the SMs) over a long K
// (at least 64 steps) — a convolution's weight gradient, Σ over every
// pixel of the batch: 32×9 over K = 78400 in the convnet example's first
// layer — takes K in SPLIT_K parts, the largest power of two for which the
// parts' programs fit the SMs, each part at least 16 steps: one program
// ran the whole K (the H200, 2026-12-05, r32b, the bench's convnet large:
// 2.6 ms of the step's 4.1 at ieee, 0.67 of 1.35 at TF32, where PyTorch's
// whole step took 1.34 and 1.31). The parts add into the zeroed output
// atomically (Kernel.Accumulates), so the sum's order is the programs'.
// On a CPU whose kernels are machine code, likewise where the output is
// at most half as many tiles as cores, the parts up to two programs a
// core, each written to scratch and added in order by the kernel's
// Combine (Kernel.Parts: the same bits run after run; the 2-core VM, the
// convnet's 32×9 over 78400: 1.41 ms in one program, 0.80 in 4 parts),
// and where more tiles leave cores idle for much of the last wave, in as
// many parts as keep 80% of them busy; and in parts of at most cpuPartK
// of K.
// Not where the wave model chose (wgmma forms) or SPLIT_K is set.
func splitLongK(grp *Group, t Target, meta tile.Meta) {
	mm := grp.MatMul
	s := mm.Info.Shape
	bm, bn, bk := meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"]
	if !t.GPU() && !t.Native || !bareProduct(grp) || meta["wgmma"] != 0 || meta["SPLIT_K"] != 0 || bm == 0 || bn == 0 || bk == 0 {
		return
	}
	tiles, steps := tile.CDiv(s[0], bm)*tile.CDiv(s[1], bn), tile.CDiv(productK(mm), bk)
	programs := t.SMs // at most this many programs in all
	split := 1
	switch {
	case steps < 64:
		return
	case !t.GPU() && 2*tiles > t.Cores:
		// more tiles than half the cores but too few for whole waves: the
		// fewest parts whose programs keep 80% of the cores busy over the
		// waves they take (the convnet's 288×64 over 19600 in 18 tiles on
		// 16 cores: 2 waves of whole-K programs, 56%; 4 parts: 5 waves of
		// quarter-K ones, 90%)
		busy := func(n int) bool { return 5*n >= 4*tile.CDiv(n, t.Cores)*t.Cores }
		for !busy(tiles*split) && split < 64 && steps >= 2*split*16 {
			split *= 2
		}
		programs = 0
	case !t.GPU():
		programs = 2 * t.Cores
	case 4*tiles > t.SMs:
		return
	}
	for tiles*2*split <= programs && steps >= 2*split*16 {
		split *= 2
	}
	if !t.GPU() {
		// on a CPU, parts of at most cpuPartK of K: a part's panels of A and
		// B stay nearer the core while its tiles take them in turn
		for productK(mm) > split*cpuPartK && split < 64 && steps >= 2*split*16 {
			split *= 2
		}
	}
	if split > 1 {
		meta["SPLIT_K"] = split
	}
}

// cpuPartK is the longest part of K a CPU's bare product takes in one
// program where its K is split (splitLongK). The 2-core VM (AMD EPYC,
// 2026-12-05): a whole K streams the tiles' panels from memory, one core
// 64×288×19600 (64×64 tiles) 115–139 GFLOP/s against 178 over K = 1960,
// 512×512×8192 145 (64×64) and 182 (128×128) against 190–210 and 219 over
// K = 2048; the bench's convnet large, its weight gradients 64×288 over
// 19600 from 18 tiles of 32×32 to 5 of 64×64 in 16 parts (with
// cpuLongK) 4.4–4.5 → 3.2 ms, 128×576 over 4900 in 4 parts 2.5–2.6 →
// 2.2; weight gradients xᵀ·dy over 8192 rows (fusion, two cores, 128×128
// tiles in 4 parts, medians of 15 runs, the two builds in turn three
// times, ms): 1024×512 25.0, 25.8, 25.2 → 24.8, 25.6, 22.8; 768×768
// 28.8, 30.7, 28.6 → 26.8, 25.8, 24.7.
const cpuPartK = 2048

// wholeSide is a native CPU product's tile side for a dimension of size
// that side pads: three times a power of two (a range the IR allows), half
// as wide again or a quarter narrower, where that pads nothing (the
// convnet's 288 and 576 columns: 64 → 96, 128 → 192), else side. The
// micro-kernel's columns are strips of 16 or 32 and its rows blocks of 6
// or 12, so that 96 and 192 are whole strips and blocks; a wider tile
// takes each panel of A for more columns. The 2-core VM (AMD EPYC,
// 2026-12-05, native's BenchmarkProductTiles, one core, GFLOP/s):
// 19600×288×64 at 128×64 140.8, at 128×96 164.9; 4900×576×128 at 128×128
// 184.6–185.7, at 128×192 219.4–221.3 (128×96 203.8, 128×64 195–204);
// 64×288×1280 with both operands transposed at 64×64 183.8, at 64×96
// 190.0. On the H100 machine's 16 cores 19600×288×64 722 → 888, and
// 4900×576×128 at 128×192 level with 128×128 (937 and 953). The convnet's
// weight gradient 288×64 over 19600 takes 96×64 tiles: 3 of them in
// parts where 5 of 64×64 were.
func wholeSide(size, side int) int {
	if size%side == 0 {
		return side
	}
	if w := 3 * side / 2; w >= 96 && size%w == 0 {
		return w
	}
	if w := 3 * side / 4; w >= 96 && size%w == 0 {
		return w
	}
	return side
}

// cpuLongK reports whether grp is a bare product over a long K (at least
// 64 steps of 64) on a CPU: one splitLongK takes in parts.
func cpuLongK(grp *Group) bool {
	return bareProduct(grp) && productK(grp.MatMul) >= 64*64
}

// groupM is the GROUP_M that groupTiles sets: about √(wave·BLOCK_N /
// BLOCK_M), the number of rows of tiles whose panels of A and B in one
// wave are fewest bytes, at 256×128 tiles and 132 SMs.
const groupM = 8

// groupTiles takes a GPU's tensor-core products (wgmma forms; one batch)
// whose tiles are more than a wave in more than groupM rows in groups of
// groupM rows of tiles (GROUP_M, tileOrder) where, in the default order, a
// wave's panels of A and B (a few columns of tiles, every row) are more
// bytes than the L2: products over a long K (4096³: 86 MB a wave at
// 256×128 tiles against the H200's 60 MiB; the BERT layer's K = 768: 16
// MB). The
// H200, 2026-12-04 (r27a, `tilefuse peer -tune`, each in one process beside
// the default order twice, TFLOP/s): TF32 4096³ 321.6–321.9 → 318.9–334.8
// (four runs, mean 327), gelu 301.7, 304.3 → 306.1, 314.6,
// 4096×4096×8192 324.6, 328.7 → 330.1, 333.5, bf16 4096³ 306.3, 311.1 →
// 317.9, 313.2, 3xTF32 107.4, 107.2 → 108.3, 109.7; GROUP_M 4 and 2 within
// the same spread; where the panels fit, no gain (the BERT layer's
// 4096×3072×768 267.9, 272.5 → 264.7, 272.7).
func groupTiles(grp *Group, t Target, meta tile.Meta) {
	ws, ok := productWaveShape(grp)
	bm, bn := meta["BLOCK_M"], meta["BLOCK_N"]
	if !ok || !t.GPU() || t.L2 == 0 || meta["wgmma"] == 0 || bm == 0 || bn == 0 || ws.batch != 1 || meta["SPLIT_K"] > 1 {
		return
	}
	if _, set := meta["GROUP_M"]; set {
		return
	}
	gm, gn := tile.CDiv(ws.m, bm), tile.CDiv(ws.n, bn)
	if gm <= groupM || gm*gn <= t.SMs {
		return
	}
	elem := grp.MatMul.Info.DType.Size()
	panels := (min(gm, t.SMs)*bm + tile.CDiv(t.SMs, gm)*bn) * ws.k * elem
	if panels <= t.L2 {
		return
	}
	meta["GROUP_M"] = groupM
}

func tuneMatMulTiles(grp *Group, t Target, prec tile.Precision, meta tile.Meta) {
	s := grp.MatMul.Info.Shape
	outputs := numel(s) // batch·m·n
	wave := t.SMs
	if !t.GPU() {
		wave = H200.SMs
	}
	if t.GPU() && prec != tile.PrecIEEE && grp.MatMul.Info.DType == tile.F32 {
		// TF32 and bf16 products at least 128 on every side on a GPU with
		// the H200's shared memory: the wave model (waves.go)
		if ws, ok := productWaveShape(grp); ok && waveModelApplies(t, prec, ws) {
			maps.Copy(meta, partialColumns(busyEpilogue(chooseWaves(t, prec, ws).meta(), prec, ws), prec, ws))
			return
		} else if ok && storeBound(t, prec, ws) {
			switch {
			case ws.n%2 != 0 && ws.k%4 != 0: // output rows stored a word at a time, A's copies narrow (storeBoundOddRows)
				maps.Copy(meta, storeBoundTall)
			case ws.n%storeBoundMeta["BLOCK_N"] == 0 && ws.m%storeBoundMeta["BLOCK_M"] == 0: // from the accumulator's registers (storeBoundDirect)
				maps.Copy(meta, storeBoundDirect)
			default:
				maps.Copy(meta, storeBoundMeta)
			}
			return
		}
		m, n := s[len(s)-2], s[len(s)-1]
		batch := outputs / (m * n)
		var bm, bn int
		for _, side := range []int{128, 64, 32} {
			bm, bn = min(side, max(32, pow2AtLeast(m))), min(side, max(32, pow2AtLeast(n)))
			if batch*tile.CDiv(m, bm)*tile.CDiv(n, bn) >= wave {
				break
			}
		}
		bk := 32
		meta["num_warps"] = 4
		if bm*bn >= 128*128 {
			meta["num_warps"] = 8
		}
		// TF32 with a wave of 256×128 tiles: Hopper's wgmma in the swapped
		// form (Cᵀ = Bᵀ·Aᵀ, wgmma = 2; codegen uses mma.sync off sm_90),
		// 4 stages of 48 KiB; else with a wave of 128×256 tiles the
		// transposing form (wgmma = 1), two K-major B tiles of 32 KiB
		// beside the stages
		// (bf16 likewise, its A converted by the copying threads into a
		// bf16 tile: 311.6 TFLOP/s at 4096³ against mma.sync's 193.3, round
		// 1 of 2026-12-01 in bench/RESULTS.md, with two such tiles beside 4
		// stages; now one in each stage, and codegen fits 3 of 64 KiB)
		swapped := prec == tile.PrecTF32 && t.SharedMemory >= 4*4*bk*(256+128) ||
			prec == tile.PrecBF16 && t.SharedMemory >= 4*4*bk*(256+128)+2*2*256*bk
		if swapped && bm == 128 && m >= 256 && n >= 128 && batch*tile.CDiv(m, 256)*tile.CDiv(n, 128) >= wave {
			meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"] = 256, 128, bk
			meta["num_warps"], meta["num_stages"], meta["wgmma"] = 8, 4, 2
			return
		}
		// 3xTF32: the swapped form wherever the product is 64 columns wide
		// (its sums of 64 k in block accumulators make it more accurate
		// than SGEMM; mma.sync's one accumulator is not): 128×128 tiles
		// (4 stages of 48 KiB) where their waves fill the SMs at least as
		// well as 64×128's (6 stages of 32 KiB) at x3NarrowRate, else
		// 64×128; 64×64 for narrower products. The H200, 2026-12-03
		// (r19c, TFLOP/s 128×128 → 64×128): 4096×768×3072 (1.45 waves of
		// 128×128) 76.4 → 82.8, 4096×768×768 71.3 → 77.2, 768×3072×4096
		// (1.09 waves) 58.4 → 64.6; 4096×3072×768 (5.8 waves) 95.9 → 79.2
		// 3xTF32 Aᵀ·B over a long K (the weight gradients xᵀ·dy): Aᵀ
		// staged in the swapped form (wg_stage = 1: 16-byte copies along m,
		// transposed and split by the copying threads), 64×128 tiles, 4
		// stages of 40 KiB, K in 4 parts where the group is the bare
		// product; 128×128 and 3 stages with an epilogue where those fill
		// the SMs. The H200, 2026-12-02 (`tilefuse peer -precision tf32x3
		// -run 'bert TN'`): 768×3072×4096 and 3072×768×4096 0.335 ms (57.8
		// TFLOP/s) against 1.03 on the swapped form with 4-byte copies of
		// Aᵀ; 128×128 unsplit 0.574, 128×128 in 4 parts 0.388
		if ws, ok := productWaveShape(grp); ok && prec == tile.PrecTF32x3 && ws.transA && ws.n >= 128 && ws.k >= 1024 &&
			t.SharedMemory >= 4*4*bk*(3*64+128) {
			meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"] = 64, 128, bk
			meta["num_warps"], meta["num_stages"], meta["wgmma"], meta["wg_stage"] = 8, 4, 2, 1
			switch {
			case ws.bare && tile.CDiv(ws.k, bk) >= 16:
				meta["SPLIT_K"] = 4
			case ws.batch*tile.CDiv(ws.m, 128)*tile.CDiv(ws.n, 128) >= wave && t.SharedMemory >= 3*4*bk*(3*128+128):
				meta["BLOCK_M"], meta["num_stages"] = 128, 3
			}
			return
		}
		if prec == tile.PrecTF32x3 && n >= 64 && t.SharedMemory >= 3*4*bk*3*64 {
			bm, bn := 64, 128
			if n < 128 {
				bn = 64
			} else if m >= 128 && t.SharedMemory >= 4*4*bk*3*128 &&
				waveFill(batch*tile.CDiv(m, 128)*tile.CDiv(n, 128), wave) >= x3NarrowRate*waveFill(batch*tile.CDiv(m, 64)*tile.CDiv(n, 128), wave) {
				bm = 128
			}
			stage := 4 * bk * (2*bm + bn)
			meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"] = bm, bn, bk
			meta["num_warps"], meta["num_stages"], meta["wgmma"] = bn/16, min(6, t.SharedMemory/stage), 2
			if ws, ok := productWaveShape(grp); ok && bm == 128 && n%bn != 0 && ws.k >= 256 {
				// the output not whole tiles of columns: the epilogue
				// through shared memory, as partialColumns has it (the
				// H200, 2026-12-04, r24g, `tilefuse peer -precision tf32x3
				// -tune epi_smem=1`, 128×128, TFLOP/s: 4096×30522×768 88.5
				// → 92.3, 4096×50257×768 77.3 → 79.8; cuBLAS SGEMM 47.5 and
				// 48.3 in the same call); not measured at 64 rows (1000³,
				// narrow products) nor over a short K (the store-bound
				// shapes, where 3xTF32 is not the default), which keep the
				// accumulator's stores
				meta["epi_smem"] = 1
			}
			return
		}
		// TF32 with 128×128 tiles a little over one wave (at most a
		// quarter more than the SMs: the second wave nearly empty):
		// 64×128 tiles at 4 warps, two programs an SM (measured on the
		// H200, 2026-12-01: the BERT layer's weight gradients Aᵀ·B
		// 768×3072×4096 and 3072×768×4096, 144 tiles, 0.186 ms against
		// 0.236)
		if prec == tile.PrecTF32 && bm == 128 && bn == 128 && m > 64 {
			tiles := batch * tile.CDiv(m, 128) * tile.CDiv(n, 128)
			if tiles > wave && 4*tiles <= 5*wave {
				bm = 64
				meta["num_warps"] = 4
			}
		}
		extra := 0
		if prec == tile.PrecTF32 && bm == 128 && n >= 256 && batch*tile.CDiv(m, 128)*tile.CDiv(n, 256) >= wave &&
			t.SharedMemory >= 2*256*128+2*4*bk*(128+256) {
			bn, extra = 256, 2*256*128
			meta["wgmma"] = 1
		}
		stage := 4 * bk * (bm + bn)
		meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"] = bm, bn, bk
		meta["num_stages"] = max(2, min(3, (t.SharedMemory-extra)/stage))
		return
	}
	if !t.GPU() && t.Native && prec == tile.PrecIEEE {
		m, n := s[len(s)-2], s[len(s)-1]
		batch := outputs / (m * n)
		var bm, bn int
		for _, side := range []int{128, 64, 32} {
			bm, bn = min(side, max(tile.MinDotDim, pow2AtLeast(m))), min(side, max(tile.MinDotDim, pow2AtLeast(n)))
			if batch*tile.CDiv(m, bm)*tile.CDiv(n, bn) >= 4*t.Cores || side == 64 && cpuLongK(grp) {
				// a bare product over a long K keeps tiles of 64: its
				// programs come from K's parts (splitLongK)
				break
			}
		}
		// a side whose tiles pad the product by more than an eighth (784
		// rows: 896 at 128) halved while that pads less (832 at 64): the
		// micro-kernel computes the padding's zeros
		pad := func(size, side int) int { return tile.CDiv(size, side)*side - size }
		for bm > 32 && 8*pad(m, bm) > m && pad(m, bm/2) < pad(m, bm) {
			bm /= 2
		}
		for bn > 32 && 8*pad(n, bn) > n && pad(n, bn/2) < pad(n, bn) {
			bn /= 2
		}
		bm, bn = wholeSide(m, bm), wholeSide(n, bn)
		bk := 32 // a product of its own kind's (heads_proj: no operands here)
		if len(grp.MatMul.Inputs) == 2 {
			k := productK(grp.MatMul)
			bk = tile.MinDotDim // the largest power of two up to 64 that K holds
			for bk < 64 && 2*bk <= k {
				bk *= 2
			}
		}
		meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"] = bm, bn, bk
		return
	}
	side := 32
	if outputs >= wave*64*64 {
		side = 64
	}
	meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"] = side, side, 32
}
