package native

import (
	"math"
	"os"
	"slices"
	"sync/atomic"

	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
	"github.com/tilefuse/tilefuse/tile"
)

// Matrix products: dot(a [M,K], b [K,N], c [M,N]) = c + a·b runs at the
// start of the level its result is available at, over frame blocks: each
// operand is a block already (a loop-carried block, another product's
// result, a value kept for later phases) or is written to a block of its
// own by a phase of the level before (a pack: the operand's loads, masks
// and all, as rows of the block, so the micro-kernel reads L1-resident
// contiguous memory whatever the operand's layout in its buffer). The
// result goes to a block of its own, or, where the product is the yield
// of the loop-carried block it accumulates into and nothing reads that
// block after it (the K loop of a tiled matmul), into that block itself:
// no copy per iteration.
//
// Transposed operands (the backward products' xᵀ·dy, attention's q·kᵀ):
// an operand loaded one element apart along its first dimension is packed
// transposed, by a phase over the transposed shape that reads it at
// swapped lanes (its loads stay contiguous). The micro-kernel reads a
// transposed a as it is (its broadcasts move along the block's rows
// instead of its columns); a transposed b is turned back in the frame, in
// 8×8 tiles (unpack, shuffle, exchange of 128-bit halves), before the
// micro-kernel.
//
// The micro-kernel: the columns in strips of 16 (two vectors), the rows
// in blocks of six, so that 12 accumulators, the strip's two vectors of b
// and one broadcast of a fill 15 ymm registers; per k, two loads of b,
// six broadcasts of a and twelve FMAs. Full row blocks run in a loop, the
// last M mod 6 rows after it. Each element is c + Σ_k a[i,k]·b[k,j] in k
// order with one rounding per step (fused multiply-add): within the
// reference's bound for products (2K·2⁻²⁴·Σ|a·b|).

const (
	dotRows = 6 // rows of a micro-kernel block
	dotVecs = 2 // vectors of a column strip
)

// dotSupported says why a product is not supported, or nil.
func dotSupported(v *tile.Value) error {
	a, b := v.Args[0].Type, v.Args[1].Type
	switch {
	case v.Type.DType != tile.F32 && v.Type.DType != tile.F64:
		return unsupported(v, "%v products", v.Type.DType)
	case v.Prec != tile.PrecIEEE && v.Type.DType != tile.F32:
		return unsupported(v, "%v products of precision %v", v.Type.DType, v.Prec)
	case v.Prec != tile.PrecIEEE && a.Shape.Numel()%lane != 0: // roundBlock's steps (the IR's blocks are never so)
		return unsupported(v, "products of precision %v of an operand of %d elements", v.Prec, a.Shape.Numel())
	case a.Shape.Rank != 2 || b.Shape.Rank != 2:
		return unsupported(v, "products of rank-%d blocks", a.Shape.Rank)
	case b.Shape.Dims[1]%(dotVecs*lane) != 0: // (the IR's products are at least 16 wide, powers of two)
		return unsupported(v, "products %d wide (not a multiple of %d)", b.Shape.Dims[1], dotVecs*lane)
	}
	return nil
}

// zeroSplat reports whether x is +0 in every lane (a splat of the
// constant, through shape ops).
func zeroSplat(x *tile.Value) bool {
	for x.Op.IsShape() {
		x = x.Args[0]
	}
	return x.Op == tile.OpConst && (x.Type.DType == tile.F32 && math.Float32bits(float32(x.AuxF)) == 0 ||
		x.Type.DType == tile.F64 && math.Float64bits(x.AuxF) == 0)
}

// lanes are the lanes a pack reads its operand at: the phase's own, or
// swapped.
func (pk pack) lanes() lanes {
	if pk.trans {
		return lanes{1, 0}
	}
	return identity(pk.x.Type.Shape.Rank)
}

// transposedLoad reports whether x is a load of a rank-2 block whose
// elements lie one apart along its first dimension and not along its last
// (a transposed operand: packed transposed, its loads stay contiguous).
func (p *plan) transposedLoad(x *tile.Value) bool {
	if x.Op != tile.OpLoad || x.Type.Shape.Rank != 2 {
		return false
	}
	a := p.in(x.Args[0]).aff
	if a == nil {
		return false
	}
	last := a.coef[1]
	return !(last.op == sxConst && (last.k == 0 || last.k == 1)) && a.coef[0].isConst(1)
}

// packBlock is the frame block pack pk writes to.
func (g *gen) packBlock(pk pack) int32 {
	key := -(1 << 24) - 2*pk.x.ID // a key no value has
	if pk.trans {
		key--
	}
	return g.scratchBlock(key, pk.x.Type.Shape.Numel()<<(shiftOf(pk.x.Type.DType)-2))
}

// scratchBlock is the frame block of n f32 under key, made if new.
func (g *gen) scratchBlock(key, n int) int32 {
	if off, ok := g.block[key]; ok {
		return off
	}
	off := g.alloc(int32(4*n)+32, blockAlign) // 32 bytes over: a vector read past the end stays in the frame
	g.block[key] = off
	return off
}

// operandBlock is the frame block product d reads operand i from, and
// whether it holds the operand's transpose.
func (g *gen) operandBlock(d *tile.Value, i int) (int32, bool) {
	x := d.Args[i]
	switch xi := g.p.in(x); {
	case i == 2 && zeroSplat(x):
		return 0, false
	case xi.kind == kCarry:
		return g.block[x.ID], false
	case xi.kind == kDot:
		return g.dotBlock(x), false
	case xi.kind == kFloat && !xi.formula:
		return g.matBlock(x), false
	}
	tr := i < 2 && g.p.in(d).dotTrans[i]
	return g.packBlock(pack{x, tr}), tr
}

// dotBlock is where product d's result is: its accumulator's block where
// it accumulates in place, else a block of its own.
func (g *gen) dotBlock(d *tile.Value) int32 {
	if g.p.in(d).accIn {
		return g.block[d.Args[2].ID]
	}
	return g.matBlock(d)
}

// dotCode emits product d.
func (g *gen) dotCode(d *tile.Value) error {
	a := &g.a
	m, k, n := d.Args[0].Type.Shape.Dims[0], d.Args[0].Type.Shape.Dims[1], d.Args[1].Type.Shape.Dims[1]
	offA, aT := g.operandBlock(d, 0)
	offB, bT := g.operandBlock(d, 1)
	zero := zeroSplat(d.Args[2])
	offC, _ := g.operandBlock(d, 2)
	offD := g.dotBlock(d)
	if d.Type.DType == tile.F64 {
		if bT { // b's transpose [N,K] → b [K,N], in 4×4 tiles (the IR's products are at least 16 on a side)
			to := g.scratchBlock(-(1<<24)-2*d.ID-(1<<23), 2*k*n)
			g.transposeBlock64(to, offB, n, k)
			offB = to
		}
		aRow, aCol := int32(8*k), int32(8)
		if aT {
			aRow, aCol = 8, int32(8*m)
		}
		if !g.avx512 {
			g.dotY64(m, k, n, offA, offB, offC, offD, aRow, aCol, zero)
			return a.Err()
		}
		g.dotZ64(m, k, n, offA, offB, offC, offD, aRow, aCol, zero)
		return a.Err()
	}
	if bT { // b's transpose [N,K] → b [K,N], in 8×8 tiles
		to := g.scratchBlock(-(1<<24)-2*d.ID-(1<<23), k*n)
		if op := g.direct[d.Args[1]]; op != nil && op.b && op.trans { // directOp took only ieee readers
			// from where it lies where its pack phase found the block in
			// bounds (the flag set), else from its pack: the same block
			packed, done := a.NewLabel(), a.NewLabel()
			a.MOVQload(rT0, fr(op.flag))
			a.TESTQ(rT0, rT0)
			a.Jcc(amd64.CondE, packed)
			g.transposeFrom(to, tileSrc{slot: op.addr, row: op.rowBytes}, n, k)
			a.JMP(done)
			a.Bind(packed)
			g.transposeBlock(to, offB, n, k)
			a.Bind(done)
		} else {
			g.transposeBlock(to, offB, n, k)
		}
		offB = to
	}
	// a at row r, column k: row-major, or transposed (the block is [K,M])
	aRow, aCol := int32(4*k), int32(4)
	if aT {
		aRow, aCol = 4, int32(4*m)
	}
	if d.Prec != tile.PrecIEEE {
		g.precDot(d, m, k, n, offA, offB, offC, offD, aRow, aCol, zero)
		return a.Err()
	}
	if op := g.direct[d.Args[1]]; op != nil && op.b && !op.trans && !bT {
		// b where its pack phase left it (directOps): its address and row
		// bytes from the frame
		g.bFrom = op
		defer func() { g.bFrom = nil }()
	}
	if op := g.direct[d.Args[0]]; op != nil && !op.b && op.trans == aT {
		// a where it lies where its pack phase found the block in bounds
		// (the flag set), else its pack; the same operations in the same
		// order either way
		packed, done := a.NewLabel(), a.NewLabel()
		a.MOVQload(rT0, fr(op.flag))
		a.TESTQ(rT0, rT0)
		a.Jcc(amd64.CondE, packed)
		g.aFrom = op.addr
		row, col := op.rowBytes, int32(4)
		if aT { // a's rows are the buffer's columns
			row, col = 4, op.rowBytes
		}
		g.dotF32(m, k, n, offA, offB, offC, offD, row, col, zero)
		g.aFrom = 0
		a.JMP(done)
		a.Bind(packed)
		g.dotF32(m, k, n, offA, offB, offC, offD, aRow, aCol, zero)
		a.Bind(done)
		return a.Err()
	}
	g.dotF32(m, k, n, offA, offB, offC, offD, aRow, aCol, zero)
	return a.Err()
}

// directOperand is a product's operand left where it lies (directOps):
// its pack phase writes the address of the block's first element to the
// frame slot addr where the whole block is in bounds and unmasked
// (blockCheck), and 1 to flag (a) or the bytes between its rows to stride
// (b); else it packs it as before, and writes 0 to flag (a) or the pack's
// address and row bytes (b). The micro-kernel's rows of a are offsets in
// its code, so a product runs in two forms chosen by a's flag; b's rows
// are a register's steps (dotLoop), one form reading either.
type directOperand struct {
	b      bool     // the product's b (else its a)
	trans  bool     // stored transposed (a [K,M]: packed transposed; b [N,K]: turned in the frame)
	pat    *pattern // the pack's load
	pk     pack
	nodes  [2]int // the pack's load and frame write among the phase's nodes
	addr   int32
	flag   int32 // a: 1 where read where it lies
	stride int32 // b: the bytes between the rows read
	// rowBytes: the bytes between the block's rows in its buffer
	rowBytes int32
}

// strided reports whether the product reads op through its address and
// stride slots (b as stored), else through its flag (a; b stored
// transposed, turned from where it lies or from its pack).
func (op *directOperand) strided() bool { return op.b && !op.trans }

// noDirectA and noDirectB turn directOps off for products' a and b
// operands: TILEFUSE_NATIVE_DIRECT_A=0 and TILEFUSE_NATIVE_DIRECT_B=0 at
// start-up (for measuring), SetDirect in tests (export_test.go).
var noDirectA, noDirectB atomic.Bool

func init() {
	noDirectA.Store(os.Getenv("TILEFUSE_NATIVE_DIRECT_A") == "0")
	noDirectB.Store(os.Getenv("TILEFUSE_NATIVE_DIRECT_B") == "0")
}

// directOps returns the products' operands that the pack phase being
// emitted leaves where they lie, and whether the phase has anything else
// to do (other packs to write). The micro-kernel broadcasts a's elements
// one at a time and loads b's strip a row at a time, so it reads both as
// well where they lie in their buffers as packed, and the packs (each
// program's whole a and b blocks once a K step, from rows a page or more
// apart; hinting the next K step's lines into L2 did not shorten them) are
// work the product does not need: on one core of the 2-core VM (AMD Zen 5)
// a's pack took 10–19% of a 1024³ product's samples, b's 10% once a was
// read where it lies. Taken where the phase's loop is zmm moves (loads and
// their frame writes: movesZ; with AVX2 alone the ymm micro-kernel was
// slower reading so), an operand is the f32 block of one of its loads,
// read row by row, the rows a constant stride apart, from a buffer the
// kernel does not store to (so the product reads what was loaded), and
// every product reading it reads it in the same role (a or b) the same
// way (as stored or transposed), at precision ieee (the others round their
// operands from the pack into blocks of their own).
func (pg *phaseGen) directOps(fp *fastPlan) ([]*directOperand, bool) {
	g := pg.g
	if pg.rank != 2 || !pg.movesZ(fp) {
		return nil, true
	}
	live := 0
	for i := range pg.nodes {
		if fp.live[i] {
			live++
		}
	}
	var ops []*directOperand
	moved := 0
	for _, pk := range pg.ph.packs {
		// one role: a as it is (1), b as it is (2), a transposed (16) or b
		// transposed (32)
		role := g.p.packRole[pk.x]
		b := role == 2 || role == 32
		if role != 1 && role != 2 && role != 16 && role != 32 || !b && noDirectA.Load() || b && noDirectB.Load() {
			continue
		}
		op := pg.directOp(fp, pk, b)
		if op == nil {
			continue
		}
		ops = append(ops, op)
		moved += 2
	}
	return ops, live > moved
}

// directOp is directOps for the phase's pack pk, read by products as
// their b (else as their a), or nil. A transposed a's pack phase runs over
// its transpose, its rows the buffer's: the micro-kernel steps along them
// where it steps along a packed transposed a's.
func (pg *phaseGen) directOp(fp *fastPlan, pk pack, b bool) *directOperand {
	g := pg.g
	x := pk.x
	if x.Type.DType != tile.F32 {
		return nil
	}
	ld, wr := -1, -1
	for i, n := range pg.nodes {
		if !fp.live[i] {
			continue
		}
		switch {
		case n.op == opLoad && n.v == x:
			ld = i
		case n.op == opMatWrite && len(fp.args(n)) == 1 && fp.args(n)[0].v == x:
			wr = i
		}
	}
	if ld < 0 || wr < 0 || fp.args(pg.nodes[wr])[0] != pg.nodes[ld] {
		return nil
	}
	for i, n := range pg.nodes { // nothing else reads the load
		if fp.live[i] && i != wr && slices.Contains(fp.args(n), pg.nodes[ld]) {
			return nil
		}
	}
	pat := pg.nodes[ld].pat
	if pat.root < 0 || g.p.stored[pat.root] || pat.elast != 1 || pat.sh != 2 || pat.e[0].op != sxConst ||
		pat.e[0].k <= 0 || pat.e[0].k > math.MaxInt32/(4*int64(max(dotRows, dotRowsZ))) {
		return nil
	}
	want := 0
	if b {
		want = 1
	}
	for _, rg := range g.p.regions {
		for _, d := range rg.dots {
			for i, y := range d.Args {
				if y == x && (i != want || d.Prec != tile.PrecIEEE || d.Type.DType != tile.F32 || g.p.in(d).dotTrans[i] != pk.trans) {
					return nil
				}
			}
		}
	}
	if g.direct == nil {
		g.direct = map[*tile.Value]*directOperand{}
	}
	op := g.direct[x]
	if op == nil {
		op = &directOperand{b: b, trans: pk.trans, pk: pk, addr: g.alloc(8, 8), rowBytes: int32(4 * pat.e[0].k)}
		if op.strided() {
			op.stride = g.alloc(8, 8)
		} else {
			op.flag = g.alloc(8, 8)
		}
		if b {
			g.p.directB++
		} else {
			g.p.directA++
		}
		g.direct[x] = op
	}
	op.pat, op.nodes = pat, [2]int{ld, wr}
	return op
}

// precDot is an f32 product of precision other than ieee: each operand
// rounded as the precision reads it (tile.Precision.Operands: TF32 by
// truncation or to nearest even, bfloat16 to nearest even) into a scratch
// block of its own (roundBlock), then the ieee micro-kernel over those;
// PrecTF32x3 as the reference computes it, three products in turn into
// the result, a_lo·b_hi, then a_hi·b_lo, then a_hi·b_hi (tile.SplitTF32's
// parts). The operands' products are exact in f32 (11 + 11 or 8 + 8
// significant bits), so each fused multiply-add rounds what the
// reference's product-then-add rounds: the same results, bar products
// that underflow or overflow f32 (TestPrecisionDotsNative).
func (g *gen) precDot(d *tile.Value, m, k, n int, offA, offB, offC, offD, aRow, aCol int32, zero bool) {
	key := func(i int) int { return -(1 << 24) - 2*d.ID - (1 << 22) - i<<20 }
	rounded := func(i int, from int32, size int, r roundKind) int32 {
		to := g.scratchBlock(key(i), size)
		g.roundBlock(to, from, size, r)
		return to
	}
	switch d.Prec {
	case tile.PrecTF32, tile.PrecTF32TB, tile.PrecBF16:
		ra, rb := roundTruncTF32, roundTF32
		switch d.Prec {
		case tile.PrecTF32TB:
			ra, rb = roundTF32, roundTruncTF32
		case tile.PrecBF16:
			ra, rb = roundBF16, roundBF16
		}
		g.dotF32(m, k, n, rounded(0, offA, m*k, ra), rounded(1, offB, k*n, rb), offC, offD, aRow, aCol, zero)
	case tile.PrecTF32x3:
		aHi, aLo := rounded(0, offA, m*k, roundTF32), rounded(2, offA, m*k, roundTF32Lo)
		bHi, bLo := rounded(1, offB, k*n, roundTF32), rounded(3, offB, k*n, roundTF32Lo)
		g.dotF32(m, k, n, aLo, bHi, offC, offD, aRow, aCol, zero)
		g.dotF32(m, k, n, aHi, bLo, offD, offD, aRow, aCol, false)
		g.dotF32(m, k, n, aHi, bHi, offD, offD, aRow, aCol, false)
	}
}

// roundKind is how roundBlock rounds each f32 element.
type roundKind int

const (
	roundTruncTF32 roundKind = iota // tile.TruncTF32
	roundTF32                       // tile.RoundTF32
	roundTF32Lo                     // x - RoundTF32(x), rounded: SplitTF32's lo
	roundBF16                       // tile.RoundBF16
)

// roundBlock writes the n f32 of the frame block at from (n a multiple of
// eight), each rounded as r says, to the block at to, eight lanes a step
// in ymm registers (Y0–Y4; the bit operations of tile's scalar functions
// lane by lane).
func (g *gen) roundBlock(to, from int32, n int, r roundKind) {
	a := &g.a
	const (
		rSrc  = amd64.R11
		rDst  = amd64.R12
		rLeft = amd64.RDX
	)
	x, t, u, w, sp := amd64.VReg(0), amd64.VReg(1), amd64.VReg(2), amd64.VReg(3), amd64.VReg(4)
	expBits := g.constVec(0x7f800000)
	// tf32 rounds v (not x) into d: v + 0xfff + (v>>13 & 1), 13 low bits
	// cleared, where v is finite; infinities and NaN as they are
	tf32 := func(d, v amd64.VReg) {
		a.VPSRLD(t, v, 13)
		a.VPAND(t, t, g.constVec(1))
		a.VPADDD(t, t, g.constVec(1<<12-1))
		a.VPADDD(t, t, v)
		a.VPAND(t, t, g.constVec(^uint32(1<<13-1)))
		a.VPAND(sp, v, expBits)
		a.VPCMPEQD(sp, sp, expBits)
		a.VBLENDVPS(d, t, v, sp)
	}
	a.LEAQ(rSrc, fr(from))
	a.LEAQ(rDst, fr(to))
	a.MOVLimm(rLeft, uint32(n/lane))
	top := a.NewLabel()
	a.Bind(top)
	a.VMOVUPS(x, amd64.Ptr(rSrc, 0))
	switch r {
	case roundTruncTF32:
		a.VPAND(x, x, g.constVec(^uint32(1<<13-1)))
	case roundTF32:
		tf32(x, x)
	case roundTF32Lo:
		tf32(u, x)
		a.VSUBPS(w, x, u)
		tf32(x, w)
	case roundBF16:
		// finite: v + 0x7fff + (v>>16 & 1), 16 low bits cleared; NaN
		// quieted (bit 22 set), then infinities and NaN 16 low bits cleared
		a.VPSRLD(t, x, 16)
		a.VPAND(t, t, g.constVec(1))
		a.VPADDD(t, t, g.constVec(1<<15-1))
		a.VPADDD(t, t, x)
		a.VPAND(u, x, g.constVec(0x7fffffff))
		a.VPCMPGTD(u, u, expBits) // NaN
		a.VPAND(u, u, g.constVec(1<<22))
		a.VPOR(u, u, x)
		a.VPAND(sp, x, expBits)
		a.VPCMPEQD(sp, sp, expBits)
		a.VBLENDVPS(x, t, u, sp)
		a.VPAND(x, x, g.constVec(^uint32(1<<16-1)))
	}
	a.VMOVUPSstore(amd64.Ptr(rDst, 0), x)
	a.ADDQimm(rSrc, 4*lane)
	a.ADDQimm(rDst, 4*lane)
	a.SUBQimm(rLeft, 1)
	a.Jcc(amd64.CondNE, top)
}

// dotF32 is the f32 micro-kernel loop (ieee): in zmm registers where the
// CPU has AVX-512F, else in ymm.
func (g *gen) dotF32(m, k, n int, offA, offB, offC, offD, aRow, aCol int32, zero bool) {
	a := &g.a
	if g.avx512 {
		g.dotZ(m, k, n, offA, offB, offC, offD, aRow, aCol, zero)
		return
	}
	g.dotLoop(dotISA{
		size: 4, vecBytes: 32, rows: dotRows, bVec: 12, aBc: 14,
		zero:  func(r int) { a.VXORPS(amd64.VReg(r), amd64.VReg(r), amd64.VReg(r)) },
		load:  func(r int, m amd64.Mem) { a.VMOVUPS(amd64.VReg(r), m) },
		store: func(m amd64.Mem, r int) { a.VMOVUPSstore(m, amd64.VReg(r)) },
		bcast: func(r int, m amd64.Mem) { a.VBROADCASTSS(amd64.VReg(r), m) },
		fma:   func(acc, b, x int) { a.VFMADD231PS(amd64.VReg(acc), amd64.VReg(x), amd64.VReg(b)) },
	}, m, k, n, offA, offB, offC, offD, aRow, aCol, zero)
}

// dotRowsZ is the rows of a zmm micro-kernel block (dotZ).
var dotRowsZ = 12

// dotZ is dotCode's micro-kernel in zmm registers (AVX-512F): the columns
// in strips of 32 (two vectors; a last strip of 16 where N mod 32 is 16),
// the rows in blocks of dotRowsZ, so that 2·dotRowsZ accumulators, the
// strip's two vectors of b and one broadcast of a fit Z0–Z31; per k, two
// loads of b, dotRowsZ broadcasts of a and 2·dotRowsZ FMAs. The same
// operations in the same order as the ymm kernel: each element is
// c + Σ_k a[i,k]·b[k,j] in k order, one rounding a step.
func (g *gen) dotZ(m, k, n int, offA, offB, offC, offD, aRow, aCol int32, zero bool) {
	a := &g.a
	g.dotLoop(dotISA{
		size: 4, vecBytes: 64, rows: dotRowsZ, bVec: 28, aBc: 30,
		zero:  func(r int) { a.VPXORDZ(amd64.ZReg(r), amd64.ZReg(r), amd64.ZReg(r)) },
		load:  func(r int, m amd64.Mem) { a.VMOVUPSZ(amd64.ZReg(r), m) },
		store: func(m amd64.Mem, r int) { a.VMOVUPSstoreZ(m, amd64.ZReg(r)) },
		bcast: func(r int, m amd64.Mem) { a.VBROADCASTSSZ(amd64.ZReg(r), m) },
		fma:   func(acc, b, x int) { a.VFMADD231PSZ(amd64.ZReg(acc), amd64.ZReg(b), amd64.ZReg(x)) },
	}, m, k, n, offA, offB, offC, offD, aRow, aCol, zero)
}

// transposeBlock writes the transpose of the r×c f32 frame block at from
// (row-major) to the c×r block at to, in 8×8 tiles (r and c multiples of
// eight): eight rows loaded, interleaved (unpack), shuffled and their
// 128-bit halves exchanged, eight rows stored.
func (g *gen) transposeBlock(to, from int32, r, c int) {
	g.transposeFrom(to, tileSrc{frame: from, row: int32(4 * c)}, r, c)
}

// tileSrc is where walkTiles reads: the frame block at frame, or (slot
// not 0) the address held in the frame slot slot; its rows row bytes
// apart.
type tileSrc struct {
	frame, slot, row int32
}

// transposeFrom is transposeBlock reading the r×c f32 block at src.
func (g *gen) transposeFrom(to int32, src tileSrc, r, c int) {
	a := &g.a
	g.walkTilesFrom(to, src, r, c, lane, 4, func(s, dst amd64.Reg) {
		for q := 0; q < lane; q++ {
			a.VMOVUPS(amd64.VReg(q), amd64.Ptr(s, int32(q)*src.row))
		}
		for q := 0; q < lane; q += 2 {
			a.VUNPCKLPS(amd64.VReg(8+q), amd64.VReg(q), amd64.VReg(q+1))
			a.VUNPCKHPS(amd64.VReg(9+q), amd64.VReg(q), amd64.VReg(q+1))
		}
		for q := 0; q < lane; q += 4 {
			// t(8+q), t(9+q) from rows q, q+1; t(10+q), t(11+q) from q+2, q+3
			a.VSHUFPS(amd64.VReg(q), amd64.VReg(8+q), amd64.VReg(10+q), 0x44)
			a.VSHUFPS(amd64.VReg(q+1), amd64.VReg(8+q), amd64.VReg(10+q), 0xee)
			a.VSHUFPS(amd64.VReg(q+2), amd64.VReg(9+q), amd64.VReg(11+q), 0x44)
			a.VSHUFPS(amd64.VReg(q+3), amd64.VReg(9+q), amd64.VReg(11+q), 0xee)
		}
		for q := 0; q < lane; q++ {
			imm := uint8(0x20)
			if q >= 4 {
				imm = 0x31
			}
			a.VPERM2F128(8, amd64.VReg(q%4), amd64.VReg(q%4+4), imm)
			a.VMOVUPSstore(amd64.Ptr(dst, int32(4*q*r)), 8)
		}
	})
}

// walkTiles runs tile over the t×t tiles of an r×c frame block at from
// (row-major, esz-byte elements; r and c multiples of t) in row order,
// each with src at the tile in from and dst at the tile of to (the c×r
// block) it transposes into: the loop that transposeBlock and
// transposeBlock64 share. R10–R14 and RDX are clobbered.
func (g *gen) walkTiles(to, from int32, r, c, t, esz int, tile func(src, dst amd64.Reg)) {
	g.walkTilesFrom(to, tileSrc{frame: from, row: int32(esz * c)}, r, c, t, esz, tile)
}

// walkTilesFrom is walkTiles over the r×c block at from.
func (g *gen) walkTilesFrom(to int32, from tileSrc, r, c, t, esz int, tile func(src, dst amd64.Reg)) {
	a := &g.a
	const (
		rSrc  = amd64.R11 // the tile in from
		rDst  = amd64.R12 // the tile in to
		rRow  = amd64.R13 // from's row of tiles
		rCol  = amd64.R14 // to's column of tiles
		rLeft = amd64.RDX // tiles left in the row
		rRows = amd64.R10 // rows of tiles left
	)
	if from.slot != 0 {
		a.MOVQload(rRow, fr(from.slot))
	} else {
		a.LEAQ(rRow, fr(from.frame))
	}
	a.LEAQ(rCol, fr(to))
	a.MOVLimm(rRows, uint32(r/t))
	rows := a.NewLabel()
	a.Bind(rows)
	a.MOVQ(rSrc, rRow)
	a.MOVQ(rDst, rCol)
	a.MOVLimm(rLeft, uint32(c/t))
	tiles := a.NewLabel()
	a.Bind(tiles)
	tile(rSrc, rDst)
	a.ADDQimm(rSrc, int32(esz*t))
	a.ADDQimm(rDst, int32(esz*t*r))
	a.SUBQimm(rLeft, 1)
	a.Jcc(amd64.CondNE, tiles)
	a.ADDQimm(rRow, int32(t)*from.row)
	a.ADDQimm(rCol, int32(esz*t))
	a.SUBQimm(rRows, 1)
	a.Jcc(amd64.CondNE, rows)
}

// dotZ64 is the f64 micro-kernel with AVX-512F (without: dotY64): dotZ's
// loop nest over float64 lanes, eight a zmm register, the columns in
// strips of 16 (two vectors; N is a multiple of 16: dotSupported), the
// rows in blocks of dotRowsZ (2·dotRowsZ accumulators, b in Z28–Z29, a's
// broadcast in Z30). Each element is c + Σ_k a[i,k]·b[k,j] in k order,
// one rounding a step (fused multiply-adds): within 2(K+1)·2⁻⁵³·(|c| +
// Σ|a·b|) of the reference's.
func (g *gen) dotZ64(m, k, n int, offA, offB, offC, offD, aRow, aCol int32, zero bool) {
	a := &g.a
	g.dotLoop(dotISA{
		size: 8, vecBytes: 64, rows: dotRowsZ, bVec: 28, aBc: 30,
		zero:  func(r int) { a.VPXORQZ(amd64.ZReg(r), amd64.ZReg(r), amd64.ZReg(r)) },
		load:  func(r int, m amd64.Mem) { a.VMOVUPDZ(amd64.ZReg(r), 0, m) },
		store: func(m amd64.Mem, r int) { a.VMOVUPDstoreZ(m, 0, amd64.ZReg(r)) },
		bcast: func(r int, m amd64.Mem) { a.VBROADCASTSDZ(amd64.ZReg(r), m) },
		fma:   func(acc, b, x int) { a.VFMADD231PDZ(amd64.ZReg(acc), amd64.ZReg(b), amd64.ZReg(x)) },
	}, m, k, n, offA, offB, offC, offD, aRow, aCol, zero)
}

// dotRowsY64 is the rows of a block of dotY64's micro-kernel.
const dotRowsY64 = 6

// dotY64 is dotZ64 without AVX-512: four float64 lanes a ymm register,
// the columns in strips of 8 (two vectors; N is a multiple of 16:
// dotSupported), the rows in blocks of dotRowsY64 (12 accumulators, b in
// Y12–Y13, a's broadcast in Y14). Each element is c + Σ_k a[i,k]·b[k,j]
// in k order, one fused multiply-add a step: the zmm kernel's operations
// element by element, so its results bit for bit.
func (g *gen) dotY64(m, k, n int, offA, offB, offC, offD, aRow, aCol int32, zero bool) {
	a := &g.a
	g.dotLoop(dotISA{
		size: 8, vecBytes: 32, rows: dotRowsY64, bVec: 12, aBc: 14,
		zero:  func(r int) { a.VXORPS(amd64.VReg(r), amd64.VReg(r), amd64.VReg(r)) },
		load:  func(r int, m amd64.Mem) { a.VMOVUPD(amd64.VReg(r), m) },
		store: func(m amd64.Mem, r int) { a.VMOVUPSstore(m, amd64.VReg(r)) },
		bcast: func(r int, m amd64.Mem) { a.VBROADCASTSD(amd64.VReg(r), m) },
		fma:   func(acc, b, x int) { a.VFMADD231PD(amd64.VReg(acc), amd64.VReg(b), amd64.VReg(x)) },
	}, m, k, n, offA, offB, offC, offD, aRow, aCol, zero)
}

// dotISA is what a micro-kernel of dotLoop is written with: the element
// and vector sizes, the rows of a block, b's first vector register and
// a's broadcast register (the accumulators take the registers from 0),
// and the instructions, on register numbers.
type dotISA struct {
	size, vecBytes int32
	rows           int
	bVec, aBc      int
	zero           func(r int)
	load           func(r int, m amd64.Mem)
	store          func(m amd64.Mem, r int)
	bcast          func(r int, m amd64.Mem)
	fma            func(acc, b, a int) // acc += b·a
}

// dotLoop is the micro-kernel loop of every product of dotCode: the
// columns in strips of dotVecs vectors (one where fewer columns are left),
// the rows in blocks of isa.rows, full blocks in a loop and the last
// M mod rows after it; per block and k, the strip's vectors of b loaded,
// a's element broadcast for each row and an FMA for each accumulator,
// each element c + Σ_k a[i,k]·b[k,j] in k order, one rounding a step.
func (g *gen) dotLoop(isa dotISA, m, k, n int, offA, offB, offC, offD, aRow, aCol int32, zero bool) {
	a := &g.a
	const (
		rA  = amd64.RBX // a's row block
		rC  = amd64.R8  // c's row block
		rD  = amd64.R9  // the result's row block
		rI  = amd64.R10 // row blocks left
		rAk = amd64.R11 // a at column k
		rBk = amd64.R12 // b at row k, the strip's columns
		rK  = amd64.RDX // k left
		rBS = amd64.R13 // b's row bytes, from its stride slot (directOps)
	)
	es, vb := isa.size, isa.vecBytes
	lanes := int(vb / es)
	rowBytes := es * int32(n)
	micro := func(mr, nv, j0 int) {
		acc := func(r, v int) int { return r*nv + v }
		col := es * int32(j0)
		for r := 0; r < mr; r++ {
			for v := 0; v < nv; v++ {
				if zero {
					isa.zero(acc(r, v))
				} else {
					isa.load(acc(r, v), amd64.Ptr(rC, int32(r)*rowBytes+col+vb*int32(v)))
				}
			}
		}
		a.MOVQ(rAk, rA)
		if g.bFrom != nil {
			a.MOVQload(rBk, fr(g.bFrom.addr)) // b where its pack phase left it
			if col != 0 {
				a.ADDQimm(rBk, col)
			}
		} else {
			a.LEAQ(rBk, fr(offB+col))
		}
		a.MOVLimm(rK, uint32(k))
		top := a.NewLabel()
		a.Bind(top)
		for v := 0; v < nv; v++ {
			isa.load(isa.bVec+v, amd64.Ptr(rBk, vb*int32(v)))
		}
		for r := 0; r < mr; r++ {
			isa.bcast(isa.aBc, amd64.Ptr(rAk, int32(r)*aRow))
			for v := 0; v < nv; v++ {
				isa.fma(acc(r, v), isa.bVec+v, isa.aBc)
			}
		}
		a.ADDQimm(rAk, aCol)
		if g.bFrom != nil {
			a.ADDQ(rBk, rBS)
		} else {
			a.ADDQimm(rBk, rowBytes)
		}
		a.SUBQimm(rK, 1)
		a.Jcc(amd64.CondNE, top)
		for r := 0; r < mr; r++ {
			for v := 0; v < nv; v++ {
				isa.store(amd64.Ptr(rD, int32(r)*rowBytes+col+vb*int32(v)), acc(r, v))
			}
		}
	}
	rows := isa.rows
	if g.bFrom != nil {
		a.MOVQload(rBS, fr(g.bFrom.stride))
	}
	for j0 := 0; j0 < n; j0 += dotVecs * lanes {
		nv := min(dotVecs, (n-j0)/lanes) // n is a multiple of 16 (dotSupported)
		if g.aFrom != 0 {
			a.MOVQload(rA, fr(g.aFrom)) // a where it lies (directOps)
		} else {
			a.LEAQ(rA, fr(offA))
		}
		if !zero {
			a.LEAQ(rC, fr(offC))
		}
		a.LEAQ(rD, fr(offD))
		if full := m / rows; full > 0 {
			a.MOVLimm(rI, uint32(full))
			top := a.NewLabel()
			a.Bind(top)
			micro(rows, nv, j0)
			a.ADDQimm(rA, int32(rows)*aRow)
			if !zero {
				a.ADDQimm(rC, int32(rows)*rowBytes)
			}
			a.ADDQimm(rD, int32(rows)*rowBytes)
			a.SUBQimm(rI, 1)
			a.Jcc(amd64.CondNE, top)
		}
		if tail := m % rows; tail > 0 {
			micro(tail, nv, j0)
		}
	}
}
