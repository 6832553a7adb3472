package ops

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/tile"
)

// A convolutional network's other ops, each an output element computed
// from a window of its operands' elements, in Gorgonia's order, so that
// each is Gorgonia's value:
//
//   - MaxPool (B, C, H, W) → (B, C, PH, PW): the window's largest value by
//     strictly greater steps from −MaxFloat (a NaN never taken; a window of
//     nothing larger is −MaxFloat), rows of the window in order;
//   - MaxPoolDiff (in, pooled, dy) → dx of in's shape: each element of in
//     the sum, in the pooled positions' order, of dy at every window whose
//     first largest element it is. Gorgonia's own MaxPoolDiff reads that
//     element from a mask its MaxPool's Do fills; this one finds it again
//     from in, so the two are kernels together or Gorgonia's together
//     (KernelOn takes both or neither);
//   - Col2Im (B, OH, OW, C·KH·KW) → (B, C, H, W): im2col's adjoint, each
//     image element the sum of the columns that read it, in Gorgonia's
//     order (output rows, then columns: the kernel's offsets backwards).
//
// Window holds the kernel's height and width, the padding before the first
// row and column, the strides and (Col2Im) the dilations.

func readMaxPool(n *G.Node, op G.Op, info *Info) string {
	var f [8]int
	for i, name := range []string{"h", "w", "padNorth", "padWest", "padSouth", "padEast", "strideH", "strideW"} {
		v, err := intField(op, name)
		if err != nil {
			return err.Error()
		}
		f[i] = v
	}
	explicit, err := boolField(op, "explicitPadding")
	if err != nil {
		return err.Error()
	}
	ph, pw := f[2], f[3]
	if explicit { // Gorgonia starts the windows at the south and east paddings then
		ph, pw = f[4], f[5]
	}
	info.Window = [8]int{f[0], f[1], ph, pw, f[6], f[7], 1, 1}
	if f[0] < 1 || f[1] < 1 || f[6] < 1 || f[7] < 1 || len(info.Shape) != 4 {
		return "a max pool with a window of no size, a stride below 1, or not 4-D"
	}
	return ""
}

// lowest is −MaxFloat of d, where Gorgonia's max pool starts.
func lowest(d tile.DType) float64 {
	if d == tile.F32 {
		return -math.MaxFloat32
	}
	return -math.MaxFloat64
}

// scanWindow scans the (kh, kw) window of image operand 0 (shape s: B, C,
// H, W) at row y0 and column x0 of batch and channel c[0], c[1] as
// Gorgonia's max pool does: rows in order, each element inside the image
// taken where strictly greater than the largest so far, from −MaxFloat.
// It returns the largest value and, where at is not nil, whether the
// element taken last is the one at row at[0] and column at[1] (false
// where no element was taken): a mask, not the taken element's
// coordinates, so that on the CPU every integer stays an affine function
// of the lanes.
func scanWindow(w Writer, c []*tile.Value, y0, x0 *tile.Value, kh, kw int, s []int, at []*tile.Value) (best, taken *tile.Value, err error) {
	b := w.Builder()
	for i := 0; i < kh; i++ {
		for j := 0; j < kw; j++ {
			y, x := b.Add(y0, i), b.Add(x0, j)
			in := b.And(b.And(b.Ge(y, 0), b.Lt(y, s[2])), b.And(b.Ge(x, 0), b.Lt(x, s[3])))
			v, err := w.OperandWhere(0, in, w.Flatten([]*tile.Value{c[0], c[1], y, x}, s), func() *tile.Value {
				return w.Flatten([]*tile.Value{c[0], c[1], clampTo(b, y, s[2]), clampTo(b, x, s[3])}, s)
			})
			if err != nil {
				return nil, nil, err
			}
			if best == nil {
				best = b.Full(lowest(v.Type.DType), v.Type.DType, v.Type.Shape.Dims[:v.Type.Shape.Rank]...)
			}
			take := b.And(in, b.Gt(v, best))
			best = b.Where(take, v, best)
			if at != nil {
				here := b.And(b.Eq(y, at[0]), b.Eq(x, at[1]))
				if taken == nil {
					taken = b.And(take, here)
				} else {
					taken = b.Or(b.And(take, here), b.And(b.Not(take), taken))
				}
			}
		}
	}
	return best, taken, nil
}

func clampTo(b *tile.Builder, v *tile.Value, n int) *tile.Value {
	return b.Maximum(b.Minimum(v, n-1), 0)
}

// writeMaxPool: output [b, c, ph, pw] is the largest of the operand's
// window from (ph·SH − PH, pw·SW − PW).
func writeMaxPool(w Writer, info *Info, in [][]int, idx *tile.Value) (*tile.Value, error) {
	if len(in) != 1 || len(in[0]) != 4 || len(info.Shape) != 4 {
		return nil, fmt.Errorf("ops: %s: a max pool of %v to %v", info.Name, in, info.Shape)
	}
	b := w.Builder()
	s := in[0]
	kh, kw, ph, pw, sh, sw := info.Window[0], info.Window[1], info.Window[2], info.Window[3], info.Window[4], info.Window[5]
	c := w.Coords(idx, info.Shape)
	y0, x0 := b.Add(b.Mul(c[2], sh), -ph), b.Add(b.Mul(c[3], sw), -pw)
	m, _, err := scanWindow(w, c, y0, x0, kh, kw, s, nil)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// writeMaxPoolDiff: dx [b, c, y, x] is the sum over the windows that hold
// (y, x), in the pooled positions' order, of dy where (y, x) is the
// window's first largest element (found again from in, as writeMaxPool
// scans it).
func writeMaxPoolDiff(w Writer, info *Info, in [][]int, idx *tile.Value) (*tile.Value, error) {
	if len(in) != 3 || len(in[0]) != 4 || len(in[2]) != 4 || len(info.Shape) != 4 {
		return nil, fmt.Errorf("ops: %s: a max pool's backward of %v to %v", info.Name, in, info.Shape)
	}
	b := w.Builder()
	s, p := in[0], in[2] // the image's shape and the pooled one
	kh, kw, ph, pw, sh, sw := info.Window[0], info.Window[1], info.Window[2], info.Window[3], info.Window[4], info.Window[5]
	c := w.Coords(idx, info.Shape)
	// the last windows that can hold (y, x): ⌊(y + PH)/SH⌋, ⌊(x + PW)/SW⌋
	// (y + PH ≥ 0); earlier ones down to kh/SH back
	div := func(v *tile.Value, d int) *tile.Value { // v / d (no division by 1: lanes stay affine on the CPU)
		if d == 1 {
			return v
		}
		return b.Div(v, d)
	}
	lastY, lastX := div(b.Add(c[2], ph), sh), div(b.Add(c[3], pw), sw)
	var acc *tile.Value
	for di := (kh+sh-1)/sh - 1; di >= 0; di-- { // the pooled rows in order
		for dj := (kw+sw-1)/sw - 1; dj >= 0; dj-- {
			py, px := b.Sub(lastY, di), b.Sub(lastX, dj)
			y0, x0 := b.Add(b.Mul(py, sh), -ph), b.Add(b.Mul(px, sw), -pw)
			holds := b.And(b.And(b.And(b.Ge(py, 0), b.Lt(py, p[2])), b.And(b.Ge(px, 0), b.Lt(px, p[3]))),
				b.And(b.Lt(b.Sub(c[2], y0), kh), b.Lt(b.Sub(c[3], x0), kw)))
			_, taken, err := scanWindow(w, c, y0, x0, kh, kw, s, c[2:4])
			if err != nil {
				return nil, err
			}
			g, err := w.OperandWhere(2, holds, w.Flatten([]*tile.Value{c[0], c[1], py, px}, p), func() *tile.Value {
				return w.Flatten([]*tile.Value{c[0], c[1], clampTo(b, py, p[2]), clampTo(b, px, p[3])}, p)
			})
			if err != nil {
				return nil, err
			}
			mine := b.And(holds, taken)
			g = b.Where(mine, g, 0.0)
			if acc == nil {
				acc = b.Add(b.Full(0, g.Type.DType, g.Type.Shape.Dims[:g.Type.Shape.Rank]...), g)
			} else {
				acc = b.Add(acc, g)
			}
		}
	}
	return acc, nil
}

// writeCol2Im: image [b, c, y, x] is the sum of the columns [b, oh, ow,
// (c·KH + i)·KW + j] with oh·SH − PH + i·DH = y and ow·SW − PW + j·DW = x,
// in Gorgonia's order (oh, then ow, ascending: i, then j, descending).
func writeCol2Im(w Writer, info *Info, in [][]int, idx *tile.Value) (*tile.Value, error) {
	if len(in) != 1 || len(in[0]) != 4 || len(info.Shape) != 4 {
		return nil, fmt.Errorf("ops: %s: a col2im of %v to %v", info.Name, in, info.Shape)
	}
	b := w.Builder()
	s := in[0] // B, OH, OW, C·KH·KW
	kh, kw, ph, pw, sh, sw, dh, dw := info.Window[0], info.Window[1], info.Window[2], info.Window[3], info.Window[4], info.Window[5], info.Window[6], info.Window[7]
	if s[3] != info.Shape[1]*kh*kw {
		return nil, fmt.Errorf("ops: %s: %d columns for %d channels of %d×%d", info.Name, s[3], info.Shape[1], kh, kw)
	}
	c := w.Coords(idx, info.Shape)
	// o, the window's position that reads v at offset k, and whether it is
	// one (a stride of 1: o is v + pad − d·k, no division)
	at := func(v *tile.Value, pad, d, stride, k, n int) (*tile.Value, *tile.Value) {
		t := b.Add(v, pad-d*k) // o·stride when it is a window's
		if stride == 1 {
			return t, b.And(b.Ge(t, 0), b.Lt(t, n))
		}
		ok := b.And(b.Ge(t, 0), b.Eq(b.Rem(t, stride), 0))
		o := b.Div(t, stride)
		return o, b.And(ok, b.Lt(o, n))
	}
	var acc *tile.Value
	for i := kh - 1; i >= 0; i-- {
		oh, okY := at(c[2], ph, dh, sh, i, s[1])
		for j := kw - 1; j >= 0; j-- {
			ow, okX := at(c[3], pw, dw, sw, j, s[2])
			z := b.Add(b.Mul(c[1], kh*kw), i*kw+j)
			ok := b.And(okY, okX)
			v, err := w.OperandWhere(0, ok, w.Flatten([]*tile.Value{c[0], oh, ow, z}, s), func() *tile.Value {
				return w.Flatten([]*tile.Value{c[0], clampTo(b, oh, s[1]), clampTo(b, ow, s[2]), z}, s)
			})
			if err != nil {
				return nil, err
			}
			v = b.Where(ok, v, 0.0)
			if acc == nil {
				acc = b.Add(b.Full(0, v.Type.DType, v.Type.Shape.Dims[:v.Type.Shape.Rank]...), v)
			} else {
				acc = b.Add(acc, v)
			}
		}
	}
	return acc, nil
}
