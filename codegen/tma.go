package codegen

import (
	"fmt"
	"strings"

	"github.com/tilefuse/tilefuse/tile"
)

// Tensor copies (TMA, cp.async.bulk.tensor) of the swapped form's A
// (meta-parameter tma = 1, sm_90a, TF32 without a pass over the copies, not
// warp-specialised; 3xTF32 in its one-block loop; bf16 (by default at
// tiles of tmaBF16Rows rows or more), its conversion pass waiting on the
// stage's full mbarrier before it reads the f32 tile, then the proxy fence
// and the barrier, B's tiles staying cp.async: its fragments are read in
// pairs of k rows).
//
// Each stage's A tile, [BLOCK_M rows][BLOCK_K = 32 floats] K-major with the
// 128-byte swizzle that the wgmma descriptor reads, is exactly a box of a
// two-dimensional tensor map in the 128-byte swizzle: so instead of every
// thread issuing its share of 16-byte cp.async copies (8 a thread at
// 256×128 on 8 warps) and their addresses, thread 0 issues one tensor copy
// a stage, completing on a full mbarrier of that stage, on which every
// thread waits before the iteration's wgmmas read the stage. Where B's
// load suits them its tile is a tensor copy too (tmaB, below), and the
// loop then needs no barrier (empty mbarriers); otherwise B's copies stay
// cp.async (its fragments are read by ld.shared, after the iteration's
// barrier as before), and so does the barrier, which also keeps a stage
// from being rewritten before every warp retired the wgmmas that read it
// (the copies of iteration i+stages-2 are issued after iteration i's
// barrier, as ahead says).
//
// The tensor map is a kernel parameter after the tile kernel's own
// (Kernel.TensorMaps), 128 bytes aligned to 64, which the launcher encodes
// for the argument at each launch. Its tensor has rows of lda elements (the
// load's row stride) and as many rows as the argument's buffer holds, so
// that a box is read exactly where the load would read it and never filled
// with zeros: the plan takes only loads without a mask whose element
// offsets are offs = r·lda + c (r, c: the value coordinates plus a scalar
// origin), lda a multiple of BLOCK_K (so of 4: 16-byte row strides) and the
// origin's offset known divisible by BLOCK_K (a box never crosses the end
// of a row); or loads masked by their rows' bound alone (tmaMask), on a
// map of that many rows, and by K's bound too (unless tma_k = 0), on a map
// of K columns (rows then need only be 16-byte aligned). Other masks keep
// cp.async: a map's bounds would have to be the mask's. The box's coordinates are the origin's element
// offset from the parameter split by lda, so the form takes a load to read
// at or after its parameter's address, as every kernel graphpass writes
// does (a tile kernel that indexes before its pointer argument keeps
// cp.async with tma = 0).

// tmaDefaultRows: tensor copies of A by default (without the
// meta-parameter tma: tma = 0 keeps cp.async, tma = 1 asks for them) in
// swapped loops of tiles of this many rows (BLOCK_M), where they apply.
// The H200, 2026-12-03 (r18d, B rounded by cvt.rn; `tilefuse peer
// -precision tf32 -tune 'tma=1'` in one call), TFLOP/s cp.async → tensor
// copies: at 256 rows 4096³ 318.5 → 323.7, A·Bᵀ 4096³ 320.2 → 329.1,
// gelu(x·W+b) 301.5 → 305.1, the BERT layer's 4096×3072×768 269.4 → 272.2
// and with gelu 216.1 → 221.7, A·Bᵀ 4096×3072×768 275.1 → 269.8; at 192
// rows (the BERT layer's 768-wide products) −2.6% to +1.4%, so not there.
const tmaDefaultRows = 256

// tmaBF16Rows: bf16's A by tensor copies by default at tiles of at least
// this many rows (tma = 0 keeps cp.async; smaller tiles unmeasured). Its
// conversion pass waits for them (the loop keeps its barrier; B stays
// cp.async). The H200, 2026-12-06 (r42d, `tilefuse peer -precision bf16
// -tune tma=1` beside the default in one process, twice, TFLOP/s):
// 4096³ 322.1, 321.6 → 336.3, 346.8; gelu(x·W+b) 310.6, 311.2 → 335.9,
// 334.4; the BERT layer's 4096×3072×768 (256 rows) 258.8, 257.0 → 275.6,
// 276.2, 4096×768×3072 (192 rows) 268.3, 267.2 → 291.2, 292.7, A·Bᵀ
// 4096×768×3072 270.8, 270.7 → 291.1, 291.7; 4096×4096×4100 without
// graphpass's copy of A (TILEFUSE_PAD=0) 248.4, 247.8 → 310.8, 314.5
// against 292.2, 289.2 with it; memcheck 0 errors.
const tmaBF16Rows = 192

// tmaK reports whether tensor copies may bound K (meta-parameter tma_k:
// absent or 1; 0 keeps cp.async for loops masked along K). An H100
// (2026-12-06, r41b, `tilefuse peer -tune tma_k=1` without graphpass's
// copies, TILEFUSE_PAD=0, against the A copy graphpass made for such
// rows), TFLOP/s: 4096×4096×4100 TF32 294.3, 294.1 (copied) / 266.9
// (cp.async) → 308.8, 308.9, 3xTF32 105.5, 100.6 / 94.5 → 109.5, 109.4;
// 4096×1024×784 TF32 252.1 → 255.2, 3xTF32 90.5 → 101.3 (cuBLAS TF32
// 316.4 and 149.7 in the same call); memcheck 0 errors at both.
func tmaK(m tile.Meta) bool {
	v, ok := m["tma_k"]
	return !ok || v != 0
}

// TensorMap describes a kernel parameter that follows the tile kernel's
// own ones: a CUtensorMap (128 bytes, 64-byte aligned, passed by value)
// that the launcher encodes at each launch for the tensor at pointer
// parameter Param — rows of Inner elements of ElemBytes bytes one after
// another (the row stride Inner·ElemBytes, a multiple of 16), as many rows
// as the argument's buffer holds (Rows) — copied in boxes of Box[0]
// elements by Box[1] rows with the given Swizzle (bytes: 0, 32, 64, 128)
// into shared memory.
type TensorMap struct {
	Param     int
	ElemBytes int
	Inner     int64
	// Rows: the tensor's rows, outside which a box reads zeros (the
	// load's mask); 0: as many as the argument holds (RowsIn)
	Rows int64
	// Cols: the tensor's columns, past which a box reads zeros (the
	// load's mask along K: rows of Inner elements of which the first Cols
	// are the operand's); 0: Inner
	Cols    int64
	Box     [2]int
	Swizzle int
	// Paired (B's tensor copies, tmaB): the map is four-dimensional.
	// Each row's elements are taken in groups of 64 (Inner and Box[0]
	// multiples of 64), each group as two boxes of 32 elements (128
	// bytes, Swizzle 128) whose rows interleave in shared memory: a box
	// of Box[0] columns by Box[1] rows lands as [Box[0]/64][Box[1]][2][32],
	// so that row r of a group's half h is the 128-byte line 2r+h of the
	// group and the swizzle's phase is (2r+h) mod 8 (tmaBOffset).
	Paired bool
	// Groups32 (bf16's B, tmaB at bf16): the map is three-dimensional,
	// each row's elements in groups of 32 (Inner and Box[0] multiples of
	// 32), a group's box landing whole: a box of Box[0] columns by Box[1]
	// rows lands as [Box[0]/32][Box[1]][32], row r of group g the 128-byte
	// line g·Box[1] + r, the swizzle's phase r mod 8 (tmaBF16Offset).
	Groups32 bool
}

// Shape is the map's encoding for an argument of bytes bytes, as
// cuTensorMapEncodeTiled takes it: the extents in elements (the first
// contiguous), the strides in bytes of the dimensions after the first,
// the box's extents.
func (m TensorMap) Shape(bytes int64) (dims, strides []uint64, box []uint32, err error) {
	rows, err := m.RowsIn(bytes)
	if err != nil {
		return nil, nil, nil, err
	}
	row := uint64(m.Inner) * uint64(m.ElemBytes)
	if m.Groups32 {
		if m.Inner%32 != 0 || m.Box[0]%32 != 0 || m.Paired {
			return nil, nil, nil, fmt.Errorf("%v: rows or boxes not whole groups of 32 elements", m)
		}
		return []uint64{32, uint64(rows), uint64(m.Inner / 32)}, []uint64{row, 32 * uint64(m.ElemBytes)},
			[]uint32{32, uint32(m.Box[1]), uint32(m.Box[0] / 32)}, nil
	}
	if !m.Paired {
		cols := uint64(m.Inner)
		if m.Cols > 0 {
			cols = uint64(min(m.Cols, m.Inner))
		}
		return []uint64{cols, uint64(rows)}, []uint64{row}, []uint32{uint32(m.Box[0]), uint32(m.Box[1])}, nil
	}
	if m.Inner%64 != 0 || m.Box[0]%64 != 0 {
		return nil, nil, nil, fmt.Errorf("%v: rows or boxes not whole groups of 64 elements", m)
	}
	e := uint64(m.ElemBytes)
	return []uint64{32, 2, uint64(rows), uint64(m.Inner / 64)}, []uint64{32 * e, row, 64 * e},
		[]uint32{32, 2, uint32(m.Box[1]), uint32(m.Box[0] / 64)}, nil
}

// RowsIn is the tensor's number of rows for an argument of bytes bytes:
// Rows where set (an error where the argument ends before the last row
// starts), else as many as it holds, rounded up (its last row may end
// before the buffer does: a view of fewer columns than the stride; the
// boxes read only what the kernel's load read).
func (m TensorMap) RowsIn(bytes int64) (int64, error) {
	row := m.Inner * int64(m.ElemBytes)
	if m.Rows > 0 {
		if (m.Rows-1)*row >= bytes {
			return 0, fmt.Errorf("%v: an argument of %d bytes", m, bytes)
		}
		return m.Rows, nil
	}
	return (bytes + row - 1) / row, nil
}

func (m TensorMap) String() string {
	rows := "as many as the argument holds"
	if m.Rows > 0 {
		rows = fmt.Sprint(m.Rows)
	}
	paired := ""
	if m.Paired {
		paired = ", columns in interleaved pairs of 32"
	}
	if m.Groups32 {
		paired = ", columns in groups of 32"
	}
	if m.Cols > 0 {
		paired += fmt.Sprintf(", the first %d columns", m.Cols)
	}
	return fmt.Sprintf("tensor map of parameter %d: rows of %d x %d B (%s), boxes %d x %d, %d-byte swizzle%s", m.Param, m.Inner, m.ElemBytes, rows, m.Box[0], m.Box[1], m.Swizzle, paired)
}

// tmaParamName is the PTX name of tensor map i's parameter.
func tmaParamName(i int) string { return fmt.Sprintf("tmap_%d", i) }

// tmaCopy is the plan of A's tensor copies in a swapped loop.
type tmaCopy struct {
	param *tile.Value // the kernel parameter A's pointer is based on
	offs  *tile.Value // the load's element offsets from it, [m, k]
	lda   int64
	rows  int64 // the tensor's rows where A's mask bounds them (0: as many as the argument holds)
	cols  int64 // its columns where the mask bounds K (0: lda)
	index int   // its Kernel.TensorMaps index
	// groups32: B's copy at bf16, its columns in groups of 32
	// (TensorMap.Groups32), not the interleaved pairs of TF32's
	groups32 bool
	// emission: the full mbarriers' base address, the producer's (thread
	// 0's) barrier of stage sp and the consumers' of stage sc
	bars, fp, fc string
	// cluster (pipe.cluster): the CTA's rank in its cluster and its
	// peer's, the rank's first row of A's tile and its bytes into the
	// tile, the multicast's mask of CTAs (16 bits); the producer's round
	// parity of the empty mbarriers (1 in the first round: a fresh
	// mbarrier's phase before its first counts as complete) and whether
	// the consumers have run an iteration (from the second on, each
	// releases the one before)
	rank, peer, halfRows, halfBytes, mask, eph, used string
	// issuer: the predicate of the thread that issues the copies (""
	// for thread 0: tmaThread; the producer warp's first with ws = 2)
	issuer string
}

// tmaPlan returns the plan of A's tensor copies in swapped loop p, or nil
// with the reason they do not apply.
func (l *lowerer) tmaPlan(p *pipe) (*tmaCopy, string) {
	ld := p.loads[0]
	param, offs, a, why := l.rowsOfParam(ld, "A", "r·lda + c")
	if why != "" {
		return nil, why
	}
	lda, bk := a.Coef[0], int64(p.k)
	if lda >= 1<<31 || p.m > 256 {
		return nil, "A's rows or tile out of a tensor map's range"
	}
	t := &tmaCopy{param: param, offs: offs, lda: lda}
	if len(ld.Args) == 1 {
		switch {
		case lda%bk != 0:
			return nil, fmt.Sprintf("A's rows (%d) not a multiple of BLOCK_K", lda)
		case a.Div%bk != 0:
			return nil, fmt.Sprintf("A's origin (divisible by %d) not a multiple of BLOCK_K", a.Div)
		}
		return t, ""
	}
	rows, cols, why := l.tmaMask(p, ld, lda)
	switch {
	case why != "":
		return nil, why
	case cols > 0 && !tmaK(l.k.Meta):
		return nil, "A's mask bounds K (tma_k = 0: no map of K columns)"
	case lda%bk != 0 && cols == 0:
		return nil, fmt.Sprintf("A's rows (%d) not a multiple of BLOCK_K", lda)
	case lda%4 != 0:
		return nil, fmt.Sprintf("A's rows (%d) not 16-byte aligned", lda)
	}
	t.rows, t.cols = rows, cols
	return t, ""
}

// rowsOfParam returns, for a load of a 2-D tile (its operand named what),
// the kernel parameter its pointer is based on, the element offsets from
// it and their affine form ld·row + col (form names it in the reason),
// or why the load does not read such rows.
func (l *lowerer) rowsOfParam(ld *tile.Value, what, form string) (param, offs *tile.Value, a *affine, why string) {
	ptr := ld.Args[0]
	if ptr.Op != tile.OpAddPtr || ptr.Args[0].Op != tile.OpSplat || ptr.Args[0].Args[0].Op != tile.OpParam {
		return nil, nil, nil, what + "'s pointer is not a parameter plus offsets"
	}
	offs = ptr.Args[1]
	a = l.affineOf(offs, map[*tile.Value]*affine{})
	if a == nil || len(a.Coef) != 2 || a.Coef[1] != 1 || a.Coef[0] <= 0 {
		return nil, nil, nil, what + "'s offsets are not " + form
	}
	return ptr.Args[0].Args[0], offs, a, ""
}

// tmaMask returns M and K where A's load ld, of element offsets offs =
// X·lda + C, is masked by X < M, by C < K or by both (M and K constants, K
// at most lda, X the offsets' rows, masked lanes reading zero; 0 for a
// bound the mask does not have) and C is the loop's induction variable
// plus the columns' range from 0, the loop running from a multiple of
// BLOCK_K ≥ 0 by BLOCK_K to at most lda: then the box at the tensor
// coordinates (C₀, X₀), the offsets' origin split by lda, is filled with
// zeros exactly where the mask leaves lanes out, on a map of M rows of
// lda elements, K of them the tensor's (a box past column K reads no
// memory: rows of lda elements need not be whole BLOCK_K steps then).
func (l *lowerer) tmaMask(p *pipe, ld *tile.Value, lda int64) (rows, cols int64, why string) {
	const masked = "A's mask is not its rows' or K's bound"
	// masked lanes read zero: a pipelined load's other is (pipeable)
	var cmps []*tile.Value
	switch m := stripBroadcast(ld.Args[1]); m.Op {
	case tile.OpAnd:
		cmps = []*tile.Value{stripBroadcast(m.Args[0]), stripBroadcast(m.Args[1])}
	default:
		cmps = []*tile.Value{m}
	}
	offs := p.loads[0].Args[0].Args[1]
	var rowX *tile.Value
	row, iv, colTerms := 0, 0, 0
	for _, term := range sumTerms(offs) {
		switch {
		case term.Op == tile.OpMul && isConstOf(term.Args[1], lda):
			row, rowX = row+1, term.Args[0]
		case term.Op == tile.OpMul && isConstOf(term.Args[0], lda):
			row, rowX = row+1, term.Args[1]
		case stripShape(term) == p.loop.Body.Args[0]:
			iv++
		case isColumnRange(term):
			colTerms++
		default:
			return 0, 0, masked
		}
	}
	if row != 1 || iv != 1 || colTerms != 1 {
		return 0, 0, masked
	}
	for _, cmp := range cmps {
		if cmp.Op != tile.OpLt {
			return 0, 0, masked
		}
		x, bound := cmp.Args[0], stripShape(cmp.Args[1])
		if bound.Op != tile.OpConst || bound.Aux < 1 || bound.Aux > 1<<31 {
			return 0, 0, masked
		}
		switch {
		case x == rowX && rows == 0:
			rows = bound.Aux
		case cols == 0 && bound.Aux <= lda && l.ivPlusColumns(x, p):
			cols = bound.Aux
		default:
			return 0, 0, masked
		}
	}
	lo, hi, step := p.loop.Args[0], p.loop.Args[1], p.loop.Args[2]
	bk := int64(p.k)
	if lo.Op != tile.OpConst || hi.Op != tile.OpConst || step.Op != tile.OpConst ||
		lo.Aux < 0 || lo.Aux%bk != 0 || step.Aux != bk || hi.Aux > lda {
		return 0, 0, "A's loop bounds not known within its rows"
	}
	return rows, cols, ""
}

// ivPlusColumns reports whether x is the loop's induction variable plus
// a range from 0 along the last of two dimensions (A's columns at the
// loop's step).
func (l *lowerer) ivPlusColumns(x *tile.Value, p *pipe) bool {
	iv, cols := 0, 0
	for _, term := range sumTerms(x) {
		switch {
		case stripShape(term) == p.loop.Body.Args[0]:
			iv++
		case isColumnRange(term):
			cols++
		default:
			return false
		}
	}
	return iv == 1 && cols == 1
}

// sumTerms are the terms of v as a sum (through adds and the broadcasts
// and splats of sums), each with its broadcasts stripped.
func sumTerms(v *tile.Value) []*tile.Value {
	v = stripBroadcast(v)
	if v.Op == tile.OpAdd {
		return append(sumTerms(v.Args[0]), sumTerms(v.Args[1])...)
	}
	return []*tile.Value{v}
}

// stripBroadcast is v without the broadcasts over it.
func stripBroadcast(v *tile.Value) *tile.Value {
	for v.Op == tile.OpBroadcast {
		v = v.Args[0]
	}
	return v
}

// stripShape is v without the broadcasts, splats and dimension
// insertions over it.
func stripShape(v *tile.Value) *tile.Value {
	for v.Op == tile.OpBroadcast || v.Op == tile.OpSplat || v.Op == tile.OpExpandDims {
		v = v.Args[0]
	}
	return v
}

// isConstOf reports whether v is the constant c (through its shape).
func isConstOf(v *tile.Value, c int64) bool {
	v = stripShape(v)
	return v.Op == tile.OpConst && v.Aux == c
}

// isColumnRange reports whether v is a range from 0 along the last of two
// dimensions: [1, n] or broadcast, its first dimension inserted.
func isColumnRange(v *tile.Value) bool { return isRange2(v, 0) }

// isRowRange reports whether v is a range from 0 along the first of two
// dimensions: [n, 1] or broadcast, its last dimension inserted.
func isRowRange(v *tile.Value) bool { return isRange2(v, 1) }

// isRange2 reports whether v is a range from 0 made two-dimensional by
// inserting dimension inserted (broadcast or not).
func isRange2(v *tile.Value, inserted int64) bool {
	v = stripBroadcast(v)
	if v.Op != tile.OpExpandDims || v.Aux != inserted || v.Type.Shape.Rank != 2 {
		return false
	}
	r := v.Args[0]
	return r.Op == tile.OpArange && r.Aux == 0
}

// Clusters (meta-parameter cluster = 2, with A's tensor copies): CTAs
// whose programs differ only along program axis 1 compute output tiles of
// the same rows, so they read the same tile of A at every K step. With
// .reqnctapercluster 1, 2, 1 two such CTAs run at once on two SMs of a
// GPC, and each copies half of every stage's A tile (its rank's rows)
// with one tensor copy multicast to both CTAs' shared memory, completing
// on both CTAs' full mbarrier of the stage: every CTA reads half as much
// of A from L2 (A is 32 of a stage's 48 KiB at 256×128×32 in TF32).
//
// A stage's slot may be rewritten only once both CTAs are done with it,
// so each stage also has an empty mbarrier of 2·NumWarps arrivals: after
// an iteration's wgmma.wait_group 1 has retired the iteration before,
// lane 0 of every warp arrives on its own CTA's empty mbarrier of that
// stage and, through mapa, on the peer's (clusterRelease), and thread 0
// waits on its own before issuing its half into the slot (clusterWait) —
// an iteration later, the copies running stages-2 ahead, so the releases
// have an iteration's time to arrive. The first round of slots, never
// read, waits on the phase before the first, which a fresh mbarrier
// counts as complete. The remote arrivals are plain (release at the
// CTA's scope): what they order is the wgmmas' reads, retired by the
// wait, as CUTLASS's cluster barriers do; .release.cluster made every
// warp wait on the fence it implies (the H200: 4096³ 265 against 316
// TFLOP/s). The mbarriers are initialised before a cluster barrier,
// which every CTA passes before either copies into the other, and the
// CTAs pass a second one after the loop, so that neither exits while the
// other may still arrive on its mbarriers.
// Whether the two CTAs read the same tile is the plan's to prove: A's
// offsets, its mask and the loop's bounds must not depend on program axis
// 1 (clusterPlan); the launcher checks that the grid is a multiple of
// the cluster.

// clusterPlan returns the CTAs of pipe p's clusters (meta-parameter
// cluster = c), or 0 with the reason there are none.
func (l *lowerer) clusterPlan(p *pipe, c int) (int, string) {
	switch {
	case c != 2:
		return 0, fmt.Sprintf("cluster = %d: clusters of 2 only", c)
	case p.tma == nil:
		return 0, "A is not copied by tensor copies (tma)"
	case p.tma.cols > 0:
		return 0, "A's tensor map bounds K (not measured with clusters)"
	case p.m%16 != 0:
		return 0, fmt.Sprintf("half of A's %d rows is not whole 8-row swizzle atoms", p.m)
	}
	check := []*tile.Value{p.tma.offs, p.loop.Args[0], p.loop.Args[1], p.loop.Args[2]}
	if ld := p.loads[0]; len(ld.Args) > 1 {
		check = append(check, ld.Args[1])
	}
	seen := map[*tile.Value]bool{}
	for _, v := range check {
		if why := l.notUniformOver(v, 1, p.loop, seen); why != "" {
			return 0, why
		}
	}
	return c, ""
}

// notUniformOver says why v may differ between programs that differ only
// along program axis ax ("" where it cannot): it reads that program id,
// or a loop-carried value or another loop's argument (the induction
// variable of loop is the same in every program where its bounds are).
func (l *lowerer) notUniformOver(v *tile.Value, ax int64, loop *tile.Value, seen map[*tile.Value]bool) string {
	if seen[v] {
		return ""
	}
	seen[v] = true
	switch {
	case v.Op == tile.OpProgramID && v.Aux == ax:
		return fmt.Sprintf("A's tile or the K loop's bounds depend on program axis %d: the cluster's CTAs would read different tiles", ax)
	case v.Op == tile.OpBlockArg && (v.Aux != 0 || v != loop.Body.Args[0]):
		return "A's offsets depend on a loop-carried value"
	case v.Op == tile.OpLoad:
		return "A's offsets depend on a load"
	}
	for _, a := range v.Args {
		if why := l.notUniformOver(a, ax, loop, seen); why != "" {
			return why
		}
	}
	return ""
}

// tmaStart reserves and initialises the full mbarriers of p's stages
// (thread 0, an arrival each: its expect_tx) and declares the tensor map;
// every thread's earlier accesses to shared memory are ordered before the
// tensor copies (which write through the async proxy) by a proxy fence and
// a barrier.
func (l *lowerer) tmaStart(p *pipe) {
	w := &l.body
	t := p.tma
	l.tmaMaps(p)
	t.bars = l.reg("r")
	nbars := p.stages
	if p.cluster > 0 || p.noBar {
		nbars *= 2 // the empty mbarriers after the full ones
	}
	emit(w, "add.s32 %s, %s, %d", t.bars, l.baseAddr(), l.ownRegion(8*nbars))
	first := l.tmaThread()
	emit(w, "fence.proxy.async.shared::cta")
	for s := range p.stages {
		emit(w, "@%s mbarrier.init.shared::cta.b64 [%s+%d], 1", first, t.bars, 8*s)
	}
	if p.cluster > 0 || p.noBar {
		// the empty mbarriers: lane 0 of each warp of both CTAs releases
		// a stage (clusterRelease), or every thread (tmaRelease)
		n := p.cluster * l.opt.NumWarps
		if p.noBar {
			n = 32 * l.opt.NumWarps
		}
		for s := range p.stages {
			emit(w, "@%s mbarrier.init.shared::cta.b64 [%s+%d], %d", first, t.bars, 8*(p.stages+s), n)
		}
	}
	emit(w, "fence.mbarrier_init.release.cluster")
	if p.cluster > 0 || p.noBar {
		// the producer's round parity of the empty mbarriers (1 in the
		// first round: a fresh mbarrier's phase before its first counts
		// as complete) and whether the consumers have run an iteration
		t.eph, t.used = l.reg("r"), l.reg("p")
		emit(w, "mov.u32 %s, 1", t.eph)
		emit(w, "setp.ne.u32 %s, 0, 0", t.used)
	}
	if p.cluster > 0 {
		box := p.m / p.cluster // each CTA's share of the rows
		l.cluster = [3]int{1, p.cluster, 1}
		l.clusterBarrier()
		t.rank, t.peer, t.halfRows, t.halfBytes = l.reg("r"), l.reg("r"), l.reg("r"), l.reg("r")
		emit(w, "mov.u32 %s, %%cluster_ctarank", t.rank)
		emit(w, "xor.b32 %s, %s, 1", t.peer, t.rank)
		emit(w, "mul.lo.u32 %s, %s, %d", t.halfRows, t.rank, box)
		emit(w, "mul.lo.u32 %s, %s, %d", t.halfBytes, t.rank, 4*box*p.k)
		t.mask = l.reg("h")
		emit(w, "mov.b16 %s, %d", t.mask, 1<<p.cluster-1)
	} else {
		l.barrier(w)
	}
	t.fp, t.fc = l.reg("r"), l.reg("r")
	emit(w, "mov.u32 %s, %s", t.fp, t.bars)
	emit(w, "mov.u32 %s, %s", t.fc, t.bars)
}

// tmaMaps declares the tensor maps of p's copies (A's, and B's where
// p.tmaB) as kernel parameters.
func (l *lowerer) tmaMaps(p *pipe) {
	t := p.tma
	t.index = len(l.tmaps)
	box := p.m
	if p.cluster > 0 {
		box = p.m / p.cluster // each CTA's share of the rows
	}
	l.tmaps = append(l.tmaps, TensorMap{Param: int(t.param.Aux), ElemBytes: 4, Inner: t.lda, Rows: t.rows, Cols: t.cols, Box: [2]int{p.k, box}, Swizzle: 128})
	if b := p.tmaB; b != nil {
		b.index = len(l.tmaps)
		l.tmaps = append(l.tmaps, TensorMap{Param: int(b.param.Aux), ElemBytes: 4, Inner: b.lda, Rows: b.rows, Box: [2]int{p.n, p.k}, Swizzle: 128, Paired: !b.groups32, Groups32: b.groups32})
	}
}

// tmaThread is a predicate true in thread 0, which issues the tensor copies.
func (l *lowerer) tmaThread() string {
	return l.geo("tma|first", func(w *strings.Builder) string {
		q := l.reg("p")
		emit(w, "setp.eq.u32 %s, %s, 0", q, l.tid())
		return q
	})
}

// boxOrigin emits the row and column (elements) of the box whose element
// offsets from the parameter offs holds in layout lay, rows ld apart: the
// offset at the value coordinates (0, 0), thread 0's first slot less its
// coordinates, split by ld.
func (l *lowerer) boxOrigin(offs *lval, lay *Layout, ld int64) (row, col string) {
	w := &l.body
	s := lay.B.slots()[0]
	c := lay.B.coordOf(0, 0, s)
	var vc [2]int64
	for i, d := range lay.Src {
		if d >= 0 {
			vc[i] = int64(c[d])
		}
	}
	q, r0, c0 := l.reg("r"), l.reg("r"), l.reg("r")
	emit(w, "sub.s32 %s, %s, %d", q, offs.regs[0], ld*vc[0]+vc[1])
	emit(w, "div.u32 %s, %s, %d", r0, q, ld)
	emit(w, "mul.lo.u32 %s, %s, %d", c0, r0, ld)
	emit(w, "sub.u32 %s, %s, %s", c0, q, c0)
	return r0, c0
}

// tmaIssue emits thread 0's tensor copy of A's tile of the iteration whose
// offsets offs holds (in layout lay) into the stage at byte offset sp,
// where live: an expect_tx of the tile's bytes on the stage's full barrier
// (t.fp) and the copy completing on it. With B's tensor copies (p.tmaB)
// B's tile of the iteration (offsets bOffs in layout bLay) is copied too,
// onto the same barrier.
func (l *lowerer) tmaIssue(p *pipe, offs *lval, lay *Layout, bOffs *lval, bLay *Layout, sp, live string) {
	w := &l.body
	t := p.tma
	skip := l.label("tma_skip")
	issuer := t.issuer
	if issuer == "" {
		issuer = l.tmaThread()
	}
	emit(w, "@!%s bra %s", issuer, skip)
	m0, k0 := l.boxOrigin(offs, lay, t.lda)
	dst := l.reg("r")
	emit(w, "add.s32 %s, %s, %s", dst, l.smemAddr(), sp)
	if p.a.Off != 0 {
		emit(w, "add.s32 %s, %s, %d", dst, dst, p.a.Off)
	}
	if p.cluster > 0 || p.noBar {
		l.clusterWait(p, live)
	}
	if p.cluster > 0 {
		emit(w, "add.u32 %s, %s, %s", m0, m0, t.halfRows)
		emit(w, "add.s32 %s, %s, %s", dst, dst, t.halfBytes)
	}
	tx := 4 * p.m * p.k
	if p.tmaB != nil {
		tx += 4 * p.k * p.n
	}
	emit(w, "@%s mbarrier.arrive.expect_tx.shared::cta.b64 _, [%s], %d", live, t.fp, tx)
	if b := p.tmaB; b != nil {
		kb, nb := l.boxOrigin(bOffs, bLay, b.lda)
		group := 6 // the column group: 64 columns, or 32 at bf16
		if b.groups32 {
			group = 5
		}
		emit(w, "shr.u32 %s, %s, %d", nb, nb, group)
		bdst := l.reg("r")
		emit(w, "add.s32 %s, %s, %d", bdst, dst, p.b.Off-p.a.Off)
		if b.groups32 {
			emit(w, "@%s cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%s], [%s, {0, %s, %s}], [%s]",
				live, bdst, l.tmaMap(b.index), kb, nb, t.fp)
		} else {
			emit(w, "@%s cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%s], [%s, {0, 0, %s, %s}], [%s]",
				live, bdst, l.tmaMap(b.index), kb, nb, t.fp)
		}
	}
	if p.cluster > 0 {
		emit(w, "@%s cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%s], [%s, {%s, %s}], [%s], %s",
			live, dst, l.tmaMap(t.index), k0, m0, t.fp, t.mask)
	} else {
		emit(w, "@%s cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%s], [%s, {%s, %s}], [%s]",
			live, dst, l.tmaMap(t.index), k0, m0, t.fp)
	}
	w.WriteString(skip + ":\n")
}

// clusterWait emits thread 0's wait, before its copy into the stage at
// t.fp (where live), for the release of the slot's last iteration by every
// warp of both CTAs (clusterRelease), the round before this one.
func (l *lowerer) clusterWait(p *pipe, live string) {
	w := &l.body
	t := p.tma
	e := l.reg("r")
	emit(w, "add.s32 %s, %s, %d", e, t.fp, 8*p.stages)
	done := l.label("tma_released")
	emit(w, "@!%s bra %s", live, done)
	again := l.label("tma_empty")
	w.WriteString(again + ":\n")
	q := l.reg("p")
	emit(w, "mbarrier.try_wait.parity.shared::cta.b64 %s, [%s], %s", q, e, t.eph)
	emit(w, "@!%s bra %s", q, again)
	w.WriteString(done + ":\n")
}

// tmaRelease emits, after an iteration's wgmma.wait_group 1 (which
// retired the iteration before it), every thread's release of that
// iteration's stage on its empty mbarrier (p.noBar), from the second
// iteration on: the thread's fragment reads of the stage are done and
// the wgmmas that read its A tile retired, so thread 0 may copy into it
// (clusterWait) once every thread has.
func (l *lowerer) tmaRelease(p *pipe) {
	w := &l.body
	t := p.tma
	e := l.prevEmpty(p)
	emit(w, "@%s mbarrier.arrive.shared::cta.b64 _, [%s]", t.used, e)
	emit(w, "setp.eq.u32 %s, 0, 0", t.used) // from the next iteration on
}

// prevEmpty emits the address of the empty mbarrier of the stage before
// the consumers' (t.fc's), the last stage's before the first. (Compared
// as fc = bars, not fc − 8 < bars: where the mbarriers start at shared
// address 0, fc − 8 wraps around.)
func (l *lowerer) prevEmpty(p *pipe) string {
	w := &l.body
	t := p.tma
	e, q := l.reg("r"), l.reg("p")
	emit(w, "sub.s32 %s, %s, 8", e, t.fc)
	emit(w, "setp.eq.u32 %s, %s, %s", q, t.fc, t.bars)
	emit(w, "@%s add.s32 %s, %s, %d", q, e, e, 8*p.stages)
	emit(w, "add.s32 %s, %s, %d", e, e, 8*p.stages)
	return e
}

// clusterRelease emits, after an iteration's wgmma.wait_group 1 (which
// retired the iteration before it), each warp's release of that
// iteration's stage (the one before the consumers' stage at t.fc), from
// the second iteration on: lane 0 arrives on this CTA's empty mbarrier
// of the stage and on the peer's. A slot is rewritten by the copies of
// the iteration after (ahead = stages-2), so the release has an
// iteration's time to reach the other CTA.
func (l *lowerer) clusterRelease(p *pipe) {
	w := &l.body
	t := p.tma
	e := l.prevEmpty(p)
	remote, rel := l.reg("r"), l.reg("p")
	emit(w, "mapa.shared::cluster.u32 %s, %s, %s", remote, e, t.peer)
	emit(w, "setp.eq.u32 %s, %s, 0", rel, l.laneID())
	emit(w, "and.pred %s, %s, %s", rel, rel, t.used)
	emit(w, "@%s mbarrier.arrive.shared::cta.b64 _, [%s]", rel, e)
	emit(w, "@%s mbarrier.arrive.shared::cluster.b64 _, [%s]", rel, remote)
	emit(w, "setp.eq.u32 %s, 0, 0", t.used) // from the next iteration on
}

// clusterAdvance: after the producer's stage offset moved (wrap: it
// wrapped), its empty mbarriers' round parity flips.
func (l *lowerer) clusterAdvance(p *pipe, wrap string) {
	emit(&l.body, "@%s xor.b32 %s, %s, 1", wrap, p.tma.eph, p.tma.eph)
}

// clusterBarrier emits a barrier of every thread of the cluster (release
// and acquire at the cluster's scope).
func (l *lowerer) clusterBarrier() {
	emit(&l.body, "barrier.cluster.arrive.release.aligned")
	emit(&l.body, "barrier.cluster.wait.acquire.aligned")
}

// tmaMap is the generic address of tensor map i's parameter.
func (l *lowerer) tmaMap(i int) string {
	return l.geo(fmt.Sprintf("tma|map%d", i), func(w *strings.Builder) string {
		r := l.reg("rd")
		emit(w, "mov.b64 %s, %s", r, tmaParamName(i))
		emit(w, "cvta.param.u64 %s, %s", r, r)
		return r
	})
}

// tmaAdvance moves barrier register b to the next stage's after the
// stage offset st moved, back to the first where st wrapped (wrap); the
// round parity ph, where not "", flips there.
func (l *lowerer) tmaAdvance(p *pipe, b, wrap, ph string) {
	w := &l.body
	emit(w, "add.s32 %s, %s, 8", b, b)
	emit(w, "@%s mov.u32 %s, %s", wrap, b, p.tma.bars)
	if ph != "" {
		emit(w, "@%s xor.b32 %s, %s, 1", wrap, ph, ph)
	}
}

// B's tensor copies (meta-parameter tma_b = 1 or 2, with A's): each
// stage's B tile, [BLOCK_K][BLOCK_N] with n contiguous in memory, is one
// copy of a four-dimensional view of B (TensorMap.Paired): the columns in
// groups of 64, each group as two 128-byte boxes whose rows interleave, so
// that row k of a group's half h is the group's 128-byte line 2k+h. The
// 128-byte swizzle XORs a line's 16-byte chunk index with its line number
// mod 8, here (2k+h) mod 8; the swapped form's fragment reads (rows k+t of
// columns n+g of a warp's 16, t < 4, g < 8: two chunks of 4 rows) then
// land on eight different chunk pairs, without bank conflicts, where one
// box of BLOCK_N columns (k's line phase 4k mod 8) or 32-column boxes
// without the interleave (phase k mod 8) conflict two ways. ldb, the row
// stride, must be a multiple of 64 (16-byte strides, groups whole) and the
// tile's origin a multiple of 64 columns; only an unmasked B (the map's
// bounds would otherwise have to be the mask's).

// tmaBPlan returns the plan of B's tensor copies in swapped loop p, or
// nil with the reason they do not apply.
func (l *lowerer) tmaBPlan(p *pipe) (*tmaCopy, string) {
	switch {
	case p.tma == nil:
		return nil, "A is not copied by tensor copies (tma)"
	case p.cluster > 0:
		return nil, "not with clusters"
	case p.bT || p.ss || p.rb != nil:
		return nil, "B is not read as a [k][n] tile by ld.shared"
	case p.bss:
		return nil, "B converted into a bf16 tile (b_smem)"
	}
	gw := int64(64) // the map's column groups: interleaved pairs of 32, or 32 at bf16
	if p.bf16() {
		gw = 32
	}
	switch {
	case int64(p.n)%gw != 0 || p.n > 256*64:
		return nil, fmt.Sprintf("BLOCK_N (%d) not a multiple of %d", p.n, gw)
	case p.b.Off%1024 != 0:
		return nil, fmt.Sprintf("B's tile at +%d of a stage is not 1024-aligned", p.b.Off)
	}
	ld := p.loads[1]
	var rows int64
	if len(ld.Args) > 1 {
		if rows = l.tmaBRows(p, ld); rows == 0 || !tmaK(l.k.Meta) {
			return nil, "B's load is masked"
		}
	}
	param, offs, a, why := l.rowsOfParam(ld, "B", "k·ldb + n")
	if why != "" {
		return nil, why
	}
	ldb := a.Coef[0]
	switch {
	case ldb%gw != 0 || ldb >= 1<<31:
		return nil, fmt.Sprintf("B's rows (%d) not a multiple of %d", ldb, gw)
	case a.Div%gw != 0:
		return nil, fmt.Sprintf("B's origin (divisible by %d) not a multiple of %d", a.Div, gw)
	}
	return &tmaCopy{param: param, offs: offs, lda: ldb, rows: rows, groups32: p.bf16()}, ""
}

// tmaBRows returns K where B's load ld is masked by its rows' bound along
// K alone, k < K with k the loop's induction variable plus a range from 0
// along the tile's first dimension (K a constant), the loop running from
// a multiple of BLOCK_K ≥ 0 by BLOCK_K: then a map of K rows fills the
// box with zeros exactly in the rows the mask leaves out; else 0.
func (l *lowerer) tmaBRows(p *pipe, ld *tile.Value) int64 {
	cmp := stripBroadcast(ld.Args[1])
	if cmp.Op != tile.OpLt {
		return 0
	}
	bound := stripShape(cmp.Args[1])
	if bound.Op != tile.OpConst || bound.Aux < 1 || bound.Aux > 1<<31 {
		return 0
	}
	iv, rowTerms := 0, 0
	for _, term := range sumTerms(cmp.Args[0]) {
		switch {
		case stripShape(term) == p.loop.Body.Args[0]:
			iv++
		case isRowRange(term):
			rowTerms++
		default:
			return 0
		}
	}
	lo, step := p.loop.Args[0], p.loop.Args[2]
	if iv != 1 || rowTerms != 1 || lo.Op != tile.OpConst || step.Op != tile.OpConst ||
		lo.Aux < 0 || lo.Aux%int64(p.k) != 0 || step.Aux != int64(p.k) {
		return 0
	}
	return bound.Aux
}

// tmaBOffset is the byte offset in B's tile of element (k, n) as B's
// tensor copy lays it out (a tile of bk rows): group n/64 of bk·256 bytes,
// line 2k + h (h = n/32 mod 2), chunk (n/4 mod 8) XOR the line's phase.
func tmaBOffset(bk, k, n int) int {
	h, c := n>>5&1, n>>2&7
	return n>>6*bk*256 + (2*k+h)*128 + (c^(2*k+h)&7)<<4 + n&3*4
}

// tmaBF16Offset is the byte offset in B's tile of element (k, n) as B's
// tensor copy lays it out at bf16 (TensorMap.Groups32, a tile of bk rows):
// group n/32 of bk·128 bytes, line k, chunk (n/4 mod 8) XOR k mod 8. The
// bf16 fragment reads (rows 2t and 2t+1 of columns n+g, t < 4, g < 8)
// find their rows' phases 2t (+1) distinct: no bank conflicts.
func tmaBF16Offset(bk, k, n int) int {
	return n>>5*bk*128 + k*128 + (n>>2&7^k&7)<<4 + n&3*4
}

// tmaBF16FragBase emits (in the prologue) the shared address, in the
// first stage, of B's element (r, n + 4·cs) as its bf16 tensor copy lays
// the tile out (tmaBF16Offset); reads of row r + k, k a multiple of 8, add
// 128·k bytes to it.
func (l *lowerer) tmaBF16FragBase(p *pipe, r, n string, cs int) string {
	return l.geo(fmt.Sprintf("tmab16|%s|%s|%d", r, n, cs), func(w *strings.Builder) string {
		nn, c, ph, off, x := l.reg("r"), l.reg("r"), l.reg("r"), l.reg("r"), l.reg("r")
		emit(w, "add.s32 %s, %s, %d", nn, n, 4*cs)
		emit(w, "bfe.u32 %s, %s, 2, 3", c, nn)
		emit(w, "and.b32 %s, %s, 7", ph, r)
		emit(w, "xor.b32 %s, %s, %s", c, c, ph)
		emit(w, "shl.b32 %s, %s, 4", c, c)
		emit(w, "shr.u32 %s, %s, 5", off, nn)
		emit(w, "mul.lo.u32 %s, %s, %d", off, off, p.k*128)
		emit(w, "mad.lo.u32 %s, %s, 128, %s", off, r, off)
		emit(w, "add.s32 %s, %s, %s", off, off, c)
		l.tmaBWord(w, p, off, nn, x)
		return off
	})
}

// tmaBWord adds to off, a byte offset in B's tile up to its column's
// 16-byte chunk, the word of column nn in that chunk (x a register for
// it) and the tile's shared address.
func (l *lowerer) tmaBWord(w *strings.Builder, p *pipe, off, nn, x string) {
	emit(w, "and.b32 %s, %s, 3", x, nn)
	emit(w, "mad.lo.u32 %s, %s, 4, %s", off, x, off)
	emit(w, "add.s32 %s, %s, %s", off, off, l.smemAddr())
	if p.b.Off != 0 {
		emit(w, "add.s32 %s, %s, %d", off, off, p.b.Off)
	}
}

// tmaBFragBase emits (in the prologue) the shared address, in the first
// stage, of B's element (t, n + 4·cs) as its tensor copy lays the tile out (tmaBOffset).
// The fragment reads of rows kk + t and kk + t + 4, kk a multiple of 8,
// add (kk or kk + 4)·256 bytes to it: 2·kk or 2·kk + 8 lines further,
// where the phase (2k + h) mod 8 is the same as at row t.
func (l *lowerer) tmaBFragBase(p *pipe, t, n string, cs int) string {
	return l.geo(fmt.Sprintf("tmab|%s|%s|%d", t, n, cs), func(w *strings.Builder) string {
		nn, h, c, ph, off, x := l.reg("r"), l.reg("r"), l.reg("r"), l.reg("r"), l.reg("r"), l.reg("r")
		emit(w, "add.s32 %s, %s, %d", nn, n, 4*cs)
		emit(w, "bfe.u32 %s, %s, 5, 1", h, nn)
		emit(w, "bfe.u32 %s, %s, 2, 3", c, nn)
		emit(w, "shl.b32 %s, %s, 1", ph, t)
		emit(w, "add.s32 %s, %s, %s", ph, ph, h)
		emit(w, "and.b32 %s, %s, 7", ph, ph)
		emit(w, "xor.b32 %s, %s, %s", c, c, ph)
		emit(w, "shl.b32 %s, %s, 4", c, c)
		emit(w, "shr.u32 %s, %s, 6", off, nn)
		emit(w, "mul.lo.u32 %s, %s, %d", off, off, p.k*256)
		emit(w, "mad.lo.u32 %s, %s, 256, %s", off, t, off)
		emit(w, "mad.lo.u32 %s, %s, 128, %s", off, h, off)
		emit(w, "add.s32 %s, %s, %s", off, off, c)
		l.tmaBWord(w, p, off, nn, x)
		return off
	})
}
