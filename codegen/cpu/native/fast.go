package native

import (
	"fmt"
	"math"
	"os"
	"sync/atomic"

	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
	"github.com/tilefuse/tilefuse/tile"
)

// The row-level unmasked body. A masked access costs about 35
// instructions a vector (the mask's lanes and comparisons, the active
// lanes' range check, vmaskmovps); most rows of most phases (the packs of
// a tiled matmul, its epilogue away from the tails) have every mask true
// over the whole row. Where a phase's masks are provably true over a row
// from a few scalar comparisons at the row's start, the phase gets a
// second inner loop for such rows, in which those masked accesses are
// plain loads and stores (their row's range checked once, at the row's
// start) and the masks are not computed at all. Rows where a check fails
// run the masked loop as before, so results are the same bit for bit:
// both loops load, compute and store the same lanes.
//
// A mask is provably true over a row when it is an i1 constant true, a
// scalar boolean that is true, an And of such masks, or a comparison
// (<, ≤, >, ≥) of two i32 lane vectors: both are affine in the lane index
// j along the row (row part + e·j), so with both ends of each within the
// int32 range (no lane wraps: the lanes are their 64-bit values) a
// comparison holding at j = 0 and at the row's last lane holds at every
// lane in between.

// noFastRows turns the unmasked row loop off (tests: export_test.go).
var noFastRows atomic.Bool

// fastPlan is what a phase's unmasked row needs.
type fastPlan struct {
	unmask []*node       // masked accesses that run unmasked
	cmps   []*node       // i32 comparisons that must hold over the row
	ints   []*pattern    // i32 lane patterns whose row ends must fit in int32
	bools  []*tile.Value // scalar booleans that must be true
	ranges []*pattern    // unmasked patterns whose row range must lie in the buffer
	live   []bool        // per node: emitted in the unmasked loop
	pats   []*pattern    // the patterns the unmasked loop reads
	last   []int         // per node: its last reader in the unmasked loop
	// fold: selects whose condition is a mask this plan proves true over
	// the row (a proven access mask, or a conjunct of one): in the
	// unmasked loop their value is their first operand's; and Ands with
	// one side so proven (provePart): their value is the other side's
	fold   map[*node]*node
	proven map[*node]bool // masks (and their conjuncts) proven true over the row
	// prefix: where set, the unmasked row covers only the row's first
	// prefix lanes for the stores in prefixed, whose masks hold there (a
	// comparison of the lanes with a constant: a block wider than its
	// axis); the lanes past it are computed and never stored
	prefix      int
	prefixed    map[*node]bool
	allowPrefix bool // planFast's second try: prefixes may be proven
	usedPrefix  bool // provable: the mask just proven needs the prefix
	// rowChecked: masked accesses that stay masked in the unmasked loop
	// (masks not provable over the row: an im2col's reads at an image's
	// edges, a window's lanes in a block wider than its axis) whose whole
	// row of lanes fastCheck checks against the buffer (ranges), so that
	// there each vector is one vmaskmovps: no active lanes' range check,
	// no test for a vector with none active (the masked-off lanes lie in
	// the buffer: no fault to suppress, no assist)
	rowChecked map[*node]bool
}

// rowCheckable reports whether masked access n can stay masked in the
// unmasked loop with its row checked once (rowChecked): a contiguous f32
// load or store of a buffer, or an f32 gather (a load whose lanes lie a
// constant stride apart: there every lane is read and the masked-off ones
// cleared, where gatherMasked tests each lane). A scatter keeps its
// per-lane stores. Only contiguous accesses have their masks' row-uniform
// conjuncts proven (provePart): rows where those fail run the masked loop,
// and a col2im's nine gathered taps fail at both edges of the image (1.06×
// its time on the 2-core VM with them proven).
func rowCheckable(n *node) bool {
	if n.pat.root < 0 || n.pat.sh != 2 {
		return false
	}
	return n.pat.elast == 1 || n.op == opLoad && n.pat.elast > 1
}

// keepMasked records masked access n (rowCheckable), which stays masked in
// the unmasked loop, as row-checked (rowChecked).
func (fp *fastPlan) keepMasked(n *node) {
	if fp.rowChecked == nil {
		fp.rowChecked = map[*node]bool{}
	}
	fp.rowChecked[n] = true
	if !n.pat.checked && !containsPat(fp.ranges, n.pat) {
		fp.ranges = append(fp.ranges, n.pat)
	}
}

// planFast is the phase's fast plan, or nil where it has none: no masked
// access whose mask can be proven true over a row, or rows that are not
// whole vectors. A phase with no masked access at all has one where its
// loop can compute in zmm registers (zmmOK): an empty plan, no checks but
// the accesses' ranges once a phase.
func (pg *phaseGen) planFast(copies int) *fastPlan {
	for _, n := range pg.nodes {
		if n.op == opStore && (n.v.Op == tile.OpAtomicAdd || n.scat) {
			return nil // lane by lane (body.go: atomicAdd, scatterIdx), ymm only
		}
	}
	if pg.prefixOK(copies) {
		// a comparison of the lanes with a constant that holds over a
		// prefix of them fails the row's check in every row: where every
		// store's mask holds over that prefix, the row runs unmasked there
		if fp := pg.planFastWith(copies, true); fp != nil && fp.prefix > 0 && pg.allStoresPrefixed(fp) {
			return fp
		}
	}
	return pg.planFastWith(copies, false)
}

// prefixOK reports whether a phase may run unmasked over a prefix of its
// rows' lanes: one inner iteration a row (each body copy's lanes known),
// and nothing but stores reads its values (no reduction, frame block,
// carried block or pack: the lanes past the prefix would hold other
// values than the masked loop's).
func (pg *phaseGen) prefixOK(copies int) bool {
	if pg.width != lane || pg.last != copies*lane || pg.rank < 1 {
		return false
	}
	for _, n := range pg.nodes {
		if n.op == opReduce || n.op == opMatWrite {
			return false
		}
	}
	return true
}

// allStoresPrefixed reports whether every store of the phase is one fp
// runs over its prefix: then no lane past it is stored by either loop.
func (pg *phaseGen) allStoresPrefixed(fp *fastPlan) bool {
	for _, n := range pg.nodes {
		if n.op == opStore && !fp.prefixed[n] {
			return false
		}
	}
	return true
}

// prefixOf is the number of leading lanes of a row over which comparison
// m holds, where m compares the row's lanes (an i32 lane vector with
// stride 1 and a constant row part) with a constant and holds over a
// prefix of them, 0 < k < the row's length (a block wider than its axis:
// lanes < 14 in 16).
func (pg *phaseGen) prefixOf(m *node) (int, bool) {
	constRow := func(p *pattern) (int64, bool) {
		if p.c == nil || p.c.op != sxConst {
			return 0, false
		}
		for k := 0; k < pg.rank-1 && k < len(p.e); k++ {
			if !p.e[k].isConst(0) {
				return 0, false
			}
		}
		return p.c.k, true
	}
	x, y := m.args[0].pat, m.args[1].pat
	cx, okx := constRow(x)
	cy, oky := constRow(y)
	if !okx || !oky {
		return 0, false
	}
	var k int64
	switch {
	case x.elast == 1 && y.elast == 0 && m.v.Op == tile.OpLt: // c0 + j < C
		k = cy - cx
	case x.elast == 1 && y.elast == 0 && m.v.Op == tile.OpLe:
		k = cy - cx + 1
	case x.elast == 0 && y.elast == 1 && m.v.Op == tile.OpGt: // C > c0 + j
		k = cx - cy
	case x.elast == 0 && y.elast == 1 && m.v.Op == tile.OpGe:
		k = cx - cy + 1
	default:
		return 0, false
	}
	if k <= 0 || k >= int64(pg.last) {
		return 0, false
	}
	return int(k), true
}

func (pg *phaseGen) planFastWith(copies int, allowPrefix bool) *fastPlan {
	if pg.width != lane || pg.last%(copies*lane) != 0 {
		return nil
	}
	fp := &fastPlan{allowPrefix: allowPrefix}
	masked := false
	for _, n := range pg.nodes {
		var m *node
		switch {
		case n.op == opLoad && len(n.args) > 0:
			m = n.args[0]
		case n.op == opStore && len(n.args) == 2:
			m = n.args[1]
		default:
			continue
		}
		masked = true
		if n.pat.root < 0 {
			continue
		}
		save := *fp
		fp.usedPrefix = false
		if !pg.provable(m, fp) || fp.usedPrefix && n.op != opStore {
			// (a load under a prefix's mask keeps it: its masked-off
			// lanes' values may reach a store's unmasked lanes)
			*fp = save
			if rowCheckable(n) {
				if n.pat.elast == 1 {
					pg.provePart(m, fp)
				}
				fp.keepMasked(n)
			}
			continue
		}
		fp.unmask = append(fp.unmask, n)
		if fp.usedPrefix { // not proven over the row: selects on it keep both values
			if fp.prefixed == nil {
				fp.prefixed = map[*node]bool{}
			}
			fp.prefixed[n] = true
		} else {
			fp.prove(m)
		}
		if !n.pat.checked && !containsPat(fp.ranges, n.pat) {
			fp.ranges = append(fp.ranges, n.pat)
		}
	}
	if len(fp.unmask) == 0 && len(fp.rowChecked) == 0 && masked {
		return nil
	}
	for _, n := range pg.nodes { // in order: a select's operands come before it
		if n.op != opCompute {
			continue
		}
		var to *node
		switch {
		case n.v.Op == tile.OpSelect && fp.proven[n.args[0]]:
			to = n.args[1]
		case n.v.Op == tile.OpAnd && fp.proven[n.args[0]] && !fp.proven[n]:
			to = n.args[1] // true ∧ y: y (provePart)
		case n.v.Op == tile.OpAnd && fp.proven[n.args[1]] && !fp.proven[n]:
			to = n.args[0]
		default:
			continue
		}
		if fp.fold == nil {
			fp.fold = map[*node]*node{}
		}
		fp.fold[n] = fp.folded(to)
	}
	for _, c := range fp.cmps {
		for _, x := range c.args {
			if !containsPat(fp.ints, x.pat) {
				fp.ints = append(fp.ints, x.pat)
			}
		}
	}
	// what the unmasked loop computes: the stores, frame writes and
	// reductions, and what they read but the masks of unmasked accesses
	fp.live = make([]bool, len(pg.nodes))
	fp.last = make([]int, len(pg.nodes))
	idx := make(map[*node]int, len(pg.nodes))
	for i, n := range pg.nodes {
		idx[n] = i
		fp.last[i] = -1
	}
	for i := len(pg.nodes) - 1; i >= 0; i-- {
		n := pg.nodes[i]
		switch n.op {
		case opStore, opMatWrite, opReduce:
			fp.live[i] = true
		}
		if !fp.live[i] {
			continue
		}
		for _, a := range fp.args(n) {
			j := idx[a]
			fp.live[j] = true
			fp.last[j] = max(fp.last[j], i)
		}
	}
	for i, n := range pg.nodes {
		if fp.live[i] && n.pat != nil && !containsPat(fp.pats, n.pat) {
			fp.pats = append(fp.pats, n.pat)
		}
	}
	if len(fp.unmask) == 0 && len(fp.rowChecked) == 0 && !pg.zmmOK(fp) {
		// a phase without masks has one loop already: it takes this
		// plan only to compute in zmm registers
		return nil
	}
	return fp
}

func containsPat(ps []*pattern, p *pattern) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// args are the operands n reads in the unmasked loop: a folded select's
// first value in its place.
func (fp *fastPlan) args(n *node) []*node {
	if fp == nil {
		return n.args
	}
	as := n.args
	if contains(fp.unmask, n) {
		if n.op != opStore {
			if n.scat {
				return n.args[len(n.args)-1:] // a gather's offsets (gatherIdx)
			}
			return nil // a load: neither the mask nor the value of masked-off lanes
		}
		as = n.args[:1] // the value; not the mask
	}
	if len(fp.fold) == 0 {
		return as
	}
	var out []*node
	for i, a := range as {
		if f, ok := fp.fold[a]; ok {
			if out == nil {
				out = append([]*node(nil), as...)
			}
			out[i] = f
		}
	}
	if out == nil {
		return as
	}
	return out
}

// prove records mask m, proven true over the row, and the conjuncts it is
// an And of.
func (fp *fastPlan) prove(m *node) {
	if fp.proven == nil {
		fp.proven = map[*node]bool{}
	}
	fp.proven[m] = true
	if m.op == opCompute && m.v.Op == tile.OpAnd {
		fp.prove(m.args[0])
		fp.prove(m.args[1])
	}
}

// folded is the node whose value n has in the unmasked loop.
func (fp *fastPlan) folded(n *node) *node {
	for {
		f, ok := fp.fold[n]
		if !ok {
			return n
		}
		n = f
	}
}

// provable reports whether mask m can be proven true over a row, adding
// the checks that prove it to fp.
func (pg *phaseGen) provable(m *node, fp *fastPlan) bool {
	switch m.op {
	case opUniform:
		v := m.v
		switch {
		case v.Type.DType != tile.I1:
			return false
		case v.Op == tile.OpConst:
			return v.Aux != 0
		case pg.g.p.in(v).kind == kScalarBool:
			fp.bools = append(fp.bools, v)
			return true
		}
	case opCompute:
		switch m.v.Op {
		case tile.OpAnd:
			return pg.provable(m.args[0], fp) && pg.provable(m.args[1], fp)
		case tile.OpLt, tile.OpLe, tile.OpGt, tile.OpGe:
			for _, x := range m.args {
				if x.op != opIntVec || x.pat.elast < 0 || x.pat.elast*int64(pg.last) > math.MaxInt32 {
					return false
				}
			}
			if k, ok := pg.prefixOf(m); ok && fp.allowPrefix {
				if fp.prefix != 0 && fp.prefix != k {
					return false
				}
				fp.prefix, fp.usedPrefix = k, true
				return true // constant: no check at the row's start
			}
			fp.cmps = append(fp.cmps, m)
			return true
		}
	}
	return false
}

// provePart proves, of a mask m that is not provable over a row as a
// whole, the conjuncts of its And tree that do not vary along the row: a
// comparison whose two sides move alike with the lane (an image row's
// bounds in a window op, a block's row within its axis) and scalar
// booleans. They hold for every lane of a row that passes fastCheck, so
// the unmasked loop computes m from its other conjuncts alone (an And
// with a proven side folds to its other side). Comparisons that move
// with the lane are left in the mask: across a block wider than its axis
// they fail at some lane of every row, which would send every row to
// the masked loop.
func (pg *phaseGen) provePart(m *node, fp *fastPlan) {
	if m.op == opCompute && m.v.Op == tile.OpAnd {
		pg.provePart(m.args[0], fp)
		pg.provePart(m.args[1], fp)
		if fp.proven[m.args[0]] && fp.proven[m.args[1]] {
			fp.proven[m] = true
		}
		return
	}
	switch {
	case m.op == opUniform:
	case m.op == opCompute && m.v.Op.IsCompare() && len(m.args) == 2 &&
		m.args[0].op == opIntVec && m.args[1].op == opIntVec && m.args[0].pat.elast == m.args[1].pat.elast:
	default:
		return
	}
	save := *fp
	fp.allowPrefix = false
	if !pg.provable(m, fp) {
		*fp = save
		return
	}
	fp.allowPrefix = save.allowPrefix
	fp.prove(m)
}

// rowPart loads the pattern's row part into r.
func (pg *phaseGen) rowPart(r amd64.Reg, pat *pattern) {
	if pat.hasReg {
		pg.g.a.MOVQ(r, pat.reg)
	} else {
		pg.g.a.MOVQload(r, fr(pat.slot))
	}
}

// fastCheck jumps to slow unless every check of fp holds for this row
// (after rowStart: the patterns' row parts are computed). RAX and RDX are
// clobbered.
func (pg *phaseGen) fastCheck(fp *fastPlan, slow amd64.Label) {
	g := pg.g
	a := &g.a
	span := int64(pg.last - 1)
	// i32 lanes: both ends of the row within int32 (none wraps)
	for _, pat := range fp.ints {
		pg.rowPart(rT0, pat)
		for end := 0; end < 2; end++ {
			if end == 1 {
				if pat.elast == 0 {
					break
				}
				a.ADDQimm(rT0, int32(pat.elast*span))
			}
			a.MOVSXD(rT1, rT0)
			a.CMPQ(rT1, rT0)
			a.Jcc(amd64.CondNE, slow)
		}
	}
	// comparisons at both ends of the row (one where the two lanes move alike)
	fails := map[tile.Op]amd64.Cond{tile.OpLt: amd64.CondGE, tile.OpLe: amd64.CondG, tile.OpGt: amd64.CondLE, tile.OpGe: amd64.CondL}
	for _, c := range fp.cmps {
		x, y := c.args[0].pat, c.args[1].pat
		ends := []int64{0}
		if x.elast != y.elast {
			ends = append(ends, span)
		}
		for _, j := range ends {
			pg.rowPart(rT0, x)
			if d := x.elast * j; d != 0 {
				a.ADDQimm(rT0, int32(d))
			}
			pg.rowPart(rT1, y)
			if d := y.elast * j; d != 0 {
				a.ADDQimm(rT1, int32(d))
			}
			a.CMPQ(rT0, rT1)
			a.Jcc(fails[c.v.Op], slow)
		}
	}
	for _, v := range fp.bools {
		g.scalarIntReg(rT0, v)
		a.TESTQ(rT0, rT0)
		a.Jcc(amd64.CondE, slow)
	}
	// the row's lanes of each access made unmasked within its buffer
	for _, pat := range fp.ranges {
		n := int32(pg.last)
		switch {
		case pat.elast == 0:
			n = 1
		case pat.elast > 1: // lanes a stride apart (a gather or a scatter)
			n = int32(pat.elast)*(n-1) + 1
		}
		pg.rowPart(rT0, pat)
		a.CMPQload(rT0, fr(paramBase(pat.root)))
		a.Jcc(amd64.CondB, slow)
		a.LEAQ(rT1, amd64.Ptr(rT0, pat.esz()*n))
		a.CMPQload(rT1, fr(paramEnd(pat.root)))
		a.Jcc(amd64.CondA, slow)
	}
}

// blockCheck jumps to fail unless every check of fp holds for every row
// of the phase, and every unmasked access (those of the masked loop too)
// lies within its buffer for every row: each is linear in the lane
// indices, so it holds over the phase's box of lanes where it holds at its
// corners (the corners along the dimensions it varies in). RAX, RDX and
// RCX are clobbered.
func (pg *phaseGen) blockCheck(fp *fastPlan, fail amd64.Label) {
	g := pg.g
	a := &g.a
	for _, v := range fp.bools {
		g.scalarIntReg(rT0, v)
		a.TESTQ(rT0, rT0)
		a.Jcc(amd64.CondE, fail)
	}
	for _, pat := range fp.ints {
		for _, c := range pg.corners(pat, nil) {
			pg.cornerValue(rT0, pat, c)
			a.MOVSXD(rT1, rT0)
			a.CMPQ(rT1, rT0)
			a.Jcc(amd64.CondNE, fail)
		}
	}
	fails := map[tile.Op]amd64.Cond{tile.OpLt: amd64.CondGE, tile.OpLe: amd64.CondG, tile.OpGt: amd64.CondLE, tile.OpGe: amd64.CondL}
	for _, cmp := range fp.cmps {
		x, y := cmp.args[0].pat, cmp.args[1].pat
		for _, c := range pg.corners(x, y) {
			pg.cornerValue(rT0, x, c)
			a.MOVQ(rT1, rT0)
			pg.cornerValue(rT0, y, c)
			a.CMPQ(rT1, rT0)
			a.Jcc(fails[cmp.v.Op], fail)
		}
	}
	for _, pat := range pg.pats {
		if pat.root < 0 || !pat.checked && !containsPat(fp.ranges, pat) {
			continue
		}
		for _, c := range pg.corners(pat, nil) {
			pg.cornerValue(rT0, pat, c)
			a.CMPQload(rT0, fr(paramBase(pat.root)))
			a.Jcc(amd64.CondB, fail)
			a.LEAQ(rT1, amd64.Ptr(rT0, pat.esz()))
			a.CMPQload(rT1, fr(paramEnd(pat.root)))
			a.Jcc(amd64.CondA, fail)
		}
	}
}

// corners are the corners of the phase's box of lanes along the
// dimensions where x varies (with y: where x and y vary differently), as
// bit sets (bit k: dimension k at its last index, else at 0).
func (pg *phaseGen) corners(x, y *pattern) []int {
	cs := []int{0}
	dims := pg.ph.shape.Dims
	for k := 0; k < pg.rank; k++ {
		if dims[k] == 1 {
			continue
		}
		var differs bool
		switch {
		case k == pg.rank-1 && y == nil:
			differs = x.elast != 0
		case k == pg.rank-1:
			differs = x.elast != y.elast
		case y == nil:
			differs = !x.e[k].isConst(0)
		default:
			differs = !sxEqual(x.e[k], y.e[k])
		}
		if differs {
			for _, c := range cs {
				cs = append(cs, c|1<<k)
			}
		}
	}
	return cs
}

// cornerValue puts the pattern's value at corner c into r (an element
// offset; an address for a buffer's). RCX is clobbered.
func (pg *phaseGen) cornerValue(r amd64.Reg, pat *pattern, c int) {
	a := &pg.g.a
	dims := pg.ph.shape.Dims
	add := func(k int64) {
		switch {
		case k == 0:
		case k >= math.MinInt32 && k <= math.MaxInt32:
			a.ADDQimm(r, int32(k))
		default:
			a.MOVQimm(amd64.RCX, k)
			a.ADDQ(r, amd64.RCX)
		}
	}
	a.MOVQload(r, fr(int32(pat.c.slot)))
	for k := 0; k < pg.rank; k++ {
		if c&(1<<k) == 0 {
			continue
		}
		n := int64(dims[k] - 1)
		switch e := pat.e[k]; {
		case k == pg.rank-1:
			add(pat.elast * n)
		case e.op == sxConst:
			add(e.k * n)
		default:
			a.MOVQload(amd64.RCX, fr(int32(e.slot)))
			a.IMULQimm(amd64.RCX, amd64.RCX, int32(n))
			a.ADDQ(r, amd64.RCX)
		}
	}
	if pat.root >= 0 {
		a.SHLQ(r, pat.sh)
		a.ADDQload(r, fr(paramBase(pat.root)))
	}
}

// movesZ reports whether the unmasked loop only moves data, contiguous
// rows of whole zmm vectors (a pack, a copy): loads and frame reads into
// frame writes and stores, every value a plain vector of the row; then it
// runs in zmm registers, 16 lanes a move.
func (pg *phaseGen) movesZ(fp *fastPlan) bool {
	if !pg.g.avx512 || pg.last%(2*lane) != 0 || fp.prefix > 0 {
		return false
	}
	vals := 0
	for i, n := range pg.nodes {
		if !fp.live[i] {
			continue
		}
		switch n.op {
		case opLoad:
			if len(fp.args(n)) != 0 {
				return false
			}
			vals++
		case opMatRead:
			vals++
		case opMatWrite, opStore:
			if as := fp.args(n); len(as) != 1 || as[0].op != opLoad && as[0].op != opMatRead {
				return false
			}
		default:
			return false
		}
		if n.pat.elast != 1 || n.pat.sh != 2 {
			return false
		}
	}
	return vals <= 16
}

// innerZ is the unmasked loop of a phase that only moves data (movesZ):
// each value in a register of Z16–Z31, 16 lanes at a time.
func (pg *phaseGen) innerZ(fp *fastPlan) error {
	a := &pg.g.a
	a.XORL(rJ, rJ)
	top := a.NewLabel()
	if pg.last > 2*lane {
		a.Bind(top)
	}
	reg := map[*node]amd64.ZReg{}
	for i, n := range pg.nodes {
		if !fp.live[i] {
			continue
		}
		at := amd64.PtrIdx(pg.rowBase(n.pat), rJ, 4, 0)
		switch n.op {
		case opLoad, opMatRead:
			z := amd64.ZReg(16 + len(reg))
			reg[n] = z
			a.VMOVUPSZ(z, at)
		default:
			a.VMOVUPSstoreZ(at, reg[fp.args(n)[0]])
		}
	}
	if pg.last > 2*lane {
		a.ADDQimm(rJ, int32(2*lane))
		a.CMPQimm(rJ, int32(pg.last))
		a.Jcc(amd64.CondL, top)
	}
	return a.Err()
}

// zmmOK reports whether the unmasked loop can compute in zmm registers,
// sixteen lanes a vector (vec.go): AVX-512 on, rows of whole zmm vectors,
// and every node of the loop one that vec.go has the 512-bit form of —
// plain loads (of contiguous lanes or one address) and stores (of
// contiguous lanes), frame blocks, affine i32 lanes, the f32 and i1 ops,
// and reductions (along the last axis in registers, or in the frame's 64
// bytes of the ymm pair's two accumulators; along axis 0 in the frame: 16
// columns a vector, each in the reference's order as in ymm). The results
// are the ymm loop's bit for bit: every op is the same per lane, and a
// last-axis reduction's one accumulator of 16 lanes holds the ymm loop's
// two of eight (lanes 8–15 the second copy's), split into them after the
// loop for the row's end (innerZmm).
func (pg *phaseGen) zmmOK(fp *fastPlan) bool {
	if !pg.g.avx512 || pg.last%(2*lane) != 0 || fp.prefix > 0 {
		return false
	}
	for i, n := range pg.nodes {
		if !fp.live[i] {
			continue
		}
		if f64Phase(n) {
			return false // eight f64 lanes are a zmm register already (f64.go)
		}
		switch n.op {
		case opUniform, opIntVec:
		case opLoad, opMatRead:
			if len(fp.args(n)) != 0 || n.pat.elast != 0 && n.pat.elast != 1 {
				return false
			}
		case opStore:
			if len(fp.args(n)) != 1 || n.pat.elast != 1 {
				return false
			}
		case opMatWrite:
			if n.pat.elast != 1 {
				return false
			}
		case opReduce:
			if n.v.Type.DType == tile.I32 {
				return false // reduceI32: ymm only
			}
		case opCompute:
			if !zmmOp(n.v) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// zmmOp reports whether v's op has its zmm form in ops.go (through vec.go).
func zmmOp(v *tile.Value) bool {
	if v.Type.DType == tile.I32 {
		return false // ints.go: i32 data blocks in ymm only
	}
	switch v.Op {
	case tile.OpAdd, tile.OpSub, tile.OpMul, tile.OpDiv, tile.OpMin, tile.OpMax,
		tile.OpNeg, tile.OpAbs, tile.OpSqrt, tile.OpFloor, tile.OpCeil,
		tile.OpExp, tile.OpTanh, tile.OpLog, tile.OpRsqrt, tile.OpSelect,
		tile.OpSigmoid, tile.OpLog1p, tile.OpExpm1, tile.OpErf, tile.OpLog2, tile.OpExp2, tile.OpSign,
		tile.OpSin, tile.OpCos, tile.OpPow,
		tile.OpEq, tile.OpNe, tile.OpLt, tile.OpLe, tile.OpGt, tile.OpGe,
		tile.OpAnd, tile.OpOr, tile.OpXor, tile.OpNot:
		return true
	case tile.OpCast:
		from, to := v.Args[0].Type.DType, v.Type.DType
		return to == tile.F32 && (from == tile.I1 || from == tile.I32) || to == tile.I1 && from == tile.F32
	}
	return false
}

// useSum32 (TILEFUSE_NATIVE_SUM32=1 at start-up; SetSum32 in tests), an
// experiment for measuring, off by default: a paired zmm loop's row sums
// add the second vector of each pair into an accumulator of its own (the
// register nanOf gives, free in a sum), the two added after the loop: 32
// partial sums s[i mod 32], then s[j] + s[j+16], where the executor and
// every other loop keep sixteen (codegen/cpu: sumRow32). The sums' chains
// are half as long (the LayerNorm's two row sums are chains of 64
// dependent adds a row of 1024), but the results are no longer the
// executor's, nor the ymm loop's, bit for bit: within the sums' stated
// tolerance of the reference only (TestSum32Native). For measuring what the
// executor's order costs on a host before changing it everywhere.
var useSum32 atomic.Bool

func init() { useSum32.Store(os.Getenv("TILEFUSE_NATIVE_SUM32") == "1") }

// divSetup computes, before a zmm loop's row, for each f32 division by a
// uniform b in the loop (where useDivFMA is on) the frame splats divFMA
// reads: y = RN(1/b), and the least |dividend| its corrections take: 2^-100
// where 2^-20 ≤ |b| ≤ 2^20, else +Inf (every vector then divides).
// Y0–Y2 are free before the loop.
func (pg *phaseGen) divSetup() {
	g := pg.g
	if !useDivFMA.Load() {
		return
	}
	a := &g.a
	for i, n := range pg.nodes {
		if !pg.fast.live[i] || n.op != opCompute || n.v.Op != tile.OpDiv || isF64(n) || n.args[1].op != opUniform {
			continue
		}
		if pg.divSlots == nil {
			pg.divSlots = map[*tile.Value][2]int32{}
		}
		sl, ok := pg.divSlots[n.v]
		if !ok {
			sl = [2]int32{g.alloc(32, 32), g.alloc(32, 32)}
			pg.divSlots[n.v] = sl
			g.p.divFMAs++
		}
		if g.divRcp == nil {
			g.divRcp = map[*tile.Value][2]int32{}
		}
		g.divRcp[n.v] = sl
		a.VBROADCASTSS(0, n.args[1].mem)
		a.VMOVUPS(1, g.constF32(1))
		a.VDIVPS(1, 1, amd64.VReg(0))
		a.VMOVUPSstore(fr(sl[0]), 1)
		a.VANDPS(0, 0, g.constVec(0x7fffffff))
		a.VCMPPS(1, 0, g.constF32(0x1p-20), amd64.CmpGE)
		a.VCMPPS(2, 0, g.constF32(0x1p20), amd64.CmpLE)
		a.VANDPS(1, 1, amd64.VReg(2))
		a.VMOVUPS(2, g.constF32(float32(math.Inf(1))))
		a.VBLENDVPS(2, 2, g.constF32(0x1p-100), 1)
		a.VMOVUPSstore(fr(sl[1]), 2)
	}
}

// kNaNs gathers, in a paired zmm loop that only detects NaNs
// (nanDetectOK), the lanes where either vector of a pair was NaN: pairs
// use K1–K6 (vec.go: newK), so K7 is free there.
const kNaNs amd64.KReg = 7

// noNaNDetect turns the NaN-detecting max loops off (tests: export_test.go).
var noNaNDetect atomic.Bool

// nanDetectOK reports whether the phase's paired zmm loop can run its row
// max and min without tracking NaNs, detecting them only (one compare of
// the pair's two vectors a pair, its lanes ORed into kNaNs), and run the
// row again tracking them where it saw one: every last-axis reduction a
// max or min (in registers: pairOK), and nothing in the loop that a second
// run would do twice (stores, frame blocks written).
func (pg *phaseGen) nanDetectOK() bool {
	if noNaNDetect.Load() || len(pg.reds) == 0 {
		return false
	}
	for _, r := range pg.reds {
		if r.v.Op != tile.OpReduceMax && r.v.Op != tile.OpReduceMin || r.axis != r.v.Args[0].Type.Shape.Rank-1 || r.inMem {
			return false
		}
	}
	for i, n := range pg.nodes {
		if pg.fast.live[i] && (n.op == opStore || n.op == opMatWrite) {
			return false
		}
	}
	return true
}

// noZmmPairs turns the paired zmm bodies off (tests: export_test.go).
var noZmmPairs atomic.Bool

// pairOK reports whether the zmm loop's two vectors of 16 lanes can be
// emitted as one body whose every instruction is written twice, once for
// each (vec.go: each; registers Z0–Z15 and Z16–Z31, opmasks K1–K3 and
// K4–K6, whole vectors in memory 64 bytes apart), rather than as two
// bodies one after the other: the two vectors' dependency chains (exp's,
// tanh's) then run side by side. Every node of the unmasked loop but
// i32 lanes (their VEX move from a general register reaches Z0–Z15
// only), rsqrt (its own zmm sequence), reductions along axis 0 and
// reductions in the frame; last-axis reductions in registers add the two
// vectors in turn into their one accumulator, as two bodies do.
func (pg *phaseGen) pairOK() bool {
	fp := pg.fast
	if noZmmPairs.Load() || fp == nil {
		return false
	}
	for i, n := range pg.nodes {
		if !fp.live[i] {
			continue
		}
		switch {
		case n.op == opIntVec:
			return false
		case n.op == opCompute && n.v.Op == tile.OpRsqrt:
			return false
		}
	}
	for _, r := range pg.reds {
		if r.inMem || r.axis != r.v.Args[0].Type.Shape.Rank-1 {
			return false
		}
	}
	return true
}

// innerZmm is the unmasked loop over a row's vectors in zmm registers:
// body copies of 16 lanes (two where the row has a multiple of 32), the
// last-axis reductions in one zmm accumulator each (the register of the
// ymm loop's first), whose upper half goes to the second's after the loop.
func (pg *phaseGen) innerZmm() error {
	g := pg.g
	a := &g.a
	if !pg.zmmCounted { // a phase may have two unmasked loops: once
		pg.zmmCounted = true
		g.p.zmmPhases++
	}
	// last-axis reductions in registers (in the frame: rowStart set both halves)
	last := func(r *redState) bool { return r.axis == r.v.Args[0].Type.Shape.Rank-1 && !r.inMem }
	const zl = 2 * lane // f32 lanes of a zmm register
	copies, step := 1, zl
	if pg.last%(2*zl) == 0 {
		copies, step = 2, 2*zl
	}
	pairs := copies == 2 && pg.pairOK()
	if pairs { // one body, each instruction for both vectors (vec.go: each)
		copies = 1
		g.p.pairLoops++
	}
	sum32 := false
	if pairs && useSum32.Load() {
		for _, r := range pg.reds {
			if last(r) && r.v.Op == tile.OpReduceSum {
				sum32 = true
				g.p.sum32Loops++
			}
		}
	}
	// loop emits the loop over the row, its accumulators set first; with
	// detect, its max and min only detect NaNs (nanDetectOK)
	loop := func(detect bool) error {
		for _, r := range pg.reds {
			if last(r) {
				a.VBROADCASTSSZ(amd64.ZReg(r.acc[0]), pg.redInit(r))
				if r.v.Op != tile.OpReduceSum && !detect || sum32 { // no NaN yet (maxStepZ)
					a.VBROADCASTSSZ(nanOf(r.acc[0]), pg.redInit(r))
				}
			}
		}
		if detect {
			a.KXORW(kNaNs, kNaNs, kNaNs)
		}
		pg.divSetup()
		pg.pinned = pg.pinUniforms()
		for u, r := range pg.pinned {
			a.VBROADCASTSSZ(amd64.ZReg(r), u.mem)
			if pairs {
				a.VBROADCASTSSZ(amd64.ZReg(r+16), u.mem)
			}
			g.p.pins++
		}
		defer func() { pg.unpin(pg.pinned); pg.pinned = nil }()
		a.XORL(rJ, rJ)
		top := a.NewLabel()
		if pg.last > step {
			a.Bind(top)
		}
		g.zmm, g.zpair, g.sum32, g.nanDetect = true, pairs, sum32, detect
		defer func() { g.zmm, g.zpair, g.sum32, g.nanDetect, g.divRcp = false, false, false, false, nil }()
		for c := 0; c < copies; c++ {
			pg.off = c * zl
			if err := pg.body(c); err != nil {
				return err
			}
		}
		if g.zmmBad != "" {
			return fmt.Errorf("native: %s in a zmm loop (a node zmmOK should decline)", g.zmmBad)
		}
		if pg.last > step {
			a.ADDQimm(rJ, int32(step))
			a.CMPQimm(rJ, int32(pg.last))
			a.Jcc(amd64.CondL, top)
		}
		return nil
	}
	end := a.NewLabel()
	if pairs && pg.nanDetectOK() {
		// rows without a NaN (the max's NaN tracking, a compare and a
		// blend a vector, left out: bit for bit the scan's result where
		// there is none); a row with one runs the loop again, tracking
		g.p.nanDetects++
		if err := loop(true); err != nil {
			return err
		}
		a.KORTESTW(kNaNs, kNaNs)
		a.Jcc(amd64.CondE, end) // none: the loop's accumulators are the scan's
	}
	if err := loop(false); err != nil {
		return err
	}
	for _, r := range pg.reds {
		if last(r) {
			if r.v.Op != tile.OpReduceSum {
				g.nanFold(r.acc[0])
			} else if sum32 {
				a.VADDPSZ(amd64.ZReg(r.acc[0]), amd64.ZReg(r.acc[0]), nanOf(r.acc[0]))
			}
		}
	}
	a.Bind(end)
	for _, r := range pg.reds {
		if last(r) {
			a.VEXTRACTF64X4Z(amd64.ZReg(r.acc[1]), amd64.ZReg(r.acc[0]), 1)
		}
	}
	return a.Err()
}
