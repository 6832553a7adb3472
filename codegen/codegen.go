package codegen

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/tilefuse/tilefuse/tile"
)

// Options control code generation.
type Options struct {
	// NumWarps is the number of warps per program (CTA); 0 means 4.
	NumWarps int
	// Arch is the target compute capability: 80 or 90 (0 means 90).
	Arch int
	// Spec gives, per kernel parameter, a known divisibility: of the value for
	// integers, of the address in bytes for pointers (0 or missing: 1). The
	// cuda launcher derives it from the arguments (16 where they allow).
	Spec []int
	// DumpDir, if set, receives <kernel>.tile, .layout and .ptx; the
	// environment variable TILEFUSE_DUMP does the same when DumpDir is empty.
	DumpDir string
}

// Kernel is a kernel lowered to PTX. Its fields do not change after
// Compile returns (Hash relies on it).
type Kernel struct {
	Name     string
	PTX      string
	Layout   string // the layout-annotated IR, as dumped
	NumWarps int
	// ProducerWarps are launched beside NumWarps: the producer of a
	// warp-specialised K loop (meta-parameter ws = 1), 0 otherwise
	ProducerWarps int
	// RegSplit: the registers a thread of the producer's and of the
	// consumers' warps ask for with setmaxnreg (0, 0: none)
	RegSplit    [2]int
	SharedBytes int // dynamic shared memory to launch with
	// TensorMaps are parameters after the tile kernel's own, in order:
	// CUtensorMaps the launcher encodes for pointer arguments (tma.go)
	TensorMaps []TensorMap
	// Cluster is the CTAs of a thread-block cluster along x, y and z
	// (the PTX's .reqnctapercluster), zero for a kernel without
	// clusters: a launch's grid must be a multiple of it along each
	// dimension (the CTAs of a cluster share their tiles of A: tma.go)
	Cluster [3]int

	hashOnce sync.Once
	hash     [32]byte
}

// Hash is the SHA-256 of Anonymous, computed once: the key of the kernel's
// compiled module (a second machine for a graph looks each kernel up by it
// again, and its PTX is up to tens of KiB).
func (k *Kernel) Hash() [32]byte {
	k.hashOnce.Do(func() { k.hash = sha256.Sum256([]byte(k.Anonymous())) })
	return k.hash
}

// Anonymous is the PTX with the kernel's name left out (it appears in the
// header comment and the entry): the same for kernels that differ only in
// their names, which compile to the same code. Compiled modules are keyed
// by it (a module compiled from one kernel serves the others: launches
// find the function by the name of the kernel it was compiled from).
func (k *Kernel) Anonymous() string {
	r := strings.NewReplacer("tile kernel @"+k.Name+" (", "tile kernel @ (", ".visible .entry "+k.Name+"(", ".visible .entry (")
	return r.Replace(k.PTX)
}

// RegisterPool is how many registers the CTA must be given at launch for
// its warps' setmaxnreg to succeed (0 without setmaxnreg): a
// setmaxnreg.inc waits until the CTA's pool has them.
func (k *Kernel) RegisterPool() int {
	return 32 * (k.ProducerWarps*k.RegSplit[0] + k.NumWarps*k.RegSplit[1])
}

// Threads is the number of threads per CTA.
func (k *Kernel) Threads() int { return 32 * (k.NumWarps + k.ProducerWarps) }

// PTXVersion is the PTX ISA version emitted: what CUDA 11.8's ptxas and the
// H200's driver JIT both accept.
const PTXVersion = "7.8"

// PTXVersionWgmma is the PTX ISA version of kernels that use wgmma (with
// .target sm_90a): the H200's driver JIT accepts it; CUDA 11.8's ptxas
// does not, so tests check such kernels structurally and the GPU round
// assembles them with the device's ptxas.
const PTXVersionWgmma = "8.0"

// Compile lowers k to PTX by running the stages in order.
func Compile(k *tile.Kernel, opt Options) (*Kernel, error) {
	if k == nil {
		return nil, fmt.Errorf("codegen: nil kernel")
	}
	if opt.NumWarps == 0 {
		opt.NumWarps = 4
	}
	if opt.NumWarps < 1 || opt.NumWarps > 32 || opt.NumWarps&(opt.NumWarps-1) != 0 {
		return nil, fmt.Errorf("codegen: @%s: num_warps %d is not a power of two in 1..32", k.Name, opt.NumWarps)
	}
	if opt.Arch == 0 {
		opt.Arch = 90
	}
	if opt.Arch != 80 && opt.Arch != 90 {
		return nil, fmt.Errorf("codegen: @%s: target sm_%d: sm_80 and sm_90 are supported", k.Name, opt.Arch)
	}
	dir := opt.DumpDir
	if dir == "" {
		dir = os.Getenv("TILEFUSE_DUMP")
	}
	l := newLowerer(k, opt)
	for _, st := range stages {
		if err := st.run(l); err != nil {
			return nil, fmt.Errorf("codegen: @%s: %s: %w", k.Name, st.name, err)
		}
		if dir != "" && st.dump != nil {
			if err := writeDump(dir, k.Name+"."+st.ext, st.dump(l)); err != nil {
				return nil, err
			}
		}
	}
	return l.result, nil
}

// A stage is one step of lowering. It reads what the stages before it left
// in the lowerer; dump, if set, is its result as text, written to
// <kernel>.<ext> when dumping.
type stage struct {
	name, ext string
	run       func(*lowerer) error
	dump      func(*lowerer) string
}

// stages is the lowering, in order:
//
//   - verify: the tile IR is well formed (types, shapes, dominance);
//   - analysis: per value, what is known along its last dimension
//     (contiguity, divisibility, constancy: what decides vector widths) and
//     whether it depends only on parameters and thread geometry (it then goes
//     to the prologue, computed once);
//   - layouts: each anchor (load, reduction, dot, atomic, loop-carried
//     value) gets its layout, as data on the value, before anything is
//     emitted; every other value is emitted in the layout its consumer asks
//     for, converting through shared memory where that differs;
//   - check: the planned layouts fit their values;
//   - pipeline: the K loops of tensor-core dots that the layouts stage
//     planned for software pipelining (cp.async stages, mma.sync or wgmma,
//     the accumulator in registers), and the loads a loop carries through
//     shared memory (smem_carry: smemcarry.go), dumped as .pipe;
//   - emit: PTX instructions in program order, anchors in their planned
//     layouts;
//   - print: the module text.
var stages = []stage{
	{"verify", "tile", func(l *lowerer) error { return l.k.Verify() }, func(l *lowerer) string { return l.k.String() }},
	{"analysis", "axes", (*lowerer).analyze, (*lowerer).axesDump},
	{"layouts", "plan", func(l *lowerer) error { l.planMMALoops(); return l.assignLayouts(l.k.Body) }, (*lowerer).planDump},
	{"check", "", (*lowerer).checkLayouts, nil},
	{"pipeline", "pipe", func(l *lowerer) error { l.planCarries(); return nil }, func(l *lowerer) string { return l.pipeDump() + l.mmaLoopDump() + l.carryDump() }},
	{"emit", "layout", func(l *lowerer) error { return l.block(l.k.Body) }, (*lowerer).layoutDump},
	{"print", "ptx", func(l *lowerer) error {
		if l.layoutErr != nil {
			return l.layoutErr
		}
		if need, room := l.totalSmem(), maxSmem(l.opt.Arch); need > room {
			return fmt.Errorf("codegen: @%s needs %d bytes of shared memory, more than sm_%d's %d a CTA: smaller blocks (or fewer stages): %w", l.k.Name, need, l.opt.Arch, room, ErrSharedMemory)
		}
		l.result = &Kernel{Name: l.k.Name, NumWarps: l.opt.NumWarps, ProducerWarps: l.producerWarps, RegSplit: l.regSplit, SharedBytes: l.totalSmem(), TensorMaps: l.tmaps, Cluster: l.cluster}
		l.result.PTX = l.assemble()
		l.result.Layout = l.layoutDump()
		return nil
	}, func(l *lowerer) string { return l.result.PTX }},
}

// ErrSharedMemory is wrapped by Compile's error for a kernel that needs
// more shared memory than a CTA of its target has (a product through
// shared memory of large f64 blocks, say): as Triton's "out of resources",
// the kernel must take smaller blocks.
var ErrSharedMemory = errors.New("out of shared memory")

// Dump writes the three main stages of a kernel to dir: its tile IR, the
// layouts its values were emitted in and its PTX.
func Dump(dir string, k *tile.Kernel, c *Kernel) error {
	for ext, text := range map[string]string{".tile": k.String(), ".layout": c.Layout, ".ptx": c.PTX} {
		if err := writeDump(dir, k.Name+ext, text); err != nil {
			return err
		}
	}
	return nil
}

func writeDump(dir, name, text string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("codegen: dump: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		return fmt.Errorf("codegen: dump: %w", err)
	}
	return nil
}

func (l *lowerer) assemble() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "//\n// Generated by tilefuse codegen from tile kernel @%s (num_warps=%d)\n//\n", l.k.Name, l.opt.NumWarps)
	version, target := PTXVersion, fmt.Sprintf("sm_%d", l.opt.Arch)
	if l.wgmma {
		version, target = PTXVersionWgmma, "sm_90a"
	}
	for _, m := range l.tmaps {
		fmt.Fprintf(&sb, "// %v\n", m) // in the PTX, and so in the module's key (Hash)
	}
	fmt.Fprintf(&sb, ".version %s\n.target %s\n.address_size 64\n\n", version, target)
	if l.totalSmem() > 0 {
		fmt.Fprintf(&sb, ".extern .shared .align %d .b8 smem[];\n\n", max(16, l.scratchAlign))
	}
	fmt.Fprintf(&sb, ".visible .entry %s(\n", l.k.Name)
	params := make([]string, 0, len(l.k.Params)+len(l.tmaps))
	for _, p := range l.k.Params {
		params = append(params, fmt.Sprintf(".param .%s %s", paramType(p.Type), paramName(p)))
	}
	for i := range l.tmaps {
		params = append(params, fmt.Sprintf(".param .align 64 .b8 %s[128]", tmaParamName(i)))
	}
	for i, p := range params {
		sep := ","
		if i == len(params)-1 {
			sep = ""
		}
		fmt.Fprintf(&sb, "\t%s%s\n", p, sep)
	}
	fmt.Fprintf(&sb, ")\n.maxntid %d, 1, 1\n", 32*(l.opt.NumWarps+l.producerWarps))
	if c := l.cluster; c != [3]int{} {
		fmt.Fprintf(&sb, ".reqnctapercluster %d, %d, %d\n", c[0], c[1], c[2])
	}
	if l.regSplit != [2]int{} && l.k.Meta["ws_minctas"] == 1 {
		// __launch_bounds__(threads, 1): a register cap at entry, for setmaxnreg
		sb.WriteString(".minnctapersm 1\n")
	}
	if r := l.k.Meta["max_registers"]; r > 0 { // a meta-parameter: registers a thread may use
		fmt.Fprintf(&sb, ".maxnreg %d\n", r)
	}
	sb.WriteString("{\n")
	classes := make([]string, 0, len(l.nreg))
	for c := range l.nreg {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	for _, c := range classes {
		fmt.Fprintf(&sb, "\t.reg %s %%%s<%d>;\n", regDecl[c], c, l.nreg[c]+1)
	}
	sb.WriteString("\n")
	scratch := fmt.Sprint(l.scratchOffset())
	sb.WriteString(strings.ReplaceAll(l.pro.String(), scratchPlaceholder, scratch))
	sb.WriteString(strings.ReplaceAll(l.body.String(), scratchPlaceholder, scratch))
	sb.WriteString("\tret;\n}\n")
	return sb.String()
}

// layoutDump is the tile IR with the layouts each value was emitted in.
func (l *lowerer) layoutDump() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "// @%s: layouts per value (num_warps=%d, dynamic shared memory %d bytes)\n", l.k.Name, l.opt.NumWarps, l.totalSmem())
	l.k.Walk(func(v *tile.Value) {
		if v.Op == tile.OpParam {
			return
		}
		lays := l.laidOut[v.ID]
		note := "not emitted (dead or folded)"
		if len(lays) > 0 {
			note = strings.Join(dedupe(lays), " | ")
		}
		if v.Op == tile.OpStore || v.Op == tile.OpFor || v.Op == tile.OpYield {
			note = ""
		}
		line := v.String()
		if i := strings.Index(line, "\n"); i >= 0 {
			line = line[:i] + " ..."
		}
		if note != "" {
			fmt.Fprintf(&sb, "%s\n    // %s\n", line, note)
		} else {
			fmt.Fprintf(&sb, "%s\n", line)
		}
	})
	return sb.String()
}

func dedupe(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
