package graphpass

import (
	"fmt"
	"slices"

	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// A reduction group is a Σ or MaxAlong with its elementwise producers fused
// in as a prologue, computed at the reduction's input indices. A sum with
// few outputs over many elements is split over programs that add their
// parts atomically into a zeroed output (Kernel.Accumulates). Its root may
// be a reshape of the reduction's value (Gorgonia's gradient of a
// broadcast bias is Reshape(Sum(dy, 0))): a reshape keeps the elements'
// order, so the kernel stores the reduction's outputs as they are, under
// the reshape's shape (reshapeOfReduce), instead of a copying kernel of
// its own.
var reduceKind = groupKind{
	name:  "reduction",
	start: func(n *Node, opt Options) bool { return n.Info.Kind == ops.Reduce },
	open:  func(grp *Group) { grp.Full = nil },
	// elementwise producers join as the prologue; products, reductions and
	// softmaxes do not
	join: func(n *Node, grp *Group, t Target) (GroupKind, bool) {
		k := n.Info.Kind
		return ReduceGroup, !k.Product() && k != ops.Reduce && !k.Row()
	},
	// its extra outputs are sibling reductions only (mergeSiblingReductions)
	extras: func(grp *Group, _ Target) bool {
		for _, x := range grp.Extra {
			if reductionOf(x).Info.Kind != ops.Reduce {
				return false
			}
		}
		return len(grp.Extra) > 0
	},
	remat: true,
	tune:  tuneReduce,
	space: reduceSpace,
	emit:  emitReduce,
}

// tuneReduce: a program reduces BLOCK_O outputs BLOCK_R elements at a time
// (on a GPU a tile of at most 32 elements a thread, 8 of them along the
// reduced axis: 4096 and 1024 at 4 warps; on the CPU 4096 and 1024), over
// CHUNK elements of the reduced range: all of them, or, where the target
// splits reductions and a sum's outputs fill fewer than minPrograms
// programs, a part of them (a multiple of BLOCK_R), the parts added
// atomically. A reduction over the leading axes of its input (column
// sums: a bias's or a gain's gradient) takes the column form instead
// (tuneColumns).
func tuneReduce(grp *Group, t Target, _ tile.Precision, meta tile.Meta) {
	root := reduction(grp)
	inS, reduced := reduceDims(root)
	if leadingAxes(reduced) {
		tuneColumns(root, t, inS[0], inS[1], 1+len(grp.Extra), meta)
		return
	}
	no, nr := 1, 1
	for i, d := range inS {
		if reduced[i] {
			nr *= d
		} else {
			no *= d
		}
	}
	if innerWhole(t, inS, reduced, 1+len(grp.Extra), meta) {
		return
	}
	br := min(t.perThread(8, 1024), pow2AtLeast(nr))
	if t.Native && root.Inputs[0].Info.DType == tile.F64 {
		br = max(br, minRowF64) // masked past the row
	}
	bo := max(1, min(pow2AtLeast(no), t.perThread(32, 4096)/br))
	chunk := nr
	if programs := tile.CDiv(no, bo); t.SplitReductions && root.Info.Reduce == tile.OpReduceSum && programs < minPrograms(t) {
		if split := min(tile.CDiv(nr, 4*br), tile.CDiv(minPrograms(t), programs)); split > 1 {
			chunk = tile.CDiv(tile.CDiv(nr, split), br) * br
		}
	}
	meta["BLOCK_O"], meta["BLOCK_R"], meta["CHUNK"] = bo, br, chunk
}

// maxInner is the longest last reduced axis innerWhole holds whole in a
// block: the CPU's tile of 4096 elements.
const maxInner = 4096

// innerWhole: on a CPU whose kernels are machine code, a reduction over
// axes that are not one run (NCHW's per-channel sums over N, H and W: the
// input read as [N, C, H·W], axes 0 and 2 reduced) holds its last reduced
// axis whole in the tile's lanes (INNER: its block, the least block size
// at least the axis, masked past it; BLOCK_R the same) and walks the other
// reduced axes one index at a time, where the flat form's block of the
// reduced index crossed the last axis's boundary, which the machine code
// checks as each block starts and hands to the executor where it fails
// (the sums over N, H and W of a [32, 64, 28, 28] input: every launch on
// the executor; 6.0–6.5 ms on the 2-core VM) or declines outright (a
// block across an axis of 4). BLOCK_O fills the tile of 4096 elements.
// Not where the last reduced axis is longer than maxInner, or for a
// reduction over one run of axes (the flat form reads it whole).
func innerWhole(t Target, inS []int, reduced []bool, outs int, meta tile.Meta) bool {
	if t.GPU() || !t.Native {
		return false
	}
	var redS []int
	no := 1
	for i, d := range inS {
		if reduced[i] {
			redS = append(redS, d)
		} else {
			no *= d
		}
	}
	if len(redS) < 2 || redS[len(redS)-1] > maxInner {
		return false
	}
	inner := blockAtLeast(redS[len(redS)-1])
	if inner < minRowF64 {
		inner = minRowF64 // float64 rows in blocks of 4 or more
	}
	bo := max(1, min(pow2AtLeast(no), t.perThread(32, 4096)/inner/max(1, outs)))
	meta["BLOCK_O"], meta["BLOCK_R"], meta["CHUNK"], meta["INNER"] = bo, inner, numel(redS), inner
	return true
}

// blockAtLeast is the least block size (a power of two, or three times
// one from 96: tile's block dimensions) of at least n.
func blockAtLeast(n int) int {
	b := pow2AtLeast(n)
	if t := 3 * pow2AtLeast(max(32, tile.CDiv(n, 3))); t < b {
		b = t
	}
	return b
}

// tuneColumns: the column form (COLUMNS = 1) of a reduction of nr rows of
// no contiguous outputs (the input read as [nr, no]): a program holds a
// [BLOCK_R, BLOCK_O] tile with the outputs along its last, contiguous axis
// (BLOCK_O = 128: on a GPU a warp's 32 lanes load 4 neighbouring floats
// each, 512 contiguous bytes a row in 128-bit loads), BLOCK_R rows of 32
// elements a thread (32 rows at 4 warps; fewer where the kernel has
// several outputs, below; on the CPU a tile of 4096),
// added elementwise down its CHUNK rows and reduced across the rows once
// at the end. Programs tile the outputs (program axis 0; on the CPU
// BLOCK_O is halved down to minColumnsCPU until there are two a core) and, where
// those are fewer than 4 an SM and the target splits sums, the rows too
// (program axis 1: CHUNK rows each, at least 2 BLOCK_R, a multiple of
// it), the parts added atomically into the zeroed output. The form
// before, [BLOCK_O, BLOCK_R] with the reduced axis last, gave each warp 32
// rows of one column a load: one 4-byte word of each of 32 sectors
// (fused_12_reduction, Σ[0] of 4096×3072, 58 µs on the H200, where 50 MB
// take 15 at 3.5 TB/s); on the CPU, gathers of one column (colsum large,
// 8192×1024, native: 205 → 23 ms on the 2-core VM).
func tuneColumns(root *Node, t Target, nr, no, outs int, meta tile.Meta) {
	if tuneColumnParts(root, t, nr, no, outs, meta) || tuneColumnsInline(t, nr, no, outs, meta) {
		return
	}
	bo := min(128, pow2AtLeast(no))
	for !t.GPU() && bo > minColumnsCPU && tile.CDiv(no, bo) < 2*t.Cores {
		bo /= 2
	}
	if t.Native {
		bo = max(bo, minColumnLanes)
	}
	// on a GPU at most 64 accumulator registers a thread, at least 4 a
	// sum: the five sums of a block's LayerNorm gradients (fused_15 of the
	// BERT layer) at 32 a thread took 254 registers (ptxas 11.8), two
	// programs an SM; at 8, 8 rows a tile
	e := 32
	for e > 4 && e*outs > 64 {
		e /= 2
	}
	br := min(pow2AtLeast(nr), max(1, t.perThread(e, 4096)/bo))
	chunk := nr
	if programs := tile.CDiv(no, bo); t.SplitReductions && root.Info.Reduce == tile.OpReduceSum && programs < 4*t.SMs {
		if split := min(tile.CDiv(nr, 2*br), tile.CDiv(4*t.SMs, programs)); split > 1 {
			chunk = tile.CDiv(tile.CDiv(nr, split), br) * br
		}
	}
	meta["COLUMNS"], meta["BLOCK_O"], meta["BLOCK_R"], meta["CHUNK"] = 1, bo, br, chunk
}

// tuneColumnParts: the column form on the CPU as native code, split over
// row chunks (a sum; the target does not split with atomics): programs over
// column blocks × chunks of CHUNK rows, each program streaming its chunk's
// rows of BLOCK_O contiguous columns (up to 1024: a whole row of a
// 1024-wide input, so its loads are one contiguous run the hardware
// prefetchers follow, where a band of 32–128 columns read down every row
// touched a page a row) into Parts partial sums, which the kernel's
// Combine adds in order (Kernel.Parts). CHUNK gives at least two programs
// a core up to 16 cores (the program count does not follow the machine
// below that: 32 programs at 8192×1024 on any host, 256 rows each) and
// each program about minPartElems elements or more; where that leaves one
// chunk the form is the unsplit one (false).
func tuneColumnParts(root *Node, t Target, nr, no, outs int, meta tile.Meta) bool {
	if t.GPU() || t.SplitReductions || !t.Native || root.Info.Reduce != tile.OpReduceSum {
		return false
	}
	bo, tail, br := columnTileCPU(nr, no, outs)
	blocks := tile.CDiv(no, bo)
	if tail > 0 {
		blocks = 1
	}
	// the parts: two a core up to 16 cores, and about minPartElems
	// elements each at least (the nearest count of such parts)
	minRows := max(br, tile.CDiv(minPartElems, bo+tail))
	split := min(tile.CDiv(2*max(t.Cores, 16), blocks), (nr+minRows/2)/minRows)
	if split < 2 {
		return false
	}
	chunk := tile.CDiv(tile.CDiv(nr, split), br) * br
	if tile.CDiv(nr, chunk) < 2 {
		return false
	}
	setColumnMeta(meta, bo, br, chunk, tail)
	return true
}

// columnTileCPU is the CPU's column form's tile over nr rows of no
// columns with outs sibling sums: bo columns, the block (columnBlockCPU),
// or a block and a tail of the row's last tail columns (columnTailCPU);
// br rows a step: a tile of 2048 elements at one sum (8 KB of f32
// accumulator in the frame; fewer rows where there are sibling sums): at
// 1024 columns 2 rows a step ran 10–20% faster than 4 on the 2-core VM,
// 8 slower still.
func columnTileCPU(nr, no, outs int) (bo, tail, br int) {
	bo = columnBlockCPU(no)
	if b, t, ok := columnTailCPU(no); ok {
		bo, tail = b, t
	}
	br = 1
	for 2*br*(bo+tail)*outs <= 2048 && 2*br <= pow2AtLeast(nr) {
		br *= 2
	}
	return bo, tail, br
}

// setColumnMeta sets the column form's meta-parameters (TAIL where there
// is one).
func setColumnMeta(meta tile.Meta, bo, br, chunk, tail int) {
	meta["COLUMNS"], meta["BLOCK_O"], meta["BLOCK_R"], meta["CHUNK"] = 1, bo, br, chunk
	if tail > 0 {
		meta["TAIL"] = tail
	}
}

// columnTailCPU is the CPU's split column form as one block of bo columns
// and a tail of the row's last tail columns (emitReduce: TAIL), where
// that reads fewer columns a row than columnBlockCPU's blocks (a row of
// blocks costing ⌈no/bo⌉·(bo + 32), the block and its tail bo + tail +
// 64): bo the widest block (a power of two from 16, or three times one
// from 96, up to 3072) within the columns, tail the narrowest block from
// 16 holding the rest. 777 columns: 768 and 16 (784 columns read a row,
// where two blocks of 512 read 1024; the columns' loads all whole vectors
// either way); 33: 32 and 16; 1000: none (768 and 256 cost what two
// blocks of 512 do).
func columnTailCPU(no int) (bo, tail int, ok bool) {
	blockDim := func(n int) bool { // a block dimension of at least 16
		return n >= 16 && (n&(n-1) == 0 || n >= 96 && n%3 == 0 && (n/3)&(n/3-1) == 0)
	}
	for n := min(no, 3072); n >= 16; n-- {
		if blockDim(n) {
			bo = n
			break
		}
	}
	if bo == 0 || bo == no {
		return 0, 0, false
	}
	for tail = 16; tail < no-bo || !blockDim(tail); tail++ {
	}
	if tail > no {
		return 0, 0, false
	}
	cb := columnBlockCPU(no)
	if bo+tail+64 >= tile.CDiv(no, cb)*(cb+32) {
		return 0, 0, false
	}
	return bo, tail, true
}

// tuneColumnsInline: a column reduction as native code on the CPU small
// enough for one core (at most inlineColumnElems elements read, every
// output's: one program, which the launch's caller runs) is one chunk of
// whole rows, in the split form's blocks (columnBlockCPU, or
// a block and a tail: columnTailCPU), where the unsplit form halves
// BLOCK_O down to 32 columns for two programs a core: 64×777 on one core
// of the 2-core VM 11.4 µs in 25 programs of 32 columns, 3.9 µs in two of
// 512.
func tuneColumnsInline(t Target, nr, no, outs int, meta tile.Meta) bool {
	if t.GPU() || !t.Native || nr*no*outs > inlineColumnElems {
		return false
	}
	bo, tail, br := columnTileCPU(nr, no, outs)
	setColumnMeta(meta, bo, br, nr, tail)
	return true
}

// inlineColumnElems is the most elements tuneColumnsInline takes: 512 KB
// of f32, about 32 µs of one core streaming them at 16 GB/s.
const inlineColumnElems = 1 << 17

// minPartElems is about the fewest elements a program of the CPU's split
// column form sums (256 KB of f32). 16K before 2026-12-02: colsum small
// (1000×777) then ran 16 chunks of 64 rows, where tilefuse tune on the
// 16-core host chose 8 of 128 (28.5 µs a launch), and each part costs the
// combining kernel a pass over the columns.
const minPartElems = 65536

// columnBlockCPU is the columns a program of the CPU's split column form
// sums: the block size (a power of two, or three times one, up to 1024)
// that costs least where a block of bo columns costs bo + 32 (the row
// loop's own cost a row) and the columns take ⌈no/bo⌉ blocks, the last
// shifted back to end at the last column (emitReduce: whole rows, no
// mask; the columns it shares with the block before it are read twice);
// a block wider than the columns is masked: 2·bo + 32 (a masked vector
// cost about five unmasked ones, in range or not: colsum small's 256-column
// blocks, the last with 9 columns in range, took 36% of the kernel's
// samples for one block in four); ties go to the wider. 1024 columns:
// 1024; 768: 768; 777: two blocks of 512 (on one core of the 2-core VM
// 128, 192, 256 and 512 ran alike within the noise, 0.088–0.103 ms a
// launch); 33: two of 32; 3072: three of 1024.
func columnBlockCPU(no int) int {
	if no <= 16 {
		return max(minColumnLanes, pow2AtLeast(no))
	}
	best, bestCost := 0, 0
	for _, bo := range []int{1024, 768, 512, 384, 256, 192, 128, 64, 32, 16} {
		if bo > pow2AtLeast(no) {
			continue
		}
		cost := tile.CDiv(no, bo) * (bo + 32)
		if bo > no { // masked: about twice the columns, in range or not
			cost = 2*bo + 32
		}
		if best == 0 || cost < bestCost {
			best, bestCost = bo, cost
		}
	}
	return best
}

// minColumnsCPU is the fewest columns a CPU program of the column form
// sums: one row of 16 f32 columns is one zmm vector, and the row loop's
// cost a row then outweighs it. One core of the 2-core VM (native, a
// reuse loop, the tile each core count gives): 1000×777 at 128 columns
// 0.17 ms, 32 columns 0.18–0.23, 16 columns 0.40–0.52; 8192×1024 at 128
// 2.3 ms, 64 2.8, 32 4.0, 16 8.6.
const minColumnsCPU = 32

// minRowF64 is the shortest block of a float64 row a reduction or a row
// kernel reads on a CPU whose kernels are machine code: its row sums are
// four partial sums (codegen/cpu/native declined blocks of 1 and 2 until
// 2026-12-07's fifty-fifth session, so that a LogSoftMax over two
// classes, or a sum of rows of 2, ran on the executor; it takes them now,
// and the block of 4 stays, not measured against them); shorter rows are
// masked in a block of 4.
const minRowF64 = 4

// minColumnLanes is the fewest columns a column reduction's block takes on
// a CPU whose kernels are machine code, which sums whole vectors of 8
// lanes down the rows (codegen/cpu/native declines narrower rows): fewer
// columns are masked in a block of 8 (a bias's gradient over 3 classes),
// where a block of 4 ran on the executor.
const minColumnLanes = 8

// reduceDims is the shape a reduction reads its input as: neighbouring
// dimensions that are both kept or both reduced merge into one, and
// dimensions of size 1 drop out (the flat index into the input is the
// same, with fewer divisions to split it; a full sum reads it in order);
// reduced says which are reduced.
func reduceDims(root *Node) (inS []int, reduced []bool) {
	isReduced := map[int]bool{}
	for _, a := range root.Info.Axes {
		isReduced[a] = true
	}
	for i, dsz := range root.Inputs[0].Info.Shape {
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
	return inS, reduced
}

// leadingAxes reports whether a reduction read as reduced reduces leading
// axes and keeps the trailing ones ([rows, outputs]: column sums).
func leadingAxes(reduced []bool) bool {
	return len(reduced) == 2 && reduced[0] && !reduced[1]
}

// minPrograms is the fewest programs a sum is spread over when its outputs
// are few: about two per SM (or core), a power of two (256 on an H200's 132
// SMs).
func minPrograms(t Target) int {
	p := 1
	for 2*p <= 2*max(t.SMs, t.Cores) {
		p *= 2
	}
	return p
}

// emitReduce: program p handles outputs [p·BO, (p+1)·BO) and loops over
// the reduced elements BR at a time.
func emitReduce(e *emitter, out *tile.Value, k *Kernel) error {
	b, root := e.b, reduction(e.grp)
	inS, reduced := reduceDims(root)
	var keptS, redS []int
	for i, dsz := range inS {
		if reduced[i] {
			redS = append(redS, dsz)
		} else {
			keptS = append(keptS, dsz)
		}
	}
	no, nr := numel(keptS), numel(redS)
	br, err := e.param("BLOCK_R")
	if err != nil {
		return err
	}
	bo, err := e.param("BLOCK_O")
	if err != nil {
		return err
	}
	chunk, err := e.param("CHUNK")
	if err != nil {
		return err
	}
	columns, err := e.optParam("COLUMNS", 0)
	if err != nil {
		return err
	}
	if columns == 1 && !leadingAxes(reduced) {
		return fmt.Errorf("graphpass: %v: COLUMNS = 1 but the reduction reads its input as %v, reduced %v", e.grp, inS, reduced)
	}
	// few outputs over many elements: the reduced range is split over
	// programs too (program axis 1), each adding its part into the output
	// atomically; sums only (there is no atomic max)
	split := tile.CDiv(nr, chunk)
	// on a CPU (no atomic splits) each row chunk's sums are a part of the
	// kernel's scratch, added in order by a second kernel (Kernel.Parts)
	parts := split > 1 && !e.t.SplitReductions
	if split > 1 && (root.Info.Reduce != tile.OpReduceSum || chunk%br != 0) {
		return fmt.Errorf("graphpass: %v: CHUNK = %d splits a %v or is not a multiple of BLOCK_R = %d", e.grp, chunk, root.Info.Reduce, br)
	}
	var lo, hi any = 0, nr
	if split > 1 {
		l := b.Mul(b.ProgramID(1), chunk)
		lo, hi = l, b.Minimum(b.Add(l, chunk), nr)
	}
	// the tile: [BO, BR], the reduced axis last, or in the column form
	// [BR, BO], the outputs along the contiguous axis
	oAxis, rAxis := 0, 1
	if columns == 1 {
		oAxis, rAxis = 1, 0
	}
	tail, err := e.optParam("TAIL", 0)
	if err != nil {
		return err
	}
	// TAIL (the CPU's column form): one program's block of BO columns,
	// [0, BO), and a second tile of the row's last TAIL columns, [no −
	// TAIL, no), whose store keeps the columns past BO: every load a whole
	// vector, and the row read once but for the columns the two share
	// (777: 768 + 16 columns, where two blocks of 512 read 1024)
	if tail > 0 && (columns != 1 || e.t.GPU() || bo > no || tail > no || bo+tail < no || tail == no) {
		return fmt.Errorf("graphpass: %v: TAIL = %d with BLOCK_O = %d over %d columns (COLUMNS = %d): not one block and a tail of the row", e.grp, tail, bo, no, columns)
	}
	// a piece is a tile of columns every program sums: its columns o
	// ([BO,1] or [1,BO]), its shape, the loads' mask (nil: every column in
	// range) and the store's (nil: every column its own)
	type piece struct {
		o, maskO, storeMask *tile.Value
		w                   int
		ts                  tile.Shape
	}
	shape := func(w int) tile.Shape {
		if columns == 1 {
			return tile.Shp(br, w)
		}
		return tile.Shp(w, br)
	}
	// on the CPU the column form's last block, where the columns end
	// inside it, starts at no - BO instead (shifted): it reads whole rows
	// (the unmasked row loop; a masked vector cost about five unmasked ones,
	// in range or not) and stores only the columns past the block before
	// it, each column stored by one program, summed in the same order
	start := b.Mul(b.ProgramID(0), bo)
	shifted := columns == 1 && !e.t.GPU() && no > bo && no%bo != 0 && tail == 0
	if shifted {
		start = b.Minimum(start, no-bo)
	}
	main := piece{o: b.ExpandDims(b.Add(start, b.Arange(0, bo)), rAxis), w: bo, ts: shape(bo)} // [BO,1] or [1,BO]
	if no%bo != 0 && !shifted && tail == 0 {
		main.maskO = b.Lt(main.o, no)
	}
	pieces := []piece{main}
	if tail > 0 {
		o := b.ExpandDims(b.Add(b.Arange(0, tail), no-tail), rAxis)
		pieces = append(pieces, piece{o: o, w: tail, ts: shape(tail)})
	}
	rk := b.ExpandDims(b.Arange(0, br), oAxis) // [1,BR] or [BR,1]
	d := root.Info.DType
	identity := 0.0
	if root.Info.Reduce == tile.OpReduceMax {
		identity = -inf
	}
	// the root's reduction and its siblings' (extra outputs): the same
	// reduction of inputs of one shape, at the same indices; accumulator
	// j·len(outs) + i is output i's over piece j
	outs := e.grp.outputs()
	var inits []*tile.Value
	for _, pc := range pieces {
		for range outs {
			inits = append(inits, b.Full(identity, d, pc.ts.Dims[0], pc.ts.Dims[1]))
		}
	}
	// step adds one tile of each piece into the accumulators c: the
	// reduced coordinates of a piece's lanes from red, its mask from mask
	step := func(c []*tile.Value, red func(pc piece) []*tile.Value, mask func(pc piece) *tile.Value) []*tile.Value {
		next := make([]*tile.Value, len(c))
		for j, pc := range pieces {
			m := mask(pc)
			// input coordinates: kept ones from o, reduced ones from red
			co, cr := e.coords(b.BroadcastTo(pc.o, pc.ts), keptS), red(pc)
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
			e.mask = m
			at := e.flatten(full, inS)
			for i, n := range outs {
				v, err := e.gen(reductionOf(n).Inputs[0], at)
				if err != nil {
					e.err = err
					return c
				}
				if identity != 0 || !loadUnder(v, e.mask) {
					v = e.inRange(v, identity)
				}
				a := j*len(outs) + i
				if root.Info.Reduce == tile.OpReduceMax {
					next[a] = b.Maximum(c[a], v)
				} else {
					next[a] = b.Add(c[a], v)
				}
			}
		}
		return next
	}
	inner, err := e.optParam("INNER", 0)
	if err != nil {
		return err
	}
	var acc []*tile.Value
	if inner > 0 {
		// INNER (a CPU's machine code): the reduced index in two loops'
		// worth, the outer reduced axes one at a time (the loop, each a
		// scalar: divided as a scalar) and the last reduced axis whole in
		// the tile's lanes (masked past it), so that no lane's coordinate
		// is a division of the lanes, which the machine code declines
		// (NCHW's per-channel sums over N, H and W: a flat block crossed
		// the H·W boundary)
		r2 := redS[len(redS)-1]
		if columns == 1 || len(redS) < 2 || split > 1 || tail > 0 || br != inner || inner < r2 {
			return fmt.Errorf("graphpass: %v: INNER = %d with BLOCK_R = %d over reduced axes %v (COLUMNS = %d, CHUNK = %d, TAIL = %d): not the last reduced axis whole in one unsplit block", e.grp, inner, br, redS, columns, chunk, tail)
		}
		outer := redS[:len(redS)-1]
		acc = b.For(0, nr/r2, 1, inits, func(q *tile.Value, c []*tile.Value) []*tile.Value {
			cq := e.coords(q, outer)
			return step(c, func(pc piece) []*tile.Value {
				cr := make([]*tile.Value, 0, len(redS))
				for _, x := range cq {
					cr = append(cr, b.Splat(x, pc.ts))
				}
				return append(cr, b.BroadcastTo(rk, pc.ts))
			}, func(pc piece) *tile.Value {
				if r2 == br {
					return pc.maskO
				}
				return e.and(pc.maskO, b.Lt(rk, r2))
			})
		})
	} else {
		acc = b.For(lo, hi, br, inits, func(r0 *tile.Value, c []*tile.Value) []*tile.Value {
			r := b.Add(rk, r0)
			return step(c, func(pc piece) []*tile.Value {
				return e.coords(b.BroadcastTo(r, pc.ts), redS)
			}, func(pc piece) *tile.Value {
				if nr%br != 0 { // else every step is whole (chunk is a multiple of br)
					return e.and(pc.maskO, b.Lt(r, nr))
				}
				return pc.maskO
			})
		})
	}
	if e.err != nil {
		return e.err
	}
	k.Grid = tile.Grid{tile.CDiv(no, bo)}
	if tail > 0 {
		k.Grid = tile.Grid{1}
	}
	switch {
	case pieces[0].maskO != nil:
		pieces[0].storeMask = b.Reshape(pieces[0].maskO, bo)
	case shifted: // the block's own columns
		pieces[0].storeMask = b.Reshape(b.Ge(pieces[0].o, b.Mul(b.ProgramID(0), bo)), bo)
	}
	if tail > 0 { // the tail's columns past the block
		pieces[1].storeMask = b.Reshape(b.Ge(pieces[1].o, bo), tail)
	}
	switch {
	case parts:
		k.Grid[1], k.Parts = split, split
		comb, grid, err := combineParts(fmt.Sprintf("fused_%d_%s_combine", e.grp.ID, e.grp.Kind), d, no, split, len(outs), columnBlockCPU(no))
		if err != nil {
			return fmt.Errorf("graphpass: %v: %w", e.grp, err)
		}
		k.Combine, k.CombineGrid = comb, grid
	case split > 1:
		k.Grid[1], k.Accumulates = split, true
	}
	for i, n := range outs {
		p, err := e.outPtr(out, n)
		if err != nil {
			return err
		}
		if parts { // this chunk's part of the scratch
			p = b.AddPtr(p, b.Mul(b.ProgramID(1), no))
		}
		for j, pc := range pieces {
			res := b.Reduce(root.Info.Reduce, acc[j*len(outs)+i], rAxis)
			at := b.AddPtr(p, b.Reshape(pc.o, pc.w))
			if split > 1 && !parts {
				b.AtomicAdd(at, res, pc.storeMask)
			} else {
				b.Store(at, res, pc.storeMask)
			}
		}
	}
	return nil
}

// loadUnder reports whether x is a load under mask m (m itself, or m
// broadcast to the load's shape, as gen emits an input's load) with no
// other: its masked-off lanes give +0, what inRange's select of a sum's
// identity would give them, so that select is left out (bit for bit the
// same lanes; on the CPU the unmasked row loop then computes no mask at
// all, where the select computed it a vector: colsum's column blocks).
func loadUnder(x, m *tile.Value) bool {
	if m == nil || x.Op != tile.OpLoad || len(x.Args) != 2 {
		return false
	}
	lm := x.Args[1]
	for lm != m && (lm.Op == tile.OpBroadcast || lm.Op == tile.OpExpandDims) {
		lm = lm.Args[0]
	}
	return lm == m
}

// combineParts is the kernel that adds a split column sum's parts
// (Kernel.Parts): parameters in0… (each output's parts × no elements,
// part p at p·no), then out, out1…; program i sums columns [i·BLOCK,
// (i+1)·BLOCK) over the parts in order from zero, so the result does not
// depend on the order the parts were computed in. BLOCK is bc (the column
// form's block, columnBlockCPU, for its parts) and, as there, where the columns end
// inside the last block it starts at no − BLOCK instead and stores only
// the columns past the block before it: every load a whole vector (the
// unmasked row loop), each column stored by one program. (A block of
// 1024 over 777 columns masked every vector: 4.1 µs a launch for 16
// parts on one core of the 2-core VM, a tenth of the parts' kernel.)
func combineParts(name string, d tile.DType, no, parts, outs, bc int) (*tile.Kernel, tile.Grid, error) {
	b := tile.NewBuilder(name, tile.Meta{"BLOCK": bc})
	ins := make([]*tile.Value, outs)
	for i := range ins {
		ins[i] = b.Ptr(fmt.Sprintf("in%d", i), d)
	}
	ptrs := []*tile.Value{b.Ptr("out", d)}
	for i := 1; i < outs; i++ {
		ptrs = append(ptrs, b.Ptr(fmt.Sprintf("out%d", i), d))
	}
	start := b.Mul(b.ProgramID(0), bc)
	shifted := no > bc && no%bc != 0
	if shifted {
		start = b.Minimum(start, no-bc)
	}
	cols := b.Add(start, b.Arange(0, bc))
	// mask: the loads' (nil: whole vectors); storeMask: the store's
	var mask, storeMask *tile.Value
	switch {
	case shifted: // the block's own columns
		storeMask = b.Ge(cols, b.Mul(b.ProgramID(0), bc))
	case no%bc != 0:
		mask = b.Lt(cols, no)
		storeMask = mask
	}
	inits := make([]*tile.Value, outs)
	for i := range inits {
		inits[i] = b.Zeros(d, bc)
	}
	acc := b.For(0, parts, 1, inits, func(p *tile.Value, c []*tile.Value) []*tile.Value {
		at := b.Add(b.Mul(p, no), cols)
		next := make([]*tile.Value, outs)
		for i := range next {
			var v *tile.Value
			if mask == nil {
				v = b.Load(b.AddPtr(ins[i], at), nil, nil)
			} else {
				v = b.Load(b.AddPtr(ins[i], at), mask, 0.0)
			}
			next[i] = b.Add(c[i], v)
		}
		return next
	})
	for i := range acc {
		b.Store(b.AddPtr(ptrs[i], cols), acc[i], storeMask)
	}
	k, err := b.Build()
	if err != nil {
		return nil, tile.Grid{}, err
	}
	return k, tile.Grid{tile.CDiv(no, bc)}, nil
}

// reduction is a reduction group's reduction: its root, or the value the
// root reshapes (through reshapes only).
func reduction(grp *Group) *Node { return reductionOf(grp.Root) }

// reductionOf is n, or the value n reshapes (through reshapes only).
func reductionOf(n *Node) *Node {
	for n.Info.Kind == ops.Reshape && len(n.Inputs) == 1 {
		n = n.Inputs[0]
	}
	return n
}

// mergeSiblingReductions merges reduction groups that reduce tensors of
// the same shape along the same axes with the same operation into one
// kernel with one output each (the bias's and the gain's gradients of a
// LayerNorm, Σ dy and Σ dy⊙x̂ over the rows, read dy once): the later
// root stays the root, the other reductions are its extra outputs. Two
// groups merge only where neither depends on the other through any path
// of groups (the merged kernel reads both groups' inputs before writing
// either's output), within maxGroup ops. It returns the groups left.
func mergeSiblingReductions(groups []*Group, maxGroup int) []*Group {
	key := func(grp *Group) string {
		r := reduction(grp)
		if r.Info.Kind != ops.Reduce || len(r.Inputs) != 1 {
			return ""
		}
		return fmt.Sprint(r.Info.Reduce, r.Info.Axes, r.Inputs[0].Info.Shape, r.Info.DType, grp.Root.Info.Shape)
	}
	gone := map[*Group]bool{}
	for i, a := range groups {
		if a.Kind != ReduceGroup || gone[a] || key(a) == "" {
			continue
		}
		for _, b := range groups[i+1:] {
			if b.Kind != ReduceGroup || gone[b] || len(b.Extra) > 0 || key(b) != key(a) ||
				len(a.Members)+len(b.Members) > maxGroup || groupReaches(a, b) || groupReaches(b, a) {
				continue
			}
			outs := append(a.outputs(), b.Root)
			root := a.Root // the later root is the merged group's
			if b.Root.index > root.index {
				root = b.Root
			}
			a.Root, a.Extra = root, nil
			for _, o := range outs {
				if o != root {
					a.Extra = append(a.Extra, o)
				}
			}
			for _, m := range b.Members {
				m.Group = a
			}
			a.Members = append(a.Members, b.Members...)
			gone[b] = true
		}
	}
	return slices.DeleteFunc(groups, func(g *Group) bool { return gone[g] })
}

// groupReaches reports whether a path leads from an output of a to a
// member of b, every group on the way taken as one node (it reads all its
// members' inputs before writing any output); constant users (SizeOf) take
// their operand's shape only, and are no path.
func groupReaches(a, b *Group) bool {
	var stack []*Node
	for _, m := range a.Members {
		stack = append(stack, m.Users...)
	}
	return pathTo(stack, b, a)
}

// reshapeOfReduce reports whether grp, an elementwise group, is nothing but
// reshapes of n, a reduction, into its root (no extra outputs): grp
// becomes n's reduction group, with the reshape as its root.
func reshapeOfReduce(n *Node, grp *Group) bool {
	if len(grp.Extra) > 0 || grp.MatMul != nil || n.Info.Kind != ops.Reduce || n.Info.DType != grp.Root.Info.DType {
		return false
	}
	for _, m := range grp.Members {
		if m.Info.Kind != ops.Reshape || len(m.Inputs) != 1 {
			return false
		}
	}
	x := grp.Root
	for x.Group == grp && x.Info.Kind == ops.Reshape {
		x = x.Inputs[0]
	}
	return x == n
}
