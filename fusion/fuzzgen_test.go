package fusion_test

import (
	"fmt"
	"math"
	"slices"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// This file decodes a fuzzer's bytes into a random, well-typed Gorgonia
// graph, written the way a user writes one (FuzzFusion runs it). The same
// bytes always give the same graph, op for op, in either dtype: a float32
// program is built a second time in float64 as its reference.
//
// The bytes: a header of five (flags: float32, grad, two runs, two bits of
// max group, and in the top three bits read all, H200 target, or all three
// set a zero size; then the sizes M, N, K and B, each an
// index into fzDims), then one step per op group until the bytes run out
// (at most fzMaxSteps): a step's first byte picks what it builds (fzSteps),
// the next ones its operands and variants. Reading past the end gives zeros.
//
// The generator keeps values well conditioned, so that float32 results can
// be compared with a float64 reference at fixed tolerances: it tracks a
// bound on each value's magnitude (mag) and scales a value down by a power
// of two before an op that would overflow or lose precision (exp, cube,
// products), feeds domain-restricted ops (log, sqrt, 1/x, x^y) only values
// bounded away from zero, and adds a random input under every LayerNorm so
// that no row has a near-zero variance. Ops with jumps (sign, floor, ceil,
// comparisons) take only exact values (fzVal.exact), and appear in float64
// programs only. Gorgonia approximates two functions at the ends of their
// domains (math_nooptim.go): Sigmoid is exactly 1 above 19 (float64) or 15
// (float32), Softplus exactly x above 16 or 14; the generator keeps their
// operands within ±15 and ±14, where it computes them in full.

// fzDims are the sizes a header byte picks from: mostly not powers of two.
var fzDims = []int{1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 16, 17, 24, 31, 33, 48, 64, 65, 100, 127}

// fzLongRows are the long row lengths the header's N can take (then the
// other sizes stay small): 8193 and 9000 are longer than graphpass.MaxRow,
// where row kernels walk a row in blocks.
var fzLongRows = []int{257, 1000, 8193, 9000}

const (
	fzMaxSteps = 24
	// the fuzzer's worker gives up on an input after 10 s, and a graph runs
	// on four to six machines, some twice: values stay small
	fzMaxElems = 1 << 16 // a value of more elements is not built
	fzBudget   = 1 << 19 // nor one past this many elements in all (the forward values)
	fzMaxMACs  = 1 << 21 // nor a product of more multiply-adds
	fzSquash   = 4.0     // the bound under which exp and its kin take a value
)

// fzSrc reads the fuzzer's bytes.
type fzSrc struct {
	b []byte
	i int
}

func (s *fzSrc) next() int {
	s.i++
	if s.i > len(s.b) {
		return 0
	}
	return int(s.b[s.i-1])
}

// n is the next byte modulo k.
func (s *fzSrc) n(k int) int { return s.next() % k }

func (s *fzSrc) done() bool { return s.i >= len(s.b) }

// fzVal is a value of the graph being built.
type fzVal struct {
	n     *G.Node
	name  string // in the listing: x3 for inputs, v7 for the others
	shape []int
	mag   float64 // a bound on |value|
	lo    float64 // a lower bound on the value, where pos says it is positive
	pos   bool
	deps  []bool // deps[i]: depends on input i through differentiable ops
	// exact: an input, or one correctly rounded op of an input and a
	// constant: every leg has the same value, bit for bit, so an op with a
	// jump (sign, floor, a comparison; abs's derivative) may take it. A
	// computed value can be a zero in exact arithmetic (x − mean(x) along a
	// row of one) that rounding leaves on either side of the jump.
	exact bool
}

// fzGraph is one decoded graph.
type fzGraph struct {
	g       *G.ExprGraph
	prog    tensor.Dtype // the program's dtype: the decisions depend on it only
	dt      tensor.Dtype // this build's dtype
	grad    bool         // a scalar loss and its gradients
	twoRuns bool         // each machine runs twice, with new inputs the second time
	maxGrp  int          // fusion.WithMaxGroup (0: the default)
	zero    bool         // one size is zero
	readAll bool         // tilefuse's machines run with WithReadAll(true): every value is compared
	target  bool         // the fused machine with products writes the H200's kernels (WithTarget)

	m, n, k, b int
	elems      int // the elements of all values so far
	vals       []*fzVal
	byNode     map[*G.Node]*fzVal
	inputs     []*fzInput
	listing    []string
	kept       []*fzVal // values compared although they feed others (fusion.WithKeep)
	reads      []fzRead // gorgonia.Read statements

	loss  *G.Node
	wrts  []*fzInput
	grads G.Nodes

	// why Gorgonia's tape machine is not run, or its forward values or
	// gradients not compared ("" where they are)
	noGorgonia, gorgoniaFwd, gorgoniaGrad string

	src fzSrc
}

// fzInput is an input node and how its values are drawn.
type fzInput struct {
	n    *G.Node
	name string
	mask bool // 0 or 1 (an attention mask), else uniform in [-1, 1]
}

// fzBuild decodes data into a graph whose ops compute in dt when dt is not
// nil, in the program's own dtype otherwise. It reports a graph it could not
// build as an error (a bug of the generator, or of Gorgonia's graph
// construction); Gorgonia's G.Must panics become that error.
func fzBuild(data []byte, dt tensor.Dtype) (fg *fzGraph, err error) {
	fg = &fzGraph{g: G.NewGraph(), byNode: map[*G.Node]*fzVal{}, src: fzSrc{b: data}}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("building the graph: %v\n%s", r, fg.String())
		}
	}()
	s := &fg.src
	h := s.next()
	fg.prog = tensor.Float64
	if h&1 != 0 {
		fg.prog = tensor.Float32
	}
	fg.dt = fg.prog
	if dt != (tensor.Dtype{}) {
		fg.dt = dt
	}
	fg.grad = h&2 != 0
	fg.twoRuns = h&4 != 0
	fg.maxGrp = []int{0, 2, 5, 0}[h>>3&3]
	fg.zero = h>>5 == 7
	fg.readAll = h>>5&1 != 0 && !fg.zero
	fg.target = h>>6&1 != 0 && !fg.zero
	var dims [4]int
	for i := range dims {
		dims[i] = s.next()
	}
	fg.m, fg.n, fg.k, fg.b = fzDims[dims[0]%len(fzDims)], fzDims[dims[1]%len(fzDims)], fzDims[dims[2]%len(fzDims)], fzDims[dims[3]%len(fzDims)]
	if dims[1] >= 240 { // a long row: the other sizes stay small
		fg.n = fzLongRows[dims[1]%len(fzLongRows)]
		fg.m, fg.k, fg.b = min(fg.m, 3), min(fg.k, 16), min(fg.b, 2)
	}
	if fg.zero {
		// Gorgonia's tape machine panics on its goroutine on empty tensors
		// (index out of range in tensor's unary loops): it is not run
		fg.noGorgonia = "a zero size: Gorgonia's tape machine panics on empty tensors"
		switch h & 3 {
		case 0:
			fg.m = 0
		case 1:
			fg.n = 0
		case 2:
			fg.k = 0
		default:
			fg.b = 0
		}
	}
	fg.note("%v program (built in %v), M=%d N=%d K=%d B=%d, grad=%v, two runs=%v, max group=%d, read all=%v, H200 target=%v",
		fg.prog, fg.dt, fg.m, fg.n, fg.k, fg.b, fg.grad, fg.twoRuns, fg.maxGrp, fg.readAll, fg.target)
	fg.input([]int{fg.m, fg.n}, false)
	for step := 0; step < fzMaxSteps && !s.done() && fg.elems <= fzBudget; step++ {
		op := fzSteps[s.n(len(fzSteps))]
		op.build(fg)
	}
	fg.finish()
	return fg, nil
}

func (fg *fzGraph) note(format string, args ...any) {
	fg.listing = append(fg.listing, fmt.Sprintf(format, args...))
}

// String is the graph's listing: the program, one line per node built.
func (fg *fzGraph) String() string { return strings.Join(fg.listing, "\n") }

func (fg *fzGraph) f64() bool { return fg.prog == tensor.Float64 }

// input makes a new input of the given shape.
func (fg *fzGraph) input(shape []int, mask bool) *fzVal {
	name := fmt.Sprintf("x%d", len(fg.inputs))
	var n *G.Node
	switch len(shape) {
	case 0:
		n = G.NewScalar(fg.g, fg.dt, G.WithName(name))
	case 1:
		n = G.NewVector(fg.g, fg.dt, G.WithShape(shape...), G.WithName(name))
	case 2:
		n = G.NewMatrix(fg.g, fg.dt, G.WithShape(shape...), G.WithName(name))
	default:
		n = G.NewTensor(fg.g, fg.dt, len(shape), G.WithShape(shape...), G.WithName(name))
	}
	fg.elems += shapeSize(shape)
	in := &fzInput{n: n, name: name, mask: mask}
	fg.inputs = append(fg.inputs, in)
	v := &fzVal{n: n, name: name, shape: slices.Clone(shape), mag: 1, deps: make([]bool, len(fg.inputs)), exact: true}
	v.deps[len(fg.inputs)-1] = true
	if mask {
		v.lo = 0
	}
	fg.vals = append(fg.vals, v)
	fg.byNode[n] = v
	kind := "uniform in [-1, 1]"
	if mask {
		kind = "0 or 1"
	}
	fg.note("%s = input %v, %s", name, shape, kind)
	return v
}

// add records a node built from operands: its magnitude bound is mag. A
// node Gorgonia hash-conses to an existing one is that value.
func (fg *fzGraph) add(n *G.Node, mag float64, diff bool, what string, operands ...*fzVal) *fzVal {
	if v, ok := fg.byNode[n]; ok {
		v.mag = max(v.mag, mag)
		fg.note("%s = %s(…): Gorgonia gives the node %s again", v.name, what, v.name)
		return v
	}
	v := &fzVal{n: n, name: fmt.Sprintf("v%d", len(fg.vals)), shape: slices.Clone([]int(n.Shape())), mag: mag, deps: make([]bool, len(fg.inputs))}
	if diff {
		for _, o := range operands {
			for i, d := range o.deps {
				v.deps[i] = v.deps[i] || d
			}
		}
	}
	fg.vals = append(fg.vals, v)
	fg.byNode[n] = v
	fg.elems += shapeSize(v.shape)
	names := make([]string, len(operands))
	for i, o := range operands {
		names[i] = o.name
	}
	fg.note("%s = %s(%s) %v |.| ≤ %.3g", v.name, what, strings.Join(names, ", "), v.shape, mag)
	return v
}

func (fg *fzGraph) constant(c float64) *G.Node {
	if fg.dt == tensor.Float32 {
		return G.NewConstant(float32(c))
	}
	return G.NewConstant(c)
}

// pick chooses a value of the given shape, or makes a new input of it.
func (fg *fzGraph) pick(shape []int) *fzVal {
	var cands []*fzVal
	for _, v := range fg.vals {
		if slices.Equal(v.shape, shape) {
			cands = append(cands, v)
		}
	}
	c := fg.src.next()
	if len(cands) == 0 || c%4 == 0 {
		return fg.input(shape, false)
	}
	return cands[len(cands)-1-(c/4)%len(cands)]
}

// any chooses a value of rank at least minRank (recent ones more often), or
// makes a new [M, N] input.
func (fg *fzGraph) any(minRank int) *fzVal {
	var cands []*fzVal
	for _, v := range fg.vals {
		if len(v.shape) >= minRank {
			cands = append(cands, v)
		}
	}
	c := fg.src.next()
	if len(cands) == 0 {
		return fg.input([]int{fg.m, fg.n}, false)
	}
	if c < 128 { // one of the last three
		return cands[len(cands)-1-c%min(3, len(cands))]
	}
	return cands[c%len(cands)]
}

// exactVal chooses an exact value (see fzVal.exact), or makes a new input.
func (fg *fzGraph) exactVal() *fzVal {
	var cands []*fzVal
	for _, v := range fg.vals {
		if v.exact {
			cands = append(cands, v)
		}
	}
	c := fg.src.next()
	if len(cands) == 0 || c%4 == 0 {
		return fg.input([]int{fg.m, fg.n}, false)
	}
	return cands[len(cands)-1-(c/4)%len(cands)]
}

// exactPick is pick among exact values.
func (fg *fzGraph) exactPick(shape []int) *fzVal {
	var cands []*fzVal
	for _, v := range fg.vals {
		if v.exact && slices.Equal(v.shape, shape) {
			cands = append(cands, v)
		}
	}
	c := fg.src.next()
	if len(cands) == 0 || c%4 == 0 {
		return fg.input(shape, false)
	}
	return cands[len(cands)-1-(c/4)%len(cands)]
}

// abs is |v|, or v² where the gradient's jump at zero could show (a grad
// program and a v that is not exact).
func (fg *fzGraph) abs(v *fzVal) *fzVal {
	if fg.grad && !v.exact {
		v = fg.scale(v, 30)
		return fg.add(G.Must(G.Square(v.n)), v.mag*v.mag, true, "Square (for Abs: not exact)", v)
	}
	return fg.add(G.Must(G.Abs(v.n)), v.mag, true, "Abs", v)
}

// scale multiplies v by a power of two (exact in both dtypes) so that its
// bound is at most limit.
func (fg *fzGraph) scale(v *fzVal, limit float64) *fzVal {
	if v.mag <= limit {
		return v
	}
	e := math.Ceil(math.Log2(v.mag / limit))
	c := math.Exp2(-e)
	s := fg.add(G.Must(G.Mul(v.n, fg.constant(c))), v.mag*c, true, fmt.Sprintf("Mul ·2^-%g", e), v)
	s.pos, s.lo = v.pos, v.lo*c
	return s
}

// positive makes a value bounded below by a positive number from v (for
// log, sqrt, 1/x, division, pow).
func (fg *fzGraph) positive(v *fzVal) *fzVal {
	if v.pos && v.lo >= 0.25 {
		return v
	}
	c := []float64{0.5, 1, 0.25}[fg.src.n(3)]
	switch fg.src.n(4) {
	case 0: // x² + c
		v = fg.scale(v, 30)
		sq := fg.add(G.Must(G.Square(v.n)), v.mag*v.mag, true, "Square", v)
		p := fg.add(G.Must(G.Add(sq.n, fg.constant(c))), sq.mag+c, true, fmt.Sprintf("Add %g", c), sq)
		p.pos, p.lo = true, c
		return p
	case 1: // |x| + c
		a := fg.abs(v)
		p := fg.add(G.Must(G.Add(a.n, fg.constant(c))), a.mag+c, true, fmt.Sprintf("Add %g", c), a)
		p.pos, p.lo = true, c
		return p
	case 2: // e^tanh(x)
		t := fg.add(G.Must(G.Tanh(v.n)), 1, true, "Tanh", v)
		p := fg.add(G.Must(G.Exp(t.n)), math.E, true, "Exp", t)
		p.pos, p.lo = true, 1/math.E
		return p
	default: // softplus(x) + c
		v = fg.scale(v, 14)
		sp := fg.add(G.Must(G.Softplus(v.n)), v.mag+1, true, "Softplus", v)
		p := fg.add(G.Must(G.Add(sp.n, fg.constant(c))), sp.mag+c, true, fmt.Sprintf("Add %g", c), sp)
		p.pos, p.lo = true, c
		return p
	}
}

// fzStep builds one group of ops.
type fzStep struct {
	name  string
	build func(fg *fzGraph)
}

var fzSteps []fzStep

func init() {
	fzSteps = []fzStep{
		{"unary", (*fzGraph).unary},
		{"unary", (*fzGraph).unary},
		{"binary", (*fzGraph).binary},
		{"binary", (*fzGraph).binary},
		{"scalar constant", (*fzGraph).withConstant},
		{"broadcast", (*fzGraph).broadcast},
		{"broadcast", (*fzGraph).broadcast},
		{"reduction", (*fzGraph).reduce},
		{"reduction", (*fzGraph).reduce},
		{"row reduction broadcast back", (*fzGraph).rowBack},
		{"softmax", (*fzGraph).softmax},
		{"layer norm", (*fzGraph).layerNorm},
		{"matrix product", (*fzGraph).matMul},
		{"batched product", (*fzGraph).batchedMatMul},
		{"attention", (*fzGraph).attention},
		{"reshape", (*fzGraph).reshape},
		{"transpose", (*fzGraph).transpose},
		{"slice", (*fzGraph).slice},
		{"concat", (*fzGraph).concat},
		{"keep", (*fzGraph).keep},
	}
}

// unary applies an elementwise function to a value.
func (fg *fzGraph) unary() {
	v := fg.any(0)
	op := fg.src.n(20)
	if !fg.f64() && op >= 17 {
		op -= 3 // jumps in float64 programs only
	}
	switch op {
	case 0:
		fg.add(G.Must(G.Tanh(v.n)), 1, true, "Tanh", v)
	case 1:
		// Gorgonia's sigmoid is exactly 1 above 19 (float64) and 15 (float32)
		v = fg.scale(v, 15)
		fg.add(G.Must(G.Sigmoid(v.n)), 1, true, "Sigmoid", v)
	case 2:
		fg.add(G.Must(G.Sin(v.n)), 1, true, "Sin", v)
	case 3:
		fg.add(G.Must(G.Cos(v.n)), 1, true, "Cos", v)
	case 4:
		fg.add(G.Must(G.Neg(v.n)), v.mag, true, "Neg", v)
	case 5:
		fg.abs(v)
	case 6:
		v = fg.scale(v, 14)
		fg.add(G.Must(G.Softplus(v.n)), v.mag+1, true, "Softplus", v)
	case 7:
		v = fg.scale(v, fzSquash)
		fg.add(G.Must(G.Exp(v.n)), math.Exp(v.mag), true, "Exp", v)
	case 8:
		v = fg.scale(v, fzSquash)
		fg.add(G.Must(G.Expm1(v.n)), math.Exp(v.mag), true, "Expm1", v)
	case 9:
		v = fg.scale(v, 30)
		fg.add(G.Must(G.Square(v.n)), v.mag*v.mag, true, "Square", v)
	case 10:
		v = fg.scale(v, 8)
		fg.add(G.Must(G.Cube(v.n)), v.mag*v.mag*v.mag, true, "Cube", v)
	case 11:
		p := fg.positive(v)
		fg.add(G.Must(G.Log(p.n)), math.Max(math.Abs(math.Log(p.lo)), math.Log(p.mag)), true, "Log", p)
	case 12:
		p := fg.positive(v)
		fg.add(G.Must(G.Log2(p.n)), math.Max(math.Abs(math.Log2(p.lo)), math.Log2(p.mag)), true, "Log2", p)
	case 13:
		a := fg.abs(v)
		fg.add(G.Must(G.Log1p(a.n)), math.Log1p(a.mag), true, "Log1p", a)
	case 14:
		p := fg.positive(v)
		fg.add(G.Must(G.Sqrt(p.n)), math.Sqrt(p.mag), true, "Sqrt", p)
	case 15:
		p := fg.positive(v)
		if fg.grad {
			// Gorgonia's gradient of InverseSqrt is −dy/(2y³), not −dy·y³/2
			fg.gorgoniaGrad = "InverseSqrt: Gorgonia's gradient is wrong"
		}
		fg.add(G.Must(G.InverseSqrt(p.n)), 1/math.Sqrt(p.lo), true, "InverseSqrt", p)
	case 16:
		p := fg.positive(v)
		fg.add(G.Must(G.Inverse(p.n)), 1/p.lo, true, "Inverse", p)
	case 17:
		v = fg.exactVal()
		fg.add(G.Must(G.Sign(v.n)), 1, false, "Sign", v)
	case 18:
		v = fg.exactVal()
		fg.add(G.Must(G.Floor(v.n)), v.mag+1, false, "Floor", v)
	default:
		v = fg.exactVal()
		fg.add(G.Must(G.Ceil(v.n)), v.mag+1, false, "Ceil", v)
	}
}

// binary combines two values of one shape (or a value and a scalar value).
func (fg *fzGraph) binary() {
	a := fg.any(0)
	var b *fzVal
	if fg.src.n(6) == 0 { // a scalar value: scalars broadcast
		b = fg.pick(nil)
	} else {
		b = fg.pick(a.shape)
	}
	if fg.src.n(2) == 0 {
		a, b = b, a
	}
	op := fg.src.n(8)
	if !fg.f64() && op == 7 {
		op = fg.src.n(7)
	}
	switch op {
	case 0, 1:
		fg.add(G.Must(G.Add(a.n, b.n)), a.mag+b.mag, true, "Add", a, b)
	case 2:
		fg.add(G.Must(G.Sub(a.n, b.n)), a.mag+b.mag, true, "Sub", a, b)
	case 3, 4:
		a, b = fg.scale(a, 100), fg.scale(b, 100)
		fg.add(G.Must(G.HadamardProd(a.n, b.n)), a.mag*b.mag, true, "HadamardProd", a, b)
	case 5:
		p := fg.positive(b)
		fg.add(G.Must(G.HadamardDiv(a.n, p.n)), a.mag/p.lo, true, "HadamardDiv", a, p)
	case 6: // x^y, x bounded away from zero and y in [-1, 1]
		p := fg.positive(fg.scale(a, 30))
		e := fg.add(G.Must(G.Tanh(b.n)), 1, true, "Tanh", b)
		fg.add(G.Must(G.Pow(p.n, e.n)), math.Max(p.mag, 1/p.lo), true, "Pow", p, e)
	default: // a comparison giving 1 or 0 in the operands' dtype, of exact values
		cmp := []func(a, b *G.Node, retSame bool) (*G.Node, error){G.Lt, G.Gt, G.Lte, G.Gte, G.Eq, G.Ne}
		i := fg.src.n(len(cmp))
		a = fg.exactVal()
		b = fg.exactPick(a.shape)
		fg.add(G.Must(cmp[i](a.n, b.n, true)), 1, false, []string{"Lt", "Gt", "Lte", "Gte", "Eq", "Ne"}[i], a, b)
	}
}

// withConstant combines a value with a scalar constant, either side. One
// such op of an input is exact (fzVal.exact).
func (fg *fzGraph) withConstant() {
	v := fg.any(0)
	c := []float64{0.5, -1.5, 2, 3, -0.125, 1e-3, 7.25}[fg.src.n(7)]
	left := fg.src.n(2) == 0
	k := fg.constant(c)
	in := v.n.Op() == nil
	var r *fzVal
	switch fg.src.n(4) {
	case 0:
		if left {
			r = fg.add(G.Must(G.Add(k, v.n)), v.mag+math.Abs(c), true, fmt.Sprintf("Add %g+", c), v)
		} else {
			r = fg.add(G.Must(G.Add(v.n, k)), v.mag+math.Abs(c), true, fmt.Sprintf("Add +%g", c), v)
		}
	case 1:
		if left {
			r = fg.add(G.Must(G.Sub(k, v.n)), v.mag+math.Abs(c), true, fmt.Sprintf("Sub %g-", c), v)
		} else {
			r = fg.add(G.Must(G.Sub(v.n, k)), v.mag+math.Abs(c), true, fmt.Sprintf("Sub -%g", c), v)
		}
	case 2:
		if v.mag > 1e3 {
			v, in = fg.scale(v, 1e3), false
		}
		if left {
			r = fg.add(G.Must(G.Mul(k, v.n)), v.mag*math.Abs(c), true, fmt.Sprintf("Mul %g·", c), v)
		} else {
			r = fg.add(G.Must(G.Mul(v.n, k)), v.mag*math.Abs(c), true, fmt.Sprintf("Mul ·%g", c), v)
		}
	default:
		if left {
			p := fg.positive(v)
			fg.add(G.Must(G.Div(k, p.n)), math.Abs(c)/p.lo, true, fmt.Sprintf("Div %g/", c), p)
			return
		}
		r = fg.add(G.Must(G.Div(v.n, k)), v.mag/math.Abs(c), true, fmt.Sprintf("Div /%g", c), v)
	}
	if in && r != v {
		r.exact = true
	}
}

// broadcast combines a value of rank 2 or 3 with a smaller one along the
// axes it lacks (BroadcastAdd and its kin with a pattern).
func (fg *fzGraph) broadcast() {
	x := fg.any(2)
	if len(x.shape) < 2 {
		return
	}
	r := len(x.shape)
	// the axes the small operand lacks: a non-empty, proper subset
	var axes []byte
	for len(axes) == 0 || len(axes) == r {
		axes = axes[:0]
		bits := fg.src.next()
		for i := 0; i < r; i++ {
			if bits>>i&1 != 0 {
				axes = append(axes, byte(i))
			}
		}
		if len(axes) == 0 || len(axes) == r {
			axes = []byte{byte(bits % r)}
		}
	}
	var small []int
	for i, d := range x.shape {
		if !slices.Contains(axes, byte(i)) {
			small = append(small, d)
		}
	}
	y := fg.pick(small)
	left := fg.src.n(3) == 0 // the small operand on the left
	op := fg.src.n(4)
	a, b := x, y
	if left {
		a, b = y, x
	}
	lp, rp := []byte(nil), axes
	if left {
		lp, rp = axes, nil
	}
	what := fmt.Sprintf("%%s %v", axes)
	switch op {
	case 0:
		fg.add(G.Must(G.BroadcastAdd(a.n, b.n, lp, rp)), a.mag+b.mag, true, fmt.Sprintf(what, "BroadcastAdd"), a, b)
	case 1:
		fg.add(G.Must(G.BroadcastSub(a.n, b.n, lp, rp)), a.mag+b.mag, true, fmt.Sprintf(what, "BroadcastSub"), a, b)
	case 2:
		a, b = fg.scale(a, 100), fg.scale(b, 100)
		fg.add(G.Must(G.BroadcastHadamardProd(a.n, b.n, lp, rp)), a.mag*b.mag, true, fmt.Sprintf(what, "BroadcastHadamardProd"), a, b)
	default:
		b = fg.positive(b)
		fg.add(G.Must(G.BroadcastHadamardDiv(a.n, b.n, lp, rp)), a.mag/b.lo, true, fmt.Sprintf(what, "BroadcastHadamardDiv"), a, b)
	}
}

// reduce sums, maximises or averages a value along some of its axes (or
// all of them: a scalar).
func (fg *fzGraph) reduce() {
	x := fg.any(1)
	if len(x.shape) == 0 {
		return
	}
	r := len(x.shape)
	bits := fg.src.next()
	var axes []int
	for i := 0; i < r; i++ {
		if bits>>i&1 != 0 {
			axes = append(axes, i)
		}
	}
	if len(axes) == 0 {
		axes = []int{bits % r}
	}
	count := 1
	for _, a := range axes {
		count *= x.shape[a]
	}
	all := len(axes) == r && fg.src.n(2) == 0 // written without axes
	var along []int
	if !all {
		along = axes
	}
	switch fg.src.n(3) {
	case 0:
		fg.add(G.Must(G.Sum(x.n, along...)), x.mag*float64(max(count, 1)), true, fmt.Sprintf("Sum%v", along), x)
	case 1:
		fg.add(G.Must(G.Max(x.n, along...)), x.mag, true, fmt.Sprintf("Max%v", along), x)
	default: // Mean(x, -1) panics in Gorgonia: the axes are always written out
		fg.add(G.Must(G.Mean(x.n, along...)), x.mag, true, fmt.Sprintf("Mean%v", along), x)
	}
}

// rowBack reduces the last axis and broadcasts the result back over it:
// x − max, x − mean, x / sum (the parts of a softmax written out).
func (fg *fzGraph) rowBack() {
	x := fg.any(2)
	r := len(x.shape)
	if r < 2 {
		return
	}
	last := r - 1
	pat := []byte{byte(last)}
	switch fg.src.n(4) {
	case 0:
		m := fg.add(G.Must(G.Max(x.n, last)), x.mag, true, fmt.Sprintf("Max[%d]", last), x)
		fg.add(G.Must(G.BroadcastSub(x.n, m.n, nil, pat)), 2*x.mag, true, "BroadcastSub [last]", x, m)
	case 1:
		m := fg.add(G.Must(G.Mean(x.n, last)), x.mag, true, fmt.Sprintf("Mean[%d]", last), x)
		fg.add(G.Must(G.BroadcastSub(x.n, m.n, nil, pat)), 2*x.mag, true, "BroadcastSub [last]", x, m)
	case 2: // softmax written op by op
		x = fg.scale(x, fzSquash)
		m := fg.add(G.Must(G.Max(x.n, last)), x.mag, true, fmt.Sprintf("Max[%d]", last), x)
		d := fg.add(G.Must(G.BroadcastSub(x.n, m.n, nil, pat)), 2*x.mag, true, "BroadcastSub [last]", x, m)
		e := fg.add(G.Must(G.Exp(d.n)), 1, true, "Exp", d)
		s := fg.add(G.Must(G.Sum(e.n, last)), float64(x.shape[last]), true, fmt.Sprintf("Sum[%d]", last), e)
		// a row's sum is at least 1 (its maximum's term)
		fg.add(G.Must(G.BroadcastHadamardDiv(e.n, s.n, nil, pat)), 1, true, "BroadcastHadamardDiv [last]", e, s)
	default:
		p := fg.positive(x)
		s := fg.add(G.Must(G.Sum(p.n, last)), p.mag*float64(x.shape[last]), true, fmt.Sprintf("Sum[%d]", last), p)
		s.pos, s.lo = x.shape[last] > 0, p.lo*float64(x.shape[last])
		if !s.pos {
			return
		}
		fg.add(G.Must(G.BroadcastHadamardDiv(p.n, s.n, nil, pat)), 1, true, "BroadcastHadamardDiv [last]", p, s)
	}
}

// softmax: Gorgonia's SoftMax along the last axis, its LogSoftMax, or
// Log(SoftMax(x)) (which Gorgonia rewrites into a log-softmax in place).
func (fg *fzGraph) softmax() {
	x := fg.any(1)
	if len(x.shape) == 0 {
		return
	}
	// Gorgonia starts every row's maximum at the tensor's first element, so
	// a row far below it underflows to 0/0: a bound of 8 keeps every row
	// within 16 of it
	x = fg.scale(x, 8)
	lsm := 2*x.mag + math.Log(float64(max(1, x.shape[len(x.shape)-1]))) + 1
	switch fg.src.n(4) {
	case 0, 1:
		fg.add(G.Must(G.SoftMax(x.n)), 1, true, "SoftMax", x)
	case 2:
		fg.add(G.Must(G.LogSoftMax(x.n)), lsm, true, "LogSoftMax", x)
	default:
		sm := G.Must(G.SoftMax(x.n))
		if _, seen := fg.byNode[sm]; seen { // rewriting it would change its other users
			fg.add(G.Must(G.LogSoftMax(x.n)), lsm, true, "LogSoftMax", x)
			return
		}
		fg.add(G.Must(G.Log(sm)), lsm, true, "Log∘SoftMax (rewritten in place)", x)
	}
}

// layerNorm normalises the last axis of a value of rank 2 or 3 (plus a
// random input, so that no row is near constant), with a gain and a bias.
func (fg *fzGraph) layerNorm() {
	x := fg.any(2)
	r := len(x.shape)
	if r < 2 {
		return
	}
	last, n := r-1, x.shape[r-1]
	pat := []byte{byte(last)}
	x = fg.scale(x, 1)
	noise := fg.input(x.shape, false)
	x = fg.add(G.Must(G.Add(x.n, noise.n)), x.mag+1, true, "Add", x, noise)
	mu := fg.add(G.Must(G.Mean(x.n, last)), x.mag, true, fmt.Sprintf("Mean[%d]", last), x)
	xc := fg.add(G.Must(G.BroadcastSub(x.n, mu.n, nil, pat)), 2*x.mag, true, "BroadcastSub [last]", x, mu)
	sq := fg.add(G.Must(G.Square(xc.n)), 4*x.mag*x.mag, true, "Square", xc)
	va := fg.add(G.Must(G.Mean(sq.n, last)), sq.mag, true, fmt.Sprintf("Mean[%d]", last), sq)
	eps := []float64{1e-5, 1e-3}[fg.src.n(2)]
	ve := fg.add(G.Must(G.Add(va.n, fg.constant(eps))), va.mag+eps, true, fmt.Sprintf("Add %g", eps), va)
	var rstd *fzVal
	rmag := 1 / math.Sqrt(eps)
	switch fg.src.n(3) {
	case 0:
		sd := fg.add(G.Must(G.Sqrt(ve.n)), math.Sqrt(ve.mag), true, "Sqrt", ve)
		rstd = fg.add(G.Must(G.Inverse(sd.n)), rmag, true, "Inverse", sd)
	case 1:
		if fg.grad {
			fg.gorgoniaGrad = "InverseSqrt: Gorgonia's gradient is wrong"
		}
		rstd = fg.add(G.Must(G.InverseSqrt(ve.n)), rmag, true, "InverseSqrt", ve)
	default:
		rstd = fg.add(G.Must(G.Pow(ve.n, fg.constant(-0.5))), rmag, true, "Pow -0.5", ve)
	}
	// |x − mean| / std ≤ √n
	y := fg.add(G.Must(G.BroadcastHadamardProd(xc.n, rstd.n, nil, pat)), math.Sqrt(float64(n)), true, "BroadcastHadamardProd [last]", xc, rstd)
	if fg.src.n(2) == 0 {
		return
	}
	lead := make([]byte, last)
	for i := range lead {
		lead[i] = byte(i)
	}
	gain, bias := fg.pick([]int{n}), fg.pick([]int{n})
	y = fg.add(G.Must(G.BroadcastHadamardProd(y.n, gain.n, nil, lead)), y.mag*gain.mag, true, fmt.Sprintf("BroadcastHadamardProd %v", lead), y, gain)
	fg.add(G.Must(G.BroadcastAdd(y.n, bias.n, nil, lead)), y.mag+bias.mag, true, fmt.Sprintf("BroadcastAdd %v", lead), y, bias)
}

// dim picks one of the graph's sizes.
func (fg *fzGraph) dim() int { return []int{fg.m, fg.n, fg.k, fg.b}[fg.src.n(4)] }

// fits reports whether a value of this shape is within the bounds.
func (fg *fzGraph) fits(shape ...int) bool {
	n := shapeSize(shape)
	return n <= fzMaxElems && fg.elems+n <= fzBudget
}

// matMul: a 2-D product, either operand possibly transposed first
// (Gorgonia's Transpose, left to it), or a matrix-vector product.
func (fg *fzGraph) matMul() {
	a := fg.any(2)
	if len(a.shape) != 2 {
		return
	}
	p, q := a.shape[0], a.shape[1]
	if fg.src.n(3) == 0 && fg.fits(q, p) { // use aᵀ
		a = fg.add(G.Must(G.Transpose(a.n)), a.mag, true, "Transpose", a)
		p, q = q, p
	}
	r := fg.dim()
	if !fg.fits(q, r) || !fg.fits(p, r) || p*q*r > fzMaxMACs {
		return
	}
	var b *fzVal
	switch fg.src.n(4) {
	case 0: // bᵀ of a [r, q] value
		bt := fg.pick([]int{r, q})
		b = fg.add(G.Must(G.Transpose(bt.n)), bt.mag, true, "Transpose", bt)
	case 1: // a matrix-vector product
		v := fg.pick([]int{q})
		v = fg.scale(v, 8)
		a = fg.scale(a, 8)
		fg.add(G.Must(G.Mul(a.n, v.n)), a.mag*v.mag*float64(q), true, "Mul (matrix·vector)", a, v)
		return
	default:
		b = fg.pick([]int{q, r})
	}
	a, b = fg.scale(a, 8), fg.scale(b, 8)
	fg.add(G.Must(G.Mul(a.n, b.n)), a.mag*b.mag*float64(q), true, "Mul", a, b)
}

// batchedMatMul: a batch of products over 3-D operands, stored transposed
// or not.
func (fg *fzGraph) batchedMatMul() {
	ta, tb := fg.src.n(2) == 1, fg.src.n(3) == 1
	bs, p, q, r := fg.b, fg.dim(), fg.dim(), fg.dim()
	if !fg.fits(bs, p, q) || !fg.fits(bs, q, r) || !fg.fits(bs, p, r) || bs*p*q*r > fzMaxMACs {
		return
	}
	as, bsh := []int{bs, p, q}, []int{bs, q, r}
	if ta {
		as = []int{bs, q, p}
	}
	if tb {
		bsh = []int{bs, r, q}
	}
	a, b := fg.pick(as), fg.pick(bsh)
	a, b = fg.scale(a, 8), fg.scale(b, 8)
	fg.add(G.Must(G.BatchedMatMul(a.n, b.n, ta, tb)), a.mag*b.mag*float64(q), true, fmt.Sprintf("BatchedMatMul(transA=%v, transB=%v)", ta, tb), a, b)
}

// attention: softmax(q·kᵀ·scale [+ mask])·v through batched products, with
// q, k and v inputs or per-head projections of a 2-D value reshaped to 3-D.
func (fg *fzGraph) attention() {
	bs, s, d := max(fg.b, 1), fg.m, max(fg.k, 1)
	if fg.zero {
		bs, d = fg.b, fg.k
	}
	if !fg.fits(bs, s, s) || !fg.fits(bs, s, d) || bs*s*s*d > fzMaxMACs {
		return
	}
	proj := fg.src.n(2) == 0 && bs*s*fg.n*d <= fzMaxMACs && fg.fits(bs*s, fg.n)
	var x *fzVal
	if proj {
		x = fg.pick([]int{bs * s, fg.n})
		x = fg.scale(x, 2)
	}
	qkv := func(name string) *fzVal {
		if !proj {
			return fg.pick([]int{bs, s, d})
		}
		w := fg.pick([]int{fg.n, d})
		w = fg.scale(w, 2)
		m := fg.add(G.Must(G.Mul(x.n, w.n)), x.mag*w.mag*float64(fg.n), true, "Mul ("+name+" projection)", x, w)
		return fg.add(G.Must(G.Reshape(m.n, tensor.Shape{bs, s, d})), m.mag, true, "Reshape", m)
	}
	q, k, v := qkv("q"), qkv("k"), qkv("v")
	q, k, v = fg.scale(q, 2), fg.scale(k, 2), fg.scale(v, 2)
	sc := fg.add(G.Must(G.BatchedMatMul(q.n, k.n, false, true)), q.mag*k.mag*float64(d), true, "BatchedMatMul(q, k, transB)", q, k)
	c := 1 / math.Sqrt(float64(d))
	sc = fg.add(G.Must(G.Mul(sc.n, fg.constant(c))), sc.mag*c, true, fmt.Sprintf("Mul ·%.4g", c), sc)
	sc = fg.scale(sc, 8)
	switch fg.src.n(3) {
	case 1: // an additive mask: 0/1 times a large negative number
		mask := fg.input([]int{bs, s, s}, true)
		big := -30.0
		if fg.f64() && fg.src.n(2) == 0 {
			big = -1e9
			// a row whose every key is masked lies 1e9 below the tensor's
			// first element, where Gorgonia's SoftMax starts each row's
			// maximum: e^-1e9 = 0 everywhere, and 0/0
			fg.gorgoniaFwd = "a -1e9 mask: Gorgonia's SoftMax gives NaN for a fully masked row"
			fg.gorgoniaGrad = fg.gorgoniaFwd
		}
		mm := fg.add(G.Must(G.Mul(mask.n, fg.constant(big))), -big, true, fmt.Sprintf("Mul ·%g", big), mask)
		sc = fg.add(G.Must(G.Add(sc.n, mm.n)), sc.mag-big, true, "Add (mask)", sc, mm)
	case 2: // a mask broadcast over the batch
		mask := fg.input([]int{s, s}, true)
		mm := fg.add(G.Must(G.Mul(mask.n, fg.constant(-30.0))), 30, true, "Mul ·-30", mask)
		sc = fg.add(G.Must(G.BroadcastAdd(sc.n, mm.n, nil, []byte{0})), sc.mag+30, true, "BroadcastAdd [0] (mask)", sc, mm)
	}
	pr := fg.add(G.Must(G.SoftMax(sc.n)), 1, true, "SoftMax", sc)
	out := fg.add(G.Must(G.BatchedMatMul(pr.n, v.n, false, false)), v.mag*float64(s), true, "BatchedMatMul(probs, v)", pr, v)
	if proj && fg.src.n(2) == 0 {
		fg.add(G.Must(G.Reshape(out.n, tensor.Shape{bs * s, d})), out.mag, true, "Reshape", out)
	}
}

// reshape: flatten, merge the two leading axes, or split the first axis.
func (fg *fzGraph) reshape() {
	x := fg.any(1)
	if len(x.shape) == 0 {
		return
	}
	var to []int
	switch fg.src.n(3) {
	case 0:
		to = []int{shapeSize(x.shape)}
	case 1:
		if len(x.shape) < 2 {
			return
		}
		to = append([]int{x.shape[0] * x.shape[1]}, x.shape[2:]...)
	default:
		d := x.shape[0]
		f := 1
		for _, c := range []int{fg.b, 2, 3, 4} {
			if c > 1 && d%c == 0 && d > c {
				f = c
				break
			}
		}
		if f == 1 || len(x.shape) >= 3 {
			return
		}
		to = append([]int{f, d / f}, x.shape[1:]...)
	}
	fg.add(G.Must(G.Reshape(x.n, tensor.Shape(to))), x.mag, true, fmt.Sprintf("Reshape%v", to), x)
}

func shapeSize(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// transpose: Gorgonia's Transpose (an injective op: fused).
func (fg *fzGraph) transpose() {
	x := fg.any(2)
	switch len(x.shape) {
	case 2:
		fg.add(G.Must(G.Transpose(x.n)), x.mag, true, "Transpose", x)
	case 3:
		perm := [][]int{{0, 2, 1}, {1, 0, 2}, {2, 1, 0}}[fg.src.n(3)]
		fg.add(G.Must(G.Transpose(x.n, perm...)), x.mag, true, fmt.Sprintf("Transpose%v", perm), x)
	}
}

// slice takes a range of one axis (step 1, the axis kept).
func (fg *fzGraph) slice() {
	x := fg.any(1)
	r := len(x.shape)
	if r == 0 {
		return
	}
	axis := fg.src.n(r)
	d := x.shape[axis]
	if d < 2 {
		// a range of one drops the axis at run time, not in the node's
		// shape: Gorgonia's own machine then panics (a scalar where Sum
		// wants a tensor; testdata/fuzz/FuzzFusion/gorgonia-slice-of-one)
		return
	}
	start := fg.src.n(d - 1)
	end := start + 2 + fg.src.n(d-start-1) // at least two
	sl := make([]tensor.Slice, axis+1)
	sl[axis] = G.S(start, end)
	fg.add(G.Must(G.Slice(x.n, sl...)), x.mag, true, fmt.Sprintf("Slice axis %d [%d:%d]", axis, start, end), x)
}

// concat joins a value with another one along an axis.
func (fg *fzGraph) concat() {
	x := fg.any(1)
	r := len(x.shape)
	if r == 0 {
		return
	}
	axis := fg.src.n(r)
	other := slices.Clone(x.shape)
	other[axis] = fg.dim()
	if !fg.fits(other...) || other[axis]+x.shape[axis] > 2*fzMaxElems/max(1, shapeSize(x.shape)/max(1, x.shape[axis])) {
		return
	}
	y := fg.pick(other)
	a, b := x, y
	if fg.src.n(2) == 0 {
		a, b = y, x
	}
	fg.add(G.Must(G.Concat(axis, a.n, b.n)), max(a.mag, b.mag), true, fmt.Sprintf("Concat axis %d", axis), a, b)
}

// keep marks a value for comparison although it feeds others
// (fusion.WithKeep on tilefuse's machines).
//
// One time in three it is a gorgonia.Read(v, &into) statement instead, whose
// into the machines fill after every run.
func (fg *fzGraph) keep() {
	v := fg.any(0)
	read := fg.src.n(3) == 1
	if v.n.Op() == nil || slices.Contains(fg.kept, v) {
		return
	}
	if read {
		into := new(G.Value)
		G.Read(v.n, into)
		fg.reads = append(fg.reads, fzRead{v, into})
		fg.note("Read %s", v.name)
		return
	}
	fg.kept = append(fg.kept, v)
	fg.note("keep %s", v.name)
}

// fzRead is a gorgonia.Read statement of the graph.
type fzRead struct {
	v    *fzVal
	into *G.Value
}

// finish adds the loss and its gradients (grad programs).
func (fg *fzGraph) finish() {
	if !fg.grad {
		return
	}
	// the loss: Σ over a few values of Σ(v ⊙ w) with w a random input (so
	// that no gradient is a constant), or of mean(v²)
	var roots []*fzVal
	for _, v := range fg.vals {
		if v.n.Op() != nil && fg.g.To(v.n.ID()).Len() == 0 {
			roots = append(roots, v)
		}
	}
	if len(roots) == 0 {
		roots = fg.vals[len(fg.vals)-1:]
	}
	var terms []*fzVal
	for i, v := range roots {
		if i > 0 && fg.src.n(3) == 0 {
			continue // left out of the loss: a forward output of its own
		}
		if !slices.Contains(v.deps, true) {
			continue
		}
		v = fg.scale(v, 100)
		if len(v.shape) == 0 {
			terms = append(terms, v)
			continue
		}
		if fg.src.n(3) == 0 {
			sq := fg.add(G.Must(G.Square(v.n)), v.mag*v.mag, true, "Square", v)
			terms = append(terms, fg.add(G.Must(G.Mean(sq.n)), sq.mag, true, "Mean", sq))
			continue
		}
		w := fg.input(v.shape, false)
		p := fg.add(G.Must(G.HadamardProd(v.n, w.n)), v.mag, true, "HadamardProd", v, w)
		terms = append(terms, fg.add(G.Must(G.Sum(p.n)), v.mag*float64(max(1, shapeSize(v.shape))), true, "Sum", p))
	}
	if len(terms) == 0 {
		fg.grad = false
		fg.note("no loss: no value depends on an input through differentiable ops")
		return
	}
	loss := terms[0]
	for _, t := range terms[1:] {
		loss = fg.add(G.Must(G.Add(loss.n, t.n)), loss.mag+t.mag, true, "Add", loss, t)
	}
	fg.loss = loss.n
	var wrt G.Nodes
	for i, in := range fg.inputs {
		if i < len(loss.deps) && loss.deps[i] {
			fg.wrts = append(fg.wrts, in)
			wrt = append(wrt, in.n)
		}
	}
	fg.note("loss = %s; gradients of %d inputs", loss.name, len(wrt))
	grads, err := G.Grad(loss.n, wrt...)
	if err != nil {
		panic(err)
	}
	fg.grads = grads
}
