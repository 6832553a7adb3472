package ptxsim

import (
	"fmt"
	"strconv"
	"strings"
)

// Module is a parsed and decoded PTX module.
type Module struct {
	Version     string // .version, e.g. "7.8"
	Target      string // first .target, e.g. "sm_80" or "sm_90a"
	AddressSize int    // .address_size (64 when absent)

	entries map[string]*Entry
	order   []string
	shared  []varDecl // module-scope .shared variables, shared by every entry
	lines   []string  // the source, for messages
}

// Entry is one kernel (.entry) of a module.
type Entry struct {
	Name    string
	Params  []Param
	MaxNTID [3]int // .maxntid (0: not given)
	ReqNTID [3]int // .reqntid (0: not given)
	// Cluster is .reqnctapercluster (0: not given): a kernel of clusters
	// of more than one CTA is refused at launch (clusters, distributed
	// shared memory and multicast copies are not simulated)
	Cluster [3]int

	mod       *Module
	regs      map[string]regInfo // single registers by name
	ranges    map[string]regRange
	nregs     int
	shared    []varDecl // .shared variables declared in the body
	paramSize int

	// shared memory: static variables from offset 0, then the dynamic
	// (extern) window, aligned
	sharedSyms   map[string]uint64
	staticShared int
	dynAlign     int

	raw    []rawInst
	labels map[string]int
	prog   []*inst
	wgmma  bool // the kernel uses wgmma: its register hazards are checked
}

// Param is a kernel parameter: its state-space offset and size in bytes.
type Param struct {
	Name   string
	Type   string // u64, u32, f32, b8 (arrays), ...
	Size   int
	Align  int
	Offset int
}

type regInfo struct {
	idx int
	typ ptxType
}

type regRange struct {
	base, count int
	typ         ptxType
}

type varDecl struct {
	name     string
	align    int
	elemSize int
	count    int // -1: unsized (extern)
	extern   bool
	line     int
}

type rawInst struct {
	line     int
	guard    string // predicate register, "" if none
	guardNeg bool
	op       string
	args     [][]token
}

// Entry returns the named kernel.
func (m *Module) Entry(name string) (*Entry, error) {
	e, ok := m.entries[name]
	if !ok {
		return nil, fmt.Errorf("ptxsim: no .entry %s in the module (it has %s)", name, strings.Join(m.order, ", "))
	}
	return e, nil
}

// Entries lists the kernels in source order.
func (m *Module) Entries() []string { return append([]string(nil), m.order...) }

func (m *Module) line(n int) string {
	if n >= 1 && n <= len(m.lines) {
		return strings.TrimSpace(m.lines[n-1])
	}
	return ""
}

type parser struct {
	toks []token
	p    int
	mod  *Module
}

func (ps *parser) peek() token {
	if ps.p < len(ps.toks) {
		return ps.toks[ps.p]
	}
	line := 0
	if len(ps.toks) > 0 {
		line = ps.toks[len(ps.toks)-1].line
	}
	return token{kind: tPunct, s: "<EOF>", line: line}
}

func (ps *parser) next() token {
	t := ps.peek()
	if ps.p < len(ps.toks) {
		ps.p++
	}
	return t
}

func (ps *parser) eof() bool { return ps.p >= len(ps.toks) }

func (ps *parser) expect(s string) (token, error) {
	t := ps.next()
	if t.s != s {
		return t, fmt.Errorf("line %d: expected %q, found %q", t.line, s, t.s)
	}
	return t, nil
}

func (ps *parser) number() (int, error) {
	t := ps.next()
	if t.kind != tNum {
		return 0, fmt.Errorf("line %d: expected a number, found %q", t.line, t.s)
	}
	n, err := strconv.ParseInt(strings.TrimSuffix(t.s, "U"), 0, 64)
	if err != nil {
		return 0, fmt.Errorf("line %d: %q: %v", t.line, t.s, err)
	}
	return int(n), nil
}

// skipLine skips the rest of the current source line (.file, .loc).
func (ps *parser) skipLine(line int) {
	for !ps.eof() && ps.peek().line == line {
		ps.next()
	}
}

// Parse parses PTX text and decodes every instruction of every entry: an
// instruction the simulator does not know is an error here, naming its line.
func Parse(src string) (*Module, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, fmt.Errorf("ptxsim: %w", err)
	}
	m := &Module{AddressSize: 64, entries: map[string]*Entry{}, lines: strings.Split(src, "\n")}
	ps := &parser{toks: toks, mod: m}
	if err := ps.module(); err != nil {
		return nil, fmt.Errorf("ptxsim: %w", err)
	}
	for _, name := range m.order {
		if err := m.entries[name].decode(); err != nil {
			return nil, fmt.Errorf("ptxsim: @%s: %w", name, err)
		}
	}
	return m, nil
}

func (ps *parser) module() error {
	m := ps.mod
	for !ps.eof() {
		t := ps.next()
		switch t.s {
		case ".version":
			v := ps.next()
			m.Version = v.s
		case ".target":
			m.Target = ps.next().s
			for ps.peek().s == "," {
				ps.next()
				ps.next()
			}
		case ".address_size":
			n, err := ps.number()
			if err != nil {
				return err
			}
			m.AddressSize = n
		case ".file", ".loc", ".section":
			ps.skipLine(t.line)
		case ".visible", ".weak", ".extern", ".entry", ".shared", ".func", ".global", ".const", ".local":
			extern := false
			for t.s == ".visible" || t.s == ".weak" || t.s == ".extern" {
				extern = extern || t.s == ".extern"
				t = ps.next()
			}
			switch t.s {
			case ".entry":
				if err := ps.entry(); err != nil {
					return err
				}
			case ".shared":
				v, err := ps.varDecl(t.line, extern)
				if err != nil {
					return err
				}
				m.shared = append(m.shared, v)
			default:
				return fmt.Errorf("line %d: %s is not simulated (kernels are .entry functions with .shared, .param and .reg state)", t.line, t.s)
			}
		default:
			return fmt.Errorf("line %d: unexpected %q at module scope", t.line, t.s)
		}
	}
	if len(m.order) == 0 {
		return fmt.Errorf("no .entry in the module")
	}
	return nil
}

// varDecl parses the rest of `.shared [.align N] .type name[N];`.
func (ps *parser) varDecl(line int, extern bool) (varDecl, error) {
	v := varDecl{align: 0, count: 1, extern: extern, line: line}
	for {
		t := ps.next()
		switch {
		case t.s == ".align":
			n, err := ps.number()
			if err != nil {
				return v, err
			}
			v.align = n
		case strings.HasPrefix(t.s, "."):
			typ, ok := parseType(t.s[1:])
			if !ok {
				return v, fmt.Errorf("line %d: shared variable type %s", t.line, t.s)
			}
			v.elemSize = typ.size()
		case t.kind == tIdent:
			v.name = t.s
			if ps.peek().s == "[" {
				ps.next()
				if ps.peek().s == "]" {
					v.count = -1
				} else {
					n, err := ps.number()
					if err != nil {
						return v, err
					}
					v.count = n
				}
				if _, err := ps.expect("]"); err != nil {
					return v, err
				}
			}
			if ps.peek().s == "=" {
				return v, fmt.Errorf("line %d: shared variables have no initialisers", t.line)
			}
			if _, err := ps.expect(";"); err != nil {
				return v, err
			}
			if v.elemSize == 0 {
				return v, fmt.Errorf("line %d: shared variable %s has no type", line, v.name)
			}
			if v.align == 0 {
				v.align = v.elemSize
			}
			return v, nil
		default:
			return v, fmt.Errorf("line %d: unexpected %q in a shared variable", t.line, t.s)
		}
	}
}

func (ps *parser) entry() error {
	m := ps.mod
	name := ps.next()
	if name.kind != tIdent {
		return fmt.Errorf("line %d: .entry without a name", name.line)
	}
	e := &Entry{Name: name.s, mod: m, regs: map[string]regInfo{}, ranges: map[string]regRange{}, labels: map[string]int{}}
	if _, dup := m.entries[e.Name]; dup {
		return fmt.Errorf("line %d: .entry %s defined twice", name.line, e.Name)
	}
	if ps.peek().s == "(" {
		ps.next()
		for ps.peek().s != ")" {
			if err := ps.param(e); err != nil {
				return err
			}
			if ps.peek().s == "," {
				ps.next()
			}
		}
		ps.next()
	}
	// performance directives up to the body
	for ps.peek().s != "{" {
		t := ps.next()
		var dst *[3]int
		switch t.s {
		case ".maxntid":
			dst = &e.MaxNTID
		case ".reqntid":
			dst = &e.ReqNTID
		case ".minnctapersm", ".maxnctapersm", ".maxnreg", ".maxclusterrank":
			if _, err := ps.number(); err != nil {
				return err
			}
			continue
		case ".reqnctapercluster":
			dst = &e.Cluster
		case ".explicitcluster", ".noreturn":
			continue
		case ".pragma":
			ps.next()
			if ps.peek().s == ";" {
				ps.next()
			}
			continue
		default:
			return fmt.Errorf("line %d: unexpected %q before the body of %s", t.line, t.s, e.Name)
		}
		for i := 0; i < 3; i++ {
			n, err := ps.number()
			if err != nil {
				return err
			}
			dst[i] = n
			if ps.peek().s != "," {
				break
			}
			ps.next()
		}
	}
	if c := e.Cluster; max(c[0], 1)*max(c[1], 1)*max(c[2], 1) > 1 {
		return fmt.Errorf(".reqnctapercluster %d, %d, %d of %s: clusters of CTAs (distributed shared memory, multicast copies) are not simulated", c[0], c[1], c[2], e.Name)
	}
	ps.next() // {
	if err := ps.body(e); err != nil {
		return err
	}
	m.entries[e.Name] = e
	m.order = append(m.order, e.Name)
	return nil
}

// param parses `.param [.align N] .type [.ptr...] name[N]`.
func (ps *parser) param(e *Entry) error {
	t := ps.next()
	if t.s != ".param" {
		return fmt.Errorf("line %d: expected .param, found %q", t.line, t.s)
	}
	p := Param{}
	for {
		t = ps.next()
		switch {
		case t.s == ".align":
			n, err := ps.number()
			if err != nil {
				return err
			}
			p.Align = n
		case t.s == ".ptr" || t.s == ".global" || t.s == ".shared" || t.s == ".const" || t.s == ".local":
			// pointer attributes (.ptr.global.align N): informational
		case strings.HasPrefix(t.s, ".ptr"):
		case strings.HasPrefix(t.s, "."):
			typ, ok := parseType(t.s[1:])
			if !ok {
				return fmt.Errorf("line %d: parameter type %s", t.line, t.s)
			}
			p.Type = t.s[1:]
			p.Size = typ.size()
		case t.kind == tIdent:
			p.Name = t.s
			if ps.peek().s == "[" {
				ps.next()
				n, err := ps.number()
				if err != nil {
					return err
				}
				if _, err := ps.expect("]"); err != nil {
					return err
				}
				p.Size *= n
			}
			if p.Size == 0 {
				return fmt.Errorf("line %d: parameter %s has no type", t.line, p.Name)
			}
			if p.Align == 0 {
				p.Align = p.Size
				if p.Align > 8 || p.Align&(p.Align-1) != 0 {
					p.Align = 1
				}
			}
			p.Offset = alignUp(e.paramSize, p.Align)
			e.paramSize = p.Offset + p.Size
			e.Params = append(e.Params, p)
			return nil
		default:
			return fmt.Errorf("line %d: unexpected %q in a parameter", t.line, t.s)
		}
	}
}

func alignUp(n, a int) int {
	if a <= 1 {
		return n
	}
	return (n + a - 1) / a * a
}

// body parses statements up to the closing brace of the entry (nested
// blocks are flattened: their registers are declared for the whole entry).
func (ps *parser) body(e *Entry) error {
	depth := 1
	for {
		if ps.eof() {
			return fmt.Errorf("%s: unterminated body", e.Name)
		}
		t := ps.next()
		switch {
		case t.s == "{":
			depth++
		case t.s == "}":
			depth--
			if depth == 0 {
				return nil
			}
		case t.s == ";":
		case t.s == ".reg":
			if err := ps.regDecl(e, t.line); err != nil {
				return err
			}
		case t.s == ".shared":
			v, err := ps.varDecl(t.line, false)
			if err != nil {
				return err
			}
			e.shared = append(e.shared, v)
		case t.s == ".pragma":
			ps.next()
			if _, err := ps.expect(";"); err != nil {
				return err
			}
		case t.s == ".loc" || t.s == ".file":
			ps.skipLine(t.line)
		case t.s == ".local" || t.s == ".global" || t.s == ".const" || t.s == ".param":
			return fmt.Errorf("line %d: %s variables inside a kernel are not simulated", t.line, t.s)
		case t.kind == tIdent && ps.peek().s == ":":
			ps.next()
			if _, dup := e.labels[t.s]; dup {
				return fmt.Errorf("line %d: label %s defined twice", t.line, t.s)
			}
			e.labels[t.s] = len(e.raw)
		case t.s == "@" || t.kind == tIdent:
			in := rawInst{line: t.line}
			if t.s == "@" {
				if ps.peek().s == "!" {
					ps.next()
					in.guardNeg = true
				}
				g := ps.next()
				if g.kind != tIdent {
					return fmt.Errorf("line %d: guard predicate expected after @", g.line)
				}
				in.guard = g.s
				t = ps.next()
				if t.kind != tIdent {
					return fmt.Errorf("line %d: instruction expected after @%s", t.line, in.guard)
				}
			}
			in.op = t.s
			var cur []token
			nest := 0
			for {
				a := ps.next()
				if a.s == "<EOF>" {
					return fmt.Errorf("line %d: %s: missing ';'", t.line, in.op)
				}
				if nest == 0 && a.s == ";" {
					break
				}
				switch a.s {
				case "{", "[":
					nest++
				case "}", "]":
					nest--
				}
				if nest == 0 && a.s == "," {
					in.args = append(in.args, cur)
					cur = nil
					continue
				}
				cur = append(cur, a)
			}
			if cur != nil {
				in.args = append(in.args, cur)
			}
			e.raw = append(e.raw, in)
		default:
			return fmt.Errorf("line %d: unexpected %q in the body of %s", t.line, t.s, e.Name)
		}
	}
}

// regDecl parses `.reg .type %r<N>;` or `.reg .type %a, %b;`.
func (ps *parser) regDecl(e *Entry, line int) error {
	t := ps.next()
	if t.s == ".v2" || t.s == ".v4" {
		return fmt.Errorf("line %d: vector registers are not simulated", line)
	}
	typ, ok := parseType(strings.TrimPrefix(t.s, "."))
	if !ok {
		return fmt.Errorf("line %d: register type %s", line, t.s)
	}
	for {
		n := ps.next()
		if n.kind != tIdent {
			return fmt.Errorf("line %d: register name expected, found %q", n.line, n.s)
		}
		if ps.peek().s == "<" {
			ps.next()
			cnt, err := ps.number()
			if err != nil {
				return err
			}
			if _, err := ps.expect(">"); err != nil {
				return err
			}
			if _, dup := e.ranges[n.s]; dup {
				return fmt.Errorf("line %d: registers %s<%d> declared twice", n.line, n.s, cnt)
			}
			e.ranges[n.s] = regRange{base: e.nregs, count: cnt, typ: typ}
			e.nregs += cnt
		} else {
			if _, dup := e.regs[n.s]; dup {
				return fmt.Errorf("line %d: register %s declared twice", n.line, n.s)
			}
			e.regs[n.s] = regInfo{idx: e.nregs, typ: typ}
			e.nregs++
		}
		s := ps.next()
		if s.s == ";" {
			return nil
		}
		if s.s != "," {
			return fmt.Errorf("line %d: expected ',' or ';' in .reg, found %q", s.line, s.s)
		}
	}
}

// reg resolves a register name: a single register, or one of a range
// (%r12 of %r<28>).
func (e *Entry) reg(name string) (regInfo, bool) {
	if r, ok := e.regs[name]; ok {
		return r, true
	}
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	if i == len(name) {
		return regInfo{}, false
	}
	rg, ok := e.ranges[name[:i]]
	if !ok {
		return regInfo{}, false
	}
	n, err := strconv.Atoi(name[i:])
	if err != nil || n >= rg.count || (len(name)-i > 1 && name[i] == '0') {
		return regInfo{}, false
	}
	return regInfo{idx: rg.base + n, typ: rg.typ}, true
}

// layoutShared assigns shared-memory offsets: module-scope then entry-scope
// static variables, then the dynamic window of the extern ones.
func (e *Entry) layoutShared() error {
	e.sharedSyms = map[string]uint64{}
	off := 0
	e.dynAlign = 16
	var externs []varDecl
	for _, v := range append(append([]varDecl(nil), e.mod.shared...), e.shared...) {
		if v.extern || v.count < 0 {
			externs = append(externs, v)
			if v.align > e.dynAlign {
				e.dynAlign = v.align
			}
			continue
		}
		off = alignUp(off, v.align)
		if _, dup := e.sharedSyms[v.name]; dup {
			return fmt.Errorf("line %d: shared variable %s declared twice", v.line, v.name)
		}
		e.sharedSyms[v.name] = uint64(off)
		off += v.elemSize * v.count
	}
	e.staticShared = off
	dyn := alignUp(off, e.dynAlign)
	for _, v := range externs {
		e.sharedSyms[v.name] = uint64(dyn)
	}
	return nil
}

// regName is the name of register number idx (for messages).
func (e *Entry) regName(idx int) string {
	for n, r := range e.regs {
		if r.idx == idx {
			return n
		}
	}
	for n, rg := range e.ranges {
		if idx >= rg.base && idx < rg.base+rg.count {
			return n + strconv.Itoa(idx-rg.base)
		}
	}
	return "#" + strconv.Itoa(idx)
}
