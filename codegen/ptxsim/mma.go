package ptxsim

import (
	"math"
)

// Warp-level matrix instructions (PTX ISA §9.7.14): mma.sync on the
// shapes and types below, ldmatrix and stmatrix. Fragment layouts are data
// (fragments), transcribed from the ISA's "Matrix Fragments for mma.mMnNkK"
// sections (§9.7.14.5.x): groupID = %laneid >> 2, threadID_in_group =
// %laneid % 4. A warp computes D = A·B + C for A m×k (row), B k×n (col).
// The simulator forms every product exactly and sums each dot product and
// the accumulator in float64, rounding once to the accumulator type: the
// tensor cores' own summation order and truncation are not modelled, so
// results can differ from the GPU's in the last bits of an f32.

func init() {
	register(decodeMma, "mma")
	register(decodeLdmatrix, "ldmatrix")
	register(decodeStmatrix, "stmatrix")
}

// fragment is one operand's distribution over the warp: element i (of
// regs×per in all, low half of a register first) of lane l sits at
// coord(l, i) of the matrix.
type fragment struct {
	regs, per int
	coord     func(lane, i int) (row, col int)
}

func gt(lane int) (g, t int) { return lane >> 2, lane % 4 }

var (
	// C and D of every m16n8kK shape: c0,c1 at (g, 2t+i), c2,c3 at (g+8, 2t+i-2).
	fragC16x8 = func(per int) fragment {
		return fragment{regs: 4 / per, per: per, coord: func(l, i int) (int, int) {
			g, t := gt(l)
			return g + 8*(i/2), 2*t + i%2
		}}
	}
	// m16n8k4 .tf32 (§9.7.14.5.6): a0 (g, t), a1 (g+8, t); b0 (t, g).
	fragA16x4TF32 = fragment{regs: 2, per: 1, coord: func(l, i int) (int, int) { g, t := gt(l); return g + 8*i, t }}
	fragB4x8TF32  = fragment{regs: 1, per: 1, coord: func(l, i int) (int, int) { g, t := gt(l); return t, g }}
	// m16n8k8 .tf32 (§9.7.14.5.7): a0 (g,t) a1 (g+8,t) a2 (g,t+4) a3 (g+8,t+4); b0 (t,g) b1 (t+4,g).
	fragA16x8TF32 = fragment{regs: 4, per: 1, coord: func(l, i int) (int, int) { g, t := gt(l); return g + 8*(i%2), t + 4*(i/2) }}
	fragB8x8TF32  = fragment{regs: 2, per: 1, coord: func(l, i int) (int, int) { g, t := gt(l); return t + 4*i, g }}
	// m16n8k8 .f16/.bf16 (§9.7.14.5.7): a0,a1 (g, 2t+i), a2,a3 (g+8, 2t+i); b0,b1 (2t+i, g).
	fragA16x8F16 = fragment{regs: 2, per: 2, coord: func(l, i int) (int, int) { g, t := gt(l); return g + 8*(i/2), 2*t + i%2 }}
	fragB8x8F16  = fragment{regs: 1, per: 2, coord: func(l, i int) (int, int) { g, t := gt(l); return 2*t + i%2, g }}
	// m16n8k16 .f16/.bf16 (§9.7.14.5.8): row g for a0,a1,a4,a5 else g+8;
	// col 2t+(i&1), +8 for i >= 4; b_i at (2t+(i&1) (+8 for i >= 2), g).
	fragA16x16F16 = fragment{regs: 4, per: 2, coord: func(l, i int) (int, int) {
		g, t := gt(l)
		return g + 8*(i/2%2), 2*t + i%2 + 8*(i/4)
	}}
	fragB16x8F16 = fragment{regs: 2, per: 2, coord: func(l, i int) (int, int) { g, t := gt(l); return 2*t + i%2 + 8*(i/2), g }}
	// m8n8k4 .f64 (§9.7.14.5.4): a0 (g, t); b0 (t, g); c0,c1 (g, 2t+i).
	fragA8x4F64 = fragment{regs: 1, per: 1, coord: func(l, i int) (int, int) { g, t := gt(l); return g, t }}
	fragB4x8F64 = fragment{regs: 1, per: 1, coord: func(l, i int) (int, int) { g, t := gt(l); return t, g }}
	fragC8x8F64 = fragment{regs: 2, per: 1, coord: func(l, i int) (int, int) { g, t := gt(l); return g, 2*t + i }}
)

// mmaForm is one supported mma shape and type combination.
type mmaForm struct {
	m, n, k int
	a, b    fragment
	in      ptxType // A and B element type
}

// mmaForms, keyed by shape and A/B type.
var mmaForms = map[string]mmaForm{
	"m16n8k4.tf32":  {16, 8, 4, fragA16x4TF32, fragB4x8TF32, tyTF32},
	"m16n8k8.tf32":  {16, 8, 8, fragA16x8TF32, fragB8x8TF32, tyTF32},
	"m16n8k8.f16":   {16, 8, 8, fragA16x8F16, fragB8x8F16, tyF16},
	"m16n8k8.bf16":  {16, 8, 8, fragA16x8F16, fragB8x8F16, tyBF16},
	"m16n8k16.f16":  {16, 8, 16, fragA16x16F16, fragB16x8F16, tyF16},
	"m16n8k16.bf16": {16, 8, 16, fragA16x16F16, fragB16x8F16, tyBF16},
	"m8n8k4.f64":    {8, 8, 4, fragA8x4F64, fragB4x8F64, tyF64},
}

// element decodes element e (0 or 1 within a register) of type t.
func element(t ptxType, reg uint64, e int) float64 {
	switch t {
	case tyTF32:
		return tf32val(reg)
	case tyF32:
		return float64(f32(reg))
	case tyF64:
		return f64(reg)
	case tyF16:
		return f16val(reg >> (16 * e))
	case tyBF16:
		return bf16val(reg >> (16 * e))
	}
	return math.NaN()
}

func decodeMma(d *decoder) error {
	if !d.has("sync") || !d.has("aligned") {
		return d.errorf("mma needs .sync.aligned")
	}
	shape := ""
	for _, m := range d.mods {
		if len(m) > 1 && m[0] == 'm' && m[1] >= '0' && m[1] <= '9' {
			shape = m
		}
	}
	ts := d.types()
	if len(ts) != 4 {
		return d.errorf("mma needs .dtype.atype.btype.ctype")
	}
	dt, at, bt, ct := ts[0], ts[1], ts[2], ts[3]
	if at != bt {
		return d.errorf("mixed A and B types .%v .%v are not simulated", at, bt)
	}
	form, ok := mmaForms[shape+"."+at.String()]
	if !ok {
		return d.errorf("mma shape .%s with .%v operands is not simulated (supported: %s)", shape, at, mmaFormNames())
	}
	if !(d.has("row") && d.has("col")) {
		return d.errorf("mma.%s takes .row.col", shape)
	}
	if d.has("satfinite") {
		return d.errorf(".satfinite is not simulated")
	}
	var fc fragment
	switch {
	case form.in == tyF64 && dt == tyF64 && ct == tyF64:
		fc = fragC8x8F64
	case form.in != tyF64 && (dt == tyF32 || dt == tyF16) && (ct == tyF32 || ct == tyF16) && form.m == 16:
		if (dt == tyF16 || ct == tyF16) && form.in != tyF16 {
			return d.errorf(".f16 accumulators go with .f16 operands")
		}
		fc = fragC16x8(1)
	default:
		return d.errorf("mma .%v.%v.%v.%v is not simulated", dt, at, bt, ct)
	}
	fd := fc
	if dt == tyF16 {
		fd = fragC16x8(2)
	}
	if ct == tyF16 {
		fc = fragC16x8(2)
	}
	if err := d.nargs(4); err != nil {
		return err
	}
	var regs [4][]operand
	for i, want := range []int{fd.regs, form.a.regs, form.b.regs, fc.regs} {
		v, err := d.vec(i, tyB32, i > 0)
		if err != nil {
			return err
		}
		if len(v) != want {
			return d.errorf("operand %d has %d registers, mma.%s.%v needs %d", i, len(v), shape, at, want)
		}
		for _, o := range v {
			if o.kind != oReg {
				return d.errorf("operand %d: mma operands are registers", i)
			}
		}
		regs[i] = v
	}
	d.in.collective = true
	M, N, K := form.m, form.n, form.k
	d.in.run = func(w *warp, m uint32) error {
		if w.live != 0xffffffff {
			return w.faultKind(0, "sync", "mma.sync with exited lanes %#08x (undefined)", ^w.live)
		}
		A := make([]float64, M*K)
		B := make([]float64, K*N)
		C := make([]float64, M*N)
		gather := func(f fragment, ops []operand, t ptxType, dst []float64, cols int) {
			for l := 0; l < 32; l++ {
				for r := 0; r < f.regs; r++ {
					reg := w.r[ops[r].idx+l]
					for e := 0; e < f.per; e++ {
						row, col := f.coord(l, r*f.per+e)
						dst[row*cols+col] = element(t, reg, e)
					}
				}
			}
		}
		gather(form.a, regs[1], form.in, A, K)
		gather(form.b, regs[2], form.in, B, N)
		gather(fc, regs[3], ct, C, N)
		D := make([]float64, M*N)
		for i := 0; i < M; i++ {
			for j := 0; j < N; j++ {
				s := C[i*N+j]
				for k := 0; k < K; k++ {
					s += A[i*K+k] * B[k*N+j]
				}
				D[i*N+j] = s
			}
		}
		for l := 0; l < 32; l++ {
			for r := 0; r < fd.regs; r++ {
				var v uint64
				for e := 0; e < fd.per; e++ {
					row, col := fd.coord(l, r*fd.per+e)
					x := D[row*N+col]
					switch dt {
					case tyF32:
						v = b32(float32(x))
					case tyF64:
						v = b64(x)
					case tyF16:
						v |= fmtF16.round(x, rn) << (16 * e)
					}
				}
				w.r[regs[0][r].idx+l] = v
			}
		}
		return nil
	}
	return nil
}

func mmaFormNames() string {
	s := ""
	for k := range mmaForms {
		s += " " + k
	}
	return s
}

// ldmatrixArgs decodes the common part of ldmatrix and stmatrix: the number
// of 8×8 matrices, .trans, and the state space.
func ldmatrixArgs(d *decoder) (n int, trans bool, sp space, err error) {
	if !d.has("sync") || !d.has("aligned") || !d.has("m8n8") || !d.has("b16") {
		return 0, false, 0, d.errorf("%s.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16 is the simulated form", d.base)
	}
	switch {
	case d.has("x1"):
		n = 1
	case d.has("x2"):
		n = 2
	case d.has("x4"):
		n = 4
	default:
		return 0, false, 0, d.errorf("%s needs .x1, .x2 or .x4", d.base)
	}
	sp, err = d.space()
	if err == nil && sp != spShared && sp != spGeneric {
		err = d.errorf("%s reads shared memory", d.base)
	}
	return n, d.has("trans"), sp, err
}

// rowAddr is the shared offset of row r of matrix q (PTX ISA §9.7.14.5.15:
// threads 8q..8q+7 hold the addresses of matrix q's rows).
func rowAddr(w *warp, a *addrOperand, sp space, q, r int) (uint64, int, error) {
	lane := 8*q + r
	addr := w.addr(a, lane)
	if sp == spGeneric {
		if addr < sharedWindow || addr >= sharedWindow+windowSize {
			return 0, lane, w.faultAddr(lane, "memcheck", addr, "%s row address is not in shared memory", w.cur.op)
		}
		addr -= sharedWindow
	}
	return addr & 0xffffffff, lane, nil
}

// decodeLdmatrix: ldmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16 d, [a].
// Lane t receives, for matrix q, row t/4 columns 2(t%4) and 2(t%4)+1 (with
// .trans, column t/4 rows 2(t%4) and 2(t%4)+1), the lower column or row in
// the low half.
func decodeLdmatrix(d *decoder) error {
	n, trans, sp, err := ldmatrixArgs(d)
	if err != nil {
		return err
	}
	if err := d.nargs(2); err != nil {
		return err
	}
	dst, err := d.vec(0, tyB32, false)
	if err != nil {
		return err
	}
	if len(dst) != n {
		return d.errorf("%d destination registers for .x%d", len(dst), n)
	}
	a, err := d.address(1)
	if err != nil {
		return err
	}
	if a.symSpace == spShared && sp == spGeneric {
		a.off += sharedWindow
	}
	d.in.collective = true
	d.in.run = func(w *warp, m uint32) error {
		var rows [4][8][16]byte
		for q := 0; q < n; q++ {
			for r := 0; r < 8; r++ {
				addr, lane, err := rowAddr(w, &a, sp, q, r)
				if err != nil {
					return err
				}
				b, err := w.sharedRead(addr, 16, lane, "ldmatrix row")
				if err != nil {
					return err
				}
				copy(rows[q][r][:], b)
			}
		}
		for l := 0; l < 32; l++ {
			if m&(1<<l) == 0 {
				continue
			}
			for q := 0; q < n; q++ {
				var v uint64
				if trans {
					c := l / 4
					r0 := 2 * (l % 4)
					v = le(rows[q][r0][2*c:], 2) | le(rows[q][r0+1][2*c:], 2)<<16
				} else {
					v = le(rows[q][l/4][4*(l%4):], 4)
				}
				w.set(&dst[q], l, v)
			}
		}
		return nil
	}
	return nil
}

// decodeStmatrix: stmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16 [a], r
// (PTX ISA §9.7.14.5.16), the inverse of ldmatrix.
func decodeStmatrix(d *decoder) error {
	n, trans, sp, err := ldmatrixArgs(d)
	if err != nil {
		return err
	}
	if err := d.nargs(2); err != nil {
		return err
	}
	src, err := d.vec(1, tyB32, true)
	if err != nil {
		return err
	}
	if len(src) != n {
		return d.errorf("%d source registers for .x%d", len(src), n)
	}
	a, err := d.address(0)
	if err != nil {
		return err
	}
	if a.symSpace == spShared && sp == spGeneric {
		a.off += sharedWindow
	}
	d.in.collective = true
	d.in.run = func(w *warp, m uint32) error {
		if m != 0xffffffff {
			return w.faultKind(0, "sync", "stmatrix with lanes %#08x missing", ^m)
		}
		var rows [4][8][16]byte
		for l := 0; l < 32; l++ {
			for q := 0; q < n; q++ {
				v := w.val(&src[q], l)
				if trans {
					c := l / 4
					r0 := 2 * (l % 4)
					putLE(rows[q][r0][2*c:], 2, v)
					putLE(rows[q][r0+1][2*c:], 2, v>>16)
				} else {
					putLE(rows[q][l/4][4*(l%4):], 4, v)
				}
			}
		}
		for q := 0; q < n; q++ {
			for r := 0; r < 8; r++ {
				addr, lane, err := rowAddr(w, &a, sp, q, r)
				if err != nil {
					return err
				}
				if err := w.sharedWrite(addr, rows[q][r][:], lane, "stmatrix row"); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return nil
}
