package graphpass

import (
	"fmt"
	"slices"

	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// A row group holds reductions along the last axis (and Gorgonia's SoftMax
// and its backward) together with the consumers that broadcast them back
// over their rows, one row per program. Rows longer than maxRow are walked
// in blocks (looped), once per reduction, then once more for the output.
var rowKind = groupKind{
	name: "row",
	start: func(n *Node, opt Options) bool {
		return n.Info.Kind == ops.Softmax || n.Info.Kind == ops.SoftmaxGrad && !looped(n.Info.Shape, opt.Target)
	},
	join: func(n *Node, grp *Group, t Target) (GroupKind, bool) {
		switch k := n.Info.Kind; {
		case k.Product():
			return 0, false
		case k == ops.Reduce || k.Row():
			return RowGroup, takesRow(n, grp, t)
		}
		return RowGroup, true
	},
	remat:  true,
	extras: func(grp *Group, t Target) bool { return !looped(grp.Full, t) },
	tune:   tuneRow,
	space:  rowSpace,
	emit:   emitRow,
}

// maxRow is the longest row a row group holds in one block (in registers):
// on a GPU 32 elements a thread at up to 16 warps (16384 on an H200: the
// hand-written row kernels hold 32 a thread at 62 (softmax) and 128
// (LayerNorm) registers, the most 512 threads can have); on the CPU 8192.
// Longer rows are walked in blocks (see rowEmit.looped).
func maxRow(t Target) int {
	if t.GPU() {
		return 32 * 32 * maxRowWarps(t)
	}
	return 8192
}

// maxRowWarps is the most warps a row kernel takes: 16, or what the
// target's threads allow, and never fewer than the target's warps.
func maxRowWarps(t Target) int { return max(t.NumWarps, min(16, t.MaxThreads/32)) }

// looped reports whether rows of the shape full are walked in blocks
// (longer than maxRow): such a row group writes one output and computes no
// softmax backward.
func looped(full []int, t Target) bool { return len(full) > 0 && full[len(full)-1] > maxRow(t) }

// streamBytes is the size of a row group's tensor above which the loads
// and stores of its rows longer than maxRow bypass the caches (STREAM,
// tuneRow): more than an H100's or H200's 50 MB of L2, so that nothing a
// later kernel reads would have stayed there anyway.
const streamBytes = 64 << 20

// cpuStreamBytes is the least a CPU group's outputs take for its stores
// to go past the caches (cpuStream).
const cpuStreamBytes = 4 << 20

// cpuStream reports whether a row or elementwise group's stores go past
// the caches on a CPU (STREAM = 3: the stores' streaming hint, which
// codegen/cpu/native writes as non-temporal stores): its target runs
// machine code, its outputs go to the user alone in memory of their own
// each run (Group.freshOut) and take cpuStreamBytes or more. Such memory
// is in no cache, so an ordinary store first reads each line for
// ownership; past the caches the line is written once. Measured on the
// H100 machine's 16-core host (2026-12-05, `tilefuse bench -backend cpu
// -size large -runs 30 -loop -rotate 1`, GOMAXPROCS=16, medians, ms; r37c:
// the session's start and this in turn three times): LayerNorm 0.299,
// 0.397, 0.305 → 0.153, 0.204, 0.161, softmax 0.342, 0.468, 0.354 → 0.256,
// 0.291, 0.245 (PyTorch CPU 0.194–0.205 and 0.333 in r37b and r37c). With
// the outputs reused (WithReuseOutputs, the lines in the caches: not taken
// there; r37b, an experiment build that streamed every row store)
// LayerNorm 0.136, 0.134, 0.145 → 0.128, 0.126, 0.158, and on the 2-core
// VM 0.34–0.37 → 0.39–0.41. The chain (an elementwise GELU of 4M
// elements), once its GELU took an exp and a division in place of the tanh
// (tanhPlusOne) and its memory mattered, on the H100 machine's host alone
// 0.314, 0.566, 0.285 → 0.268, 0.246, 0.273 and after LayerNorm and
// softmax 0.332, 0.291 → 0.278, 0.263 (r38b, in turn), on the H200's 0.307,
// 0.295, 0.311 → 0.282, 0.288, 0.255 (r38a), on the 2-core VM 0.562–0.588
// → 0.548–0.573 (with the tanh it had moved within its spread on the host
// and lost 3–6% on the VM). Not for f64 outputs: the 2-core VM's f64
// LayerNorm large in new memory ran 1.93–2.07 → 2.02–2.21 ms with them,
// its softmax level (the host unmeasured). Measured again once the
// recycler handed out the buffer it handed out last first (r50a, a 300
// MiB-L3 host, 2026-12-07, in turn four times, ms): plain stores in place
// of these LayerNorm large 0.165–0.206 → 0.28–0.98 in a loop and 0.225–0.38
// → 0.268–0.483 with a collection before each run; softmax and the chain
// slower too.
func cpuStream(grp *Group, t Target) bool {
	if t.GPU() || !t.Native || !grp.freshOut || grp.Root.Info.DType != tile.F32 {
		return false
	}
	var bytes int64
	for _, x := range grp.outputs() {
		bytes += nodeBytes(x)
	}
	return bytes >= cpuStreamBytes
}

// tuneRow chooses a row kernel's meta-parameters:
//   - BLOCK, the row's length rounded up to a power of two, held in one
//     block; or, for rows longer than maxRow, CHUNK, the block the row is
//     walked in (16 elements a thread on a GPU; 2048 on the CPU). On a GPU
//     a row of up to twice maxRow is held in one block at 64 elements a
//     thread where the group reads nothing but the row (a softmax: as
//     Triton's tutorial softmax holds 32768 at 16 warps), which leaves the
//     registers for it, or loads what else it reads late (below);
//   - on a GPU, num_warps: at least the target's, and one warp for every
//     1024 elements of the block (32 a thread) up to maxRowWarps (the
//     hand-written kernels reach 3.9 TB/s on the H200 at 4 warps for 1024
//     and 4096), but 16 for a softmax's row of 4096 (rowWarps8); a looped
//     row takes maxRowWarps (16), so that few rows are in flight and its
//     second pass finds them in L2: LayerNorm's looped
//     kernel holds 99 registers a thread (ptxas 11.8, sm_90), one program
//     of 16 warps an SM, 132 rows of 128 KiB at 32768 wide (17 MB) in
//     flight on an H200, where 8 warps had two an SM (34 MB of its 50 MB
//     L2), and three programs before the variance joined the mean's pass
//     (76 registers: 50 MB, the whole L2);
//   - on a GPU, where the group reads other operands beside the row and
//     writes one output (LayerNorm's γ and β: lateLoads), late_loads (one
//     row a program; not where a row of up to 1024 is not 16-byte aligned,
//     below): they are loaded in the output's store, 2 groups of 4
//     a thread ahead (1 at 64 elements a thread), not whole beside the
//     row, so that a row of
//     up to twice maxRow of 4-byte elements is held in one block as a
//     softmax's is (32768 at 16 warps: 126 registers, no spills, where x,
//     γ and β held whole
//     spilled 2.4 KB a thread), and a row of up to maxRow takes one warp
//     for every 512 elements (lateWarps: 4096 at 8 warps, 58 registers, 4
//     programs an SM, where 4 warps holding γ and β whole took 138, 3;
//     8192 at 16 warps, 62, 2 programs an SM). Held whole, LayerNorm
//     1151×8192 at 8 warps took 133 registers and ran at 56% of the copy
//     bandwidth on the H200 (walked at 4 warps: 63%; 4096×32768 walked at
//     16 warps: 74%); held late, a row of 8192 to maxRow takes one warp
//     for every 1024 elements (below); the walked forms stay candidates
//     (rowSpace);
//   - on a GPU, KEEP = 1 where the group reads an operand every row reads
//     alike (sharedOperands: LayerNorm's γ and β) and the row is held in
//     one block: those loads with the keep cache hint, Triton's
//     evict_last, as Inductor writes a row kernel's weights (the H200,
//     2026-12-04, r29a, the bench's graphs in turn, two calls, device ms:
//     LayerNorm 8192×4096 0.0687, 0.0688 → 0.0684, 0.0682; 32768×1024
//     0.0674, 0.0677 → 0.0667, 0.0667; 1151×8192 0.0235, 0.0234 → 0.0228,
//     0.0228; 1823×781 0.00829, 0.00823 → 0.00807, 0.0081; not for the
//     walked or long rows with STREAM: 4096×32768 0.289, 0.288 → 0.291,
//     0.292);
//   - on a GPU, BLOCK_M, the rows a program takes, where the rows are
//     short: rows are added while a program holds fewer than 8 elements a
//     thread and the grid keeps a program for every SM (absent: one);
//   - on a CPU, STREAM = 3 (the stores past the caches) where cpuStream
//     says so;
//   - on a GPU, STREAM = 1 where a row longer than maxRow is walked or
//     held with late loads and the tensor is larger than the L2
//     (streamBytes): loads of the row and the stores with the streaming
//     cache hint (LayerNorm 4096×32768 on the H200: 0.286 ms against
//     0.295–0.309 without, 2026-12-04, r22g); not for a softmax's long row
//     held in one block at 64 elements a thread (softmax 4096×32768: 0.269
//     ms against 0.301 with it), nor for rows of up to maxRow: the bench's
//     graphs on the H200 (r22g, two calls each way in turn, device ms)
//     softmax 8192×4096 0.0676–0.0677 without against 0.0702, 32768×1024
//     0.0664 against 0.0676, LayerNorm 8192×4096 0.0683 against 0.0706,
//     32768×1024 0.0667 against 0.0670–0.0673 (with it the kernel runs at
//     its slow speed in a process that has not left it: DESIGN.md, "row").
func tuneRow(grp *Group, t Target, _ tile.Precision, meta tile.Meta) {
	n := grp.Full[len(grp.Full)-1]
	rows := numel(grp.Full) / max(n, 1)
	if cpuStream(grp, t) {
		meta["STREAM"] = 3
	}
	if looped(grp.Full, t) {
		if t.GPU() && int64(numel(grp.Full))*int64(grp.Root.Info.DType.Size()) > streamBytes {
			meta["STREAM"] = 1
		}
		switch {
		case !t.GPU():
			meta["CHUNK"] = 2048
		case n <= 2*maxRow(t) && (rowInputs(grp) == 1 || lateLoads(grp, t) && grp.Root.Info.DType.Size() <= 4):
			// without STREAM: softmax 4096×32768 on the H200 (tilefuse
			// tune, 2026-12-01) 0.269 ms against 0.301 with it
			meta["BLOCK"], meta["num_warps"] = pow2AtLeast(n), maxRowWarps(t)
			if rowInputs(grp) > 1 { // γ and β one group a thread at a time: 128 registers, 32 B spilled
				// with STREAM (LayerNorm 4096×32768 on the H200, tilefuse
				// tune, 2026-12-01, fourth session: 0.2804 ms against 0.2971)
				meta["late_loads"] = 1
			} else {
				delete(meta, "STREAM")
			}
		default:
			warps := maxRowWarps(t)
			meta["CHUNK"], meta["num_warps"] = 16*32*warps, warps
		}
		return
	}
	block := pow2AtLeast(n)
	if t.Native && grp.Root.Info.DType == tile.F64 {
		block = max(block, minRowF64) // masked past the row
	}
	if t.GPU() && sharedOperands(grp) {
		meta["KEEP"] = 1
	}
	// γ and β whole where rows of up to 1024 are not 16-byte aligned (the
	// H200, r29c, tilefuse tune: LayerNorm 1823×781 at 4 warps 0.0068 ms
	// whole against 0.0086 late, two groups ahead; rows of 1024 level)
	late := lateLoads(grp, t) && (n%4 == 0 || block > 1024)
	if late && block >= 8192 && !looped(grp.Full, t) {
		// held at a warp for every 1024 elements (32 a thread) with γ and
		// β two groups ahead: LayerNorm 1151×8192 on the H200 (tilefuse
		// tune, 2026-12-01, fourth session) 0.0234 ms against 0.0279
		// walked (CHUNK 2048, 4 warps; 0.0312 held at 16 warps)
		meta["BLOCK"], meta["num_warps"], meta["late_loads"] = block, rowWarps(block, t), 2
		return
	}
	meta["BLOCK"] = block
	if !t.GPU() {
		return
	}
	warps := rowWarps(block, t)
	switch {
	case late:
		warps = lateWarps(block, t)
	case block == 4096 && rowInputs(grp) == 1 && len(grp.Extra) == 0 && !hasSoftmaxGrad(grp):
		warps = rowWarps8(block, t)
	}
	meta["num_warps"] = warps
	bm := 1
	for bm*block < 8*32*warps && 2*bm <= pow2AtLeast(rows) && tile.CDiv(rows, 2*bm) >= t.SMs {
		bm *= 2
	}
	if bm > 1 {
		meta["BLOCK_M"] = bm
	} else if late {
		meta["late_loads"] = 2
	}
}

// lateLoads reports whether the row kernel of grp on t loads the operands
// it reads beside the row (LayerNorm's γ and β) in its output's store, a
// group of 4 a thread at a time, instead of whole after the reductions
// (codegen's meta-parameter late_loads): on a GPU, where the group reads
// another operand than the row and writes one output. Held whole, x, γ and
// β took 32 registers each a thread at 32 elements a thread (LayerNorm
// 8192×4096 at 4 warps: 138 registers, 3 programs an SM; with late_loads
// 86, 5), and a row of 32768 at 16 warps spilled 2.4 KB a thread.
func lateLoads(grp *Group, t Target) bool {
	return t.GPU() && rowInputs(grp) > 1 && len(grp.Extra) == 0 && !hasSoftmaxGrad(grp)
}

// lateWarps is the warps of a row held in one block whose other operands
// are loaded late: one warp for every 512 elements (16 a thread: the row
// and the few groups of γ and β in flight), from the target's warps up to
// maxRowWarps.
func lateWarps(block int, t Target) int { return max(t.NumWarps, min(block/512, maxRowWarps(t))) }

// rowWarps is the warps of a row held in one block of block elements: the
// target's, and one for every 1024 elements up to maxRowWarps.
func rowWarps(block int, t Target) int { return max(t.NumWarps, min(block/1024, maxRowWarps(t))) }

// rowWarps8 is the warps of a row of block elements held at 8 a thread:
// one for every 256 elements, up to maxRowWarps. tuneRow gives them to a
// row of 4096 that the group reads alone (a softmax: 16 warps), as
// Triton's tutorial softmax does: on the H200 (2026-12-04, r22a, `tilefuse tune -budget 0`,
// batches of 10 launches) softmax 8192×4096 ran 0.0664 ms a launch at 16
// warps against 0.0687 at 4 (the default then) and 0.0678 at 8; rows of
// 1024 keep 4 warps (8 a thread already; 8 warps 0.0710 against 0.0662
// at 32768×1024). LayerNorm's late loads keep lateWarps (16 warps there:
// 0.0861 against 0.0679 at 8).
func rowWarps8(block int, t Target) int { return min(block/256, maxRowWarps(t)) }

// sharedOperands reports whether the group reads an operand that is
// neither a scalar nor as large as its rows (LayerNorm's γ and β, read by
// every row alike).
func sharedOperands(grp *Group) bool {
	for _, in := range grp.Inputs {
		if k := numel(in.Info.Shape); k > 1 && k < numel(grp.Full) {
			return true
		}
	}
	return false
}

// rowInputs is the number of the group's inputs that are not scalars.
func rowInputs(grp *Group) int {
	k := 0
	for _, in := range grp.Inputs {
		if numel(in.Info.Shape) > 1 {
			k++
		}
	}
	return k
}

// rowReduce reports whether n reduces only the last axis of its input.
func rowReduce(n *Node) bool {
	in := n.Inputs[0].Info.Shape
	return n.Info.Kind == ops.Reduce && len(n.Info.Axes) == 1 && len(in) > 0 && n.Info.Axes[0] == len(in)-1
}

// takesRow reports whether grp, an elementwise or row group, can take n, a
// reduction or a softmax (or its backward), as a row group: n reduces the
// last axis of grp's shape, and a looped row has no extra outputs.
func takesRow(n *Node, grp *Group, t Target) bool {
	full := n.Info.Shape
	if n.Info.Kind == ops.Reduce {
		if !rowReduce(n) {
			return false
		}
		full = n.Inputs[0].Info.Shape
	}
	return sameShape(full, grp.Full) && (len(grp.Extra) == 0 || !looped(full, t)) && keepsRow(n, grp)
}

// keepsRow reports whether every path from n, a reduction or softmax (or
// its backward) of a row group, to the group's root reads n at the
// program's own row: a row kernel computes n once per row, whatever index a
// member asks it at. Elementwise ops and the row ops keep the row; a
// broadcast keeps it along the last axis only (a row's statistic read back
// over its row), and a reshape only when it keeps every leading size (it
// appends or drops a trailing 1). A statistic broadcast along another axis
// (Sum(x, 1) used as a per-column gain of a square x) reads other rows'
// values: it is a kernel of its own (found by FuzzFusion).
func keepsRow(n *Node, grp *Group) bool {
	for _, u := range n.Users {
		if u.Group != grp {
			continue
		}
		switch k := u.Info.Kind; {
		case k == ops.Repeat:
			if len(u.Info.Axes) != 1 || u.Info.Axes[0] != len(u.Info.Shape)-1 {
				return false
			}
		case k == ops.Reshape:
			in, out := trimTrailingOnes(u.Inputs[0].Info.Shape), trimTrailingOnes(u.Info.Shape)
			if !sameShape(in, out) {
				return false
			}
		case k == ops.Unary || k == ops.Binary || k == ops.Constant || k == ops.Reduce || k.Row():
		default:
			return false
		}
		if !keepsRow(u, grp) {
			return false
		}
	}
	return true
}

func trimTrailingOnes(s []int) []int {
	for len(s) > 0 && s[len(s)-1] == 1 {
		s = s[:len(s)-1]
	}
	return s
}

// rowEmit is a row kernel being written: this program's row (or rows).
type rowEmit struct {
	e    *emitter
	idx  *tile.Value // the flat indices of this program's row (of the block, when looped): [BLOCK], or [BLOCK_M,BLOCK]
	cols *tile.Value // the column of each lane: [BLOCK], or [1,BLOCK]
	rows *tile.Value // BLOCK_M > 1: the row of each lane, [BLOCK_M,1]; nil: row
	row  *tile.Value // one row a program: its row, the persistent loop's (PERSIST); nil: the program id
	// BLOCK_M > 1: the masks of rows and columns in range (nil: all are)
	rowMask, colMask *tile.Value
	// looped rows: each softmax's row maximum and Σe^(x-max)
	stats map[*Node][2]*tile.Value
}

// emitRow: program p computes row p, in one block of the row's length
// rounded up to a power of two, or looped; with BLOCK_M, rows
// [p·BLOCK_M, (p+1)·BLOCK_M) as a [BLOCK_M, BLOCK] tile reduced along its
// rows.
func emitRow(e *emitter, out *tile.Value, k *Kernel) error {
	b := e.b
	r := &rowEmit{e: e}
	e.space, e.member = r.coords, r.member
	e.rowReciprocal = e.t.GPU()
	full := e.grp.Full
	n := full[len(full)-1]
	rows := numel(full) / n
	k.Grid = tile.Grid{rows}
	stream, err := e.optParam("STREAM", 0)
	if err != nil {
		return err
	}
	// STREAM: 1 the row's loads and the stores with the streaming hint, 2
	// the loads alone, 3 the stores alone
	var hint, loadHint []tile.CacheHint // the stores', the persistent form's loads'
	switch stream {
	case 0:
	case 1, 2, 3:
		if stream != 2 {
			hint = []tile.CacheHint{tile.CacheStreaming}
		}
		if stream != 3 {
			loadHint = []tile.CacheHint{tile.CacheStreaming}
			e.stream = func(idx *tile.Value) bool { return idx == r.idx }
		}
	default:
		return fmt.Errorf("graphpass: %v: STREAM = %d: want 0 (no hint), 1 (the row's loads and the stores), 2 (the loads) or 3 (the stores)", e.grp, stream)
	}
	// KEEP: 1 the loads that every row reads alike (LayerNorm's γ and β:
	// an index that depends on no program id and no loop) with the keep
	// cache hint (evict last: Triton's evict_last, which Inductor puts on
	// a row kernel's weights); in a walked row also the row's loads in the
	// passes before the last, and the last pass's with the streaming hint
	// (evict first), as Inductor walks a row (not a candidate: LayerNorm
	// 8192×4096 walked so on the H200, r29b, 0.077–0.086 ms against
	// 0.066–0.068 held); a GPU's hint, which the CPU backends ignore
	keep, err := e.optParam("KEEP", 0)
	if err != nil {
		return err
	}
	switch keep {
	case 0:
	case 1:
		e.keep = true
	default:
		return fmt.Errorf("graphpass: %v: KEEP = %d: want 0 (no hint) or 1 (the loads every row reads alike)", e.grp, keep)
	}
	persist, err := e.optParam("PERSIST", 0)
	if err != nil {
		return err
	}
	_, chunked := e.meta["CHUNK"]
	if bm := e.meta["BLOCK_M"]; persist > 0 && (chunked || bm > 1) {
		return fmt.Errorf("graphpass: %v: PERSIST = %d: a persistent row kernel holds one row a program in one block (CHUNK %d, BLOCK_M %d)", e.grp, persist, e.meta["CHUNK"], bm)
	}
	if chunked { // walked in blocks
		chunk, err := e.param("CHUNK")
		if err != nil {
			return err
		}
		if len(e.grp.Extra) > 0 || hasSoftmaxGrad(e.grp) {
			return fmt.Errorf("graphpass: %v: CHUNK = %d: a looped row computes no extra outputs and no softmax backward", e.grp, chunk)
		}
		return r.looped(out, n, chunk, hint)
	}
	block, err := e.param("BLOCK")
	if err != nil {
		return err
	}
	if block < n {
		return fmt.Errorf("graphpass: %v: BLOCK = %d holds no row of %d", e.grp, block, n)
	}
	bm, err := e.optParam("BLOCK_M", 1)
	if err != nil {
		return err
	}
	if bm > 1 {
		return r.tile(out, k, rows, n, bm, block, hint)
	}
	r.cols = b.Arange(0, block)
	if block != n {
		e.mask = b.Lt(r.cols, n)
	}
	if persist > 0 {
		return r.persistent(out, k, rows, n, block, persist, loadHint, hint)
	}
	r.idx = b.Add(b.Mul(b.ProgramID(0), n), r.cols)
	return e.store(out, r.idx, hint...)
}

// persistent writes the one-row form as a persistent kernel (PERSIST =
// k): min(rows, k·SMs) programs (the target's SMs; a CPU's cores), program
// p taking rows p, p + grid, … in a loop, so that the rows split evenly
// over the SMs (1151 rows on 132 SMs: 8 or 9 an SM, where one row a
// program at 2 to 4 programs an SM left a last wave mostly empty), and
// with the loads of the next row issued before the current row's output
// is stored: the row's inputs read at the row's own indices (rowReads:
// softmax's and LayerNorm's x, a softmax backward's y and dy) are carried
// in registers from one iteration to the next, the first row's loaded
// before the loop, and the next row's (masked off past the last row)
// after the reductions, just before the store. Operands loaded late
// (late_loads: LayerNorm's γ and β) and the next row's loads are then
// issued in the store, group by group (codegen's late loads in the loop's
// body), so that an SM always has loads in flight while it stores.
//
// With smem_carry = 1 (codegen's meta-parameter) the next row's loads are
// instead the first thing of the loop's body, and codegen carries them
// through shared memory (smemcarry.go): cp.async copies issued as the
// iteration starts, which land while the current row is reduced and
// stored and hold no register, so that the row alone is in registers and
// a program always has its next row in flight.
func (r *rowEmit) persistent(out *tile.Value, k *Kernel, rows, n, block, persist int, loadHint, hint []tile.CacheHint) error {
	e, b := r.e, r.e.b
	if len(e.grp.Full) == 0 || rows < 1 {
		return fmt.Errorf("graphpass: %v: PERSIST = %d: no rows", e.grp, persist)
	}
	procs := e.t.SMs
	if !e.t.GPU() {
		procs = max(1, e.t.Cores)
	}
	grid := min(rows, persist*procs)
	k.Grid = tile.Grid{grid}
	held, err := r.rowReads(block)
	if err != nil {
		return err
	}
	loadRow := func(row, mask *tile.Value) []*tile.Value {
		idx := b.Add(b.Mul(row, n), r.cols)
		vs := make([]*tile.Value, len(held))
		for i, in := range held {
			vs[i] = b.Load(b.AddPtr(e.ptr[in], idx), mask, nil, loadHint...)
		}
		return vs
	}
	pid := b.ProgramID(0)
	first := loadRow(pid, e.mask) // pid < rows: the grid is at most rows
	outer := e.memo
	early := e.meta["smem_carry"] > 0
	b.For(pid, rows, grid, first, func(row *tile.Value, cur []*tile.Value) []*tile.Value {
		r.row = row
		r.idx = b.Add(b.Mul(row, n), r.cols)
		next := cur
		loadNext := func() {
			nr := b.Add(row, grid)
			m := b.BroadcastTo(b.Lt(nr, rows), tile.Shp(block))
			next = loadRow(nr, e.and(e.mask, m))
		}
		if early { // through shared memory: issued first, held in no register
			loadNext()
		}
		e.memo = make(map[memoKey]*tile.Value, len(outer)+len(held))
		for key, v := range outer {
			e.memo[key] = v
		}
		for i, in := range held { // the row's inputs, loaded an iteration before
			v := cur[i]
			if in.Info.DType != 0 && v.Type.DType != in.Info.DType {
				v = b.Cast(v, in.Info.DType)
			}
			e.memo[memoKey{n: in, idx: r.idx}] = v
		}
		if !early {
			e.beforeStore = loadNext
		}
		if err := e.store(out, r.idx, hint...); err != nil {
			e.err = err
		}
		e.beforeStore = nil
		return next
	})
	e.memo = outer
	return e.err
}

// rowReads lists the group's inputs that the one-row form loads at the
// row's own indices (the flat indices of its block: the x of a softmax or
// LayerNorm, not γ and β, which are read at the columns' indices): the
// values a persistent row kernel loads a row ahead. It writes the one-row
// kernel in a builder of its own and records the loads.
func (r *rowEmit) rowReads(block int) ([]*Node, error) {
	e := r.e
	b := tile.NewBuilder(fmt.Sprintf("fused_%d_probe", e.grp.ID), e.meta)
	p := &emitter{b: b, grp: e.grp, t: e.t, prec: e.prec, meta: e.meta, ptr: map[*Node]*tile.Value{},
		memo: map[memoKey]*tile.Value{}, recompute: e.recompute, rowReciprocal: e.rowReciprocal}
	for i, in := range e.grp.Inputs {
		p.ptr[in] = b.Ptr(fmt.Sprintf("in%d", i), in.Info.DType)
	}
	out := b.Ptr("out", e.grp.Root.Info.DType)
	for i := range e.extra {
		p.extra = append(p.extra, b.Ptr(fmt.Sprintf("out%d", i+1), e.grp.Root.Info.DType))
	}
	q := &rowEmit{e: p}
	p.space, p.member = q.coords, q.member
	q.cols = b.Arange(0, block)
	if e.mask != nil {
		p.mask = b.Lt(q.cols, e.grp.Full[len(e.grp.Full)-1])
	}
	q.idx = b.Add(b.Mul(b.ProgramID(0), e.grp.Full[len(e.grp.Full)-1]), q.cols)
	read := map[*Node]bool{}
	p.onLoad = func(n *Node, idx *tile.Value) {
		if idx == q.idx && sameShape(n.Info.Shape, e.grp.Full) {
			read[n] = true
		}
	}
	if err := p.store(out, q.idx); err != nil {
		return nil, err
	}
	var held []*Node
	for _, in := range e.grp.Inputs {
		if read[in] {
			held = append(held, in)
		}
	}
	return held, nil
}

// tile writes BLOCK_M rows a program: the rows' indices are [BM,1], the
// columns' [1,BLOCK], the row's values [BM,BLOCK]; a load at the rows
// alone (a per-row input) or the columns alone (a bias) is masked by the
// rows' or the columns' mask.
func (r *rowEmit) tile(out *tile.Value, k *Kernel, rows, n, bm, block int, hint []tile.CacheHint) error {
	e, b := r.e, r.e.b
	k.Grid = tile.Grid{tile.CDiv(rows, bm)}
	r.rows = b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bm), b.Arange(0, bm)), 1) // [BM,1]
	r.cols = b.ExpandDims(b.Arange(0, block), 0)                                // [1,BLOCK]
	if rows%bm != 0 {
		r.rowMask = b.Lt(r.rows, rows)
	}
	if block != n {
		r.colMask = b.Lt(r.cols, n)
	}
	whole := tile.Shp(bm, block)
	switch {
	case r.rowMask != nil && r.colMask != nil:
		e.mask = b.And(r.rowMask, r.colMask)
	case r.rowMask != nil:
		e.mask = b.BroadcastTo(r.rowMask, whole)
	case r.colMask != nil:
		e.mask = b.BroadcastTo(r.colMask, whole)
	}
	e.maskOf = func(s tile.Shape) *tile.Value {
		switch s {
		case tile.Scalar:
			return nil
		case whole:
			return e.mask
		case tile.Shp(bm, 1):
			return r.rowMask
		case tile.Shp(1, block):
			return r.colMask
		}
		if e.mask == nil {
			return nil
		}
		return b.BroadcastTo(e.mask, s)
	}
	r.idx = b.Add(b.Mul(r.rows, n), r.cols)
	return e.store(out, r.idx, hint...)
}

// hasSoftmaxGrad reports whether a member of grp is a softmax backward.
func hasSoftmaxGrad(grp *Group) bool {
	for _, n := range grp.Members {
		if n.Info.Kind == ops.SoftmaxGrad {
			return true
		}
	}
	return false
}

// coords: the row's own indices are the row (the program id, or the
// rows' [BM,1] indices; split over the leading dimensions) and the column
// the lane; nil for others.
func (r *rowEmit) coords(idx *tile.Value, s []int) []*tile.Value {
	if idx != r.idx || r.idx == nil || !sameShape(s, r.e.grp.Full) {
		return nil
	}
	row := r.rows
	if row == nil {
		row = r.row
	}
	if row == nil {
		row = r.e.b.ProgramID(0)
	}
	return append(r.e.split(row, s[:len(s)-1]), r.cols)
}

// reduce reduces x along the row: a scalar for one row a program, [BM,1]
// for BLOCK_M rows.
func (r *rowEmit) reduce(op tile.Op, x *tile.Value) *tile.Value {
	if r.rows != nil {
		return r.e.b.Reduce(op, x, 1, tile.KeepDims)
	}
	return r.e.b.Reduce(op, x, 0)
}

// member computes the row's reductions and softmaxes, along the row
// whatever idx.
func (r *rowEmit) member(n *Node, idx *tile.Value) (*tile.Value, error) {
	e, b := r.e, r.e.b
	in := func(i int, at *tile.Value) (*tile.Value, error) {
		v, err := e.gen(n.Inputs[i], at)
		if err == nil && v.Type.Shape.IsScalar() && !at.Type.Shape.IsScalar() {
			v = b.BroadcastTo(v, at.Type.Shape) // a value made of constants alone is one scalar
		}
		return v, err
	}
	switch n.Info.Kind {
	case ops.Reduce: // once per row
		if v, ok := e.memo[memoKey{n: n, idx: nil}]; ok {
			return v, nil
		}
		x, err := in(0, r.idx)
		if err != nil {
			return nil, err
		}
		identity := 0.0
		if n.Info.Reduce == tile.OpReduceMax {
			identity = -inf
		}
		v := r.reduce(n.Info.Reduce, e.inRange(x, identity))
		e.memo[memoKey{n: n, idx: nil}] = v
		return v, nil
	case ops.Softmax: // along the row: max, exp, sum in the block
		if st, ok := r.stats[n]; ok { // a looped row: the statistics are known
			x, err := in(0, idx)
			if err != nil {
				return nil, err
			}
			z := b.Sub(x, st[0])
			if n.Info.Log {
				return b.Sub(z, b.Log(st[1])), nil
			}
			return b.Mul(b.Exp(z), b.Div(1.0, st[1])), nil
		}
		x, err := in(0, r.idx)
		if err != nil {
			return nil, err
		}
		x = e.inRange(x, -inf)
		m := r.reduce(tile.OpReduceMax, x)
		m = b.Where(b.Eq(m, -inf), 0.0, m) // a row of -inf: no NaN from -inf - -inf
		z := b.Sub(x, m)
		ez := b.Exp(z)
		s := r.reduce(tile.OpReduceSum, ez)
		if n.Info.Log {
			return b.Sub(z, b.Log(s)), nil
		}
		return b.Mul(ez, b.Div(1.0, s)), nil
	case ops.SoftmaxGrad: // along the row, from (x, y, dy): y ⊙ (dy − Σ dy⊙y); log-softmax: dy − e^y Σ dy
		y, err := in(1, r.idx)
		if err != nil {
			return nil, err
		}
		dy, err := in(2, r.idx)
		if err != nil {
			return nil, err
		}
		if n.Info.Log {
			return b.Sub(dy, b.Mul(b.Exp(y), r.reduce(tile.OpReduceSum, e.inRange(dy, 0.0)))), nil
		}
		return b.Mul(y, b.Sub(dy, r.reduce(tile.OpReduceSum, e.inRange(b.Mul(dy, y), 0.0)))), nil
	}
	return nil, fmt.Errorf("graphpass: %v: %v inside a group", n, n.Info.Kind)
}

// looped writes a row group whose row is longer than maxRow: program p
// walks row p in blocks of chunk, once per reduction and softmax (inputs
// first, each pass recomputing its operand from the group's inputs and the
// row statistics found before it; a softmax keeps a running maximum and a
// rescaled sum per lane), then once more to write the output. A maximum m
// = max x and a sum Σ exp(x − m) over it (a softmax written op by op) take
// one pass together, as a softmax's do: two passes over the data in all,
// the second with the streaming hint where the meta-parameters ask for it
// (the first keeps the row in L2 for the second).
func (r *rowEmit) looped(out *tile.Value, n, chunk int, hint []tile.CacheHint) error {
	e, b := r.e, r.e.b
	lanes := b.Arange(0, chunk)
	row := b.Mul(b.ProgramID(0), n)
	outer := e.memo // the row statistics, valid in every pass
	stream := e.stream
	e.stream = nil
	if e.keep {
		// as Inductor walks a row: the passes before the last keep the row
		// in the caches for it, the last reads it evict-first; γ and β,
		// the same blocks in every program, kept
		e.loopsShared = true
		e.keepRow = func(idx *tile.Value) bool { return idx == r.idx }
		if stream == nil {
			stream = e.keepRow
		}
	}
	enter := func(c0 *tile.Value) {
		r.cols = b.Add(lanes, c0)
		if n%chunk != 0 {
			e.mask = b.Lt(r.cols, n)
		}
		r.idx = b.Add(row, r.cols)
		e.memo = make(map[memoKey]*tile.Value, len(outer))
		for k, v := range outer {
			e.memo[k] = v
		}
	}
	r.stats = map[*Node][2]*tile.Value{}
	order := r.order()
	done := map[*Node]bool{}
	for i, red := range order {
		if done[red] {
			continue
		}
		x := red.Inputs[0]
		dx := x.Info.DType
		var expSum *Node // a sum of exp(x − red) along the row, taken in this pass
		if red.Info.Kind == ops.Reduce {
			if red.Info.Reduce == tile.OpReduceMax {
				for _, s := range order[i+1:] {
					if r.expSumOf(s, red) {
						expSum = s
						break
					}
				}
			}
			if expSum == nil && red.Info.Reduce == tile.OpReduceSum {
				if sq, c := r.squaresAbout(red, order[i+1:], outer); sq != nil {
					if err := r.sumAndSquares(red, sq, c, n, chunk, enter, outer); err != nil {
						return err
					}
					done[sq] = true
					continue
				}
			}
			if expSum == nil {
				identity := 0.0
				if red.Info.Reduce == tile.OpReduceMax {
					identity = -inf
				}
				res := b.For(0, n, chunk, []*tile.Value{b.Full(identity, dx, chunk)}, func(c0 *tile.Value, c []*tile.Value) []*tile.Value {
					enter(c0)
					v, err := e.gen(x, r.idx)
					if err != nil {
						e.err = err
						return c
					}
					v = e.inRange(v, identity)
					if red.Info.Reduce == tile.OpReduceMax {
						return []*tile.Value{b.Maximum(c[0], v)}
					}
					return []*tile.Value{b.Add(c[0], v)}
				})
				e.memo = outer
				if e.err != nil {
					return e.err
				}
				outer[memoKey{n: red, idx: nil}] = b.Reduce(red.Info.Reduce, res[0], 0)
				continue
			}
		}
		// a softmax, or a maximum with its sum of exponentials: per lane,
		// the running maximum m and l = Σ e^(x-m)
		res := b.For(0, n, chunk, []*tile.Value{b.Full(-inf, dx, chunk), b.Zeros(dx, chunk)}, func(c0 *tile.Value, c []*tile.Value) []*tile.Value {
			enter(c0)
			v, err := e.gen(x, r.idx)
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
		if expSum != nil { // the maximum as the unfused graph has it (-inf for a row of -inf)
			m := b.Max(res[0], 0)
			ms := b.Where(b.Eq(m, -inf), 0.0, m)
			lane := b.Where(b.Eq(res[0], -inf), 0.0, res[0])
			outer[memoKey{n: red, idx: nil}] = m
			outer[memoKey{n: expSum, idx: nil}] = b.Sum(b.Mul(res[1], b.Exp(b.Sub(lane, ms))), 0)
			done[expSum] = true
			continue
		}
		m := b.Max(res[0], 0)
		m = b.Where(b.Eq(m, -inf), 0.0, m)
		lane := b.Where(b.Eq(res[0], -inf), 0.0, res[0])
		r.stats[red] = [2]*tile.Value{m, b.Sum(b.Mul(res[1], b.Exp(b.Sub(lane, m))), 0)}
	}
	e.stream, e.keepRow = stream, nil
	b.For(0, n, chunk, nil, func(c0 *tile.Value, c []*tile.Value) []*tile.Value {
		enter(c0)
		v, err := e.gen(e.grp.Root, r.idx)
		if err != nil {
			e.err = err
			return c
		}
		b.Store(b.AddPtr(out, r.idx), v, e.mask, hint...)
		return c
	})
	e.memo = outer
	return e.err
}

// squaresAbout finds, among the reductions after red in a looped row, a
// sum of squares about a value c the same along the row, Σ (x − c)² with x
// red's operand (LayerNorm's variance about its mean, red's sum over n),
// where c is known once red is (it reads no statistic but red and those in
// outer): such a sum is taken in red's pass (sumAndSquares), so that
// LayerNorm walks its row twice instead of three times. It returns the
// sum and c as the group has it (broadcast over the row), or nil.
func (r *rowEmit) squaresAbout(red *Node, later []*Node, outer map[memoKey]*tile.Value) (*Node, *Node) {
	x := red.Inputs[0]
	for _, s := range later {
		if s.Info.Kind != ops.Reduce || s.Info.Reduce != tile.OpReduceSum || !rowReduce(s) {
			continue
		}
		q := s.Inputs[0]
		if q.Group != r.e.grp {
			continue
		}
		var d *Node
		switch {
		case q.Info.Kind == ops.Unary && q.Info.Name == "square":
			d = q.Inputs[0]
		case q.Info.Kind == ops.Binary && q.Info.Binary == tile.OpMul && q.Inputs[0] == q.Inputs[1]:
			d = q.Inputs[0]
		default:
			continue
		}
		if d.Group != r.e.grp || d.Info.Kind != ops.Binary || d.Info.Binary != tile.OpSub || d.Inputs[0] != x {
			continue
		}
		if c := d.Inputs[1]; r.rowConstant(c) && r.knownAfter(c, red, outer) {
			return s, c
		}
	}
	return nil, nil
}

// rowConstant reports whether c, a value of the group's full shape, is a
// value per row broadcast along the last axis: Reshapes that only add or
// take away ones and Repeats along the last axis from 1, down to a value
// with one element a row.
func (r *rowEmit) rowConstant(c *Node) bool {
	full := r.e.grp.Full
	if !sameShape(c.Info.Shape, full) {
		return false
	}
	rows := numel(full) / full[len(full)-1]
	repeated := false
	for c.Group == r.e.grp && numel(c.Info.Shape) != rows {
		if len(c.Inputs) == 0 {
			return false
		}
		rep, ok := rowBroadcastStep(c)
		if !ok {
			return false
		}
		repeated = repeated || rep
		c = c.Inputs[0]
	}
	return repeated && numel(c.Info.Shape) == rows
}

// knownAfter reports whether every row statistic of the group that c reads
// is red or in outer (taken in an earlier pass).
func (r *rowEmit) knownAfter(c, red *Node, outer map[memoKey]*tile.Value) bool {
	seen := map[*Node]bool{}
	var ok func(n *Node) bool
	ok = func(n *Node) bool {
		if seen[n] || n.Group != r.e.grp {
			return true
		}
		seen[n] = true
		switch n.Info.Kind {
		case ops.Reduce:
			if _, done := outer[memoKey{n: n, idx: nil}]; n != red && !done {
				return false
			}
			return true // computed as a whole: its operand is not read again
		case ops.Softmax, ops.SoftmaxGrad:
			return false
		}
		for _, in := range n.Inputs {
			if !ok(in) {
				return false
			}
		}
		return true
	}
	return ok(c)
}

// sumAndSquares takes red = Σ x and sq = Σ (x − c)² along the row in one
// pass: per lane the sum, and Welford's running mean and sum of squared
// deviations M2 of the lane's k elements (mean += (x − mean)/k, M2 +=
// (x − mean_old)(x − mean_new)); then red = Σ sum and, c known from red,
// sq = Σ over the lanes M2 + k (mean − c)², the deviations about each
// lane's own mean moved to c: no cancellation of Σ x² against (Σ x)²/n
// where the mean is large against the spread.
func (r *rowEmit) sumAndSquares(red, sq, c *Node, n, chunk int, enter func(*tile.Value), outer map[memoKey]*tile.Value) error {
	e, b := r.e, r.e.b
	dx := red.Inputs[0].Info.DType
	masked := n%chunk != 0
	init := []*tile.Value{b.Zeros(dx, chunk), b.Zeros(dx, chunk), b.Zeros(dx, chunk)}
	if masked { // lanes past the row's end in the last block: a count per lane
		init = append(init, b.Zeros(dx, chunk))
	}
	res := b.For(0, n, chunk, init, func(c0 *tile.Value, cv []*tile.Value) []*tile.Value {
		enter(c0)
		v, err := e.gen(red.Inputs[0], r.idx)
		if err != nil {
			e.err = err
			return cv
		}
		sum := b.Add(cv[0], e.inRange(v, 0))
		delta := e.inRange(b.Sub(v, cv[1]), 0)
		var mean *tile.Value
		next := []*tile.Value{sum}
		if masked {
			k := b.Add(cv[3], e.inRange(b.Full(1, dx, chunk), 0))
			mean = b.Add(cv[1], b.Div(delta, b.Maximum(k, 1.0)))
			next = append(next, mean, nil, k)
		} else { // every lane's k-th element: one reciprocal a block
			k := b.Add(b.Mul(b.Cast(c0, dx), 1/float64(chunk)), 1.0)
			mean = b.Add(cv[1], b.Mul(delta, b.Div(1.0, k)))
			next = append(next, mean, nil)
		}
		next[2] = b.Add(cv[2], b.Mul(delta, e.inRange(b.Sub(v, mean), 0)))
		return next
	})
	e.memo = outer
	if e.err != nil {
		return e.err
	}
	outer[memoKey{n: red, idx: nil}] = b.Reduce(tile.OpReduceSum, res[0], 0)
	// c over the first block's lanes (a value per row: the same in each)
	enter(b.I32(0))
	cl, err := e.gen(c, r.idx)
	e.memo = outer
	if err != nil {
		return err
	}
	if cl.Type.Shape.IsScalar() {
		cl = b.BroadcastTo(cl, tile.Shp(chunk))
	}
	var k any = float64(n / chunk)
	if masked {
		k = res[3]
	}
	dev := b.Sub(res[1], cl)
	outer[memoKey{n: sq, idx: nil}] = b.Reduce(tile.OpReduceSum, b.Add(res[2], b.Mul(k, b.Mul(dev, dev))), 0)
	return nil
}

// expSumOf reports whether s is Σ exp(x − max) along the row, where max is
// the row maximum m of the same x, broadcast back over the row (Reshape,
// Repeat): a softmax written op by op, whose sum the online softmax
// computes in m's pass.
func (r *rowEmit) expSumOf(s, m *Node) bool {
	if s.Info.Kind != ops.Reduce || s.Info.Reduce != tile.OpReduceSum || !rowReduce(s) || !rowReduce(m) {
		return false
	}
	ex := s.Inputs[0]
	if ex.Group != r.e.grp || !ex.Info.IsExp() {
		return false
	}
	sub := ex.Inputs[0]
	if sub.Group != r.e.grp || sub.Info.Kind != ops.Binary || sub.Info.Binary != tile.OpSub || sub.Inputs[0] != m.Inputs[0] {
		return false
	}
	// the maximum, its shape's ones added or taken away and repeated along
	// the last axis only
	bc := sub.Inputs[1]
	for bc != m {
		if bc.Group != r.e.grp || len(bc.Inputs) == 0 {
			return false
		}
		if _, ok := rowBroadcastStep(bc); !ok {
			return false
		}
		bc = bc.Inputs[0]
	}
	return true
}

// rowBroadcastStep reports whether c (with an operand) broadcasts a value
// per row along the last axis one step: a Reshape that only adds or takes
// away ones, or a Repeat by constant sizes along the last axis from 1
// (repeat).
func rowBroadcastStep(c *Node) (repeat, ok bool) {
	for _, size := range c.Inputs[1:] { // a Repeat's sizes
		if size.Info.Kind != ops.Constant {
			return false, false
		}
	}
	in, out := c.Inputs[0].Info.Shape, c.Info.Shape
	switch c.Info.Kind {
	case ops.Reshape:
		return false, slices.Equal(nonOnes(in), nonOnes(out))
	case ops.Repeat:
		last := len(out) - 1
		return true, len(in) == len(out) && in[last] == 1 && slices.Equal(in[:last], out[:last])
	}
	return false, false
}

// nonOnes is s without its dimensions of size 1.
func nonOnes(s []int) []int {
	var d []int
	for _, x := range s {
		if x != 1 {
			d = append(d, x)
		}
	}
	return d
}

// order lists a row group's reductions and softmaxes, each after those its
// operand depends on.
func (r *rowEmit) order() []*Node {
	var order []*Node
	seen := map[*Node]bool{}
	var visit func(n *Node)
	visit = func(n *Node) {
		if seen[n] || n.Group != r.e.grp {
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
	visit(r.e.grp.Root)
	return order
}

// rowInvariant reports whether the index idx is the same in every program
// and every iteration: it depends on no program id and on no loop's
// argument (a row kernel's γ and β at the row's columns); with
// loopsShared, on no program id, loops' arguments taken as the same in
// every program (the walked row's loops, whose bounds are constants).
func rowInvariant(idx *tile.Value, loopsShared bool) bool {
	seen := map[*tile.Value]bool{}
	var varies func(v *tile.Value) bool
	varies = func(v *tile.Value) bool {
		if v == nil || seen[v] {
			return false
		}
		seen[v] = true
		switch v.Op {
		case tile.OpProgramID:
			return true
		case tile.OpBlockArg, tile.OpForResult, tile.OpFor:
			return !loopsShared
		}
		for _, a := range v.Args {
			if varies(a) {
				return true
			}
		}
		return false
	}
	return !varies(idx)
}
