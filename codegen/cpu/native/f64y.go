package native

import (
	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
	"github.com/tilefuse/tilefuse/tile"
)

// f64 lanes without AVX-512 (AVX2 and FMA only, or
// TILEFUSE_NATIVE_AVX512=0): a vector of eight f64 lanes is a pair of ymm
// registers, lanes 0–3 in the register r the allocator gives the value
// and lanes 4–7 in r+8 (hi). A phase with f64 values (pairs) allocates
// from Y0–Y7 only (Y8–Y15 are the pairs' high halves; last-axis
// accumulators from Y7 down to Y5: an f64 sum takes one register, others
// two), so the loop nests,
// the allocator's decisions and the masks are the zmm form's: masks stay
// eight 32-bit lanes in one register, split into two halves of four
// 64-bit lanes (halfMask: vpmovsxdq) where an f64 move or blend needs
// them; an f64 comparison compares each half and packs the two halves'
// 64-bit results into eight 32-bit lanes. Masked loads and stores are
// vmaskmovpd on each half (masked-off lanes are neither read nor written:
// no fault). Every op is the zmm form's per lane, in the same order
// (IEEE operations, the reference's NaN rule for min and max, row sums in
// the executor's four partial sums: lanes 0–3, then 4–7), so results are
// bit for bit the zmm form's; exp, tanh, log and sigmoid: mathdy.go; the
// other math functions and pow: zasm.go (mathd.go's zmm code run on each
// half); products: dotY64.

// hi is the register of lanes 4–7 of the f64 value whose lanes 0–3 are in r.
func hi(r amd64.VReg) amd64.VReg { return r + 8 }

// half is register r's half h (0: r, 1: hi(r)).
func half(r amd64.VReg, h int) amd64.VReg { return r + amd64.VReg(8*h) }

// memHalf is the address of lanes 4–7 (h 1) of the eight f64 lanes at m.
func memHalf(m amd64.Mem, h int) amd64.Mem {
	m.Disp += int32(32 * h)
	return m
}

// halfMask sets t to half h of vector mask m (eight 32-bit lanes) as four
// 64-bit lanes (each sign-extended: all ones or zero).
func (g *gen) halfMask(t, m amd64.VReg, h int) {
	a := &g.a
	if h == 0 {
		a.VPMOVSXDQ(t, m)
		return
	}
	a.VEXTRACTF128(t, m, 1)
	a.VPMOVSXDQ(t, t)
}

// f64OpY is f64Op's AVX2 form: each half in turn (dst's half h is written
// after operands' half h is read; other halves are other registers).
func (g *gen) f64OpY(v *tile.Value, dst amd64.VReg, s []opnd, t []amd64.VReg) error {
	a := &g.a
	switch v.Op {
	case tile.OpExp, tile.OpTanh, tile.OpLog, tile.OpSigmoid: // mathdy.go
		return g.mathF64Y(v, dst, s[0].reg, t)
	case tile.OpLog1p, tile.OpExpm1, tile.OpErf, tile.OpSin, tile.OpCos, tile.OpExp2, tile.OpLog2, tile.OpPow, tile.OpRem: // zasm.go
		return g.mathF64Pairs(v, dst, s)
	case tile.OpSelect:
		// both halves' masks first: dst may be the mask's register
		a.VPMOVSXDQ(t[0], s[0].reg)
		g.halfMask(t[1], s[0].reg, 1)
		for h := 0; h < 2; h++ {
			a.VBLENDVPD(half(dst, h), half(s[2].reg, h), half(s[1].reg, h), t[h])
		}
		return nil
	case tile.OpCast:
		m := s[0].reg
		switch v.Args[0].Type.DType {
		case tile.F32, tile.I32: // high half first: dst may be the operand's register
			cvt := a.VCVTPS2PD
			if v.Args[0].Type.DType == tile.I32 {
				cvt = a.VCVTDQ2PD
			}
			a.VEXTRACTF128(t[0], m, 1)
			cvt(hi(dst), t[0])
			cvt(dst, m)
		case tile.I1:
			g.halfMask(t[0], m, 1)
			a.VANDPD(hi(dst), t[0], g.constF64(1))
			g.halfMask(t[0], m, 0)
			a.VANDPD(dst, t[0], g.constF64(1))
		default:
			return unsupported(v, "cast from %v to f64", v.Args[0].Type.DType)
		}
		return nil
	}
	for h := 0; h < 2; h++ {
		d := half(dst, h)
		x := half(s[0].reg, h)
		var y amd64.VReg
		if len(s) > 1 {
			y = half(s[1].reg, h)
		}
		switch v.Op {
		case tile.OpAdd:
			a.VADDPD(d, x, y)
		case tile.OpSub:
			a.VSUBPD(d, x, y)
		case tile.OpMul:
			a.VMULPD(d, x, y)
		case tile.OpDiv:
			a.VDIVPD(d, x, y)
		case tile.OpMin, tile.OpMax:
			// (x != x || x op y) ? x : y, as the reference
			if v.Op == tile.OpMin {
				a.VMINPD(t[1], x, y)
			} else {
				a.VMAXPD(t[1], x, y)
			}
			a.VCMPPD(t[2], x, x, amd64.CmpUNORD)
			a.VBLENDVPD(d, t[1], x, t[2])
		case tile.OpNeg:
			a.VPXOR(d, x, g.constI64(-1<<63))
		case tile.OpAbs:
			a.VPAND(d, x, g.constI64(1<<63-1))
		case tile.OpSqrt:
			a.VSQRTPD(d, x)
		case tile.OpRsqrt: // 1/√x, each rounded: the reference's
			a.VSQRTPD(t[1], x)
			a.VMOVUPD(t[0], g.constF64(1))
			a.VDIVPD(d, t[0], t[1])
		case tile.OpSign: // 1 where x > 0, -1 where x < 0, else x (±0, NaN)
			a.VCMPPD(t[0], x, g.constF64(0), amd64.CmpGT)
			a.VBLENDVPD(t[0], x, g.constF64(1), t[0])
			a.VCMPPD(t[1], x, g.constF64(0), amd64.CmpLT)
			a.VBLENDVPD(d, t[0], g.constF64(-1), t[1])
		case tile.OpFloor:
			a.VROUNDPD(d, x, 9)
		case tile.OpCeil:
			a.VROUNDPD(d, x, 10)
		default:
			return unsupported(v, "f64 %v", v.Op)
		}
	}
	return nil
}

// f64CompareY is f64Compare's AVX2 form: each half compared into t[0]
// and t[1] (four 64-bit lanes each), then packed into eight 32-bit lanes
// in order (the halves' 128-bit lanes exchanged, the low dword of each
// 64-bit lane picked).
func (g *gen) f64CompareY(v *tile.Value, dst amd64.VReg, s []opnd, t []amd64.VReg) error {
	a := &g.a
	x, y := s[0].reg, s[1].reg
	a.VCMPPD(t[0], x, y, f64Pred(v))
	a.VCMPPD(t[1], hi(x), hi(y), f64Pred(v))
	a.VPERM2F128(dst, t[0], t[1], 0x20)  // lanes 0, 1, 4, 5
	a.VPERM2F128(t[1], t[0], t[1], 0x31) // lanes 2, 3, 6, 7
	a.VSHUFPS(dst, dst, t[1], 0x88)
	return nil
}

// loadF64Y is loadF64's AVX2 form: the high half first (dst may be the
// mask's register), t[1] and t[2] the halves' masks and loaded lanes.
func (pg *phaseGen) loadF64Y(n *node, dst amd64.VReg, srcs []opnd, t []amd64.VReg, at amd64.Mem, mask amd64.VReg, masked bool) {
	g := pg.g
	a := &g.a
	other := masked && len(srcs) == 2 && !isZeroConst(n.v.Args[2])
	switch {
	case !masked && n.pat.elast == 0:
		a.VBROADCASTSD(dst, at)
		a.VBROADCASTSD(hi(dst), at)
		return
	case !masked:
		a.VMOVUPD(hi(dst), memHalf(at, 1))
		a.VMOVUPD(dst, at)
		return
	}
	if n.pat.elast == 0 {
		// one address: loaded if any lane is active, kept in the active lanes
		a.VBROADCASTSD(t[1], pg.guardedScalar(at, mask))
	}
	for h := 1; h >= 0; h-- {
		g.halfMask(t[2], mask, h)
		into := half(dst, h)
		if other {
			into = hi(t[2]) // a temporary's high half is free
		}
		if n.pat.elast == 0 {
			a.VANDPD(into, t[2], t[1])
		} else {
			a.VMASKMOVPDload(into, t[2], memHalf(at, h))
		}
		if other {
			// lanes whose mask is off take other
			a.VBLENDVPD(half(dst, h), half(srcs[1].reg, h), into, t[2])
		}
	}
}

// matReadF64Y is matReadF64's AVX2 form.
func (pg *phaseGen) matReadF64Y(n *node, dst amd64.VReg, t []amd64.VReg, at amd64.Mem) {
	g := pg.g
	a := &g.a
	switch {
	case n.pat.elast == 0:
		a.VBROADCASTSD(dst, at)
		a.VBROADCASTSD(hi(dst), at)
	case pg.width < lane:
		m := pg.laneMaskReg(t[0])
		for h := 0; h < 2; h++ {
			g.halfMask(t[1], m, h)
			a.VMASKMOVPDload(half(dst, h), t[1], memHalf(at, h))
		}
	default:
		a.VMOVUPD(dst, at)
		a.VMOVUPD(hi(dst), memHalf(at, 1))
	}
}

// storeF64Y stores f64 vector val at at, under mask where masked (t: a
// temporary other than mask).
func (g *gen) storeF64Y(at amd64.Mem, val, mask amd64.VReg, masked bool, t amd64.VReg) {
	a := &g.a
	for h := 0; h < 2; h++ {
		if masked {
			g.halfMask(t, mask, h)
			a.VMASKMOVPDstore(memHalf(at, h), t, half(val, h))
		} else {
			a.VMOVUPSstore(memHalf(at, h), half(val, h))
		}
	}
}

// maxStepF64Y: acc = (x > acc || x != x) ? x : acc per lane (min with <),
// on four lanes (t: a temporary).
func (g *gen) maxStepF64Y(op tile.Op, acc, x, t amd64.VReg) {
	a := &g.a
	if op == tile.OpReduceMin {
		a.VMINPD(acc, x, acc)
	} else {
		a.VMAXPD(acc, x, acc)
	}
	a.VCMPPD(t, x, x, amd64.CmpUNORD)
	a.VBLENDVPD(acc, acc, x, t)
}

// rowEndMaxF64Y finishes an f64 last-axis max or min of a row into X0:
// the lanes in order, as rowEndF64.
func (pg *phaseGen) rowEndMaxF64Y(r *redState) {
	g := pg.g
	a := &g.a
	tmp := g.alloc(128, 64)
	g.storeF64Y(fr(tmp), r.acc[0], 0, false, 0)
	n := pg.width
	if pg.last >= 2*lane {
		g.storeF64Y(fr(tmp+64), r.acc[1], 0, false, 0)
		n = 2 * lane
	}
	a.VBROADCASTSD(0, fr(tmp))
	for l := 1; l < n; l++ {
		a.VBROADCASTSD(1, fr(tmp+int32(8*l)))
		g.maxStepF64Y(r.v.Op, 0, 1, 2)
	}
}
