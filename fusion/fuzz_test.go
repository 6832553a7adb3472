package fusion_test

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
)

// FuzzFusion decodes the fuzzer's bytes into a random, well-typed Gorgonia
// graph (fuzzgen_test.go: elementwise ops, scalar constants, broadcasts,
// reductions, softmax, LayerNorm, 2-D and batched products, attention,
// reshapes, transposes, slices, concats, and often the gradients of a
// scalar loss; float32 or float64) and runs it on the CPU several ways:
//
//   - Gorgonia's own tape machine,
//   - fusion.NewTapeMachine with WithFusion(false) (one kernel per op),
//   - fused with WithMatMulFusion(false) and fused with WithMatMulFusion(true),
//   - fused with the bound on 32-bit offsets lowered to 32 elements: the
//     CPU's 64-bit kernels (machine code where the CPU has it),
//   - for half the programs, the last with the H200's kernels
//     (WithTarget), and those again with the bounds lowered: 64-bit
//     offsets past 32 elements, grids past 2 programs on axes 1 and 2
//     flattened onto axis 0 (graphpass.MaxElements, Target.MaxGridYZ),
//
// and checks that they agree: the graph's outputs, the loss, every gradient,
// and the intermediate values it keeps (fusion.WithKeep; Gorgonia's machine
// is not asked for those: its in-place ops may have overwritten them). The
// reference is the unfused machine in float64 (for a float32 program, the
// same program built in float64 from the same input values); Gorgonia's
// machine in float64 is checked against it, except where Gorgonia is known
// to be wrong (../shared/DESIGN.md): the gradient of InverseSqrt, and
// graphs with an empty tensor, on which its machine panics on a goroutine
// of its own (where no recover can catch it).
//
// Tolerances, per element, against the float64 reference r:
//
//	float64: |x − r| ≤ 1e-9·|r| + 1e-9·S + 1e-12·Sg + 1e-12·M (+ 1e-9·G for a gradient)
//	float32: |x − r| ≤ 2e-5·|r| + 2e-5·S + 1e-6·Sg + 1e-6·M + 16·e + 64·p (+ 2e-5·G)
//	         (Gorgonia's machine in float32: + 1e-3·|r| + 1e-3·S + 1e-5·Sg)
//
// where S is the largest |r| of that value, Sg the largest of the graph's,
// M the generator's bound on the value's magnitude (about the terms it is
// computed from: a sum that cancels, as the sum of a LayerNorm's row, is 0
// in float64 and a few float32 roundings of its terms in float32, which
// neither S nor p sees; FuzzFusion, 2026-12-03; so in float64, where the
// sum of a LayerNorm's output, 0 in exact arithmetic, was −3.1e-15 in
// Gorgonia's machine and 8.9e-16 in tilefuse's, M = 707),
// G, for a gradient, the generator's bound on the loss over the gradient's
// element count: the inputs lie in [−1, 1], so G is the scale of a
// gradient's entry were the loss spread evenly over them, which stands
// in for S where the gradient cancels to rounding (the inputs' gradient
// of the sum of a LayerNorm's output, 0 in exact arithmetic, ~1e-19 in
// float64 and ~1e-10 in float32: then S and Sg are that noise too, and M
// is 0 for a gradient; FuzzFusion, 2026-12-07: testdata a7be11d69f5c1078,
// a345e894ef01b585 and 750fc7ccb678a2bd, −1.7e-19 and 3.1e-19 fused
// against 9.8e-20 and −3.0e-20 unfused in float64, tolerances 1.2e-24 and
// 1.3e-24 without G, and 9.3e-11 against 6.8e-21 in float32, tolerance
// 8.7e-11 without),
// e, for a float32 leg, the smallest error of the other float32 legs at
// that element, and p how much r changes when the inputs change by one
// float32 rounding (2⁻²⁴ relative, two random draws): e and p measure the
// float32 rounding the graph amplifies there (a softmax's backward cancels,
// for one), which a correct kernel may show as much as any other leg. NaN
// must meet NaN and an infinity the same infinity.
//
// Machines also run a second time with new inputs (for a quarter of the
// programs), every kernel of the fused machine with products must lower to
// PTX, and the unfused machine must have one kernel per fusable op.
//
// The seed corpus (f.Add below and testdata/fuzz/FuzzFusion, which holds
// every input that found a bug) runs in go test. To fuzz:
//
//	go test ./fusion -run xxx -fuzz FuzzFusion -fuzztime 10m -parallel 1
func FuzzFusion(f *testing.F) {
	for _, s := range fzSeeds(testing.Short()) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fzCheck(t, data, fusion.CPU)
	})
}

// fzMaxInput bounds the bytes a graph is decoded from (a step takes 2–8).
const fzMaxInput = 160

// fzLeg is one way of running a program.
type fzLeg struct {
	name     string
	dt       tensor.Dtype
	gorgonia bool // Gorgonia's tape machine, else tilefuse's
	opts     []fusion.Option
	collect  bool // garbage collected between runs, finalizers run (TestRecycledFuzzSeeds)
}

// fzOut is what one leg computed: per run, per checked node, its values
// (nil where the node had none).
type fzOut struct {
	leg    fzLeg
	fg     *fzGraph
	vals   [][][]float64
	spread [][][]float64 // the reference's: see fzRun
	shapes [][]tensor.Shape
	report *fusion.Report
	stats  fusion.Stats // a tilefuse machine's, after its runs
	err    error
}

// fzCheck runs the program data encodes the ways FuzzFusion describes, the
// tilefuse machines on backend b (the reference and Gorgonia's machine on
// the CPU), and fails t on any disagreement.
func fzCheck(t *testing.T, data []byte, b fusion.Backend) {
	if len(data) > fzMaxInput {
		data = data[:fzMaxInput]
	}
	fg, err := fzBuild(data, tensor.Dtype{})
	if log := os.Getenv("TILEFUSE_FUZZ_LOG"); log != "" {
		defer fzTally(log, t, fg, time.Now())
	}
	if err != nil {
		if fg.zero {
			t.Skipf("Gorgonia cannot build this graph with an empty tensor: %v", err)
		}
		t.Fatalf("the generator: %v", err)
	}
	if why := fzAliasHazard(fg.g); why != "" {
		fg.gorgoniaFwd, fg.gorgoniaGrad = why, why
	}
	var legs []fzLeg
	ref := fzLeg{name: "unfused float64 (reference)", dt: tensor.Float64, opts: []fusion.Option{fusion.WithFusion(false)}}
	gor := fg.noGorgonia == "" && b == fusion.CPU
	if gor {
		legs = append(legs, fzLeg{name: "Gorgonia float64", dt: tensor.Float64, gorgonia: true})
	}
	dt := fg.prog
	if dt == tensor.Float32 && gor {
		legs = append(legs, fzLeg{name: "Gorgonia float32", dt: dt, gorgonia: true})
	}
	if dt == tensor.Float32 {
		legs = append(legs, fzLeg{name: "unfused float32", dt: dt, opts: []fusion.Option{fusion.WithFusion(false)}})
	}
	on, where := []fusion.Option{fusion.WithBackend(b)}, ""
	if b != fusion.CPU {
		where = " on " + b.String()
		legs = append(legs, fzLeg{name: "unfused " + dt.String() + where, dt: dt, opts: append(on, fusion.WithFusion(false))})
	}
	legs = append(legs,
		fzLeg{name: "fused " + dt.String() + where, dt: dt, opts: append(on, fusion.WithMatMulFusion(false))},
		fzLeg{name: "fused " + dt.String() + " with WithMatMulFusion(true)" + where, dt: dt, opts: append(on, fusion.WithMatMulFusion(true))})
	if b == fusion.CPU && (jit.Supported() || fg.noGorgonia == "" && fg.gorgoniaFwd == "" && fg.gorgoniaGrad == "") {
		// the CPU's kernels with the bound lowered: 64-bit offsets past 32
		// elements where the CPU has the machine code; elsewhere most ops
		// are left to Gorgonia for their size, so not for a program whose
		// values Gorgonia is known to get wrong
		legs = append(legs, fzLeg{name: "fused " + dt.String() + " with 64-bit offsets (the CPU's kernels, bound lowered)", dt: dt,
			opts: append(slices.Clone(on), fusion.WithMatMulFusion(true), fusion.WithMaxElements(32))})
	}
	if fg.target {
		// the GPU's kernels (split reductions, its block sizes) on this backend
		l := &legs[len(legs)-1]
		l.name += " and WithTarget(graphpass.H200)"
		l.opts = append(l.opts, fusion.WithTarget(graphpass.H200))
		// and with the bounds lowered: 64-bit offsets past 32 elements (a
		// product's output side alone where its operands fit), grids past
		// 2 programs on axes 1 and 2 flattened onto axis 0
		low := graphpass.H200
		low.MaxGridYZ = 2
		legs = append(legs, fzLeg{name: "fused " + dt.String() + " with 64-bit offsets and flattened grids (the H200's kernels, bounds lowered)" + where, dt: dt,
			opts: append(slices.Clone(on), fusion.WithMatMulFusion(true), fusion.WithTarget(low), fusion.WithMaxElements(32))})
	}
	runs := 1
	if fg.twoRuns {
		runs = 2
	}
	perturbs := 0
	if dt == tensor.Float32 {
		perturbs = 2
	}
	refOut := fzRun(t, data, ref, runs, perturbs)
	if refOut.err != nil {
		if fg.zero {
			t.Skipf("the reference refuses a graph with an empty tensor: %v", refOut.err) // what issue 14 item 4 settles
		}
		t.Fatalf("%s: %v\n%s", ref.name, refOut.err, fg)
	}
	var outs []*fzOut
	for _, l := range legs {
		o := fzRun(t, data, l, runs, 0)
		if o.err != nil {
			t.Fatalf("%s: %v\n%s\n%v", l.name, o.err, fg, o.report)
		}
		outs = append(outs, o)
	}
	fzStructure(t, fg, refOut, outs)
	fzCompare(t, fg, refOut, outs)
}

// fzAliasHazard says why Gorgonia's tape machine may compute wrong values
// for g ("" if nothing does). Reshape, Slice and Transpose give views of
// their operand's memory, and Gorgonia runs elementwise ops and reductions
// in place (OverwritesInput) where their operand's register is free, blind
// to views: writing one value of a view group overwrites the others, which
// later ops, or the user, still read. FuzzFusion found Sum(x) doubled by
// Add(Reshape(x), Reshape(x)) and a Reshape(tanh(x)) read after an in-place
// Add(c, tanh(x)) (testdata/fuzz/FuzzFusion/gorgonia-inplace-*). A group
// that is one chain (each value read once) is safe: nothing reads what the
// in-place op overwrites.
func fzAliasHazard(g *G.ExprGraph) string {
	parent := map[*G.Node]*G.Node{}
	var find func(n *G.Node) *G.Node
	find = func(n *G.Node) *G.Node {
		if p, ok := parent[n]; ok && p != n {
			r := find(p)
			parent[n] = r
			return r
		}
		return n
	}
	users := func(n *G.Node) int { return g.To(n.ID()).Len() }
	for _, a := range g.AllNodes() {
		if a.Op() == nil {
			continue
		}
		s := a.Op().String()
		if strings.HasPrefix(s, "Reshape(") || strings.HasPrefix(s, "Aᵀ{") || strings.HasPrefix(s, "T[") && !strings.HasSuffix(s, "+=...") {
			if src := g.From(a.ID()); src.Next() {
				parent[find(a)] = find(src.Node().(*G.Node))
			}
		}
	}
	members := map[*G.Node][]*G.Node{}
	for n := range parent {
		members[find(n)] = append(members[find(n)], n)
	}
	for root, ms := range members {
		ms = append(ms, root)
		inGroup := map[*G.Node]bool{}
		chain := true
		for _, m := range ms {
			inGroup[m] = true
			chain = chain && users(m) == 1
		}
		if chain {
			continue
		}
		for _, m := range ms {
			for us := g.To(m.ID()); us.Next(); {
				u := us.Node().(*G.Node)
				i := u.Op().OverwritesInput()
				if inGroup[u] || i < 0 {
					continue
				}
				ch := g.From(u.ID())
				for k := 0; ch.Next(); k++ {
					if k == i && ch.Node().(*G.Node) == m {
						return fmt.Sprintf("%v may run in place on %v, which shares its memory with views read elsewhere: Gorgonia's machine writes through views", u.Op(), m.Name())
					}
				}
			}
		}
	}
	return ""
}

// fzTally appends one line per graph to the file TILEFUSE_FUZZ_LOG names
// (the fuzzer's workers are processes of their own): its outcome, dtype,
// grad, values, ops, elements and time, so that a run can say how many
// graphs it executed and of what kind, beside the fuzzer's count of inputs.
// (A worker that spends 10 s on one input panics, "deadlocked!", and the
// run ends with "fuzzing process hung or terminated unexpectedly": the
// generator's bounds keep a graph to a few seconds on a loaded machine.)
func fzTally(log string, t *testing.T, fg *fzGraph, start time.Time) {
	outcome := "ran"
	switch {
	case t.Skipped():
		outcome = "skipped"
	case t.Failed():
		outcome = "failed"
	}
	f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	ops := 0
	for _, v := range fg.vals {
		if v.n.Op() != nil {
			ops++
		}
	}
	fmt.Fprintf(f, "%s %v grad=%v values=%d ops=%d elements=%d %.0fms\n", outcome, fg.prog, fg.grad, len(fg.vals), ops, fg.elems, 1e3*time.Since(start).Seconds())
}

// fzChecked is what the legs compare: the graph's outputs (nodes without
// users, the loss among them), the gradients, and the kept values.
type fzChecked struct {
	n        *G.Node
	name     string
	gorgonia bool // Gorgonia's machine is compared here too
	grad     bool
	read     *G.Value // a gorgonia.Read's target: the value is read there
}

func (fg *fzGraph) checked() []fzChecked {
	var out []fzChecked
	for _, v := range fg.vals {
		if v.n.Op() == nil {
			continue
		}
		// the loss has a user after Grad (the gradient's seed)
		root := fg.g.To(v.n.ID()).Len() == 0 || v.n == fg.loss
		switch {
		case root:
			out = append(out, fzChecked{v.n, v.name, fg.gorgoniaFwd == "", false, nil})
		case slices.Contains(fg.kept, v):
			out = append(out, fzChecked{v.n, v.name + " (kept)", false, false, nil})
		case fg.readAll:
			out = append(out, fzChecked{v.n, v.name + " (read all)", false, false, nil})
		}
	}
	for i, d := range fg.grads {
		out = append(out, fzChecked{d, "∂loss/∂" + fg.wrts[i].name, fg.gorgoniaGrad == "", true, nil})
	}
	for _, r := range fg.reads {
		out = append(out, fzChecked{r.v.n, r.v.name + " (gorgonia.Read)", false, false, r.into})
	}
	return out
}

// fzInputs are the input values of run r, the same for every leg: a float32
// program's are float32 numbers in either dtype. With perturb k > 0 each
// value (masks aside) is multiplied by 1 ± 2⁻²⁴, at random signs of the
// k-th draw: the float64 reference on such inputs shows how much float32
// rounding each result amplifies.
func fzInputs(data []byte, fg *fzGraph, run, perturb int) []G.Value {
	h := fnv.New64a()
	h.Write(data)
	rng := rand.New(rand.NewPCG(h.Sum64(), uint64(run)))
	sign := rand.New(rand.NewPCG(h.Sum64(), uint64(1000*perturb+run)))
	var out []G.Value
	for _, in := range fg.inputs {
		shape := in.n.Shape()
		v := make([]float64, shape.TotalSize())
		for i := range v {
			if in.mask {
				v[i] = float64(rng.IntN(2))
			} else {
				v[i] = rng.Float64()*2 - 1
			}
			if fg.prog == tensor.Float32 {
				v[i] = float64(float32(v[i]))
			}
			if perturb > 0 && !in.mask {
				v[i] *= 1 + float64(2*sign.IntN(2)-1)*0x1p-24
			}
		}
		var t G.Value
		if fg.dt == tensor.Float32 {
			w := make([]float32, len(v))
			for i, x := range v {
				w[i] = float32(x)
			}
			t = fzTensor(shape, w)
		} else {
			t = fzTensor(shape, v)
		}
		out = append(out, t)
	}
	return out
}

// fzTensor is an input's value: a scalar input takes Gorgonia's scalar
// value (its machine refuses a 0-d tensor there).
func fzTensor(shape tensor.Shape, backing any) G.Value {
	if len(shape) == 0 {
		switch b := backing.(type) {
		case []float32:
			return G.NewF32(b[0])
		case []float64:
			return G.NewF64(b[0])
		}
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing))
}

// fzOptions are a tilefuse leg's options for program fg: the leg's own,
// and what the program asks (its intermediate values kept, WithReadAll,
// WithMaxGroup).
func fzOptions(fg *fzGraph, leg []fusion.Option) []fusion.Option {
	opts := slices.Clone(leg)
	var keep G.Nodes
	for _, c := range fg.checked() {
		if !c.grad && c.read == nil && fg.g.To(c.n.ID()).Len() > 0 && (!fg.readAll || slices.Contains(fg.kept, fg.byNode[c.n])) {
			keep = append(keep, c.n) // an intermediate value: kept explicitly
		}
	}
	if len(keep) > 0 {
		opts = append(opts, fusion.WithKeep(keep...))
	}
	if fg.readAll {
		opts = append(opts, fusion.WithReadAll(true))
	}
	if fg.maxGrp > 0 {
		opts = append(opts, fusion.WithMaxGroup(fg.maxGrp))
	}
	return opts
}

// fzRun builds the program for leg l and runs it runs times; with
// perturbs > 0, after each run it runs that many times more on perturbed
// inputs (fzInputs) and keeps, per element, the largest change (fzOut.spread).
func fzRun(t *testing.T, data []byte, l fzLeg, runs, perturbs int) *fzOut {
	t.Helper()
	fg, err := fzBuild(data, l.dt)
	if err != nil {
		t.Fatalf("the generator (%s): %v", l.name, err)
	}
	o := &fzOut{leg: l, fg: fg}
	chk := fg.checked()
	var vm interface {
		RunAll() error
		Reset()
		Close() error
	}
	if l.gorgonia {
		vm = G.NewTapeMachine(fg.g)
	} else {
		m := fusion.NewTapeMachine(fg.g, fzOptions(fg, l.opts)...)
		o.report = m.Report()
		if err := m.Err(); err != nil {
			o.err = fmt.Errorf("compiling: %w", err)
			return o
		}
		if strings.Contains(l.name, "WithMatMulFusion(true)") {
			if err := fzLowers(m); err != nil {
				o.err = err
				return o
			}
		}
		vm = m
	}
	defer vm.Close()
	if m, ok := vm.(*fusion.Machine); ok {
		defer func() { o.stats = m.Stats() }() // before Close
	}
	for r := 0; r < runs; r++ {
		if l.collect && r > 0 {
			fusion.WaitFinalizers()
		}
		vals, shapes, err := fzOnce(vm, fg, chk, data, r, 0)
		if err != nil {
			o.err = err
			return o
		}
		o.vals = append(o.vals, vals)
		o.shapes = append(o.shapes, shapes)
		if perturbs == 0 {
			continue
		}
		spread := make([][]float64, len(chk))
		for i := range spread {
			spread[i] = make([]float64, len(vals[i]))
		}
		for k := 1; k <= perturbs; k++ {
			pv, _, err := fzOnce(vm, fg, chk, data, r, k)
			if err != nil {
				o.err = err
				return o
			}
			for i := range spread {
				for j := range spread[i] {
					if j < len(pv[i]) {
						spread[i][j] = max(spread[i][j], math.Abs(pv[i][j]-vals[i][j]))
					}
				}
			}
		}
		o.spread = append(o.spread, spread)
	}
	return o
}

// fzOnce runs a machine once on the inputs of run r (perturbed: fzInputs)
// and reads the checked nodes' values.
func fzOnce(vm interface {
	RunAll() error
	Reset()
}, fg *fzGraph, chk []fzChecked, data []byte, r, perturb int) ([][]float64, []tensor.Shape, error) {
	for i, v := range fzInputs(data, fg, r, perturb) {
		if err := G.Let(fg.inputs[i].n, v); err != nil {
			return nil, nil, fmt.Errorf("run %d: Let %s: %w", r, fg.inputs[i].name, err)
		}
	}
	vm.Reset()
	if err := vm.RunAll(); err != nil {
		return nil, nil, fmt.Errorf("run %d: %w", r, err)
	}
	vals := make([][]float64, len(chk))
	shapes := make([]tensor.Shape, len(chk))
	for i, c := range chk {
		v := c.n.Value()
		if c.read != nil {
			v = *c.read
		}
		if v != nil {
			vals[i], shapes[i] = fzFloats(v), v.Shape().Clone()
		}
	}
	return vals, shapes, nil
}

// fzLowers: every kernel a machine runs also lowers to PTX (the GPU
// backend's path, checked here without a GPU).
func fzLowers(m *fusion.Machine) error {
	for _, n := range m.Compiled().Graph.AllNodes() {
		if f, ok := n.Op().(*fusion.FusedOp); ok {
			if _, err := codegen.Compile(f.Kernel(), codegen.Options{}); err != nil {
				return fmt.Errorf("%s does not lower to PTX: %w", f.Kernel().Name, err)
			}
		}
	}
	return nil
}

func fzFloats(v G.Value) []float64 {
	switch x := v.Data().(type) {
	case float32:
		return []float64{float64(x)}
	case float64:
		return []float64{x}
	}
	return floats(v)
}

// fzStructure checks what the reports say: one kernel per op without
// fusion; with it, no more kernels and the same ops in them.
func fzStructure(t *testing.T, fg *fzGraph, ref *fzOut, outs []*fzOut) {
	t.Helper()
	for _, o := range append([]*fzOut{ref}, outs...) {
		r := o.report
		if r == nil {
			continue
		}
		if !r.Fused && r.Kernels() != r.FusedOps() {
			t.Fatalf("%s: %d kernels for %d ops without fusion\n%s\n%v", o.leg.name, r.Kernels(), r.FusedOps(), fg, r)
		}
		if r.Fused && cpu.VectorDot() && strings.Contains(o.leg.name, "WithMatMulFusion(true)") && fg.maxGrp == 0 && !fg.target {
			// the unfused reference fuses products too (the default where the dot has vector
			// instructions), for the same target (what fuses depends on it: the rows a row
			// kernel holds in one block)
			// the same ops in all, though an op the reference leaves to
			// Gorgonia may be this leg's kernel (graphpass.KernelOn: a
			// transpose is a kernel on a GPU, Gorgonia's on a CPU without
			// machine code) or folded away (a transposed operand), and
			// at most one kernel more for each such op
			all := func(r *fusion.Report) int { return r.FusedOps() + len(r.Unfused) + len(r.NotComputed) }
			more := max(0, len(ref.report.Unfused)-len(r.Unfused))
			if all(r) != all(ref.report) || r.Kernels() > ref.report.Kernels()+more {
				t.Fatalf("%s: %d ops in %d kernels; unfused, %d ops in %d kernels\n%s\n%v\n%v", o.leg.name, r.FusedOps(), r.Kernels(), ref.report.FusedOps(), ref.report.Kernels(), fg, r, ref.report)
			}
		}
	}
}

// fzCompare compares every leg with the reference (see FuzzFusion for the
// tolerances).
func fzCompare(t *testing.T, fg *fzGraph, ref *fzOut, outs []*fzOut) {
	t.Helper()
	chk := fg.checked()
	for run := range ref.vals {
		// the scales: S per value, Sg over the graph, M the generator's
		// bound (0 where it has none: gradients, reads)
		// and G per gradient: the loss's bound over its element count
		scale, mag, gs := make([]float64, len(chk)), make([]float64, len(chk)), make([]float64, len(chk))
		sg, lossMag := 0.0, 0.0
		if v := fg.byNode[fg.loss]; fg.loss != nil && v != nil && !math.IsInf(v.mag, 0) && !math.IsNaN(v.mag) {
			lossMag = v.mag
		}
		for i, c := range chk {
			if v := fg.byNode[c.n]; v != nil && !c.grad && !math.IsInf(v.mag, 0) && !math.IsNaN(v.mag) {
				mag[i] = v.mag
			}
			if n := len(ref.vals[run][i]); c.grad && n > 0 {
				gs[i] = lossMag / float64(n)
			}
			for _, x := range ref.vals[run][i] {
				if !math.IsInf(x, 0) && !math.IsNaN(x) {
					scale[i] = max(scale[i], math.Abs(x))
				}
			}
			sg = max(sg, scale[i])
		}
		for i, c := range chk {
			want := ref.vals[run][i]
			if want == nil {
				t.Fatalf("run %d: %s has no value on the reference machine\n%s\n%v", run, c.name, fg, ref.report)
			}
			for _, o := range outs {
				if o.leg.gorgonia && !c.gorgonia {
					continue
				}
				got := o.vals[run][i]
				if got == nil {
					t.Fatalf("run %d: %s: %s has no value after RunAll\n%s\n%v", run, o.leg.name, c.name, fg, o.report)
				}
				if !slices.Equal(o.shapes[run][i], ref.shapes[run][i]) && !(len(got) == 1 && len(want) == 1) {
					t.Fatalf("run %d: %s: %s has shape %v, the reference %v\n%s\n%v", run, o.leg.name, c.name, o.shapes[run][i], ref.shapes[run][i], fg, o.report)
				}
				if len(got) != len(want) {
					t.Fatalf("run %d: %s: %s has %d values, the reference %d\n%s\n%v", run, o.leg.name, c.name, len(got), len(want), fg, o.report)
				}
				f32 := o.leg.dt == tensor.Float32
				for j, w := range want {
					x := got[j]
					var tol float64
					if f32 {
						e := math.Inf(1) // the other float32 legs' smallest error
						for _, p := range outs {
							if p != o && p.leg.dt == tensor.Float32 && (!p.leg.gorgonia || c.gorgonia) && len(p.vals[run][i]) == len(want) {
								e = min(e, math.Abs(p.vals[run][i][j]-w))
							}
						}
						if math.IsInf(e, 1) || math.IsNaN(e) {
							e = 0
						}
						tol = 2e-5*math.Abs(w) + 2e-5*scale[i] + 1e-6*sg + 1e-6*mag[i] + 2e-5*gs[i] + 16*e + 64*ref.spread[run][i][j]
						if o.leg.gorgonia {
							// Gorgonia's own float32 arithmetic, less careful in
							// places (its softmax's backward cancels more)
							tol += 1e-3*math.Abs(w) + 1e-3*scale[i] + 1e-5*sg
						}
					} else {
						tol = 1e-9*math.Abs(w) + 1e-9*scale[i] + 1e-12*sg + 1e-12*mag[i] + 1e-9*gs[i]
					}
					if fzClose(x, w, tol, f32) {
						continue
					}
					t.Fatalf("run %d: %s: %s[%d] = %v, the reference %v (tolerance %.3g)\n%s\n%s\n%v\nreference (unfused float64):\n%v",
						run, o.leg.name, c.name, j, x, w, tol, fzWhy(fg, o.leg), fg, o.report, ref.report)
				}
			}
		}
	}
}

// fzClose: x is within tol of the reference w; NaN meets NaN and an infinity
// the same infinity (float32: also a float64 reference beyond its range).
func fzClose(x, w, tol float64, f32 bool) bool {
	switch {
	case math.IsNaN(w) || math.IsNaN(x):
		return math.IsNaN(w) && math.IsNaN(x)
	case math.IsInf(w, 0):
		return x == w
	case f32 && math.Abs(w) > math.MaxFloat32:
		return math.IsInf(x, 0) && math.Signbit(x) == math.Signbit(w)
	}
	return math.Abs(x-w) <= tol
}

func fzWhy(fg *fzGraph, l fzLeg) string {
	if !l.gorgonia {
		return "tilefuse disagrees with its unfused float64 reference"
	}
	return "Gorgonia's tape machine disagrees with tilefuse's unfused float64 machine"
}

// fzCorpus reads testdata/fuzz/FuzzFusion: the inputs that found bugs
// (from the package's directory, as go test runs, or the repository's, as
// scripts/gpu-run.sh runs the test binary).
func fzCorpus() ([][]byte, error) {
	var files []string
	for _, dir := range []string{"testdata", filepath.Join("fusion", "testdata")} {
		f, err := filepath.Glob(filepath.Join(dir, "fuzz", "FuzzFusion", "*"))
		if err != nil {
			return nil, err
		}
		if len(f) > 0 {
			files = f
			break
		}
	}
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "[]byte(") || !strings.HasSuffix(lines[1], ")") {
			return nil, fmt.Errorf("%s: not one []byte in Go's corpus encoding", f)
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, []byte(s))
	}
	return out, nil
}

// fzSteps' indices, for writing seeds by hand.
const (
	fzUnary   = 0
	fzBinary  = 2
	fzConst   = 4
	fzBcast   = 5
	fzReduce  = 7
	fzRowBack = 9
	fzSoftmax = 10
	fzLN      = 11
	fzMatMul  = 12
	fzBMM     = 13
	fzAttn    = 14
	fzReshape = 15
	fzTransp  = 16
	fzSlice   = 17
	fzConcat  = 18
	fzKeep    = 19
)

// header flags
const (
	fzF32     = 1
	fzGrad    = 2
	fzTwoRuns = 4
	fzZero    = 7 << 5
)

// fzSeed writes a program: flags, the sizes' indices into fzDims (M, N, K,
// B; a byte ≥ 240 for N picks a long row), then the steps' bytes.
func fzSeed(flags byte, m, n, k, b byte, steps ...[]byte) []byte {
	out := []byte{flags, m, n, k, b}
	for _, s := range steps {
		out = append(out, s...)
	}
	return out
}

// fzSeeds is the seed corpus: hand-written programs for each kind of
// group, then random bytes (fewer, and no long rows, under -short: 5 s
// against 15 s on the 2-core VM).
func fzSeeds(short bool) [][]byte {
	seeds := [][]byte{
		// elementwise chain, f64 and f32 with gradients
		fzSeed(0, 5, 6, 2, 1, []byte{fzUnary, 0, 7}, []byte{fzBinary, 0, 1, 1, 3}, []byte{fzConst, 0, 2, 0, 2}),
		fzSeed(fzF32|fzGrad, 17, 13, 2, 1, []byte{fzUnary, 0, 0}, []byte{fzUnary, 0, 11, 0, 0}, []byte{fzBinary, 0, 1, 1, 5, 0, 2}),
		// broadcasts over rank 2 and 3, both sides, and a reduction
		fzSeed(fzGrad, 9, 12, 3, 4, []byte{fzBcast, 0, 1, 4, 1, 0}, []byte{fzBcast, 0, 2, 0, 0, 3, 0, 0}, []byte{fzReduce, 0, 3, 1, 0}),
		// softmax and log-softmax (f32), rows written out (f64)
		fzSeed(fzF32|fzGrad, 14, 18, 2, 1, []byte{fzSoftmax, 0, 0}, []byte{fzSoftmax, 1, 3}, []byte{fzRowBack, 2, 2}),
		// LayerNorm with gain and bias, each rstd form
		fzSeed(fzGrad, 13, 16, 2, 2, []byte{fzLN, 0, 0, 0, 1, 1, 1}, []byte{fzLN, 0, 1, 2, 1, 0, 0}),
		fzSeed(fzF32|fzGrad, 7, 19, 2, 2, []byte{fzLN, 0, 1, 0, 1, 1, 1}),
		// a 2-D product with a bias and an activation
		fzSeed(fzGrad, 12, 13, 15, 1, []byte{fzMatMul, 0, 1, 2, 2, 0}, []byte{fzBcast, 0, 1, 4, 1, 0}, []byte{fzUnary, 0, 0}),
		fzSeed(fzF32, 16, 17, 18, 1, []byte{fzMatMul, 0, 0, 1, 0, 0}, []byte{fzMatMul, 2, 1, 1, 1, 0}),
		// batched products, transposed operands
		fzSeed(fzGrad|fzTwoRuns, 5, 6, 7, 3, []byte{fzBMM, 1, 1, 0, 1, 2, 0, 0}, []byte{fzBMM, 0, 0, 1, 2, 3, 0, 0}),
		// attention: inputs with a mask, projections (training, f32)
		fzSeed(0, 12, 8, 7, 2, []byte{fzAttn, 1, 0, 0, 0, 1, 0}),
		fzSeed(fzF32|fzGrad, 9, 10, 6, 1, []byte{fzAttn, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0}),
		// reshapes, transposes, slices, concats
		fzSeed(fzGrad, 8, 9, 3, 2, []byte{fzReshape, 0, 2}, []byte{fzTransp, 0, 0}, []byte{fzSlice, 0, 1, 2, 3}, []byte{fzConcat, 0, 0, 1, 1, 0}),
		// jumps and comparisons (f64), kept intermediates
		fzSeed(0, 6, 7, 2, 1, []byte{fzUnary, 0, 17}, []byte{fzBinary, 0, 1, 1, 7, 2}, []byte{fzKeep, 0}, []byte{fzUnary, 0, 1}),
		// a gorgonia.Read of an intermediate value (f32, with gradients)
		fzSeed(fzF32|fzGrad, 6, 7, 2, 1, []byte{fzUnary, 0, 0}, []byte{fzKeep, 0, 1}, []byte{fzUnary, 0, 3}),
		// an empty tensor
		fzSeed(fzZero|1, 5, 6, 2, 1, []byte{fzUnary, 0, 0}, []byte{fzReduce, 0, 1, 0, 0}),
	}
	n := 30
	if short {
		n = 8
	} else {
		// long rows (looped row kernels): 3 s
		seeds = append(seeds, fzSeed(fzF32, 1, 242, 2, 0, []byte{fzSoftmax, 0, 0}, []byte{fzLN, 0, 0, 0, 0, 1, 1}))
	}
	rng := rand.New(rand.NewPCG(14, 6))
	for range n {
		b := make([]byte, 8+rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		seeds = append(seeds, b)
	}
	return seeds
}
