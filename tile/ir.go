package tile

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Value is one SSA value and the operation that defines it. Ops without a
// result (store, yield, for) have a Void type; a loop's results are OpForResult
// values.
type Value struct {
	ID   int // unique within its kernel; printed as %ID
	Op   Op
	Type Type
	Args []*Value

	// Attributes; what each means is stated per op in ops.go.
	Aux  int64
	Aux2 int64
	AuxF float64
	Name string    // OpParam: the parameter's name
	Prec Precision // OpDot
	Body *Block    // OpFor: the loop body

	kernel *Kernel // the kernel whose Builder made it (nil for values made by hand)
}

// Block is a straight-line list of values. A loop body starts with its
// arguments (induction variable, then loop-carried values) and ends in OpYield.
type Block struct {
	Args   []*Value
	Values []*Value
}

// Meta holds a kernel's meta-parameters (Triton's constexpr): block sizes and
// other integers fixed when the kernel is specialised.
type Meta map[string]int

// String writes m sorted by name: "{BLOCK = 128, N = 1000}".
func (m Meta) String() string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s = %d", k, m[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// Kernel is the program of one program instance, specialised for its Meta.
type Kernel struct {
	Name   string
	Params []*Value // OpParam values, in call order
	Meta   Meta
	Body   *Block
	nextID int
}

// Param returns the parameter called name, or nil.
func (k *Kernel) Param(name string) *Value {
	for _, p := range k.Params {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// NumValues is one more than the largest value ID.
func (k *Kernel) NumValues() int { return k.nextID }

// Walk calls f for every value of the kernel in program order, loop bodies
// (their arguments first) nested where their loop stands, after the loop's operands.
func (k *Kernel) Walk(f func(v *Value)) {
	for _, p := range k.Params {
		f(p)
	}
	walkBlock(k.Body, f)
}

func walkBlock(b *Block, f func(v *Value)) {
	if b == nil {
		return
	}
	for _, a := range b.Args {
		f(a)
	}
	for _, v := range b.Values {
		f(v)
		if v.Op == OpFor {
			walkBlock(v.Body, f)
		}
	}
}

// Count returns how many values of the kernel have op o.
func (k *Kernel) Count(o Op) int {
	n := 0
	k.Walk(func(v *Value) {
		if v.Op == o {
			n++
		}
	})
	return n
}

func (v *Value) ref() string {
	var w irWriter
	w.ref(v)
	return string(w.b)
}

func refs(vs []*Value) string {
	var w irWriter
	w.refs(vs)
	return string(w.b)
}

// String is the value's defining line in the text dump, without indentation.
func (v *Value) String() string {
	var w irWriter
	w.value(v, "")
	return strings.TrimRight(string(w.b), "\n")
}

// String dumps the kernel in a TTIR-like text form:
//
//	tt.func @vec_add(%x: !tt.ptr<f32>, %n: i32) meta {BLOCK = 128} {
//	  %3 = make_range {0, 128} : tensor<128xi32>
//	  ...
//	}
func (k *Kernel) String() string { return k.text(true) }

// Anonymous is the kernel's text (String) with its name left out: the same
// for kernels that differ in nothing but their names (the kernels of two
// identical layers), which therefore compute the same on the same
// arguments. Backends key their compiled forms by it.
func (k *Kernel) Anonymous() string { return k.text(false) }

func (k *Kernel) text(named bool) string {
	w := irWriter{b: make([]byte, 0, 64*(len(k.Params)+k.size()))}
	w.str("tt.func @")
	if named {
		w.str(k.Name)
	}
	w.str("(")
	for i, p := range k.Params {
		if i > 0 {
			w.str(", ")
		}
		w.ref(p)
		w.str(": ")
		w.typ(p.Type)
	}
	w.str(")")
	if len(k.Meta) > 0 {
		w.str(" meta ")
		w.str(k.Meta.String())
	}
	w.str(" {\n")
	if k.Body != nil {
		for _, v := range k.Body.Values {
			w.value(v, "  ")
		}
	}
	w.str("}\n")
	return string(w.b)
}

// size is the number of values of the kernel: parameters, the body's and
// its loops' values and arguments.
func (k *Kernel) size() int {
	n := 0
	k.Walk(func(*Value) { n++ })
	return n
}

// irWriter appends the text dump to b (fmt's cost was most of a cached
// compile of a large graph, where the text keys the kernel caches).
type irWriter struct{ b []byte }

func (w *irWriter) str(s string)    { w.b = append(w.b, s...) }
func (w *irWriter) int(i int64)     { w.b = strconv.AppendInt(w.b, i, 10) }
func (w *irWriter) float(f float64) { w.b = strconv.AppendFloat(w.b, f, 'g', -1, 64) }

func (w *irWriter) ref(v *Value) {
	switch {
	case v == nil:
		w.str("%<nil>")
	case v.Op == OpParam:
		w.str("%")
		w.str(v.Name)
	default:
		w.str("%")
		w.int(int64(v.ID))
	}
}

func (w *irWriter) refs(vs []*Value) {
	for i, a := range vs {
		if i > 0 {
			w.str(", ")
		}
		w.ref(a)
	}
}

func (w *irWriter) typ(t Type) {
	if t.Shape.Rank == 0 {
		w.elem(t)
		return
	}
	w.str("tensor<")
	for i := 0; i < t.Shape.Rank && i < MaxRank; i++ {
		w.int(int64(t.Shape.Dims[i]))
		w.str("x")
	}
	w.elem(t)
	w.str(">")
}

func (w *irWriter) elem(t Type) {
	if t.Ptr {
		w.str("!tt.ptr<")
		w.str(t.DType.String())
		w.str(">")
		return
	}
	w.str(t.DType.String())
}

// argType writes the type of v's operand i ("?" if it has none).
func (w *irWriter) argType(v *Value, i int) {
	if i < len(v.Args) && v.Args[i] != nil {
		w.typ(v.Args[i].Type)
		return
	}
	w.str("?")
}

var axisNames = [3]string{"x", "y", "z"}

func axisName(a int64) string {
	if a >= 0 && a < 3 {
		return axisNames[a]
	}
	return fmt.Sprint(a)
}

func (w *irWriter) value(v *Value, indent string) {
	w.str(indent)
	if !v.Type.IsVoid() || v.Op == OpFor {
		w.ref(v)
		w.str(" = ")
	}
	name := v.Op.String()
	switch v.Op {
	case OpParam:
		w.str("param ")
		w.int(v.Aux)
		w.str(" : ")
		w.typ(v.Type)
	case OpConst:
		w.str("const ")
		switch {
		case v.Type.DType.IsFloat():
			w.float(v.AuxF)
		case v.Type.DType == I1:
			w.b = strconv.AppendBool(w.b, v.Aux != 0)
		default:
			w.int(v.Aux)
		}
		w.str(" : ")
		w.typ(v.Type)
	case OpProgramID, OpNumPrograms:
		w.str(name)
		w.str(" ")
		w.str(axisName(v.Aux))
		w.str(" : ")
		w.typ(v.Type)
	case OpArange:
		w.str("make_range {")
		w.int(v.Aux)
		w.str(", ")
		w.int(v.Aux2)
		w.str("} : ")
		w.typ(v.Type)
	case OpExpandDims:
		w.str("expand_dims ")
		w.refs(v.Args)
		w.str(" {axis = ")
		w.int(v.Aux)
		w.str("} : ")
		w.argType(v, 0)
		w.str(" -> ")
		w.typ(v.Type)
	case OpSplat, OpBroadcast, OpReshape, OpTrans, OpCast:
		w.str(name)
		w.str(" ")
		w.refs(v.Args)
		w.str(" : ")
		w.argType(v, 0)
		w.str(" -> ")
		w.typ(v.Type)
	case OpReduceSum, OpReduceMax, OpReduceMin:
		w.str(name)
		w.str(" ")
		w.refs(v.Args)
		w.str(" {axis = ")
		w.int(v.Aux)
		if v.Aux2 != 0 {
			w.str(", keep_dims")
		}
		w.str("} : ")
		w.argType(v, 0)
		w.str(" -> ")
		w.typ(v.Type)
	case OpDot:
		w.str("dot ")
		w.refs(v.Args)
		w.str(" {precision = ")
		w.str(v.Prec.String())
		w.str("} : ")
		w.argType(v, 0)
		w.str(" * ")
		w.argType(v, 1)
		w.str(" -> ")
		w.typ(v.Type)
	case OpStore, OpLoad, OpAtomicAdd:
		w.str(name)
		w.str(" ")
		w.refs(v.Args)
		if v.Aux != 0 {
			w.str(" {cache = ")
			w.str(CacheHint(v.Aux).String())
			w.str("}")
		}
		w.str(" : ")
		w.argType(v, 0)
	case OpFor:
		w.loop(v, indent)
	case OpForResult:
		w.str("for_result ")
		w.refs(v.Args)
		w.str(" #")
		w.int(v.Aux)
		w.str(" : ")
		w.typ(v.Type)
	case OpYield:
		w.str("yield ")
		w.refs(v.Args)
	case OpExp2:
		w.str(name)
		w.str(" ")
		w.refs(v.Args)
		if v.Aux == 1 {
			w.str(" {ftz}")
		}
		w.str(" : ")
		w.typ(v.Type)
	default:
		w.str(name)
		w.str(" ")
		w.refs(v.Args)
		w.str(" : ")
		w.typ(v.Type)
	}
	w.str("\n")
}

// loop writes
//
//	for %iv = %lo to %hi step %s iter_args(%5 = %init, ...) {
//	  ...
//	  yield ...
//	}
func (w *irWriter) loop(v *Value, indent string) {
	var bargs []*Value
	if v.Body != nil {
		bargs = v.Body.Args
	}
	iv := func() {
		if len(bargs) > 0 {
			w.ref(bargs[0])
		} else {
			w.str("%?")
		}
	}
	if len(v.Args) < 3 {
		w.str("for ")
		iv()
		w.str(" (malformed: ")
		w.int(int64(len(v.Args)))
		w.str(" operands) {\n")
	} else {
		w.str("for ")
		iv()
		w.str(" = ")
		w.ref(v.Args[0])
		w.str(" to ")
		w.ref(v.Args[1])
		w.str(" step ")
		w.ref(v.Args[2])
		if inits := v.Args[3:]; len(inits) > 0 {
			w.str(" iter_args(")
			for i, in := range inits {
				if i > 0 {
					w.str(", ")
				}
				if i+1 < len(bargs) {
					w.ref(bargs[i+1])
				} else {
					w.str("%?")
				}
				w.str(" = ")
				w.ref(in)
			}
			w.str(")")
		}
		w.str(" {\n")
	}
	if v.Body != nil {
		for _, b := range v.Body.Values {
			w.value(b, indent+"  ")
		}
	}
	w.str(indent)
	w.str("}")
}
