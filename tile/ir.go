package tile

import (
	"fmt"
	"sort"
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
	if v == nil {
		return "%<nil>"
	}
	if v.Op == OpParam {
		return "%" + v.Name
	}
	return fmt.Sprintf("%%%d", v.ID)
}

func refs(vs []*Value) string {
	parts := make([]string, len(vs))
	for i, a := range vs {
		parts[i] = a.ref()
	}
	return strings.Join(parts, ", ")
}

// String is the value's defining line in the text dump, without indentation.
func (v *Value) String() string {
	var sb strings.Builder
	writeValue(&sb, v, "")
	return strings.TrimRight(sb.String(), "\n")
}

// String dumps the kernel in a TTIR-like text form:
//
//	tt.func @vec_add(%x: !tt.ptr<f32>, %n: i32) meta {BLOCK = 128} {
//	  %3 = make_range {0, 128} : tensor<128xi32>
//	  ...
//	}
func (k *Kernel) String() string {
	var sb strings.Builder
	params := make([]string, len(k.Params))
	for i, p := range k.Params {
		params[i] = p.ref() + ": " + p.Type.String()
	}
	fmt.Fprintf(&sb, "tt.func @%s(%s)", k.Name, strings.Join(params, ", "))
	if len(k.Meta) > 0 {
		sb.WriteString(" meta " + k.Meta.String())
	}
	sb.WriteString(" {\n")
	if k.Body != nil {
		for _, v := range k.Body.Values {
			writeValue(&sb, v, "  ")
		}
	}
	sb.WriteString("}\n")
	return sb.String()
}

var axisNames = [3]string{"x", "y", "z"}

func axisName(a int64) string {
	if a >= 0 && a < 3 {
		return axisNames[a]
	}
	return fmt.Sprint(a)
}

func writeValue(sb *strings.Builder, v *Value, indent string) {
	sb.WriteString(indent)
	if !v.Type.IsVoid() || v.Op == OpFor {
		sb.WriteString(v.ref() + " = ")
	}
	name := v.Op.String()
	switch v.Op {
	case OpParam:
		fmt.Fprintf(sb, "param %d : %s", v.Aux, v.Type)
	case OpConst:
		switch {
		case v.Type.DType.IsFloat():
			fmt.Fprintf(sb, "const %v : %s", v.AuxF, v.Type)
		case v.Type.DType == I1:
			fmt.Fprintf(sb, "const %v : %s", v.Aux != 0, v.Type)
		default:
			fmt.Fprintf(sb, "const %d : %s", v.Aux, v.Type)
		}
	case OpProgramID, OpNumPrograms:
		fmt.Fprintf(sb, "%s %s : %s", name, axisName(v.Aux), v.Type)
	case OpArange:
		fmt.Fprintf(sb, "make_range {%d, %d} : %s", v.Aux, v.Aux2, v.Type)
	case OpExpandDims:
		fmt.Fprintf(sb, "expand_dims %s {axis = %d} : %s -> %s", refs(v.Args), v.Aux, argType(v, 0), v.Type)
	case OpSplat, OpBroadcast, OpReshape, OpTrans, OpCast:
		fmt.Fprintf(sb, "%s %s : %s -> %s", name, refs(v.Args), argType(v, 0), v.Type)
	case OpReduceSum, OpReduceMax, OpReduceMin:
		kd := ""
		if v.Aux2 != 0 {
			kd = ", keep_dims"
		}
		fmt.Fprintf(sb, "%s %s {axis = %d%s} : %s -> %s", name, refs(v.Args), v.Aux, kd, argType(v, 0), v.Type)
	case OpDot:
		fmt.Fprintf(sb, "dot %s {precision = %s} : %s * %s -> %s", refs(v.Args), v.Prec, argType(v, 0), argType(v, 1), v.Type)
	case OpStore, OpLoad, OpAtomicAdd:
		hint := ""
		if v.Aux != 0 {
			hint = fmt.Sprintf(" {cache = %v}", CacheHint(v.Aux))
		}
		fmt.Fprintf(sb, "%s %s%s : %s", name, refs(v.Args), hint, argType(v, 0))
	case OpFor:
		writeFor(sb, v, indent)
	case OpForResult:
		fmt.Fprintf(sb, "for_result %s #%d : %s", refs(v.Args), v.Aux, v.Type)
	case OpYield:
		fmt.Fprintf(sb, "yield %s", refs(v.Args))
	default:
		fmt.Fprintf(sb, "%s %s : %s", name, refs(v.Args), v.Type)
	}
	sb.WriteString("\n")
}

func argType(v *Value, i int) string {
	if i < len(v.Args) && v.Args[i] != nil {
		return v.Args[i].Type.String()
	}
	return "?"
}

// writeFor prints
//
//	for %iv = %lo to %hi step %s iter_args(%5 = %init, ...) {
//	  ...
//	  yield ...
//	}
func writeFor(sb *strings.Builder, v *Value, indent string) {
	var bargs []*Value
	if v.Body != nil {
		bargs = v.Body.Args
	}
	iv := "%?"
	if len(bargs) > 0 {
		iv = bargs[0].ref()
	}
	if len(v.Args) < 3 {
		fmt.Fprintf(sb, "for %s (malformed: %d operands) {\n", iv, len(v.Args))
	} else {
		fmt.Fprintf(sb, "for %s = %s to %s step %s", iv, v.Args[0].ref(), v.Args[1].ref(), v.Args[2].ref())
		inits := v.Args[3:]
		if len(inits) > 0 {
			parts := make([]string, len(inits))
			for i, in := range inits {
				a := "%?"
				if i+1 < len(bargs) {
					a = bargs[i+1].ref()
				}
				parts[i] = a + " = " + in.ref()
			}
			fmt.Fprintf(sb, " iter_args(%s)", strings.Join(parts, ", "))
		}
		sb.WriteString(" {\n")
	}
	if v.Body != nil {
		for _, b := range v.Body.Values {
			writeValue(sb, b, indent+"  ")
		}
	}
	sb.WriteString(indent + "}")
}
