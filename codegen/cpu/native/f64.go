package native

import (
	"math"

	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
	"github.com/tilefuse/tilefuse/tile"
)

// f64 lanes. A phase computes eight lanes a vector (its ymm loop; zmmOK
// declines phases with f64 values); a vector of eight f64 lanes is one
// zmm register, Z of the number the register allocator gives it (the
// register numbers and the allocator are the f32 code's: Z0–Z15, spill
// slots of 64 bytes) where the CPU has AVX-512F; without it a pair of
// ymm registers (f64y.go). Masks stay what they are for f32: eight 32-bit lanes in a
// ymm register (i32 comparisons, lane masks, Ands), turned into an
// opmask where an f64 instruction needs one (kMask: the sign bits of the
// eight lanes); an f64 comparison writes an opmask and expands it to such
// a mask. Masked loads and stores are EVEX moves under the opmask, which
// neither read nor write the lanes it leaves off (no fault there), the
// active lanes' range checked as for f32 (checkLanes). Every op is the
// reference's per lane: IEEE add, sub, mul, div, sqrt (rounded once),
// rsqrt (1/√x, two roundings as the reference's), sign, floor and ceil, min and max with the reference's NaN rule, sign
// operations, selects, conversions f32 ↔ f64 (f64 → f32 rounds to
// nearest, as Go's float32(x)) and i32 → f64 (exact); exp, tanh, log and
// the other math functions (mathd.go), pow (powd.go); reductions, scalars and gathers (below). Products: dot.go
// (dotZ64).

// isF64 reports whether node n computes (or stores, through its pattern)
// f64 lanes.
func isF64(n *node) bool {
	if n.pat != nil && n.pat.root != -2 {
		return n.pat.sh == 3
	}
	return n.v.Type.DType == tile.F64
}

// f64Phase reports whether a phase node reads or writes f64 lanes (zmmOK
// declines such phases: their vectors are eight lanes).
func f64Phase(n *node) bool {
	if isF64(n) {
		return true
	}
	for _, a := range n.args {
		if a.v.Type.DType == tile.F64 {
			return true
		}
	}
	return false
}

func z(r amd64.VReg) amd64.ZReg { return amd64.ZReg(r) }

// kMask is the opmask of the eight 32-bit lanes of vector mask m (their
// sign bits; lanes 8–15 of the zmm register may be anything: the f64
// instructions read the opmask's low eight bits).
func (g *gen) kMask(m amd64.VReg) amd64.KReg {
	k := g.va().newK()
	g.a.VPTESTMDZ(k, z(m), g.constVec(0x80000000).Bcst())
	return k
}

// f64Op emits f64 op v: dst = op(s), every operand in a register.
func (g *gen) f64Op(v *tile.Value, dst amd64.VReg, s []opnd, t []amd64.VReg) error {
	a := &g.a
	for _, o := range s {
		if o.isMem {
			return unsupported(v, "f64 operand in memory") // memOK gives none
		}
	}
	if !g.avx512 {
		return g.f64OpY(v, dst, s, t) // f64y.go
	}
	r := func(i int) amd64.ZReg { return z(s[i].reg) }
	switch v.Op {
	case tile.OpAdd:
		a.VADDPDZ(z(dst), r(0), r(1))
	case tile.OpSub:
		a.VSUBPDZ(z(dst), r(0), r(1))
	case tile.OpMul:
		a.VMULPDZ(z(dst), r(0), r(1))
	case tile.OpDiv:
		a.VDIVPDZ(z(dst), r(0), r(1))
	case tile.OpMin, tile.OpMax:
		// (x != x || x op y) ? x : y, as the reference (vminpd/vmaxpd give
		// y where either is NaN)
		if v.Op == tile.OpMin {
			a.VMINPDZ(z(t[1]), r(0), r(1))
		} else {
			a.VMAXPDZ(z(t[1]), r(0), r(1))
		}
		k := g.va().newK()
		a.VCMPPDZ(k, r(0), r(0), amd64.CmpUNORD)
		a.VBLENDMPDZ(z(dst), k, z(t[1]), r(0))
	case tile.OpNeg:
		a.VPXORQZ(z(dst), r(0), g.constI64(-1<<63).Bcst())
	case tile.OpAbs:
		a.VPANDQZ(z(dst), r(0), g.constI64(1<<63-1).Bcst())
	case tile.OpSqrt:
		a.VSQRTPDZ(z(dst), r(0))
	case tile.OpRsqrt: // 1/√x, each rounded: the reference's
		a.VSQRTPDZ(z(t[1]), r(0))
		a.VBROADCASTSDZ(z(t[0]), g.constF64(1))
		a.VDIVPDZ(z(dst), z(t[0]), z(t[1]))
	case tile.OpSign: // 1 where x > 0, -1 where x < 0, else x (±0, NaN)
		va := g.va()
		gt, lt := va.newK(), va.newK()
		a.VCMPPDZ(gt, r(0), g.constF64(0).Bcst(), amd64.CmpGT)
		a.VCMPPDZ(lt, r(0), g.constF64(0).Bcst(), amd64.CmpLT)
		a.VBLENDMPDZ(z(t[0]), gt, r(0), g.constF64(1).Bcst())
		a.VBLENDMPDZ(z(dst), lt, z(t[0]), g.constF64(-1).Bcst())
	case tile.OpFloor:
		a.VRNDSCALEPDZ(z(dst), r(0), 9)
	case tile.OpCeil:
		a.VRNDSCALEPDZ(z(dst), r(0), 10)
	case tile.OpExp, tile.OpTanh, tile.OpLog, tile.OpSigmoid, tile.OpLog1p, tile.OpExpm1, tile.OpErf, tile.OpSin, tile.OpCos, tile.OpExp2, tile.OpLog2: // mathd.go: the reference's, bit for bit
		g.mathF64(v.Op, dst, s[0].reg, t)
	case tile.OpPow: // powd.go: the reference's, bit for bit
		g.powF64(z(dst), r(0), r(1), t)
	case tile.OpRem: // rem.go: the reference's, bit for bit
		g.remF64(z(dst), r(0), r(1), t)
	case tile.OpSelect:
		a.VBLENDMPDZ(z(dst), g.kMask(s[0].reg), r(2), r(1))
	case tile.OpCast:
		switch v.Args[0].Type.DType {
		case tile.F32:
			a.VCVTPS2PDZ(z(dst), r(0))
		case tile.I32:
			a.VCVTDQ2PDZ(z(dst), r(0))
		case tile.I1:
			k := g.kMask(s[0].reg)
			a.VPXORQZ(z(t[0]), z(t[0]), z(t[0]))
			a.VBLENDMPDZ(z(dst), k, z(t[0]), g.constF64(1).Bcst())
		default:
			return unsupported(v, "cast from %v to f64", v.Args[0].Type.DType)
		}
	default:
		return unsupported(v, "f64 %v", v.Op)
	}
	return nil
}

// f64Compare: dst = x op y of f64 lanes, a vector mask of eight 32-bit
// lanes (ordered: false with a NaN, but for Ne).
func (g *gen) f64Compare(v *tile.Value, dst amd64.VReg, s []opnd, t []amd64.VReg) error {
	if s[0].isMem || s[1].isMem {
		return unsupported(v, "f64 operand in memory")
	}
	if !g.avx512 {
		return g.f64CompareY(v, dst, s, t)
	}
	va := g.va()
	k := va.newK()
	g.a.VCMPPDZ(k, z(s[0].reg), z(s[1].reg), f64Pred(v))
	va.expand(dst, k)
	return nil
}

// f64Pred is the predicate of f64 comparison v; a cast to i1 is x ≠ 0
// (unordered or not equal: NaN gives true).
func f64Pred(v *tile.Value) uint8 {
	if v.Op == tile.OpCast {
		return amd64.CmpNEQ
	}
	return cmpPred[v.Op]
}

// zeroF64 sets the f64 vector r to +0 (a zmm register, or a ymm pair).
func (g *gen) zeroF64(r amd64.VReg) {
	if g.avx512 {
		g.a.VPXORQZ(z(r), z(r), z(r))
		return
	}
	g.a.VXORPS(r, r, r)
	g.a.VXORPS(hi(r), hi(r), hi(r))
}

// loadF64 is load's f64 form (mask: the active lanes' vector mask where
// masked).
func (pg *phaseGen) loadF64(n *node, dst amd64.VReg, srcs []opnd, t []amd64.VReg, at amd64.Mem, mask amd64.VReg, masked bool) {
	g := pg.g
	a := &g.a
	if !g.avx512 {
		pg.loadF64Y(n, dst, srcs, t, at, mask, masked)
		return
	}
	other := len(srcs) == 2 && !isZeroConst(n.v.Args[2])
	into := dst
	if other {
		into = t[2]
	}
	var k amd64.KReg
	if masked {
		k = g.kMask(mask)
	}
	switch {
	case !masked && n.pat.elast == 0:
		a.VBROADCASTSDZ(z(into), at)
	case !masked:
		a.VMOVUPDZ(z(into), 0, at)
	case n.pat.elast == 0:
		// one address: loaded if any lane is active, kept in the active lanes
		a.VBROADCASTSDZ(z(t[1]), pg.guardedScalar(at, mask))
		a.VPXORQZ(z(into), z(into), z(into))
		a.VBLENDMPDZ(z(into), k, z(into), z(t[1]))
	default:
		// no lane active: no load (body.go's load says why)
		skip, done := a.NewLabel(), a.NewLabel()
		a.VMOVMSKPS(rT0, mask)
		a.TESTL(rT0, rT0)
		a.Jcc(amd64.CondE, skip)
		a.VMOVUPDZ(z(into), k, at)
		a.JMP(done)
		a.Bind(skip)
		a.VPXORQZ(z(into), z(into), z(into))
		a.Bind(done)
	}
	if other {
		// lanes whose mask is off take other
		a.VBLENDMPDZ(z(dst), k, z(srcs[1].reg), z(t[2]))
	}
}

// matReadF64 reads an f64 frame block's vector.
func (pg *phaseGen) matReadF64(n *node, dst amd64.VReg, t []amd64.VReg, at amd64.Mem) {
	g := pg.g
	if !g.avx512 {
		pg.matReadF64Y(n, dst, t, at)
		return
	}
	switch {
	case n.pat.elast == 0:
		g.a.VBROADCASTSDZ(z(dst), at)
	case pg.width < lane:
		g.a.VMOVUPDZ(z(dst), g.kMask(pg.laneMaskReg(t[0])), at)
	default:
		g.a.VMOVUPDZ(z(dst), 0, at)
	}
}

// Reductions of f64 lanes. Along the last axis: a sum in the executor's
// order (codegen/cpu: reduceRow), four partial sums s[i mod 4] over the
// row's elements in order, combined as (s0+s1)+(s2+s3): one accumulator of
// four lanes (ymm, the register of the first body copy's accumulator)
// takes each vector's low four lanes and then its high four, both body
// copies in turn, so rows whose length is a multiple of four (every row
// of eight lanes or more in this code) are the executor's bit for bit.
// Max and min scan each lane (eight a body copy, zmm) as the reference
// scans a row and combine the lanes in order, as for f32 (only which of
// ±0, or which NaN, comes out may differ from an in-order scan). Along
// axis 0: in the frame, in the reference's order.

func isF64Red(r *redState) bool { return r.v.Type.DType == tile.F64 }

// redInitF64 is an f64 reduction's initial value (a pool constant whose
// first float64 is broadcast).
func (pg *phaseGen) redInitF64(r *redState) amd64.Mem {
	switch r.v.Op {
	case tile.OpReduceMax:
		return pg.g.constF64(math.Inf(-1))
	case tile.OpReduceMin:
		return pg.g.constF64(math.Inf(1))
	}
	return pg.g.constF64(0)
}

// maxStepF64: acc = (x > acc || x != x) ? x : acc per lane (min with <).
func (g *gen) maxStepF64(op tile.Op, acc, x amd64.ZReg) {
	a := &g.a
	if op == tile.OpReduceMin {
		a.VMINPDZ(acc, x, acc)
	} else {
		a.VMAXPDZ(acc, x, acc)
	}
	k := g.va().newK()
	a.VCMPPDZ(k, x, x, amd64.CmpUNORD)
	a.VBLENDMPDZ(acc, k, acc, x)
}

// reduceF64 accumulates the vector in xr into f64 reduction r: a zmm
// register, or without AVX-512 a pair of ymm registers (half).
func (pg *phaseGen) reduceF64(r *redState, c int, xr amd64.VReg, t []amd64.VReg) error {
	g := pg.g
	a := &g.a
	if r.axis == r.v.Args[0].Type.Shape.Rank-1 {
		switch {
		case r.inMem:
			return unsupported(r.v, "f64 reductions past the accumulator registers")
		case r.v.Op == tile.OpReduceSum:
			if pg.last > 2 && pg.last != 4 && pg.last%lane != 0 {
				return unsupported(r.v, "f64 sum of rows of %d", pg.last)
			}
			acc := r.acc[0] // one accumulator of four lanes for both copies
			if pg.last < 4 {
				// a row of 1 or 2 in the low lanes, the rest zeroed:
				// (x0 + 0) + (0 + 0) and (x0 + x1) + (0 + 0), the
				// executor's ((0 + x0) + 0) + (0 + 0) and ((0 + x0) + x1)
				// + … bit for bit (+0 + x differs from x only at x = −0,
				// where both give +0)
				a.VANDPD(t[0], xr, g.laneMask(2*pg.last)) // f64 lane i: f32 lanes 2i, 2i+1
				xr = t[0]
			}
			a.VADDPD(acc, acc, xr)
			switch {
			case pg.width <= 4:
			case g.avx512:
				a.VEXTRACTF64X4Z(z(t[0]), z(xr), 1)
				a.VADDPD(acc, acc, t[0])
			default:
				a.VADDPD(acc, acc, hi(xr))
			}
		case g.avx512:
			g.maxStepF64(r.v.Op, z(r.acc[c]), z(xr))
		default:
			for h := 0; h < 2; h++ {
				g.maxStepF64Y(r.v.Op, half(r.acc[c], h), half(xr, h), t[0])
			}
		}
		return nil
	}
	// axis 0: the first row stores, the others combine in order (rows
	// narrower than a vector too: the block holds one, matBlock)
	if r.v.Args[0].Type.Shape.Rank == 3 && pg.width < lane {
		// a rank-3 block's result rows narrower than a vector lie next to
		// each other: read and written under the row's lane mask (at most
		// four lanes: without AVX-512 the low half of the pair), made
		// before the branch to the first row's store
		var k amd64.KReg
		if g.avx512 {
			k = g.kMask(pg.laneMaskReg(t[3]))
		} else {
			g.halfMask(t[2], pg.laneMaskReg(t[3]), 0)
		}
		at, first := pg.offAxis(r, 8)
		done := a.NewLabel()
		step := func(acc, x amd64.VReg) {
			switch {
			case r.v.Op == tile.OpReduceSum && g.avx512:
				a.VADDPDZ(z(acc), z(acc), z(x))
			case r.v.Op == tile.OpReduceSum:
				a.VADDPD(acc, acc, x)
			case g.avx512:
				g.maxStepF64(r.v.Op, z(acc), z(x))
			default:
				g.maxStepF64Y(r.v.Op, acc, x, t[1])
			}
		}
		if g.avx512 {
			a.VMOVUPDZ(z(t[0]), k, at)
			step(t[0], xr)
			a.VMOVUPDstoreZ(at, k, z(t[0]))
			a.JMP(done)
			a.Bind(first)
			a.VMOVUPDstoreZ(at, k, z(xr))
		} else {
			a.VMASKMOVPDload(t[0], t[2], at)
			step(t[0], xr)
			a.VMASKMOVPDstore(at, t[2], t[0])
			a.JMP(done)
			a.Bind(first)
			a.VMASKMOVPDstore(at, t[2], xr)
		}
		a.Bind(done)
		return nil
	}
	at, first := pg.offAxis(r, 8)
	done := a.NewLabel()
	if g.avx512 {
		a.VMOVUPDZ(z(t[0]), 0, at)
		switch r.v.Op {
		case tile.OpReduceSum:
			a.VADDPDZ(z(t[0]), z(t[0]), z(xr))
		default:
			g.maxStepF64(r.v.Op, z(t[0]), z(xr))
		}
		a.VMOVUPDstoreZ(at, 0, z(t[0]))
	} else {
		for h := 0; h < 2; h++ {
			a.VMOVUPD(t[0], memHalf(at, h))
			switch r.v.Op {
			case tile.OpReduceSum:
				a.VADDPD(t[0], t[0], half(xr, h))
			default:
				g.maxStepF64Y(r.v.Op, t[0], half(xr, h), t[1])
			}
			a.VMOVUPSstore(memHalf(at, h), t[0])
		}
	}
	a.JMP(done)
	a.Bind(first)
	if g.avx512 {
		a.VMOVUPDstoreZ(at, 0, z(xr))
	} else {
		g.storeF64Y(at, xr, 0, false, 0)
	}
	a.Bind(done)
	return nil
}

// rowEndF64 finishes f64 last-axis reduction r of a row into X0.
func (pg *phaseGen) rowEndF64(r *redState) {
	g := pg.g
	a := &g.a
	if r.v.Op == tile.OpReduceSum {
		// (s0+s1)+(s2+s3) of the accumulator's four lanes
		acc := r.acc[0]
		a.VPERMILPS(1, acc, 0x4e)       // (s1, s0, s3, s2)
		a.VADDPD(1, acc, amd64.VReg(1)) // (s0+s1, ·, s2+s3, ·)
		a.VEXTRACTF128(0, 1, 1)         // (s2+s3, ·)
		a.VADDPD(0, 1, amd64.VReg(0))   // lane 0: (s0+s1)+(s2+s3)
		return
	}
	if !g.avx512 {
		pg.rowEndMaxF64Y(r)
		return
	}
	// lanes in order: copy 0's then copy 1's (eight each)
	tmp := g.alloc(128, 64)
	a.VMOVUPDstoreZ(fr(tmp), 0, z(r.acc[0]))
	n := pg.width
	if pg.last >= 2*lane {
		a.VMOVUPDstoreZ(fr(tmp+64), 0, z(r.acc[1]))
		n = 2 * lane
	}
	a.VBROADCASTSDZ(0, fr(tmp))
	for l := 1; l < n; l++ {
		a.VBROADCASTSDZ(1, fr(tmp+int32(8*l)))
		g.maxStepF64(r.v.Op, 0, 1)
	}
}

// scalarF64 computes an f64 scalar into its slot: a parameter (its slot
// already), a load (checked, or other where the mask is false), or an op
// computed by the vector code on broadcast operands (scalarF64Op); it is
// read as a splat (broadcastSlot: the slot itself, 8 bytes).
func (g *gen) scalarF64(v *tile.Value) error {
	a := &g.a
	switch v.Op {
	case tile.OpParam: // its slot is the parameter's (task.bind)
		return g.broadcastSlot(v)
	case tile.OpBlockArg, tile.OpForResult: // a loop's carried slot (loopCode)
		g.slotOf(v)
		return g.broadcastSlot(v)
	}
	if v.Op == tile.OpCast {
		return g.scalarF64Cast(v)
	}
	if v.Op != tile.OpLoad {
		return g.scalarF64Op(v)
	}
	off, done := g.scalarLoadAddr(v, 3)
	a.MOVQload(rT0, amd64.Ptr(rT0, 0))
	a.JMP(done)
	a.Bind(off)
	bits := uint64(0)
	if len(v.Args) == 3 {
		bits = math.Float64bits(v.Args[2].AuxF)
	}
	a.MOVQimm(rT0, int64(bits))
	a.Bind(done)
	a.MOVQstore(fr(g.slotOf(v)), rT0)
	return g.broadcastSlot(v)
}

// scalarF64Cast computes f64 scalar v, a cast of an f32 scalar (exact)
// or of an integer one (i32 and i1 exact; i64 rounded to nearest, as Go's
// float64(int64)), into its slot.
func (g *gen) scalarF64Cast(v *tile.Value) error {
	a := &g.a
	x := v.Args[0]
	a.VXORPS(0, 0, amd64.VReg(0))
	if x.Type.DType == tile.F32 {
		a.VCVTSS2SD(0, 0, fr(g.floatSlot(x)))
	} else {
		g.scalarIntReg(rT0, x) // i32 slots hold the value sign-extended, i1's 0 or 1
		a.VCVTSI2SDQ(0, 0, rT0)
	}
	a.VMOVSDstore(fr(g.slotOf(v)), 0)
	return g.broadcastSlot(v)
}

// scalarF64Op computes f64 op v on its operands broadcast to every lane
// (Z0–Z2; masks in Y0–Y2), lane 0 of the result stored in its slot.
func (g *gen) scalarF64Op(v *tile.Value) error {
	a := &g.a
	srcs := make([]opnd, len(v.Args))
	for i, x := range v.Args {
		r := amd64.VReg(i)
		switch {
		case g.p.in(x).kind == kScalarBool:
			g.scalarIntReg(rT0, x) // all ones where true
			a.NEGQ(rT0)
			a.VMOVDfromGPR(r, rT0)
			a.VPBROADCASTD(r, r)
		case x.Type.DType != tile.F64:
			return unsupported(v, "scalar f64 %v of %v", v.Op, x.Type.DType)
		case x.Op == tile.OpConst:
			g.splatF64(r, g.constF64(x.AuxF))
		default:
			g.splatF64(r, fr(g.slotOf(x)))
		}
		srcs[i] = opnd{reg: r}
	}
	tmps := []amd64.VReg{4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	if !g.avx512 {
		// Y8–Y15: the pairs' high halves (f64y.go); a unary op's math
		// takes the unused operand registers too (mathTempsPairs)
		tmps = tmps[:4]
		if len(v.Args) == 1 {
			tmps = []amd64.VReg{1, 2, 4, 5, 6, 7}
		}
	}
	if err := g.f64Op(v, 3, srcs, tmps); err != nil {
		return err
	}
	a.VMOVSDstore(fr(g.slotOf(v)), 3)
	return g.broadcastSlot(v)
}

// gatherF64 loads the vector's f64 lanes of a pattern with a constant
// stride of more than one element (the row's active lanes, the others
// zero), in registers: each pair of lanes into an xmm register (VMOVSD,
// VMOVHPD), pairs into ymm halves (VINSERTF128), with AVX-512 the halves
// into dst's zmm (VINSERTF64X4), without it into dst's ymm pair; t1 and
// t2 are scratch (their low registers). Unmasked: the row's range was
// checked at its start. Through a scratch vector in the frame before
// (2026-12-05): eight scalar stores read back by one vector load, which
// the store buffer cannot forward.
func (pg *phaseGen) gatherF64(pat *pattern, dst, t1, t2 amd64.VReg) {
	pg.gatherF64Lanes(pat, dst, t1, t2, func(l int) bool { return l < pg.width }, nil)
}

// gatherF64Masked is gatherF64 under a mask (eight i32 lanes): a lane
// whose mask is off is +0 and its element is not read. The mask's bits go
// to RDX before any register is written (dst or a scratch may hold it),
// and each lane's load is skipped where its bit is clear.
func (pg *phaseGen) gatherF64Masked(pat *pattern, dst, t1, t2, mask amd64.VReg) {
	a := &pg.g.a
	pg.gatherF64Lanes(pat, dst, t1, t2, func(l int) bool { return l < pg.width }, func() { a.VMOVMSKPS(rT1, mask) })
}

// blendOtherF64 sets dst to loaded's f64 lanes where mask (eight i32
// lanes) is on and other's where it is off; t: a temporary (AVX2: each
// half's mask), written after the mask is read. dst may be the mask's or
// other's register (the high half first on AVX2, as loadF64Y).
func (pg *phaseGen) blendOtherF64(dst, other, loaded, t, mask amd64.VReg) {
	g := pg.g
	a := &g.a
	if g.avx512 {
		a.VBLENDMPDZ(z(dst), g.kMask(mask), z(other), z(loaded))
		return
	}
	for h := 1; h >= 0; h-- {
		g.halfMask(t, mask, h)
		a.VBLENDVPD(half(dst, h), half(other, h), half(loaded, h), t)
	}
}

// gatherF64Lanes is gatherF64's and gatherF64Masked's code: lane l is
// loaded where has(l) (and, with takeMask, its mask bit is set: the bits
// in RDX, shifted out in lane order).
func (pg *phaseGen) gatherF64Lanes(pat *pattern, dst, t1, t2 amd64.VReg, has func(int) bool, takeMask func()) {
	g := pg.g
	a := &g.a
	pg.gatherBase(pat, 8)
	if takeMask != nil {
		takeMask()
	}
	s := 8 * int32(pat.elast)
	// pair: lanes l and l+1 into xmm x, the lanes above zero
	pair := func(x amd64.VReg, l int) {
		a.VXORPS(x, x, x)
		for h := 0; h < 2; h++ {
			if !has(l + h) {
				continue
			}
			var skip amd64.Label
			if takeMask != nil { // lanes in order: each one's bit shifted out into the carry
				skip = a.NewLabel()
				a.SHRQ(rT1, 1)
				a.Jcc(amd64.CondAE, skip) // carry clear: lane l+h is off
			}
			if h == 0 {
				a.VMOVSDload(x, amd64.Ptr(rT0, int32(l)*s)) // lane 1 zeroed: loaded next
			} else {
				a.VMOVHPDload(x, x, amd64.Ptr(rT0, int32(l+1)*s))
			}
			if takeMask != nil {
				a.Bind(skip)
			}
		}
	}
	// quad: lanes l..l+3 into ymm y
	quad := func(y, tmp amd64.VReg, l int) {
		pair(y, l)
		if has(l + 2) {
			pair(tmp, l+2)
			a.VINSERTF128(y, y, tmp, 1)
		}
	}
	if !g.avx512 {
		quad(dst, t1, 0)
		if has(4) {
			quad(hi(dst), t1, 4)
		} else {
			a.VXORPS(hi(dst), hi(dst), hi(dst))
		}
		return
	}
	quad(dst, t1, 0) // VEX writes zero dst's bits above 255
	if has(4) {
		quad(t1, t2, 4)
		a.VINSERTF64X4Z(z(dst), z(dst), z(t1), 1)
	}
}

// scatterF64 stores the vector's f64 lanes to a pattern with a constant
// stride of more than one element: the vector to a scratch block, then
// each lane's element through t's low lane; under a mask (eight i32
// lanes, its bits taken before t is written: t may be the mask's
// register) only the active lanes', the others' addresses never touched.
func (pg *phaseGen) scatterF64(pat *pattern, val, t, mask amd64.VReg, masked bool) {
	g := pg.g
	a := &g.a
	pg.gatherBase(pat, 8)
	if masked {
		a.VMOVMSKPS(rT1, mask)
	}
	tmp := g.alloc(64, 64)
	if g.avx512 {
		a.VMOVUPDstoreZ(fr(tmp), 0, z(val))
	} else {
		g.storeF64Y(fr(tmp), val, 0, false, 0)
	}
	s := 8 * int32(pat.elast)
	for l := 0; l < pg.width; l++ {
		var skip amd64.Label
		if masked {
			skip = a.NewLabel()
			a.SHRQ(rT1, 1)
			a.Jcc(amd64.CondAE, skip) // carry clear: lane l is off
		}
		a.VMOVSDload(t, fr(tmp+int32(8*l)))
		a.VMOVSDstore(amd64.Ptr(rT0, int32(l)*s), t)
		if masked {
			a.Bind(skip)
		}
	}
}

// splatF64 broadcasts the float64 at m to every lane of f64 vector r (a
// zmm register, or a ymm pair without AVX-512: f64y.go).
func (g *gen) splatF64(r amd64.VReg, m amd64.Mem) {
	if !g.avx512 {
		g.a.VBROADCASTSD(r, m)
		g.a.VBROADCASTSD(hi(r), m)
		return
	}
	g.a.VBROADCASTSDZ(z(r), m)
}

// scalarF64Compare: an f64 comparison of scalars, 0 or 1 in its slot
// (f64Compare on the operands broadcast, lane 0's result).
func (g *gen) scalarF64Compare(v *tile.Value) error {
	a := &g.a
	for i, x := range v.Args {
		if x.Op == tile.OpConst {
			g.splatF64(amd64.VReg(i), g.constF64(x.AuxF))
		} else {
			g.splatF64(amd64.VReg(i), fr(g.slotOf(x)))
		}
	}
	if err := g.f64Compare(v, 2, []opnd{{reg: 0}, {reg: 1}}, []amd64.VReg{3, 4}); err != nil {
		return err
	}
	a.VMOVMSKPS(rT0, 2)
	a.ANDQimm(rT0, 1)
	a.MOVQstore(fr(g.slotOf(v)), rT0)
	return nil
}
