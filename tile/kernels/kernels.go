package kernels

import (
	"math"

	"github.com/tilefuse/tilefuse/tile"
)

// VecAdd is out[i] = x[i] + y[i] for i < n.
// Meta: BLOCK. Grid: CDiv(n, BLOCK). Args: x, y, out []float32, n.
func VecAdd(meta tile.Meta) (*tile.Kernel, error) {
	b := tile.NewBuilder("vec_add", meta)
	x, y, out := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32), b.Ptr("out", tile.F32)
	n := b.Param("n", tile.I32)
	BLOCK := b.BlockSize("BLOCK")
	offs := b.Add(b.Mul(b.ProgramID(0), BLOCK), b.Arange(0, BLOCK))
	mask := b.Lt(offs, n)
	sum := b.Add(b.Load(b.AddPtr(x, offs), mask, nil), b.Load(b.AddPtr(y, offs), mask, nil))
	b.Store(b.AddPtr(out, offs), sum, mask)
	return b.Build()
}

// GeluChain is out = gelu(x*a + b)*c elementwise, with the erf form of GELU.
// Meta: BLOCK. Grid: CDiv(n, BLOCK). Args: x, a, b, c, out []float32, n.
func GeluChain(meta tile.Meta) (*tile.Kernel, error) {
	b := tile.NewBuilder("gelu_chain", meta)
	x, a, bb, c, out := b.Ptr("x", tile.F32), b.Ptr("a", tile.F32), b.Ptr("b", tile.F32), b.Ptr("c", tile.F32), b.Ptr("out", tile.F32)
	n := b.Param("n", tile.I32)
	BLOCK := b.BlockSize("BLOCK")
	offs := b.Add(b.Mul(b.ProgramID(0), BLOCK), b.Arange(0, BLOCK))
	mask := b.Lt(offs, n)
	ld := func(p *tile.Value) *tile.Value { return b.Load(b.AddPtr(p, offs), mask, nil) }
	h := b.Add(b.Mul(ld(x), ld(a)), ld(bb))
	g := b.Mul(b.Mul(h, 0.5), b.Add(b.Erf(b.Mul(h, 1/math.Sqrt2)), 1.0))
	b.Store(b.AddPtr(out, offs), b.Mul(g, ld(c)), mask)
	return b.Build()
}

// Copy2D copies an M×N matrix stored with strides (sm, sn) into a row-major
// M×N matrix, one BM×BN tile per program, masked on both edges.
// Meta: BM, BN. Grid: (CDiv(M, BM), CDiv(N, BN)). Args: in, out []float32, M, N, sm, sn.
func Copy2D(meta tile.Meta) (*tile.Kernel, error) {
	b := tile.NewBuilder("copy_2d", meta)
	in, out := b.Ptr("in", tile.F32), b.Ptr("out", tile.F32)
	M, N, sm, sn := b.Param("M", tile.I32), b.Param("N", tile.I32), b.Param("sm", tile.I32), b.Param("sn", tile.I32)
	BM, BN := b.BlockSize("BM"), b.BlockSize("BN")
	rm := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), BM), b.Arange(0, BM)), 1) // [BM,1]
	rn := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), BN), b.Arange(0, BN)), 0) // [1,BN]
	mask := b.And(b.Lt(rm, M), b.Lt(rn, N))
	t := b.Load(b.AddPtr(in, b.Add(b.Mul(rm, sm), b.Mul(rn, sn))), mask, nil)
	b.Store(b.AddPtr(out, b.Add(b.Mul(rm, N), rn)), t, mask)
	return b.Build()
}

// negInf is the load value of masked-off lanes in max-based kernels.
var negInf = math.Inf(-1)

// streaming is the cache hint for data a kernel touches once: the meta
// parameter STREAM = 1 asks for it.
func streaming(meta tile.Meta) []tile.CacheHint {
	if meta["STREAM"] != 0 {
		return []tile.CacheHint{tile.CacheStreaming}
	}
	return nil
}

// safeMax replaces a row maximum of -inf by 0, so that exp(x - m) of an
// all -inf row gives 0 rather than NaN.
func safeMax(b *tile.Builder, m *tile.Value) *tile.Value {
	return b.Where(b.Eq(m, negInf), 0.0, m)
}

// Softmax is the row softmax of an R×n matrix, one row per program held in a
// single block (n ≤ BLOCK). It is numerically stable (the row maximum is
// subtracted first); -inf entries give 0, and a row of only -inf gives a row
// of zeros (the convention of fused attention kernels; PyTorch gives NaN).
// Meta: BLOCK. Grid: R. Args: x, y []float32, n, row_stride.
func Softmax(meta tile.Meta) (*tile.Kernel, error) {
	b := tile.NewBuilder("softmax", meta)
	x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
	n, stride := b.Param("n", tile.I32), b.Param("row_stride", tile.I32)
	BLOCK := b.BlockSize("BLOCK")
	base := b.Mul(b.ProgramID(0), stride)
	cols := b.Arange(0, BLOCK)
	mask := b.Lt(cols, n)
	xv := b.Load(b.AddPtr(x, b.Add(base, cols)), mask, negInf, streaming(meta)...)
	e := b.Exp(b.Sub(xv, safeMax(b, b.Max(xv, 0))))
	s := b.Sum(e, 0)
	inv := b.Div(1.0, b.Where(b.Eq(s, 0.0), 1.0, s)) // one division per row
	b.Store(b.AddPtr(y, b.Add(base, cols)), b.Mul(e, inv), mask, streaming(meta)...)
	return b.Build()
}

// SoftmaxLooped is Softmax for rows of any length: one pass over the row in
// BLOCK-wide steps keeps a running maximum and rescaled sum per lane (online
// softmax), a second pass writes exp(x - max)/sum.
// Meta: BLOCK. Grid: R. Args: x, y []float32, n, row_stride.
func SoftmaxLooped(meta tile.Meta) (*tile.Kernel, error) {
	b := tile.NewBuilder("softmax_looped", meta)
	x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
	n, stride := b.Param("n", tile.I32), b.Param("row_stride", tile.I32)
	BLOCK := b.BlockSize("BLOCK")
	base := b.Mul(b.ProgramID(0), stride)
	cols := b.Arange(0, BLOCK)
	xrow, yrow := b.AddPtr(x, base), b.AddPtr(y, base)
	init := []*tile.Value{b.Full(negInf, tile.F32, BLOCK), b.Zeros(tile.F32, BLOCK)}
	acc := b.For(0, n, BLOCK, init, func(off *tile.Value, c []*tile.Value) []*tile.Value {
		m, l := c[0], c[1]
		idx := b.Add(off, cols)
		xv := b.Load(b.AddPtr(xrow, idx), b.Lt(idx, n), negInf)
		mNew := b.Maximum(m, xv)
		ms := safeMax(b, mNew)
		l = b.Add(b.Mul(l, b.Exp(b.Sub(m, ms))), b.Exp(b.Sub(xv, ms)))
		return []*tile.Value{mNew, l}
	})
	m := safeMax(b, b.Max(acc[0], 0))
	l := b.Sum(b.Mul(acc[1], b.Exp(b.Sub(acc[0], m))), 0)
	l = b.Where(b.Eq(l, 0.0), 1.0, l)
	b.For(0, n, BLOCK, nil, func(off *tile.Value, _ []*tile.Value) []*tile.Value {
		idx := b.Add(off, cols)
		mask := b.Lt(idx, n)
		xv := b.Load(b.AddPtr(xrow, idx), mask, negInf)
		b.Store(b.AddPtr(yrow, idx), b.Div(b.Exp(b.Sub(xv, m)), l), mask)
		return nil
	})
	return b.Build()
}

// LayerNorm normalises each row of an R×n matrix (n ≤ BLOCK): y = (x -
// mean)·rstd·w + bias with rstd = 1/sqrt(var + eps), var the biased variance.
// It also writes each row's mean and rstd, for a backward pass.
// Meta: BLOCK. Grid: R. Args: x, y, w, bias, mean, rstd []float32, n, row_stride, eps.
func LayerNorm(meta tile.Meta) (*tile.Kernel, error) {
	b := tile.NewBuilder("layer_norm", meta)
	x, y, w, bias := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32), b.Ptr("w", tile.F32), b.Ptr("bias", tile.F32)
	meanOut, rstdOut := b.Ptr("mean", tile.F32), b.Ptr("rstd", tile.F32)
	n, stride, eps := b.Param("n", tile.I32), b.Param("row_stride", tile.I32), b.Param("eps", tile.F32)
	BLOCK := b.BlockSize("BLOCK")
	row := b.ProgramID(0)
	base := b.Mul(row, stride)
	cols := b.Arange(0, BLOCK)
	mask := b.Lt(cols, n)
	xv := b.Load(b.AddPtr(x, b.Add(base, cols)), mask, 0.0, streaming(meta)...)
	mean := b.Div(b.Sum(xv, 0), n)
	xc := b.Where(mask, b.Sub(xv, mean), 0.0)
	rstd := b.Rsqrt(b.Add(b.Div(b.Sum(b.Mul(xc, xc), 0), n), eps))
	wv := b.Load(b.AddPtr(w, cols), mask, nil)
	bv := b.Load(b.AddPtr(bias, cols), mask, nil)
	b.Store(b.AddPtr(y, b.Add(base, cols)), b.Add(b.Mul(b.Mul(xc, rstd), wv), bv), mask, streaming(meta)...)
	b.Store(b.AddPtr(meanOut, row), mean, nil)
	b.Store(b.AddPtr(rstdOut, row), rstd, nil)
	return b.Build()
}

// ColSum adds the rows of an M×N row-major matrix into out[N] with atomic
// adds: each program reduces one BM×BN tile along its rows.
// Meta: BM, BN. Grid: (CDiv(M, BM), CDiv(N, BN)). Args: x, out []float32, M, N.
func ColSum(meta tile.Meta) (*tile.Kernel, error) {
	b := tile.NewBuilder("col_sum", meta)
	x, out := b.Ptr("x", tile.F32), b.Ptr("out", tile.F32)
	M, N := b.Param("M", tile.I32), b.Param("N", tile.I32)
	BM, BN := b.BlockSize("BM"), b.BlockSize("BN")
	rm := b.Add(b.Mul(b.ProgramID(0), BM), b.Arange(0, BM))
	rn := b.Add(b.Mul(b.ProgramID(1), BN), b.Arange(0, BN))
	r2, c2 := b.ExpandDims(rm, 1), b.ExpandDims(rn, 0)
	t := b.Load(b.AddPtr(x, b.Add(b.Mul(r2, N), c2)), b.And(b.Lt(r2, M), b.Lt(c2, N)), 0.0)
	b.AtomicAdd(b.AddPtr(out, rn), b.Sum(t, 0), b.Lt(rn, N))
	return b.Build()
}

// Matmul is C = A·B for A M×K and B K×N with arbitrary strides (so either
// may be transposed), one BM×BN tile of C per program, a K loop of BK steps
// and masks on every edge. Precision: meta TF32 = 1 asks for TF32 products,
// PREC = p for tile.Precision(p).
// Meta: BM, BN, BK[, TF32]. Grid: (CDiv(M, BM), CDiv(N, BN)).
// Args: a, b, c []float32, M, N, K, sam, sak, sbk, sbn, scm, scn.
func Matmul(meta tile.Meta) (*tile.Kernel, error) {
	b := tile.NewBuilder("matmul", meta)
	a, bp, c := b.Ptr("a", tile.F32), b.Ptr("b", tile.F32), b.Ptr("c", tile.F32)
	M, N, K := b.Param("M", tile.I32), b.Param("N", tile.I32), b.Param("K", tile.I32)
	sam, sak := b.Param("sam", tile.I32), b.Param("sak", tile.I32)
	sbk, sbn := b.Param("sbk", tile.I32), b.Param("sbn", tile.I32)
	scm, scn := b.Param("scm", tile.I32), b.Param("scn", tile.I32)
	BM, BN, BK := b.BlockSize("BM"), b.BlockSize("BN"), b.BlockSize("BK")
	prec := tile.PrecIEEE
	if meta["TF32"] != 0 {
		prec = tile.PrecTF32
	}
	if p, ok := meta["PREC"]; ok {
		prec = tile.Precision(p)
	}
	rm := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), BM), b.Arange(0, BM)), 1) // [BM,1]
	rn := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), BN), b.Arange(0, BN)), 0) // [1,BN]
	rk := b.Arange(0, BK)
	rkRow, rkCol := b.ExpandDims(rk, 0), b.ExpandDims(rk, 1) // [1,BK], [BK,1]
	aPtrs := b.AddPtr(a, b.Add(b.Mul(rm, sam), b.Mul(rkRow, sak)))
	bPtrs := b.AddPtr(bp, b.Add(b.Mul(rkCol, sbk), b.Mul(rn, sbn)))
	init := []*tile.Value{b.Zeros(tile.F32, BM, BN), aPtrs, bPtrs}
	res := b.For(0, K, BK, init, func(k *tile.Value, cv []*tile.Value) []*tile.Value {
		av := b.Load(cv[1], b.And(b.Lt(rm, M), b.Lt(b.Add(rkRow, k), K)), 0.0)
		bv := b.Load(cv[2], b.And(b.Lt(b.Add(rkCol, k), K), b.Lt(rn, N)), 0.0)
		acc := b.Dot(av, bv, cv[0], prec)
		return []*tile.Value{acc, b.AddPtr(cv[1], b.Mul(sak, BK)), b.AddPtr(cv[2], b.Mul(sbk, BK))}
	})
	cPtrs := b.AddPtr(c, b.Add(b.Mul(rm, scm), b.Mul(rn, scn)))
	b.Store(cPtrs, res[0], b.And(b.Lt(rm, M), b.Lt(rn, N)))
	return b.Build()
}

// Softmax2D is the row softmax of an R×n matrix (n ≤ BN) with BM rows per
// program: a 2-D block reduced along its rows, kept as [BM,1] and broadcast
// back over them.
// Meta: BM, BN. Grid: CDiv(R, BM). Args: x, y []float32, R, n, row_stride.
func Softmax2D(meta tile.Meta) (*tile.Kernel, error) {
	b := tile.NewBuilder("softmax_2d", meta)
	x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
	R, n, stride := b.Param("R", tile.I32), b.Param("n", tile.I32), b.Param("row_stride", tile.I32)
	BM, BN := b.BlockSize("BM"), b.BlockSize("BN")
	rows := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), BM), b.Arange(0, BM)), 1) // [BM,1]
	cols := b.ExpandDims(b.Arange(0, BN), 0)                                   // [1,BN]
	mask := b.And(b.Lt(rows, R), b.Lt(cols, n))
	offs := b.Add(b.Mul(rows, stride), cols)
	xv := b.Load(b.AddPtr(x, offs), mask, negInf, streaming(meta)...)
	m := b.Max(xv, 1, tile.KeepDims) // [BM,1]
	e := b.Exp(b.Sub(xv, safeMax(b, m)))
	s := b.Sum(e, 1, tile.KeepDims)
	inv := b.Div(1.0, b.Where(b.Eq(s, 0.0), 1.0, s)) // [BM,1]: one division per row
	b.Store(b.AddPtr(y, offs), b.Mul(e, inv), mask, streaming(meta)...)
	return b.Build()
}

// Transpose writes the transpose of an M×N row-major matrix (N×M row-major),
// one BM×BN tile per program through a transposed block.
// Meta: BM, BN. Grid: (CDiv(M, BM), CDiv(N, BN)). Args: x, y []float32, M, N.
func Transpose(meta tile.Meta) (*tile.Kernel, error) {
	b := tile.NewBuilder("transpose", meta)
	x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
	M, N := b.Param("M", tile.I32), b.Param("N", tile.I32)
	BM, BN := b.BlockSize("BM"), b.BlockSize("BN")
	rm := b.Add(b.Mul(b.ProgramID(0), BM), b.Arange(0, BM))
	rn := b.Add(b.Mul(b.ProgramID(1), BN), b.Arange(0, BN))
	r2, c2 := b.ExpandDims(rm, 1), b.ExpandDims(rn, 0)
	t := b.Load(b.AddPtr(x, b.Add(b.Mul(r2, N), c2)), b.And(b.Lt(r2, M), b.Lt(c2, N)), nil) // [BM,BN]
	rnT, rmT := b.ExpandDims(rn, 1), b.ExpandDims(rm, 0)                                    // [BN,1], [1,BM]
	b.Store(b.AddPtr(y, b.Add(b.Mul(rnT, M), rmT)), b.Trans(t), b.And(b.Lt(rnT, N), b.Lt(rmT, M)))
	return b.Build()
}

// SumSquaresF64 is out[r] = Σ x[r,j]² in float64, one row per program, in
// BLOCK-wide steps.
// Meta: BLOCK. Grid: R. Args: x, out []float64, n.
func SumSquaresF64(meta tile.Meta) (*tile.Kernel, error) {
	b := tile.NewBuilder("sum_squares_f64", meta)
	x, out := b.Ptr("x", tile.F64), b.Ptr("out", tile.F64)
	n := b.Param("n", tile.I32)
	BLOCK := b.BlockSize("BLOCK")
	row := b.ProgramID(0)
	xrow := b.AddPtr(x, b.Mul(row, n))
	cols := b.Arange(0, BLOCK)
	acc := b.For(0, n, BLOCK, []*tile.Value{b.Zeros(tile.F64, BLOCK)}, func(off *tile.Value, c []*tile.Value) []*tile.Value {
		idx := b.Add(off, cols)
		v := b.Load(b.AddPtr(xrow, idx), b.Lt(idx, n), 0.0)
		return []*tile.Value{b.Add(c[0], b.Mul(v, v))}
	})
	b.Store(b.AddPtr(out, row), b.Sum(acc[0], 0), nil)
	return b.Build()
}

// Histogram counts values of an i32 array into bins with atomic adds:
// counts[x[i] mod bins] += 1 for i < n.
// Meta: BLOCK. Grid: CDiv(n, BLOCK). Args: x, counts []int32, n, bins.
func Histogram(meta tile.Meta) (*tile.Kernel, error) {
	b := tile.NewBuilder("histogram", meta)
	x, counts := b.Ptr("x", tile.I32), b.Ptr("counts", tile.I32)
	n, bins := b.Param("n", tile.I32), b.Param("bins", tile.I32)
	BLOCK := b.BlockSize("BLOCK")
	offs := b.Add(b.Mul(b.ProgramID(0), BLOCK), b.Arange(0, BLOCK))
	mask := b.Lt(offs, n)
	v := b.Load(b.AddPtr(x, offs), mask, int32(0))
	bin := b.Rem(b.Add(b.Rem(v, bins), bins), bins) // a non-negative remainder
	b.AtomicAdd(b.AddPtr(counts, bin), int32(1), mask)
	return b.Build()
}

// Unary applies op elementwise to f32: y[i] = op(x[i]) for i < n.
// Meta: BLOCK. Grid: CDiv(n, BLOCK). Args: x, y []float32, n.
func Unary(op tile.Op) func(meta tile.Meta) (*tile.Kernel, error) { return UnaryOf(op, tile.F32) }

// UnaryOf is Unary for elements of dtype d (f32 or f64).
func UnaryOf(op tile.Op, d tile.DType) func(meta tile.Meta) (*tile.Kernel, error) {
	return func(meta tile.Meta) (*tile.Kernel, error) {
		b := tile.NewBuilder("unary_"+op.String()+"_"+d.String(), meta)
		x, y, n := b.Ptr("x", d), b.Ptr("y", d), b.Param("n", tile.I32)
		BLOCK := b.BlockSize("BLOCK")
		offs := b.Add(b.Mul(b.ProgramID(0), BLOCK), b.Arange(0, BLOCK))
		mask := b.Lt(offs, n)
		b.Store(b.AddPtr(y, offs), b.Unary(op, b.Load(b.AddPtr(x, offs), mask, nil)), mask)
		return b.Build()
	}
}

// SoftmaxPersistent is Softmax with persistent programs: program p handles
// rows p, p+P, p+2P, … (P the number of programs) and loads row r+P before it
// works on row r, so that each program keeps a row's load in flight while it
// computes (software pipelining by hand, as Triton's num_stages does).
// Meta: BLOCK (≥ n). Grid: any P ≥ 1 (a small multiple of the SM count). Args: x, y []float32, R, n, row_stride.
func SoftmaxPersistent(meta tile.Meta) (*tile.Kernel, error) {
	b := tile.NewBuilder("softmax_persistent", meta)
	x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
	R, n, stride := b.Param("R", tile.I32), b.Param("n", tile.I32), b.Param("row_stride", tile.I32)
	BLOCK := b.BlockSize("BLOCK")
	pid, step := b.ProgramID(0), b.NumPrograms(0)
	cols := b.Arange(0, BLOCK)
	colMask := b.Lt(cols, n)
	load := func(row *tile.Value) *tile.Value {
		return b.Load(b.AddPtr(x, b.Add(b.Mul(row, stride), cols)), b.And(colMask, b.Lt(row, R)), negInf)
	}
	b.For(pid, R, step, []*tile.Value{load(pid)}, func(row *tile.Value, c []*tile.Value) []*tile.Value {
		next := load(b.Add(row, step)) // prefetch before the math on this row
		xv := c[0]
		e := b.Exp(b.Sub(xv, safeMax(b, b.Max(xv, 0))))
		s := b.Sum(e, 0)
		inv := b.Div(1.0, b.Where(b.Eq(s, 0.0), 1.0, s))
		b.Store(b.AddPtr(y, b.Add(b.Mul(row, stride), cols)), b.Mul(e, inv), colMask)
		return []*tile.Value{next}
	})
	return b.Build()
}

// LayerNormPersistent is LayerNorm with persistent programs and the next
// row's load issued before the current row's math (see SoftmaxPersistent).
// Meta: BLOCK (≥ n). Grid: any P ≥ 1. Args: x, y, w, bias, mean, rstd []float32, R, n, row_stride, eps.
func LayerNormPersistent(meta tile.Meta) (*tile.Kernel, error) {
	b := tile.NewBuilder("layer_norm_persistent", meta)
	x, y, w, bias := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32), b.Ptr("w", tile.F32), b.Ptr("bias", tile.F32)
	meanOut, rstdOut := b.Ptr("mean", tile.F32), b.Ptr("rstd", tile.F32)
	R, n, stride, eps := b.Param("R", tile.I32), b.Param("n", tile.I32), b.Param("row_stride", tile.I32), b.Param("eps", tile.F32)
	BLOCK := b.BlockSize("BLOCK")
	pid, step := b.ProgramID(0), b.NumPrograms(0)
	cols := b.Arange(0, BLOCK)
	mask := b.Lt(cols, n)
	wv := b.Load(b.AddPtr(w, cols), mask, nil)
	bv := b.Load(b.AddPtr(bias, cols), mask, nil)
	load := func(row *tile.Value) *tile.Value {
		return b.Load(b.AddPtr(x, b.Add(b.Mul(row, stride), cols)), b.And(mask, b.Lt(row, R)), 0.0)
	}
	b.For(pid, R, step, []*tile.Value{load(pid)}, func(row *tile.Value, c []*tile.Value) []*tile.Value {
		next := load(b.Add(row, step))
		xv := c[0]
		mean := b.Div(b.Sum(xv, 0), n)
		xc := b.Where(mask, b.Sub(xv, mean), 0.0)
		rstd := b.Rsqrt(b.Add(b.Div(b.Sum(b.Mul(xc, xc), 0), n), eps))
		b.Store(b.AddPtr(y, b.Add(b.Mul(row, stride), cols)), b.Add(b.Mul(b.Mul(xc, rstd), wv), bv), mask)
		b.Store(b.AddPtr(meanOut, row), mean, nil)
		b.Store(b.AddPtr(rstdOut, row), rstd, nil)
		return []*tile.Value{next}
	})
	return b.Build()
}

// LayerNorm2D is LayerNorm with BM rows per program (n ≤ BN): with as many
// warps as rows, each row is reduced within one warp, by shuffles alone.
// Meta: BM, BN[, STREAM]. Grid: CDiv(R, BM).
// Args: x, y, w, bias, mean, rstd []float32, R, n, row_stride, eps.
func LayerNorm2D(meta tile.Meta) (*tile.Kernel, error) {
	b := tile.NewBuilder("layer_norm_2d", meta)
	x, y, w, bias := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32), b.Ptr("w", tile.F32), b.Ptr("bias", tile.F32)
	meanOut, rstdOut := b.Ptr("mean", tile.F32), b.Ptr("rstd", tile.F32)
	R, n, stride, eps := b.Param("R", tile.I32), b.Param("n", tile.I32), b.Param("row_stride", tile.I32), b.Param("eps", tile.F32)
	BM, BN := b.BlockSize("BM"), b.BlockSize("BN")
	rows := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), BM), b.Arange(0, BM)), 1) // [BM,1]
	cols := b.ExpandDims(b.Arange(0, BN), 0)                                   // [1,BN]
	rowMask, colMask := b.Lt(rows, R), b.Lt(cols, n)
	mask := b.And(rowMask, colMask)
	offs := b.Add(b.Mul(rows, stride), cols)
	xv := b.Load(b.AddPtr(x, offs), mask, 0.0, streaming(meta)...)
	mean := b.Div(b.Sum(xv, 1, tile.KeepDims), n) // [BM,1]
	xc := b.Where(mask, b.Sub(xv, mean), 0.0)
	rstd := b.Rsqrt(b.Add(b.Div(b.Sum(b.Mul(xc, xc), 1, tile.KeepDims), n), eps))
	wv := b.Load(b.AddPtr(w, cols), colMask, nil)
	bv := b.Load(b.AddPtr(bias, cols), colMask, nil)
	b.Store(b.AddPtr(y, offs), b.Add(b.Mul(b.Mul(xc, rstd), wv), bv), mask, streaming(meta)...)
	b.Store(b.AddPtr(meanOut, rows), mean, rowMask)
	b.Store(b.AddPtr(rstdOut, rows), rstd, rowMask)
	return b.Build()
}

// BinaryOf applies a binary op elementwise to elements of dtype d:
// z[i] = op(x[i], y[i]) for i < n (a math check).
// Meta: BLOCK. Grid: CDiv(n, BLOCK). Args: x, y, z, n.
func BinaryOf(op tile.Op, d tile.DType) func(meta tile.Meta) (*tile.Kernel, error) {
	return func(meta tile.Meta) (*tile.Kernel, error) {
		b := tile.NewBuilder("binary_"+op.String()+"_"+d.String(), meta)
		x, y, z, n := b.Ptr("x", d), b.Ptr("y", d), b.Ptr("z", d), b.Param("n", tile.I32)
		BLOCK := b.BlockSize("BLOCK")
		offs := b.Add(b.Mul(b.ProgramID(0), BLOCK), b.Arange(0, BLOCK))
		mask := b.Lt(offs, n)
		b.Store(b.AddPtr(z, offs), b.Binary(op, b.Load(b.AddPtr(x, offs), mask, nil), b.Load(b.AddPtr(y, offs), mask, nil)), mask)
		return b.Build()
	}
}

// AddTransposed is z = x + yᵀ for N×N row-major matrices, one B×B tile per
// program: the transposed tile arrives in the other layout and must be
// converted (through shared memory on the GPU).
// Meta: B. Grid: (CDiv(N, B), CDiv(N, B)). Args: x, y, z []float32, N.
func AddTransposed(meta tile.Meta) (*tile.Kernel, error) {
	b := tile.NewBuilder("add_transposed", meta)
	x, y, z := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32), b.Ptr("z", tile.F32)
	N := b.Param("N", tile.I32)
	B := b.BlockSize("B")
	ri := b.Add(b.Mul(b.ProgramID(0), B), b.Arange(0, B))
	rj := b.Add(b.Mul(b.ProgramID(1), B), b.Arange(0, B))
	i2, j2 := b.ExpandDims(ri, 1), b.ExpandDims(rj, 0) // tile (i, j)
	mask := b.And(b.Lt(i2, N), b.Lt(j2, N))
	xt := b.Load(b.AddPtr(x, b.Add(b.Mul(i2, N), j2)), mask, 0.0)
	jT, iT := b.ExpandDims(rj, 1), b.ExpandDims(ri, 0) // y's tile (j, i)
	yt := b.Load(b.AddPtr(y, b.Add(b.Mul(jT, N), iT)), b.And(b.Lt(jT, N), b.Lt(iT, N)), 0.0)
	b.Store(b.AddPtr(z, b.Add(b.Mul(i2, N), j2)), b.Add(xt, b.Trans(yt)), mask)
	return b.Build()
}

// PairSums is out[k] = x[2k] + x[2k+1] for k < n/2, BLOCK elements per
// program: a [BLOCK] block reshaped to [BLOCK/2, 2] and reduced along its
// last axis (a reshape that moves elements between threads).
// Meta: BLOCK. Grid: CDiv(n, BLOCK). Args: x, out []float32, n (even).
func PairSums(meta tile.Meta) (*tile.Kernel, error) {
	b := tile.NewBuilder("pair_sums", meta)
	x, out, n := b.Ptr("x", tile.F32), b.Ptr("out", tile.F32), b.Param("n", tile.I32)
	BLOCK := b.BlockSize("BLOCK")
	offs := b.Add(b.Mul(b.ProgramID(0), BLOCK), b.Arange(0, BLOCK))
	v := b.Load(b.AddPtr(x, offs), b.Lt(offs, n), 0.0)
	s := b.Sum(b.Reshape(v, BLOCK/2, 2), 1)
	k := b.Add(b.Mul(b.ProgramID(0), BLOCK/2), b.Arange(0, BLOCK/2))
	b.Store(b.AddPtr(out, k), s, b.Lt(k, b.Div(n, 2)))
	return b.Build()
}
