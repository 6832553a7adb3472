package fusion

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/codegen/cpu"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// Compiled is a graph after fusion. It does not change after Compile
// returns: a machine's per-run statistics are Machine.Stats.
type Compiled struct {
	// Graph is the rewritten graph: one FusedOp node per group.
	Graph  *G.ExprGraph
	Report *Report
	cfg    config
	rw     *rewritten
	// readable is the set of the user's nodes that hold their value after
	// a run (readable.go); back is the part of it that a run writes back
	// (every readable node but the inputs), the same on every backend.
	readable map[*G.Node]bool
	back     []binding
	reads    []read // gorgonia.Read statements of the user's graph
}

// read is a gorgonia.Read(n, into) of the user's graph: after each run the
// machine writes n's value into *into, as Gorgonia's machine does.
type read struct {
	n    *G.Node
	into *G.Value
}

// binding ties a node of the user's graph (orig) to its node in the
// rewritten graph (nn).
type binding struct {
	orig, nn *G.Node
}

// compilation is what the stages of compile fill in, each from what the
// stages before it left.
type compilation struct {
	g   *G.ExprGraph
	cfg config

	reads    []read                                 // import: gorgonia.Read statements
	gr       *graphpass.Graph                       // import
	readable []*graphpass.Node                      // readable: operands first
	isRead   map[*G.Node]bool                       // readable, as a set
	forward  map[*graphpass.Node]bool               // readable: the forward pass
	dead     map[*G.Node]bool                       // readable: what nothing reads, not computed
	target   graphpass.Target                       // partition: what the kernels are for
	groups   []*graphpass.Group                     // partition
	kernels  map[*graphpass.Group]*graphpass.Kernel // emit
	tuning   []*TuneResult                          // emit, with WithAutotune
	prepared map[*graphpass.Group]prepared          // prepare
	units    []*graphpass.Node                      // rewrite: unitOrder's (cached with the front end)
	rw       *rewritten                             // rewrite
	back     []binding                              // rewrite: what a run writes back
	be       backend                                // load (a machine's compile only)
	nodes    []*G.Node                              // on a cache hit: per node of gr, the user's node it stands for (node)
	report   *Report                                // on a cache hit: the entry's report
	out      *Compiled                              // the result, once made
	stages   []StageTime                            // each stage's wall time, as it ran
}

// stage is one step of compile: a plain function over the compilation, the
// verifier that checks what it left (nil: the stage checks its own output
// as it goes), and the text of its output for the dump directory (nil: no
// dump, or the stage writes its own files).
type stage struct {
	name  string
	run   func(*compilation) error
	check func(*compilation) error
	dump  func(*compilation) string
}

// stages is the compiler, in order. Compile runs all but the last;
// NewTapeMachine runs all of them.
var stages = [...]stage{
	// import reads the user's graph into graphpass's DAG, each node
	// classified by package ops, and finds the gorgonia.Read statements.
	// First: every later stage works on that DAG.
	{"import", importGraph, checkImport, dumpImport},
	// readable decides, once, which of the user's nodes hold a value after
	// a run (the rule is in readable.go). Before partition, which writes
	// each of them out of its kernel; the rewrite and both backends write
	// back exactly this set.
	{"readable", planReadable, checkReadable, dumpReadable},
	// partition groups the fusable nodes; each group becomes one kernel.
	{"partition", partition, checkPartition, dumpPartition},
	// emit writes each group's tile kernel (the builder verifies each as
	// it builds it). Its dump is one <kernel>.tile file per kernel.
	{"emit", emit, nil, nil},
	// verify runs tile's verifier on every kernel again and checks each
	// kernel's signature against its group (a pointer per input and per
	// output), before anything runs a kernel.
	{"verify", verifyKernels, nil, nil},
	// prepare gives each kernel its executable form on the CPU, from the
	// CPU backend's cache. Before the rewrite, which runs the kernels of
	// groups that read only constants (folding them into constants), and
	// whose FusedOps run it in Do (Gorgonia's machine over Compiled.Graph,
	// and the CPU backend).
	{"prepare", prepareKernels, nil, nil},
	// rewrite replays the graph into a new one, each group one FusedOp
	// node, and lists the new graph's nodes in the order they run: the one
	// topological sort of the rewritten graph, which the backends take.
	{"rewrite", rewrite, checkRewrite, dumpRewrite},
	// load binds the backend to the rewritten graph: the CPU backend's
	// steps, the GPU backend's buffers and loaded PTX (code generation
	// specialises each kernel to its buffers' alignment, which only the
	// rewritten graph lays out). Last, and only for a machine.
	{"load", loadBackend, nil, nil},
}

// Compile fuses g: it imports it, partitions it, writes a kernel per group
// and replays it into a new graph. g itself is not changed. Call it after
// gorgonia.Grad, so that the backward pass fuses too.
func Compile(g *G.ExprGraph, opts ...Option) (*Compiled, error) {
	c, err := compile(g, opts, false)
	if err != nil {
		return nil, err
	}
	return c.compiled(), nil
}

// compile runs the stages in order, each stage's verifier after it and,
// with a dump directory, writes each stage's output there as
// NN-<stage>.txt. withBackend runs the last stage (load) too.
func compile(g *G.ExprGraph, opts []Option, withBackend bool) (c *compilation, err error) {
	defer recoverTo(&err, "compiling")
	if g == nil {
		return nil, fmt.Errorf("fusion: Compile of a nil graph")
	}
	cfg, err := configure(opts)
	if err != nil {
		return nil, err
	}
	c = &compilation{g: g, cfg: cfg}
	last := len(stages)
	if !withBackend {
		last--
	}
	// the front-end cache (compilecache.go): on a hit, the rewrite and
	// load alone
	t0 := time.Now()
	fp := fingerprintOf(g, &cfg)
	var hit *frontEnd
	if fp != nil {
		hit = lookupFrontEnd(fp)
	}
	c.stages = append(c.stages, StageTime{"fingerprint", time.Since(t0).Seconds()})
	first := 0
	if hit != nil {
		c.reuse(hit, fp)
		first = rewriteStage
	}
	for i, st := range stages[:last] {
		if i < first {
			continue
		}
		t0 := time.Now()
		if err := st.run(c); err != nil {
			return nil, stageErr(st.name, err)
		}
		c.stages = append(c.stages, StageTime{st.name, time.Since(t0).Seconds()})
		if st.check != nil {
			if err := st.check(c); err != nil {
				c.close()
				return nil, fmt.Errorf("fusion: the %s stage's output fails its check (a tilefuse bug): %w", st.name, err)
			}
		}
		if cfg.dumpDir != "" && st.dump != nil {
			if err := writeDump(cfg.dumpDir, fmt.Sprintf("%02d-%s.txt", i+1, st.name), st.dump(c)); err != nil {
				c.close()
				return nil, err
			}
		}
	}
	if lp, ok := c.be.(loadPhaser); ok {
		for _, ph := range lp.loadPhases() {
			c.stages = append(c.stages, StageTime{"load:" + ph.Stage, ph.Seconds})
		}
	}
	if c.out != nil { // made by the load stage: with it
		c.out.Report.Stages = c.stages
	}
	if fp != nil && hit == nil {
		c.compiled()
		storeFrontEnd(fp, c)
	}
	return c, nil
}

// rewriteStage is the rewrite's index in stages: a cache hit runs it and
// the stages after it.
const rewriteStage = 6

func init() {
	if stages[rewriteStage].name != "rewrite" {
		panic("fusion: rewriteStage is not the rewrite's index")
	}
}

// stageErr gives a stage's error the package's prefix once.
func stageErr(stage string, err error) error {
	if s := err.Error(); len(s) > 8 && s[:8] == "fusion: " {
		return err
	}
	return fmt.Errorf("fusion: %s: %w", stage, err)
}

// close releases what the load stage took (the backend), if it ran.
func (c *compilation) close() {
	if c.be != nil {
		c.be.close()
		c.be = nil
	}
}

// compiled is the result of the stages up to the rewrite, with its report.
func (c *compilation) compiled() *Compiled {
	if c.out == nil {
		rep := c.report
		if rep == nil {
			rep = buildReport(c)
		}
		c.out = &Compiled{Graph: c.rw.graph, Report: rep, cfg: c.cfg, rw: c.rw, readable: c.isRead, back: c.back, reads: c.reads}
		c.out.Report.Stages = c.stages
	}
	return c.out
}

// importGraph is the import stage.
func importGraph(c *compilation) error {
	for _, n := range c.g.AllNodes() {
		if ops.IsSet(n.Op()) {
			return fmt.Errorf("fusion: %v: gorgonia.Set statements are not supported (Gorgonia v0.9.18's own tape machine leaves the node unchanged); Let new values between runs, or use a solver", n.Name())
		}
		if into, ok := ops.ReadTarget(n.Op()); ok {
			ch := c.g.From(n.ID())
			if !ch.Next() {
				return fmt.Errorf("fusion: %v reads no node", n.Name())
			}
			c.reads = append(c.reads, read{ch.Node().(*G.Node), into})
		}
	}
	gr, err := graphpass.Import(c.g)
	if err != nil {
		return err
	}
	for _, n := range gr.Nodes {
		for _, d := range n.Info.Shape {
			if d == 0 {
				return fmt.Errorf("fusion: %v has shape %v, with no elements: tilefuse does not run tensors without elements, and Gorgonia v0.9.18's own machine panics on them (in Exp, MatMul) or refuses them (Sum); give every dimension a size of at least 1", n.G.Name(), n.G.Shape())
			}
		}
	}
	if c.cfg.fuse && c.productsFuse() {
		// before readable: a transpose no product reads is not computed,
		// unless the user reads it whatever the readable rule says
		kept := c.keptByUser()
		t, err := c.cfg.targetOf()
		if err != nil {
			return err
		}
		graphpass.FoldTransposedOperands(gr, func(n *graphpass.Node) bool { return c.cfg.readAll || kept[n.G] },
			graphpass.Options{Target: t, MaxElements: c.cfg.maxElements}) // Partition's bound and target: what it leaves to Gorgonia for size is not folded
	}
	c.gr = gr
	return nil
}

// keptByUser are the nodes the user reads whatever the readable rule
// says: WithKeep's and those of gorgonia.Read statements.
func (c *compilation) keptByUser() map[*G.Node]bool {
	kept := map[*G.Node]bool{}
	for _, n := range c.cfg.keep {
		if n != nil {
			kept[n] = true
		}
	}
	for _, r := range c.reads {
		kept[r.n] = true
	}
	return kept
}

// productsFuse reports whether matrix products become kernels: on the GPU,
// and on a CPU whose vector code has products, unless WithMatMulFusion says
// otherwise.
func (c *compilation) productsFuse() bool {
	matmul := c.cfg.backend == CUDA || cpu.VectorDot()
	if c.cfg.matmul != nil {
		matmul = *c.cfg.matmul
	}
	return matmul
}

// checkImport: the DAG lists every node once, operands before users, and
// its user lists mirror its operand lists.
func checkImport(c *compilation) error {
	at := map[*graphpass.Node]int{}
	for i, n := range c.gr.Nodes {
		if _, dup := at[n]; dup {
			return fmt.Errorf("%v listed twice", n)
		}
		if c.gr.Lookup(n.G) != n {
			return fmt.Errorf("%v is not its Gorgonia node's", n)
		}
		at[n] = i
	}
	uses := map[[2]*graphpass.Node]int{}
	for i, n := range c.gr.Nodes {
		for _, in := range n.Inputs {
			j, ok := at[in]
			if !ok || j >= i {
				return fmt.Errorf("%v reads %v, which does not come before it", n, in)
			}
			uses[[2]*graphpass.Node{in, n}]++
		}
	}
	for _, n := range c.gr.Nodes {
		for _, u := range n.Users {
			k := [2]*graphpass.Node{n, u}
			if uses[k] == 0 {
				return fmt.Errorf("%v lists user %v, which does not read it", n, u)
			}
			uses[k]--
		}
	}
	for k, left := range uses {
		if left != 0 {
			return fmt.Errorf("%v reads %v, which does not list it as a user", k[1], k[0])
		}
	}
	return nil
}

func dumpImport(c *compilation) string {
	var sb textBuf
	for i, n := range c.gr.Nodes {
		sb.f("%4d %-40s %-16v %v", i, n.G.Name(), n.Info.Kind, n.Info.Shape)
		if n.Info.Why != "" {
			sb.f("  (%s)", n.Info.Why)
		}
		sb.f("\n")
	}
	return sb.String()
}

// partition is the partition stage: the readable set is written out; the
// kernels are for the backend's target (targetOf).
func partition(c *compilation) error {
	matmul := c.productsFuse()
	t, err := c.cfg.targetOf()
	if err != nil {
		return err
	}
	c.target = t
	c.groups = graphpass.Partition(c.gr, graphpass.Options{WriteOut: c.isRead, Dead: c.dead, MaxGroup: c.cfg.maxGroup, Off: !c.cfg.fuse, MatMul: matmul, Target: t, Precision: c.cfg.precision,
		PrecisionByGroup: !c.cfg.precisionSet && c.cfg.backend == CUDA, FreshOutputs: c.cfg.backend == CPU && !c.cfg.reuse, MaxElements: c.cfg.maxElements})
	return nil
}

// checkPartition: every group's members are in it and nowhere else, its
// root and extra outputs are members, its inputs are not, and every
// readable member is an output of its group.
func checkPartition(c *compilation) error {
	seen := map[*graphpass.Node]*graphpass.Group{}
	for i, grp := range c.groups {
		if grp.ID != i {
			return fmt.Errorf("%v has ID %d at position %d", grp, grp.ID, i)
		}
		if !grp.Root.Internal() && (len(grp.Members) == 0 || grp.Members[len(grp.Members)-1] != grp.Root) {
			return fmt.Errorf("%v: the root is not its last member", grp)
		}
		outs := map[*graphpass.Node]bool{grp.Root: true}
		for _, x := range grp.Extra {
			outs[x] = true
		}
		for _, m := range grp.Members {
			if m.Group != grp || seen[m] != nil {
				return fmt.Errorf("%v: member %v belongs to %v", grp, m, m.Group)
			}
			seen[m] = grp
			if c.isRead[m.G] && !outs[m] {
				return fmt.Errorf("%v: %v, which the user reads, is not one of its outputs", grp, m)
			}
		}
		for x := range outs {
			if seen[x] != grp && !(x.Internal() && x.Group == grp) {
				return fmt.Errorf("%v: output %v is not a member", grp, x)
			}
		}
		for _, in := range grp.Inputs {
			if in.Group == grp {
				return fmt.Errorf("%v: input %v is a member", grp, in)
			}
		}
	}
	for _, n := range c.gr.Nodes {
		if n.Group != nil && seen[n] != n.Group {
			return fmt.Errorf("%v is in %v, which does not list it", n, n.Group)
		}
	}
	return nil
}

func dumpPartition(c *compilation) string {
	var sb textBuf
	for _, grp := range c.groups {
		sb.f("%v\n", grp)
		for _, m := range grp.Members {
			sb.f("    %s [%s]\n", m, m.Info.Name)
		}
		for _, x := range grp.Extra {
			sb.f("  extra output %s %v\n", x, x.Info.Shape)
		}
		for _, x := range grp.Recompute {
			sb.f("  recomputes %s\n", x)
		}
		for i, in := range grp.Inputs {
			sb.f("  in%d %s\n", i, in)
		}
	}
	return sb.String()
}

// precisionOf is the precision grp's kernel is written at: WithPrecision's
// where given; else on the CUDA backend graphpass.DefaultPrecision at the
// compilation's target, and ieee on the CPU (no tensor cores: its 3xTF32
// would be three products' work).
func (c *compilation) precisionOf(grp *graphpass.Group) tile.Precision {
	if c.cfg.precisionSet || c.cfg.backend != CUDA {
		return c.cfg.precision
	}
	return graphpass.DefaultPrecision(grp, c.target)
}

// candidates are grp's autotuning candidates at its precision (first the
// heuristic's choice): where that precision is the default's 3xTF32, only
// the block-summed forms, whose accuracy the choice rests on.
func (c *compilation) candidates(grp *graphpass.Group) (tile.Precision, []tile.Meta) {
	prec := c.precisionOf(grp)
	cands := graphpass.Candidates(grp, c.target, prec)
	if !c.cfg.precisionSet && prec == tile.PrecTF32x3 {
		cands = slices.DeleteFunc(cands, func(m tile.Meta) bool { return !graphpass.BlockSummed(m) })
	}
	return prec, cands
}

// emit is the emit stage; with a dump directory each kernel's IR goes to
// <kernel>.tile.
func emit(c *compilation) error {
	c.kernels = make(map[*graphpass.Group]*graphpass.Kernel, len(c.groups))
	var tn *tuner
	if c.cfg.autotune {
		var err error
		if tn, err = newTuner(c); err != nil {
			return err
		}
	}
	for _, grp := range c.groups {
		t := c.target
		if tn != nil {
			var err error
			if t, err = tn.target(grp); err != nil {
				return err
			}
		}
		k, err := graphpass.Emit(grp, t, c.precisionOf(grp))
		if err != nil {
			return err
		}
		c.kernels[grp] = k
		if err := dumpKernel(c.cfg.dumpDir, k); err != nil {
			return err
		}
	}
	return nil
}

// dumpKernel writes k's IR (and its combining kernel's) to
// <kernel>.tile in dir; nothing where dir is empty.
func dumpKernel(dir string, k *graphpass.Kernel) error {
	if dir == "" {
		return nil
	}
	if err := writeDump(dir, k.Tile.Name+".tile", k.Tile.String()); err != nil {
		return err
	}
	if k.Combine != nil {
		return writeDump(dir, k.Combine.Name+".tile", k.Combine.String())
	}
	return nil
}

// verifyKernels is the verify stage.
func verifyKernels(c *compilation) error {
	for _, grp := range c.groups {
		if err := verifyKernel(grp, c.kernels[grp]); err != nil {
			return err
		}
	}
	return nil
}

// verifyKernel runs tile's verifier on grp's kernel k and checks its
// signature against the group.
func verifyKernel(grp *graphpass.Group, k *graphpass.Kernel) error {
	if k == nil || k.Tile == nil {
		return fmt.Errorf("%v has no kernel", grp)
	}
	if err := k.Tile.Verify(); err != nil {
		return fmt.Errorf("%v: %w", grp, err)
	}
	want := len(grp.Inputs) + 1 + len(grp.Extra)
	if k.OnePointer {
		want = len(grp.Inputs) + 1
	}
	if len(k.Tile.Params) != want || k.Outs != 1+len(grp.Extra) {
		return fmt.Errorf("%v: kernel %s takes %d parameters for %d outputs; the group has %d inputs and %d outputs", grp, k.Tile.Name, len(k.Tile.Params), k.Outs, len(grp.Inputs), 1+len(grp.Extra))
	}
	for i, p := range k.Tile.Params {
		if !p.Type.Ptr {
			return fmt.Errorf("%v: kernel %s: parameter %d is not a pointer", grp, k.Tile.Name, i)
		}
	}
	if k.Parts > 1 {
		if k.Combine == nil || k.OnePointer || k.Accumulates {
			return fmt.Errorf("%v: kernel %s writes %d partial results but has no combining kernel (or one pointer, or accumulates)", grp, k.Tile.Name, k.Parts)
		}
		if err := k.Combine.Verify(); err != nil {
			return fmt.Errorf("%v: %w", grp, err)
		}
		if len(k.Combine.Params) != 2*k.Outs {
			return fmt.Errorf("%v: kernel %s takes %d parameters for %d outputs' parts and outputs", grp, k.Combine.Name, len(k.Combine.Params), k.Outs)
		}
	}
	return nil
}

// prepared is a kernel ready to run on the CPU: its executable form, and
// its IR text without its name (tile.Kernel.Anonymous: it keys the cache,
// so that the kernels of identical layers compile once, and with the name
// a FusedOp's hash).
type prepared struct {
	exec *cpu.Exec
	text string
	sum  [16]byte // text's hash (textSum): what FusedOp.WriteHash writes
	// combine is the executable form of the kernel's Combine, where it
	// writes partial results (graphpass.Kernel.Parts)
	combine *cpu.Exec
}

// textSum is a 128-bit hash of a kernel's text, for FusedOp's hash (in
// the process: Gorgonia hash-conses within a process).
func textSum(text string) (s [16]byte) {
	binary.LittleEndian.PutUint64(s[:8], maphash.String(textSeeds[0], text))
	binary.LittleEndian.PutUint64(s[8:], maphash.String(textSeeds[1], text))
	return s
}

var textSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// prepareKernels is the prepare stage.
func prepareKernels(c *compilation) error {
	c.prepared = make(map[*graphpass.Group]prepared, len(c.groups))
	// each text's executable form once, the texts not in the cache in
	// parallel (the executor's compile, and native code, is most of a
	// cold compile: 53 of 96 ms for encoder_fwd_bwd large on 2 cores)
	texts := make([]string, len(c.groups))
	first := make(map[string]int, len(c.groups)) // a text → the first group of it
	var todo []int
	for i, grp := range c.groups {
		texts[i] = c.kernels[grp].Tile.Anonymous()
		if _, ok := first[texts[i]]; !ok {
			first[texts[i]] = i
			todo = append(todo, i)
		}
	}
	execs := make([]*cpu.Exec, len(c.groups))
	combines := make([]*cpu.Exec, len(c.groups))
	sums := make([][16]byte, len(c.groups))
	errs := make([]error, len(c.groups))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for _, i := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			defer recoverTo(&errs[i], "preparing a kernel") // compile's recover is on its own goroutine
			k := c.kernels[c.groups[i]]
			execs[i], errs[i] = cpuKernels.get(texts[i], k.Tile, c.cfg.native)
			if errs[i] == nil && k.Combine != nil {
				combines[i], errs[i] = cpuKernels.get(k.Combine.Anonymous(), k.Combine, c.cfg.native)
			}
			sums[i] = textSum(texts[i])
		}()
	}
	wg.Wait()
	if err := retileForMachineCode(c, texts, first, todo, execs, combines, sums, errs); err != nil {
		return err
	}
	for i, grp := range c.groups {
		j := first[texts[i]]
		if errs[j] != nil {
			return fmt.Errorf("fusion: %v: %w", c.groups[j], errs[j])
		}
		c.prepared[grp] = prepared{execs[j], texts[i], sums[j], combines[j]}
	}
	return nil
}

// retileForMachineCode: on a CPU whose kernels are machine code, a kernel
// the machine code declines (it would run on the executor, several times
// slower: a reduction whose input reads through a transpose merged with
// another axis, whose block's lanes cross the merge — an integer rem of
// lanes that span more than its divisor) is written again with the
// autotuner's other candidates (graphpass.Candidates, in their order),
// then narrower ones (graphpass.Narrower: a reduction's block of outputs
// halved to the powers of two that divide its divisors), and the first
// that the machine code takes replaces it, in every group that had its
// text (an identical layer). Where none does, the kernel stays as the heuristic wrote it, on
// the executor, and the report says why (GroupInfo.Executor). Not with
// the autotuner, which chooses by measuring. On entry texts, first, execs,
// combines, sums and errs are prepareKernels' for the heuristic's kernels;
// on return, for the kernels that replaced them.
func retileForMachineCode(c *compilation, texts []string, first map[string]int, todo []int, execs, combines []*cpu.Exec, sums [][16]byte, errs []error) error {
	if c.cfg.backend == CUDA || !c.target.Native || c.cfg.autotune {
		return nil
	}
	native := func(e, cb *cpu.Exec) bool { return e.Native() && (cb == nil || cb.Native()) }
	for _, i := range todo {
		if errs[i] != nil || native(execs[i], combines[i]) {
			continue
		}
		grp := c.groups[i]
		prec, cands := c.candidates(grp)
		for _, m := range append(cands[1:], graphpass.Narrower(grp, c.target, prec)...) {
			k, err := graphpass.Emit(grp, graphpass.TuneTo(c.target, m), prec)
			if err != nil || verifyKernel(grp, k) != nil {
				continue
			}
			text := k.Tile.Anonymous()
			e, err := cpuKernels.get(text, k.Tile, true)
			if err != nil || !e.Native() {
				continue
			}
			var cb *cpu.Exec
			if k.Combine != nil {
				if cb, err = cpuKernels.get(k.Combine.Anonymous(), k.Combine, true); err != nil || !cb.Native() {
					continue
				}
			}
			// every group of the old text: its own kernel (its name) with m
			old := texts[i]
			for g, grp2 := range c.groups {
				if texts[g] != old {
					continue
				}
				k2 := k
				if g != i {
					if k2, err = graphpass.Emit(grp2, graphpass.TuneTo(c.target, m), prec); err != nil {
						return fmt.Errorf("fusion: %v: %w", grp2, err)
					}
					if err := verifyKernel(grp2, k2); err != nil {
						return fmt.Errorf("fusion: %w", err)
					}
				}
				c.kernels[grp2] = k2
				texts[g] = k2.Tile.Anonymous()
				if err := dumpKernel(c.cfg.dumpDir, k2); err != nil {
					return err
				}
			}
			if _, ok := first[text]; !ok {
				first[text] = i
			}
			j := first[text]
			execs[j], combines[j], sums[j], errs[j] = e, cb, textSum(text), nil
			break
		}
	}
	return nil
}

// loadBackend is the load stage.
func loadBackend(c *compilation) error {
	cc := c.compiled()
	var be backend
	if c.cfg.backend == CUDA {
		if newGPUBackend == nil {
			return Available(CUDA)
		}
		be = newGPUBackend()
	} else {
		be = &cpuBackend{}
	}
	if err := be.prepare(cc); err != nil {
		be.close()
		return err
	}
	c.be = be
	return nil
}

// writeDump writes one file of the dump directory.
func writeDump(dir, name, text string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("fusion: dump: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		return fmt.Errorf("fusion: dump: %w", err)
	}
	return nil
}

// recoverTo turns a panic below the API on this goroutine (Gorgonia panics in
// places, as in NewConstant) into an error. A panic inside an op that
// Gorgonia's tape machine runs happens on that machine's own goroutine and
// cannot be caught here.
func recoverTo(err *error, what string) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("fusion: %s: %v", what, r)
	}
}
