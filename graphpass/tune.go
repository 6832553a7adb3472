package graphpass

import (
	"maps"

	"github.com/tilefuse/tilefuse/tile"
)

// Candidates are the meta-parameter choices an autotuner may try for grp's
// kernel on target t: first the heuristic's own (its kind's tune, then
// t.Tune, as Emit chooses), then its kind's alternatives (space), each
// different, none known to be unwritable; a kind without a space has the
// default alone. Emit a candidate with TuneTo.
func Candidates(grp *Group, t Target, prec tile.Precision) []tile.Meta {
	def := defaultMeta(grp, t, prec)
	out := []tile.Meta{def}
	space := groupKinds[grp.Kind].space
	if space == nil {
		return out
	}
	seen := map[string]bool{def.String(): true}
	for _, m := range space(grp, t, prec, def) {
		if m == nil || seen[m.String()] {
			continue
		}
		seen[m.String()] = true
		out = append(out, m)
	}
	return append(out, epiSmemCandidates(out, seen)...)
}

// Narrower are forms of grp's kernel on t narrower than the heuristic's
// along the outputs, for a CPU whose machine code declines the heuristic's
// (fusion tries them after Candidates): a reduction (not the column form)
// whose kernel divides integers by constants (an input read through a
// transpose merged with another axis: the row r at (r mod d, r div d)),
// its block of outputs (BLOCK_O) halved to each power of two that divides
// every such divisor, down to one output a program, so that a block's
// outputs stay within one multiple of d, as the machine code's integer
// division of lanes requires (checked again as each program starts: one
// that fails sends the launch to the executor). Empty for other kinds, a
// kernel without such divisions, and on a GPU.
func Narrower(grp *Group, t Target, prec tile.Precision) []tile.Meta {
	if t.GPU() || grp.Kind != ReduceGroup {
		return nil
	}
	def := defaultMeta(grp, t, prec)
	if def["COLUMNS"] == 1 {
		return nil
	}
	k, err := Emit(grp, t, prec)
	if err != nil {
		return nil
	}
	d := int64(0) // the divisors' greatest common divisor
	k.Tile.Walk(func(v *tile.Value) {
		if (v.Op != tile.OpDiv && v.Op != tile.OpRem) || !v.Type.DType.IsInt() {
			return
		}
		c := v.Args[1]
		for c.Op == tile.OpSplat || c.Op == tile.OpBroadcast || c.Op == tile.OpExpandDims {
			c = c.Args[0]
		}
		if c.Op == tile.OpConst && c.Aux > 0 {
			d = gcd(d, c.Aux)
		}
	})
	if d == 0 {
		return nil
	}
	var out []tile.Meta
	for bo := def["BLOCK_O"] / 2; bo >= 1; bo /= 2 {
		if d%int64(bo) == 0 {
			out = append(out, with(def, "BLOCK_O", bo, "TAIL", 0))
		}
	}
	return out
}

// gcd is the greatest common divisor of a and b (b where a is 0).
func gcd(a, b int64) int64 {
	for a != 0 {
		a, b = b%a, a
	}
	return b
}

// epiSmemCandidates are the swapped-form tilings among cands (wgmma = 2)
// with the epilogue through shared memory (epi_smem = 1: codegen's
// epilogueThroughSmem, the accumulator of Cᵀ read back row-major for
// 16-byte loads and stores), candidates for the autotuner only: no
// heuristic chooses epi_smem until it is measured on the GPU.
func epiSmemCandidates(cands []tile.Meta, seen map[string]bool) []tile.Meta {
	var out []tile.Meta
	for _, m := range cands {
		if m["wgmma"] != 2 || m["epi_smem"] != 0 {
			continue
		}
		e := with(m, "epi_smem", 1)
		if !seen[e.String()] {
			seen[e.String()] = true
			out = append(out, e)
		}
	}
	return out
}

// defaultMeta is the meta-parameters Emit chooses for grp on t.
func defaultMeta(grp *Group, t Target, prec tile.Precision) tile.Meta {
	meta := tile.Meta{}
	if tune := groupKinds[grp.Kind].tune; tune != nil {
		tune(grp, t, prec, meta)
	}
	if _, ok := meta["num_warps"]; t.GPU() && !ok {
		meta["num_warps"] = t.NumWarps
	}
	if t.Tune != nil {
		t.Tune(grp, meta)
	}
	return meta
}

// TuneTo is t with its Tune replaced by one that sets every kernel's
// meta-parameters to meta (a candidate of Candidates): Emit(grp,
// TuneTo(t, m), prec) writes grp's kernel with m.
func TuneTo(t Target, meta tile.Meta) Target {
	t.Tune = func(_ *Group, m tile.Meta) {
		clear(m)
		maps.Copy(m, meta)
	}
	return t
}

// with is def with the changes in kv (name, value pairs; a value of 0
// deletes the parameter).
func with(def tile.Meta, kv ...any) tile.Meta {
	m := maps.Clone(def)
	for i := 0; i+1 < len(kv); i += 2 {
		name, v := kv[i].(string), kv[i+1].(int)
		if v == 0 {
			delete(m, name)
		} else {
			m[name] = v
		}
	}
	return m
}

// warpChoices are num_warps halved and doubled (within 1 and the most the
// target's threads and maxWarps allow), where def has num_warps.
func warpChoices(def tile.Meta, t Target, maxWarps int) []tile.Meta {
	w, ok := def["num_warps"]
	if !ok || !t.GPU() {
		return nil
	}
	var out []tile.Meta
	if w > 1 {
		out = append(out, with(def, "num_warps", w/2))
	}
	if 2*w <= min(maxWarps, t.MaxThreads/32) {
		out = append(out, with(def, "num_warps", 2*w))
	}
	return out
}

// elementwiseSpace: BLOCK halved and doubled (more warps with the double
// on a GPU, as 8 a thread), and quadrupled on the CPU; in the lanes form
// (emitLanes) the rows a block halved and doubled; none in the rows form
// (BLOCK_C: a row of the output a program).
func elementwiseSpace(grp *Group, t Target, _ tile.Precision, def tile.Meta) []tile.Meta {
	if s, _, r, minRows, ok := lanesForm(grp, t); ok {
		br := def["BLOCK_R"]
		var out []tile.Meta
		if br/2 >= minRows {
			out = append(out, with(def, "BLOCK_R", br/2))
		}
		if 2*br <= pow2AtLeast(s[r]) {
			out = append(out, with(def, "BLOCK_R", 2*br))
		}
		return out
	}
	b := def["BLOCK"]
	if b == 0 {
		return nil
	}
	n := pow2AtLeast(numel(grp.Root.Info.Shape))
	var out []tile.Meta
	if b > 32 {
		out = append(out, with(def, "BLOCK", b/2))
	}
	if 2*b <= n {
		out = append(out, with(def, "BLOCK", 2*b))
		if w := def["num_warps"]; t.GPU() && 2*w*32 <= t.MaxThreads {
			out = append(out, with(def, "BLOCK", 2*b, "num_warps", 2*w))
		}
	}
	if !t.GPU() && 4*b <= n {
		out = append(out, with(def, "BLOCK", 4*b))
	}
	return out
}

// reduceSpace: the tile's shape (BLOCK_R halved or doubled, BLOCK_O the
// other way), where the reduced range's part (CHUNK) stays a multiple of
// BLOCK_R; for the column form split over programs (COLUMNS), CHUNK halved
// (at least BLOCK_R) and doubled (while it splits); and num_warps on a GPU.
func reduceSpace(grp *Group, t Target, _ tile.Precision, def tile.Meta) []tile.Meta {
	br, bo, chunk := def["BLOCK_R"], def["BLOCK_O"], def["CHUNK"]
	var out []tile.Meta
	if def["INNER"] > 0 { // the last reduced axis whole (innerWhole): BLOCK_O halved and doubled
		if bo > 1 {
			out = append(out, with(def, "BLOCK_O", bo/2))
		}
		if bo < pow2AtLeast(numel(grp.Root.Info.Shape)) {
			out = append(out, with(def, "BLOCK_O", 2*bo))
		}
		return out
	}
	reduced := numel(reduction(grp).Inputs[0].Info.Shape) / max(1, numel(grp.Root.Info.Shape))
	split := chunk < reduced // programs share the reduced range: CHUNK stays a multiple
	// BLOCK_O changed: the row's blocks without a TAIL (emitReduce)
	if br > 8 && bo*2 <= pow2AtLeast(numel(grp.Root.Info.Shape)) {
		out = append(out, with(def, "BLOCK_R", br/2, "BLOCK_O", bo*2, "TAIL", 0))
	}
	// (not below the column form's least block where kernels are machine
	// code: minColumnLanes)
	if bo > 1 && (!split || chunk%(2*br) == 0) && !(t.Native && def["COLUMNS"] == 1 && bo/2 < minColumnLanes) {
		out = append(out, with(def, "BLOCK_R", br*2, "BLOCK_O", bo/2, "TAIL", 0))
	}
	if tail := def["TAIL"]; tail > 0 {
		// the CPU's row of blocks, the last shifted (columnBlockCPU), in
		// place of the block and its tail: the form before TAIL, for the
		// tuner to compare on the host
		no, outs := numel(grp.Root.Info.Shape), 1+len(grp.Extra)
		b := columnBlockCPU(no)
		r := 1
		for 2*r*b*outs <= 2048 && 2*r <= pow2AtLeast(reduced) {
			r *= 2
		}
		out = append(out, with(def, "TAIL", 0, "BLOCK_O", b, "BLOCK_R", r, "CHUNK", tile.CDiv(chunk, r)*r))
	}
	if def["COLUMNS"] == 1 && split {
		if chunk/2 >= br && (chunk/2)%br == 0 {
			out = append(out, with(def, "CHUNK", chunk/2))
		}
		if 2*chunk < reduced {
			out = append(out, with(def, "CHUNK", 2*chunk))
		}
	}
	return append(out, warpChoices(def, t, 8)...)
}

// rowSpace: on a GPU, num_warps halved and doubled, BLOCK_M halved and
// doubled (one row a program: two), the streaming hint the other way (and
// where the default streams, on the row's loads or the stores alone), and
// for rows of at least 8192 held in one block, every warp the target has
// (32 at 1024 threads: 8 to 32 elements a thread, a quarter or half of
// the registers, one program of 32 warps an SM), for shorter rows held
// in one block without late loads 32 and 8 elements a thread, where the
// group reads other operands beside the row (γ and β) the keep hint on
// them the other way (KEEP) and with the row's loads streamed, and the row
// walked in blocks of 16 elements a thread at 4, 8, 16 and 32 warps (where the group
// computes nothing a looped row cannot: fewer registers, more programs an
// SM, the second pass from L2); rows walked in blocks: CHUNK halved and
// doubled, blocks of 16 a thread at 4, 8, 16 and 32 warps, the warps halved
// and doubled, and where the row fits in one block too (up to twice
// maxRow), that form at 16 warps and at every warp the target has (and,
// up to maxRow, at the warps tuneRow gives a row held in one block); where
// the group's other operands may be loaded late (lateLoads), a row held in
// one block with them loaded 1, 2 or 4 groups ahead or whole (late_loads
// 0), and the warps a row held whole takes; one row a program held in
// one block, persistent too (persistForms: PERSIST = 1 to 4 programs an
// SM); on the CPU, 2 to 8 rows a program for short rows, CHUNK halved and
// doubled.
func rowSpace(grp *Group, t Target, _ tile.Precision, def tile.Meta) []tile.Meta {
	n := grp.Full[len(grp.Full)-1]
	rows := numel(grp.Full) / max(n, 1)
	allWarps := t.MaxThreads / 32
	// the looped form at 16 elements a thread (GPU), where it is writable,
	// with the streaming hint where tuneRow gives it to a looped row
	loopedForms := func() []tile.Meta {
		var out []tile.Meta
		if !t.GPU() || len(grp.Extra) > 0 || hasSoftmaxGrad(grp) {
			return nil
		}
		stream := 0
		if int64(numel(grp.Full))*int64(grp.Root.Info.DType.Size()) > streamBytes {
			stream = 1
		}
		for _, w := range []int{4, 8, 16, 32} {
			if c := 16 * 32 * w; w <= allWarps && c < n {
				out = append(out, with(def, "BLOCK", 0, "BLOCK_M", 0, "late_loads", 0, "KEEP", 0, "CHUNK", c, "STREAM", stream, "num_warps", w))
			}
		}
		return out
	}
	// a row held in one block with late loads (lateLoads): d groups
	// ahead, 1, 2 and 4 (and, from the held forms without them, 2)
	lateForms := func(m tile.Meta) []tile.Meta {
		if !lateLoads(grp, t) {
			return nil
		}
		var out []tile.Meta
		for _, d := range []int{0, 1, 2, 4} {
			if d != m["late_loads"] {
				out = append(out, with(m, "late_loads", d))
			}
		}
		return out
	}
	var out []tile.Meta
	if chunk, ok := def["CHUNK"]; ok {
		if chunk > 256 {
			out = append(out, with(def, "CHUNK", chunk/2))
		}
		if 2*chunk < n {
			out = append(out, with(def, "CHUNK", chunk*2))
		}
		out = append(out, loopedForms()...)
		if t.GPU() && n <= 2*maxRow(t) {
			block := pow2AtLeast(n)
			var held []tile.Meta
			if n <= maxRow(t) { // the warps a row held in one block takes
				held = append(held, with(def, "CHUNK", 0, "BLOCK", block, "num_warps", rowWarps(block, t)))
			}
			held = append(held, with(def, "CHUNK", 0, "BLOCK", block, "num_warps", maxRowWarps(t)))
			if block <= 64*32*allWarps {
				held = append(held, with(def, "CHUNK", 0, "BLOCK", block, "num_warps", allWarps))
			}
			for _, m := range held {
				out = append(append(out, m), lateForms(m)...)
			}
		}
		return append(out, warpChoices(def, t, 16)...)
	}
	block := def["BLOCK"]
	bm := max(1, def["BLOCK_M"])
	if !t.GPU() {
		for _, m := range []int{2, 4, 8} {
			if m*block <= 2048 && m <= pow2AtLeast(rows) {
				out = append(out, with(def, "BLOCK_M", m))
			}
		}
		return out
	}
	switch {
	case bm > 2:
		out = append(out, with(def, "BLOCK_M", bm/2))
	case bm == 2:
		out = append(out, with(def, "BLOCK_M", 0)) // one row a program
	}
	if 2*bm <= pow2AtLeast(rows) && 2*bm*block <= 64*32*def["num_warps"] {
		out = append(out, with(def, "BLOCK_M", 2*bm, "late_loads", 0)) // a [1,BLOCK] γ is loaded whole
	}
	switch def["STREAM"] {
	case 0:
		out = append(out, with(def, "STREAM", 1))
	case 1: // none, and on the loads or the stores alone
		out = append(out, with(def, "STREAM", 0), with(def, "STREAM", 2), with(def, "STREAM", 3))
	}
	if rowInputs(grp) > 1 { // γ and β kept in the caches, or not; with the row's loads streamed too
		out = append(out, with(def, "KEEP", 1-def["KEEP"]))
		if def["STREAM"] != 2 {
			out = append(out, with(def, "KEEP", 1, "STREAM", 2))
		}
	}
	for _, m := range warpChoices(def, t, 16) {
		if bm*block <= 64*32*m["num_warps"] { // at most 64 elements a thread
			out = append(out, m)
		}
	}
	if bm == 1 {
		out = append(out, lateForms(def)...)
		if _, ok := def["late_loads"]; ok { // the warps and loads of a row held without late loads
			out = append(out, with(def, "late_loads", 0, "num_warps", rowWarps(block, t)))
		}
	}
	if bm == 1 {
		out = append(out, persistForms(def, t, rows)...)
		// a row of under 8192 held at 32 elements a thread (rowWarps) and
		// at 8 (a warp for every 256, as Triton's tutorial softmax holds
		// 4096 at 16 warps; rowWarps8), whichever the default is not
		if _, late := def["late_loads"]; !late && block < 8192 {
			for _, w := range []int{rowWarps(block, t), rowWarps8(block, t)} {
				if w != def["num_warps"] {
					out = append(out, with(def, "num_warps", w))
				}
			}
		}
	}
	if bm == 1 && block >= 8192 {
		if block <= 64*32*allWarps && block >= 8*32*allWarps {
			out = append(out, with(def, "num_warps", allWarps))
		}
		out = append(out, loopedForms()...)
	}
	return out
}

// smThreads and smRegisters are the most threads and 32-bit registers an
// SM of the GPUs the heuristics know (sm_80, sm_90) holds: 64 warps, 64K.
const smThreads, smRegisters = 2048, 64 << 10

// persistForms are a row kernel held in one block, one row a program
// (def), as a persistent kernel (PERSIST = k: k programs an SM, each
// looping over its rows with the next row's loads in flight while it
// stores; rowEmit.persistent) for k = 1 to 4, 8 and 16 where k programs
// fit in an SM: their threads, and two rows of the block each (the row and the next
// one, a register an element: 1 program an SM at 32768 wide, up to 4 at
// 8192), where the rows are more than the SMs (fewer are one row a
// program anyway). The next row's loads are issued in the store, group by
// group (late_loads: def's, else 1), where its registers are freed: with
// them whole before the store, ptxas 11.8 (sm_90) gave softmax 1151×8192
// at 8 warps 80 registers against 66, and 4096×32768 at 16 warps 128 and
// 104 bytes spilled against 126 and none. The next row carried through
// shared memory instead (codegen's smem_carry = 1, for k = 1 to 8 programs
// an SM) is not among them: on the H200 it was slower at every peer shape
// (2026-12-02, tuner batches of 10: softmax 8192×4096 best 0.0729 ms
// against the default's 0.0675, 32768×1024 0.0692 against 0.0657, 1151×8192
// 0.0239 against 0.0220, LayerNorm 8192×4096 0.0743 against 0.0673), and
// each candidate costs the tuner a compile and a measurement. At 8 and 16
// programs an SM (as many as one row a program keeps resident) softmax
// 32768×1024 ran 0.0704 and 0.0722 ms against the one-row kernel's 0.0659
// (H200, 2026-12-04, r22b): no default takes them.
func persistForms(def tile.Meta, t Target, rows int) []tile.Meta {
	var out []tile.Meta
	w, block := max(1, def["num_warps"]), max(1, def["BLOCK"])
	late := max(1, def["late_loads"])
	for _, k := range []int{1, 2, 3, 4, 8, 16} {
		if k*32*w > smThreads || k*2*block > smRegisters || rows <= t.SMs {
			break
		}
		out = append(out, with(def, "PERSIST", k, "late_loads", late))
	}
	return out
}
