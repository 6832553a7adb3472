package fusion

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"reflect"
	"sync"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/ops"
)

// The front-end cache keeps, process-wide, what the stages import to
// prepare made of a graph (the imported DAG, the readable set, the groups,
// their kernels and the kernels' executable forms), so that a Compile of a
// graph identical to one compiled before in the process runs only the
// fingerprint, the rewrite (the user's nodes bound into a new graph) and,
// for a machine, the load. The key is the graph's canonical description
// (fingerprintOf): every node in the graph's order with its ID, name, op
// (type, String and WriteHash: what Gorgonia's own hash-consing takes for
// an op's identity), dtype, shape, operands, gradient links, whether Grad
// made it, a constant's value (its bytes, hashed), which nodes WithKeep
// names and which a Read reads; and every option that reaches the front
// end, with the target the kernels are written for. A hit compares the
// whole description, not only its hash. A compile with a dump directory,
// WithAutotune or a target with a Tune function is not cached. An entry
// holds the graph it was first compiled from (the imported DAG points at
// its nodes) until it is evicted: at most compileCacheEntries entries,
// the least recently used going first. WithCompileCache(false) compiles
// afresh and leaves the cache alone.
const compileCacheEntries = 8

// frontEnd is one entry: a compilation's output from import to prepare.
type frontEnd struct {
	sum      uint64
	key      []byte
	gr       *graphpass.Graph
	at       []int // per node of gr.Nodes: its position in the graph's AllNodes
	readable []*graphpass.Node
	target   graphpass.Target
	groups   []*graphpass.Group
	kernels  map[*graphpass.Group]*graphpass.Kernel
	prepared map[*graphpass.Group]prepared
	units    []*graphpass.Node // the rewrite's unitOrder
	report   Report            // without Stages
}

var frontEnds struct {
	sync.Mutex
	entries      []*frontEnd // the most recently used last
	hits, misses int
}

// CompileCacheStats are the front-end cache's counts since the process
// started (or ResetCompileCache).
type CompileCacheStats struct {
	Hits, Misses, Entries int
}

// CompileCache reports the front-end cache's hits, misses and entries.
func CompileCache() CompileCacheStats {
	frontEnds.Lock()
	defer frontEnds.Unlock()
	return CompileCacheStats{frontEnds.hits, frontEnds.misses, len(frontEnds.entries)}
}

// ResetCompileCache empties the front-end cache and zeroes its counts,
// releasing the graphs its entries hold.
func ResetCompileCache() {
	frontEnds.Lock()
	defer frontEnds.Unlock()
	frontEnds.entries, frontEnds.hits, frontEnds.misses = nil, 0, 0
}

// WithCompileCache(false) compiles every stage afresh, neither using nor
// filling the process-wide front-end cache (on by default; see DESIGN.md):
// for debugging the compiler's stages.
func WithCompileCache(on bool) Option { return func(c *config) { c.noCache = !on } }

// lookupFrontEnd is the entry for fp, if any (counted as a hit or a miss).
func lookupFrontEnd(fp *fingerprint) *frontEnd {
	frontEnds.Lock()
	defer frontEnds.Unlock()
	for i, e := range frontEnds.entries {
		if e.sum == fp.sum && bytes.Equal(e.key, fp.key) {
			es := frontEnds.entries
			copy(es[i:], es[i+1:])
			es[len(es)-1] = e
			frontEnds.hits++
			return e
		}
	}
	frontEnds.misses++
	return nil
}

// storeFrontEnd keeps what c's stages made under fp.
func storeFrontEnd(fp *fingerprint, c *compilation) {
	pos := make(map[*G.Node]int, len(fp.all))
	for i, n := range fp.all {
		pos[n] = i
	}
	e := &frontEnd{sum: fp.sum, key: fp.key, gr: c.gr, at: make([]int, len(c.gr.Nodes)), readable: c.readable, target: c.target,
		groups: c.groups, kernels: c.kernels, prepared: c.prepared, units: c.units, report: *c.out.Report}
	e.report.Stages = nil
	for i, n := range c.gr.Nodes {
		p, ok := pos[n.G]
		if !ok {
			return // not one of the graph's nodes: nothing to bind it to
		}
		e.at[i] = p
	}
	frontEnds.Lock()
	defer frontEnds.Unlock()
	for _, o := range frontEnds.entries {
		if o.sum == e.sum && bytes.Equal(o.key, e.key) {
			return // a concurrent compile of the same graph stored it first
		}
	}
	if len(frontEnds.entries) >= compileCacheEntries {
		frontEnds.entries = frontEnds.entries[1:]
	}
	frontEnds.entries = append(frontEnds.entries, e)
}

// reuse fills c from e, binding e's nodes to the positions of c's graph.
func (c *compilation) reuse(e *frontEnd, fp *fingerprint) {
	c.gr, c.readable, c.target, c.groups, c.kernels, c.prepared, c.units = e.gr, e.readable, e.target, e.groups, e.kernels, e.prepared, e.units
	c.reads = fp.reads
	c.nodes = make([]*G.Node, len(e.at))
	for i, p := range e.at {
		c.nodes[i] = fp.all[p]
	}
	c.isRead = make(map[*G.Node]bool, len(c.readable))
	for _, n := range c.readable {
		c.isRead[c.node(n)] = true
	}
	rep := e.report
	rep.Cached = true
	c.report = &rep
}

// node is the user's node that imported node n stands for in the graph
// being compiled: n's own, or on a hit the node at its position in this
// graph.
func (c *compilation) node(n *graphpass.Node) *G.Node {
	if c.nodes == nil || n.G == nil {
		return n.G
	}
	return c.nodes[n.Index()]
}

// fingerprint is a graph's canonical description with the options (key),
// its hash, the graph's nodes in order and its Read statements.
type fingerprint struct {
	key   []byte
	sum   uint64
	all   []*G.Node
	reads []read
}

var (
	fpSeed             = maphash.MakeSeed()
	valSeedA, valSeedB = maphash.MakeSeed(), maphash.MakeSeed()
)

// keyBuf builds a description; it is the hash.Hash an op writes its
// parameters into (G.Op.WriteHash).
type keyBuf struct{ b []byte }

func (k *keyBuf) Write(p []byte) (int, error) { k.b = append(k.b, p...); return len(p), nil }
func (k *keyBuf) Sum(b []byte) []byte         { return append(b, k.b...) }
func (k *keyBuf) Reset()                      {}
func (k *keyBuf) Size() int                   { return 8 }
func (k *keyBuf) BlockSize() int              { return 1 }

func (k *keyBuf) int(v int) { k.b = binary.AppendVarint(k.b, int64(v)) }
func (k *keyBuf) str(s string) {
	k.int(len(s))
	k.b = append(k.b, s...)
}
func (k *keyBuf) flag(on bool) {
	if on {
		k.b = append(k.b, 1)
	} else {
		k.b = append(k.b, 0)
	}
}

// opaque writes what f writes, prefixed by its length.
func (k *keyBuf) opaque(f func()) {
	at := len(k.b)
	k.b = append(k.b, 0, 0, 0, 0)
	f()
	binary.LittleEndian.PutUint32(k.b[at:], uint32(len(k.b)-at-4))
}

// fingerprintOf describes g under cfg in one walk over its nodes; nil
// where the compile is not to be cached (the options say so, or the graph
// has what the description cannot hold: a Set statement, a constant whose
// value is not plain memory; the stages then report what is wrong, if
// anything).
func fingerprintOf(g *G.ExprGraph, cfg *config) (fp *fingerprint) {
	if cfg.noCache || cfg.dumpDir != "" || cfg.autotune || cfg.target != nil && cfg.target.Tune != nil {
		return nil
	}
	defer func() {
		if recover() != nil { // Gorgonia panics in places (a node's Dtype): not cached
			fp = nil
		}
	}()
	k := &keyBuf{b: make([]byte, 0, 64<<10)}
	if !cfg.writeKey(k) {
		return nil
	}
	keep := make(map[*G.Node]bool, len(cfg.keep))
	for _, n := range cfg.keep {
		keep[n] = true
	}
	fp = &fingerprint{all: g.AllNodes()}
	kept := 0
	for _, n := range fp.all {
		op := n.Op()
		k.int(int(n.ID()))
		k.str(rawName(n))
		if keep[n] {
			k.b = append(k.b, 'K')
			kept++
		}
		isConst := false
		if op == nil {
			k.b = append(k.b, 'I')
		} else {
			spelled := op.String()
			set, isRead, constant := ops.Spelled(spelled)
			if set {
				return nil
			}
			if isRead { // its target is per graph: not in the key
				into, ok := ops.ReadTarget(op)
				ch := g.From(n.ID())
				if !ok || !ch.Next() {
					return nil
				}
				r := ch.Node().(*G.Node)
				k.b = append(k.b, 'R')
				k.int(int(r.ID()))
				fp.reads = append(fp.reads, read{r, into})
				continue
			}
			isConst = constant
			k.b = append(k.b, 'O')
			k.str(reflect.TypeOf(op).String())
			k.str(spelled)
			if !constant { // a constant tensor's WriteHash formats its value (%v: elided where large); writeValue hashes its bytes
				k.opaque(func() { op.WriteHash(k) })
			}
		}
		k.str(n.Dtype().Name())
		s := n.Shape()
		k.int(len(s))
		for _, d := range s {
			k.int(d)
		}
		if isConst && !writeValue(k, n.Value()) {
			return nil
		}
		ch := g.From(n.ID())
		k.int(ch.Len())
		for ch.Next() {
			k.int(int(ch.Node().ID()))
		}
		if d := n.Deriv(); d != nil {
			k.int(int(d.ID()))
		} else {
			k.int(-1)
		}
		of := n.DerivOf()
		k.int(len(of))
		for _, o := range of {
			k.int(int(o.ID()))
		}
		k.str(group(n))
	}
	if kept != len(keep) { // a node of another graph: the readable stage says so
		return nil
	}
	fp.key = k.b
	fp.sum = maphash.Bytes(fpSeed, k.b)
	return fp
}

// nodeFields are the indices of G.Node's unexported fields name (empty
// where the user named nothing: Name then spells the op and the operands'
// IDs, which the description holds already, with fmt) and group
// (ops.MadeByGrad), read by reflection without Name's formatting or a
// search by name per node; -1 where missing (another Gorgonia version).
var nodeFields = func() (f struct{ name, group int }) {
	t := reflect.TypeFor[G.Node]()
	f.name, f.group = -1, -1
	if sf, ok := t.FieldByName("name"); ok && sf.Type.Kind() == reflect.String && len(sf.Index) == 1 {
		f.name = sf.Index[0]
	}
	if sf, ok := t.FieldByName("group"); ok && sf.Type.Kind() == reflect.String && len(sf.Index) == 1 {
		f.group = sf.Index[0]
	}
	return f
}()

func rawName(n *G.Node) string {
	if nodeFields.name < 0 {
		return n.Name()
	}
	return reflect.ValueOf(n).Elem().Field(nodeFields.name).String()
}

// group is n's group: "gradients" where Grad made it (ops.MadeByGrad).
func group(n *G.Node) string {
	if nodeFields.group < 0 {
		return fmt.Sprint(ops.MadeByGrad(n))
	}
	return reflect.ValueOf(n).Elem().Field(nodeFields.group).String()
}

// writeValue writes a constant's value: its type, layout and a 128-bit
// hash of its bytes. false: not plain memory (a view, a mask).
func writeValue(k *keyBuf, v G.Value) bool {
	type memory interface {
		Pointer() unsafe.Pointer
		MemSize() uintptr
	}
	if v == nil {
		return false
	}
	if d, ok := v.(*tensor.Dense); ok {
		if d.IsMaterializable() || d.IsMasked() || !d.IsNativelyAccessible() || !d.DataOrder().IsRowMajor() {
			return false
		}
		k.int(len(d.Strides()))
		for _, s := range d.Strides() {
			k.int(s)
		}
		k.int(d.Size())
	}
	var b []byte
	if d, ok := v.(*tensor.Dense); ok {
		b = d.Header.Raw
	} else if m, ok := v.(memory); ok {
		b = unsafe.Slice((*byte)(m.Pointer()), m.MemSize())
	} else {
		return false
	}
	k.str(reflect.TypeOf(v).String())
	k.str(v.Dtype().Name())
	k.int(len(b))
	k.b = binary.LittleEndian.AppendUint64(k.b, maphash.Bytes(valSeedA, b))
	k.b = binary.LittleEndian.AppendUint64(k.b, maphash.Bytes(valSeedB, b))
	return true
}

// writeKey writes the options that reach the front end, and the target
// the kernels are written for; false: not to be cached.
func (cfg *config) writeKey(k *keyBuf) bool {
	t, err := cfg.targetOf()
	if err != nil {
		return false
	}
	k.int(int(cfg.backend))
	k.flag(cfg.fuse)
	k.flag(cfg.matmul != nil)
	k.flag(cfg.matmul != nil && *cfg.matmul)
	k.int(int(cfg.precision))
	k.flag(cfg.precisionSet)
	k.int(cfg.maxGroup)
	k.int(cfg.maxElements)
	k.flag(cfg.readAll)
	k.flag(cfg.native)
	// what only the backends read, in the key all the same: an entry is
	// never shared between compiles whose options differ
	k.flag(cfg.profile)
	k.int(int(cfg.inCheck))
	k.flag(cfg.graphs)
	k.flag(cfg.reuse)
	k.flag(cfg.recycle)
	k.flag(cfg.cacheDir != nil)
	if cfg.cacheDir != nil {
		k.str(*cfg.cacheDir)
	}
	t.Tune = nil // nil here: a target with one is not cached
	// every field (%#v: Target's String names a few, and %+v prints that;
	// two targets alike in it, an H100's and an H200's L2, or a bound on
	// the grid's axes, shared an entry until 2026-12-05)
	k.str(fmt.Sprintf("%#v", t))
	return true
}
