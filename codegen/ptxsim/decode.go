package ptxsim

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strconv"
	"strings"
)

type ikind uint8

const (
	iOp   ikind = iota // runs on the lanes whose guard holds, then every lane goes on
	iBra               // bra: the lanes whose guard holds jump
	iExit              // ret, exit
	iBar               // bar.sync, bar.arrive, barrier.sync
)

// inst is a decoded instruction.
type inst struct {
	line     int
	text     string
	pc       int    // index in the program
	op       string // the full opcode, e.g. ld.global.v4.f32
	guard    int    // register base index (reg*32) of the guard predicate, -1 if none
	guardNeg bool
	kind     ikind
	uni      bool // bra.uni
	target   int
	// collective instructions (.sync.aligned) need every live lane of the
	// warp, converged, with a true guard
	collective bool
	barID      operand
	barCount   operand
	barArrive  bool
	run        func(w *warp, m uint32) error
	// registers the instruction names (touch) and those it writes (its
	// first operand, unless that is an address): for the wgmma hazard
	// checks, in kernels that use wgmma (nil in wgmma's own instructions)
	touch, writes []int32
}

type okind uint8

const (
	oNone okind = iota
	oReg
	oImm
	oSpecial
	oSink
)

// operand is a register, an immediate (already in the bits of the type it
// is read as), a special register, or the sink _.
type operand struct {
	kind okind
	idx  int // oReg: register index × 32
	rtyp ptxType
	neg  bool // !%p (predicate operands)
	imm  uint64
	sreg sreg
}

// val reads the operand for lane l.
func (w *warp) val(o *operand, l int) uint64 {
	switch o.kind {
	case oReg:
		return w.r[o.idx+l]
	case oImm:
		return o.imm
	case oSpecial:
		return w.special(o.sreg, l)
	}
	return 0
}

// pval reads a predicate operand (with its negation) for lane l.
func (w *warp) pval(o *operand, l int) bool {
	return (w.val(o, l)&1 != 0) != o.neg
}

func (w *warp) set(o *operand, l int, v uint64) {
	if o.kind == oReg {
		w.r[o.idx+l] = v
	}
}

// addrOperand is [base+offset] or [symbol+offset].
type addrOperand struct {
	base     operand // oNone when absent
	off      uint64  // offset plus the symbol's address
	sym      string
	symSpace space
}

func (w *warp) addr(a *addrOperand, l int) uint64 {
	if a.base.kind == oNone {
		return a.off
	}
	return w.val(&a.base, l) + a.off
}

// sreg is a special register (PTX ISA §10).
type sreg uint8

const (
	sTid sreg = iota // + dimension
	_
	_
	sNtid
	_
	_
	sCtaid
	_
	_
	sNctaid
	_
	_
	sClusterid
	_
	_
	sNclusterid
	_
	_
	sClusterCtaid
	_
	_
	sClusterNctaid
	_
	_
	sLaneid
	sWarpid
	sNwarpid
	sSmid
	sNsmid
	sGridid
	sLanemaskEq
	sLanemaskLt
	sLanemaskLe
	sLanemaskGt
	sLanemaskGe
	sClock
	sClock64
	sGlobaltimer
	sDynSmem
	sTotalSmem
	sClusterCtarank
	sClusterNctarank
	sIsExplicitCluster
)

var sregNames = map[string]sreg{
	"%tid": sTid, "%ntid": sNtid, "%ctaid": sCtaid, "%nctaid": sNctaid,
	"%clusterid": sClusterid, "%nclusterid": sNclusterid, "%cluster_ctaid": sClusterCtaid, "%cluster_nctaid": sClusterNctaid,
	"%laneid": sLaneid, "%warpid": sWarpid, "%nwarpid": sNwarpid, "%smid": sSmid, "%nsmid": sNsmid, "%gridid": sGridid,
	"%lanemask_eq": sLanemaskEq, "%lanemask_lt": sLanemaskLt, "%lanemask_le": sLanemaskLe,
	"%lanemask_gt": sLanemaskGt, "%lanemask_ge": sLanemaskGe,
	"%clock": sClock, "%clock64": sClock64, "%globaltimer": sGlobaltimer,
	"%dynamic_smem_size": sDynSmem, "%total_smem_size": sTotalSmem,
	"%cluster_ctarank": sClusterCtarank, "%cluster_nctarank": sClusterNctarank, "%is_explicit_cluster": sIsExplicitCluster,
}

func parseSreg(name string) (sreg, bool) {
	base, dim := name, ""
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		base, dim = name[:i], name[i+1:]
	}
	s, ok := sregNames[base]
	if !ok {
		return 0, false
	}
	vector := s <= sClusterNctaid
	if vector != (dim != "") {
		return 0, false
	}
	switch dim {
	case "y":
		s++
	case "z":
		s += 2
	case "x", "":
	default:
		return 0, false
	}
	return s, true
}

// special is a special register's value for lane l. A CTA is its own
// cluster (no cluster launch is simulated); the SM is 0 of 132.
func (w *warp) special(s sreg, l int) uint64 {
	c := w.c
	switch {
	case s < sNtid:
		return uint64(w.tid(l)[s-sTid])
	case s < sCtaid:
		return uint64(c.l.cfg.Block[s-sNtid])
	case s < sNctaid:
		return uint64(c.id[s-sCtaid])
	case s < sClusterid:
		return uint64(c.l.cfg.Grid[s-sNctaid])
	case s < sNclusterid:
		return uint64(c.id[s-sClusterid])
	case s < sClusterCtaid:
		return uint64(c.l.cfg.Grid[s-sNclusterid])
	case s < sClusterNctaid:
		return 0
	case s < sLaneid:
		return 1
	}
	switch s {
	case sLaneid:
		return uint64(l)
	case sWarpid:
		return uint64(w.id)
	case sNwarpid:
		return 64
	case sSmid, sGridid, sClusterCtarank, sIsExplicitCluster:
		return 0
	case sNsmid:
		return 132
	case sClusterNctarank:
		return 1
	case sLanemaskEq:
		return 1 << l
	case sLanemaskLt:
		return 1<<l - 1
	case sLanemaskLe:
		return 1<<(l+1) - 1
	case sLanemaskGt:
		return uint64(^uint32(1<<(l+1) - 1))
	case sLanemaskGe:
		return uint64(^uint32(1<<l - 1))
	case sClock:
		return uint64(uint32(c.steps))
	case sClock64, sGlobaltimer:
		return uint64(c.steps)
	case sDynSmem:
		return uint64(c.l.cfg.DynamicShared)
	case sTotalSmem:
		return uint64(c.l.sharedSize)
	}
	return 0
}

// decoder decodes one raw instruction.
type decoder struct {
	e    *Entry
	raw  *rawInst
	base string   // opcode's first part: ld, mma, ...
	mods []string // the rest: global, v4, f32, ...
	in   *inst
}

// decodeFn turns an instruction into its run function (and kind). One is
// registered per base opcode in the ops table; new instruction families
// (wgmma, mbarrier, cp.async.bulk) are added by registering theirs.
type decodeFn func(d *decoder) error

var ops = map[string]decodeFn{}

// register adds a family of instructions to the decoder (called from init
// functions, one file per family).
func register(fn decodeFn, bases ...string) {
	for _, b := range bases {
		if _, dup := ops[b]; dup {
			panic("ptxsim: opcode " + b + " registered twice")
		}
		ops[b] = fn
	}
}

// Supported lists the base opcodes the simulator decodes.
func Supported() []string {
	var s []string
	for k := range ops {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

func (e *Entry) decode() error {
	if err := e.layoutShared(); err != nil {
		return err
	}
	e.prog = make([]*inst, len(e.raw))
	for i := range e.raw {
		raw := &e.raw[i]
		parts := strings.Split(raw.op, ".")
		in := &inst{line: raw.line, text: e.mod.line(raw.line), pc: i, op: raw.op, guard: -1}
		if in.text == "" {
			in.text = raw.op
		}
		d := &decoder{e: e, raw: raw, base: parts[0], mods: parts[1:], in: in}
		if raw.guard != "" {
			r, ok := e.reg(raw.guard)
			if !ok || r.typ != tyPred {
				return d.errorf("guard %s is not a declared .pred register", raw.guard)
			}
			in.guard, in.guardNeg = r.idx*32, raw.guardNeg
		}
		fn, ok := ops[d.base]
		if !ok {
			return d.errorf("%s is not simulated (the simulator knows %s)", raw.op, strings.Join(Supported(), " "))
		}
		if err := fn(d); err != nil {
			return err
		}
		if in.kind == iOp && in.run == nil {
			return d.errorf("internal: no run function")
		}
		if d.base == "wgmma" {
			e.wgmma = true
		} else if in.kind == iOp {
			in.touch, in.writes = d.registersNamed()
		}
		e.prog[i] = in
	}
	return nil
}

// registersNamed lists the registers in the instruction's operands, and
// those of its first operand where that is a destination (not an address
// in brackets).
func (d *decoder) registersNamed() (touch, writes []int32) {
	for i, arg := range d.raw.args {
		for _, t := range arg {
			if t.kind != tIdent {
				continue
			}
			r, ok := d.e.reg(t.s)
			if !ok {
				continue
			}
			touch = append(touch, int32(r.idx))
			if i == 0 && (len(arg) == 0 || arg[0].s != "[") {
				writes = append(writes, int32(r.idx))
			}
		}
	}
	return touch, writes
}

func (d *decoder) errorf(format string, args ...any) error {
	return fmt.Errorf("line %d `%s`: %s", d.raw.line, d.in.text, fmt.Sprintf(format, args...))
}

func (d *decoder) has(mod string) bool {
	for _, m := range d.mods {
		if m == mod {
			return true
		}
	}
	return false
}

// hasPrefix reports the first modifier starting with p.
func (d *decoder) hasPrefix(p string) (string, bool) {
	for _, m := range d.mods {
		if strings.HasPrefix(m, p) {
			return m, true
		}
	}
	return "", false
}

// types lists the type modifiers in order.
func (d *decoder) types() []ptxType {
	var ts []ptxType
	for _, m := range d.mods {
		if t, ok := parseType(m); ok {
			ts = append(ts, t)
		}
	}
	return ts
}

// typ is the single (or last) type modifier.
func (d *decoder) typ() (ptxType, error) {
	ts := d.types()
	if len(ts) == 0 {
		return 0, d.errorf("no type")
	}
	return ts[len(ts)-1], nil
}

func (d *decoder) nargs(ns ...int) error {
	for _, n := range ns {
		if len(d.raw.args) == n {
			return nil
		}
	}
	return d.errorf("%d operands, want %v", len(d.raw.args), ns)
}

func (d *decoder) arg(i int) []token {
	if i < len(d.raw.args) {
		return d.raw.args[i]
	}
	return nil
}

func joinToks(ts []token) string {
	var sb strings.Builder
	for _, t := range ts {
		sb.WriteString(t.s)
	}
	return sb.String()
}

// regOf resolves a single-token register operand.
func (d *decoder) regOf(ts []token) (operand, error) {
	if len(ts) != 1 || ts[0].kind != tIdent {
		return operand{}, d.errorf("register expected, found %q", joinToks(ts))
	}
	if ts[0].s == "_" {
		return operand{kind: oSink}, nil
	}
	r, ok := d.e.reg(ts[0].s)
	if !ok {
		return operand{}, d.errorf("%s is not a declared register", ts[0].s)
	}
	return operand{kind: oReg, idx: r.idx * 32, rtyp: r.typ}, nil
}

// dst is a destination register (or _).
func (d *decoder) dst(i int) (operand, error) { return d.regOf(d.arg(i)) }

// dstPair is `p|q` (setp's second, complemented, destination) or one register.
func (d *decoder) dstPair(i int) (operand, operand, error) {
	ts := d.arg(i)
	for j, t := range ts {
		if t.s == "|" {
			p, err := d.regOf(ts[:j])
			if err != nil {
				return p, p, err
			}
			q, err := d.regOf(ts[j+1:])
			return p, q, err
		}
	}
	p, err := d.regOf(ts)
	return p, operand{}, err
}

// src is a source operand read as type t: a register, an immediate, a
// special register, or a shared variable's address.
func (d *decoder) src(i int, t ptxType) (operand, error) {
	return d.operand(d.arg(i), t)
}

func (d *decoder) operand(ts []token, t ptxType) (operand, error) {
	if len(ts) == 0 {
		return operand{}, d.errorf("missing operand")
	}
	neg := false
	if ts[0].s == "!" {
		neg = true
		ts = ts[1:]
	}
	if len(ts) == 1 && ts[0].kind == tIdent {
		name := ts[0].s
		if r, ok := d.e.reg(name); ok {
			return operand{kind: oReg, idx: r.idx * 32, rtyp: r.typ, neg: neg}, nil
		}
		if s, ok := parseSreg(name); ok {
			return operand{kind: oSpecial, sreg: s}, nil
		}
		if off, ok := d.e.sharedSyms[name]; ok {
			return operand{kind: oImm, imm: off}, nil
		}
		if p, ok := d.e.param(name); ok {
			// a kernel parameter's address (mov.b64 %rd, param; then
			// cvta.param): the simulator's param window
			return operand{kind: oImm, imm: paramWindow + uint64(p.Offset)}, nil
		}
		return operand{}, d.errorf("%s is neither a declared register, a special register, a shared variable nor a parameter", name)
	}
	// immediates: [-] number
	sign := false
	if ts[0].s == "-" {
		sign = true
		ts = ts[1:]
	}
	if len(ts) != 1 || ts[0].kind != tNum {
		return operand{}, d.errorf("operand %q not understood", joinToks(ts))
	}
	v, err := d.immediate(ts[0].s, sign, t)
	return operand{kind: oImm, imm: v}, err
}

// immediate converts a literal (PTX ISA §4.5: integer, 0f/0d hex float,
// decimal float) into the bits of type t.
func (d *decoder) immediate(s string, neg bool, t ptxType) (uint64, error) {
	lower := strings.ToLower(s)
	var fv float64
	isFloat := false
	switch {
	case strings.HasPrefix(lower, "0f") && len(s) == 10:
		u, err := strconv.ParseUint(s[2:], 16, 32)
		if err != nil {
			return 0, d.errorf("literal %s: %v", s, err)
		}
		fv, isFloat = float64(math.Float32frombits(uint32(u))), true
		if !neg && t != tyF64 && t != tyF16 && t != tyBF16 {
			return u, nil // the bits themselves, for .f32 and bit types
		}
	case strings.HasPrefix(lower, "0d") && len(s) == 18:
		u, err := strconv.ParseUint(s[2:], 16, 64)
		if err != nil {
			return 0, d.errorf("literal %s: %v", s, err)
		}
		fv, isFloat = math.Float64frombits(u), true
		if !neg && t != tyF32 && t != tyF16 && t != tyBF16 {
			return u, nil
		}
	case strings.ContainsAny(lower, ".e") && !strings.HasPrefix(lower, "0x"):
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, d.errorf("literal %s: %v", s, err)
		}
		fv, isFloat = f, true
	}
	if isFloat {
		if neg {
			fv = -fv
		}
		switch t {
		case tyF32:
			return b32(float32(fv)), nil
		case tyF64:
			return b64(fv), nil
		case tyF16:
			return fmtF16.round(fv, rn), nil
		case tyBF16:
			return fmtBF16.round(fv, rn), nil
		}
		return 0, d.errorf("float literal %s for a .%v operand", s, t)
	}
	s = strings.TrimSuffix(strings.TrimSuffix(s, "U"), "u")
	u, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		// octal and binary forms: 0b101, 017
		return 0, d.errorf("literal %s: %v", s, err)
	}
	if neg {
		u = -u
	}
	switch t {
	case tyF32:
		return b32(float32(int64(u))), nil
	case tyF64:
		return b64(float64(int64(u))), nil
	case tyPred:
		return u & 1, nil
	}
	if t == tyNone {
		return u, nil
	}
	return t.ival(u), nil
}

// vec parses {a, b, ...} as registers (or _) of type t; sources may be
// immediates.
func (d *decoder) vec(i int, t ptxType, src bool) ([]operand, error) {
	ts := d.arg(i)
	if len(ts) < 2 || ts[0].s != "{" || ts[len(ts)-1].s != "}" {
		return nil, d.errorf("vector operand {...} expected, found %q", joinToks(ts))
	}
	var out []operand
	inner := ts[1 : len(ts)-1]
	start := 0
	for j := 0; j <= len(inner); j++ {
		if j == len(inner) || inner[j].s == "," {
			var o operand
			var err error
			if src {
				if len(inner[start:j]) == 1 && inner[start].s == "_" {
					o = operand{kind: oSink}
				} else {
					o, err = d.operand(inner[start:j], t)
				}
			} else {
				o, err = d.regOf(inner[start:j])
			}
			if err != nil {
				return nil, err
			}
			out = append(out, o)
			start = j + 1
		}
	}
	return out, nil
}

func (d *decoder) isVec(i int) bool {
	ts := d.arg(i)
	return len(ts) > 0 && ts[0].s == "{"
}

// copyOperands decodes a copy's [dst], [src], size (its first three
// operands: cp.async and the bulk copies).
func (d *decoder) copyOperands() (dst, src addrOperand, size operand, err error) {
	if dst, err = d.address(0); err != nil {
		return
	}
	if src, err = d.address(1); err != nil {
		return
	}
	size, err = d.src(2, tyU32)
	return
}

// address parses [reg], [reg+imm], [sym], [sym+imm], [imm].
func (d *decoder) address(i int) (addrOperand, error) {
	ts := d.arg(i)
	if len(ts) < 3 || ts[0].s != "[" || ts[len(ts)-1].s != "]" {
		return addrOperand{}, d.errorf("address [...] expected, found %q", joinToks(ts))
	}
	inner := ts[1 : len(ts)-1]
	var a addrOperand
	if inner[0].kind == tIdent {
		name := inner[0].s
		if r, ok := d.e.reg(name); ok {
			a.base = operand{kind: oReg, idx: r.idx * 32, rtyp: r.typ}
		} else if off, ok := d.e.sharedSyms[name]; ok {
			a.off, a.sym, a.symSpace = off, name, spShared
		} else if p, ok := d.e.param(name); ok {
			a.off, a.sym, a.symSpace = uint64(p.Offset), name, spParam
		} else {
			return a, d.errorf("%s in an address is not a register, shared variable or parameter", name)
		}
		inner = inner[1:]
	}
	if len(inner) == 0 {
		return a, nil
	}
	neg := false
	switch inner[0].s {
	case "+":
		inner = inner[1:]
		if len(inner) > 0 && inner[0].s == "-" {
			neg = true
			inner = inner[1:]
		}
	case "-":
		neg = true
		inner = inner[1:]
	default:
		if a.base.kind != oNone || a.sym != "" {
			return a, d.errorf("address %q not understood", joinToks(ts))
		}
	}
	if len(inner) != 1 || inner[0].kind != tNum {
		return a, d.errorf("address %q not understood", joinToks(ts))
	}
	v, err := d.immediate(inner[0].s, neg, tyS64)
	if err != nil {
		return a, err
	}
	a.off += v
	return a, nil
}

func (e *Entry) param(name string) (Param, bool) {
	for _, p := range e.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

func (d *decoder) label(i int) (int, error) {
	ts := d.arg(i)
	if len(ts) != 1 || ts[0].kind != tIdent {
		return 0, d.errorf("label expected, found %q", joinToks(ts))
	}
	t, ok := d.e.labels[ts[0].s]
	if !ok {
		return 0, d.errorf("label %s is not defined", ts[0].s)
	}
	return t, nil
}

// forLanes runs f on each lane of m.
func forLanes(m uint32, f func(l int)) {
	for ; m != 0; m &= m - 1 {
		f(bits.TrailingZeros32(m))
	}
}
