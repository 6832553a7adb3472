package codegen

import (
	"fmt"

	"github.com/tilefuse/tilefuse/tile"
)

// The warp-specialised form of the swapped wgmma K loop (meta-parameter
// ws = 1 beside wgmma = 2, sm_90a), as CUTLASS's warp-specialised Hopper
// GEMMs and FlashAttention-3 split the work of a K loop: a producer that
// only copies and consumers that only multiply, handing the stages over
// through mbarriers instead of a barrier of the whole CTA each iteration.
//
// The kernel is launched with the layouts' NumWarps and, after them, the
// producer's warps (wsPlan): one warpgroup, whose copies are laid out over
// its 4 warps (wsCopy, or copy rebuilt), or, where the loop's copies
// cannot be laid out afresh (carried pointers: wsNarrow) or ws_warps = 8
// asks, NumWarps warps in the other form's copy layouts. Every layout's
// warp coordinates are masked to its warps (powers of two), so producer
// warp NumWarps + w computes the copies (addresses, masks, swizzled
// destinations) of warp w of its layouts: the producer runs issueCopies
// and roundCopies as they are. Code before the
// loop runs in all warps (wsAlone: it has no effect but registers); after
// the loop the producer has exited and the barriers of the epilogue are
// named barrier 1 over the consumers' threads (lowerer.barrier).
//
// Each stage s has two mbarriers in a region of their own (not the
// scratch region, which the epilogue reuses): full[s], expecting one
// arrival from each producer thread (after its pass, or when its copies
// complete on it), and empty[s], one from each consumer thread. Producer iteration i (stage s = i mod S, round r = i / S):
//
//   - where a pass over the copies is needed (bf16
//     conversion, 3xTF32 splitting, staged transposition: roundCopies),
//     first the pass over iteration i − lag, whose copies have landed
//     (cp.async.wait_group lag−1: each iteration's copies are one group),
//     then fence.proxy.async (the wgmmas read the tiles through the async
//     proxy) and mbarrier.arrive on its full barrier;
//   - mbarrier.try_wait.parity on empty[s] for round r−1 (parity r+1 mod 2:
//     in round 0 the preceding phase counts as complete, so it passes);
//   - the copies of iteration i into stage s, committed as a group; without
//     a pass, cp.async.mbarrier.arrive.noinc on full[s] instead: the
//     arrival happens when the thread's copies have landed.
//
// After its last iteration the producer passes over the remaining lag
// iterations (cp.async.wait_group 0) and exits. Consumer iteration j waits
// on full[j mod S] for round j / S, issues the wgmmas of the stage
// (wgmmaSwappedStep: B's fragments by ld.shared, A by descriptor), leaves
// them running (wgmma.wait_group 1 retires iteration j−1's) and then
// releases stage j−1: each consumer thread arrives on its empty barrier,
// its fragment reads done and the wgmmas that read the stage retired. Every arrival of a phase precedes every arrival of the next
// (the producer cannot refill a stage before all consumers released it,
// nor the consumers run a round ahead of the producer), so parities
// suffice. A pass lag behind the copies delays the stage's hand-over by
// lag producer iterations and leaves the copies that much longer to land;
// with S stages the consumers may run S − lag − 1 iterations ahead of the
// producer's hand-overs (they hold two: the one they multiply and the one
// whose wgmmas are still running).
//
// With ws = 2 (wsTMA, A's and B's tensor copies) the producer has no
// copies of its own to lay out: its first thread waits on each stage's
// empty mbarrier and issues both tensor copies on the full one (one
// arrival: the expect_tx), and the consumers need no proxy fence
// (wsTMAProducer); the producer is a warpgroup whose other warps exit
// once setmaxnreg gave their registers away, or one warp (ws_warps = 1),
// which at 8 consumer warps the register file bounds as 12 warps (168 a
// thread: each SM sub-partition holds 16 K registers, and 9 warps put 3
// on one).
//
// Registers: at 8 consumer warps and a producer warpgroup (384 threads) a
// launch gives a thread 168 registers, fewer than a 256×128 tile's
// consumer needs (128 accumulators, two iterations' fragments); the
// producer gives its share back (setmaxnreg.dec to wsProducerRegs, or
// meta-parameter ws_regs) and the consumers take it (setmaxnreg.inc to
// the rest: 224 at TF32, 208 at bf16; with 8 producer warps, 512 threads,
// 216 and 200). At 4 consumer warps and 4 producer warps (256 threads)
// the launch's 255 suffice.

// wsProducerRegs is the producer's register count after setmaxnreg.dec:
// CUTLASS's warp-specialised kernels give their TMA producer 40; this
// producer holds the addresses of its cp.async copies and the words of its
// pass. ptxas 11.8 on stand-ins of the 256×128 kernels (sm_90; wgmmas,
// fences and setmaxnreg dropped, so that what stays live is the
// producer's loop, the prologue and stores of constants) used 40
// registers at TF32 and 56 at bf16 with 12 copies a producer thread (8
// producer warps), 56 and 80 with 24 (a warpgroup), without spills: wide
// is a pass that converts (bf16) or splits (3xTF32), many more than 12
// copies a thread.
func wsProducerRegs(wide, many bool) int {
	r := 40
	if wide {
		r += 16
	}
	if many {
		r += 16
		if wide {
			r += 8
		}
	}
	return r
}

// wsAlone reports whether loop f can be warp-specialised: a loop of the
// kernel's top-level block, the kernel's only loop, with nothing before it
// but register arithmetic (loads included: the producer warps repeat what
// the consumers compute, and nothing written twice).
func (l *lowerer) wsAlone(f *tile.Value) bool {
	loops := 0
	l.k.Walk(func(v *tile.Value) {
		if v.Op == tile.OpFor {
			loops++
		}
	})
	if loops != 1 {
		return false
	}
	for _, v := range l.k.Body.Values {
		if v == f {
			return true
		}
		switch v.Op {
		case tile.OpStore, tile.OpAtomicAdd, tile.OpReduceSum, tile.OpReduceMax, tile.OpReduceMin, tile.OpDot:
			return false
		}
	}
	return false // not at the top level
}

// wsPlan sets the warp-specialised plan's producer warps, lag and
// register counts.
func (l *lowerer) wsPlan(p *pipe) {
	nw := l.opt.NumWarps
	p.wsWarps = nw
	if p.wsTMA {
		// the tensor copies' issuer: a warpgroup whose other warps exit
		// once it gave its registers back (setmaxnreg applies to whole
		// warpgroups), or with ws_warps = 1 one warp and no setmaxnreg
		// (the H200's JIT bounded 288 threads as 384: 167 registers, 16
		// bytes spilled)
		p.wsWarps = 4
		if l.k.Meta["ws_warps"] == 1 {
			p.wsWarps = 1
		}
	}
	if w, ok := l.k.Meta["ws_warps"]; !p.wsTMA && (!ok || w == 4) && nw > 4 && l.wsNarrow(p) {
		// one warpgroup: each producer thread issues the copies of
		// nw/4 consumer threads of the other form, in layouts of 4 warps
		// (warps nw..nw+3 take those of warps 0..3: coordinates masked)
		p.wsWarps = 4
		for i, ld := range p.loads {
			sh := ld.Type.Shape.Slice()
			switch {
			case p.copy[i] == nil:
				c := plain(l.intern(newBlocked(sh, 4, 4)))
				p.wsCopy[i] = &c
			case i == 0 && p.staged:
				p.copy[i] = &Layout{B: l.intern(stagedCopyBlocked(sh[1], sh[0], 4)), Src: []int{1, 0}}
			default:
				p.copy[i] = &Layout{B: l.intern(newBlocked([]int{sh[1], sh[0]}, 4, 4)), Src: []int{1, 0}}
			}
		}
	}
	// ptxas bounds every thread of a .maxntid T kernel by 65536/T
	// registers, setmaxnreg or not: the consumers' accumulators
	// (m·n/(32·nw) a thread) and the loop's ~30 others must fit it (the
	// H200's ptxas refused 8+8 warps at 256×128: 128 registers, 158
	// needed); else the plain swapped form, the dump says why
	if acc, bound := p.m*p.n/(32*nw), min(255, 65536/(32*(nw+p.wsWarps)))&^7; acc+wsLoopRegs > bound {
		p.ws, p.wsTMA, p.wsDeclined = false, false, fmt.Sprintf("%d+%d warps allow %d registers a thread, the accumulators take %d and the loop ~%d", nw, p.wsWarps, bound, acc, wsLoopRegs)
		return
	}
	if p.wsTMA {
		if 32*(nw+p.wsWarps) > 256 && p.wsWarps == 4 {
			prod := 40 // CUTLASS's TMA producer's
			if r, ok := l.k.Meta["ws_regs"]; ok && r >= 24 && r <= 256 {
				prod = r &^ 7
			}
			p.wsRegs = [2]int{prod, wsConsumerRegs(nw, p.wsWarps, prod)}
		}
		return
	}
	if p.copyPass() {
		p.wsLag = min(2, p.stages-2)
		if lag, ok := l.k.Meta["ws_lag"]; ok && lag >= 1 {
			p.wsLag = min(lag, p.stages-1)
		}
		p.wsLag = max(p.wsLag, 1)
	}
	threads := 32 * (nw + p.wsWarps)
	if threads <= 256 {
		return
	}
	copies := (p.m*p.k + p.k*p.n) / 4 / (32 * p.wsWarps) // 16-byte copies a producer thread
	prod := wsProducerRegs(p.bf16() || p.x3(), copies > 12)
	if r, ok := l.k.Meta["ws_regs"]; ok && r >= 24 && r <= 256 {
		prod = r &^ 7
	}
	p.wsRegs = [2]int{prod, wsConsumerRegs(nw, p.wsWarps, prod)}
}

// wsLoopRegs is the registers a consumer thread of the swapped form's loop
// holds beside its accumulators (the H200's ptxas: 158 for 128
// accumulators at 256×128 on 8 warps).
const wsLoopRegs = 30

// wsConsumerRegs is what the consumers' setmaxnreg.inc may ask for once
// the producer's warps gave theirs back down to prod: the launch's
// registers a thread (65536 over the CTA's threads, in steps of 8, as
// ptxas bounds a kernel by its .maxntid) times the threads, less the
// producer's, over the consumers' threads, in steps of 8, at most 256.
func wsConsumerRegs(nw, pw, prod int) int {
	threads := 32 * (nw + pw)
	launch := min(255, 65536/threads) &^ 7
	return min(256, (launch*threads-prod*32*pw)/(32*nw)) &^ 7
}

// wsNarrow reports whether p's copies can be laid out over 4 producer
// warps: the loop carries nothing but the accumulator and the loads'
// addresses and masks are computed from scalars and values that are not
// anchors (so that the producer computes them afresh in the copies'
// layouts: an anchor would be converted through shared memory, with a
// barrier, in the producer's loop).
func (l *lowerer) wsNarrow(p *pipe) bool {
	if len(p.loop.Args) != 4 {
		return false
	}
	seen := map[*tile.Value]bool{}
	var free func(v *tile.Value) bool
	free = func(v *tile.Value) bool {
		if seen[v] {
			return true
		}
		seen[v] = true
		if !v.Type.Shape.IsScalar() && isAnchor(v) {
			return false
		}
		for _, a := range v.Args {
			if !free(a) {
				return false
			}
		}
		return true
	}
	for _, ld := range p.loads {
		for _, a := range ld.Args[:min(len(ld.Args), 2)] {
			if !free(a) {
				return false
			}
		}
	}
	return true
}

// wsLoop emits pipelined loop v by the warp-specialised plan p (see
// above); bounds are the loop's start, end and step, carried its carried
// values (the producer advances all but the accumulator).
func (l *lowerer) wsLoop(v *tile.Value, p *pipe, bounds []string, carried []*lval) error {
	w := &l.body
	nw := l.opt.NumWarps
	threads := 32 * nw
	S := p.stages
	ring := S * p.stageBytes
	it := v.Args[0].Type
	ity, ptx := movType(it), ptxInt(it.DType)
	// full[s] at bars + 8s, empty[s] at bars + 8(S+s)
	bars := l.reg("r")
	emit(w, "add.s32 %s, %s, %d", bars, l.baseAddr(), l.ownRegion(16*S))
	first := l.reg("p")
	emit(w, "setp.eq.u32 %s, %s, 0", first, l.tid())
	// every thread arrives for what it did itself: full, each producer
	// thread after its pass (or its copies, without a pass); empty, each
	// consumer thread once its warp's wgmmas that read the stage retired
	// and its fragment loads were done. (A lane of each warp after
	// bar.warp.sync, as before 2026-12-03, orders the other lanes' accesses
	// by the barrier's cumulativity, which compute-sanitizer's racecheck
	// does not follow: it reported hazards between a producer's copies and
	// a consumer's ld.shared of B on the H200, r20i.)
	full := 32 * p.wsWarps
	if p.wsTMA {
		full = 1 // the producer's expect_tx; the copies complete the phase
		l.tmaMaps(p)
	}
	for s := 0; s < S; s++ {
		emit(w, "@%s mbarrier.init.shared::cta.b64 [%s+%d], %d", first, bars, 8*s, full)
	}
	for s := S; s < 2*S; s++ {
		emit(w, "@%s mbarrier.init.shared::cta.b64 [%s+%d], %d", first, bars, 8*s, 32*nw) // empty: each consumer thread
	}
	emit(w, "fence.mbarrier_init.release.cluster")
	emit(w, "bar.sync 0") // every warp: the mbarriers initialised
	stepPos, nonpos := l.reg("p"), l.reg("p")
	emit(w, "setp.gt.%s %s, %s, 0", ptx, stepPos, bounds[2])
	emit(w, "not.pred %s, %s", nonpos, stepPos)
	cons := l.label("ws_consumer")
	isCons := l.reg("p")
	emit(w, "setp.lt.u32 %s, %s, %d", isCons, l.tid(), threads)
	emit(w, "@%s bra %s", isCons, cons)
	if err := l.wsProducer(p, bounds, carried, bars, stepPos, nonpos, ity, ptx); err != nil {
		return err
	}
	w.WriteString(cons + ":\n")
	if p.wsRegs[1] > 0 {
		emit(w, "setmaxnreg.inc.sync.aligned.u32 %d", p.wsRegs[1])
	}
	// the consumer: iteration iv from the stage at byte offset sc, its
	// barriers at fa and ea, round parity ph; prev: the empty barrier of
	// the previous iteration's stage (once hasPrev ≠ 0)
	iv, sc, fa, ea, ph, prev, hasPrev := l.reg(regClass(it)), l.reg("r"), l.reg("r"), l.reg("r"), l.reg("r"), l.reg("r"), l.reg("r")
	emit(w, "mov.%s %s, %s", ity, iv, bounds[0])
	emit(w, "mov.u32 %s, 0", sc)
	emit(w, "mov.u32 %s, %s", fa, bars)
	emit(w, "add.s32 %s, %s, %d", ea, bars, 8*S)
	emit(w, "mov.u32 %s, 0", ph)
	emit(w, "mov.u32 %s, %s", prev, ea)
	emit(w, "mov.u32 %s, 0", hasPrev)
	var blk [2][]string // 3xTF32: the two iterations' block accumulators, zero
	if p.x3() {
		for u := range blk {
			for range p.m / 2 {
				r := l.reg("f")
				emit(w, "mov.f32 %s, 0f00000000", r)
				blk[u] = append(blk[u], r)
			}
		}
	}
	head, end := l.label("ws_consume"), l.label("ws_end")
	exits := [2]string{end, end}
	if blk[0] != nil {
		exits = [2]string{l.label("ws_exit"), l.label("ws_exit")}
	}
	w.WriteString(head + ":\n")
	acc := carried[p.accIdx]
	for u := range 2 {
		stop := l.reg("p")
		emit(w, "setp.ge.%s %s, %s, %s", ptx, stop, iv, bounds[1])
		emit(w, "or.pred %s, %s, %s", stop, stop, nonpos)
		emit(w, "@%s bra.uni %s", stop, exits[u])
		l.wsWait(fa, ph, "ws_full")
		if p.wsLag == 0 && !p.wsTMA {
			// the copies of A landed through the generic proxy, with no
			// producer thread after them to fence: the consumer does,
			// before its wgmmas read A through the async proxy
			emit(w, "fence.proxy.async.shared::cta")
		}
		l.wgmmaSwappedStep(p, sc, acc, blk[u], l.swappedTail(v, p, iv, bounds[1], ptx))
		if blk[0] != nil {
			l.addBlock(p, acc, blk[1-u])
		}
		// iteration j−1's wgmmas are retired: its stage is free
		q := l.reg("p")
		emit(w, "setp.ne.u32 %s, %s, 0", q, hasPrev)
		emit(w, "@%s mbarrier.arrive.shared::cta.b64 _, [%s]", q, prev) // each thread's reads of the stage
		emit(w, "mov.u32 %s, 1", hasPrev)
		emit(w, "mov.u32 %s, %s", prev, ea)
		l.wsAdvance(p, sc, fa, ea, ph, bars, ring)
		emit(w, "add.%s %s, %s, %s", ptx, iv, iv, bounds[2])
	}
	emit(w, "bra.uni %s", head)
	if blk[0] != nil {
		for u, x := range exits {
			w.WriteString(x + ":\n")
			emit(w, "wgmma.wait_group.sync.aligned 0") // the last iteration's products
			l.addBlock(p, acc, blk[1-u])
			emit(w, "bra.uni %s", end)
		}
	}
	w.WriteString(end + ":\n")
	if blk[0] == nil {
		emit(w, "wgmma.wait_group.sync.aligned 0") // the last iteration's products
	}
	// the producer has exited: from here on barriers are the consumers'
	l.producerWarps, l.barThreads, l.regSplit = p.wsWarps, threads, p.wsRegs
	l.barrier(w) // the stages are scratch again
	return l.pipeResults(v, p, acc)
}

// wsProducer emits the producer's loop (see above), ending in exit.
func (l *lowerer) wsProducer(p *pipe, bounds []string, carried []*lval, bars, stepPos, nonpos, ity, ptx string) error {
	w := &l.body
	S := p.stages
	ring := S * p.stageBytes
	if p.wsRegs[0] > 0 {
		emit(w, "setmaxnreg.dec.sync.aligned.u32 %d", p.wsRegs[0])
	}
	if p.wsTMA {
		return l.wsTMAProducer(p, bounds, carried, bars, stepPos, nonpos, ity, ptx)
	}
	ivp, sp, fa, ea, ph := l.wsProducerState(p, bounds[0], bars, ity)
	lag := p.wsLag
	// the pass: the oldest iteration not handed over, at stage sd (full
	// barrier fd); issued and done count iterations
	var sd, fd, issued, done string
	pass := func() error {
		if err := l.roundCopies(p, sd); err != nil {
			return err
		}
		emit(w, "fence.proxy.async.shared::cta")
		emit(w, "mbarrier.arrive.shared::cta.b64 _, [%s]", fd) // each thread's pass
		l.wsAdvance(p, sd, fd, "", "", bars, ring)
		emit(w, "add.s32 %s, %s, 1", done, done)
		return nil
	}
	if lag > 0 {
		sd, fd, issued, done = l.reg("r"), l.reg("r"), l.reg("r"), l.reg("r")
		emit(w, "mov.u32 %s, 0", sd)
		emit(w, "mov.u32 %s, %s", fd, bars)
		emit(w, "mov.u32 %s, 0", issued)
		emit(w, "mov.u32 %s, 0", done)
	}
	head, drain := l.wsProduceHead(ivp, bounds[1], nonpos, ptx)
	if lag > 0 {
		young := l.label("ws_young")
		q := l.reg("p")
		emit(w, "setp.lt.u32 %s, %s, %d", q, issued, lag)
		emit(w, "@%s bra.uni %s", q, young)
		emit(w, "cp.async.wait_group %d", lag-1)
		if err := pass(); err != nil {
			return err
		}
		w.WriteString(young + ":\n")
	}
	l.wsWait(ea, ph, "ws_empty")
	if err := l.issueCopies(p, ivp, carried, sp, stepPos); err != nil {
		return err
	}
	if lag > 0 {
		emit(w, "cp.async.commit_group")
		emit(w, "add.s32 %s, %s, 1", issued, issued)
	} else {
		emit(w, "cp.async.mbarrier.arrive.noinc.shared.b64 [%s]", fa)
	}
	l.wsAdvance(p, sp, fa, ea, ph, bars, ring)
	emit(w, "add.%s %s, %s, %s", ptx, ivp, ivp, bounds[2])
	emit(w, "bra.uni %s", head)
	w.WriteString(drain + ":\n")
	if lag > 0 {
		emit(w, "cp.async.wait_group 0")
		more, out := l.label("ws_pass"), l.label("ws_passed")
		w.WriteString(more + ":\n")
		q := l.reg("p")
		emit(w, "setp.ge.u32 %s, %s, %s", q, done, issued)
		emit(w, "@%s bra.uni %s", q, out)
		if err := pass(); err != nil {
			return err
		}
		emit(w, "bra.uni %s", more)
		w.WriteString(out + ":\n")
	} else {
		// no thread exits with its copies in flight (their arrivals are
		// the consumers' to wait for: this only waits for them to land)
		emit(w, "cp.async.wait_all")
	}
	emit(w, "exit")
	return nil
}

// wsWait spins on mbarrier.try_wait.parity until the phase of parity ph
// of the mbarrier at addr has completed.
func (l *lowerer) wsWait(addr, ph, what string) {
	w := &l.body
	again := l.label(what)
	w.WriteString(again + ":\n")
	q := l.reg("p")
	emit(w, "mbarrier.try_wait.parity.shared::cta.b64 %s, [%s], %s", q, addr, ph)
	emit(w, "@!%s bra %s", q, again)
}

// wsAdvance moves a stage offset st and its barriers' addresses fa (full)
// and ea (empty, where not "") to the next stage, wrapping to the first
// after the last; at the wrap the round parity ph (where not "") flips.
func (l *lowerer) wsAdvance(p *pipe, st, fa, ea, ph, bars string, ring int) {
	w := &l.body
	emit(w, "add.s32 %s, %s, %d", st, st, p.stageBytes)
	emit(w, "add.s32 %s, %s, 8", fa, fa)
	if ea != "" {
		emit(w, "add.s32 %s, %s, 8", ea, ea)
	}
	wrap := l.reg("p")
	emit(w, "setp.ge.s32 %s, %s, %d", wrap, st, ring)
	emit(w, "@%s mov.u32 %s, 0", wrap, st)
	emit(w, "@%s mov.u32 %s, %s", wrap, fa, bars)
	if ea != "" {
		emit(w, "@%s add.s32 %s, %s, %d", wrap, ea, bars, 8*p.stages)
	}
	if ph != "" {
		emit(w, "@%s xor.b32 %s, %s, 1", wrap, ph, ph)
	}
}

// wsTMAProducer emits the producer warp of ws = 2: for each iteration, its
// lanes wait on the stage's empty mbarrier (round r−1), then its first
// thread expects the stage's bytes on full and issues the tensor copies of
// A and B completing on it (tmaIssue); after the last iteration the warp
// exits (the consumers wait for every copy on the full mbarriers).
func (l *lowerer) wsTMAProducer(p *pipe, bounds []string, carried []*lval, bars, stepPos, nonpos, ity, ptx string) error {
	w := &l.body
	ring := p.stages * p.stageBytes
	ivp, sp, fa, ea, ph := l.wsProducerState(p, bounds[0], bars, ity)
	if p.wsWarps > 1 {
		// one warp issues; the others have given their registers back
		q := l.reg("p")
		emit(w, "setp.ge.u32 %s, %s, %d", q, l.tid(), 32*(l.opt.NumWarps+1))
		emit(w, "@%s exit", q)
	}
	issuer := l.reg("p")
	emit(w, "setp.eq.u32 %s, %s, %d", issuer, l.tid(), 32*l.opt.NumWarps)
	p.tma.issuer, p.tma.fp = issuer, fa
	head, drain := l.wsProduceHead(ivp, bounds[1], nonpos, ptx)
	l.wsWait(ea, ph, "ws_empty")
	if err := l.issueCopies(p, ivp, carried, sp, stepPos); err != nil {
		return err
	}
	l.wsAdvance(p, sp, fa, ea, ph, bars, ring)
	emit(w, "add.%s %s, %s, %s", ptx, ivp, ivp, bounds[2])
	emit(w, "bra.uni %s", head)
	w.WriteString(drain + ":\n")
	emit(w, "exit")
	return nil
}

// wsProducerState emits the producer's starting state: iteration ivp
// (from start) into the stage at sp, its barriers at fa (full) and ea
// (empty), the parity ph of the empty barriers' round before (1 in round 0).
func (l *lowerer) wsProducerState(p *pipe, start, bars, ity string) (ivp, sp, fa, ea, ph string) {
	w := &l.body
	ivp, sp, fa, ea, ph = l.reg(regClass(p.loop.Args[0].Type)), l.reg("r"), l.reg("r"), l.reg("r"), l.reg("r")
	emit(w, "mov.%s %s, %s", ity, ivp, start)
	emit(w, "mov.u32 %s, 0", sp)
	emit(w, "mov.u32 %s, %s", fa, bars)
	emit(w, "add.s32 %s, %s, %d", ea, bars, 8*p.stages)
	emit(w, "mov.u32 %s, 1", ph)
	return
}

// wsProduceHead emits the head of a producer's loop: to drain once
// iteration ivp reaches end (or the step is not positive: nonpos).
func (l *lowerer) wsProduceHead(ivp, end, nonpos, ptx string) (head, drain string) {
	w := &l.body
	head, drain = l.label("ws_produce"), l.label("ws_drain")
	w.WriteString(head + ":\n")
	stop := l.reg("p")
	emit(w, "setp.ge.%s %s, %s, %s", ptx, stop, ivp, end)
	emit(w, "or.pred %s, %s, %s", stop, stop, nonpos)
	emit(w, "@%s bra.uni %s", stop, drain)
	return head, drain
}
