package tile

import (
	"fmt"
	"maps"
	"math"
	"slices"
)

// Specialize returns a copy of k in which each integer parameter i of
// vals reads as the constant vals[i]: Triton's specialization of integer
// arguments, done on request. A code generator that took a stride passed
// as a parameter to be 1 (the common case, checked at each launch)
// compiles such a copy for a launch that passes another value, where the
// stride is then a constant it can address by. The copy keeps k's
// parameters in their order (a launch passes the same arguments; a
// specialized one is read by no value), k's value IDs, and its name; the
// constants are numbered after k's values and stand first in the body.
// k itself is not changed. It returns an error for a parameter that is
// not a scalar integer, or a value its type does not hold.
func (k *Kernel) Specialize(vals map[int]int64) (*Kernel, error) {
	for _, i := range slices.Sorted(maps.Keys(vals)) {
		if i < 0 || i >= len(k.Params) {
			return nil, fmt.Errorf("tile: @%s: specializing parameter %d of %d", k.Name, i, len(k.Params))
		}
		p := k.Params[i]
		if p.Type.Ptr || !p.Type.Shape.IsScalar() || !p.Type.DType.IsInt() {
			return nil, fmt.Errorf("tile: @%s: specializing parameter %d (%s %s): not a scalar integer", k.Name, i, p.Name, p.Type)
		}
		if v := vals[i]; p.Type.DType == I32 && (v < math.MinInt32 || v > math.MaxInt32) {
			return nil, fmt.Errorf("tile: @%s: specializing parameter %d (%s %s) as %d: out of its range", k.Name, i, p.Name, p.Type, v)
		}
	}
	c, m := copyKernel(k)
	var pro []*Value
	for i, p := range k.Params {
		if v, ok := vals[i]; ok {
			cv := &Value{ID: c.nextID, Op: OpConst, Type: p.Type, Aux: v, kernel: c}
			c.nextID++
			pro = append(pro, cv)
			m[p] = cv
		}
	}
	body := copyBlock(k.Body, k, c, m, nil)
	c.Body = &Block{Args: body.Args, Values: append(pro, body.Values...)}
	if err := c.Verify(); err != nil {
		return nil, fmt.Errorf("tile: @%s: specializing %v: %w", k.Name, vals, err)
	}
	return c, nil
}
