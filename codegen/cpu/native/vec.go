package native

import "github.com/tilefuse/tilefuse/codegen/cpu/amd64"

// The vector instructions of a phase's body, in ymm registers (VEX, eight
// lanes) or, while gen.zmm is set (the unmasked loop of a phase that
// zmmOK accepts, fast.go), their 512-bit twins on the registers of the
// same numbers (Y3 → Z3), sixteen lanes: every operation per lane the
// same, so a lane's result does not depend on the register width. In zmm:
//   - a memory operand of an arithmetic instruction is a uniform (a pool
//     constant or a frame splat, the same value in every lane): read as
//     its first element broadcast ({1to16}); full vectors in memory (rows,
//     spill slots) are reached by VMOVUPS and VMOVUPSstore only, uniforms
//     loaded into a register by vbcst;
//   - a vector mask stays data (all-ones lanes), as in ymm: a comparison
//     writes an opmask (K1–K7 in turn) and expands it to a vector
//     (vpbroadcastd of all ones under it, zeroing), a blend tests the
//     mask's sign bits into an opmask (VBLENDVPS's rule) and runs
//     vblendmps; where the mask was made by a comparison of the same node
//     (kOf), its opmask is used as it is. A comparison whose result only
//     selects lanes (cmpSel, blendSel, zeroSel: the math's range and NaN
//     tests) makes no vector at all.
//
// vasm embeds the assembler: the methods below shadow its VEX forms, the
// rest (integer registers, labels) pass through.
type vasm struct {
	*amd64.Asm
	g *gen
}

// va is the body's vector assembler.
func (g *gen) va() vasm { return vasm{&g.a, g} }

func zr(r amd64.VReg) amd64.ZReg { return amd64.ZReg(r) }

// each emits f once, or in pairs once for each bank (zc 0, then 1).
func (v vasm) each(f func()) {
	g := v.g
	if !g.zpair || g.zfixed {
		f()
		return
	}
	for c := range 2 {
		g.zc = c
		f()
	}
	g.zc = 0
}

// z is vector register r in the bank being emitted (Z16–Z31 for the
// second of a pair).
func (v vasm) z(r amd64.VReg) amd64.ZReg { return amd64.ZReg(int(r) + 16*v.g.zc) }

// zk is opmask k in the bank being emitted (K4–K6 for the second).
func (v vasm) zk(k amd64.KReg) amd64.KReg {
	if k == 0 {
		return 0
	}
	return k + amd64.KReg(3*v.g.zc)
}

// zm is a whole vector in memory (a row's, a frame block's, a spill
// slot's) in the bank being emitted: the next 64 bytes for the second.
func (v vasm) zm(m amd64.Mem) amd64.Mem { m.Disp += int32(64 * v.g.zc); return m }

// zop is operand y in the bank being emitted: a register, or a uniform
// in memory broadcast (the same for both).
func (v vasm) zop(y amd64.Operand) amd64.Operand {
	switch x := y.(type) {
	case amd64.VReg:
		return v.z(x)
	case amd64.Mem:
		return x.Bcst()
	}
	return y
}

// maskK is the opmask of the comparison that last wrote vector register
// r (zmm, within one node's code: gen.kOf is cleared at each node), or 0.
func (v vasm) maskK(r amd64.VReg) amd64.KReg { return v.g.kOf[r] }

// wrote records that d was written by something other than a comparison.
func (v vasm) wrote(d amd64.VReg) {
	if v.g.zmm {
		v.g.kOf[d] = 0
	}
}

// newK is an opmask for a comparison's result (K1–K7 in turn; a register
// whose opmask is taken again forgets it).
func (v vasm) newK() amd64.KReg {
	g := v.g
	if g.zpair {
		g.nextK = g.nextK%3 + 1 // K1–K3, their pairs K4–K6
	} else {
		g.nextK = g.nextK%7 + 1
	}
	k := amd64.KReg(g.nextK)
	for r := range g.kOf {
		if g.kOf[r] == k {
			g.kOf[r] = 0
		}
	}
	return k
}

// kFrom is the opmask of vector mask m's sign bits (K1–K7).
func (v vasm) kFrom(m amd64.VReg) amd64.KReg {
	if k := v.maskK(m); k != 0 {
		return k
	}
	g := v.g
	k := v.newK()
	c := g.constVec(0x80000000).Bcst()
	v.each(func() { v.Asm.VPTESTMDZ(v.zk(k), v.z(m), c) })
	g.kOf[m] = k
	return k
}

// expand writes the vector mask of opmask k into d (all ones where set).
func (v vasm) expand(d amd64.VReg, k amd64.KReg) {
	c := v.g.constVec(0xffffffff)
	v.each(func() { v.Asm.VPBROADCASTDZ(v.z(d), v.zk(k), true, c) })
}

type binZ func(a *amd64.Asm, d, x amd64.ZReg, y amd64.Operand)
type binY func(a *amd64.Asm, d, x amd64.VReg, y amd64.Operand)

func (v vasm) bin(fy binY, fz binZ, d, x amd64.VReg, y amd64.Operand) {
	if v.g.zmm {
		v.each(func() { fz(v.Asm, v.z(d), v.z(x), v.zop(y)) })
		v.wrote(d)
		return
	}
	fy(v.Asm, d, x, y)
}

func (v vasm) VADDPS(d, x amd64.VReg, y amd64.Operand) {
	v.bin((*amd64.Asm).VADDPS, (*amd64.Asm).VADDPSZ, d, x, y)
}
func (v vasm) VSUBPS(d, x amd64.VReg, y amd64.Operand) {
	v.bin((*amd64.Asm).VSUBPS, (*amd64.Asm).VSUBPSZ, d, x, y)
}
func (v vasm) VMULPS(d, x amd64.VReg, y amd64.Operand) {
	v.bin((*amd64.Asm).VMULPS, (*amd64.Asm).VMULPSZ, d, x, y)
}
func (v vasm) VDIVPS(d, x amd64.VReg, y amd64.Operand) {
	v.bin((*amd64.Asm).VDIVPS, (*amd64.Asm).VDIVPSZ, d, x, y)
}
func (v vasm) VMINPS(d, x amd64.VReg, y amd64.Operand) {
	v.bin((*amd64.Asm).VMINPS, (*amd64.Asm).VMINPSZ, d, x, y)
}
func (v vasm) VMAXPS(d, x amd64.VReg, y amd64.Operand) {
	v.bin((*amd64.Asm).VMAXPS, (*amd64.Asm).VMAXPSZ, d, x, y)
}
func (v vasm) VANDPS(d, x amd64.VReg, y amd64.Operand) {
	v.bin((*amd64.Asm).VANDPS, (*amd64.Asm).VPANDDZ, d, x, y)
}
func (v vasm) VANDNPS(d, x amd64.VReg, y amd64.Operand) {
	v.bin((*amd64.Asm).VANDNPS, (*amd64.Asm).VPANDNDZ, d, x, y)
}
func (v vasm) VORPS(d, x amd64.VReg, y amd64.Operand) {
	v.bin((*amd64.Asm).VORPS, (*amd64.Asm).VPORDZ, d, x, y)
}
func (v vasm) VXORPS(d, x amd64.VReg, y amd64.Operand) {
	v.bin((*amd64.Asm).VXORPS, (*amd64.Asm).VPXORDZ, d, x, y)
}
func (v vasm) VPAND(d, x amd64.VReg, y amd64.Operand) {
	v.bin((*amd64.Asm).VPAND, (*amd64.Asm).VPANDDZ, d, x, y)
}
func (v vasm) VPOR(d, x amd64.VReg, y amd64.Operand) {
	v.bin((*amd64.Asm).VPOR, (*amd64.Asm).VPORDZ, d, x, y)
}
func (v vasm) VPXOR(d, x amd64.VReg, y amd64.Operand) {
	v.bin((*amd64.Asm).VPXOR, (*amd64.Asm).VPXORDZ, d, x, y)
}
func (v vasm) VPADDD(d, x amd64.VReg, y amd64.Operand) {
	v.bin((*amd64.Asm).VPADDD, (*amd64.Asm).VPADDDZ, d, x, y)
}
func (v vasm) VPSUBD(d, x amd64.VReg, y amd64.Operand) {
	v.bin((*amd64.Asm).VPSUBD, (*amd64.Asm).VPSUBDZ, d, x, y)
}
func (v vasm) VFMADD213PS(d, x amd64.VReg, y amd64.Operand) {
	v.bin((*amd64.Asm).VFMADD213PS, (*amd64.Asm).VFMADD213PSZ, d, x, y)
}
func (v vasm) VFMADD231PS(d, x amd64.VReg, y amd64.Operand) {
	v.bin((*amd64.Asm).VFMADD231PS, (*amd64.Asm).VFMADD231PSZ, d, x, y)
}
func (v vasm) VFNMADD231PS(d, x amd64.VReg, y amd64.Operand) {
	v.bin((*amd64.Asm).VFNMADD231PS, (*amd64.Asm).VFNMADD231PSZ, d, x, y)
}

// vscalef d = x·2^⌊y⌋ (VSCALEFPS), in zmm code only: it has no VEX
// form (expCore32 calls it where gen.zmm is set).
func (v vasm) vscalef(d, x, y amd64.VReg) {
	v.each(func() { v.Asm.VSCALEFPSZ(v.z(d), v.z(x), v.z(y)) })
	v.wrote(d)
}

// vrange d = VRANGEPS(x, y) as imm selects, in zmm code only (AVX512DQ;
// no VEX form): y a uniform, broadcast.
func (v vasm) vrange(d, x amd64.VReg, y amd64.Mem, imm uint8) {
	v.each(func() { v.Asm.VRANGEPSZ(v.z(d), v.z(x), v.zop(y), imm) })
	v.wrote(d)
}

func (v vasm) VSQRTPS(d amd64.VReg, s amd64.Operand) {
	if v.g.zmm {
		v.each(func() { v.Asm.VSQRTPSZ(v.z(d), v.zop(s)) })
		v.wrote(d)
		return
	}
	v.Asm.VSQRTPS(d, s)
}

func (v vasm) VROUNDPS(d amd64.VReg, s amd64.Operand, mode uint8) {
	if v.g.zmm {
		v.each(func() { v.Asm.VRNDSCALEPSZ(v.z(d), v.zop(s), mode) })
		v.wrote(d)
		return
	}
	v.Asm.VROUNDPS(d, s, mode)
}

func (v vasm) VCVTDQ2PS(d amd64.VReg, s amd64.Operand) {
	if v.g.zmm {
		v.each(func() { v.Asm.VCVTDQ2PSZ(v.z(d), v.zop(s)) })
		v.wrote(d)
		return
	}
	v.Asm.VCVTDQ2PS(d, s)
}

func (v vasm) VCVTTPS2DQ(d amd64.VReg, s amd64.Operand) {
	if v.g.zmm {
		v.each(func() { v.Asm.VCVTTPS2DQZ(v.z(d), v.zop(s)) })
		v.wrote(d)
		return
	}
	v.Asm.VCVTTPS2DQ(d, s)
}

func (v vasm) shift(fy func(*amd64.Asm, amd64.VReg, amd64.VReg, uint8), fz func(*amd64.Asm, amd64.ZReg, amd64.ZReg, uint8), d, s amd64.VReg, n uint8) {
	if v.g.zmm {
		v.each(func() { fz(v.Asm, v.z(d), v.z(s), n) })
		v.wrote(d)
		return
	}
	fy(v.Asm, d, s, n)
}
func (v vasm) VPSRAD(d, s amd64.VReg, n uint8) {
	v.shift((*amd64.Asm).VPSRAD, (*amd64.Asm).VPSRADZ, d, s, n)
}
func (v vasm) VPSRLD(d, s amd64.VReg, n uint8) {
	v.shift((*amd64.Asm).VPSRLD, (*amd64.Asm).VPSRLDZ, d, s, n)
}
func (v vasm) VPSLLD(d, s amd64.VReg, n uint8) {
	v.shift((*amd64.Asm).VPSLLD, (*amd64.Asm).VPSLLDZ, d, s, n)
}

// VCMPPS d = x pred y, a vector mask (zmm: through an opmask kept for the
// blends of the same node).
func (v vasm) VCMPPS(d, x amd64.VReg, y amd64.Operand, pred uint8) {
	if v.g.zmm {
		k := v.newK()
		v.each(func() { v.Asm.VCMPPSZ(v.zk(k), v.z(x), v.zop(y), pred) })
		v.expand(d, k)
		v.g.kOf[d] = k
		return
	}
	v.Asm.VCMPPS(d, x, y, pred)
}

func (v vasm) VPCMPGTD(d, x amd64.VReg, y amd64.Operand) {
	if v.g.zmm {
		k := v.newK()
		v.each(func() { v.Asm.VPCMPGTDZ(v.zk(k), v.z(x), v.zop(y)) })
		v.expand(d, k)
		v.g.kOf[d] = k
		return
	}
	v.Asm.VPCMPGTD(d, x, y)
}

func (v vasm) VPCMPEQD(d, x amd64.VReg, y amd64.Operand) {
	if v.g.zmm {
		k := v.newK()
		v.each(func() { v.Asm.VPCMPEQDZ(v.zk(k), v.z(x), v.zop(y)) })
		v.expand(d, k)
		v.g.kOf[d] = k
		return
	}
	v.Asm.VPCMPEQD(d, x, y)
}

// VBLENDVPS d = mask's sign bit ? y : x, lane by lane.
func (v vasm) VBLENDVPS(d, x amd64.VReg, y amd64.Operand, mask amd64.VReg) {
	if v.g.zmm {
		k := v.kFrom(mask)
		v.each(func() { v.Asm.VBLENDMPSZ(v.z(d), v.zk(k), v.z(x), v.zop(y)) })
		v.wrote(d)
		return
	}
	v.Asm.VBLENDVPS(d, x, y, mask)
}

func (v vasm) VMOVAPS(d, s amd64.VReg) {
	if v.g.zmm {
		v.each(func() { v.Asm.VMOVAPSZ(v.z(d), v.z(s)) })
		v.g.kOf[d] = v.g.kOf[s]
		return
	}
	v.Asm.VMOVAPS(d, s)
}

// VMOVUPS loads a whole vector (a row's, a spill slot's).
func (v vasm) VMOVUPS(d amd64.VReg, m amd64.Mem) {
	if v.g.zmm {
		v.each(func() { v.Asm.VMOVUPSZ(v.z(d), v.zm(m)) })
		v.wrote(d)
		return
	}
	v.Asm.VMOVUPS(d, m)
}

// VMOVUPSstore stores a whole vector.
func (v vasm) VMOVUPSstore(m amd64.Mem, s amd64.VReg) {
	if v.g.zmm {
		v.each(func() { v.Asm.VMOVUPSstoreZ(v.zm(m), v.z(s)) })
		return
	}
	v.Asm.VMOVUPSstore(m, s)
}

// vbcst loads a uniform (every lane the same value: a pool constant, a
// frame splat).
func (v vasm) vbcst(d amd64.VReg, m amd64.Mem) {
	if v.g.zmm {
		v.each(func() { v.Asm.VBROADCASTSSZ(v.z(d), m) })
		v.wrote(d)
		return
	}
	v.Asm.VMOVUPS(d, m)
}

// VBROADCASTSS loads one element into every lane.
func (v vasm) VBROADCASTSS(d amd64.VReg, m amd64.Mem) {
	if v.g.zmm {
		v.each(func() { v.Asm.VBROADCASTSSZ(v.z(d), m) })
		v.wrote(d)
		return
	}
	v.Asm.VBROADCASTSS(d, m)
}

// VPBROADCASTD d = s's low int32 in every lane.
func (v vasm) VPBROADCASTD(d, s amd64.VReg) {
	if v.g.zmm {
		v.each(func() { v.Asm.VPBROADCASTDZ(v.z(d), 0, false, v.z(s)) })
		v.wrote(d)
		return
	}
	v.Asm.VPBROADCASTD(d, s)
}

// VMOVDfromGPR d = r's low 32 bits in lane 0, the other lanes zero (the
// VEX form clears the zmm register's upper bits too).
func (v vasm) VMOVDfromGPR(d amd64.VReg, r amd64.Reg) {
	if v.g.zpair && v.g.zmmBad == "" { // VEX: no Z16–Z31 (pairOK declines i32 lanes)
		v.g.zmmBad = "VMOVD in pairs"
	}
	v.Asm.VMOVDfromGPR(d, r)
	v.wrote(d)
}

// clearK forgets every comparison's opmask (a node's code starts).
func (g *gen) clearK() { g.kOf = [16]amd64.KReg{} }

// The VEX instructions without a zmm twin here (rsqrt's float64 lanes,
// gathers, masked accesses, lane extraction): emitted only in ymm loops
// (zmmOK declines the nodes that need them); one reached in a zmm loop is
// recorded, and the phase fails to compile (innerZmm) rather than run
// eight lanes of sixteen.

func (v vasm) ymmOnly(name string) {
	if v.g.zmm && v.g.zmmBad == "" {
		v.g.zmmBad = name
	}
}

func (v vasm) VCVTPD2PS(d, s amd64.VReg) { v.ymmOnly("VCVTPD2PS"); v.Asm.VCVTPD2PS(d, s) }
func (v vasm) VCVTPS2PD(d amd64.VReg, s amd64.Operand) {
	v.ymmOnly("VCVTPS2PD")
	v.Asm.VCVTPS2PD(d, s)
}
func (v vasm) VDIVPD(d, x amd64.VReg, y amd64.Operand) { v.ymmOnly("VDIVPD"); v.Asm.VDIVPD(d, x, y) }
func (v vasm) VEXTRACTF128(d, s amd64.VReg, imm uint8) {
	v.ymmOnly("VEXTRACTF128")
	v.Asm.VEXTRACTF128(d, s, imm)
}
func (v vasm) VINSERTF128(d, x amd64.VReg, s amd64.Operand, imm uint8) {
	v.ymmOnly("VINSERTF128")
	v.Asm.VINSERTF128(d, x, s, imm)
}
func (v vasm) VINSERTPS(d, x amd64.VReg, y amd64.Operand, imm uint8) {
	v.ymmOnly("VINSERTPS")
	v.Asm.VINSERTPS(d, x, y, imm)
}
func (v vasm) VEXTRACTPS(m amd64.Mem, s amd64.VReg, imm uint8) {
	v.ymmOnly("VEXTRACTPS")
	v.Asm.VEXTRACTPS(m, s, imm)
}
func (v vasm) VMASKMOVPSload(d, mask amd64.VReg, m amd64.Mem) {
	v.ymmOnly("VMASKMOVPS")
	v.Asm.VMASKMOVPSload(d, mask, m)
}
func (v vasm) VMASKMOVPSstore(m amd64.Mem, mask, s amd64.VReg) {
	v.ymmOnly("VMASKMOVPS")
	v.Asm.VMASKMOVPSstore(m, mask, s)
}
func (v vasm) VMOVMSKPS(r amd64.Reg, s amd64.VReg) { v.ymmOnly("VMOVMSKPS"); v.Asm.VMOVMSKPS(r, s) }
func (v vasm) VMOVSSload(d amd64.VReg, m amd64.Mem) {
	v.ymmOnly("VMOVSS")
	v.Asm.VMOVSSload(d, m)
}
func (v vasm) VMOVSSstore(m amd64.Mem, s amd64.VReg) {
	v.ymmOnly("VMOVSS")
	v.Asm.VMOVSSstore(m, s)
}
func (v vasm) VMOVUPD(d amd64.VReg, m amd64.Mem) { v.ymmOnly("VMOVUPD"); v.Asm.VMOVUPD(d, m) }
func (v vasm) VSQRTPD(d amd64.VReg, s amd64.Operand) {
	v.ymmOnly("VSQRTPD")
	v.Asm.VSQRTPD(d, s)
}

// selMask is a comparison's result that only selects lanes: the vector
// mask in r (ymm), or an opmask (zmm: no vector is made of it).
type selMask struct {
	r amd64.VReg
	k amd64.KReg
}

// cmpSel compares x pred y into a selMask (ymm: into r).
func (v vasm) cmpSel(r, x amd64.VReg, y amd64.Operand, pred uint8) selMask {
	if v.g.zmm {
		k := v.newK()
		v.each(func() { v.Asm.VCMPPSZ(v.zk(k), v.z(x), v.zop(y), pred) })
		return selMask{r: r, k: k}
	}
	v.Asm.VCMPPS(r, x, y, pred)
	return selMask{r: r}
}

// blendSel d = m ? y : x, lane by lane.
func (v vasm) blendSel(d, x amd64.VReg, y amd64.Operand, m selMask) {
	if v.g.zmm {
		v.each(func() { v.Asm.VBLENDMPSZ(v.z(d), v.zk(m.k), v.z(x), v.zop(y)) })
		v.wrote(d)
		return
	}
	v.Asm.VBLENDVPS(d, x, y, m.r)
}

// zeroSel d = m ? +0 : x, lane by lane (VANDNPS of the mask).
func (v vasm) zeroSel(d amd64.VReg, m selMask, x amd64.VReg) {
	if v.g.zmm {
		c := v.g.constVec(0).Bcst()
		v.each(func() { v.Asm.VBLENDMPSZ(v.z(d), v.zk(m.k), v.z(x), c) })
		v.wrote(d)
		return
	}
	v.Asm.VANDNPS(d, m.r, x)
}

// bailIf jumps to the kernel's bail-out where any lane of m is set (the
// launch then runs on the executor). RAX is clobbered.
func (v vasm) bailIf(m selMask) {
	if v.g.zmm {
		v.each(func() {
			v.Asm.KORTESTW(v.zk(m.k), v.zk(m.k))
			v.Asm.Jcc(amd64.CondNE, v.g.bail)
		})
		return
	}
	v.Asm.VMOVMSKPS(rT0, m.r)
	v.Asm.TESTL(rT0, rT0)
	v.Asm.Jcc(amd64.CondNE, v.g.bail)
}
