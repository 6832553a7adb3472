package tile

import (
	"fmt"
)

// FlattenGrid returns a copy of k that runs over the one-axis grid of g's
// programs, {g.X·g.Y·g.Z}, where k runs over g: each program computes the
// coordinates it had, x = p mod X, y = (p div X) mod Y, z = p div (X·Y),
// from its program id p along axis 0 (the order in which a GPU starts
// them: x fastest, as before), and a grid size is g's. A GPU bounds the
// second and third axes of a launch to 65535 programs (CUDA's gridDim.y
// and z) and the first to 2³¹ − 1; a kernel whose programs walk a batch
// or rows of more along those axes (attention over batch × heads past
// 65535) launches flattened. k itself is not changed; the copy's values
// keep their IDs, the new ones are numbered after them. It returns an
// error where X·Y·Z passes 2³¹ − 1.
func (k *Kernel) FlattenGrid(g Grid) (*Kernel, Grid, error) {
	g, err := g.Norm()
	if err != nil {
		return nil, g, err
	}
	total := int64(g[0]) * int64(g[1]) * int64(g[2])
	if total > maxGridDim {
		return nil, g, fmt.Errorf("tile: @%s: grid %v is %d programs, more than one axis holds (%d)", k.Name, g, total, maxGridDim)
	}
	c, m := copyKernel(k)
	// the coordinates, first in the body: p along axis 0, then x, y, z
	var pro []*Value
	add := func(op Op, t Type, args ...*Value) *Value {
		v := &Value{ID: c.nextID, Op: op, Type: t, Args: args, kernel: c}
		c.nextID++
		pro = append(pro, v)
		return v
	}
	i32 := ScalarOf(I32)
	konst := func(n int) *Value {
		v := add(OpConst, i32)
		v.Aux = int64(n)
		return v
	}
	p := add(OpProgramID, i32) // axis 0
	x, y, z := p, konst(0), konst(0)
	if g[1] > 1 || g[2] > 1 {
		x = add(OpRem, i32, p, konst(g[0]))
		y = add(OpRem, i32, add(OpDiv, i32, p, konst(g[0])), konst(g[1]))
		z = add(OpDiv, i32, p, konst(g[0]*g[1]))
	}
	coord := [3]*Value{x, y, z}
	size := [3]*Value{}
	body := copyBlock(k.Body, k, c, m, func(v *Value) *Value {
		switch v.Op {
		case OpProgramID:
			return coord[v.Aux]
		case OpNumPrograms:
			if size[v.Aux] == nil {
				size[v.Aux] = konst(g[v.Aux])
			}
			return size[v.Aux]
		}
		return nil
	})
	c.Body = &Block{Values: append(pro, body.Values...)}
	if err := c.Verify(); err != nil {
		return nil, g, fmt.Errorf("tile: @%s: flattening grid %v: %w", k.Name, g, err)
	}
	return c, Grid{int(total), 1, 1}, nil
}
