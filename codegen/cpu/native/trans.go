package native

import (
	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
	"github.com/tilefuse/tilefuse/tile"
)

// Transposed loads: a two-dimensional f32 or f64 block loaded one element apart
// along its first dimension and not along its last (a transpose's read of
// the layout it undoes: NHWC → NCHW reads each row of W channels apart)
// would be loaded lane by lane (gather). Instead a phase of the level
// before packs it transposed — over the swapped shape, its loads
// contiguous — into a frame block, and at the start of its level that
// block is turned back in 8×8 tiles (transposeBlock; f64 in 4×4 tiles,
// transposeBlock64) into the value's own
// block, which its users read as rows. Not for products' operands (the
// product reads a transposed pack as it is: dot.go) or shape ops' (which
// may read it at swapped lanes: contiguous as it is), for blocks whose
// sides are not multiples of eight, or for buffers the kernel stores to.

// transLoad reports whether load v is taken as a transposed load.
func (p *plan) transLoad(v *tile.Value) bool {
	s := v.Type.Shape
	if d := v.Type.DType; d != tile.F32 && d != tile.F64 || s.Rank != 2 || s.Dims[0]%lane != 0 || s.Dims[1]%lane != 0 || p.readAsIs[v] {
		return false
	}
	if a := p.in(v.Args[0]).aff; a == nil || p.stored[a.root] {
		return false
	}
	return p.transposedLoad(v)
}

// transCode turns transposed load v's pack (its transpose, row-major, the
// phase before wrote) back into v's own block.
func (g *gen) transCode(v *tile.Value) {
	s := v.Type.Shape
	if v.Type.DType == tile.F64 {
		g.transposeBlock64(g.matBlock(v), g.packBlock(pack{v, true}), s.Dims[1], s.Dims[0])
	} else {
		g.transposeBlock(g.matBlock(v), g.packBlock(pack{v, true}), s.Dims[1], s.Dims[0])
	}
	g.p.transLoads++
}

// transposeBlock64 writes the transpose of the r×c f64 frame block at
// from (row-major) to the c×r block at to, in 4×4 tiles (r and c
// multiples of four): four rows loaded, their lanes interleaved in pairs
// (unpack) and their 128-bit halves exchanged, four rows stored. Also a
// product's transposed f64 b (dot.go; element by element before
// 2026-12-05: x·wᵀ with a tanh, f64, one core, 512×1024 by (1024×1024)ᵀ
// 21.6–22.2 → 13.1–13.6 ms).
func (g *gen) transposeBlock64(to, from int32, r, c int) {
	a := &g.a
	g.walkTiles(to, from, r, c, 4, 8, func(src, dst amd64.Reg) {
		for q := 0; q < 4; q++ {
			a.VMOVUPD(amd64.VReg(q), amd64.Ptr(src, int32(8*q*c)))
		}
		a.VUNPCKLPD(4, 0, amd64.VReg(1)) // x0 y0 | x2 y2
		a.VUNPCKHPD(5, 0, amd64.VReg(1)) // x1 y1 | x3 y3
		a.VUNPCKLPD(6, 2, amd64.VReg(3)) // z0 w0 | z2 w2
		a.VUNPCKHPD(7, 2, amd64.VReg(3)) // z1 w1 | z3 w3
		for q, p := range [4][3]uint8{{4, 6, 0x20}, {5, 7, 0x20}, {4, 6, 0x31}, {5, 7, 0x31}} {
			a.VPERM2F128(8, amd64.VReg(p[0]), amd64.VReg(p[1]), p[2])
			a.VMOVUPSstore(amd64.Ptr(dst, int32(8*q*r)), 8)
		}
	})
}
