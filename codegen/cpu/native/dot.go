package native

import (
	"math"

	"github.com/tilefuse/tilefuse/codegen/cpu/amd64"
	"github.com/tilefuse/tilefuse/tile"
)

// Matrix products: dot(a [M,K], b [K,N], c [M,N]) = c + a·b runs at the
// start of the level its result is available at, over frame blocks: each
// operand is a block already (a loop-carried block, another product's
// result, a value kept for later phases) or is written to a block of its
// own by a phase of the level before (a pack: the operand's loads, masks
// and all, as rows of the block, so the micro-kernel reads L1-resident
// contiguous memory whatever the operand's layout in its buffer). The
// result goes to a block of its own, or, where the product is the yield
// of the loop-carried block it accumulates into and nothing reads that
// block after it (the K loop of a tiled matmul), into that block itself:
// no copy per iteration.
//
// The micro-kernel: the columns in strips of 16 (two vectors), the rows
// in blocks of six, so that 12 accumulators, the strip's two vectors of b
// and one broadcast of a fill 15 ymm registers; per k, two loads of b,
// six broadcasts of a and twelve FMAs. Full row blocks run in a loop, the
// last M mod 6 rows after it. Each element is c + Σ_k a[i,k]·b[k,j] in k
// order with one rounding per step (fused multiply-add): within the
// reference's bound for products (2K·2⁻²⁴·Σ|a·b|).

const (
	dotRows = 6 // rows of a micro-kernel block
	dotVecs = 2 // vectors of a column strip
)

// dotSupported says why a product is not supported, or nil.
func dotSupported(v *tile.Value) error {
	a, b := v.Args[0].Type, v.Args[1].Type
	switch {
	case v.Type.DType != tile.F32:
		return unsupported(v, "%v products", v.Type.DType)
	case v.Prec != tile.PrecIEEE:
		return unsupported(v, "products of precision %v", v.Prec)
	case a.Shape.Rank != 2 || b.Shape.Rank != 2:
		return unsupported(v, "products of rank-%d blocks", a.Shape.Rank)
	case b.Shape.Dims[1]%(dotVecs*lane) != 0: // (the IR's products are at least 16 wide, powers of two)
		return unsupported(v, "products %d wide (not a multiple of %d)", b.Shape.Dims[1], dotVecs*lane)
	}
	return nil
}

// zeroSplat reports whether x is +0 in every lane (a splat of the
// constant, through shape ops).
func zeroSplat(x *tile.Value) bool {
	for x.Op.IsShape() {
		x = x.Args[0]
	}
	return x.Op == tile.OpConst && x.Type.DType == tile.F32 && math.Float32bits(float32(x.AuxF)) == 0
}

// packBlock is the frame block a pack writes operand x to.
func (g *gen) packBlock(x *tile.Value) int32 {
	key := -(1 << 24) - x.ID // a key no value has
	if off, ok := g.block[key]; ok {
		return off
	}
	off := g.alloc(int32(4*x.Type.Shape.Numel())+32, 32) // 32 bytes over: a vector read past the end stays in the frame
	g.block[key] = off
	return off
}

// operandBlock is the frame block the product reads operand x from.
func (g *gen) operandBlock(x *tile.Value) int32 {
	switch xi := g.p.in(x); {
	case xi.kind == kCarry:
		return g.block[x.ID]
	case xi.kind == kDot:
		return g.dotBlock(x)
	case xi.kind == kFloat && !xi.formula:
		return g.matBlock(x)
	}
	return g.packBlock(x)
}

// dotBlock is where product d's result is: its accumulator's block where
// it accumulates in place, else a block of its own.
func (g *gen) dotBlock(d *tile.Value) int32 {
	if g.p.in(d).accIn {
		return g.block[d.Args[2].ID]
	}
	return g.matBlock(d)
}

// dotCode emits product d.
func (g *gen) dotCode(d *tile.Value) error {
	a := &g.a
	m, k, n := d.Args[0].Type.Shape.Dims[0], d.Args[0].Type.Shape.Dims[1], d.Args[1].Type.Shape.Dims[1]
	offA, offB := g.operandBlock(d.Args[0]), g.operandBlock(d.Args[1])
	zero := zeroSplat(d.Args[2])
	var offC int32
	if !zero {
		offC = g.operandBlock(d.Args[2])
	}
	offD := g.dotBlock(d)
	const (
		rA   = amd64.RBX // a's row block
		rC   = amd64.R8  // c's row block
		rD   = amd64.R9  // the result's row block
		rI   = amd64.R10 // row blocks left
		rAk  = amd64.R11 // a at column k
		rBk  = amd64.R12 // b at row k, the strip's columns
		rK   = amd64.RDX // k left
		bVec = 12        // b's vectors: 12, 13
		aBc  = 14        // a's broadcast
	)
	micro := func(mr, j0 int) {
		const nv = dotVecs
		acc := func(r, v int) amd64.VReg { return amd64.VReg(r*nv + v) }
		col := int32(4 * j0)
		for r := 0; r < mr; r++ {
			for v := 0; v < nv; v++ {
				if zero {
					a.VXORPS(acc(r, v), acc(r, v), acc(r, v))
				} else {
					a.VMOVUPS(acc(r, v), amd64.Ptr(rC, int32(4*r*n)+col+int32(32*v)))
				}
			}
		}
		a.MOVQ(rAk, rA)
		a.LEAQ(rBk, fr(offB+col))
		a.MOVLimm(rK, uint32(k))
		top := a.NewLabel()
		a.Bind(top)
		for v := 0; v < nv; v++ {
			a.VMOVUPS(amd64.VReg(bVec+v), amd64.Ptr(rBk, int32(32*v)))
		}
		for r := 0; r < mr; r++ {
			a.VBROADCASTSS(aBc, amd64.Ptr(rAk, int32(4*r*k)))
			for v := 0; v < nv; v++ {
				a.VFMADD231PS(acc(r, v), aBc, amd64.VReg(bVec+v))
			}
		}
		a.ADDQimm(rAk, 4)
		a.ADDQimm(rBk, int32(4*n))
		a.SUBQimm(rK, 1)
		a.Jcc(amd64.CondNE, top)
		for r := 0; r < mr; r++ {
			for v := 0; v < nv; v++ {
				a.VMOVUPSstore(amd64.Ptr(rD, int32(4*r*n)+col+int32(32*v)), acc(r, v))
			}
		}
	}
	for j0 := 0; j0 < n; j0 += dotVecs * lane {
		a.LEAQ(rA, fr(offA))
		if !zero {
			a.LEAQ(rC, fr(offC))
		}
		a.LEAQ(rD, fr(offD))
		if full := m / dotRows; full > 0 {
			a.MOVLimm(rI, uint32(full))
			rows := a.NewLabel()
			a.Bind(rows)
			micro(dotRows, j0)
			a.ADDQimm(rA, int32(4*dotRows*k))
			if !zero {
				a.ADDQimm(rC, int32(4*dotRows*n))
			}
			a.ADDQimm(rD, int32(4*dotRows*n))
			a.SUBQimm(rI, 1)
			a.Jcc(amd64.CondNE, rows)
		}
		if tail := m % dotRows; tail > 0 {
			micro(tail, j0)
		}
	}
	return a.Err()
}
