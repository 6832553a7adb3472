package ptxsim

import (
	"math/bits"
	"strconv"
	"strings"
)

// Warpgroup matrix multiply-accumulate (PTX ISA §9.7.15, sm_90a):
// wgmma.mma_async.sync.aligned.m64nNk8 .tf32 and m64nNk16 .f16/.bf16, with
// f32 (or, for .f16, f16) accumulators, B and optionally A in shared memory
// through 64-bit matrix descriptors (§9.7.15.5.1.2.2: start address,
// leading and stride byte offsets, swizzle mode), A otherwise in registers;
// wgmma.fence, commit_group and wait_group.
//
// Shared-memory layouts are CUTLASS's canonical GMMA layouts (cute
// make_gmma_desc), in bytes with e the element size and T = 16/e elements
// in 16 bytes; row r of the M (or N) extent, column k of the K extent:
//
//	K-major, no swizzle:   (r%8)·16 + (r/8)·SBO + (k%T)·e + (k/T)·LBO
//	K-major, W-byte swizzle (W = 32, 64, 128): (r%8)·W + (r/8)·SBO + k·e
//	MN-major, no swizzle:  (r%T)·e + (r/T)·SBO + (k%8)·16 + (k/8)·LBO
//	MN-major, W-byte swizzle: (r%T)·e + (r/T%(W/16))·16 + (r/(T·W/16))·LBO + (k%8)·W + (k/8)·SBO
//
// and a W-byte swizzle XORs address bits [4, 4+log2(W/16)) with bits
// [7, 7+log2(W/16)) of the absolute shared address. A descriptor's base
// offset must be 0 here. The accumulator fragment: d_i of lane l in warp
// w%4 of the warpgroup is row 16(w%4) + l/4 + 8·(i/2%2), column
// 8·(i/4) + 2·(l%4) + i%2 (§9.7.15.5.1.1).
//
// The instruction is asynchronous: a warp's part is computed when the warp
// issues it (shared memory is read then), and its results reach the
// destination registers at the wgmma.wait_group that retires its group; a
// later wgmma of the same group or the next accumulates onto the in-flight
// values, as the hardware chains them. Code that reads the accumulators
// before the wait sees their old values. Each warp computes its 16 rows, so
// the four warps of a warpgroup need not run at once.

func init() {
	register(decodeWgmma, "wgmma")
}

type wgPending struct {
	group int // commit group sequence (-1: not committed yet)
	reg   int // register base index
	vals  [32]uint64
}

// wgState is a warp's wgmma state: results in flight, by register; the
// A registers of wgmmas in flight; how many wgmmas in flight name each
// register (busy); and when each register was last written by another
// instruction (written, in steps of the warp's clock), against the last
// wgmma.fence.
type wgState struct {
	pend      []wgPending
	pendA     []wgReg
	smem      []wgSmem // racecheck: the shared bytes of the wgmmas in flight
	committed int      // groups committed so far
	busy      []int32
	written   []uint64
	clock     uint64
	fence     uint64
}

// wgReg is a register (index × 32) read by a wgmma of a group (-1: not
// committed yet).
type wgReg struct{ reg, group int }

// wgSmem is the shared memory a warp's part of a wgmma reads (offs, n
// bytes each) until its group (-1: not committed yet) retires.
type wgSmem struct {
	group int
	offs  []int32
	n     int
}

// wgRetire drops the shared reads of the warp's wgmmas in groups before
// limit (all when limit < 0) from the race shadow's counts.
func (w *warp) wgRetire(limit int) {
	rs := w.c.race
	var rest []wgSmem
	for _, s := range w.wg.smem {
		if limit >= 0 && (s.group < 0 || s.group >= limit) {
			rest = append(rest, s)
			continue
		}
		if rs != nil {
			for _, o := range s.offs {
				for b := int(o); b < int(o)+s.n; b++ {
					rs.wgRead[b]--
				}
			}
		}
	}
	w.wg.smem = rest
}

func (s *wgState) reset() {
	s.pend, s.pendA, s.committed, s.smem = s.pend[:0], s.pendA[:0], 0, s.smem[:0]
	clear(s.busy)
	clear(s.written)
	s.clock, s.fence = 0, 0
}

// wgHazard checks instruction in (not a wgmma) against the wgmmas in
// flight: the PTX ISA leaves undefined an access to the accumulators or
// the A registers of a wgmma.mma_async before a wgmma.wait_group retires
// it; and it records the registers in writes, which a later wgmma may take
// only after a wgmma.fence.
func (w *warp) wgHazard(in *inst, exec uint32) error {
	s := &w.wg
	if s.busy == nil {
		n := len(w.r) / 32
		s.busy, s.written = make([]int32, n), make([]uint64, n)
	}
	if len(s.pend) > 0 || len(s.pendA) > 0 {
		for _, r := range in.touch {
			if s.busy[r] > 0 {
				return w.faultKind(bits.TrailingZeros32(exec), "wgmma", "register %s is an operand of a wgmma.mma_async in flight: a wgmma.wait_group must retire it first", w.c.l.e.regName(int(r)))
			}
		}
	}
	s.clock++
	for _, r := range in.writes {
		s.written[r] = s.clock
	}
	return nil
}

// wgIssue checks that the registers of a wgmma (accumulators and A
// fragments, by index × 32) were not written since the last wgmma.fence,
// and marks them busy until their group retires.
func (w *warp) wgIssue(regs []int) error {
	s := &w.wg
	if s.busy == nil {
		n := len(w.r) / 32
		s.busy, s.written = make([]int32, n), make([]uint64, n)
	}
	for _, r := range regs {
		if s.written[r/32] > s.fence {
			return w.faultKind(0, "wgmma", "register %s was written after the last wgmma.fence: wgmma.fence.sync.aligned must come between", w.c.l.e.regName(r/32))
		}
		s.busy[r/32]++
	}
	return nil
}

// value is register reg of lane l as the next wgmma sees it: the newest
// in-flight result, else the register.
func (w *warp) wgValue(reg, l int) uint64 {
	for i := len(w.wg.pend) - 1; i >= 0; i-- {
		if w.wg.pend[i].reg == reg {
			return w.wg.pend[i].vals[l]
		}
	}
	return w.r[reg+l]
}

// descriptor is a decoded wgmma matrix descriptor.
type descriptor struct {
	start, lbo, sbo uint64
	swizzle         uint64 // width in bytes, 0 for none
}

func decodeDesc(d uint64) (descriptor, bool) {
	out := descriptor{start: d & 0x3fff << 4, lbo: d >> 16 & 0x3fff << 4, sbo: d >> 32 & 0x3fff << 4}
	switch d >> 62 {
	case 1:
		out.swizzle = 128
	case 2:
		out.swizzle = 64
	case 3:
		out.swizzle = 32
	}
	return out, d>>49&7 == 0
}

// addr is the shared address of element (r, k) of an operand with
// e-byte elements, K-major or MN-major.
func (d descriptor) addr(r, k int, e uint64, kMajor bool) uint64 {
	T := 16 / e
	R, K := uint64(r), uint64(k)
	var off uint64
	switch {
	case kMajor && d.swizzle == 0:
		off = R%8*16 + R/8*d.sbo + K%T*e + K/T*d.lbo
	case kMajor:
		off = R%8*d.swizzle + R/8*d.sbo + K*e
	case d.swizzle == 0:
		off = R%T*e + R/T*d.sbo + K%8*16 + K/8*d.lbo
	default:
		c := d.swizzle / 16
		off = R%T*e + R/T%c*16 + R/(T*c)*d.lbo + K%8*d.swizzle + K/8*d.sbo
	}
	a := d.start + off
	if d.swizzle != 0 {
		mask := d.swizzle/16 - 1
		a ^= (a >> 7 & mask) << 4
	}
	return a
}

func decodeWgmma(d *decoder) error {
	if len(d.mods) == 0 {
		return d.errorf("wgmma needs an operation")
	}
	d.in.collective = true
	switch d.mods[0] {
	case "fence":
		d.in.run = func(w *warp, _ uint32) error {
			w.wg.fence = w.wg.clock
			return nil
		}
		return nil
	case "commit_group":
		d.in.run = func(w *warp, m uint32) error {
			for i := range w.wg.pend {
				if w.wg.pend[i].group < 0 {
					w.wg.pend[i].group = w.wg.committed
				}
			}
			for i := range w.wg.pendA {
				if w.wg.pendA[i].group < 0 {
					w.wg.pendA[i].group = w.wg.committed
				}
			}
			for i := range w.wg.smem {
				if w.wg.smem[i].group < 0 {
					w.wg.smem[i].group = w.wg.committed
				}
			}
			w.wg.committed++
			return nil
		}
		return nil
	case "wait_group":
		if err := d.nargs(1); err != nil {
			return err
		}
		n, err := d.src(0, tyU32)
		if err != nil || n.kind != oImm {
			return d.errorf("wgmma.wait_group takes an integer constant")
		}
		keep := int(n.imm)
		d.in.run = func(w *warp, m uint32) error {
			// retire every committed group but the newest keep
			limit := w.wg.committed - keep
			var rest []wgPending
			for _, p := range w.wg.pend {
				if p.group >= 0 && p.group < limit {
					for l := 0; l < 32; l++ {
						w.r[p.reg+l] = p.vals[l]
					}
					w.wg.busy[p.reg/32]--
					continue
				}
				rest = append(rest, p)
			}
			w.wg.pend = rest
			var restA []wgReg
			for _, p := range w.wg.pendA {
				if p.group >= 0 && p.group < limit {
					w.wg.busy[p.reg/32]--
					continue
				}
				restA = append(restA, p)
			}
			w.wg.pendA = restA
			w.wgRetire(limit)
			return nil
		}
		return nil
	case "mma_async":
		return decodeWgmmaMma(d)
	}
	return d.errorf("wgmma.%s is not simulated", d.mods[0])
}

func decodeWgmmaMma(d *decoder) error {
	if d.has("sp") {
		return d.errorf("sparse wgmma is not simulated")
	}
	shape := ""
	for _, m := range d.mods {
		if strings.HasPrefix(m, "m64n") {
			shape = m
		}
	}
	kpos := strings.Index(shape, "k")
	if shape == "" || kpos < 0 {
		return d.errorf("wgmma needs a shape m64nNkK")
	}
	N, err1 := strconv.Atoi(shape[4:kpos])
	K, err2 := strconv.Atoi(shape[kpos+1:])
	if err1 != nil || err2 != nil || N < 8 || N > 256 || N%8 != 0 {
		return d.errorf("wgmma shape .%s", shape)
	}
	ts := d.types()
	if len(ts) != 3 {
		return d.errorf("wgmma needs .dtype.atype.btype")
	}
	dt, at, bt := ts[0], ts[1], ts[2]
	if at != bt {
		return d.errorf("mixed operand types")
	}
	var esize uint64
	switch {
	case at == tyTF32 && K == 8 && dt == tyF32:
		esize = 4
	case (at == tyBF16 && dt == tyF32 || at == tyF16 && (dt == tyF32 || dt == tyF16)) && K == 16:
		esize = 2
	default:
		return d.errorf("wgmma .%s.%v.%v.%v is not simulated (tf32 k8 and f16/bf16 k16 are)", shape, dt, at, bt)
	}
	// d, a-desc | {a regs}, b-desc, scale-d, imm-scale-a, imm-scale-b{, imm-trans-a}{, imm-trans-b}
	aRegs := d.isVec(1)
	dregs := N / 2
	if dt == tyF16 {
		dregs = N / 4
	}
	dv, err := d.vec(0, tyB32, false)
	if err != nil {
		return err
	}
	if len(dv) != dregs {
		return d.errorf("%d accumulator registers, .%s.%v needs %d", len(dv), shape, dt, dregs)
	}
	var av []operand
	var adesc operand
	if aRegs {
		if av, err = d.vec(1, tyB32, true); err != nil {
			return err
		}
		if len(av) != 4 {
			return d.errorf("A in registers takes 4 registers")
		}
	} else if adesc, err = d.src(1, tyB64); err != nil {
		return err
	}
	bdesc, err := d.src(2, tyB64)
	if err != nil {
		return err
	}
	scaleD, err := d.src(3, tyPred)
	if err != nil {
		return err
	}
	imm := func(i int) (int64, error) {
		o, err := d.src(i, tyS32)
		if err != nil {
			return 0, err
		}
		if o.kind != oImm {
			return 0, d.errorf("operand %d must be an immediate", i)
		}
		return int64(int32(o.imm)), nil
	}
	scaleA, err := imm(4)
	if err != nil {
		return err
	}
	scaleB, err := imm(5)
	if err != nil {
		return err
	}
	transA, transB := int64(0), int64(0)
	next := 6
	if esize == 2 {
		if !aRegs {
			if transA, err = imm(next); err != nil {
				return err
			}
			next++
		}
		if transB, err = imm(next); err != nil {
			return err
		}
		next++
	}
	if len(d.raw.args) != next {
		return d.errorf("%d operands, this form takes %d", len(d.raw.args), next)
	}
	elem := func(b []byte) float64 {
		switch at {
		case tyTF32:
			return tf32val(le(b, 4))
		case tyBF16:
			return bf16val(le(b, 2))
		}
		return f16val(le(b, 2))
	}
	d.in.run = func(w *warp, m uint32) error {
		if w.live != 0xffffffff {
			return w.faultKind(0, "sync", "wgmma with exited lanes %#08x", ^w.live)
		}
		if w.c.l.nwarps < w.id/4*4+4 {
			return w.faultKind(0, "sync", "wgmma needs a whole warpgroup of four warps; the CTA has %d warps", w.c.l.nwarps)
		}
		wq := w.id % 4
		regs := make([]int, 0, len(dv)+len(av))
		for _, o := range dv {
			regs = append(regs, o.idx)
		}
		for _, o := range av {
			if o.kind == oReg {
				regs = append(regs, o.idx)
			}
		}
		if err := w.wgIssue(regs); err != nil {
			return err
		}
		for _, o := range av {
			if o.kind == oReg {
				w.wg.pendA = append(w.wg.pendA, wgReg{o.idx, -1})
			}
		}
		// B (K×N) once per warp; A's 16 rows of this warp. Under
		// racecheck the bytes read stay marked until the warp retires the
		// wgmma: a write to them before is a hazard
		var offs []int32
		track := w.c.race != nil && w.c.race.races
		B := make([]float64, K*N)
		read := func(desc uint64, r, k int, kMajor bool, l int) (float64, error) {
			dd, ok := decodeDesc(desc)
			if !ok {
				return 0, w.fault(l, "wgmma descriptor %#x has a base offset: not simulated", desc)
			}
			a := dd.addr(r, k, esize, kMajor)
			b, err := w.sharedRead(a, int(esize), l, "wgmma operand")
			if err != nil {
				return 0, err
			}
			if track {
				offs = append(offs, int32(a))
			}
			return elem(b), nil
		}
		bd := w.val(&bdesc, 0)
		for r := m; r != 0; r &= r - 1 {
			if w.val(&bdesc, bits.TrailingZeros32(r)) != bd {
				return w.faultKind(bits.TrailingZeros32(r), "sync", "the B descriptor differs across the warp")
			}
		}
		for k := 0; k < K; k++ {
			for n := 0; n < N; n++ {
				v, err := read(bd, n, k, transB == 0, 0)
				if err != nil {
					return err
				}
				B[k*N+n] = v * float64(scaleB)
			}
		}
		A := make([]float64, 16*K)
		if aRegs {
			var frag fragment
			if esize == 4 {
				frag = fragA16x8TF32
			} else {
				frag = fragA16x16F16
			}
			for l := 0; l < 32; l++ {
				for r := 0; r < 4; r++ {
					reg := w.val(&av[r], l)
					for e := 0; e < frag.per; e++ {
						row, col := frag.coord(l, r*frag.per+e)
						A[row*K+col] = element(at, reg, e)
					}
				}
			}
		} else {
			ad := w.val(&adesc, 0)
			for row := 0; row < 16; row++ {
				for k := 0; k < K; k++ {
					v, err := read(ad, 16*wq+row, k, transA == 0, 0)
					if err != nil {
						return err
					}
					A[row*K+k] = v
				}
			}
		}
		if track && len(offs) > 0 {
			rs := w.c.race
			for _, o := range offs {
				for b := int(o); b < int(o)+int(esize); b++ {
					rs.wgRead[b]++
				}
			}
			w.wg.smem = append(w.wg.smem, wgSmem{group: -1, offs: offs, n: int(esize)})
		}
		useD := w.pval(&scaleD, 0)
		for i := range dv {
			p := wgPending{group: -1, reg: dv[i].idx}
			for l := 0; l < 32; l++ {
				g, t := l>>2, l%4
				per := 1
				if dt == tyF16 {
					per = 2
				}
				var out uint64
				for e := 0; e < per; e++ {
					j := i*per + e
					row := g + 8*(j/2%2)
					col := 8*(j/4) + 2*t + j%2
					s := 0.0
					if useD {
						if dt == tyF16 {
							s = f16val(w.wgValue(dv[i].idx, l) >> (16 * e))
						} else {
							s = float64(f32(w.wgValue(dv[i].idx, l)))
						}
					}
					for k := 0; k < K; k++ {
						s += float64(scaleA) * A[row*K+k] * B[k*N+col]
					}
					if dt == tyF16 {
						out |= fmtF16.round(s, rn) << (16 * e)
					} else {
						out = b32(float32(s))
					}
				}
				p.vals[l] = out
			}
			w.wg.pend = append(w.wg.pend, p)
		}
		return nil
	}
	return nil
}
