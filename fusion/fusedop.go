package fusion

import (
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// FusedOp is a Gorgonia op that runs one group's tile kernel. Its hash
// covers the kernel's text, so Gorgonia's hash-consing never merges two
// different groups.
type FusedOp struct {
	name   string
	kernel *graphpass.Kernel
	exec   *cpu.Exec
	// combine adds the kernel's partial results into its outputs, where it
	// writes them (graphpass.Kernel.Parts)
	combine *cpu.Exec
	parts   []int // the scratch's elements for each output's partial results
	ins     []hm.Type
	out     hm.Type
	ops     []string // the original ops, for String and the report
	text    string   // the kernel's IR
	sum     [16]byte // a 128-bit hash of text (prepared.sum), for WriteHash
	view    bool     // the group only reshapes: its output shares its input's memory
	outs    int      // outputs: more than one are stacked along a new first axis, or laid end to end (see sizes)
	// sizes are the outputs' element counts where their shapes differ: the
	// op's value is then one vector holding them end to end (nil: stacked)
	sizes []int
	// fell counts the launches (the kernel's and its combining kernel's)
	// whose machine code handed them to the executor at run time
	// (Stats.ExecutorLaunches)
	fell *atomic.Int64
}

// newFusedOp is the op group grp becomes: its kernel k, run on the CPU as
// prepared (the prepare stage).
func newFusedOp(grp *graphpass.Group, k *graphpass.Kernel, pk prepared) (*FusedOp, error) {
	if k == nil || pk.exec == nil {
		return nil, fmt.Errorf("fusion: %v has no prepared kernel", grp)
	}
	if k.Parts > 1 && (pk.combine == nil || k.OnePointer) {
		return nil, fmt.Errorf("fusion: %v writes %d partial results and has no prepared kernel to combine them", grp, k.Parts)
	}
	op := &FusedOp{name: k.Tile.Name, kernel: k, exec: pk.exec, combine: pk.combine, text: pk.text, sum: pk.sum, outs: max(1, k.Outs), fell: new(atomic.Int64)}
	if k.Parts > 1 {
		op.parts = k.ScratchSizes()
	}
	dt := dtypeOf(grp.Root)
	for _, in := range grp.Inputs {
		if in.Internal() { // a block of the kernel's dtype
			op.ins = append(op.ins, G.TensorType{Dims: len(in.Info.Shape), Of: dt})
			continue
		}
		op.ins = append(op.ins, typeOf(in.G))
	}
	if grp.Root.Internal() {
		op.out = G.TensorType{Dims: len(grp.Root.Info.Shape), Of: dt}
	} else {
		op.out = typeOf(grp.Root.G)
	}
	if op.outs > 1 {
		op.out = G.TensorType{Dims: len(k.Out) + 1, Of: dt}
	}
	if k.Shapes != nil {
		for i := range op.outs {
			op.sizes = append(op.sizes, numel(k.Shape(i)))
		}
		op.out = G.TensorType{Dims: 1, Of: dt}
	}
	// a view: reshapes alone (at least one: a group of no members, such
	// as a transpose, computes its root), of one input, to one output,
	// computing nothing again (a second output is stacked with the first:
	// a kernel writes it)
	op.view = len(grp.Members) > 0 && len(grp.Inputs) == 1 && len(k.Out) > 0 && op.outs == 1 && k.Shapes == nil && len(grp.Recompute) == 0
	for _, m := range grp.Members {
		op.ops = append(op.ops, m.Info.Name)
		op.view = op.view && m.Info.Kind == ops.Reshape
	}
	return op, nil
}

// dtypeOf is n's Gorgonia dtype (an internal value's from its tile dtype).
func dtypeOf(n *graphpass.Node) tensor.Dtype {
	if !n.Internal() {
		return n.G.Dtype()
	}
	if n.Info.DType == tile.F64 {
		return tensor.Float64
	}
	return tensor.Float32
}

func typeOf(n *G.Node) hm.Type {
	if n.IsScalar() {
		return n.Dtype()
	}
	return G.TensorType{Dims: n.Shape().Dims(), Of: n.Dtype()}
}

func (op *FusedOp) Arity() int { return len(op.ins) }

func (op *FusedOp) Type() hm.Type {
	ts := append(append([]hm.Type(nil), op.ins...), op.out)
	if len(ts) == 1 {
		return ts[0]
	}
	return hm.NewFnType(ts...)
}

func (op *FusedOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return op.shape(), nil
}

func (op *FusedOp) shape() tensor.Shape {
	if op.sizes != nil {
		return tensor.Shape{op.total()}
	}
	if op.outs > 1 {
		return tensor.Shape(append([]int{op.outs}, op.kernel.Out...))
	}
	if len(op.kernel.Out) == 0 {
		return tensor.ScalarShape()
	}
	return tensor.Shape(append([]int(nil), op.kernel.Out...))
}

// Outputs is the number of outputs of the kernel; more than one are
// stacked along a new first axis of the op's value (or, where their shapes
// differ, laid end to end in a vector), and part ops take them out.
func (op *FusedOp) Outputs() int { return op.outs }

// OnePointer reports whether the kernel takes one pointer to all its
// outputs (the op's value, where each lies at its offset) rather than one
// per output.
func (op *FusedOp) OnePointer() bool { return op.kernel.OnePointer }

// PartSizes are the element counts of the kernel's outputs, in the order
// they lie in the op's value.
func (op *FusedOp) PartSizes() []int {
	if op.sizes != nil {
		return op.sizes
	}
	n := make([]int, op.outs)
	for i := range n {
		n[i] = numel(op.kernel.Out)
	}
	return n
}

// total is the number of elements of the op's value.
func (op *FusedOp) total() int {
	t := 0
	for _, n := range op.PartSizes() {
		t += n
	}
	return t
}

// Do runs the kernel on the CPU over the input values, into fresh memory.
func (op *FusedOp) Do(vals ...G.Value) (G.Value, error) { return op.do(nil, nil, nil, vals...) }

// boxes keeps a step's kernel arguments boxed as interfaces between runs
// (the CPU backend's, one per step): boxing a slice allocates, and a run
// that reuses its memory passes the same slices every time, so a slice
// whose start and length are those of the last run's is passed as the
// same interface again. With it, a warm RunAll of native kernels on
// reused outputs allocates nothing (TestRunAllAllocs).
type boxes struct {
	args    []any // by position
	keys    []boxKey
	scratch []any // the argument list
	// a scalar kernel's output element
	one32 []float32
	one64 []float64
	// scalar inputs, by position
	in32 []float32
	in64 []float64
	// a view op's last header and the data it views
	view    *tensor.Dense
	viewKey boxKey
	// a kernel's partial results (graphpass.Kernel.Parts) and its
	// combining kernel's arguments
	parts32 []float32
	parts64 []float64
	combine *boxes
}

type boxKey struct {
	p unsafe.Pointer
	n int
}

func keyOf[T float32 | float64](d []T) boxKey {
	return boxKey{unsafe.Pointer(unsafe.SliceData(d)), len(d)}
}

// box appends d boxed to args, as the last run's i-th argument where it
// is the same slice.
func box[T float32 | float64](b *boxes, args []any, d []T) []any {
	if b == nil {
		return append(args, d)
	}
	i, k := len(args), keyOf(d)
	if i < len(b.keys) && b.keys[i] == k {
		if _, same := b.args[i].([]T); same {
			return append(args, b.args[i])
		}
	}
	a := any(d)
	for len(b.keys) <= i {
		b.keys = append(b.keys, boxKey{})
		b.args = append(b.args, nil)
	}
	b.keys[i], b.args[i] = k, a
	return append(args, a)
}

// boxValue appends v's elements to args (boxing them through b), a scalar
// as one element; it reads a float tensor's elements without reflection.
func boxValue(b *boxes, args []any, v G.Value) ([]any, error) {
	if t, ok := v.(*tensor.Dense); ok && !t.IsScalar() && !t.IsMaterializable() {
		switch t.Dtype() {
		case tensor.Float32:
			return box(b, args, t.Float32s()), nil
		case tensor.Float64:
			return box(b, args, t.Float64s()), nil
		}
	}
	if b != nil { // a scalar as one element of the step's own
		switch v := v.(type) {
		case *G.F32:
			i := len(args)
			for len(b.in32) <= i {
				b.in32 = append(b.in32, 0)
			}
			b.in32[i] = float32(*v)
			return box(b, args, b.in32[i:i+1:i+1]), nil
		case *G.F64:
			i := len(args)
			for len(b.in64) <= i {
				b.in64 = append(b.in64, 0)
			}
			b.in64[i] = float64(*v)
			return box(b, args, b.in64[i:i+1:i+1]), nil
		}
	}
	a, err := hostSlice(v)
	if err != nil {
		return args, err
	}
	return append(args, a), nil
}

// do runs the kernel on the CPU over the input values. Its output goes into
// reuse, the op's value from an earlier run, where that fits (zeroed first
// if the kernel accumulates), else into fresh memory (recycled through rec
// where it is not nil: recycle.go); a view op returns a new header over its
// input.
// b, where not nil, keeps the arguments boxed from one run to the next.
func (op *FusedOp) do(reuse G.Value, b *boxes, rec *recycler, vals ...G.Value) (_ G.Value, err error) {
	defer recoverTo(&err, op.name) // it may run on another goroutine: the device thread, or Gorgonia's machine over Compiled().Graph
	if len(vals) != len(op.ins) {
		return nil, fmt.Errorf("fusion: %s: %d inputs, want %d", op.name, len(vals), len(op.ins))
	}
	if op.view {
		// a reshape copies nothing (fusion must not raise peak memory): a new
		// header over the same elements, materialised first if the input is a view
		d, err := hostSlice(vals[0])
		if err != nil {
			return nil, fmt.Errorf("fusion: %s: %w", op.name, err)
		}
		var k boxKey
		switch d := d.(type) {
		case []float32:
			k = keyOf(d)
		case []float64:
			k = keyOf(d)
		}
		if b != nil && b.view != nil && b.viewKey == k {
			return b.view, nil // the same header over the same elements as the last run's
		}
		t := tensor.New(tensor.WithShape(op.kernel.Out...), tensor.WithBacking(d))
		if b != nil {
			b.view, b.viewKey = t, k
		}
		return t, nil
	}
	var args []any
	if b != nil {
		args = b.scratch[:0]
		defer func() { b.scratch = args[:0] }() // keep the array for the next run
	} else {
		args = make([]any, 0, len(vals)+op.outs)
	}
	for i, v := range vals {
		if args, err = boxValue(b, args, v); err != nil {
			return nil, fmt.Errorf("fusion: %s: input %d: %w", op.name, i, err)
		}
	}
	sizes := op.PartSizes()
	total := op.total()
	if op.kernel.OnePointer { // the kernel finds each output at its offset
		sizes = []int{total}
	}
	scalar := op.outs == 1 && len(op.kernel.Out) == 0
	var out any // the op's new output
	fresh := true
	if t, ok := reuse.(*tensor.Dense); ok && !scalar && !t.IsView() && t.Shape().TotalSize() == total {
		// the op's output of the last run, to write into
		switch t.Dtype() {
		case tensor.Float32:
			args, fresh = parts(b, args, t.Float32s(), sizes, op.kernel.Accumulates), false
		case tensor.Float64:
			args, fresh = parts(b, args, t.Float64s(), sizes, op.kernel.Accumulates), false
		}
	}
	if scalar && b != nil { // into the step's own element, zeroed
		if op.kernel.DType == tile.F64 {
			if b.one64 == nil {
				b.one64 = make([]float64, 1)
			}
			args = parts(b, args, b.one64, sizes, true)
		} else {
			if b.one32 == nil {
				b.one32 = make([]float32, 1)
			}
			args = parts(b, args, b.one32, sizes, true)
		}
		fresh = false
	}
	if fresh { // zeros where the kernel accumulates
		if op.kernel.DType == tile.F64 {
			out, args = stacked[float64](rec, args, sizes, op.kernel.Accumulates)
		} else {
			out, args = stacked[float32](rec, args, sizes, op.kernel.Accumulates)
		}
	}
	if numel(op.kernel.Out) > 0 { // an empty output has nothing to compute (and an empty grid is an error)
		if err := op.launch(b, args, len(vals)); err != nil {
			if ee := (*tile.ExecError)(nil); errors.As(err, &ee) && ee.Kernel != op.name {
				named := *ee // the Exec may be another kernel's of the same text
				named.Kernel = op.name
				err = &named
			}
			return nil, fmt.Errorf("fusion: %s: %w", op.name, err)
		}
	}
	if scalar && b != nil { // written into the last run's value where there is one
		if op.kernel.DType == tile.F64 {
			if r, ok := reuse.(*G.F64); ok {
				*r = G.F64(b.one64[0])
				return r, nil
			}
			return G.NewF64(b.one64[0]), nil
		}
		if r, ok := reuse.(*G.F32); ok {
			*r = G.F32(b.one32[0])
			return r, nil
		}
		return G.NewF32(b.one32[0]), nil
	}
	if scalar {
		if o, ok := out.([]float64); ok {
			return G.NewF64(o[0]), nil
		}
		return G.NewF32(out.([]float32)[0]), nil
	}
	if !fresh {
		return reuse, nil
	}
	return tensor.New(tensor.WithShape(op.shape()...), tensor.WithBacking(out)), nil
}

// launch runs the kernel over args (its inputs, nin of them, then its
// output parameters). A kernel that writes partial results
// (graphpass.Kernel.Parts) writes them into scratch (b's, kept between
// runs; fresh without b), and its Combine adds them into the outputs.
func (op *FusedOp) launch(b *boxes, args []any, nin int) error {
	k := op.kernel
	if k.Parts <= 1 {
		return op.exec.LaunchCounting(op.fell, k.Grid, args...)
	}
	var cb *boxes
	var cargs []any
	if b != nil {
		if b.combine == nil {
			b.combine = &boxes{}
		}
		cb = b.combine
		cargs = cb.scratch[:0]
	}
	sizes := op.parts
	if k.DType == tile.F64 {
		var held *[]float64
		if b != nil {
			held = &b.parts64
		}
		cargs = heldScratch(held, cb, cargs, sizes)
	} else {
		var held *[]float32
		if b != nil {
			held = &b.parts32
		}
		cargs = heldScratch(held, cb, cargs, sizes)
	}
	cargs, err := launchParts(k, op.exec, op.combine, args, nin, cargs, op.fell)
	if cb != nil {
		cb.scratch = cargs[:0] // keep the array for the next run
	}
	return err
}

// launchParts runs a kernel of partial results (graphpass.Kernel.Parts):
// e, k's kernel, over its inputs (args[:nin]) writing the scratch (cargs:
// one part buffer an output, cut as k.ScratchSizes), then c, k.Combine,
// over the scratch and the outputs (args[nin:]). args[nin:] is
// overwritten with the scratch; it returns cargs with the outputs
// appended.
func launchParts(k *graphpass.Kernel, e, c *cpu.Exec, args []any, nin int, cargs []any, fell *atomic.Int64) ([]any, error) {
	nout := len(cargs)
	cargs = append(cargs, args[nin:]...) // the combine's outputs: the kernel's
	copy(args[nin:], cargs[:nout])       // the kernel's outputs: the scratch
	if err := e.LaunchCounting(fell, k.Grid, args...); err != nil {
		return cargs, err
	}
	return cargs, c.LaunchCounting(fell, k.CombineGrid, cargs...)
}

// heldScratch appends to args the scratch of sizes, in the memory *held
// keeps from run to run (fresh where held is nil), boxed in b.
func heldScratch[T float32 | float64](held *[]T, b *boxes, args []any, sizes []int) []any {
	var s []T
	if held != nil {
		s = *held
	}
	s = partsOf(s, sizes)
	args = scratchArgs(b, args, s, sizes)
	if held != nil {
		*held = s
	}
	return args
}

// partsOf is s where it holds a kernel's partial results of the given
// sizes, else new scratch for them.
func partsOf[T float32 | float64](s []T, sizes []int) []T {
	total := 0
	for _, n := range sizes {
		total += n
	}
	if len(s) != total {
		s = make([]T, total)
	}
	return s
}

// scratchArgs appends s cut into the given sizes to args, boxed through b.
func scratchArgs[T float32 | float64](b *boxes, args []any, s []T, sizes []int) []any {
	at := 0
	for _, n := range sizes {
		args = box(b, args, s[at:at+n:at+n])
		at += n
	}
	return args
}

// hostSlice gives a value's elements as a Go slice (a scalar as one element).
func hostSlice(v G.Value) (any, error) {
	if t, ok := v.(*tensor.Dense); ok && t.IsMaterializable() {
		v = t.Materialize().(G.Value)
	}
	switch d := v.Data().(type) {
	case []float32:
		return d, nil
	case []float64:
		return d, nil
	case float32:
		return []float32{d}, nil
	case float64:
		return []float64{d}, nil
	}
	return nil, fmt.Errorf("value of type %T", v.Data())
}

func (op *FusedOp) ReturnsPtr() bool     { return op.view }
func (op *FusedOp) CallsExtern() bool    { return false }
func (op *FusedOp) OverwritesInput() int { return -1 }

func (op *FusedOp) WriteHash(h hash.Hash) {
	// the text's 128-bit hash, made once per text at prepare: hashing the
	// whole text here cost a second compile of encoder_fwd_bwd large
	// ~0.4 ms of its rewrite
	h.Write([]byte("tilefuse.FusedOp " + op.name + "\n"))
	h.Write(op.sum[:])
}

func (op *FusedOp) Hashcode() uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}

func (op *FusedOp) String() string {
	return fmt.Sprintf("%s{%s}", op.name, strings.Join(op.ops, "; "))
}

// Kernel is the tile kernel the op runs.
func (op *FusedOp) Kernel() *tile.Kernel { return op.kernel.Tile }

// Grid is the grid the kernel is launched over.
func (op *FusedOp) Grid() tile.Grid { return op.kernel.Grid }

// Accumulates reports whether the kernel adds into its output, which must
// hold zeros before the launch (a reduction split over programs).
func (op *FusedOp) Accumulates() bool { return op.kernel.Accumulates }

// Parts is the number of partial results the kernel writes where a second
// kernel adds them into its outputs (graphpass.Kernel.Parts: the CPU's
// column sums split over row chunks); 0 or 1 where it writes its outputs.
func (op *FusedOp) Parts() int { return op.kernel.Parts }

// Combine is the kernel that adds the kernel's partial results into its
// outputs and its grid, where the kernel writes them (Parts > 1: its
// output parameters then point to Parts times each output's elements,
// part p at p times the output's; Combine takes them, then the outputs);
// nil elsewhere.
func (op *FusedOp) Combine() (*tile.Kernel, tile.Grid) {
	return op.kernel.Combine, op.kernel.CombineGrid
}

// IsView reports whether the op only reshapes: its output is its input's memory.
func (op *FusedOp) IsView() bool { return op.view }

// PartOp takes output i out of a multi-output kernel's stacked value,
// sharing its memory.
type PartOp struct {
	kernel string // the kernel's name, for String and the hash
	i, of  int
	shape  []int
	dtype  tensor.Dtype
	inDims int // the rank of the kernel's value: stacked outputs, or 1 (end to end)
	// the output is the elements [at, at+numel(shape)) of the kernel's
	// value, which has total elements
	at, total int
}

func newPartOp(grp *graphpass.Group, k *graphpass.Kernel, i int) (G.Op, error) {
	if i < 0 || i >= k.Outs {
		return nil, fmt.Errorf("fusion: %v: output %d of %d", grp, i, k.Outs)
	}
	op := &PartOp{kernel: k.Tile.Name, i: i, of: k.Outs, shape: append([]int(nil), k.Shape(i)...), dtype: grp.Root.G.Dtype(), inDims: len(k.Out) + 1}
	op.at, op.total = i*numel(k.Out), k.Outs*numel(k.Out) // stacked
	if k.Shapes != nil {                                  // laid end to end
		op.inDims, op.at, op.total = 1, 0, 0
		for j := range k.Outs {
			if j < i {
				op.at += numel(k.Shape(j))
			}
			op.total += numel(k.Shape(j))
		}
	}
	return op, nil
}

func (op *PartOp) Arity() int { return 1 }

func (op *PartOp) Type() hm.Type {
	var out hm.Type = G.TensorType{Dims: len(op.shape), Of: op.dtype}
	if len(op.shape) == 0 {
		out = op.dtype
	}
	return hm.NewFnType(G.TensorType{Dims: op.inDims, Of: op.dtype}, out)
}

func (op *PartOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape(append([]int(nil), op.shape...)), nil
}

// Part is which output the op takes, of how many.
func (op *PartOp) Part() (i, of int) { return op.i, op.of }

// Do is a view of the i-th output in the stacked value.
func (op *PartOp) Do(vals ...G.Value) (_ G.Value, err error) {
	defer func() { // named only on a panic: String allocates
		if r := recover(); r != nil {
			err = fmt.Errorf("fusion: %s: %v", op, r)
		}
	}()
	if len(vals) != 1 {
		return nil, fmt.Errorf("fusion: %v: %d inputs, want 1", op, len(vals))
	}
	d, err := hostSlice(vals[0])
	if err != nil {
		return nil, fmt.Errorf("fusion: %v: %w", op, err)
	}
	n, at, total := numel(op.shape), op.at, op.total
	var part any
	switch d := d.(type) {
	case []float32:
		part, err = partOf(d, at, n, total)
		if err == nil && len(op.shape) == 0 {
			return G.NewF32(part.([]float32)[0]), nil
		}
	case []float64:
		part, err = partOf(d, at, n, total)
		if err == nil && len(op.shape) == 0 {
			return G.NewF64(part.([]float64)[0]), nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("fusion: %v: %w", op, err)
	}
	return tensor.New(tensor.WithShape(op.shape...), tensor.WithBacking(part)), nil
}

// reused is op's value over v's elements as Do makes it, but the header
// of the last run (b.view) where it is over the same elements: a run that
// reuses its memory then allocates nothing for a part. Only for values
// the user does not read, of kernels whose memory is reused (the CPU
// backend's steps neither fresh nor viewing a fresh value): b.view keeps
// the elements it views alive, which must not hold a fresh value's memory
// from the recycler.
func (op *PartOp) reused(b *boxes, v G.Value) (G.Value, error) {
	t, ok := v.(*tensor.Dense)
	if !ok || t.IsView() || len(op.shape) == 0 {
		return op.Do(v)
	}
	n := numel(op.shape)
	var k boxKey
	switch t.Dtype() {
	case tensor.Float32:
		d := t.Float32s()
		if len(d) != op.total || op.at+n > len(d) {
			return op.Do(v) // it says what is wrong
		}
		k = keyOf(d[op.at : op.at+n])
	case tensor.Float64:
		d := t.Float64s()
		if len(d) != op.total || op.at+n > len(d) {
			return op.Do(v)
		}
		k = keyOf(d[op.at : op.at+n])
	default:
		return op.Do(v)
	}
	if b.view != nil && b.viewKey == k {
		return b.view, nil
	}
	out, err := op.Do(v)
	if d, ok := out.(*tensor.Dense); ok && err == nil {
		b.view, b.viewKey = d, k
	}
	return out, err
}

// numel is the number of elements of shape s (1 for a scalar).
func numel(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// stacked allocates outputs of the given sizes end to end in one slice
// (new, or recycled through rec and then zeroed if zero is set) and
// appends each one's part to args.
func stacked[T float32 | float64](rec *recycler, args []any, sizes []int, zero bool) ([]T, []any) {
	total := 0
	for _, n := range sizes {
		total += n
	}
	o := recycledSlice[T](rec, total, zero)
	return o, parts(nil, args, o, sizes, false)
}

// parts appends each of the outputs of the given sizes that o holds end to
// end to args, zeroed first when the kernel accumulates into them.
func parts[T float32 | float64](b *boxes, args []any, o []T, sizes []int, zero bool) []any {
	if zero {
		clear(o)
	}
	at := 0
	for _, n := range sizes {
		args = box(b, args, o[at:at+n:at+n])
		at += n
	}
	return args
}

// partOf is the n elements of d from at, sharing its memory; d holds total
// elements.
func partOf[T float32 | float64](d []T, at, n, total int) ([]T, error) {
	if len(d) != total || at+n > len(d) {
		return nil, fmt.Errorf("%d elements, want %d from %d of %d", len(d), n, at, total)
	}
	return d[at : at+n : at+n], nil
}

func (op *PartOp) ReturnsPtr() bool     { return true }
func (op *PartOp) CallsExtern() bool    { return false }
func (op *PartOp) OverwritesInput() int { return -1 }

func (op *PartOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "tilefuse.PartOp %s %d/%d %v %v %d+%d", op.kernel, op.i, op.of, op.shape, op.dtype, op.at, op.total)
}

func (op *PartOp) Hashcode() uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}

func (op *PartOp) String() string { return fmt.Sprintf("%s.out%d", op.kernel, op.i) }
