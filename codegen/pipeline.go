package codegen

import (
	"fmt"
	"strings"

	"github.com/tilefuse/tilefuse/tile"
)

// Software pipelining of K loops on the tensor cores.
//
// A loop whose only work is acc = dot(load A, load B, acc) (plus the
// address and mask arithmetic of the two loads, and pointers it carries
// along) is emitted as Triton's pipeliner emits it: the loads become
// cp.async copies straight from global into a ring of `stages`
// shared-memory buffers, issued stages-1 iterations ahead; each iteration
// waits for its own buffer (cp.async.wait_group), fences it with one
// barrier, issues the copies of a later iteration into the buffer freed by
// the previous one, and runs the tensor cores on its buffer into an
// accumulator that stays in registers (mmaLayout) across iterations and
// after the loop, where the epilogue uses it as it is.

// pipe is the plan of one pipelined loop.
type pipe struct {
	loop, dot  *tile.Value
	accIdx     int            // the accumulator's index among the carried values
	loads      [2]*tile.Value // A's and B's load in the loop body
	m, n, k    int
	wm, wn     int
	acc        *Blocked // the accumulator's layout
	a, b       smemTile // the operand tiles of one stage
	stages     int
	stageBytes int
	// wgmma (sm_90a): warpgroups run wgmma.mma_async m64nNk8 with A from
	// registers (ldmatrix, rounded) and B from bt, a K-major tile with the
	// 128-byte swizzle into which each stage's B is transposed and rounded
	// (TF32 wgmma reads only K-major operands)
	wgmma bool
	bt    smemTile // bt.Rows = n, bt.Cols = k; Off 1024-aligned after the ring
	// two bt, btStride apart, taken in turns: one iteration's B is
	// transposed while the previous one's wgmmas still read theirs
	btStride int
	// swapped (meta-parameter wgmma = 2, sm_90a): the warpgroups compute
	// Cᵀ = Bᵀ·Aᵀ with wgmma.mma_async m64nMk8, so that no operand is
	// transposed: wgmma's A is B's tile read into registers (each warp 16
	// columns n of C, rounded there), wgmma's B is A's tile, copied by
	// cp.async straight into a K-major 128-byte-swizzled tile (A is K-major
	// as C = A·B reads it); the accumulator is the mma layout of Cᵀ, an
	// [n, m] block whose value dimensions are swapped (accLayout). Stages
	// are issued stages-2 ahead and each iteration leaves its wgmmas
	// running (wait_group 1 retires the previous iteration's), so a stage
	// is rewritten only after every warp retired the wgmmas reading it.
	swapped bool
	// epiSmem (swapped form, meta-parameter epi_smem = 1): after the K
	// loop the accumulator goes through shared memory (the stages' memory,
	// rows padded by 4 words) into a row-major layout of the [m, n] block
	// (epiSmemLayout: 4 consecutive elements of a row a thread, so that the
	// epilogue's loads and stores are 16 bytes wide, or 2 or 1 where its
	// writes cannot be, lanes along the columns; epilogueThroughSmem).
	epiSmem bool
	// alo (swapped 3xTF32): the low TF32 parts of A's tile, beside it in
	// each stage (the tile itself holds the high parts); the products of
	// an iteration are summed by the tensor cores into a block
	// accumulator of their own (two, for the two unrolled iterations),
	// which is added to the accumulator in f32 once its wgmmas are retired
	alo smemTile
	// abf (swapped bf16): the K-major tile of A's elements rounded to
	// bf16 (rows of 64 bytes, wgmma's 64-byte swizzle) at the start of each
	// stage: the copying thread converts its copies of the stage into it,
	// and the wgmmas read it. (Two such tiles after the ring, one for each
	// unrolled iteration, were rewritten while another warpgroup's wgmmas
	// of two iterations before could still read them: the simulator's
	// check of writes to shared memory that wgmmas in flight read.) In the
	// stage, the ring's argument covers it, and since the copies land only
	// where synchronous reads go, they are issued stages-1 ahead (ahead)
	abf      smemTile
	abfBytes int // one tile
	// bss (swapped bf16, B stored [k][n], not staged; meta-parameter
	// b_smem = 1): B is read by the tensor cores from shared memory too,
	// not loaded into registers each k step: the pass over the copies also
	// converts each thread's copies of B into the stage's bf16 tile bbf,
	// [k][n] as B is in memory, which the wgmmas read as their A operand
	// (Bᵀ) MN-major through a descriptor (128-byte swizzle; convertB,
	// wgmmaSwappedBF16). The fragment loads (8 ld.shared and 4 conversions
	// a k step of 16, a thread) leave the wgmmas' path; warp-specialised
	// (ws = 1), the producer's pass converts B too
	bss bool
	bbf smemTile
	// aT, bT: an operand stored transposed in memory (Aᵀ: m contiguous;
	// Bᵀ: k contiguous) is kept in shared memory in its memory order, A as
	// [k][m], B as [n][k], so that its copies are 16 bytes wide and a
	// warp's copies read whole rows of memory (copy: the load's layout,
	// lanes along the contiguous dimension; vw: the copy's width in
	// elements); the fragment reads follow the tile (transposedOperands).
	// Copied as the tile [m][k] / [k][n] before, a warp's 4-byte copies of
	// Bᵀ touched 32 rows of memory, 4 useful bytes in each 32-byte sector.
	aT, bT bool
	// ss (swapped TF32 form, B stored [n][k], meta-parameter wg_ss = 1):
	// wgmma's A, B's tile, is read from shared memory through a descriptor
	// as its B (A's tile) is, not loaded into registers each k step: B's
	// [n][k] tile takes A's K-major 128-byte swizzle, and the tensor cores
	// read it truncated to TF32, not rounded (an operand graphpass rounded
	// before: tile.PrecTF32 then computes exactly what it says); not with
	// the warp-specialised loop (ws = 1), which was not checked with it
	ss bool
	// lateCopies (swapped form without a pass over its copies, unless the
	// meta-parameter early_copies = 1): an iteration issues its wgmmas
	// first and the copies of a later stage after them, so that the
	// fragment loads are not queued behind the copies and the tensor cores
	// are given the next products sooner (the copies rewrite the stage
	// that the iteration before last read, which every warp retired before
	// that barrier, so their place is free either way). The H200,
	// 2026-12-03: matmul 4096³ TF32 304.6 → 306.2 TFLOP/s, the BERT
	// layer's A·Bᵀ 4096×768×3072 250 → 264, 4096×768×768 220 → 235; none
	// slower beyond the calls' spread.
	lateCopies bool
	// oneBlock (swapped 3xTF32, not ws or wg_ss, unless the meta-parameter
	// x3_blocks = 2): one block accumulator and one group of wgmmas in
	// flight, the next stage's pass and fragments loaded while it runs
	// (oneBlockLoop); x3_blocks = 2 keeps two blocks, each iteration's
	// wgmmas left running under the next one's, which with two sets of
	// fragments held by the wgmmas takes 256 registers at 128×128 and spills
	oneBlock bool
	// x3Span: the iterations one block of a oneBlock loop sums before it
	// is added to the accumulator (meta-parameter x3_span: 1, 2 or 4;
	// default 2): the tensor cores' sums span 32·x3Span of k, and the
	// accumulator waits for the tensor cores once in x3Span iterations.
	// The H200, 2026-12-03 (r19b), 4096³ TFLOP/s: 1 97.9, 2 100.5, 4 77.2
	// (255 registers, 432 B spilled); max error of the largest reference
	// 5.1e-7, 6.1e-7, 1.0e-6 (ieee FMA 2.6e-6)
	x3Span int
	// tma (swapped TF32 form at tiles of tmaDefaultRows rows, or where
	// the meta-parameter tma = 1; tma = 0 keeps cp.async; tma.go): A's
	// tile of each stage is one tensor copy from thread 0 completing on
	// the stage's full mbarrier, not cp.async copies; tmaDeclined says why
	// tma = 1 was not applied
	tma         *tmaCopy
	tmaDeclined string
	// cluster (meta-parameter cluster = 2, with A's tensor copies): the
	// kernel's CTAs run in clusters of 2 along program axis 1 (the
	// output's columns), whose two CTAs read the same tiles of A: each
	// copies half of every stage's tile and multicasts it into both
	// (tma.go); clusterDeclined says why cluster = 2 was not applied
	cluster         int
	clusterDeclined string
	// tmaB (with A's tensor copies, where B's load suits them; the
	// meta-parameter tma_b = 0 keeps cp.async, 1 asks for them with the
	// loop's barrier, 2 without it, the default but at bf16, where only
	// asked): B's tile of each stage is one four-dimensional tensor copy
	// from thread 0 too (three-dimensional at bf16), on the same full
	// mbarrier, laid out for its fragment reads (TensorMap.Paired,
	// tmaBOffset; at bf16 Groups32, tmaBF16Offset); tmaBDeclined says why
	// not where asked. noBar: no copy
	// is left to the threads, so the loop has no CTA-wide barrier: each
	// thread releases a stage on its empty mbarrier once its wgmmas that
	// read it are retired, and thread 0 waits on that before it copies
	// into the stage again. The H200, 2026-12-04 (r26d, one call, each
	// kernel twice beside the other), TFLOP/s cp.async → tma_b = 2:
	// 4096³ 305–309 → 304–317, gelu(x·W+b) 290–297 → 298–305,
	// 4096×4096×8192 308–316 → 312–319
	tmaB         *tmaCopy
	tmaBDeclined string
	noBar        bool
	// farCopies (noBar with the copies after the wgmmas, the default;
	// meta-parameter tma_ahead = 0 keeps stages-2): the copies run
	// stages-1 iterations ahead: iteration i copies into the slot of
	// iteration i−1, which thread 0 waits for every thread to release in
	// iteration i (after its own release, the wgmmas issued). The H200,
	// 2026-12-04 (r26h, one call, each kernel four times beside the
	// other), TFLOP/s stages-2 → stages-1: 4096³ 314–322 → 321–330,
	// gelu(x·W+b) 307–310 → 311–314, 4096×4096×8192 321–332 → 331–337,
	// the BERT layer's 4096×3072×768 267–269 → 273–280, with gelu
	// 220–222 → 225–227
	farCopies bool
	copy      [2]*Layout
	vw        [2]int
	// rb (swapped TF32 form, B's rows not 16-byte aligned, meta-parameter
	// realign_b = 1): B copied in 16-byte chunks from each row's phase
	// (realign.go); rbDeclined says why the copy layout did not suit it
	rb         *realignB
	rbDeclined string
	// epiLate: the kernel's epi_late (chooseEpiLate), for the dump
	epiLate int
	// staged (swapped form, meta-parameter wg_stage = 1, A stored
	// transposed): wgmma reads A K-major from shared memory, and Aᵀ is
	// m-contiguous in memory, so its copies into the K-major tile would be
	// 4 bytes wide, a warp's 32 copies spread over 32 rows of k. Instead A
	// is copied as the other transposed operands are, 16 bytes wide along
	// m into a (plain) staging tile a of [k][m] in the stage, and each
	// thread, once its copies have landed, transposes them (rounded to
	// TF32, split for 3xTF32, converted for bf16) into the stage's K-major
	// tile ak (alo, abf) that the wgmmas read by descriptor. Both tiles
	// are in the stage, so the ring's argument (a stage is rewritten only
	// after every warp retired the wgmmas that read it) covers ak.
	staged bool
	ak     smemTile
	// ws (swapped form, meta-parameter ws = 1): warp-specialised (wsLoop).
	// A producer of NumWarps more warps (launched beside the layouts'
	// NumWarps, whose geometry its threads repeat) only copies stages, and
	// the NumWarps consumer warps only run the wgmmas; full and empty
	// mbarriers per stage hand the stages over, without a CTA-wide barrier
	// in the loop. wsLag: how many iterations a producer thread's copies
	// run ahead of its pass over them (rounding to TF32, converting to
	// bf16, splitting, transposing; 0 where no pass is needed: the copies
	// complete on the full barrier themselves, cp.async.mbarrier.arrive);
	// wsRegs: setmaxnreg's counts for the producer and the consumers (0:
	// none, where the launch's share already suffices)
	ws bool
	// wsTMA (ws = 2): the producer's first thread issues the tensor
	// copies of A and B (tma, tmaB), waiting on each stage's empty
	// mbarrier; the producer is a warpgroup that gives its registers to
	// the consumers (setmaxnreg) and whose other warps exit, or with
	// ws_warps = 1 one warp (wsPlan, wsTMAProducer)
	wsTMA  bool
	wsLag  int
	wsRegs [2]int
	// wsWarps: the producer's warps, 4 (one warpgroup) where its copies
	// can be laid out over 4 warps (wsCopy: the layouts of loads copied
	// along their rows; copy's are rebuilt over 4 warps), else NumWarps
	wsWarps int
	wsCopy  [2]*Layout
	// wsDeclined: why ws = 1 was not applied (the launch's registers a
	// thread cannot hold the consumers' accumulators: wsPlan)
	wsDeclined string
}

func (p *pipe) x3() bool { return p.dot.Prec == tile.PrecTF32x3 }

// oneBlockPlanned reports whether p, 3xTF32, will take the one-block loop
// (oneBlock is set after the tensor copies' plan).
func (p *pipe) oneBlockPlanned(l *lowerer) bool {
	return p.swapped && p.x3() && !p.ws && !p.ss && l.k.Meta["x3_blocks"] != 2
}

// invariantsInPrologue: a warp-specialised loop keeps every invariant
// value in the prologue (no epi_late): its setmaxnreg split is sized for
// the registers the launch gives, and values moved out of the prologue
// let ptxas allocate fewer (the H200 refused such a launch, r25k). ws = 2
// without a split (4 + 4 warps, or one producer warp) is not held to it;
// ws = 1 without one keeps the old placement, unmeasured otherwise.
func (p *pipe) invariantsInPrologue() bool {
	return p.ws && (!p.wsTMA || p.wsRegs != [2]int{})
}

func (p *pipe) bf16() bool { return p.dot.Prec == tile.PrecBF16 }

// copyPass: a swapped loop's copies of A are passed over once they land
// (roundCopies: 3xTF32's split, bf16's conversion, the staged form's
// transposition); TF32's A is read by the tensor cores as it landed (they
// truncate, as the interpreter does).
func (p *pipe) copyPass() bool { return p.x3() || p.bf16() || p.staged }

// wgmmaDesc64 is wgmmaDesc for a K-major operand with the 64-byte swizzle
// (rows of 64 bytes, 8-row groups 512 bytes apart), swizzle mode 2.
const wgmmaDesc64 uint64 = 1<<16 | (512>>4)<<32 | 2<<62

// ahead is how many iterations' copies are in flight before the first
// iteration runs.
//
// The swapped form issues stages-2 ahead: cp.async rewrites a stage's A,
// which the wgmmas read, only after every warp retired them. Staged, and
// at bf16, the copies land in tiles (staging, A's f32 tile, B) that are
// read synchronously (by the transposing or converting pass and the
// fragment loads) before the iteration's barrier returns, so stages-1
// ahead; the stage's K-major tile (ak, abf) is
// rewritten by the transposing pass of iteration i+stages, after the
// barrier of iteration i+stages-1, which every warp passes after retiring
// iteration i's wgmmas (wait_group 1 in iteration i+1) when stages ≥ 3.
// Without the loop's barrier (farCopies) stages-1: the copies wait on the
// empty mbarrier of the slot they rewrite.
func (p *pipe) ahead() int {
	if p.noBar && p.farCopies {
		return p.stages - 1
	}
	if p.swapped && !p.staged && !p.bf16() {
		return p.stages - 2
	}
	return p.stages - 1
}

// accLayout is the layout of the accumulator value [m, n]: the mma layout,
// or for swapped wgmmas the mma layout of the [n, m] block Cᵀ with the
// value's dimensions swapped.
func (p *pipe) accLayout() Layout {
	if p.swapped {
		return Layout{B: p.acc, Src: []int{1, 0}}
	}
	return plain(p.acc)
}

func (p *pipe) String() string {
	if p.swapped {
		x3, k := "", 8
		if p.x3() {
			x3 = fmt.Sprintf(", 3 a k step, low parts of A %v, each iteration summed in a block accumulator", p.alo)
			if p.oneBlock {
				x3 = fmt.Sprintf(", 3 a k step, low parts of A %v, one block accumulator a span of %d iterations, the next stage's fragments loaded while the wgmmas run", p.alo, p.x3Span)
			}
		}
		if p.bf16() {
			x3, k = fmt.Sprintf(", converted into the stage's [%d][%d]bf16 tile at +%d, 64-byte swizzle", p.m, p.k, p.abf.Off), 16
		}
		if p.staged {
			x3 += fmt.Sprintf(", Aᵀ copied %d wide into [k][m] and transposed by its threads", p.vw[0])
			if !p.bf16() {
				x3 += fmt.Sprintf(" into %v", p.ak)
			}
		}
		ahead := fmt.Sprintf("%d ahead", p.ahead())
		if p.lateCopies {
			ahead += ", issued after the wgmmas"
		}
		if p.tma != nil {
			ahead += fmt.Sprintf(", A by one tensor copy a stage from thread 0 (rows of %d), full mbarriers", p.tma.lda)
		}
		if p.tmaDeclined != "" {
			ahead += "; tma = 1 declined: " + p.tmaDeclined
		}
		if p.tmaB != nil {
			groups := "interleaved pairs of 32"
			if p.tmaB.groups32 {
				groups = "groups of 32"
			}
			ahead += fmt.Sprintf(", B by one tensor copy a stage too (rows of %d, columns in %s)", p.tmaB.lda, groups)
			if p.noBar {
				ahead += ", empty mbarriers and no CTA barrier in the loop"
			}
		}
		if p.tmaBDeclined != "" {
			ahead += "; tma_b declined: " + p.tmaBDeclined
		}
		if p.cluster > 0 {
			ahead += fmt.Sprintf(", clusters of %d along the columns: each CTA copies half of A's tile to both, empty mbarriers between them", p.cluster)
		}
		if p.clusterDeclined != "" {
			ahead += "; cluster declined: " + p.clusterDeclined
		}
		if p.wsTMA {
			ahead = fmt.Sprintf("warp-specialised: %d producer warps, the first one's first thread issuing the tensor copies of A and B, full/empty mbarriers", p.wsWarps)
			if p.wsRegs[0] > 0 {
				ahead += fmt.Sprintf(", setmaxnreg %d/%d", p.wsRegs[0], p.wsRegs[1])
			}
		} else if p.ws {
			ahead = fmt.Sprintf("warp-specialised: %d producer warps, full/empty mbarriers, pass %d behind the copies", p.wsWarps, p.wsLag)
			if p.wsLag == 0 {
				ahead = fmt.Sprintf("warp-specialised: %d producer warps, full/empty mbarriers, copies completing on full", p.wsWarps)
			}
			if p.wsRegs[0] > 0 {
				ahead += fmt.Sprintf(", setmaxnreg %d/%d", p.wsRegs[0], p.wsRegs[1])
			}
		}
		if p.wsDeclined != "" {
			ahead += "; ws = 1 declined: " + p.wsDeclined
		}
		if p.rb != nil {
			ahead += fmt.Sprintf(", B realigned (rows of %d mod 4 words copied in 16-byte chunks from their phase)", p.rb.nw)
		}
		if p.rbDeclined != "" {
			ahead += "; realign_b declined: " + p.rbDeclined
		}
		if p.epiLate != 0 && !p.invariantsInPrologue() {
			ahead += fmt.Sprintf(", the epilogue's invariant values after the loop (epi_late %d)", p.epiLate)
		}
		b := p.b.String()
		if p.tmaB != nil {
			b = fmt.Sprintf("[%d][%d]f32 at +%d as its tensor copy lays it out", p.b.Rows, p.b.Cols, p.b.Off)
		}
		return fmt.Sprintf("dot %%%d %dx%dx%d: wgmma m64n%dk%d %s on Cᵀ = Bᵀ·Aᵀ (Bᵀ from registers, A K-major%s), %d stages of %d B (%s; A %v; B %s), %d warpgroups, accumulator %s of Cᵀ",
			p.dot.ID, p.m, p.n, p.k, p.m, k, p.dot.Prec, x3, p.stages, p.stageBytes, ahead, p.a, b, p.wm/4, p.acc.key())
	}
	if p.wgmma {
		return fmt.Sprintf("dot %%%d %dx%dx%d: wgmma m64n%dk8 tf32 (A from registers, B K-major %v), %d stages of %d B (A %v; B %v), %d warpgroups, accumulator %s",
			p.dot.ID, p.m, p.n, p.k, p.n, p.bt, p.stages, p.stageBytes, p.a, p.b, p.wm/4, p.acc.key())
	}
	inst := "m16n8k8 tf32"
	switch p.dot.Prec {
	case tile.PrecBF16:
		inst = "m16n8k16 bf16"
	case tile.PrecTF32x3:
		inst = "m16n8k8 tf32, 3 per tile (3xTF32)"
	}
	return fmt.Sprintf("dot %%%d %dx%dx%d: mma.sync %s, %d stages of %d B (A %v; B %v), warps %dx%d, warp tile %dx%d, accumulator %s",
		p.dot.ID, p.m, p.n, p.k, inst, p.stages, p.stageBytes, p.a, p.b, p.wm, p.wn, p.m/p.wm, p.n/p.wn, p.acc.key())
}

// accRegs are the accumulator registers c0..c3 of m16n8 tile (i, j) of the
// thread's warp tile.
func (p *pipe) accRegs(acc *lval, i, j int) [4]string {
	slots := p.acc.slots()
	var out [4]string
	for si, s := range slots {
		if s.Rep[0] != 0 || s.Rep[1] != 0 || s.W[1] != j || s.W[0]/2 != i {
			continue
		}
		out[2*(s.W[0]%2)+s.S[1]] = acc.regs[si]
	}
	return out
}

// maxSmem is the dynamic shared memory a CTA may use: 227 KB on sm_90,
// 163 KB on sm_80.
func maxSmem(arch int) int {
	if arch >= 90 {
		return 227 << 10
	}
	return 163 << 10
}

// matchPipe returns the plan for loop f if it is a K loop of one TF32 dot
// that the tensor cores can run pipelined, else nil.
func (l *lowerer) matchPipe(f *tile.Value) *pipe {
	body := f.Body
	yield := body.Values[len(body.Values)-1]
	var p *pipe
	for i, y := range yield.Args {
		if y.Op != tile.OpDot || y.Args[2] != body.Args[1+i] {
			continue
		}
		if p != nil {
			return nil // two dots
		}
		p = &pipe{loop: f, dot: y, accIdx: i}
	}
	if p == nil {
		return nil
	}
	d := p.dot
	if d.Prec == tile.PrecIEEE || d.Prec == tile.PrecTF32TB || d.Type.DType != tile.F32 {
		return nil // PrecTF32TB: MMA loops (mmaloop.go) or the dot through shared memory
	}
	p.m, p.k, p.n = d.Args[0].Type.Shape.Dims[0], d.Args[0].Type.Shape.Dims[1], d.Args[1].Type.Shape.Dims[1]
	kstep := 8 // m16n8k8 tf32; bf16's m16n8k16 takes 16
	if d.Prec == tile.PrecBF16 {
		kstep = 16
	}
	var ok bool
	if p.wm, p.wn, ok = mmaWarps(p.m, p.n, l.opt.NumWarps); !ok || p.k%kstep != 0 {
		return nil
	}
	// wgmma where asked for (meta-parameter wgmma = 1) and the tile fits it:
	// a warpgroup per 64 rows, N up to 256, K steps of one 128-byte row
	nw := l.opt.NumWarps
	p.wgmma = l.opt.Arch >= 90 && l.k.Meta["wgmma"] == 1 && d.Prec == tile.PrecTF32 && nw%4 == 0 && p.m == 16*nw && p.n%8 == 0 && p.n <= 256 && p.k == 32
	if p.wgmma {
		p.wm, p.wn = nw, 1
	}
	// the swapped form: a warp per 16 columns, wgmma's N the tile's rows
	p.swapped = l.opt.Arch >= 90 && l.k.Meta["wgmma"] == 2 && d.Prec != tile.PrecIEEE && nw%4 == 0 && p.n == 16*nw && p.m%8 == 0 && p.m <= 256 && p.k == 32
	if p.swapped {
		p.wm, p.wn = nw, 1
		p.epiSmem = l.k.Meta["epi_smem"] == 1
		ws := l.k.Meta["ws"]
		p.ws = (ws == 1 || ws == 2) && nw <= 8 && l.wsAlone(f)
		p.wsTMA = p.ws && ws == 2
	}
	only := func(v, user *tile.Value) bool {
		us := l.users[v.ID]
		return len(us) == 1 && us[0] == user
	}
	acc := body.Args[1+p.accIdx]
	if !only(acc, d) || !only(d, yield) {
		return nil
	}
	for i := range p.loads {
		ld := d.Args[i]
		if ld.Op != tile.OpLoad || !only(ld, d) || (len(ld.Args) > 2 && !isZero(ld.Args[2])) {
			return nil
		}
		p.loads[i] = ld
	}
	// the rest of the body computes addresses and masks only
	for _, v := range body.Values {
		switch {
		case v == d || v == p.loads[0] || v == p.loads[1] || v == yield:
		case v.Op == tile.OpLoad || v.Op == tile.OpStore || v.Op == tile.OpAtomicAdd || v.Op == tile.OpDot ||
			v.Op == tile.OpFor || v.Op == tile.OpReduceSum || v.Op == tile.OpReduceMax || v.Op == tile.OpReduceMin:
			return nil
		}
	}
	// the other carried values run ahead of the loop: nothing may read them after it
	for _, r := range forResults(l.k, f) {
		if int(r.Aux) != p.accIdx && len(l.users[r.ID]) > 0 {
			return nil
		}
	}
	if !p.swapped {
		p.acc = l.intern(mmaLayout(p.m, p.n, p.wm, p.wn))
	}
	p.a, p.b = operandTiles(p.m, p.n, p.k)
	l.transposedOperands(p)
	if p.swapped {
		// Cᵀ's accumulator; A's rows of 128 bytes in wgmma's 128-byte
		// swizzle (chunk ^ row%8 in a 1024-aligned tile); B's rows
		// swizzled for the fragment reads (operandTiles: lane (g, t) reads
		// rows k+t and k+t+4 of column g, as mma.sync's B)
		p.acc = l.intern(mmaLayout(p.n, p.m, nw, 1))
		if p.staged {
			l.stagedTiles(p)
		} else {
			p.a.Swz = swizzle{1, 1, 8}
		}
		if p.x3() && !p.staged {
			p.alo = p.a
			p.b.Off += p.a.bytes()
			p.alo.Off = p.a.bytes()
		}
		if p.bf16() {
			// B's fragments of m64nNk16: lane (g, t) reads rows k+2t and
			// k+2t+1 (and 8 below) of columns g and g+8; where B is stored
			// [n][k] (bT), columns k+2t and k+2t+1 of rows g and g+8 by one
			// 8-byte load, a half warp's 16 lanes a phase
			var gb [][]access
			if p.bT {
				gb = bf16PairGroups(p.n, p.k)
			} else {
				for r := 0; r < p.k; r += 8 {
					for c := 0; c < p.n; c += 8 {
						for h := 0; h < 2; h++ {
							var g []access
							for lane := 0; lane < 32; lane++ {
								g = append(g, access{r + 2*(lane%4) + h, c + lane/4, 1})
							}
							gb = append(gb, g)
						}
					}
				}
			}
			p.b.Swz = chooseSwizzle(p.b, gb, 8)
			p.abfBytes = p.m * 2 * p.k
			if !p.staged {
				// the bf16 tile first in the stage, then A's f32 tile
				p.abf = smemTile{Rows: p.m, Cols: p.k / 2}
				p.a.Off += p.abfBytes
				p.b.Off += p.abfBytes
			}
			p.bss = l.k.Meta["b_smem"] == 1 && !p.staged && !p.bT
		}
	}
	if p.wgmma {
		// B is read by the transposing pass, lane k reading row k's chunks:
		// phases of 8 rows conflict-free under chunk ^ row%8
		p.b.Swz = swizzle{1, 1, min(8, p.n/4)}
	}
	l.planRealignB(p)
	p.stageBytes = p.a.bytes() + p.b.bytes() + p.alo.bytes()
	if p.swapped {
		p.stageBytes = p.b.Off + p.b.bytes() // B last
		if p.bss {
			// then B's bf16 tile, 1024-aligned (swizzle atoms of 8 rows of 128 bytes)
			p.bbf = smemTile{Off: (p.stageBytes + 1023) / 1024 * 1024, Rows: p.k, Cols: p.n / 2}
			p.stageBytes = p.bbf.Off + p.bbf.bytes()
		}
		p.stageBytes = (p.stageBytes + 1023) / 1024 * 1024 // each stage's wgmma tile 1024-aligned
	}
	p.stages = 3
	if s, ok := l.k.Meta["num_stages"]; ok {
		p.stages = s
	}
	if p.swapped {
		p.stages = max(p.stages, 3)
	}
	extra := 0
	if p.ws {
		extra = 1024 // the mbarriers, before the 1024-aligned scratch region
	}
	if p.wgmma {
		p.btStride = (p.n*128 + 1023) / 1024 * 1024
		extra = 1024 + 2*p.btStride // two K-major B, 1024-aligned
	}
	p.stages = min(p.stages, (maxSmem(l.opt.Arch)-extra)/p.stageBytes)
	if p.stages < 2 || p.ahead() < 1 {
		return nil
	}
	if p.ws {
		l.wsPlan(p)
	}
	l.planTensorCopies(p)
	if p.wsTMA && (p.tma == nil || p.tmaB == nil) {
		why := p.tmaDeclined + p.tmaBDeclined
		if why == "" {
			why = "A's tensor copies do not apply"
		}
		p.ws, p.wsTMA, p.wsDeclined = false, false, "ws = 2 needs A's and B's tensor copies: "+why
		p.wsWarps, p.wsRegs = 0, [2]int{}
		l.planTensorCopies(p) // as the plain form
	}
	p.lateCopies = p.swapped && !p.ws && !p.copyPass() && l.k.Meta["early_copies"] != 1
	// (after the iteration's release only: before it, thread 0 would wait
	// for its own)
	if v, ok := l.k.Meta["tma_ahead"]; !ok || v != 0 {
		p.farCopies = p.noBar && p.lateCopies
	}
	p.oneBlock = p.swapped && p.x3() && !p.ws && !p.ss && l.k.Meta["x3_blocks"] != 2
	if p.oneBlock {
		p.x3Span = 2
		if s := l.k.Meta["x3_span"]; s == 1 || s == 4 {
			p.x3Span = s
		}
	}
	if p.wgmma {
		ring := p.stages * p.stageBytes
		p.bt = smemTile{Off: (ring + 1023) / 1024 * 1024, Rows: p.n, Cols: p.k, Swz: swizzle{1, 1, 8}}
	}
	return p
}

// planTensorCopies plans p's tensor copies (tma, tmaB: where asked, or by
// default where they apply), its clusters and whether its loop needs no
// barrier. The reasons a default was declined are kept only for ws = 2,
// which needs both copies and says why not in the dump.
func (l *lowerer) planTensorCopies(p *pipe) {
	p.tma, p.tmaB, p.tmaDeclined, p.tmaBDeclined, p.noBar = nil, nil, "", "", false
	p.cluster, p.clusterDeclined = 0, ""
	if v, asked := l.k.Meta["tma"]; asked && v == 1 || !asked && p.swapped && (p.m == tmaDefaultRows || p.wsTMA || p.oneBlockPlanned(l) && !p.staged || p.bf16() && !p.staged && p.m >= tmaBF16Rows) {
		switch {
		case !p.swapped || p.ws && !p.wsTMA || p.copyPass() && !(p.x3() && p.oneBlockPlanned(l) && !p.staged) && !(p.bf16() && !p.staged) || p.ss:
			p.tmaDeclined = "not the swapped TF32 form without a pass over its copies, 3xTF32 with one block or bf16 (nor ws, wg_ss, staged)"
		default:
			p.tma, p.tmaDeclined = l.tmaPlan(p)
		}
		if !asked && !p.wsTMA {
			p.tmaDeclined = "" // the default where it applies
		}
	}
	if c, asked := l.k.Meta["cluster"]; asked && c > 1 {
		p.cluster, p.clusterDeclined = l.clusterPlan(p, c)
	}
	if v, asked := l.k.Meta["tma_b"]; asked && (v == 1 || v == 2) || !asked && p.tma != nil && !p.bf16() { // bf16's where asked (unmeasured)
		p.tmaB, p.tmaBDeclined = l.tmaBPlan(p)
		p.noBar = p.tmaB != nil && v != 1 && !p.ws && !p.copyPass() // a pass over A needs the barrier
		if !asked && !p.wsTMA {
			p.tmaBDeclined = "" // the default where it applies
		}
	}
}

// transposedOperands finds the operands of p that are contiguous in memory
// along the tile's first dimension (Aᵀ along m, Bᵀ along k) and lays their
// tiles out in that order, swizzled for their fragment reads: A as [k][m],
// each lane reading rows k+t and k+t+4 of columns m+g and m+g+8 (as B's
// fragments are read); B as [n][k], read on mma.sync by two ld.shared.b32
// of row n+g (columns k+t, k+t+4), in the swapped wgmma form by ldmatrix.x4
// (it is wgmma's A there, as A is mma.sync's), at bf16 by one ld.shared.v2
// of columns k+2t and k+2t+1 (bf16PairGroups; the swizzle is chosen for
// those in matchPipe). Not for the transposing wgmma form, nor A in the
// swapped form (wgmma reads it K-major from shared memory) unless it is
// staged (wg_stage = 1, stagedFits: copied in stagedCopyBlocked's layout
// into a [k][m] staging tile, transposed by transposeCopies).
//
// The meta-parameter naive_copy = 1 keeps the old form (the tiles [m][k]
// and [k][n] whatever the memory order, 4-byte copies of a transposed
// operand): only to measure what the layout gains.
func (l *lowerer) transposedOperands(p *pipe) {
	if p.wgmma || l.k.Meta["naive_copy"] == 1 {
		return
	}
	for i, ld := range p.loads {
		if p.swapped && i == 0 && !l.stagedFits(p) {
			continue
		}
		inner, vw, contig := l.contigDim(ld)
		if !contig || inner != 0 {
			continue
		}
		sh := ld.Type.Shape.Slice()
		cb := newBlocked([]int{sh[1], sh[0]}, l.opt.NumWarps, 4)
		if i == 0 && p.swapped {
			cb = stagedCopyBlocked(sh[1], sh[0], l.opt.NumWarps)
		}
		p.copy[i] = &Layout{B: l.intern(cb), Src: []int{1, 0}}
		p.vw[i] = vw
	}
	if p.copy[0] != nil {
		p.aT = true
		p.a, _ = transposedATile(p.m, p.k)
		p.staged = p.swapped
	}
	p.b.Off = p.a.bytes()
	if p.copy[1] != nil {
		p.bT = true
		p.b, _ = transposedBTile(p.n, p.k, p.swapped)
		p.b.Off = p.a.bytes()
		if p.swapped && !p.ws && l.k.Meta["wg_ss"] == 1 && p.dot.Prec == tile.PrecTF32 && p.n%64 == 0 {
			p.ss = true
			p.b.Swz = swizzle{1, 1, 8} // wgmma's K-major 128-byte swizzle, as A's
		}
	}
}

// stagedTiles lays out a stage of the staged swapped form (p.staged): at
// its start (1024-aligned) the K-major tile the wgmmas read, ak (rows of m,
// 128 bytes of k, the 128-byte swizzle; for 3xTF32 then alo, the low
// parts, alike; for bf16 instead abf, rows of 64 bytes, the 64-byte
// swizzle), then A's staging tile a, [k][m], then B.
func (l *lowerer) stagedTiles(p *pipe) {
	front := 0
	if p.bf16() {
		p.abf = smemTile{Rows: p.m, Cols: p.k / 2}
		front = p.m * 2 * p.k
	} else {
		p.ak = smemTile{Rows: p.m, Cols: p.k, Swz: swizzle{1, 1, 8}}
		front = p.ak.bytes()
		if p.x3() {
			p.alo = p.ak
			p.alo.Off = front
			front += p.alo.bytes()
		}
	}
	// the staging tile: a quarter warp's 16-byte copies (and reads) are 4
	// rows by 2 chunks (stagedCopyBlocked), chunk ^ 2·(row%4): 8 chunks
	p.a = smemTile{Off: front, Rows: p.k, Cols: p.m, Swz: swizzle{1, 1, 1}}
	if p.m >= 32 {
		p.a.Swz = swizzle{1, 2, 8}
	}
	p.b.Off = p.a.Off + p.a.bytes()
}

// stagedCopyBlocked is the layout of the staged form's copies of Aᵀ's
// [k][m] tile: 4 elements of m a lane, a warp 2 lanes along m by 16 along
// k (32 bytes of each of 16 rows of memory: whole sectors), so that the
// transposing stores into the K-major tile are conflict-free: for each
// element e of the copies, a warp's 32 lanes write rows ≡ e mod 4 (two
// swizzle phases) at 16 consecutive k (4 chunks, 4 words each): 32 banks.
// With a warp's lanes along m (as the other transposed tiles are copied)
// they would write 2 banks, 16-way conflicts. The staging tile's swizzle
// (stagedTiles) keeps the 16-byte copies and their reads conflict-free.
func stagedCopyBlocked(k, m, numWarps int) *Blocked {
	b := &Blocked{Shape: []int{k, m}, SPT: []int{1, 4}, TPW: []int{16, 2}, WPC: []int{1, 1}}
	warps := numWarps
	for d := 0; d < 2 && warps > 1; d++ {
		room := max(1, b.Shape[d]/(b.SPT[d]*b.TPW[d]))
		w := min(warps, room&-room)
		b.WPC[d] = w
		warps /= w
	}
	b.WPC[0] *= warps
	return b
}

// stagedFits reports whether the swapped loop p is asked to stage A
// (meta-parameter wg_stage = 1) and three stages of the staged form fit in
// shared memory (at 256×128 TF32 they take 240 KiB: such a loop keeps
// the 4-byte copies into the K-major tile).
func (l *lowerer) stagedFits(p *pipe) bool {
	if l.k.Meta["wg_stage"] != 1 {
		return false
	}
	kt := 4 * p.m * p.k // ak
	switch {
	case p.bf16():
		kt /= 2
	case p.x3():
		kt *= 2
	}
	stage := (kt + 4*p.m*p.k + 4*p.k*p.n + 1023) / 1024 * 1024
	return 3*stage <= maxSmem(l.opt.Arch)
}

// transposedATile is A's m×k operand tile stored [k][m], swizzled so that
// mma.sync's fragment reads (lane (g, t): rows k+t, k+t+4 of column m+g,
// as B's) are conflict-free; groups are those reads.
func transposedATile(m, k int) (smemTile, [][]access) {
	t := smemTile{Rows: k, Cols: m}
	var g [][]access
	for r := 0; r < k; r += 8 {
		for c := 0; c < m; c += 8 {
			g = append(g, bFragGroups(r, c)...)
		}
	}
	t.Swz = chooseSwizzle(t, g, 4)
	return t, g
}

// bf16PairGroups are the swapped bf16 form's fragment reads of B stored
// [n][k] (an n×k tile): lane (g, t) of the warp of rows n..n+15 reads
// columns k+2t, k+2t+1 (and k+2t+8, k+2t+9) of rows n+g and n+g+8, 8
// bytes a lane, so each instruction is two phases of 16 lanes (4 rows of
// 8 words each: conflict-free where those rows' chunk pairs fall in
// distinct banks, as under chunk ^ 2·(row%4)).
func bf16PairGroups(n, k int) [][]access {
	var g [][]access
	for r := 0; r < n; r += 8 {
		for c := 0; c < k; c += 8 {
			for half := 0; half < 2; half++ {
				var acc []access
				for lane := 16 * half; lane < 16*half+16; lane++ {
					acc = append(acc, access{r + lane/4, c + 2*(lane%4), 2})
				}
				g = append(g, acc)
			}
		}
	}
	return g
}

// transposedBTile is B's k×n operand tile stored [n][k], swizzled for its
// fragment reads: on mma.sync lane (g, t) reads columns k+t and k+t+4 of
// row n+g; in the swapped wgmma form (swapped) ldmatrix.x4 reads 16 rows
// n of 8 k, as mma.sync's A. groups are those reads.
func transposedBTile(n, k int, swapped bool) (smemTile, [][]access) {
	t := smemTile{Rows: n, Cols: k}
	var g [][]access
	period := 8
	for r := 0; r < n; r += 8 {
		for c := 0; c < k; c += 8 {
			if swapped {
				if r%16 == 0 {
					g = append(g, ldmatrixGroups(r, c)...)
				}
				period = 16
				continue
			}
			for h := 0; h < 2; h++ {
				var acc []access
				for lane := 0; lane < 32; lane++ {
					acc = append(acc, access{r + lane/4, c + lane%4 + 4*h, 1})
				}
				g = append(g, acc)
			}
		}
	}
	t.Swz = chooseSwizzle(t, g, period)
	return t, g
}

// pipeDump lists the pipelined loops.
func (l *lowerer) pipeDump() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "// @%s: software-pipelined loops\n", l.k.Name)
	l.k.Walk(func(v *tile.Value) {
		if p, ok := l.pipes[v.ID]; ok {
			fmt.Fprintf(&sb, "for %%%d: %v\n", v.ID, p)
		}
	})
	return sb.String()
}

// pipelinedLoop emits loop v by plan p.
func (l *lowerer) pipelinedLoop(v *tile.Value, p *pipe) error {
	w := &l.body
	bounds := make([]string, 3)
	for i := range bounds {
		x, err := l.demand(v.Args[i], nil)
		if err != nil {
			return err
		}
		bounds[i] = x.regs[0]
	}
	it := v.Args[0].Type
	inits := v.Args[3:]
	lays := l.plan.loops[v.ID]
	carried := make([]*lval, len(inits))
	for i, in := range inits {
		x, err := l.demand(in, lays[i])
		if err != nil {
			return err
		}
		c := &lval{lay: lays[i], regs: make([]string, len(x.regs))}
		for _, cls := range l.classesOf(lays[i]) {
			r := l.reg(regClass(in.Type))
			emit(w, "mov.%s %s, %s", movType(in.Type), r, x.regs[cls[0]])
			for _, j := range cls {
				c.regs[j] = r
			}
		}
		carried[i] = c
	}
	l.needSmem(p.stages * p.stageBytes)
	if p.wgmma {
		l.needSmem(p.bt.Off + 2*p.btStride)
	}
	if p.wgmma || p.swapped {
		l.scratchAlign = 1024
		l.wgmma = true
	}
	if p.ws {
		return l.wsLoop(v, p, bounds, carried)
	}
	if p.rb != nil {
		if err := l.realignSetup(p); err != nil {
			return err
		}
	}
	ity, ptx := movType(it), ptxInt(it.DType)
	stepPos := l.reg("p")
	emit(w, "setp.gt.%s %s, %s, 0", ptx, stepPos, bounds[2])
	// the producer: iteration ivp into the buffer at byte offset sp
	ivp, sp := l.reg(regClass(it)), l.reg("r")
	emit(w, "mov.%s %s, %s", ity, ivp, bounds[0])
	emit(w, "mov.u32 %s, 0", sp)
	produce := func() error {
		live := l.reg("p")
		emit(w, "setp.lt.%s %s, %s, %s", ptx, live, ivp, bounds[1])
		emit(w, "and.pred %s, %s, %s", live, live, stepPos)
		if err := l.issueCopies(p, ivp, carried, sp, live); err != nil {
			return err
		}
		emit(w, "cp.async.commit_group")
		emit(w, "add.%s %s, %s, %s", ptx, ivp, ivp, bounds[2])
		wrap := l.nextStage(p, sp)
		if p.tma != nil {
			l.tmaAdvance(p, p.tma.fp, wrap, "")
			if p.cluster > 0 || p.noBar {
				l.clusterAdvance(p, wrap)
			}
		}
		return nil
	}
	var ph string // tma: the consumers' round parity
	if p.tma != nil {
		l.tmaStart(p)
		ph = l.reg("r")
		emit(w, "mov.u32 %s, 0", ph)
	}
	// prologue: ahead iterations in flight
	cnt := l.reg("r")
	emit(w, "mov.u32 %s, 0", cnt)
	proHead, proEnd := l.label("pipe_fill"), l.label("pipe_filled")
	w.WriteString(proHead + ":\n")
	done := l.reg("p")
	emit(w, "setp.ge.s32 %s, %s, %d", done, cnt, p.ahead())
	emit(w, "@%s bra.uni %s", done, proEnd)
	if err := produce(); err != nil {
		return err
	}
	emit(w, "add.s32 %s, %s, 1", cnt, cnt)
	emit(w, "bra.uni %s", proHead)
	w.WriteString(proEnd + ":\n")
	// the loop: consume iteration iv from the buffer at sc
	iv, sc := l.reg(regClass(it)), l.reg("r")
	emit(w, "mov.%s %s, %s", ity, iv, bounds[0])
	emit(w, "mov.u32 %s, 0", sc)
	bsel := ""
	if p.wgmma {
		bsel = l.reg("r")
		emit(w, "mov.u32 %s, 0", bsel)
	}
	if p.oneBlock {
		return l.oneBlockLoop(v, p, iv, sc, ph, bounds, stepPos, carried, produce)
	}
	var blk [2][]string // swapped 3xTF32: the two iterations' block accumulators, zero
	if p.swapped && p.x3() {
		for u := range blk {
			for range p.m / 2 {
				r := l.reg("f")
				emit(w, "mov.f32 %s, 0f00000000", r)
				blk[u] = append(blk[u], r)
			}
		}
	}
	head, end := l.label("pipe"), l.label("pipe_end")
	exits := [2]string{end, end}
	if blk[0] != nil {
		// leaving before iteration u, the previous one's block (the other
		// set's) is added once its wgmmas are retired
		exits = [2]string{l.label("pipe_exit"), l.label("pipe_exit")}
	}
	w.WriteString(head + ":\n")
	nonpos := ""
	// one iteration; swapped wgmmas unroll two, whose A fragments are in
	// registers of their own: one set is loaded while the other's wgmmas
	// still read theirs
	iteration := func(u int) error {
		stop := l.reg("p")
		emit(w, "setp.ge.%s %s, %s, %s", ptx, stop, iv, bounds[1])
		if nonpos == "" {
			nonpos = l.reg("p")
			emit(w, "not.pred %s, %s", nonpos, stepPos)
		}
		emit(w, "or.pred %s, %s, %s", stop, stop, nonpos)
		emit(w, "@%s bra.uni %s", stop, exits[u])
		emit(w, "cp.async.wait_group %d", p.ahead()-1)
		// a pass over A's tensor copies (bf16's conversion) waits for
		// them first; without one the wait comes after the barrier
		passTMA := p.swapped && p.copyPass() && p.tma != nil
		if passTMA {
			l.wsWait(p.tma.fc, ph, "tma_full")
		}
		if p.swapped {
			// this thread's copies of A (split, converted or
			// transposed where the pass is needed) are read by the
			// tensor cores (the async proxy) next
			if p.copyPass() {
				if err := l.roundCopies(p, sc); err != nil {
					return err
				}
			}
			if p.tma == nil || passTMA {
				emit(w, "fence.proxy.async.shared::cta")
			}
		}
		if !p.noBar {
			l.barrier(w)
		}
		if p.tma != nil && !passTMA {
			l.wsWait(p.tma.fc, ph, "tma_full") // A's tensor copy of this stage
		}
		if !p.lateCopies {
			if err := produce(); err != nil {
				return err
			}
		}
		switch {
		case p.swapped:
			l.wgmmaSwappedStep(p, sc, carried[p.accIdx], blk[u], l.swappedTail(v, p, iv, bounds[1], ptx))
			if p.cluster > 0 {
				l.clusterRelease(p)
			}
			if p.noBar {
				l.tmaRelease(p)
			}
			if p.lateCopies {
				if err := produce(); err != nil {
					return err
				}
			}
			if blk[0] != nil {
				l.addBlock(p, carried[p.accIdx], blk[1-u])
			}
		case p.wgmma:
			l.wgmmaStep(p, sc, bsel, carried[p.accIdx])
			emit(w, "sub.s32 %s, %d, %s", bsel, p.btStride, bsel) // the other bt next
		default:
			l.mmaStep(p, sc, carried[p.accIdx])
		}
		wrap := l.nextStage(p, sc)
		if p.tma != nil {
			l.tmaAdvance(p, p.tma.fc, wrap, ph)
		}
		emit(w, "add.%s %s, %s, %s", ptx, iv, iv, bounds[2])
		return nil
	}
	for u := 0; u < 1 || p.swapped && u < 2; u++ {
		if err := iteration(u); err != nil {
			return err
		}
	}
	emit(w, "bra.uni %s", head)
	if blk[0] != nil {
		for u, x := range exits {
			w.WriteString(x + ":\n")
			emit(w, "wgmma.wait_group.sync.aligned 0") // the last iteration's products
			l.addBlock(p, carried[p.accIdx], blk[1-u])
			emit(w, "bra.uni %s", end)
		}
	}
	w.WriteString(end + ":\n")
	if p.wgmma || p.swapped && blk[0] == nil {
		emit(w, "wgmma.wait_group.sync.aligned 0") // the last iteration's products
	}
	emit(w, "cp.async.wait_group 0")
	l.barrier(w) // the buffers are scratch again
	if p.cluster > 0 {
		l.clusterBarrier() // no CTA leaves while the other may arrive on its mbarriers
	}
	return l.pipeResults(v, p, carried[p.accIdx])
}

// nextStage moves the stage offset st (a register) to the next stage of
// pipe p's ring, wrapping to the first after the last; it returns the
// predicate that says it wrapped.
func (l *lowerer) nextStage(p *pipe, st string) (wrap string) {
	w := &l.body
	emit(w, "add.s32 %s, %s, %d", st, st, p.stageBytes)
	wrap = l.reg("p")
	emit(w, "setp.ge.s32 %s, %s, %d", wrap, st, p.stages*p.stageBytes)
	emit(w, "@%s mov.u32 %s, 0", wrap, st)
	return wrap
}

// oneBlockLoop emits the loop of a swapped 3xTF32 pipe with one block
// accumulator (pipe.oneBlock), after the copies' prologue: iteration i's
// wgmmas are issued with fragments loaded before, and while they run the
// stage of iteration i+1 is made ready (its copies waited for, A split,
// the barrier, the copies of iteration i+1+ahead issued) and its
// fragments loaded into the other of two sets. A block spans p.x3Span
// iterations: the first one's wgmmas start it from zero, the others'
// add onto it (wgmmas into one accumulator follow each other in flight);
// after the span's last, its wgmmas are retired (wait_group 0) and the
// block added to the accumulator in f32. Within a span, the iteration
// after the first retires the one before it (wait_group 1) before its
// barrier: that frees the other set of fragments, and iteration i+1+ahead's
// copies rewrite the stage of iteration i−1, which every warp has then
// retired. One block and two sets of fragments, not a block per
// iteration in flight.
func (l *lowerer) oneBlockLoop(v *tile.Value, p *pipe, iv, sc, ph string, bounds []string, stepPos string, carried []*lval, produce func() error) error {
	w := &l.body
	ptx := ptxInt(v.Args[0].Type.DType)
	acc := carried[p.accIdx]
	var blk []string
	for range p.m / 2 {
		r := l.reg("f")
		emit(w, "mov.f32 %s, 0f00000000", r)
		blk = append(blk, r)
	}
	head, exit, end := l.label("pipe"), l.label("pipe_exit"), l.label("pipe_end")
	stop, nonpos := l.reg("p"), l.reg("p")
	emit(w, "setp.ge.%s %s, %s, %s", ptx, stop, iv, bounds[1])
	emit(w, "not.pred %s, %s", nonpos, stepPos)
	emit(w, "or.pred %s, %s, %s", stop, stop, nonpos)
	emit(w, "@%s bra.uni %s", stop, end)
	// ready: the stage at sc landed (this thread's copies), A split, seen by
	// every thread and the tensor cores; the next copies issued
	ready := func() error {
		emit(w, "cp.async.wait_group %d", p.ahead()-1)
		if p.tma != nil {
			l.wsWait(p.tma.fc, ph, "tma_full") // the stage's tensor copies
		}
		if err := l.roundCopies(p, sc); err != nil {
			return err
		}
		emit(w, "fence.proxy.async.shared::cta")
		l.barrier(w)
		return produce()
	}
	if err := ready(); err != nil {
		return err
	}
	var f [2]*swFrags
	f[0] = l.swappedFrags(p, sc, nil, nil)
	f[1] = &swFrags{}
	for range f[0].hi {
		var hi, lo [4]string
		for j := range hi {
			hi[j], lo[j] = l.reg("r"), l.reg("r")
		}
		f[1].hi, f[1].lo = append(f[1].hi, hi), append(f[1].lo, lo)
	}
	span := p.x3Span
	w.WriteString(head + ":\n")
	for u := range max(2, span) {
		l.swappedIssue(p, sc, acc, blk, l.swappedTail(v, p, iv, bounds[1], ptx), f[u%2], u%span == 0)
		if wrap := l.nextStage(p, sc); p.tma != nil {
			l.tmaAdvance(p, p.tma.fc, wrap, ph)
		}
		emit(w, "add.%s %s, %s, %s", ptx, iv, iv, bounds[2])
		last := l.reg("p")
		emit(w, "setp.ge.%s %s, %s, %s", ptx, last, iv, bounds[1])
		emit(w, "@%s bra.uni %s", last, exit)
		if u%span != 0 {
			emit(w, "wgmma.wait_group.sync.aligned 1") // the iteration before, its stage and fragments
		}
		if err := ready(); err != nil {
			return err
		}
		l.swappedFrags(p, sc, f[1-u%2], nil)
		if (u+1)%span == 0 {
			emit(w, "wgmma.wait_group.sync.aligned 0")
			l.addBlock(p, acc, blk)
		}
	}
	emit(w, "bra.uni %s", head)
	w.WriteString(exit + ":\n")
	emit(w, "wgmma.wait_group.sync.aligned 0") // the last iteration's products
	l.addBlock(p, acc, blk)
	w.WriteString(end + ":\n")
	emit(w, "cp.async.wait_group 0")
	l.barrier(w) // the buffers are scratch again
	return l.pipeResults(v, p, acc)
}

// pipeResults gives loop v's result the accumulator acc (moved through
// shared memory into the row-major layout where p.epiSmem).
func (l *lowerer) pipeResults(v *tile.Value, p *pipe, acc *lval) error {
	if err := l.loopDone(v); err != nil {
		return err
	}
	for _, r := range forResults(l.k, v) {
		if int(r.Aux) == p.accIdx {
			if p.epiSmem {
				l.remember(r, l.epilogueThroughSmem(p, acc, l.natural[r.ID]))
			} else {
				l.remember(r, acc)
			}
		}
	}
	return nil
}

// epiPad is the padding, in words, of each row of the accumulator's tile in
// shared memory (epilogueThroughSmem): with rows n+4 words apart, a warp's
// scalar stores of one accumulator register (rows 2t, 2t+1 and columns g of
// the swapped mma layout, lane = 4g+t) fall in 32 different banks, and
// rows stay 16-byte aligned for the row-major layout's 16-byte loads.
const epiPad = 4

// epilogueThroughSmem moves the swapped form's accumulator acc (after the
// loop's wait_group 0, cp.async.wait_group 0 and barrier: the stages are
// scratch) into layout to, a row-major layout of the [m, n] block
// (epiSmemLayout), through a [m][n+epiPad] f32 tile at the start of the
// scratch region: each thread stores its accumulator words (4-byte stores,
// without bank conflicts), a barrier, then each thread loads its runs of
// consecutive elements of a row with ld.shared.v4 (v2, or scalar, where
// the layout's runs are shorter: a warp's scalar loads are then 32
// consecutive words of a row, conflict-free), and a barrier before the
// scratch region is reused.
func (l *lowerer) epilogueThroughSmem(p *pipe, acc *lval, to *Layout) *lval {
	w := &l.body
	stride := p.n + epiPad
	l.needSmem(p.m * stride * 4)
	// each address from a base register of its layout with an immediate
	// offset where the slots' coordinates differ by constants (copyBases),
	// not from coordinate registers of each slot (prologue registers, live
	// across the loop)
	elem := func(vc []int) int64 { return int64(4 * (vc[0]*stride + vc[1])) }
	var bases [2]copyBases
	addr := func(lay *Layout, s slot) string {
		own := func() string {
			row, col := l.valueCoord(lay, s, 0), l.valueCoord(lay, s, 1)
			i := l.reg("r")
			emit(w, "mad.lo.s32 %s, %s, %d, %s", i, row, stride, col)
			return l.smemSlot(w, i, 4, 0)
		}
		if l.perSlotAddr() {
			return own()
		}
		b := &bases[0]
		if lay != acc.lay {
			b = &bases[1]
		}
		return b.addr(lay, s, elem, own)
	}
	slots := acc.lay.B.slots()
	for _, cls := range l.classesOf(acc.lay) {
		emit(w, "st.shared.f32 [%s], %s", addr(acc.lay, slots[cls[0]]), acc.regs[cls[0]])
	}
	l.barrier(w)
	out := &lval{lay: to, regs: make([]string, nslots(to))}
	last := to.B.rank() - 1
	run := 1
	for run*2 <= min(4, to.B.SPT[last]) && to.B.SPT[last]%(run*2) == 0 {
		run *= 2
	}
	tslots := to.B.slots()
	classOf := make([]int, len(tslots))
	for c, cls := range l.classesOf(to) {
		for _, i := range cls {
			classOf[i] = c
		}
	}
	classes := l.classesOf(to)
	loaded := make([]bool, len(classes))
	for i := 0; i < len(tslots); i++ {
		c := classOf[i]
		if loaded[c] {
			continue
		}
		n := 1
		if tslots[i].S[last]%run == 0 && i+run <= len(tslots) {
			n = run
		}
		regs := make([]string, n)
		for j := range regs {
			regs[j] = l.reg("f")
		}
		a := addr(to, tslots[i])
		if n == 1 {
			emit(w, "ld.shared.f32 %s, [%s]", regs[0], a)
		} else {
			emit(w, "ld.shared.v%d.f32 {%s}, [%s]", n, strings.Join(regs, ", "), a)
		}
		for j, r := range regs {
			cj := classOf[i+j]
			loaded[cj] = true
			for _, k := range classes[cj] {
				out.regs[k] = r
			}
		}
		i += n - 1
	}
	l.barrier(w) // the tile's reads before the scratch region is reused
	return out
}

// issueCopies emits, in a scope of its own where the loop's induction
// variable is ivp and its carried values (but the accumulator) are
// carried, the cp.async copies of the two loads into the buffer at byte
// offset sp (lanes masked off, or all when live is false, fill zeros),
// then advances the carried values to the next iteration.
func (l *lowerer) issueCopies(p *pipe, ivp string, carried []*lval, sp, live string) error {
	w := &l.body
	body := p.loop.Body
	l.memo = append(l.memo, map[string]*lval{})
	l.loopDepth++
	defer func() {
		l.memo = l.memo[:len(l.memo)-1]
		l.loopDepth--
	}()
	l.remember(body.Args[0], &lval{regs: []string{ivp}})
	for i, a := range body.Args[1:] {
		if i != p.accIdx {
			l.remember(a, carried[i])
		}
	}
	lim := l.tailCopyLimit(p, ivp)
	for i, ld := range p.loads {
		t := p.a
		if i == 1 {
			t = p.b
		}
		lay := l.plan.access[ld.ID]
		if i == 0 && p.tma != nil {
			offs, err := l.demand(p.tma.offs, lay)
			if err != nil {
				return err
			}
			var bOffs *lval
			var bLay *Layout
			if p.tmaB != nil {
				bLay = l.plan.access[p.loads[1].ID]
				if bOffs, err = l.demand(p.tmaB.offs, bLay); err != nil {
					return err
				}
			}
			l.tmaIssue(p, offs, lay, bOffs, bLay, sp, live)
			continue
		}
		if i == 1 && p.tmaB != nil {
			continue // with A's (tmaIssue)
		}
		var need func(s slot) string
		if lim != "" {
			need = l.tailCopyNeeded(lay, 1-i, lim)
		}
		if i == 1 && p.rb != nil {
			if err := l.realignedCopies(p, ld, lay, live, sp, need); err != nil {
				return err
			}
			continue
		}
		n := min(len(ld.Args), 2)
		args, err := l.demandAll(ld.Args[:n], lay)
		if err != nil {
			return err
		}
		var mask *tile.Value
		if n > 1 {
			mask = ld.Args[1]
		}
		vw := l.vecWidth(lay, ld.Args[0], mask, 4)
		if p.copy[i] != nil {
			vw = p.vw[i]
		}
		trans := p.copy[i] != nil
		l.asyncCopies(args, lay, vw, live, sp, l.affineOf(ld.Args[0], map[*tile.Value]*affine{}),
			func(s slot) string { return l.tileSlot(t, lay, s, trans) },
			func(vc []int) int64 { return int64(t.slotAddr(vc, trans)) }, need)
	}
	// the next iteration's carried values
	yield := body.Values[len(body.Values)-1]
	lays := l.plan.loops[p.loop.ID]
	var moves []move
	for i, y := range yield.Args {
		if i == p.accIdx {
			continue
		}
		x, err := l.demand(y, lays[i])
		if err != nil {
			return err
		}
		for _, cls := range l.classesOf(lays[i]) {
			if src := x.regs[cls[0]]; src != carried[i].regs[cls[0]] {
				moves = append(moves, move{carried[i].regs[cls[0]], src, movType(y.Type)})
			}
		}
	}
	l.parallelMoves(w, moves, carried)
	return nil
}

// addBlock adds a block accumulator (in the order of the wgmma's
// destination registers) to the accumulator, in f32.
func (l *lowerer) addBlock(p *pipe, acc *lval, blk []string) {
	i := 0
	for j := 0; j < p.m/8; j++ {
		for _, r := range p.accRegs(acc, 0, j) {
			emit(&l.body, "add.f32 %s, %s, %s", r, r, blk[i])
			i++
		}
	}
}

// roundCopies passes over what this thread copied into A's tile of the
// stage at byte offset stage (the copies issueCopies made, zero fills
// included), once they have landed (pipe.copyPass): for 3xTF32 the tile
// keeps the high parts (rounded to nearest, roundTF32) and alo receives the
// low ones; for bf16 they go, rounded to bf16, into the stage's bf16 tile;
// the staged form transposes them (transposeCopies).
func (l *lowerer) roundCopies(p *pipe, stage string) error {
	if p.staged {
		l.transposeCopies(p, stage)
		return nil
	}
	w := &l.body
	l.readOwnCopies(p, 0, stage, func(lay *Layout, s slot, g, a string, regs []string) {
		if p.bf16() {
			// element (r, k) of the bf16 tile: r·64 + 2k, the 16-byte
			// chunk k/8 XORed with (r/2)%4 (the 64-byte swizzle)
			b := l.geo(fmt.Sprintf("abf|%v|%s|%s", p.abf, l.valueCoord(lay, s, 0), l.valueCoord(lay, s, 1)), func(w *strings.Builder) string {
				row, col := regOrZero(w, l, l.valueCoord(lay, s, 0)), regOrZero(w, l, l.valueCoord(lay, s, 1))
				ph, ch, in, r := l.reg("r"), l.reg("r"), l.reg("r"), l.reg("r")
				emit(w, "shr.u32 %s, %s, 1", ph, row)
				emit(w, "and.b32 %s, %s, 3", ph, ph)
				emit(w, "shr.u32 %s, %s, 3", ch, col)
				emit(w, "xor.b32 %s, %s, %s", ch, ch, ph)
				emit(w, "and.b32 %s, %s, 7", in, col)
				emit(w, "mad.lo.s32 %s, %s, 64, %s", r, row, l.smemAddr())
				emit(w, "mad.lo.s32 %s, %s, 16, %s", r, ch, r)
				emit(w, "mad.lo.s32 %s, %s, 2, %s", r, in, r)
				emit(w, "add.s32 %s, %s, %d", r, r, p.abf.Off)
				return r
			})
			l.storeBF16(g, regs, b, stage) // the stage's bf16 tile
			return
		}
		var lo []string // 3xTF32 (the other passes returned above)
		for _, r := range regs {
			x := l.reg("r")
			emit(w, "%smov.b32 %s, %s", g, x, r)
			l.roundTF32(w, g, r, x)
			d := l.reg("r")
			emit(w, "%ssub.f32 %s, %s, %s", g, d, x, r)
			l.roundTF32(w, g, d, d)
			lo = append(lo, d)
		}
		emit(w, "%sst.shared%s.b32 [%s], %s", g, vecSuffix(len(regs)), a, vecOperand(regs))
		if lo != nil {
			emit(w, "%sst.shared%s.b32 [%s+%d], %s", g, vecSuffix(len(lo)), a, p.alo.Off-p.a.Off, vecOperand(lo))
		}
	})
	if p.bss {
		l.convertB(p, stage)
	}
	return nil
}

// readOwnCopies calls f for each of this thread's copies of load i (0:
// A, 1: B) of pipe p in the stage: its layout, slot and guard, the
// copy's shared address (stage included) and its vw words read back.
func (l *lowerer) readOwnCopies(p *pipe, i int, stage string, f func(lay *Layout, s slot, g, addr string, regs []string)) {
	w := &l.body
	ld := p.loads[i]
	t := p.a
	if i == 1 {
		t = p.b
	}
	lay := l.plan.access[ld.ID]
	var mask *tile.Value
	if len(ld.Args) > 1 {
		mask = ld.Args[1]
	}
	vw := l.vecWidth(lay, ld.Args[0], mask, 4)
	l.ownedGroups(lay, vw, func(_ int, s slot, g string) {
		a := l.reg("r")
		emit(w, "add.s32 %s, %s, %s", a, stage, l.tileSlot(t, lay, s, false))
		regs := make([]string, vw)
		for j := range regs {
			regs[j] = l.reg("r")
		}
		emit(w, "%sld.shared%s.b32 %s, [%s]", g, vecSuffix(vw), vecOperand(regs), a)
		f(lay, s, g, a, regs)
	})
}

// storeBF16 rounds the f32 words regs to bf16 and stores them, 2 bytes
// each in order, at shared address base+stage (guard g).
func (l *lowerer) storeBF16(g string, regs []string, base, stage string) {
	w := &l.body
	a := l.reg("r")
	emit(w, "add.s32 %s, %s, %s", a, base, stage)
	if len(regs) == 1 {
		h := l.reg("h")
		emit(w, "%scvt.rn.bf16.f32 %s, %s", g, h, regs[0])
		emit(w, "%sst.shared.b16 [%s], %s", g, a, h)
		return
	}
	var packed []string
	for j := 0; j < len(regs); j += 2 {
		r := l.reg("r")
		emit(w, "%scvt.rn.bf16x2.f32 %s, %s, %s", g, r, regs[j+1], regs[j])
		packed = append(packed, r)
	}
	emit(w, "%sst.shared%s.b32 [%s], %s", g, vecSuffix(len(packed)), a, vecOperand(packed))
}

// convertB is the bss form's pass over this thread's copies of B in the
// stage: each copy of vw elements (n0..n0+vw-1 at one k, zero fills
// included) is read back, rounded to bf16 and written into the stage's
// bf16 tile bbf, the MN-major layout wgmma reads with the 128-byte
// swizzle: element (k, n) at (n/64)·(K/8)·1024 + (k/8)·1024 + (k%8)·128
// + 16·((n%64/8) ^ k%8) + 2·(n%8) — rows of 64 n (128 bytes) per k, 8
// such rows an atom, the atoms of k/8 1024 bytes apart (the descriptor's
// stride), those of each warpgroup's 64 n after them.
func (l *lowerer) convertB(p *pipe, stage string) {
	l.readOwnCopies(p, 1, stage, func(lay *Layout, s slot, g, _ string, regs []string) {
		b := l.geo(fmt.Sprintf("bbf|%v|%s|%s", p.bbf, l.valueCoord(lay, s, 0), l.valueCoord(lay, s, 1)), func(w *strings.Builder) string {
			k, n := regOrZero(w, l, l.valueCoord(lay, s, 0)), regOrZero(w, l, l.valueCoord(lay, s, 1))
			kr, ch, t, r := l.reg("r"), l.reg("r"), l.reg("r"), l.reg("r")
			emit(w, "and.b32 %s, %s, 7", kr, k)  // k%8
			emit(w, "shr.u32 %s, %s, 3", ch, n)  // n/8
			emit(w, "and.b32 %s, %s, 7", ch, ch) // n%64/8
			emit(w, "xor.b32 %s, %s, %s", ch, ch, kr)
			emit(w, "shr.u32 %s, %s, 6", t, n) // n/64
			emit(w, "mul.lo.u32 %s, %s, %d", r, t, p.k/8*1024)
			emit(w, "shr.u32 %s, %s, 3", t, k) // k/8
			emit(w, "mad.lo.s32 %s, %s, 1024, %s", r, t, r)
			emit(w, "mad.lo.s32 %s, %s, 128, %s", r, kr, r)
			emit(w, "mad.lo.s32 %s, %s, 16, %s", r, ch, r)
			emit(w, "and.b32 %s, %s, 7", t, n) // n%8
			emit(w, "mad.lo.s32 %s, %s, 2, %s", r, t, r)
			emit(w, "add.s32 %s, %s, %s", r, r, l.smemAddr())
			emit(w, "add.s32 %s, %s, %d", r, r, p.bbf.Off)
			return r
		})
		l.storeBF16(g, regs, b, stage)
	})
}

// transposeCopies is roundCopies of the staged form: this thread's copies
// of the stage's staging tile ([k][m], vw elements along m each, zero
// fills included) are read back and written, element by element, into the
// stage's K-major tile: as they are into ak for TF32 (the tensor cores
// truncate), high parts into ak and low parts into alo for 3xTF32, rounded
// to bf16 into abf. A copy's elements
// m0..m0+vw-1 (m0 a multiple of vw) share k, and their rows' swizzle
// phases are m0's with the low bits flipped by e: (m0+e)%8 = m0%8 ^ e for
// the 128-byte swizzle, ((m0+e)/2)%4 = (m0/2)%4 ^ e/2 for the 64-byte one.
func (l *lowerer) transposeCopies(p *pipe, stage string) {
	w := &l.body
	ld := p.loads[0]
	lay := l.plan.access[ld.ID]
	vw := p.vw[0]
	l.ownedGroups(lay, vw, func(_ int, s slot, g string) {
		a := l.reg("r")
		emit(w, "add.s32 %s, %s, %s", a, stage, l.tileSlot(p.a, lay, s, true))
		regs := make([]string, vw)
		for j := range regs {
			regs[j] = l.reg("r")
		}
		emit(w, "%sld.shared%s.b32 %s, [%s]", g, vecSuffix(vw), vecOperand(regs), a)
		// the K-major tile's row m0, column k: base (without the chunk)
		// and the chunk of row m0, kq
		mc, kc := l.valueCoord(lay, s, 0), l.valueCoord(lay, s, 1)
		t, rowBytes, kPerChunk, phShift, phMask, elem := p.ak, 128, 4, 0, 7, 4
		if p.bf16() {
			t, rowBytes, kPerChunk, phShift, phMask, elem = p.abf, 64, 8, 1, 3, 2
		}
		key := fmt.Sprintf("stg|%v|%s|%s", t, mc, kc)
		base := l.geo(key+"|base", func(w *strings.Builder) string {
			row, col := regOrZero(w, l, mc), regOrZero(w, l, kc)
			in, r := l.reg("r"), l.reg("r")
			emit(w, "and.b32 %s, %s, %d", in, col, kPerChunk-1)
			emit(w, "mad.lo.s32 %s, %s, %d, %s", r, row, rowBytes, l.smemAddr())
			emit(w, "mad.lo.s32 %s, %s, %d, %s", r, in, elem, r)
			if t.Off != 0 {
				emit(w, "add.s32 %s, %s, %d", r, r, t.Off)
			}
			return r
		})
		kq := l.geo(key+"|kq", func(w *strings.Builder) string {
			row, col := regOrZero(w, l, mc), regOrZero(w, l, kc)
			ph, r := l.reg("r"), l.reg("r")
			emit(w, "shr.u32 %s, %s, %d", ph, row, phShift)
			emit(w, "and.b32 %s, %s, %d", ph, ph, phMask)
			emit(w, "shr.u32 %s, %s, %d", r, col, log2(kPerChunk))
			emit(w, "xor.b32 %s, %s, %s", r, r, ph)
			return r
		})
		b := l.reg("r")
		emit(w, "add.s32 %s, %s, %s", b, base, stage)
		for e, x := range regs {
			ch, addr := kq, l.reg("r")
			if f := e >> phShift; f != 0 {
				ch = l.reg("r")
				emit(w, "xor.b32 %s, %s, %d", ch, kq, f)
			}
			emit(w, "mad.lo.s32 %s, %s, 16, %s", addr, ch, b)
			switch {
			case p.bf16():
				h := l.reg("h")
				emit(w, "%scvt.rn.bf16.f32 %s, %s", g, h, x)
				emit(w, "%sst.shared.b16 [%s+%d], %s", g, addr, e*rowBytes, h)
			case p.x3():
				hi, lo := l.reg("r"), l.reg("r")
				l.roundTF32(w, g, hi, x)
				emit(w, "%ssub.f32 %s, %s, %s", g, lo, x, hi)
				l.roundTF32(w, g, lo, lo)
				emit(w, "%sst.shared.b32 [%s+%d], %s", g, addr, e*rowBytes, hi)
				emit(w, "%sst.shared.b32 [%s+%d], %s", g, addr, e*rowBytes+p.alo.Off-p.ak.Off, lo)
			default:
				emit(w, "%sst.shared.b32 [%s+%d], %s", g, addr, e*rowBytes, x)
			}
		}
	})
}

// ownedGroups calls f for each access group of vw slots of layout lay
// that this thread owns (its first class index, that class's slot, and
// the guard of its instructions), skipping those no thread of it ever
// owns.
func (l *lowerer) ownedGroups(lay *Layout, vw int, f func(first int, s slot, g string)) {
	slots := lay.B.slots()
	classes := l.classesOf(lay)
	for ci := 0; ci < len(classes); ci += vw {
		first := classes[ci][0]
		own, never := l.owner(lay, slots[first])
		if never {
			continue
		}
		f(first, slots[first], guardOf(own))
	}
}

// asyncCopies issues the cp.async copies of a load in layout lay, vw
// words a group, from the addresses args[0] (masked by args[1] where
// given) into the shared address sp + at(slot): masked lanes (and all in
// an iteration past the end, live false) copy nothing and fill zeros; a
// thread holding a copy of another's element does not copy at all.
//
// The addresses come from a few base registers with immediate offsets
// (copyBases): where the load's pointer is affine (ptr, nil if not known
// to be) a copy reads at [r+imm], r the address register of an earlier
// copy whose slot's coordinates differ from its own by the same constants
// in every thread, imm their byte distance; likewise it writes at
// [d+imm] where off (the byte offset in the tile of an element's value
// coordinates; nil: unknown) differs by a constant. The other slots'
// address registers go unused, and with them their per-slot offsets
// (prologue registers live across the loop: one 32-bit offset into
// memory and one into the tile per copy).
func (l *lowerer) asyncCopies(args []*lval, lay *Layout, vw int, live, sp string, ptr *affine, at func(s slot) string, off func(vc []int) int64, need func(s slot) string) {
	w := &l.body
	if l.perSlotAddr() {
		ptr, off = nil, nil
	}
	var src, dst copyBases
	l.ownedGroups(lay, vw, func(first int, s slot, g string) {
		if need != nil { // the copy only where needed, and by its owner
			if q := need(s); q != "" {
				own, _ := l.owner(lay, s)
				if own != "" {
					r := l.reg("p")
					emit(w, "and.pred %s, %s, %s", r, own, q)
					q = r
				}
				g = guardOf(q)
			}
		}
		pred := live
		if m := maskReg(args, first); m != "" {
			r := l.reg("p")
			emit(w, "and.pred %s, %s, %s", r, pred, m)
			pred = r
		}
		size := l.reg("r")
		emit(w, "selp.u32 %s, %d, 0, %s", size, 4*vw, pred)
		sa := args[0].regs[first]
		if ptr != nil {
			sa = src.addr(lay, s, ptr.step, func() string { return args[0].regs[first] })
		}
		newDst := func() string {
			r := l.reg("r")
			emit(w, "add.s32 %s, %s, %s", r, sp, at(s))
			return r
		}
		var da string
		if off != nil {
			da = dst.addr(lay, s, off, newDst)
		} else {
			da = newDst()
		}
		cache := "ca"
		if vw == 4 {
			cache = "cg"
		}
		emit(w, "%scp.async.%s.shared.global [%s], [%s], %d, %s", g, cache, da, sa, 4*vw, size)
	})
}

// tailCopyLimit: where the last iteration of swapped loop p runs only its
// first k steps of 8 (k_tail = 1: swappedTail), its copies of the rows of
// k past them would fill shared memory that no wgmma reads (at K = 33 and
// BLOCK_K = 32, 24 of the last iteration's 32 rows of k: of A's 4-byte
// copies, 3 in 8 of the loop's), so they are not issued. A copy at k
// coordinate kc of the tile, in the stage of the iteration at k = ivp, is
// needed where kc < kEnd − ivp, kEnd the last iteration's k plus its steps'
// 8·steps: for every earlier iteration that holds for every kc. The limit
// kEnd − ivp is a register computed here; "" where the copies are all
// issued: no k tail, a pass over the copies (3xTF32, bf16, the staged
// form: it reads what every copy wrote), the warp-specialised loop (its
// producer does not take the tail) or A by tensor copies.
func (l *lowerer) tailCopyLimit(p *pipe, ivp string) string {
	if !l.skipsTailCopies(p) {
		return ""
	}
	v := p.loop
	tail := l.swappedTail(v, p, ivp, "", "s32")
	lo, hi, st := v.Args[0].Aux, v.Args[1].Aux, v.Args[2].Aux
	end := lo + (hi-lo)/st*st + int64(8*tail.steps)
	lim := l.reg("r")
	emit(&l.body, "sub.s32 %s, %d, %s", lim, end, ivp)
	return lim
}

// skipsTailCopies reports whether swapped loop p leaves out its last
// iteration's copies past the k steps it runs (tailCopyLimit): with
// k_tail = 1 and K a constant with a tail shorter than BLOCK_K − 8, where
// the copies are cp.async, nothing passes over them, the loop is not
// warp-specialised and wgmma's A, B's fragments, is read by ld.shared
// (wgmmaSwappedStep then loads the fragments past the tail only in the
// iterations before the last: B as [k][n], or through a descriptor).
func (l *lowerer) skipsTailCopies(p *pipe) bool {
	v := p.loop
	if !p.swapped || p.ws || p.copyPass() || p.tma != nil || p.bT && !p.ss || p.oneBlock || ptxInt(v.Args[0].Type.DType) != "s32" {
		return false
	}
	tail := l.swappedTail(v, p, "", "", "s32")
	return tail != nil && 8*tail.steps < p.k
}

// tailCopyNeeded is asyncCopies' need for the copies of a load in layout
// lay whose value dimension kd is k, against tailCopyLimit's lim: the
// predicate (one a coordinate) that slot s's k coordinate is below lim.
func (l *lowerer) tailCopyNeeded(lay *Layout, kd int, lim string) func(s slot) string {
	preds := map[string]string{}
	return func(s slot) string {
		kc := l.valueCoord(lay, s, kd)
		if q, ok := preds[kc]; ok {
			return q
		}
		q := l.reg("p")
		emit(&l.body, "setp.lt.s32 %s, %s, %s", q, kc, lim)
		preds[kc] = q
		return q
	}
}

// perSlotAddr: the meta-parameter per_slot_addr = 1 keeps the old form,
// an address register for each copy and store (copyBases not used), to
// measure what the bases gain beside the default in one run; and the
// warp-specialised form (ws = 1, a candidate, no heuristic's default)
// keeps it always: its setmaxnreg split assumes the launch allocates the
// .maxntid bound's registers (168 at 384 threads), which ptxas did with
// the per-slot addresses, and with the bases it allocated fewer (the
// H200, 2026-12-02: bf16 128×128 on 8 + 4 warps, 142 a thread against
// the 166 its 80/208 split needs; the cuda package refused to load it).
func (l *lowerer) perSlotAddr() bool {
	return l.k.Meta["per_slot_addr"] == 1 || l.k.Meta["ws"] == 1
}

// copyBases are the base registers of the addresses of one load's copies
// (asyncCopies) or stores: each with the byte offsets of the slot whose
// address it holds, thread by thread (slotOffsets).
type copyBases []copyBase

type copyBase struct {
	offs []int64
	reg  string
}

// maxImm bounds the immediate offsets of copyBases: well inside the 24
// bits signed of an SASS address's immediate.
const maxImm = 1 << 22

// addr is the address of slot s as "reg+imm" (or "reg"): from a base whose
// slot's f (a byte offset as a function of the value coordinates) differs
// from s's by the same constant in every thread of lay, else from a new
// base, reg().
func (cb *copyBases) addr(lay *Layout, s slot, f func(vc []int) int64, reg func() string) string {
	offs := slotOffsets(lay, s, f)
	for _, b := range *cb {
		if d, ok := uniformDelta(b.offs, offs); ok && d > -maxImm && d < maxImm {
			if d == 0 {
				return b.reg
			}
			return fmt.Sprintf("%s+%d", b.reg, d) // +-d where negative
		}
	}
	r := reg()
	*cb = append(*cb, copyBase{offs, r})
	return r
}

// slotOffsets are f of the value coordinates of slot s, thread by thread
// (warp by warp, lane by lane) of layout lay (0 along a dimension the
// layout leaves out).
func slotOffsets(lay *Layout, s slot, f func(vc []int) int64) []int64 {
	warps := 1
	for _, n := range lay.B.WPC {
		warps *= n
	}
	offs := make([]int64, 32*warps)
	vc := make([]int, len(lay.Src))
	for warp := 0; warp < warps; warp++ {
		for lane := 0; lane < 32; lane++ {
			c := lay.B.coordOf(lane, warp, s)
			for i, d := range lay.Src {
				vc[i] = 0
				if d >= 0 {
					vc[i] = c[d]
				}
			}
			offs[32*warp+lane] = f(vc)
		}
	}
	return offs
}

// uniformDelta is s − b when it is the same in every thread; ok false
// otherwise.
func uniformDelta(b, s []int64) (d int64, ok bool) {
	d = s[0] - b[0]
	for i := range s {
		if s[i]-b[i] != d {
			return 0, false
		}
	}
	return d, true
}

func maskReg(args []*lval, slot int) string {
	if len(args) < 2 {
		return ""
	}
	return args[1].regs[slot]
}

// tileSlot is the byte offset, in a stage, of slot s of layout lay holding a
// value of the operand tile t (its element (i, j) at row j, column i of t
// where trans): a prologue register.
func (l *lowerer) tileSlot(t smemTile, lay *Layout, s slot, trans bool) string {
	r, c := l.valueCoord(lay, s, 0), l.valueCoord(lay, s, 1)
	if trans {
		r, c = c, r
	}
	key := fmt.Sprintf("tileslot|%v|%s|%s", t, r, c)
	return l.geo(key, func(w *strings.Builder) string {
		row, col := regOrZero(w, l, r), regOrZero(w, l, c)
		ph := l.phase(w, t.Swz, row)
		ch := l.reg("r")
		emit(w, "shr.u32 %s, %s, 2", ch, col)
		emit(w, "xor.b32 %s, %s, %s", ch, ch, ph)
		in := l.reg("r")
		emit(w, "and.b32 %s, %s, 3", in, col)
		return l.tileAddr(w, t, row, ch, in)
	})
}

// move is one register copy of a parallel assignment.
type move struct{ dst, src, typ string }

// parallelMoves emits the moves as one parallel assignment: through
// temporaries where a source is one of the carried registers.
func (l *lowerer) parallelMoves(w *strings.Builder, moves []move, carried []*lval) {
	isCarried := map[string]bool{}
	for _, c := range carried {
		if c == nil { // carried through shared memory (smemcarry.go)
			continue
		}
		for _, r := range c.regs {
			isCarried[r] = true
		}
	}
	stage := false
	for _, m := range moves {
		stage = stage || isCarried[m.src]
	}
	if stage {
		for j, m := range moves {
			t := l.reg(regClassOfMov(m.typ))
			emit(w, "mov.%s %s, %s", m.typ, t, m.src)
			moves[j].src = t
		}
	}
	for _, m := range moves {
		emit(w, "mov.%s %s, %s", m.typ, m.dst, m.src)
	}
}
