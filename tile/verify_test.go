package tile

import (
	"strings"
	"testing"
)

// sample builds a small valid kernel touching most op kinds: a masked load,
// a loop carrying a block and a pointer, a reduction, a dot and a store.
func sample(t *testing.T) *Kernel {
	t.Helper()
	b := NewBuilder("sample", Meta{"B": 16})
	x, out := b.Ptr("x", F32), b.Ptr("out", F32)
	n := b.Param("n", I32)
	r := b.Arange(0, 16)
	r2 := b.Add(b.Mul(b.ExpandDims(r, 1), 16), b.ExpandDims(r, 0)) // [16,16]
	mask := b.Lt(r2, n)
	p := b.AddPtr(x, r2)
	v := b.Load(p, mask, 0.0)
	res := b.For(0, 4, 1, []*Value{v, p}, func(i *Value, c []*Value) []*Value {
		return []*Value{b.Dot(c[0], b.Trans(c[0]), nil, PrecIEEE), b.AddPtr(c[1], 0)}
	})
	s := b.Sum(res[0], 1, KeepDims)
	b.Store(b.AddPtr(out, r2), b.Where(mask, b.Sub(res[0], s), b.Exp(res[0])), mask)
	k, err := b.Build()
	if err != nil {
		t.Fatalf("sample does not build: %v", err)
	}
	return k
}

// first returns the first value with op o, searching loop bodies too.
func first(k *Kernel, o Op) *Value {
	var found *Value
	k.Walk(func(v *Value) {
		if found == nil && v.Op == o {
			found = v
		}
	})
	return found
}

// last returns the last value with op o, searching loop bodies too.
func last(k *Kernel, o Op) *Value {
	var found *Value
	k.Walk(func(v *Value) {
		if v.Op == o {
			found = v
		}
	})
	return found
}

// prepend defines a new value at the start of the kernel's body.
func prepend(k *Kernel, o Op, t Type, args ...*Value) *Value {
	v := &Value{ID: k.nextID, Op: o, Type: t, Args: args}
	k.nextID++
	k.Body.Values = append([]*Value{v}, k.Body.Values...)
	return v
}

// block prepends a defined f32 block of the given dims (a splat constant).
func block(k *Kernel, d DType, dims ...int) *Value {
	c := prepend(k, OpConst, ScalarOf(d))
	s := &Value{ID: k.nextID, Op: OpSplat, Type: BlockOf(d, dims...), Args: []*Value{c}}
	k.nextID++
	k.Body.Values = append([]*Value{c, s}, k.Body.Values[1:]...)
	return s
}

func TestSampleVerifies(t *testing.T) {
	k := sample(t)
	if err := k.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestVerifierRejects breaks one rule per case in an otherwise valid kernel.
func TestVerifierRejects(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(k *Kernel)
		want   string
	}{
		{"use before definition", func(k *Kernel) {
			vs := k.Body.Values
			for i, v := range vs {
				if v.Op == OpMul {
					vs[i], vs[i-1] = vs[i-1], vs[i]
					return
				}
			}
		}, "used before its definition"},
		{"loop value used outside its loop", func(k *Kernel) {
			dot := first(k, OpDot)
			first(k, OpReduceSum).Args[0] = dot
		}, "outside its loop"},
		{"block dimension not a power of two", func(k *Kernel) {
			first(k, OpArange).Type = BlockOf(I32, 12)
		}, "not a power of two"},
		{"rank above 3", func(k *Kernel) {
			first(k, OpArange).Type.Shape = Shape{Rank: 4}
		}, "rank 4"},
		{"binary operand types differ", func(k *Kernel) {
			add := first(k, OpAdd)
			add.Args[1] = first(k, OpArange)
		}, "operand types differ"},
		{"comparison result not i1", func(k *Kernel) {
			lt := first(k, OpLt)
			lt.Type = lt.Type.WithDType(I32)
		}, "result type"},
		{"op not defined on dtype", func(k *Kernel) {
			exp := first(k, OpExp)
			exp.Op = OpAnd // and on f32 with one operand: arity first
			exp.Args = append(exp.Args, exp.Args[0])
		}, "is not defined on"},
		{"math on ints", func(k *Kernel) {
			exp := first(k, OpExp)
			add := first(k, OpAdd)
			exp.Args[0] = add
			exp.Type = add.Type
		}, "exp is not defined on"},
		{"unary attribute", func(k *Kernel) {
			first(k, OpExp).Aux = 1 // Exp2Flush's is exp2's alone
		}, "exp with attribute 1"},
		{"exp2 attribute", func(k *Kernel) {
			e := first(k, OpExp)
			e.Op, e.Aux = OpExp2, 2
		}, "exp2 with attribute 2"},
		{"load mask shape", func(k *Kernel) {
			ld := first(k, OpLoad)
			ld.Args[1] = prepend(k, OpConst, ScalarOf(I1))
		}, "mask i1 does not match pointer tensor<16x16x!tt.ptr<f32>>"},
		{"load mask not i1", func(k *Kernel) {
			ld := first(k, OpLoad)
			ld.Args[1] = first(k, OpAdd)
		}, "mask tensor<16x16xi32> does not match pointer"},
		{"load other type", func(k *Kernel) {
			ld := first(k, OpLoad)
			ld.Args[2] = first(k, OpAdd)
		}, "other tensor<16x16xi32> must be tensor<16x16xf32>"},
		{"load arity", func(k *Kernel) {
			ld := first(k, OpLoad)
			ld.Args = append(ld.Args, ld.Args[2])
		}, "takes 1 to 3 operands"},
		{"store value does not match pointer", func(k *Kernel) {
			st := first(k, OpStore)
			st.Args[1] = first(k, OpAdd)
		}, "must be tensor<16x16xf32> to match pointer"},
		{"store to a non-pointer", func(k *Kernel) {
			st := first(k, OpStore)
			st.Args[0] = first(k, OpAdd)
		}, "not a pointer"},
		{"addptr base not a pointer", func(k *Kernel) {
			ap := first(k, OpAddPtr)
			ap.Args[0] = ap.Args[1]
		}, "is not a pointer"},
		{"addptr float offset", func(k *Kernel) {
			ap := last(k, OpAddPtr)
			ap.Args[1] = first(k, OpLoad)
		}, "offset tensor<16x16xf32> must be i32 or i64"},
		{"select condition not i1", func(k *Kernel) {
			s := first(k, OpSelect)
			s.Args[0] = s.Args[1]
		}, "condition"},
		{"select on pointers", func(k *Kernel) {
			s := first(k, OpSelect)
			p := first(k, OpAddPtr)
			s.Args[1], s.Args[2], s.Type = p, p, p.Type
		}, "not pointers"},
		{"cast changes shape", func(k *Kernel) {
			b := first(k, OpBroadcast)
			b.Op = OpCast
		}, "cast changes the shape"},
		{"reduce axis out of range", func(k *Kernel) {
			first(k, OpReduceSum).Aux = 2
		}, "axis 2 is outside"},
		{"reduce result shape", func(k *Kernel) {
			first(k, OpReduceSum).Aux2 = 0
		}, "result type"},
		{"dot inner dimensions", func(k *Kernel) {
			d := first(k, OpDot)
			d.Args[0] = block(k, F32, 16, 32)
		}, "inner dimensions 32 and 16 differ"},
		{"dot too small", func(k *Kernel) {
			d := first(k, OpDot)
			small := block(k, F32, 8, 8)
			d.Args, d.Type = []*Value{small, small, small}, small.Type
		}, "M, N and K must be at least 16"},
		{"dot accumulator type", func(k *Kernel) {
			d := first(k, OpDot)
			d.Args[2] = block(k, F64, 16, 16)
		}, "accumulator tensor<16x16xf64> and result tensor<16x16xf32> must be tensor<16x16xf32>"},
		{"dot precision", func(k *Kernel) {
			first(k, OpDot).Prec = 7
		}, "unknown precision"},
		{"for bounds not integers", func(k *Kernel) {
			f := first(k, OpFor)
			f.Args[1] = first(k, OpLoad)
		}, "upper bound must be a scalar i32 or i64"},
		{"yield type differs from carried", func(k *Kernel) {
			y := first(k, OpYield)
			y.Args[0], y.Args[1] = y.Args[1], y.Args[0]
		}, "yield value 0 is"},
		{"yield count", func(k *Kernel) {
			y := first(k, OpYield)
			y.Args = y.Args[:1]
		}, "yield gives 1 values, the loop carries 2"},
		{"loop body without yield", func(k *Kernel) {
			f := first(k, OpFor)
			f.Body.Values = f.Body.Values[:len(f.Body.Values)-1]
		}, "does not end in yield"},
		{"yield outside a loop", func(k *Kernel) {
			y := first(k, OpYield)
			k.Body.Values = append(k.Body.Values, &Value{ID: y.ID + 1000, Op: OpYield})
		}, "yield outside a loop"},
		{"yield pointer into another buffer", func(k *Kernel) {
			y := first(k, OpYield)
			out := k.Param("out")
			y.Args[1] = &Value{ID: k.nextID, Op: OpSplat, Type: y.Args[1].Type, Args: []*Value{out}}
			k.nextID++
			f := first(k, OpFor)
			f.Body.Values = append(f.Body.Values[:len(f.Body.Values)-1], y.Args[1], y)
		}, "points into another buffer"},
		{"for_result number", func(k *Kernel) {
			first(k, OpForResult).Aux = 5
		}, "the loop has no result #5"},
		{"program_id axis", func(k *Kernel) {
			prepend(k, OpProgramID, ScalarOf(I32)).Aux = 3
		}, "axis 3 is outside 0..2"},
		{"make_range size", func(k *Kernel) {
			r := first(k, OpArange)
			r.Aux2 = 12
		}, "range {0, 12} has size 12"},
		{"shape op changes the element type", func(k *Kernel) {
			bc := first(k, OpBroadcast)
			bc.Args[0] = block(k, F32, 16, 1)
		}, "broadcast changes the element type f32 to i32"},
		{"broadcast shape", func(k *Kernel) {
			bc := first(k, OpBroadcast)
			bc.Args[0] = block(k, I32, 16, 2)
		}, "cannot broadcast [16,2] to [16,16]: dimension 1 is 2, not 1"},
		{"splat of a block", func(k *Kernel) {
			s := first(k, OpSplat)
			s.Args[0] = first(k, OpArange)
		}, "splat goes from a scalar to a block"},
		{"trans shape", func(k *Kernel) {
			first(k, OpTrans).Type = BlockOf(F32, 32, 16)
		}, "trans of [16,16]"},
		{"duplicate value ID", func(k *Kernel) {
			vs := k.Body.Values
			vs[1].ID = vs[0].ID
		}, "is used twice"},
		{"pointer to i64", func(k *Kernel) {
			k.Params[0].Type = PtrTo(I64)
		}, "pointers are to f32, f64 or i32"},
		{"repeated parameter name", func(k *Kernel) {
			k.Params[1].Name = "x"
		}, "empty or repeated name"},
		{"block-shaped constant", func(k *Kernel) {
			c := first(k, OpConst)
			c.Type = BlockOf(c.Type.DType, 16)
		}, "a constant is a numeric scalar"},
		{"unknown cache hint", func(k *Kernel) {
			first(k, OpLoad).Aux = 9
		}, "unknown cache hint 9"},
		{"keep hint on a store", func(k *Kernel) {
			first(k, OpStore).Aux = int64(CacheKeep)
		}, "the keep cache hint is for loads"},
		{"nil operand", func(k *Kernel) {
			first(k, OpAdd).Args[0] = nil
		}, "operand 0 is nil"},
		{"invalid op", func(k *Kernel) {
			first(k, OpAdd).Op = OpInvalid
		}, "invalid op"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := sample(t)
			c.break_(k)
			err := k.Verify()
			if err == nil {
				t.Fatalf("Verify accepted the broken kernel:\n%v", k)
			}
			if _, ok := err.(*VerifyError); !ok {
				t.Fatalf("error %T, want *VerifyError: %v", err, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
			if !strings.HasPrefix(err.Error(), "tile: verify @sample: ") {
				t.Fatalf("error %q does not name the kernel", err)
			}
		})
	}
}
