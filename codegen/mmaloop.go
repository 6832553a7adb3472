package codegen

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tilefuse/tilefuse/tile"
)

// MMA loops: loops whose dots run on the tensor cores with their operands
// and results in registers, as FlashAttention-2 runs attention.
//
// A loop (other than a plain K loop, pipeline.go) qualifies when every dot
// in its body is a TF32, bf16 or 3xTF32 product whose B operand is a load
// in the body (or its transpose) that nothing else reads and whose address
// and mask depend only on the induction variable, and whose A operand is
// anything: a value from before the loop (attention's query block), or one
// computed in the body (the probabilities P from an earlier dot's result
// after elementwise ops and row reductions). Then:
//
//   - each dot's result is held in the mma accumulator layout (mmaLayout,
//     all warps along the rows: a warp owns whole rows, so that row
//     reductions are shuffles among the 4 lanes of a row), and so is
//     everything computed from it elementwise;
//   - each A operand is held in the accumulator layout of its m×k block,
//     which is the A fragment of mma.sync with k permuted within each 8
//     (m16n8k8 tf32: the instruction's k = t and t+4 are the block's
//     columns 2t and 2t+1; m16n8k16 bf16 needs no permutation): so the
//     accumulator of one dot is the A operand of the next with no data
//     movement, and an A operand from before the loop is loaded once
//     straight into it (ld.global pairs) and truncated to TF32 before the loop;
//   - the B loads become cp.async copies into a ring of `num_stages`
//     (default 2) shared-memory stages, a tile per load with its memory-
//     contiguous dimension along the tile's rows, swizzled so that fragment
//     reads are conflict-free where one swizzle allows it; each iteration
//     waits for its stage, one barrier, issues the copies of a later
//     iteration, and reads B's fragments with the same k permutation
//     (ld.shared.v2 where k is contiguous, two ld.shared.b32 where n is);
//   - carried values take the layout their next value is computed in
//     (the accumulator's, or a row slice of it for running maxima and sums).
//
// Layout conversions between layouts that hold the same elements in every
// thread (a row slice of one accumulator and of another with the same rows)
// are register renamings (rename), not shared-memory round trips.

// mmaLoop is the plan of one MMA loop.
type mmaLoop struct {
	loop       *tile.Value
	dots       []*mmaDot
	tiles      []*opTile
	stages     int
	stageBytes int
	// wg (meta-parameter wgmma = 1 on sm_90a, TF32 or bf16): the dots run
	// as wgmma.mma_async m64nNk8 (k16) per warpgroup, A from registers,
	// B by descriptor from tiles in wgmma's K-major layout (opTile.wg);
	// see mmawg.go
	wg bool
}

// mmaDot is the plan of one dot of an MMA loop.
type mmaDot struct {
	v       *tile.Value
	m, n, k int
	c       *Blocked // the result's layout: mmaLayout(m, n, warps, 1)
	a       *Layout  // the A operand's: the accumulator layout of m×k
	outside bool     // A is computed before the loop: fragments made once
	// aTile (outside only, where registers would not hold every operand):
	// A is written once into a tile of its own before the loop, its
	// fragments read each iteration (k along the tile's rows)
	aTile  *smemTile
	b      *opTile
	bTrans bool    // B is the transpose of the tile's load
	view   *wgView // wgmma loops: the view of b the dot reads
	// plainK (wgmma loops, A from before the loop): d.a is the true A
	// fragment layout, k unpermuted (its B tile is copied 16 bytes wide
	// into wgmma's layout, which cannot permute k)
	plainK bool
}

// opTile is a B operand load of an MMA loop and its tile in each stage:
// Rows × Cols elements, Cols along the load's dimension Inner (contiguous
// in memory where one is).
type opTile struct {
	load  *tile.Value
	t     smemTile
	inner int
	copy  *Layout // the layout the copies are issued in
	vw    int     // elements a copy
	// rounded: every dot reading the tile is a PrecTF32 product (as its B),
	// so each thread rounds its own copies to TF32 in place once they land
	// (before the iteration's barrier), and the fragment reads need no
	// conversion: a word is converted once instead of once per warp reading
	// it; truncated: the same for PrecTF32TB products, which truncate their
	// B (and.b32; on mma.sync only: wgmma reads a TF32 B from shared memory
	// truncated, as it lies)
	rounded, truncated bool
	// wg: the tile's views as wgmma B operands (wgmma loops), each in
	// wgmma's canonical K-major layout; direct: the copies land in wg[0]
	// itself (TF32), else in t as in the mma.sync form, and each thread
	// converts its own copies into every view (bf16; a TF32 tile read with
	// both k dimensions, or permuted where its k is contiguous)
	wg     []*wgView
	direct bool
}

// wgView is a view of an MMA loop's B tile as wgmma's K-major operand:
// load dimension k is wgmma's k, the other its n; perm: k is permuted
// within each 8 as the A operand's (TF32 with A computed in the loop, in
// the accumulator layout: word k of 8 at position k/2 + 4·(k%2), so that
// wgmma's k = t, t+4 read the block's 2t, 2t+1); bf: bf16 elements; off:
// its offset in a stage.
type wgView struct {
	k    int
	perm bool
	bf   bool
	off  int
	// x3 (3xTF32): the view holds the high parts tf32(x), and a view of
	// the same layout at lo the low parts tf32(x − tf32(x))
	x3 bool
	lo int
}

// mmaPlan holds the MMA loops of a kernel and what the layout pass needs
// from them.
type mmaPlan struct {
	loops map[int]*mmaLoop   // by the loop's value ID
	dots  map[int]*mmaDot    // by the dot's value ID
	tiles map[int]*opTile    // by the load's value ID
	wish  map[int]*Layout    // loads that feed A operands: the layout to load in
	frags map[int][][]string // emission: A fragments made before the loop, by dot ID
}

func (l *lowerer) mma() *mmaPlan {
	if l.mmaPlan == nil {
		l.mmaPlan = &mmaPlan{loops: map[int]*mmaLoop{}, dots: map[int]*mmaDot{}, tiles: map[int]*opTile{}, wish: map[int]*Layout{}, frags: map[int][][]string{}}
	}
	return l.mmaPlan
}

// planMMALoops finds the MMA loops before layouts are assigned, and
// presets what assignLayouts reads: each dot's result layout and the
// layouts that loads feeding A operands are to be loaded in.
func (l *lowerer) planMMALoops() {
	mp := l.mma()
	l.k.Walk(func(v *tile.Value) {
		if v.Op != tile.OpFor {
			return
		}
		ml := l.matchMMALoop(v)
		if ml == nil {
			return
		}
		mp.loops[v.ID] = ml
		for _, d := range ml.dots {
			mp.dots[d.v.ID] = d
			c := plain(d.c)
			l.natural[d.v.ID] = &c
		}
		for _, t := range ml.tiles {
			mp.tiles[t.load.ID] = t
		}
		for _, d := range ml.dots {
			l.wishBack(d.v.Args[0], d.a, map[*tile.Value]bool{})
		}
	})
}

// wishBack asks the loads that x is computed from elementwise (at x's
// shape) to be loaded in layout lay, x's layout as an A operand.
func (l *lowerer) wishBack(x *tile.Value, lay *Layout, seen map[*tile.Value]bool) {
	if seen[x] {
		return
	}
	seen[x] = true
	switch {
	case x.Op == tile.OpLoad:
		if _, ok := l.mma().wish[x.ID]; !ok && l.mma().tiles[x.ID] == nil {
			l.mma().wish[x.ID] = lay
		}
	case x.Op.IsElementwise():
		for _, a := range x.Args {
			if a.Type.Shape.Rank == x.Type.Shape.Rank && a.Type.Shape.Numel() == x.Type.Shape.Numel() {
				l.wishBack(a, lay, seen)
			}
		}
	}
}

// matchMMALoop returns the plan of loop f if it is an MMA loop, else nil.
func (l *lowerer) matchMMALoop(f *tile.Value) *mmaLoop {
	if l.matchPipe(f) != nil {
		return nil
	}
	nw := l.opt.NumWarps
	body := f.Body
	inBody := map[*tile.Value]bool{}
	var dots []*tile.Value
	for _, v := range body.Values {
		inBody[v] = true
		switch v.Op {
		case tile.OpFor:
			return nil
		case tile.OpDot:
			dots = append(dots, v)
		}
	}
	if len(dots) == 0 {
		return nil
	}
	ml := &mmaLoop{loop: f}
	tiles := map[*tile.Value]*opTile{}
	isDot := map[*tile.Value]bool{}
	for _, d := range dots {
		isDot[d] = true
		if d.Prec == tile.PrecIEEE || d.Type.DType != tile.F32 {
			return nil
		}
		m, k, n := d.Args[0].Type.Shape.Dims[0], d.Args[0].Type.Shape.Dims[1], d.Args[1].Type.Shape.Dims[1]
		kstep := 8
		if d.Prec == tile.PrecBF16 {
			kstep = 16
		}
		if m%(16*nw) != 0 || n%8 != 0 || k%kstep != 0 {
			return nil
		}
		bv, trans := d.Args[1], false
		if bv.Op == tile.OpTrans {
			bv, trans = bv.Args[0], true
		}
		if bv.Op != tile.OpLoad || !inBody[bv] || !l.pipeable(bv, f) {
			return nil
		}
		t := tiles[bv]
		if t == nil {
			if t = l.planTile(bv); t == nil {
				return nil
			}
			tiles[bv] = t
		}
		ml.dots = append(ml.dots, &mmaDot{
			v: d, m: m, n: n, k: k,
			c:       l.intern(mmaLayout(m, n, nw, 1)),
			a:       &Layout{B: l.intern(mmaLayout(m, k, nw, 1)), Src: []int{0, 1}},
			outside: !inBody[d.Args[0]],
			b:       t, bTrans: trans,
		})
	}
	// the B loads are read by the tensor cores only
	isB := func(u, x *tile.Value) bool {
		return isDot[u] && u.Args[1] == x && u.Args[0] != x && u.Args[2] != x
	}
	for _, v := range body.Values { // in program order: the tiles' order
		t := tiles[v]
		if t == nil {
			continue
		}
		for _, u := range l.users[v.ID] {
			if u.Op == tile.OpTrans {
				for _, uu := range l.users[u.ID] {
					if !isB(uu, u) {
						return nil
					}
				}
				continue
			}
			if !isB(u, v) {
				return nil
			}
		}
		ml.tiles = append(ml.tiles, t)
	}
	for _, t := range ml.tiles {
		t.rounded, t.truncated = true, true
		for _, d := range ml.dots {
			if d.b == t {
				t.rounded = t.rounded && d.v.Prec == tile.PrecTF32
				t.truncated = t.truncated && d.v.Prec == tile.PrecTF32TB
			}
		}
	}
	if l.opt.Arch >= 90 && l.k.Meta["wgmma"] == 1 {
		l.tryWgmma(ml)
	}
	if ml.wg {
		for _, t := range ml.tiles {
			t.truncated = false // the tensor cores truncate what they read
		}
	}
	l.placeOperands(ml)
	// swizzles: each tile's fragment reads, as B of each dot it feeds
	for _, t := range ml.tiles {
		var groups [][]access
		for _, d := range ml.dots {
			if d.b == t {
				groups = append(groups, l.bReadGroups(d)...)
			}
		}
		t.t.Swz = chooseSwizzle(t.t, groups, 8)
	}
	ml.stageBytes = layoutStage(ml)
	ml.stages = 2
	if s, ok := l.k.Meta["num_stages"]; ok && s >= 2 {
		ml.stages = s
	}
	// leave 16 KB to the kernel's other shared memory
	room := maxSmem(l.opt.Arch) - 16<<10
	for _, d := range ml.dots {
		if d.aTile != nil {
			room -= d.aTile.bytes() + 128
		}
	}
	ml.stages = min(ml.stages, room/ml.stageBytes)
	if ml.stages < 2 {
		return nil
	}
	return ml
}

// layoutStage places ml's tiles in a stage, 128-byte aligned (1024 for
// wgmma's swizzle atoms; converted wgmma views after the copies, then
// 3xTF32's low parts), and returns the stage's size.
func layoutStage(ml *mmaLoop) int {
	align := 128
	if ml.wg {
		align = 1024
	}
	off := 0
	for _, t := range ml.tiles {
		t.t.Off = off
		if t.direct {
			t.wg[0].off = off
		}
		off += (t.t.bytes() + align - 1) &^ (align - 1)
	}
	for _, t := range ml.tiles {
		for i, v := range t.wg {
			if i > 0 || !t.direct {
				v.off = off
				off += (t.wgBytes(v) + align - 1) &^ (align - 1)
			}
		}
		for _, v := range t.wg {
			if v.x3 {
				v.lo = off
				off += (t.wgBytes(v) + align - 1) &^ (align - 1)
			}
		}
	}
	return off
}

// tryWgmma plans MMA loop ml on wgmma (wgmmaLoop) where two stages of its
// tiles and views fit in shared memory beside 16 KB for the kernel's
// other uses; else it leaves the plan as it was (mma.sync).
func (l *lowerer) tryWgmma(ml *mmaLoop) {
	type tileState struct {
		copy *Layout
		vw   int
	}
	tiles := map[*opTile]tileState{}
	for _, t := range ml.tiles {
		tiles[t] = tileState{t.copy, t.vw}
	}
	dots := map[*mmaDot]*Layout{}
	for _, d := range ml.dots {
		dots[d] = d.a
	}
	if ml.wg = l.wgmmaLoop(ml); !ml.wg {
		return
	}
	if 2*layoutStage(ml) <= maxSmem(l.opt.Arch)-16<<10 {
		return
	}
	ml.wg = false
	for t, st := range tiles {
		t.copy, t.vw, t.wg, t.direct = st.copy, st.vw, nil, false
	}
	for d, a := range dots {
		d.a, d.view, d.plainK = a, nil, false
	}
}

// mmaRegBudget bounds an estimate of the registers a thread of an MMA
// loop holds at once: the accumulators it carries, the fragments of A
// operands from before the loop, the other results of its products (S and
// dP live together in the backward) and the B words of one k step. Beyond it, those A operands (the largest
// first) are read from shared memory each iteration instead, as
// FlashAttention-2 keeps Q in shared memory. ptxas 11.8 (sm_80) put the
// attention kernels at about 60-80 registers above the estimate: 112 → 168
// (forward, 64×64, head dim 64), 160 → 228 (dQ), 176 → 249 and 254
// (forward at head dim 128, dK/dV); 208 (128-row blocks at 4 warps) spilled
// at 255, 144 with Q in shared memory took 245. The meta-parameter mma_regs overrides it.
const mmaRegBudget = 176

// placeOperands decides which A operands from before the loop stay in
// registers (see mmaRegBudget).
func (l *lowerer) placeOperands(ml *mmaLoop) {
	threads := 32 * l.opt.NumWarps
	yield := ml.loop.Body.Values[len(ml.loop.Body.Values)-1]
	budget := mmaRegBudget
	if b, ok := l.k.Meta["mma_regs"]; ok {
		budget = b
	}
	regs, temps, bwords := 0, 0, 0
	for _, d := range ml.dots {
		carried := false
		for _, y := range yield.Args {
			carried = carried || y == d.v
		}
		if carried {
			regs += d.m * d.n / threads
		} else {
			temps += d.m * d.n / threads
		}
		bwords = max(bwords, 2*d.n/8)
	}
	regs += temps + bwords
	var outside []*mmaDot
	for _, d := range ml.dots {
		if d.outside {
			outside = append(outside, d)
			regs += d.m * d.k / threads
		}
	}
	sort.SliceStable(outside, func(i, j int) bool { return outside[i].m*outside[i].k > outside[j].m*outside[j].k })
	for _, d := range outside {
		if regs <= budget || ml.wg { // wgmma loops keep them in registers (the tiles hold mma.sync's fragments)
			break
		}
		t := smemTile{Rows: d.m, Cols: d.k}
		var groups [][]access
		for r0 := 0; r0 < d.m; r0 += 8 {
			for k0 := 0; k0 < d.k; k0 += 8 {
				for half := 0; half < 2; half++ {
					var g []access
					for lane := 16 * half; lane < 16*(half+1); lane++ {
						g = append(g, access{r0 + lane/4, k0 + 2*(lane%4), 2})
					}
					groups = append(groups, g)
				}
			}
		}
		t.Swz = chooseSwizzle(t, groups, 8)
		d.aTile = &t
		regs -= d.m * d.k / threads
	}
}

// pipeable reports whether load ld in the body of loop f can be issued for
// a later iteration: no other value than zero for masked lanes, and an
// address and mask computed from the induction variable and values from
// before the loop only (no carried value, no load).
func (l *lowerer) pipeable(ld *tile.Value, f *tile.Value) bool {
	if len(ld.Args) > 2 && !isZero(ld.Args[2]) {
		return false
	}
	if ld.Type.Shape.Rank != 2 || ld.Type.DType != tile.F32 {
		return false
	}
	body := f.Body
	inBody := map[*tile.Value]bool{}
	for _, v := range body.Values {
		inBody[v] = true
	}
	seen := map[*tile.Value]bool{}
	var ok func(v *tile.Value) bool
	ok = func(v *tile.Value) bool {
		if seen[v] {
			return true
		}
		seen[v] = true
		for i, a := range body.Args {
			if v == a {
				return i == 0
			}
		}
		if !inBody[v] {
			return true
		}
		switch v.Op {
		case tile.OpLoad, tile.OpDot, tile.OpAtomicAdd, tile.OpReduceSum, tile.OpReduceMax, tile.OpReduceMin:
			return false
		}
		for _, a := range v.Args {
			if !ok(a) {
				return false
			}
		}
		return true
	}
	for _, a := range ld.Args[:min(len(ld.Args), 2)] {
		if !ok(a) {
			return false
		}
	}
	return true
}

// planTile lays out load ld's tile: its contiguous dimension (from the
// address's coefficients) along the rows, and the widest copies that
// alignment and the mask allow (16 bytes where the parameters' divisibility
// is known, as the cuda launcher gives it).
func (l *lowerer) planTile(ld *tile.Value) *opTile {
	sh := ld.Type.Shape.Slice()
	inner, vw, _ := l.contigDim(ld)
	outer := 1 - inner
	t := &opTile{load: ld, inner: inner, vw: vw}
	t.t = smemTile{Rows: sh[outer], Cols: sh[inner], Swz: swizzle{1, 1, 1}}
	nw := l.opt.NumWarps
	if inner == 1 {
		c := plain(l.intern(newBlocked(sh, nw, 4)))
		t.copy = &c
	} else {
		t.copy = &Layout{B: l.intern(newBlocked([]int{sh[1], sh[0]}, nw, 4)), Src: []int{1, 0}}
	}
	return t
}

// contigDim is the dimension of the 2-D block that load ld reads
// contiguously in memory (from the address's coefficients; 1 where
// neither or both are), the widest copy along it that alignment and the
// mask allow (16 bytes where the parameters' divisibility is known, as
// the cuda launcher gives it), and whether that dimension is known to be
// contiguous at all.
func (l *lowerer) contigDim(ld *tile.Value) (inner, vw int, contig bool) {
	sh := ld.Type.Shape.Slice()
	memo := map[*tile.Value]*affine{}
	a := l.affineOf(ld.Args[0], memo)
	size := int64(ld.Type.DType.Size())
	inner = 1
	if a != nil && a.Coef[0] == size && a.Coef[1] != size {
		inner = 0
	}
	outer := 1 - inner
	vw = 1
	if a == nil || a.Coef[inner] != size {
		return inner, vw, false
	}
	for _, w := range []int{4, 2} {
		bytes := int64(w) * size
		if sh[inner]%w != 0 || a.Div%bytes != 0 || a.Coef[outer]%bytes != 0 {
			continue
		}
		if len(ld.Args) > 1 && l.runs(ld.Args[1], inner, memo) < int64(w) {
			continue
		}
		vw = w
		break
	}
	return inner, vw, true
}

// bKMajor reports whether dot d reads its B tile with k along the tile's
// rows (k contiguous: one ld.shared.v2 per fragment), else n is.
func (d *mmaDot) bKMajor() bool {
	kDim := 0 // B's k is dimension 0 of the load, or 1 of a transposed one
	if d.bTrans {
		kDim = 1
	}
	return kDim == d.b.inner
}

// bReadGroups are the shared-memory accesses of dot d's B fragment reads,
// grouped as the hardware serves them: per 8 k and 8 n, lane (g, t) reads
// k 2t and 2t+1 of column g (a half-warp per 8-byte wavefront where k is
// contiguous; two 4-byte reads of the warp where n is).
func (l *lowerer) bReadGroups(d *mmaDot) [][]access {
	var out [][]access
	for k0 := 0; k0 < d.k; k0 += 8 {
		for n0 := 0; n0 < d.n; n0 += 8 {
			if d.bKMajor() {
				for half := 0; half < 2; half++ {
					var g []access
					for lane := 16 * half; lane < 16*(half+1); lane++ {
						g = append(g, access{n0 + lane/4, k0 + 2*(lane%4), 2})
					}
					out = append(out, g)
				}
				continue
			}
			for h := 0; h < 2; h++ {
				var g []access
				for lane := 0; lane < 32; lane++ {
					g = append(g, access{k0 + 2*(lane%4) + h, n0 + lane/4, 1})
				}
				out = append(out, g)
			}
		}
	}
	return out
}

// mmaCarried sets the layouts of MMA loop f's carried values: the layout
// each one's next value is computed in where that is an accumulator layout
// or a slice of one, computed without the carried values themselves (so
// that a running maximum starting from a constant takes its rows' layout).
func (l *lowerer) mmaCarried(f *tile.Value, lays []*Layout) {
	body := f.Body
	yield := body.Values[len(body.Values)-1]
	inBody := map[*tile.Value]bool{}
	for _, v := range body.Values {
		inBody[v] = true
	}
	memo := map[*tile.Value]*Layout{}
	var nat func(v *tile.Value) *Layout
	nat = func(v *tile.Value) *Layout {
		if v.Type.Shape.IsScalar() {
			return nil
		}
		if x, ok := memo[v]; ok {
			return x
		}
		memo[v] = nil // cycles cannot happen, but be safe
		var lay *Layout
		if d := l.mma().dots[v.ID]; d != nil {
			c := plain(d.c)
			lay = &c
		} else if !inBody[v] {
			if v.Op != tile.OpBlockArg {
				lay = l.naturalOf(v)
			}
		} else {
			switch {
			case v.Op == tile.OpReduceSum || v.Op == tile.OpReduceMax || v.Op == tile.OpReduceMin:
				if in := nat(v.Args[0]); in != nil {
					lay = reducedLayout(in, v)
				}
			case v.Op == tile.OpBroadcast:
				if in := nat(v.Args[0]); in != nil {
					lay = broadcastLayout(in, v.Args[0].Type.Shape, v.Type.Shape)
				}
			case v.Op == tile.OpExpandDims:
				if in := nat(v.Args[0]); in != nil {
					src := append([]int(nil), in.Src[:v.Aux]...)
					src = append(append(src, -1), in.Src[v.Aux:]...)
					lay = &Layout{B: in.B, Src: src}
				}
			case v.Op == tile.OpTrans:
				if in := nat(v.Args[0]); in != nil {
					lay = &Layout{B: in.B, Src: []int{in.Src[1], in.Src[0]}}
				}
			case v.Op.IsElementwise():
				for _, a := range v.Args {
					if lay = nat(a); lay != nil {
						break
					}
				}
			}
		}
		memo[v] = lay
		return lay
	}
	for i, y := range yield.Args {
		if lay := nat(y); lay != nil && lay.B.WRep != nil {
			lays[i] = lay
		}
	}
}

// mmaLoopDump lists the MMA loops (the pipeline stage's dump).
func (l *lowerer) mmaLoopDump() string {
	if l.mmaPlan == nil || len(l.mmaPlan.loops) == 0 {
		return ""
	}
	var sb strings.Builder
	l.k.Walk(func(v *tile.Value) {
		ml := l.mmaPlan.loops[v.ID]
		if ml == nil {
			return
		}
		form := "mma loop"
		if ml.wg {
			form = "mma loop on wgmma (m64nN a warpgroup, A from registers, B K-major by descriptor)"
		}
		fmt.Fprintf(&sb, "for %%%d: %s, %d stages of %d B\n", v.ID, form, ml.stages, ml.stageBytes)
		for _, t := range ml.tiles {
			rounded := ""
			switch {
			case t.rounded:
				rounded = ", rounded to TF32 in place"
			case t.truncated:
				rounded = ", truncated to TF32 in place"
			}
			for i, v := range t.wg {
				n, kw, rb, _, e := t.wgGeom(v)
				how := fmt.Sprintf("converted at +%d", v.off)
				if i == 0 && t.direct {
					how = "copied into it"
				}
				perm := ""
				if v.perm {
					perm = ", k permuted"
				}
				if v.x3 {
					perm += fmt.Sprintf(", high parts; low parts at +%d", v.lo)
				}
				rounded += fmt.Sprintf("; wgmma B (%s): %d rows n of %d k (dimension %d%s), %d-byte rows and swizzle, %d-byte elements", how, n, kw, v.k, perm, rb, e)
			}
			fmt.Fprintf(&sb, "    load %%%d: tile %v (dimension %d along the rows), copies of %d B%s\n", t.load.ID, t.t, t.inner, 4*t.vw, rounded)
		}
		for _, d := range ml.dots {
			where := "computed in the loop"
			if d.outside {
				where = "from before the loop, fragments made once"
			}
			if d.aTile != nil {
				where = fmt.Sprintf("from before the loop, in shared memory (tile %v)", *d.aTile)
			}
			kmaj := "n"
			if d.bKMajor() {
				kmaj = "k"
			}
			fmt.Fprintf(&sb, "    dot %%%d %dx%dx%d %v: A %s; B tile of %%%d (%s along its rows); result %s\n",
				d.v.ID, d.m, d.n, d.k, d.v.Prec, where, d.b.load.ID, kmaj, d.c.key())
		}
	})
	return sb.String()
}

// mmaLoadLayout is the layout load v is planned in when an MMA loop
// decides it: the copy layout of a B operand, or an A operand's fragment
// layout (nil: the layout pass decides).
func (l *lowerer) mmaLoadLayout(v *tile.Value) *Layout {
	if t := l.mma().tiles[v.ID]; t != nil {
		return t.copy
	}
	return l.mma().wish[v.ID]
}
