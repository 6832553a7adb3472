package native

import "github.com/tilefuse/tilefuse/tile"

// Transposed loads: a two-dimensional f32 block loaded one element apart
// along its first dimension and not along its last (a transpose's read of
// the layout it undoes: NHWC → NCHW reads each row of W channels apart)
// would be loaded lane by lane (gather). Instead a phase of the level
// before packs it transposed — over the swapped shape, its loads
// contiguous — into a frame block, and at the start of its level that
// block is turned back in 8×8 tiles (transposeBlock) into the value's own
// block, which its users read as rows. Not for products' operands (the
// product reads a transposed pack as it is: dot.go) or shape ops' (which
// may read it at swapped lanes: contiguous as it is), for blocks whose
// sides are not multiples of eight, or for buffers the kernel stores to.

// transLoad reports whether load v is taken as a transposed load.
func (p *plan) transLoad(v *tile.Value) bool {
	s := v.Type.Shape
	if v.Type.DType != tile.F32 || s.Rank != 2 || s.Dims[0]%lane != 0 || s.Dims[1]%lane != 0 || p.readAsIs[v] {
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
	g.transposeBlock(g.matBlock(v), g.packBlock(pack{v, true}), s.Dims[1], s.Dims[0])
	g.p.transLoads++
}
