package tile

import (
	"maps"
	"math"
	"strconv"
	"strings"
)

// CSE returns a copy of k in which each pure value that repeats a value
// before it, visible where it stands (in its block or a block around it),
// is that value: the same op, type, attributes and operands. Pure: sources
// but parameters, shape ops, addptr, elementwise ops, select, cast and
// reductions; never a load (a store may lie between two), a store, an
// atomic, a dot or a loop's values. The copy's values keep their IDs (a
// removed one's ID is not reused), its parameters are copies in their
// order, k itself is not changed. removed is how many values it left out.
//
// Generated kernels repeat their index arithmetic: a convolution's col2im
// computes each of a window's nine taps' border masks from the same
// coordinates, three distinct along each axis; a code generator that
// emits every value computes each repetition again for every vector.
func (k *Kernel) CSE() (c *Kernel, removed int) {
	c, m := copyKernel(k)
	ids := map[*Value]int{} // operands by identity, numbered as first seen
	id := func(v *Value) int {
		n, ok := ids[v]
		if !ok {
			n = len(ids)
			ids[v] = n
		}
		return n
	}
	var scopes []map[string]*Value
	var block func(b *Block) *Block
	block = func(b *Block) *Block {
		if b == nil {
			return nil
		}
		scopes = append(scopes, map[string]*Value{})
		defer func() { scopes = scopes[:len(scopes)-1] }()
		nb := copyArgs(b, k, c, m)
		for _, v := range b.Values {
			q := copyValue(v, k, c, m)
			if v.Op == OpFor {
				q.Body = block(v.Body)
			}
			if key, ok := cseKey(q, id); ok {
				if prev := lookup(scopes, key); prev != nil {
					m[v] = prev
					removed++
					continue
				}
				scopes[len(scopes)-1][key] = q
			}
			m[v] = q
			nb.Values = append(nb.Values, q)
		}
		return nb
	}
	c.Body = block(k.Body)
	return c, removed
}

// copyKernel is the start of a copy of k: its name, meta-parameters and
// value numbering, and copies of its parameters in their order, each
// recorded in m; the caller copies the body.
func copyKernel(k *Kernel) (c *Kernel, m map[*Value]*Value) {
	c = &Kernel{Name: k.Name, Meta: maps.Clone(k.Meta), nextID: k.nextID}
	m = make(map[*Value]*Value, k.nextID)
	for _, p := range k.Params {
		q := *p
		q.kernel = owner(p, k, c)
		m[p] = &q
		c.Params = append(c.Params, &q)
	}
	return c, m
}

// owner is the kernel a copy of v belongs to: c where k made v.
// copyArgs is a new block holding copies of b's arguments (a loop's
// induction variable and carried values) for kernel c, copied from k,
// each recorded in m.
func copyArgs(b *Block, k, c *Kernel, m map[*Value]*Value) *Block {
	nb := &Block{}
	for _, a := range b.Args {
		q := copyValue(a, k, c, m)
		m[a] = q
		nb.Args = append(nb.Args, q)
	}
	return nb
}

// emitter appends new values of kernel c to its block nb, numbered after
// c's values (a rewrite's replacements).
func emitter(c *Kernel, nb *Block) func(op Op, t Type, args ...*Value) *Value {
	return func(op Op, t Type, args ...*Value) *Value {
		v := &Value{ID: c.nextID, Op: op, Type: t, Args: args, kernel: c}
		c.nextID++
		nb.Values = append(nb.Values, v)
		return v
	}
}

// copyBlock is a copy of b, the bodies of its loops copied too, for
// kernel c, copied from k, each copy recorded in m; where subst (if not
// nil) gives a value for one of b's values, that value stands for it and
// no copy is made (FlattenGrid's coordinates, Specialize's constants).
func copyBlock(b *Block, k, c *Kernel, m map[*Value]*Value, subst func(*Value) *Value) *Block {
	if b == nil {
		return nil
	}
	nb := copyArgs(b, k, c, m)
	for _, v := range b.Values {
		if subst != nil {
			if r := subst(v); r != nil {
				m[v] = r
				continue
			}
		}
		q := copyValue(v, k, c, m)
		if v.Op == OpFor {
			q.Body = copyBlock(v.Body, k, c, m, subst)
		}
		m[v] = q
		nb.Values = append(nb.Values, q)
	}
	return nb
}

// copyValue is a copy of v for kernel c, copied from k, its operands
// through m (not recorded in m).
func copyValue(v *Value, k, c *Kernel, m map[*Value]*Value) *Value {
	q := *v
	q.kernel = owner(v, k, c)
	q.Args = remap(v.Args, m)
	return &q
}

func owner(v *Value, k, c *Kernel) *Kernel {
	if v.kernel == k {
		return c
	}
	return v.kernel
}

func remap(args []*Value, m map[*Value]*Value) []*Value {
	if args == nil {
		return nil
	}
	out := make([]*Value, len(args))
	for i, a := range args {
		if n, ok := m[a]; ok {
			out[i] = n
		} else {
			out[i] = a // made by hand outside the kernel's values: kept as it is
		}
	}
	return out
}

func lookup(scopes []map[string]*Value, key string) *Value {
	for i := len(scopes) - 1; i >= 0; i-- {
		if v, ok := scopes[i][key]; ok {
			return v
		}
	}
	return nil
}

// cseKey is what makes v the same as another value, and whether v is pure.
func cseKey(v *Value, id func(*Value) int) (string, bool) {
	switch info := v.Op.info(); {
	case v.Op == OpParam || v.Op == OpLoad || v.Op == OpStore || v.Op == OpAtomicAdd || v.Op == OpDot || v.Body != nil:
		return "", false
	case info.class == classSource, info.class == classShape, info.class == classBinary, info.class == classCompare,
		info.class == classUnary, info.class == classReduce, v.Op == OpAddPtr, v.Op == OpSelect, v.Op == OpCast:
	default:
		return "", false
	}
	var b strings.Builder
	b.WriteString(strconv.Itoa(int(v.Op)))
	b.WriteByte('|')
	b.WriteString(v.Type.String())
	b.WriteByte('|')
	b.WriteString(strconv.FormatInt(v.Aux, 10))
	b.WriteByte('|')
	b.WriteString(strconv.FormatInt(v.Aux2, 10))
	b.WriteByte('|')
	b.WriteString(strconv.FormatUint(math.Float64bits(v.AuxF), 16))
	b.WriteByte('|')
	b.WriteString(v.Name)
	b.WriteByte('|')
	b.WriteString(strconv.Itoa(int(v.Prec)))
	for _, a := range v.Args {
		b.WriteByte('|')
		b.WriteString(strconv.Itoa(id(a)))
	}
	return b.String(), true
}
