package ops

import (
	"fmt"
	"sort"

	"github.com/tilefuse/tilefuse/tile"
)

// Writer is the kernel an op is written into: its builder, how it splits
// and joins flat indices, and the node's operands. A kernel computes each
// value at flat row-major indices of that value's own shape.
type Writer interface {
	Builder() *tile.Builder
	// Coords splits the flat indices idx of shape s into one coordinate
	// per dimension (the first one unbounded).
	Coords(idx *tile.Value, s []int) []*tile.Value
	// Flatten is the flat index into shape s of the coordinates c
	// (dimensions of size 1 are left out).
	Flatten(c []*tile.Value, s []int) *tile.Value
	// Operand computes operand i of the node being written at the flat
	// indices at, of the operand's own shape.
	Operand(i int, at *tile.Value) (*tile.Value, error)
	// OperandWhere is Operand on the lanes where ok holds; the others'
	// values are unspecified (the caller selects them away) and their
	// indices in at may lie outside the operand. A writer that reads every
	// lane (a GPU's: a load costs no more than its predicate) reads at
	// inBounds() instead, the same indices clamped into the operand; one
	// that masks the reads (the CPU's machine code, which takes affine
	// indices but not the clamps' minimum and maximum) never calls it.
	OperandWhere(i int, ok, at *tile.Value, inBounds func() *tile.Value) (*tile.Value, error)
	// Masked reports whether OperandWhere reads under its condition (the
	// CPU's) rather than at inBounds() on every lane (a GPU's): a writer
	// that clamps its indices on its own (Concat, SliceIncr) leaves them
	// unclamped under a mask only where the reads are masked, so that a
	// GPU's kernels stay as they were measured.
	Masked() bool
}

type writeFunc func(w Writer, info *Info, in [][]int, idx *tile.Value) (*tile.Value, error)

// Write writes a node of a Writable kind, with Info info and operands of
// shapes in, at the flat indices idx of its own shape.
func Write(w Writer, info *Info, in [][]int, idx *tile.Value) (*tile.Value, error) {
	f := info.Kind.props().write
	if f == nil {
		return nil, fmt.Errorf("ops: %s: a %v is not written on its own", info.Name, info.Kind)
	}
	return f(w, info, in, idx)
}

func writeConstant(w Writer, info *Info, in [][]int, idx *tile.Value) (*tile.Value, error) {
	return w.Builder().Const(info.Value, info.DType), nil
}

func writeUnary(w Writer, info *Info, in [][]int, idx *tile.Value) (*tile.Value, error) {
	x, err := w.Operand(0, idx)
	if err != nil {
		return nil, err
	}
	return info.Unary(w.Builder(), x), nil
}

func writeBinary(w Writer, info *Info, in [][]int, idx *tile.Value) (*tile.Value, error) {
	x, err := w.Operand(0, idx)
	if err != nil {
		return nil, err
	}
	y, err := w.Operand(1, idx)
	if err != nil {
		return nil, err
	}
	b := w.Builder()
	if info.Binary == tile.OpPow && info.DType == tile.F32 {
		if v := powByConst(b, x, y); v != nil {
			return v, nil
		}
	}
	v := b.Binary(info.Binary, x, y)
	if info.Cmp {
		v = b.Cast(v, info.DType)
	}
	return v, nil
}

// writeReshape: row-major order is unchanged.
func writeReshape(w Writer, info *Info, in [][]int, idx *tile.Value) (*tile.Value, error) {
	return w.Operand(0, idx)
}

// writeRepeat: along a repeated axis, the operand's coordinate is the
// output's divided by the repeat factor.
func writeRepeat(w Writer, info *Info, in [][]int, idx *tile.Value) (*tile.Value, error) {
	outS, inS := info.Shape, in[0]
	if len(outS) != len(inS) {
		return nil, fmt.Errorf("ops: %s: repeat from rank %d to %d", info.Name, len(inS), len(outS))
	}
	b := w.Builder()
	c := w.Coords(idx, outS)
	for i := range c {
		if inS[i] != outS[i] && inS[i] != 1 { // repeat factor outS/inS: coordinate / factor (Flatten ignores dimensions of 1)
			c[i] = b.Div(c[i], outS[i]/inS[i])
		}
	}
	return w.Operand(0, w.Flatten(c, inS))
}

// writeSlice: the operand's coordinate along the axis is shifted by the start.
func writeSlice(w Writer, info *Info, in [][]int, idx *tile.Value) (*tile.Value, error) {
	c := w.Coords(idx, info.Shape)
	if a := info.Axes[0]; info.Start != 0 {
		c[a] = w.Builder().Add(c[a], info.Start)
	}
	return w.Operand(0, w.Flatten(c, in[0]))
}

// writeSliceIncr: zeros, and the increment in the range.
func writeSliceIncr(w Writer, info *Info, in [][]int, idx *tile.Value) (*tile.Value, error) {
	b := w.Builder()
	a := info.Axes[0]
	c := w.Coords(idx, info.Shape)
	inRange := b.And(b.Ge(c[a], info.Start), b.Lt(c[a], info.End))
	incS := in[1]
	var x *tile.Value
	var err error
	if len(incS) == 0 { // a scalar increment: every lane reads it
		x, err = w.Operand(1, idx)
	} else {
		x, err = operandAlong(w, 1, inRange, c, a, b.Sub(c[a], info.Start), incS)
	}
	if err != nil {
		return nil, err
	}
	return b.Where(inRange, x, 0.0), nil
}

// writeTranspose: the operand's coordinate along axis pattern[i] is the
// output's along axis i, over the fewest axes that say the same
// (mergeTranspose): NHWC → NCHW is (N, HW, C) → (N, C, HW), whose output
// rows are a run of the operand's elements a constant stride apart.
func writeTranspose(w Writer, info *Info, in [][]int, idx *tile.Value) (*tile.Value, error) {
	if len(in) != 1 || len(in[0]) != len(info.Shape) || len(info.Axes) != len(info.Shape) {
		return nil, fmt.Errorf("ops: %s: a transpose of rank %d over %v", info.Name, len(info.Axes), in)
	}
	out, from, pattern := mergeTranspose(info.Shape, in[0], info.Axes)
	c := w.Coords(idx, out)
	ci := make([]*tile.Value, len(c))
	for i, a := range pattern {
		ci[a] = c[i]
	}
	return w.Operand(0, w.Flatten(ci, from))
}

// mergeTranspose is the transpose of shape in by pattern (output shape out)
// over the fewest axes: axes of size 1 left out, and output axes that read
// consecutive axes of the operand in order made one. It returns the
// output's shape, the operand's and the pattern over them (at least one
// axis each).
func mergeTranspose(out, in, pattern []int) (mout, mfrom, mpattern []int) {
	var axes []int // the output's axes of size above 1
	for i, a := range pattern {
		if in[a] > 1 {
			axes = append(axes, i)
		}
	}
	if len(axes) == 0 {
		return []int{1}, []int{1}, []int{0}
	}
	// runs of output axes reading consecutive operand axes (skipping size 1)
	next := func(a int) int { // the operand's next axis above 1 after a
		for a++; a < len(in) && in[a] == 1; a++ {
		}
		return a
	}
	var runs [][]int // output axes
	for _, i := range axes {
		if n := len(runs); n > 0 {
			last := runs[n-1][len(runs[n-1])-1]
			if pattern[i] == next(pattern[last]) {
				runs[n-1] = append(runs[n-1], i)
				continue
			}
		}
		runs = append(runs, []int{i})
	}
	// the runs in the operand's order are its merged axes
	order := make([]int, len(runs))
	for r := range order {
		order[r] = r
	}
	sort.Slice(order, func(x, y int) bool { return pattern[runs[order[x]][0]] < pattern[runs[order[y]][0]] })
	mout, mfrom, mpattern = make([]int, len(runs)), make([]int, len(runs)), make([]int, len(runs))
	for j, r := range order {
		mpattern[r] = j
	}
	for r, run := range runs {
		size := 1
		for _, i := range run {
			size *= out[i]
		}
		mout[r] = size
		mfrom[mpattern[r]] = size
	}
	return mout, mfrom, mpattern
}

// writeIm2Col: output [b, oh, ow, z] with z = (c·KH + i)·KW + j reads the
// operand (B, C, H, W) at [b, c, oh·SH − PH + i·DH, ow·SW − PW + j·DW]
// (OperandWhere: read where that is inside the image) and is 0 where it
// is past an edge.
func writeIm2Col(w Writer, info *Info, in [][]int, idx *tile.Value) (*tile.Value, error) {
	if len(in) != 1 || len(in[0]) != 4 || len(info.Shape) != 4 {
		return nil, fmt.Errorf("ops: %s: an im2col of %v to %v", info.Name, in, info.Shape)
	}
	b := w.Builder()
	kh, kw, ph, pw, sh, sw, dh, dw := info.Window[0], info.Window[1], info.Window[2], info.Window[3], info.Window[4], info.Window[5], info.Window[6], info.Window[7]
	s := in[0] // B, C, H, W
	if info.Shape[3] != s[1]*kh*kw {
		return nil, fmt.Errorf("ops: %s: %d columns for %d channels of %d×%d", info.Name, info.Shape[3], s[1], kh, kw)
	}
	c := w.Coords(idx, info.Shape)
	ch := b.Div(c[3], kh*kw)
	r := b.Rem(c[3], kh*kw)
	y := b.Add(b.Mul(c[1], sh), b.Add(b.Mul(b.Div(r, kw), dh), -ph))
	x := b.Add(b.Mul(c[2], sw), b.Add(b.Mul(b.Rem(r, kw), dw), -pw))
	in4 := func(v *tile.Value, n int) *tile.Value { return b.And(b.Ge(v, 0), b.Lt(v, n)) }
	ok := b.And(in4(y, s[2]), in4(x, s[3]))
	v, err := w.OperandWhere(0, ok, w.Flatten([]*tile.Value{c[0], ch, y, x}, s), func() *tile.Value {
		return w.Flatten([]*tile.Value{c[0], ch, clampTo(b, y, s[2]), clampTo(b, x, s[3])}, s)
	})
	if err != nil {
		return nil, err
	}
	return b.Where(ok, v, 0.0), nil
}

// writeConcat: each lane takes the operand its coordinate along the axis
// falls in. Where the writer masks its reads (Masked: the CPU's, whose
// machine code takes affine indices but not clamps), each operand is read
// only on its own lanes, at indices not clamped.
func writeConcat(w Writer, info *Info, in [][]int, idx *tile.Value) (*tile.Value, error) {
	b := w.Builder()
	a := info.Axes[0]
	c := w.Coords(idx, info.Shape)
	off := 0
	var v *tile.Value
	for i, inS := range in {
		local := c[a]
		if off != 0 {
			local = b.Sub(c[a], off)
		}
		// ok: c[a] in [off, off + inS[a]) (nil: every lane), built only
		// where the reads are masked (a clamping writer's kernels stay as
		// they were)
		var ok *tile.Value
		if w.Masked() {
			if i > 0 {
				ok = b.Ge(c[a], off)
			}
			if i < len(in)-1 {
				ok = andOf(b, ok, b.Lt(c[a], off+inS[a]))
			}
		}
		xv, err := operandAlong(w, i, ok, c, a, local, inS)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			v = xv
		} else {
			v = b.Where(b.Ge(c[a], off), xv, v)
		}
		off += inS[a]
	}
	return v, nil
}

// operandAlong is operand i (of shape s) at the coordinates c with c[a]
// replaced by local, on the lanes where ok holds (nil: every lane): where
// the writer masks its reads (Masked) at local as it is, under ok;
// otherwise on every lane at local clamped into s (clampedAt), which a
// select or the mask then discards where ok does not hold.
func operandAlong(w Writer, i int, ok *tile.Value, c []*tile.Value, a int, local *tile.Value, s []int) (*tile.Value, error) {
	switch {
	case !w.Masked():
		return w.Operand(i, clampedAt(w, c, a, local, s))
	case ok == nil:
		return w.Operand(i, shiftedAt(w, c, a, local, s))
	}
	return w.OperandWhere(i, ok, shiftedAt(w, c, a, local, s), func() *tile.Value {
		return clampedAt(w, c, a, local, s)
	})
}

// andOf is x ∧ y, y where x is nil.
func andOf(b *tile.Builder, x, y *tile.Value) *tile.Value {
	if x == nil {
		return y
	}
	return b.And(x, y)
}

// clampedAt is the flat index into shape s of the coordinates c with c[a]
// replaced by local clamped to [0, s[a]): lanes that a select or the mask
// discards still read in bounds.
func clampedAt(w Writer, c []*tile.Value, a int, local *tile.Value, s []int) *tile.Value {
	b := w.Builder()
	return shiftedAt(w, c, a, b.Maximum(b.Minimum(local, s[a]-1), 0), s)
}

// shiftedAt is the flat index into shape s of the coordinates c with c[a]
// replaced by local, as it is (outside s on the lanes a mask leaves out).
func shiftedAt(w Writer, c []*tile.Value, a int, local *tile.Value, s []int) *tile.Value {
	ci := append([]*tile.Value(nil), c...)
	ci[a] = local
	return w.Flatten(ci, s)
}

// powByConst is x^c for an f32 x and a constant c that the exact
// operations compute as the reference's pow does (float32(interp.Pow64) of
// the operands widened: every special case of Go's Pow included) — x·x
// for c = 2 (x² is exact in float64, so both round it once), x for 1,
// 1/x for −1 (Go's Pow divides in float64, and a float32 quotient
// rounded through float64 is the float32 one) — and nil for any other c
// (3: x·x·x rounds twice; ½: √x gives −0 at −0 and NaN at −∞ where Pow
// gives +0 and +∞). Every backend computes these exactly and fast, where
// pow itself is an approximation on the GPU (codegen: 2⁻²¹ relative) and
// declined by the CPU's machine code.
func powByConst(b *tile.Builder, x, y *tile.Value) *tile.Value {
	if x == nil || y == nil || y.Type.Shape.Rank != 0 && y.Type.Shape != x.Type.Shape {
		return nil // the result would not have x's shape
	}
	for y.Op == tile.OpSplat || y.Op == tile.OpBroadcast || y.Op == tile.OpExpandDims {
		y = y.Args[0]
	}
	if y.Op != tile.OpConst || !y.Type.DType.IsFloat() {
		return nil
	}
	switch y.AuxF {
	case 2:
		return b.Mul(x, x)
	case 1:
		return x
	case -1:
		return b.Div(1.0, x)
	}
	return nil
}
