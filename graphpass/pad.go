package graphpass

import (
	"fmt"
	"os"
	"slices"

	"github.com/tilefuse/tilefuse/tile"
)

// Products whose operands' rows are not 16-byte aligned, on a GPU's
// tensor cores. A product's K loop copies its operands' tiles into shared
// memory in 16-byte pieces (cp.async) or as tensor copies (TMA), and both
// need every row of the operand to start 16 bytes after the last: A (m×k)
// where k is a multiple of 4, B (k×n) where n is (tensor copies of A also
// k a multiple of BLOCK_K, of B unmasked tiles). Otherwise the copies are
// 4 or 8 bytes wide (or B's realigned, realign_b), and the loop is bound by
// their instructions: on the H200 (2026-12-05, r39b, `tilefuse peer`,
// TF32, TFLOP/s) 4095×4097×4099 ran 140 against 4096³'s 322–333, an odd k
// alone (4096×4096×4099) 190, an odd n alone (4096×4097×4096) 250, and
// 1025³ 31 against 1024³'s 114.
//
// Such a product, at least padMinSide on every side and at a tensor-core
// precision, reads its operands from copies whose rows are aligned, each
// made by a kernel of its own (a pad group, its root an internal value
// the product group reads instead): A's copy m×k' with k' = k rounded up
// to padK (columns k to k' zero), so that the K loop runs over k' in whole
// BLOCK_K steps and A's tiles are tensor copies; B's copy, where n is not
// a multiple of 4, k'×n' with n' = n rounded up to padN (zeros past k and
// n), so that B's tiles are unmasked tensor copies too; Bᵀ's (B stored
// n×k) n×k', with A's. Where only k is padded, B keeps its own rows
// (aligned), its loads masked past row k: A's zero columns meet B's
// zero-filled rows. The zeros add nothing: each extra term is 0·0. The
// same call with the copies (their time included): 280–285, 296, 306 and
// 57 (DESIGN.md: "Operands copied into aligned rows"). Each copy moves 2·4
// bytes an element: for A, about 4·R/(BW·n) of the product's time (R the
// tensor cores' rate, BW the memory's).

// padK and padN are what the padded copies' rows are rounded up to: K to
// a whole BLOCK_K step (32), n to a whole tile of columns (the swapped
// form's 128), so that neither copy's loads need masks.
const (
	padK = 32
	padN = 128
)

// padMinSide is the least m, n and k of a product whose operands are
// copied: the copies' launches and bytes are small beside the product's
// work there.
const padMinSide = 512

// padBMinRows is the least m of a TF32 or bf16 product whose B is copied:
// B's copy moves 2·4 bytes an element of B whatever m, and the product's
// time it saves grows with m. On an H100 (2026-12-05, r39d) at m = 4096 an
// odd n's copy cost ~46 µs and saved ~146 (4096×4097×4096, TF32 252 → 308
// TFLOP/s); at m = 1024 (r39f, 1024×4097×4096) TF32 230 → 234–239, bf16
// 220 → 216; at 768 TF32 198–199 → 195, bf16 190 → 186; at 1025³ both
// copies together gained (the H200, r39b: 31 → 57, A's alone 40). 3xTF32,
// whose B is not realigned (realign_b is TF32's), gains at any m from
// padMinSide: 768×4097×4096 59–60 → 79, 1024×4097×4096 86 → 99.
const padBMinRows = 1024

// An A whose rows are 16-byte aligned but k no multiple of padK is read as
// it is: the swapped form's tensor copies of A bound K (codegen's tma_k),
// TF32 and 3xTF32 (an H100, 2026-12-06, r41b, 4096×4096×4100 TF32 294.3
// copied → 308.8 not, 3xTF32 105.5 → 109.5) and bf16 since its A takes
// them too (codegen's tmaBF16Rows; the H200, r42d, bf16 289–292 copied →
// 311–315 not); products on mma.sync copy such rows 16 bytes at a time.

// padPrec reports whether products at prec run on the tensor cores, whose
// copies want aligned rows (ieee's FMA loops load without them).
func padPrec(prec tile.Precision) bool {
	return prec == tile.PrecTF32 || prec == tile.PrecBF16 || prec == tile.PrecTF32x3
}

// padShapes returns the shapes of the padded copies of A and B product
// group grp reads on t at prec (nil: that operand is read as it is).
func padShapes(grp *Group, t Target, prec tile.Precision) (aShape, bShape []int) {
	mm := grp.MatMul
	if grp.Kind != MatMulGroup || mm == nil || !productFuses(mm) || len(mm.Inputs) != 2 ||
		mm.Info.TransA || grp.aT != nil || mm.Inputs[0].colMajor || mm.Inputs[1].colMajor ||
		!t.GPU() || !padPrec(prec) || mm.Info.DType != tile.F32 {
		return nil, nil
	}
	a, b := mm.Inputs[0].Info.Shape, mm.Inputs[1].Info.Shape
	r := len(a)
	if r < 2 || r > 3 || len(b) != r || len(mm.Info.Shape) != r {
		return nil, nil
	}
	transB := mm.Info.TransB // B stored n×k: rows of k
	lead := a[:r-2]          // a batch: each matrix padded
	m, k, n := a[r-2], a[r-1], b[r-1]
	if transB {
		n = b[r-2]
	}
	if min(m, n, k) < padMinSide || padWhich == "0" {
		return nil, nil
	}
	kb := k
	wide := padWhich == "wide" // measuring: rows aligned but not to the tensor copies' rule
	if (k%4 != 0 || k%padK != 0 && wide) && padWhich != "b" {
		kb = roundUp(k, padK)
		aShape = append(slices.Clone(lead), m, kb)
	}
	switch {
	case m < padBMinRows && prec != tile.PrecTF32x3 && !wide:
		// B's copy costs as B's size, the product's gain as m·(B's size)
	case transB && kb != k:
		bShape = append(slices.Clone(lead), n, kb)
	case !transB && (n%4 != 0 || wide && (n%64 != 0 || kb != k)) && padWhich != "a":
		bShape = append(slices.Clone(lead), kb, roundUp(n, padN))
	}
	return aShape, bShape
}

// padWhich is TILEFUSE_PAD, read when the process starts, for measuring:
// "0" copies neither operand, "a" A alone, "b" B alone (its rows k),
// "wide" also where rows are 16-byte aligned but k is no multiple of 32
// or n of 64 (A's or B's tensor copies' rule); otherwise each where
// padShapes' rule asks.
var padWhich = os.Getenv("TILEFUSE_PAD")

func roundUp(x, m int) int { return (x + m - 1) / m * m }

// padOperands gives each product group whose operands' rows are not
// aligned (padShapes) a pad group before it for each such operand: its
// root, an internal value of the padded shape, is the group's aPad or bPad.
// Where opt.PrecisionByGroup, each group's precision is DefaultPrecision's.
// A value two such groups read alike is copied once.
func padOperands(groups []*Group, opt Options) []*Group {
	c := newCopier(groups)
	for _, grp := range groups {
		prec := opt.Precision
		if opt.PrecisionByGroup && grp.Kind == MatMulGroup {
			prec = DefaultPrecision(grp, opt.Target)
		}
		as, bs := padShapes(grp, opt.Target, prec)
		if as == nil && bs == nil {
			continue
		}
		mm := grp.MatMul
		reads := slices.Clone(grp.Reads)
		if as != nil {
			grp.aPad = c.copyOf(PadGroup, mm.Inputs[0], as, "pad", grp)
			reads = append(reads, grp.aPad)
		}
		if bs != nil {
			grp.bPad = c.copyOf(PadGroup, mm.Inputs[1], bs, "pad", grp)
			reads = append(reads, grp.bPad)
		}
		grp.Reads = reads
	}
	return c.groups
}

// pad: program (i, j, z) writes the BLOCK_R×BLOCK_C block (i, j) of the
// padded copy of matrix z (of a batch; 0 for a matrix): the operand's
// elements where they are, zeros past its rows and columns.
var padKind = groupKind{
	name:    "pad",
	byClaim: true,
	join:    func(*Node, *Group, Target) (GroupKind, bool) { return PadGroup, false },
	tune: func(grp *Group, t Target, _ tile.Precision, meta tile.Meta) {
		meta["BLOCK_R"], meta["BLOCK_C"] = 16, 128
		if !t.GPU() {
			meta["BLOCK_R"], meta["BLOCK_C"] = 8, 64
		}
	},
	emit: emitPad,
}

func emitPad(e *emitter, out *tile.Value, k *Kernel) error {
	b := e.b
	x, px, br, bc, err := copySource(e)
	if err != nil {
		return err
	}
	s, p := x.Info.Shape, e.grp.Root.Info.Shape
	r := len(s)
	if r < 2 || r > 3 || len(p) != r || r == 3 && p[0] != s[0] || p[r-2] < s[r-2] || p[r-1] < s[r-1] {
		return fmt.Errorf("graphpass: %v: pads %v to %v", e.grp, s, p)
	}
	rows, cols := s[r-2], s[r-1]
	p = p[r-2:]
	i := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), br), b.Arange(0, br)), 1) // [BR,1]
	j := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), bc), b.Arange(0, bc)), 0) // [1,BC]
	sh := tile.Shp(br, bc)
	in := e.and(b.BroadcastTo(b.Lt(i, rows), sh), b.BroadcastTo(b.Lt(j, cols), sh))
	if len(s) == 3 { // matrix z of the batch
		z := b.ProgramID(2)
		px, out = b.AddPtr(px, b.Mul(z, rows*cols)), b.AddPtr(out, b.Mul(z, p[0]*p[1]))
	}
	v := e.loadOr0(b.AddPtr(px, b.Add(b.Mul(i, cols), j)), in)
	var mask *tile.Value
	if p[0]%br != 0 || p[1]%bc != 0 {
		mask = e.and(b.BroadcastTo(b.Lt(i, p[0]), sh), b.BroadcastTo(b.Lt(j, p[1]), sh))
	}
	b.Store(b.AddPtr(out, b.Add(b.Mul(i, p[1]), j)), v, mask)
	k.Grid = tile.Grid{tile.CDiv(p[0], br), tile.CDiv(p[1], bc)}
	if len(s) == 3 {
		k.Grid[2] = s[0]
	}
	return nil
}

// shapeOf is n's shape (nil for no node).
func shapeOf(n *Node) []int {
	if n == nil {
		return nil
	}
	return n.Info.Shape
}
