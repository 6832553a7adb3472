package tiletest

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"

	"github.com/tilefuse/tilefuse/tile"
)

// Random kernels. Random turns a fuzzer's bytes into a well-formed kernel
// over blocks of two-dimensional inputs: loads of blocks and of transposed
// blocks at shifted, masked positions (bounds as constants or as scalar
// parameters, cache hints), elementwise math, transposes, reductions along
// either axis broadcast back, selections on conditions every backend
// computes exactly (comparisons of loaded values, of indices, of a loop's
// counter), products at every precision, loops that carry an accumulator
// over blocks the counter moves along, casts, and masked stores straight
// and transposed, stores inside a loop, and atomic adds of every
// program's block into one output — the shapes the conformance table's hand-written kernels
// do not combine. Each value carries two bounds: its magnitude, and how far
// a correct backend's value may be from the exact one given the same inputs
// (rounding per operation, as each op's documented error: MathTol,
// MathTol64; sums and products as reassociated; errors carried through each
// op's Lipschitz constant on the domain the generator keeps it to). The
// case's Tol is twice the outputs' largest bound, doubled again, so two
// backends that disagree by more have computed something else: a wrong
// lane, a wrong mask, a wrong layout, a wrong op.
//
// The ops' domains are kept where those bounds hold: exp and its kin take
// arguments of magnitude at most 16, square roots and logarithms take
// |x| + 1, divisions divide by 1 + |y|, large values pass through tanh
// first, and ops that are not continuous (floor, ceil, sign, comparisons,
// casts to integers) take only values every backend computes bit for bit
// (loaded, moved, negated, selected, compared: pure).
//
// Each choice reads one byte of data (zero past its end), so every input,
// the empty one included, is a kernel, and a fuzzer's mutations change the
// kernel locally.

// Random is the case data describes: its kernel, inputs (seeded by its
// name), outputs poisoned, a grid, and a check that every output element in
// range was written with a finite value and none past it (the values are
// compared between backends by Compare, within Tol).
func Random(data []byte) Case { return random(data, false) }

// RandomMore is Random with the forms added after Random's thousand were
// fixed (so that those stay the kernels they were): reductions along any
// axis of a block seen as three-dimensional (its rows or its columns split
// in two, reshaped back after), integer reductions (a row's or a column's
// argmax or argmin, a count of the elements meeting a condition, the last
// index meeting one) cast back to the float type, loops nested in a
// loop's body, and (a quarter of them) 64-bit indices: program ids and
// aranges i64, as graphpass's kernels over tensors past
// graphpass.MaxElements. The same bytes make another kernel than Random's.
func RandomMore(data []byte) Case { return random(data, true) }

func random(data []byte, more bool) Case {
	h := fnv.New64a()
	h.Write(data)
	prefix := "random"
	if more {
		prefix = "random-more"
	}
	name := fmt.Sprintf("%s/%016x", prefix, h.Sum64())
	g := &rgen{data: data, more: more}
	k, err := g.build()
	tol := Tol{Abs: 4*g.maxErr + 1e-30}
	// work the reference interpreter and the PTX simulator pay: element
	// operations over the whole grid
	large := g.work*float64(g.g0*g.g1) > 6e6
	return Case{
		Name:  name,
		Tol:   tol,
		Large: large,
		Kernel: func() (*tile.Kernel, error) {
			if err != nil {
				return nil, fmt.Errorf("random kernel %s: %w", name, err)
			}
			return k, nil
		},
		Setup: func(rng *rand.Rand) (tile.Grid, []any, func() error) {
			return g.setup(rng)
		},
	}
}

// RandomData is n seeded inputs for Random of up to size bytes each, for
// tests that run a fixed set of random kernels (and fuzzers' seed corpora).
func RandomData(n, size int) [][]byte {
	rng := rand.New(rand.NewPCG(Seed, 0x52414e44))
	out := make([][]byte, n)
	for i := range out {
		d := make([]byte, 8+rng.IntN(size-7))
		for j := range d {
			d[j] = byte(rng.Uint32())
		}
		out[i] = d
	}
	return out
}

// rv is a value of the random kernel: a block of d1×d2 elements, at most
// mag in magnitude and at most err from its exact value on any correct
// backend; pure if every backend computes it bit for bit.
type rv struct {
	v        *tile.Value
	d1, d2   int
	mag, err float64
	pure     bool
}

// rout is an output: rows×cols elements, row-major or transposed; an
// atomic one starts at zero and every program adds its block into it.
type rout struct {
	rows, cols int
	atomic     bool
}

type rgen struct {
	data []byte
	pos  int
	more bool // RandomMore's forms too

	b          *tile.Builder
	dt         tile.DType
	u          float64 // dt's unit roundoff
	bm, bn     int
	m, n       int
	g0, g1     int
	meta       tile.Meta
	params     bool // bounds passed as scalar parameters
	alpha      bool // a scalar parameter (else a constant)
	ins        []*tile.Value
	mv, nv     *tile.Value
	pid0, pid1 *tile.Value
	pool       []rv
	outs       []rout
	maxErr     float64
	work       float64 // element operations a program does (about)
	// the loop being built: its counter, first value, step and trips; the
	// loops it is nested in
	iv                  *tile.Value
	ivLo, ivStep, trips int
	depth               int
}

// loopState is the loop being built, saved while a nested one is.
type loopState struct {
	iv                  *tile.Value
	ivLo, ivStep, trips int
}

func (g *rgen) saveLoop() loopState {
	return loopState{g.iv, g.ivLo, g.ivStep, g.trips}
}

func (g *rgen) restoreLoop(s loopState) {
	g.iv, g.ivLo, g.ivStep, g.trips = s.iv, s.ivLo, s.ivStep, s.trips
}

// next is the next choice in [0, n).
func (g *rgen) next(n int) int {
	if n <= 1 {
		return 0
	}
	if g.pos >= len(g.data) {
		return 0
	}
	x := int(g.data[g.pos]) % n
	g.pos++
	return x
}

// rdims are the block sides: powers of two and 96 (three times one, which
// the layouts split otherwise)
var rdims = []int{1, 2, 4, 8, 16, 32, 64, 96}

func (g *rgen) build() (*tile.Kernel, error) {
	g.dt, g.u = tile.F32, 0x1p-24
	if g.next(4) == 3 {
		g.dt, g.u = tile.F64, 0x1p-53
	}
	var meta tile.Meta
	if g.next(3) == 0 { // blocks a product can take, and how the GPU is to run its K loops
		dots := []int{16, 32, 64, 96, 128}
		g.bm, g.bn = dots[g.next(5)], dots[g.next(5)]
		if w := g.next(3); w > 0 && g.dt == tile.F32 {
			meta = tile.Meta{"wgmma": w, "num_stages": 2 + g.next(3), "num_warps": 4 << g.next(2)}
			if w == 2 {
				meta["ws"] = g.next(3)
			}
		}
	} else {
		g.bm, g.bn = rdims[g.next(8)], rdims[g.next(8)]
	}
	g.g0, g.g1 = 1+g.next(3), 1+g.next(3)
	g.m = g.g0*g.bm - g.next(g.bm)
	g.n = g.g1*g.bn - g.next(g.bn)
	g.params = g.next(2) == 1
	g.meta = meta
	b := tile.NewBuilder("random", meta)
	g.b = b
	if g.more && g.next(4) == 0 {
		// program ids and aranges i64, as graphpass writes kernels over
		// tensors past graphpass.MaxElements: every index, offset and
		// mask built from them i64
		b.Index64()
	}
	nin := 1 + g.next(3)
	for i := 0; i < nin; i++ {
		g.ins = append(g.ins, b.Ptr(fmt.Sprintf("x%d", i), g.dt))
	}
	if g.params {
		g.mv, g.nv = b.Param("m", tile.I32), b.Param("n", tile.I32)
	} else {
		g.mv, g.nv = b.I32(g.m), b.I32(g.n)
	}
	var alpha *tile.Value
	if g.alpha = g.next(2) == 1; g.alpha {
		alpha = b.Param("alpha", g.dt)
	} else {
		alpha = b.Const(0.75, g.dt)
	}
	nout := 1 + g.next(2)
	ys := make([]*tile.Value, nout)
	for i := range ys {
		ys[i] = b.Ptr(fmt.Sprintf("y%d", i), g.dt)
	}
	var acc, z *tile.Value
	if g.next(6) == 5 {
		acc = b.Ptr("acc", g.dt)
	}
	if g.next(5) == 4 {
		z = b.Ptr("z", g.dt)
	}
	g.pid0, g.pid1 = b.ProgramID(0), b.ProgramID(1)
	g.pool = append(g.pool, rv{v: alpha, d1: 0, d2: 0, mag: 1, pure: true})
	g.add(g.load(0, 0))
	for steps := 2 + g.next(12); steps > 0; steps-- {
		g.step()
	}
	last := g.pool[len(g.pool)-1]
	g.store(ys[0], last)
	for _, y := range ys[1:] {
		a := g.pickBlock(func(rv) bool { return true })
		g.store(y, a)
	}
	if acc != nil {
		g.atomicAdd(acc, g.pickBlock(func(rv) bool { return true }))
	}
	if z != nil {
		g.storeLoop(z)
	}
	return b.Build()
}

// add puts a into the pool and returns it.
func (g *rgen) add(a rv) rv {
	g.work += float64(a.d1 * a.d2)
	g.pool = append(g.pool, a)
	return a
}

// pickBlock is a block (not the scalar) of the pool that ok accepts, the
// latest one where data runs out; a fresh load if there is none.
func (g *rgen) pickBlock(ok func(rv) bool) rv {
	var c []rv
	for _, a := range g.pool {
		if a.d1 > 0 && ok(a) {
			c = append(c, a)
		}
	}
	if len(c) == 0 {
		return g.add(g.load(0, 0))
	}
	return c[len(c)-1-g.next(len(c))]
}

func (g *rgen) dim() int {
	if g.next(2) == 0 {
		return g.bm
	}
	return g.bn
}

func (g *rgen) step() {
	n := 16
	if g.more {
		n = 21
	}
	switch g.next(n) {
	case 0, 1, 2:
		g.add(g.load(0, 0))
	case 3, 4, 5:
		g.add(g.unary(g.pickBlock(func(rv) bool { return true })))
	case 6, 7, 8:
		g.add(g.binary())
	case 9:
		a := g.pickBlock(func(rv) bool { return true })
		a.v, a.d1, a.d2 = g.b.Trans(a.v), a.d2, a.d1
		g.add(a)
	case 10:
		g.add(g.reduce(g.pickBlock(func(a rv) bool { return a.d1 > 1 || a.d2 > 1 })))
	case 11:
		g.add(g.where())
	case 12, 13:
		if a, ok := g.kloop(); ok && g.next(2) == 0 {
			g.add(a)
		} else if a, ok := g.dot(); ok {
			g.add(a)
		} else {
			g.add(g.binary())
		}
	case 14:
		switch g.next(4) {
		case 0:
			g.add(g.online())
		case 1:
			g.add(g.attention())
		default:
			g.add(g.loop())
		}
	case 15:
		g.add(g.cast(g.pickBlock(func(rv) bool { return true })))
	case 16, 17:
		g.add(g.reduce3(g.pickBlock(func(a rv) bool { return a.d1 > 1 || a.d2 > 1 })))
	case 18, 19:
		g.add(g.ireduce())
	case 20:
		g.add(g.loop())
	}
}

// tame passes a through tanh if its magnitude passes lim.
func (g *rgen) tame(a rv, lim float64) rv {
	if a.mag <= lim {
		return a
	}
	return g.apply(tile.OpTanh, a)
}

// idx is the block's row and column indices: [d1,1] and [1,d2] (i32).
func (g *rgen) idx(d1, d2 int) (*tile.Value, *tile.Value) {
	b := g.b
	return b.ExpandDims(b.Arange(0, d1), 1), b.ExpandDims(b.Arange(0, d2), 0)
}

// load reads a d1×d2 block of an input: rows from the program's row block
// (shifted), columns from its column block, or, in a loop, from the
// counter's; straight or transposed; masked where it may leave the input.
func (g *rgen) load(d1, d2 int) rv {
	b := g.b
	if d1 == 0 {
		d1, d2 = g.dim(), g.dim()
	}
	x := g.ins[g.next(len(g.ins))]
	shift := []int{0, 0, 1, -1, 3}[g.next(5)]
	trans := g.next(3) == 0
	r0 := b.Add(b.Mul(g.pid0, g.bm), shift)
	c0 := b.Mul(g.pid1, g.bn)
	maxC := (g.g1-1)*g.bn - 1
	if g.iv != nil { // the loop's blocks move along the columns
		c0 = b.Add(c0, b.Mul(g.iv, g.bn))
		maxC += (g.ivLo + max(g.trips-1, 0)*g.ivStep) * g.bn
	}
	maxR := (g.g0-1)*g.bm + shift - 1
	i, j := g.idx(d1, d2)
	var row, col *tile.Value
	if trans {
		row, col = b.Add(r0, j), b.Add(c0, i)
		maxR, maxC = maxR+d2, maxC+d1
	} else {
		row, col = b.Add(r0, i), b.Add(c0, j)
		maxR, maxC = maxR+d1, maxC+d2
	}
	off := b.Add(b.Mul(row, g.nv), col)
	var mask *tile.Value
	safe := shift >= 0 && maxR < g.m && maxC < g.n
	if !safe || g.next(2) == 0 {
		mask = b.And(b.Lt(row, g.mv), b.Lt(col, g.nv))
		if shift < 0 {
			mask = b.And(mask, b.Ge(row, 0))
		}
	}
	var other any
	mag := 2.0
	if mask != nil {
		switch g.next(3) {
		case 1:
			other = 0.0
		case 2:
			other = 1.5
		}
	}
	hint := []tile.CacheHint{tile.CacheDefault, tile.CacheStreaming, tile.CacheKeep}[g.next(3)]
	v := b.Load(b.AddPtr(x, off), mask, other, hint)
	return rv{v: v, d1: d1, d2: d2, mag: mag, pure: true}
}

// round is the rounding error bound of an op whose result is at most mag.
func (g *rgen) round(o tile.Op, mag float64) float64 {
	t := MathTol(o)
	if g.dt == tile.F64 {
		t = MathTol64(o)
	}
	return 2 * (t.Abs + t.Rel*mag + g.u*mag)
}

// apply is a math op on a, its domain kept by composition (|x| + 1 under
// roots and logarithms, tanh before exponentials of large arguments).
func (g *rgen) apply(o tile.Op, a rv) rv {
	b := g.b
	out := rv{d1: a.d1, d2: a.d2}
	// plus1 is |a| + 1 with its bounds
	plus1 := func() (*tile.Value, float64, float64) {
		return b.Add(b.Abs(a.v), 1.0), a.mag + 1, a.err + g.u*(a.mag+1)
	}
	lip := 1.0
	switch o {
	case tile.OpExp, tile.OpExpm1, tile.OpExp2, tile.OpSin, tile.OpCos:
		a = g.tame(a, 16)
	}
	switch o {
	case tile.OpNeg, tile.OpAbs:
		out.v, out.mag, out.err, out.pure = b.Unary(o, a.v), a.mag, a.err, a.pure
		return out
	case tile.OpFloor, tile.OpCeil, tile.OpSign:
		if !a.pure {
			return g.apply(tile.OpTanh, a)
		}
		out.v, out.mag, out.pure = b.Unary(o, a.v), a.mag+1, true
		return out
	case tile.OpTanh, tile.OpSigmoid, tile.OpErf, tile.OpSin, tile.OpCos:
		out.v, out.mag = b.Unary(o, a.v), 1
		lip = map[tile.Op]float64{tile.OpSigmoid: 0.25, tile.OpErf: 1.13}[o]
		if lip == 0 {
			lip = 1
		}
	case tile.OpExp, tile.OpExpm1:
		out.v, out.mag = b.Unary(o, a.v), math.Exp(a.mag)
		lip = out.mag
	case tile.OpExp2:
		out.v, out.mag = b.Unary(o, a.v), math.Exp2(a.mag)
		lip = out.mag * math.Ln2
	case tile.OpSqrt, tile.OpRsqrt, tile.OpLog, tile.OpLog2:
		x, m, e := plus1()
		out.v = b.Unary(o, x)
		out.mag = map[tile.Op]float64{tile.OpSqrt: math.Sqrt(m), tile.OpRsqrt: 1, tile.OpLog: math.Log(m), tile.OpLog2: math.Log2(m)}[o]
		lip = map[tile.Op]float64{tile.OpSqrt: 0.5, tile.OpRsqrt: 0.5, tile.OpLog: 1, tile.OpLog2: 1 / math.Ln2}[o]
		out.err = lip*e + g.round(o, out.mag)
		return out
	case tile.OpLog1p:
		out.v, out.mag = b.Log1p(b.Abs(a.v)), math.Log1p(a.mag)
	case tile.OpPow:
		a = g.tame(a, 100)
		x, m, e := plus1()
		y := []float64{2, 0.5, -1.5}[g.next(3)]
		out.v = b.Pow(x, y)
		out.mag = math.Max(math.Pow(m, y), 1)
		lip = math.Abs(y) * math.Max(math.Pow(m, y-1), 1)
		rel := 0x1p-21 * (1 + math.Abs(y*math.Log2(m)))
		if g.dt == tile.F64 {
			rel = (math.Abs(y*math.Log(m)) + 4) * 0x1p-53
		}
		out.err = lip*e + 2*(rel+g.u)*out.mag
		return out
	default:
		panic(fmt.Sprintf("tiletest: random apply of %v", o))
	}
	out.err = lip*a.err + g.round(o, out.mag)
	return out
}

var runary = []tile.Op{
	tile.OpTanh, tile.OpSigmoid, tile.OpErf, tile.OpNeg, tile.OpAbs, tile.OpExp,
	tile.OpExpm1, tile.OpExp2, tile.OpSin, tile.OpCos, tile.OpSqrt, tile.OpRsqrt,
	tile.OpLog, tile.OpLog2, tile.OpLog1p, tile.OpFloor, tile.OpCeil, tile.OpSign, tile.OpPow,
}

func (g *rgen) unary(a rv) rv { return g.apply(runary[g.next(len(runary))], a) }

// shapeOf is a's shape; the scalar's is rank 0.
func shapeOf(a rv) tile.Shape {
	if a.d1 == 0 {
		return tile.Shp()
	}
	return tile.Shp(a.d1, a.d2)
}

// fits reports whether a and c broadcast together, and to what.
func fits(a, c rv) (int, int, bool) {
	s, err := tile.BroadcastShapes(shapeOf(a), shapeOf(c))
	if err != nil {
		return 0, 0, false
	}
	if s.Rank == 0 {
		return 0, 0, true
	}
	return s.Dims[0], s.Dims[1], true
}

// into reports whether a broadcasts to d1×d2 without growing it.
func into(a rv, d1, d2 int) bool {
	return a.d1 == 0 || (a.d1 == 1 || a.d1 == d1) && (a.d2 == 1 || a.d2 == d2)
}

// partner is a value that broadcasts with a (the scalar, a constant or a
// block), transposing one of a's transposed shape where that is all there is.
func (g *rgen) partner(a rv) rv {
	switch g.next(5) {
	case 0:
		return g.pool[0] // alpha
	case 1:
		x := []float64{0.5, -3, 1.25}[g.next(3)]
		return rv{v: g.b.Const(x, g.dt), mag: math.Abs(x), pure: true}
	}
	var c []rv
	for _, x := range g.pool {
		if _, _, ok := fits(a, x); ok && x.d1 > 0 {
			c = append(c, x)
		}
	}
	if len(c) == 0 || g.next(4) == 0 {
		// a's shape, from a transposed block or a load
		for _, x := range g.pool {
			if x.d1 == a.d2 && x.d2 == a.d1 && x.d1 > 0 {
				x.v, x.d1, x.d2 = g.b.Trans(x.v), x.d2, x.d1
				return x
			}
		}
		return g.load(a.d1, a.d2)
	}
	return c[len(c)-1-g.next(len(c))]
}

// binary combines a block with a partner: + − × max min, or a division
// by 1 + |y|.
func (g *rgen) binary() rv {
	b := g.b
	a := g.pickBlock(func(rv) bool { return true })
	c := g.partner(a)
	d1, d2, _ := fits(a, c)
	out := rv{d1: d1, d2: d2}
	switch g.next(6) {
	case 0:
		out.v, out.mag = b.Add(a.v, c.v), a.mag+c.mag
		out.err = a.err + c.err + g.u*out.mag
	case 1:
		out.v, out.mag = b.Sub(a.v, c.v), a.mag+c.mag
		out.err = a.err + c.err + g.u*out.mag
	case 2:
		a, c = g.tame(a, 1000), g.tame(c, 1000)
		out.v, out.mag = b.Mul(a.v, c.v), a.mag*c.mag
		out.err = a.err*c.mag + c.err*a.mag + a.err*c.err + g.u*out.mag
	case 3:
		out.v, out.mag, out.err, out.pure = b.Maximum(a.v, c.v), math.Max(a.mag, c.mag), math.Max(a.err, c.err), a.pure && c.pure
	case 4:
		out.v, out.mag, out.err, out.pure = b.Minimum(a.v, c.v), math.Max(a.mag, c.mag), math.Max(a.err, c.err), a.pure && c.pure
	case 5:
		den := b.Add(b.Abs(c.v), 1.0)
		eden := c.err + g.u*(c.mag+1)
		out.v, out.mag = b.Div(a.v, den), a.mag
		out.err = a.err + a.mag*eden + 2*g.u*out.mag
	}
	if d1 == 0 { // both scalar: cannot happen (a is a block)
		panic("tiletest: random binary of scalars")
	}
	return out
}

// reduce sums, or takes the largest or smallest element, along an axis,
// keeping it (as a dimension of one, directly or by ExpandDims).
func (g *rgen) reduce(a rv) rv {
	b := g.b
	axis := g.next(2)
	if a.d1 == 1 {
		axis = 1
	} else if a.d2 == 1 {
		axis = 0
	}
	n := []int{a.d1, a.d2}[axis]
	o := []tile.Op{tile.OpReduceSum, tile.OpReduceMax, tile.OpReduceMin, tile.OpReduceSum}[g.next(4)]
	if o == tile.OpReduceSum {
		a = g.tame(a, 1e4)
	}
	var v *tile.Value
	if g.next(3) == 0 {
		v = b.ExpandDims(b.Reduce(o, a.v, axis), axis)
	} else {
		v = b.Reduce(o, a.v, axis, true)
	}
	out := rv{v: v, d1: a.d1, d2: a.d2, mag: a.mag, err: a.err, pure: a.pure}
	if axis == 0 {
		out.d1 = 1
	} else {
		out.d2 = 1
	}
	if o == tile.OpReduceSum {
		g.sumBounds(&out, a, n)
	}
	return out
}

// sumBounds makes out the bounds of a sum of n of a's elements: n times
// a's magnitude and error, plus the rounding of n additions in any order.
func (g *rgen) sumBounds(out *rv, a rv, n int) {
	fn := float64(n)
	out.mag = fn * a.mag
	out.err = fn*a.err + 2*fn*g.u*out.mag
	out.pure = false
}

// split is a power of two p with 1 < p < n that divides n, or 0 where n
// (a block side: a power of two or three times one) has none.
func (g *rgen) split(n int) int {
	if n < 4 || n&(n-1) != 0 {
		return 0
	}
	var ps []int
	for p := 2; p < n; p *= 2 {
		ps = append(ps, p)
	}
	return ps[g.next(len(ps))]
}

// reduce3 is a reduction (sum, max, min) along one axis of a seen as three
// dimensions, its rows split in two ([p, d1/p, d2]: axis 0 combines rows
// d1/p apart, axis 1 runs of d1/p rows) or its columns ([d1, p, d2/p]:
// axis 1 combines columns d2/p apart, axis 2 runs of them), kept as a
// dimension of one or not, reshaped back to two dimensions. A side that
// does not split is reduced as two-dimensional.
func (g *rgen) reduce3(a rv) rv {
	b := g.b
	pr, pc := g.split(a.d1), g.split(a.d2)
	if pr == 0 && pc == 0 {
		return g.reduce(a)
	}
	// axis 0 needs the rows split, axis 2 the columns, axis 1 either
	axis := g.next(3)
	rows := pc == 0 || pr != 0 && (axis == 0 || axis == 1 && g.next(2) == 0)
	o := []tile.Op{tile.OpReduceSum, tile.OpReduceMax, tile.OpReduceMin}[g.next(3)]
	if o == tile.OpReduceSum {
		a = g.tame(a, 1e4)
	}
	var dims []int
	if rows {
		dims, axis = []int{pr, a.d1 / pr, a.d2}, min(axis, 1)
	} else {
		dims, axis = []int{a.d1, pc, a.d2 / pc}, max(axis, 1)
	}
	n := dims[axis]
	keep := g.next(2) == 0
	v := b.Reduce(o, b.Reshape(a.v, dims...), axis, keep)
	rest := append(append([]int{}, dims[:axis]...), dims[axis+1:]...)
	out := rv{v: b.Reshape(v, rest...), d1: rest[0], d2: rest[1], mag: a.mag, err: a.err, pure: a.pure}
	if o == tile.OpReduceSum {
		g.sumBounds(&out, a, n)
	}
	return out
}

// ireduce is an integer reduction along an axis, cast back to the float
// type (exact, pure): the index of a pure block's largest or smallest
// element (the first, or the last), the count of elements a condition
// holds at, or the largest flat index it holds at (−1 where none).
func (g *rgen) ireduce() rv {
	b := g.b
	a := g.pickBlock(func(a rv) bool { return a.pure && (a.d1 > 1 || a.d2 > 1) })
	if !a.pure {
		a = g.add(g.load(0, 0))
	}
	d1, d2 := a.d1, a.d2
	axis := g.next(2)
	if d1 == 1 {
		axis = 1
	} else if d2 == 1 {
		axis = 0
	}
	n := []int{d1, d2}[axis]
	keep := g.next(2) == 0
	i, j := g.idx(d1, d2)
	along := []*tile.Value{i, j}[axis]
	whole := func(x *tile.Value) *tile.Value { return b.BroadcastTo(x, tile.Shp(d1, d2)) }
	var v *tile.Value
	mag := float64(n)
	switch g.next(3) {
	case 0: // argmax or argmin: the first index (or the last) at the extreme
		ext := b.Reduce([]tile.Op{tile.OpReduceMax, tile.OpReduceMin}[g.next(2)], a.v, axis, true)
		at := b.Eq(a.v, ext)
		if g.next(2) == 0 {
			v = b.Reduce(tile.OpReduceMin, b.Where(at, whole(along), int32(math.MaxInt32)), axis, keep)
		} else {
			v = b.Reduce(tile.OpReduceMax, b.Where(at, whole(along), int32(-1)), axis, keep)
		}
	case 1: // a count
		v = b.Reduce(tile.OpReduceSum, whole(b.Cast(g.cond(d1, d2), tile.I32)), axis, keep)
	case 2: // the largest flat index i·d2 + j where a condition holds
		flat := b.Add(b.Mul(i, d2), j)
		v = b.Reduce(tile.OpReduceMax, b.Where(g.cond(d1, d2), flat, int32(-1)), axis, keep)
		mag = float64(d1 * d2)
	}
	if !keep {
		v = b.ExpandDims(v, axis)
	}
	out := rv{v: b.Cast(v, g.dt), d1: d1, d2: d2, mag: mag, pure: true}
	if axis == 0 {
		out.d1 = 1
	} else {
		out.d2 = 1
	}
	return out
}

// cond is an i1 block of a's shape that every backend computes the same:
// a comparison of pure values, of indices, or of a loop's counter,
// possibly combined.
func (g *rgen) cond(d1, d2 int) *tile.Value {
	b := g.b
	cmp := func(x, y any) *tile.Value {
		switch g.next(6) {
		case 0:
			return b.Lt(x, y)
		case 1:
			return b.Le(x, y)
		case 2:
			return b.Gt(x, y)
		case 3:
			return b.Ge(x, y)
		case 4:
			return b.Eq(x, y)
		}
		return b.Ne(x, y)
	}
	var c *tile.Value
	switch g.next(4) {
	case 0: // pure values
		x := g.pickBlock(func(a rv) bool { return a.pure && into(a, d1, d2) })
		if !x.pure || !into(x, d1, d2) {
			x = g.load(d1, d2)
		}
		y := g.partner(x)
		if !y.pure || !into(y, d1, d2) {
			y = rv{v: b.Const(0, g.dt), pure: true}
		}
		c = cmp(x.v, y.v)
	case 1, 2: // indices: the element's row against its column, or parity
		i, j := g.idx(d1, d2)
		i, j = b.Add(i, b.Mul(g.pid0, d1)), b.Add(j, b.Mul(g.pid1, d2))
		if g.next(2) == 0 {
			c = cmp(i, j)
		} else {
			c = b.Eq(b.Rem(b.Add(i, j), 3), 0)
		}
	case 3:
		if g.iv != nil {
			c = cmp(g.iv, g.ivLo+g.next(g.trips)*g.ivStep)
		} else {
			c = cmp(g.pid0, g.pid1)
		}
	}
	switch g.next(5) {
	case 0:
		c = b.Not(c)
	case 1:
		c = b.And(c, g.cond(d1, d2))
	case 2:
		c = b.Or(c, g.cond(d1, d2))
	case 3:
		c = b.Xor(c, g.cond(d1, d2))
	}
	return c
}

// where selects between a block and a partner on a condition.
func (g *rgen) where() rv {
	a := g.pickBlock(func(rv) bool { return true })
	c := g.partner(a)
	d1, d2, _ := fits(a, c)
	cd1, cd2 := d1, d2
	switch g.next(3) { // a condition that broadcasts along a dimension
	case 1:
		cd1 = 1
	case 2:
		cd2 = 1
	}
	v := g.b.Where(g.cond(cd1, cd2), a.v, c.v)
	return rv{v: v, d1: d1, d2: d2, mag: math.Max(a.mag, c.mag), err: math.Max(a.err, c.err), pure: a.pure && c.pure}
}

// precErr is the relative error a product's operand rounding may make of
// operands that differ between backends.
var precErr = map[tile.Precision]float64{
	tile.PrecIEEE: 0, tile.PrecTF32: 0x1p-9, tile.PrecTF32TB: 0x1p-9,
	tile.PrecBF16: 0x1p-7, tile.PrecTF32x3: 0x1p-19,
}

// dotOf is acc + a·c at precision p with its bounds.
func (g *rgen) dotOf(a, c rv, acc *rv, p tile.Precision) rv {
	a, c = g.tame(a, 100), g.tame(c, 100)
	k := float64(a.d2)
	out := rv{d1: a.d1, d2: c.d2}
	var accv *tile.Value
	out.mag = k * a.mag * c.mag
	out.err = k * (a.err*c.mag + c.err*a.mag + a.err*c.err)
	if !a.pure || !c.pure {
		out.err += k * 2 * precErr[p] * a.mag * c.mag
	}
	if acc != nil {
		accv = acc.v
		out.mag += acc.mag
		out.err += acc.err
	}
	out.err += 2 * (k + 1) * g.u * out.mag
	out.v = g.b.Dot(a.v, c.v, accv, p)
	g.work += k * float64(a.d1*c.d2)
	return out
}

func (g *rgen) precision() tile.Precision {
	if g.dt == tile.F64 {
		return tile.PrecIEEE
	}
	return []tile.Precision{tile.PrecIEEE, tile.PrecIEEE, tile.PrecTF32, tile.PrecBF16, tile.PrecTF32x3, tile.PrecTF32TB}[g.next(6)]
}

// dot is a product of two blocks of the pool (the right one loaded where
// none fits), with an accumulator of the pool or none.
func (g *rgen) dot() (rv, bool) {
	if g.bm < tile.MinDotDim || g.bn < tile.MinDotDim {
		return rv{}, false
	}
	a := g.pickBlock(func(a rv) bool { return a.d1 >= tile.MinDotDim && a.d2 >= tile.MinDotDim })
	c := g.pickBlock(func(c rv) bool { return c.d1 == a.d2 && c.d2 >= tile.MinDotDim })
	if c.d1 != a.d2 || c.d2 < tile.MinDotDim {
		c = g.load(a.d2, g.dim())
	}
	var acc *rv
	if g.next(2) == 0 {
		x := g.pickBlock(func(x rv) bool { return x.d1 == a.d1 && x.d2 == c.d2 })
		if x.d1 == a.d1 && x.d2 == c.d2 {
			acc = &x
		}
	}
	return g.dotOf(a, c, acc, g.precision()), true
}

// at loads x[row][col] of an input read as an m×n matrix (row-major),
// masked inside it (other where not).
func (g *rgen) at(x, row, col *tile.Value, other any) *tile.Value {
	b := g.b
	return b.Load(b.AddPtr(x, b.Add(b.Mul(row, g.nv), col)), b.And(b.Lt(row, g.mv), b.Lt(col, g.nv)), other)
}

// trip is a d1×d2 block a loop's body computes: a load the counter moves,
// then up to two ops on it and on values from before the loop (a fresh
// load where one gives another shape).
func (g *rgen) trip(d1, d2 int) rv {
	t := g.add(g.load(d1, d2))
	kinds := 3
	if g.more && g.depth < 2 {
		kinds = 5
	}
	for n := g.next(3); n > 0; n-- {
		switch g.next(kinds) {
		case 0:
			t = g.add(g.unary(t))
		case 1:
			t = g.add(g.where())
		case 2:
			t = g.add(g.binary())
		case 3, 4: // a loop nested in this one, carrying t
			t = g.add(g.loopFrom(t))
		}
		if t.d1 != d1 || t.d2 != d2 {
			t = g.add(g.load(d1, d2))
		}
	}
	return t
}

// loop carries a block over one to three trips; each adds a block made
// from loads the counter moves (and values from outside the loop), takes
// the larger, halves and adds, or adds a product.
func (g *rgen) loop() rv {
	init := g.pickBlock(func(rv) bool { return true })
	if g.iv != nil {
		return init
	}
	return g.loopFrom(init)
}

// loopFrom is loop with its initial value init (RandomMore nests it in
// another loop's body: its counter is the one the body's loads and
// conditions then use; the outer one's values are read from before it).
func (g *rgen) loopFrom(init rv) rv {
	b := g.b
	trips := 1 + g.next(3)
	if g.next(8) == 7 {
		trips = 0 // the loop's results are its initial values
	}
	combine := g.next(4)
	canDot := init.d1 >= tile.MinDotDim && init.d2 >= tile.MinDotDim && g.bm >= tile.MinDotDim && g.bn >= tile.MinDotDim
	if combine == 3 && !canDot {
		combine = 0
	}
	lo, step := 0, 1
	if g.next(2) == 0 {
		lo, step = 2, 3 // the counter 2, 5, 8: its blocks at iv·bn
	}
	var t, t2 rv
	var prec tile.Precision
	k := g.dim()
	outer, saved := len(g.pool), g.saveLoop()
	res := b.For(lo, lo+trips*step, step, []*tile.Value{init.v}, func(iv *tile.Value, carried []*tile.Value) []*tile.Value {
		g.iv, g.ivLo, g.ivStep, g.trips = iv, lo, step, trips
		g.depth++
		defer func() { g.restoreLoop(saved); g.depth--; g.pool = g.pool[:outer] }()
		acc := rv{v: carried[0], d1: init.d1, d2: init.d2}
		if combine == 3 {
			t, t2 = g.load(init.d1, k), g.load(k, init.d2)
			if g.next(2) == 0 {
				t = g.add(g.unary(t))
			}
			prec = g.precision()
			return []*tile.Value{g.dotOf(t, t2, &acc, prec).v}
		}
		t = g.tame(g.trip(init.d1, init.d2), 1e3)
		switch combine {
		case 0:
			return []*tile.Value{b.Add(carried[0], t.v)}
		case 1:
			return []*tile.Value{b.Maximum(carried[0], t.v)}
		}
		return []*tile.Value{b.Add(b.Mul(carried[0], 0.5), t.v)}
	})
	out := rv{v: res[0], d1: init.d1, d2: init.d2, mag: init.mag, err: init.err}
	for i := 0; i < trips; i++ {
		switch combine {
		case 0:
			out.mag += t.mag
			out.err += t.err + g.u*out.mag
		case 1:
			out.mag, out.err = math.Max(out.mag, t.mag), math.Max(out.err, t.err)
		case 2:
			out.mag = out.mag/2 + t.mag
			out.err = out.err/2 + t.err + 2*g.u*out.mag
		case 3:
			ta, tc := g.tame(t, 100), g.tame(t2, 100)
			kk := float64(k)
			out.mag += kk * ta.mag * tc.mag
			out.err += kk*(ta.err*tc.mag+tc.err*ta.mag+ta.err*tc.err) + 2*(kk+1)*g.u*out.mag
			if !ta.pure || !tc.pure {
				out.err += kk * 2 * precErr[prec] * ta.mag * tc.mag
			}
		}
	}
	out.pure = combine == 1 && init.pure && t.pure
	g.work *= float64(trips)
	return out
}

// kloop is a K loop as a matrix product writes it: acc += A·B over one
// to three steps of k, A the program's rows of an input at columns
// k·it… (stored straight, or transposed: read down its columns), B an
// input's rows k·it… at the program's columns, both read as m×n matrices
// (so K runs past their edges, masked: zeros), each used by the product
// alone, as the GPU's pipelined loops (cp.async, wgmma) want them; the
// accumulator starts at zero or at a value of the pool.
func (g *rgen) kloop() (rv, bool) {
	b := g.b
	if g.iv != nil || g.bm < tile.MinDotDim || g.bn < tile.MinDotDim {
		return rv{}, false
	}
	d1, d2 := g.dim(), g.dim()
	k := []int{16, 32, 64}[g.next(3)]
	trips := 1 + g.next(3)
	prec := g.precision()
	// mostly what wgmma takes: k steps of 32, TF32 (or, swapped, any but
	// ieee), 16 rows a warp (swapped: 16 columns)
	switch nw := g.meta["num_warps"]; g.meta["wgmma"] {
	case 1:
		if g.next(4) > 0 {
			k, prec, d1 = 32, tile.PrecTF32, 16*nw
		}
	case 2:
		if g.next(4) > 0 {
			k, prec, d2 = 32, []tile.Precision{tile.PrecTF32, tile.PrecBF16, tile.PrecTF32x3}[g.next(3)], 16*nw
		}
	}
	xa, xb := g.ins[g.next(len(g.ins))], g.ins[g.next(len(g.ins))]
	transA := g.next(3) == 0
	init := rv{v: b.Zeros(g.dt, d1, d2), d1: d1, d2: d2, pure: true}
	if g.next(2) == 0 {
		if x := g.pickBlock(func(x rv) bool { return x.d1 == d1 && x.d2 == d2 }); x.d1 == d1 && x.d2 == d2 {
			init = g.tame(x, 1e4)
		}
	}
	other := func() any { return []any{nil, 0.0}[g.next(2)] }
	res := b.For(0, trips, 1, []*tile.Value{init.v}, func(iv *tile.Value, c []*tile.Value) []*tile.Value {
		kk := b.Mul(iv, k)
		i, j := g.idx(d1, k)
		r, q := b.Add(b.Mul(g.pid0, g.bm), i), b.Add(kk, j)
		var a *tile.Value
		if transA { // A[r][q] at x[q][r]
			a = g.at(xa, q, r, other())
		} else {
			a = g.at(xa, r, q, other())
		}
		i, j = g.idx(k, d2)
		r, q = b.Add(kk, i), b.Add(b.Mul(g.pid1, g.bn), j)
		bb := g.at(xb, r, q, other())
		return []*tile.Value{b.Dot(a, bb, c[0], prec)}
	})
	out := rv{v: res[0], d1: d1, d2: d2, mag: init.mag, err: init.err}
	for range trips {
		out.mag += float64(k) * 4
		out.err += 2 * float64(k+1) * g.u * out.mag
	}
	g.work += float64(trips * d1 * d2 * k)
	return out, true
}

// online is a loop that carries two columns, a running maximum m and a
// sum s of exponentials scaled to it, over one to three blocks t of d1×d2
// the counter moves, as an online softmax does: m' = max(m, max_j t),
// s' = s·e^(m−m') + Σ_j e^(t−m'). Its value is s + m (or m alone).
func (g *rgen) online() rv {
	b := g.b
	if g.iv != nil {
		return g.pickBlock(func(rv) bool { return true })
	}
	d1, d2 := g.dim(), g.dim()
	trips := 1 + g.next(3)
	m0 := -[]float64{100, 0.5}[g.next(2)]
	init := []*tile.Value{b.Full(m0, g.dt, d1, 1), b.Zeros(g.dt, d1, 1)}
	var t rv
	outer := len(g.pool)
	res := b.For(0, trips, 1, init, func(iv *tile.Value, c []*tile.Value) []*tile.Value {
		g.iv, g.ivLo, g.ivStep, g.trips = iv, 0, 1, trips
		defer func() { g.iv = nil; g.pool = g.pool[:outer] }()
		t = g.add(g.load(d1, d2))
		if g.next(2) == 0 {
			t = g.add(g.unary(t))
		}
		t = g.tame(t, 16)
		m := b.Maximum(c[0], b.Max(t.v, 1, true))
		s := b.Add(b.Mul(c[1], b.Exp(b.Sub(c[0], m))), b.Sum(b.Exp(b.Sub(t.v, m)), 1, true))
		return []*tile.Value{m, s}
	})
	// bounds: m is t's maximum (or m0), within t.err; every exponential
	// takes an argument ≤ 0 (up to the errors), so it is at most 1 with
	// Lipschitz constant 1 there, and s sums at most trips·d2 of them
	mm := math.Max(-m0, t.mag)
	em := t.err
	expErr := 2*em + 2*g.u*2*mm + g.round(tile.OpExp, 1)
	ms, es := 0.0, 0.0
	for i := 0; i < trips; i++ {
		es = es + ms*(expErr+2*g.u) + float64(d2)*(t.err+em+2*g.u*2*mm+g.round(tile.OpExp, 1)) + 2*float64(d2)*g.u*float64(d2)
		ms += float64(d2)
		es += 2 * g.u * ms
	}
	if g.next(3) == 0 {
		return rv{v: res[0], d1: d1, d2: 1, mag: mm, err: em, pure: t.pure}
	}
	return rv{v: b.Add(res[1], res[0]), d1: d1, d2: 1, mag: ms + mm, err: es + em + g.u*(ms+mm)}
}

// attention is flash attention's loop over one to three blocks of keys:
// s = (q·kᵀ)·c, some scores replaced by −30 where the key's index passes
// the row's (a causal mask), m' = max(m, max_j s), p = e^(s−m'),
// l' = l·e^(m−m') + Σ_j p, acc' = acc·e^(m−m') + p·v; its value acc/l.
// q is a block of the program's rows loaded before the loop, k and v
// blocks of an input's rows the counter moves (k loaded straight and
// transposed in the loop, or read transposed), masked past the inputs.
func (g *rgen) attention() rv {
	b := g.b
	if g.iv != nil {
		return g.pickBlock(func(rv) bool { return true })
	}
	sides := []int{16, 32, 64}
	d1, dk, dn, dv := sides[g.next(3)], sides[g.next(3)], sides[g.next(3)], sides[g.next(3)]
	trips := 1 + g.next(3)
	p1, p2 := g.precision(), g.precision()
	scale := []float64{1, 0.125, 0.5}[g.next(3)]
	causal, kTrans := g.next(2) == 0, g.next(2) == 0
	xq, xk, xv := g.ins[g.next(len(g.ins))], g.ins[g.next(len(g.ins))], g.ins[g.next(len(g.ins))]
	// q: the program's rows, columns 0…dk
	i, j := g.idx(d1, dk)
	r := b.Add(b.Mul(g.pid0, g.bm), i)
	q := g.at(xq, r, j, nil)
	const m0 = -1e4
	init := []*tile.Value{b.Full(m0, g.dt, d1, 1), b.Zeros(g.dt, d1, 1), b.Zeros(g.dt, d1, dv)}
	res := b.For(0, trips, 1, init, func(iv *tile.Value, c []*tile.Value) []*tile.Value {
		key0 := b.Mul(iv, dn)
		var kt *tile.Value
		if kTrans { // kt[c][key] read straight from K's rows: a transposed load
			i, j := g.idx(dk, dn)
			key := b.Add(key0, j)
			kt = g.at(xk, key, i, nil)
		} else { // K's rows loaded, then transposed
			i, j := g.idx(dn, dk)
			key := b.Add(key0, i)
			kt = b.Trans(g.at(xk, key, j, 0.0))
		}
		sc := b.Dot(q, kt, nil, p1)
		if scale != 1 {
			sc = b.Mul(sc, scale)
		}
		if causal {
			i, j := g.idx(d1, dn)
			sc = b.Where(b.Gt(b.Add(key0, j), b.Add(b.Mul(g.pid0, g.bm), i)), -30.0, sc)
		}
		m := b.Maximum(c[0], b.Max(sc, 1, true))
		alpha := b.Exp(b.Sub(c[0], m))
		pr := b.Exp(b.Sub(sc, m))
		l := b.Add(b.Mul(c[1], alpha), b.Sum(pr, 1, true))
		i, j := g.idx(dn, dv)
		key := b.Add(key0, i)
		v := g.at(xv, key, j, nil)
		acc := b.Dot(pr, v, b.Mul(c[2], alpha), p2)
		return []*tile.Value{m, l, acc}
	})
	// bounds: q, k and v are loads (at most 2, exact); every exponential
	// takes an argument ≤ 0 (Lipschitz 1 there; the first trip's e^(m0−m')
	// is 0 to every precision), l ≥ 1 (the largest score's term), so
	// |acc/l| ≤ 2
	const mq, mk, mv = 2.0, 2.0, 2.0
	ms := math.Max(float64(dk)*mq*mk*scale, 30)
	es := scale*2*float64(dk+1)*g.u*float64(dk)*mq*mk + g.u*ms
	ep := 2*es + 4*g.u*ms + g.round(tile.OpExp, 1)
	ml, el, macc, eacc := 0.0, 0.0, 0.0, 0.0
	for t := 0; t < trips; t++ {
		ea := 2*es + 4*g.u*ms + g.round(tile.OpExp, 1)
		if t == 0 {
			ea = g.round(tile.OpExp, 1)
		}
		el += ml*ea + float64(dn)*ep + 2*float64(dn)*g.u*float64(dn) + 2*g.u*(ml+float64(dn))
		eacc += macc*ea + float64(dn)*ep*mv + 2*float64(dn+1)*g.u*(macc+float64(dn)*mv) +
			2*float64(dn)*precErr[p2]*mv + g.u*macc
		ml += float64(dn)
		macc += float64(dn) * mv
	}
	g.work += float64(trips * d1 * dn * (dk + dv))
	return rv{v: b.Div(res[2], res[1]), d1: d1, d2: dv, mag: mv, err: eacc + mv*el + 2*g.u*mv}
}

// cast is a round trip through the other float type, or, for a pure
// value, through i32 (truncation).
func (g *rgen) cast(a rv) rv {
	b := g.b
	if a.pure && g.next(2) == 0 {
		a = g.tame(a, 1e6)
		a.v = b.Cast(b.Cast(a.v, tile.I32), g.dt)
		return a
	}
	if g.dt == tile.F32 {
		// in f64: a·a + a, rounded back to f32 once
		a = g.tame(a, 1000)
		x := b.Cast(a.v, tile.F64)
		out := rv{v: b.Cast(b.Add(b.Mul(x, x), x), tile.F32), d1: a.d1, d2: a.d2}
		out.mag = a.mag*a.mag + a.mag
		out.err = a.err*(2*a.mag+1+a.err) + 2*g.u*out.mag
		return out
	}
	out := a
	out.v = b.Cast(b.Cast(a.v, tile.F32), tile.F64)
	out.err = a.err + 0x1p-24*a.mag + 1e-300
	if !a.pure {
		out.err += 0x1p-24 * a.mag
	}
	return out
}

// store writes a's block of each program into an output of (g0·d1 − t0) ×
// (g1·d2 − t1) elements, row-major or transposed, masked at the tails.
func (g *rgen) store(y *tile.Value, a rv) {
	b := g.b
	tr, tc := g.next(a.d1), g.next(a.d2)
	rows, cols := g.g0*a.d1-tr, g.g1*a.d2-tc
	i, j := g.idx(a.d1, a.d2)
	i, j = b.Add(i, b.Mul(g.pid0, a.d1)), b.Add(j, b.Mul(g.pid1, a.d2))
	var off *tile.Value
	if g.next(3) == 0 {
		off = b.Add(b.Mul(j, rows), i)
	} else {
		off = b.Add(b.Mul(i, cols), j)
	}
	var mask *tile.Value
	if tr != 0 || tc != 0 || g.next(2) == 0 {
		mask = b.And(b.Lt(i, rows), b.Lt(j, cols))
	}
	hint := []tile.CacheHint{tile.CacheDefault, tile.CacheStreaming}[g.next(2)]
	b.Store(b.AddPtr(y, off), a.v, mask, hint)
	if a.err > g.maxErr {
		g.maxErr = a.err
	}
	g.outs = append(g.outs, rout{rows: rows, cols: cols})
}

// storeLoop stores inside a loop, as a looped row kernel's second pass
// does: trip it of one to three writes a block computed from a load the
// counter moves (and values from before the loop) to column block
// pid1·trips + it of an output of (g0·d1 − t0) × (g1·trips·d2 − t1).
func (g *rgen) storeLoop(z *tile.Value) {
	b := g.b
	d1, d2 := g.dim(), g.dim()
	trips := 1 + g.next(3)
	tr, tc := g.next(d1), g.next(d2)
	rows, cols := g.g0*d1-tr, g.g1*trips*d2-tc
	outer := len(g.pool)
	var worst float64
	b.For(0, trips, 1, nil, func(iv *tile.Value, _ []*tile.Value) []*tile.Value {
		g.iv, g.ivLo, g.ivStep, g.trips = iv, 0, 1, trips
		defer func() { g.iv = nil; g.pool = g.pool[:outer] }()
		t := g.trip(d1, d2)
		worst = t.err
		i, j := g.idx(d1, d2)
		i = b.Add(i, b.Mul(g.pid0, d1))
		j = b.Add(j, b.Mul(b.Add(b.Mul(g.pid1, trips), iv), d2))
		b.Store(b.AddPtr(z, b.Add(b.Mul(i, cols), j)), t.v, b.And(b.Lt(i, rows), b.Lt(j, cols)))
		return nil
	})
	if worst > g.maxErr {
		g.maxErr = worst
	}
	g.outs = append(g.outs, rout{rows: rows, cols: cols})
}

// atomicAdd adds every program's block a (its first rows×cols elements)
// into one output of rows×cols, atomically: the programs' sums in any
// order.
func (g *rgen) atomicAdd(acc *tile.Value, a rv) {
	b := g.b
	a = g.tame(a, 1e4)
	rows, cols := a.d1-g.next(a.d1), a.d2-g.next(a.d2)
	i, j := g.idx(a.d1, a.d2)
	var mask *tile.Value
	if rows < a.d1 || cols < a.d2 {
		mask = b.And(b.Lt(i, rows), b.Lt(j, cols))
	}
	b.AtomicAdd(b.AddPtr(acc, b.Add(b.Mul(i, cols), j)), a.v, mask)
	progs := float64(g.g0 * g.g1)
	if e := progs*a.err + 2*progs*g.u*progs*a.mag; e > g.maxErr {
		g.maxErr = e
	}
	g.outs = append(g.outs, rout{rows: rows, cols: cols, atomic: true})
}

// setup makes the inputs (uniform in [−2, 2)), the scalars and the
// poisoned outputs.
func (g *rgen) setup(rng *rand.Rand) (tile.Grid, []any, func() error) {
	var args []any
	for range g.ins {
		x := Uniform(rng, g.m*g.n, -2, 2)
		if g.dt == tile.F64 {
			x64 := make([]float64, len(x))
			for i := range x {
				x64[i] = float64(x[i]) + (rng.Float64()-0.5)*1e-9
			}
			args = append(args, x64)
		} else {
			args = append(args, x)
		}
	}
	if g.params {
		args = append(args, g.m, g.n)
	}
	if alpha := 2*rng.Float64() - 1; g.alpha && g.dt == tile.F64 {
		args = append(args, alpha)
	} else if g.alpha {
		args = append(args, float32(alpha))
	}
	first := len(args)
	for _, o := range g.outs {
		if g.dt == tile.F64 {
			y := make([]float64, o.rows*o.cols+Pad)
			for i := range y {
				y[i] = float64(Poison)
				if o.atomic && i < o.rows*o.cols {
					y[i] = 0
				}
			}
			args = append(args, y)
		} else {
			y := Output(o.rows * o.cols)
			if o.atomic {
				clear(y[:o.rows*o.cols])
			}
			args = append(args, y)
		}
	}
	check := func() error {
		for q, o := range g.outs {
			n := o.rows * o.cols
			var at func(int) float64
			var size int
			switch y := args[first+q].(type) {
			case []float32:
				at, size = func(i int) float64 { return float64(y[i]) }, len(y)
			case []float64:
				at, size = func(i int) float64 { return y[i] }, len(y)
			}
			for i := 0; i < size; i++ {
				v := at(i)
				switch {
				case i >= n && v != float64(Poison):
					return fmt.Errorf("y%d: element %d past the %d×%d output was written (%g)", q, i, o.rows, o.cols, v)
				case i < n && v == float64(Poison):
					return fmt.Errorf("y%d[%d] of %d×%d was never written", q, i, o.rows, o.cols)
				case i < n && (math.IsNaN(v) || math.IsInf(v, 0)):
					return fmt.Errorf("y%d[%d] = %g: the generator keeps values finite", q, i, v)
				}
			}
		}
		return nil
	}
	return tile.Grid{g.g0, g.g1, 1}, args, check
}

// RandomWarps is the number of warps a test runs random case c at, its
// i-th: 4, 1, 8 or 2 in turn, or 0 (the kernel's own num_warps) where it
// asks for one (its K loops' wgmma needs 4 or 8).
func RandomWarps(c Case, i int) int {
	if k, err := c.Kernel(); err == nil && k.Meta["num_warps"] > 0 {
		return 0
	}
	return []int{4, 1, 8, 2}[i%4]
}

// CompareRandom runs the random kernel of data on l and on the reference
// interpreter (Compare); an error carries the kernel's text.
func CompareRandom(l Launcher, data []byte) error { return compareRandom(l, Random(data), data) }

// CompareRandomMore is CompareRandom for RandomMore's kernel of data.
func CompareRandomMore(l Launcher, data []byte) error {
	return compareRandom(l, RandomMore(data), data)
}

func compareRandom(l Launcher, c Case, data []byte) error {
	err := Compare(l, Interp{}, c)
	if err == nil {
		return nil
	}
	text := ""
	if k, kerr := c.Kernel(); kerr == nil {
		text = "\n" + k.String()
	}
	return fmt.Errorf("%s (data %x): %w%s", c.Name, data, err, text)
}
