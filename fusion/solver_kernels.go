package fusion

import (
	"fmt"
	"math"
	"strings"

	"github.com/tilefuse/tilefuse/tile"
)

// The fused solver kernels: one tile kernel per solver configuration and
// element type, applying Gorgonia v0.9.18's update rule for its *tensor.Dense
// parameters (solvers.go) to one parameter tensor in one pass: it reads the
// value w, the gradient g and the optimizer state, and writes the new value,
// the new state and a zero gradient (Gorgonia's solvers leave the gradient
// zeroed). Every intermediate of Gorgonia's sequence of tensor operations
// is computed in the same order, in the element type, so that the CPU
// interpreter reproduces Gorgonia's values bit for bit; on the GPU, ptxas may
// contract a multiply and an add into one fused multiply-add (PTX's mul and
// add without a rounding mode), which changes the last bit.
//
// The configuration's switches (L1, L2, batch, clip) shape the kernel; the
// numbers (learn rate, betas, the bias corrections of this step, …) are
// scalar parameters, so one kernel serves every step and every parameter
// tensor of an element type.

// solverKind is which of Gorgonia's solvers a kernel applies.
type solverKind uint8

const (
	solverVanilla solverKind = iota
	solverMomentum
	solverAdam
	solverRMSProp
	solverAdaGrad
)

var solverNames = [...]string{
	solverVanilla:  "vanilla",
	solverMomentum: "momentum",
	solverAdam:     "adam",
	solverRMSProp:  "rmsprop",
	solverAdaGrad:  "adagrad",
}

func (k solverKind) String() string { return solverNames[k] }

// states is the number of state tensors of the solver, each the shape of the
// parameter: Adam's means and variances of the gradients, the momentum's
// velocity, RMSProp's and AdaGrad's running sums of squared gradients.
func (k solverKind) states() int {
	switch k {
	case solverAdam:
		return 2
	case solverVanilla:
		return 0
	}
	return 1
}

// solverConfig is a Gorgonia solver's configuration, as its Step reads it.
type solverConfig struct {
	kind                  solverKind
	eta                   float64 // learn rate
	eps                   float64 // Adam, RMSProp, AdaGrad
	beta1, beta2          float64 // Adam
	decay                 float64 // RMSProp's rho
	momentum              float64 // Momentum
	clip, l1reg, l2reg    float64
	batch                 float64 // Vanilla, Momentum, Adam: the gradient is divided by it when > 1
	useClip, useL1, useL2 bool
}

// clips: Vanilla, Momentum and Adam clip only a positive clip value;
// RMSProp and AdaGrad clip whenever WithClip was given.
func (c solverConfig) clips() bool {
	switch c.kind {
	case solverRMSProp, solverAdaGrad:
		return c.useClip
	}
	return c.useClip && c.clip > 0
}

// divides: the gradient is scaled by 1/batch (Vanilla, Momentum, Adam).
func (c solverConfig) divides() bool {
	switch c.kind {
	case solverVanilla, solverMomentum, solverAdam:
		return c.batch > 1
	}
	return false
}

// l1: Vanilla, Momentum and Adam add l1reg·sign(·) to the gradient.
func (c solverConfig) l1() bool {
	switch c.kind {
	case solverVanilla, solverMomentum, solverAdam:
		return c.useL1
	}
	return false
}

// solverBlock is the number of elements a program of a solver kernel updates.
const solverBlock = 1024

// kernelName names the kernel after the solver and the switches it was
// built with: solver_adam_f32_l2_clip.
func (c solverConfig) kernelName(d tile.DType) string {
	parts := []string{"solver", c.kind.String(), d.String()}
	if c.l1() {
		parts = append(parts, "l1")
	}
	if c.useL2 {
		parts = append(parts, "l2")
	}
	if c.divides() {
		parts = append(parts, "batch")
	}
	if c.clips() {
		parts = append(parts, "clip")
	}
	return strings.Join(parts, "_")
}

// scalarNames are the kernel's scalar parameters after n, in order.
func (c solverConfig) scalarNames() []string {
	var s []string
	if c.l1() {
		s = append(s, "l1reg")
	}
	switch c.kind {
	case solverVanilla, solverMomentum, solverAdam:
		if c.useL2 {
			s = append(s, "l2reg")
		}
		if c.divides() {
			s = append(s, "one_per_batch")
		}
	}
	if c.clips() {
		s = append(s, "neg_clip", "clip")
	}
	switch c.kind {
	case solverVanilla:
		s = append(s, "neg_eta")
	case solverMomentum:
		s = append(s, "neg_eta", "momentum")
	case solverAdam:
		s = append(s, "beta1", "beta2", "one_minus_beta1", "one_minus_beta2", "eps", "neg_eta", "correction1", "correction2")
	case solverRMSProp:
		s = append(s, "decay", "one_minus_decay", "eps", "neg_eta")
	case solverAdaGrad:
		s = append(s, "eps", "neg_eta")
	}
	if c.useL2 && (c.kind == solverRMSProp || c.kind == solverAdaGrad) {
		s = append(s, "l2reg")
	}
	return s
}

// scalars are the values of the scalar parameters for step iter (1 for the
// first; only Adam's bias corrections depend on it), computed as Gorgonia
// computes them for element type d: for float32 most are the float64 setting
// rounded, but Adam's 1-β and 1/correction are computed in float32 from
// rounded operands, and RMSProp's 1-decay in float64 then rounded.
func (c solverConfig) scalars(d tile.DType, iter int) []any {
	f32 := d == tile.F32
	// of: the setting in the element type
	of := func(x float64) any {
		if f32 {
			return float32(x)
		}
		return x
	}
	// oneMinus, inv: 1-x and 1/x computed in the element type
	oneMinus := func(x float64) any {
		if f32 {
			return float32(1) - float32(x)
		}
		return 1 - x
	}
	inv := func(x float64) any {
		if f32 {
			return float32(1) / float32(x)
		}
		return 1 / x
	}
	vals := map[string]any{
		"l1reg":         of(c.l1reg),
		"l2reg":         of(c.l2reg),
		"one_per_batch": inv(c.batch),
		"neg_clip":      of(-c.clip),
		"clip":          of(c.clip),
		"neg_eta":       of(-c.eta),
		"momentum":      of(c.momentum),
		"beta1":         of(c.beta1),
		"beta2":         of(c.beta2),
		"eps":           of(c.eps),
		"decay":         of(c.decay),
	}
	switch c.kind {
	case solverAdam:
		vals["one_minus_beta1"] = oneMinus(c.beta1)
		vals["one_minus_beta2"] = oneMinus(c.beta2)
		vals["correction1"] = inv(1 - math.Pow(c.beta1, float64(iter)))
		vals["correction2"] = inv(1 - math.Pow(c.beta2, float64(iter)))
	case solverRMSProp:
		vals["one_minus_decay"] = of(1 - c.decay)
	}
	names := c.scalarNames()
	out := make([]any, len(names))
	for i, n := range names {
		out[i] = vals[n]
	}
	return out
}

// buildSolverKernel writes the update of configuration c for elements of
// type d (f32 or f64). Its parameters: w, g, the state tensors (Adam: m, v;
// Momentum: velocity; RMSProp, AdaGrad: cache), n (the number of elements),
// then the scalars of c.scalarNames. Launch it over
// tile.Grid{tile.CDiv(n, solverBlock)}.
func buildSolverKernel(c solverConfig, d tile.DType) (*tile.Kernel, error) {
	if d != tile.F32 && d != tile.F64 {
		return nil, fmt.Errorf("fusion: solver kernel for %v elements: want f32 or f64", d)
	}
	b := tile.NewBuilder(c.kernelName(d), tile.Meta{"BLOCK": solverBlock})
	wp, gp := b.Ptr("w", d), b.Ptr("g", d)
	var sp []*tile.Value
	for _, name := range c.stateNames() {
		sp = append(sp, b.Ptr(name, d))
	}
	n := b.Param("n", tile.I32)
	p := map[string]*tile.Value{}
	for _, name := range c.scalarNames() {
		p[name] = b.Param(name, d)
	}
	block := b.BlockSize("BLOCK")
	offs := b.Add(b.Mul(b.ProgramID(0), block), b.Arange(0, block))
	mask := b.Lt(offs, n)
	at := func(ptr *tile.Value) *tile.Value { return b.AddPtr(ptr, offs) }
	solverBody(b, c, d, p, at(wp), at(gp), mapValues(sp, at), mask)
	k, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("fusion: solver kernel: %w", err)
	}
	return k, nil
}

func mapValues(vs []*tile.Value, f func(*tile.Value) *tile.Value) []*tile.Value {
	out := make([]*tile.Value, len(vs))
	for i, v := range vs {
		out[i] = f(v)
	}
	return out
}

// stateNames are the names of the solver's state tensors.
func (c solverConfig) stateNames() []string {
	return map[solverKind][]string{solverAdam: {"m", "v"}, solverMomentum: {"velocity"}, solverRMSProp: {"cache"}, solverAdaGrad: {"cache"}}[c.kind]
}

// multiRow is the number of i32 entries of a multi-tensor kernel's table a
// program reads: per tensor (w, g, the states) its element offset from
// base as two numbers, hi and lo (offset = hi·2³¹ + lo, 0 ≤ lo < 2³¹), then
// the number of elements the program updates (1 to solverBlock).
func (c solverConfig) multiRow() int { return 2*(2+c.kind.states()) + 1 }

// multiTable is the table of a multi-tensor kernel for tensors given by
// their element offsets from base (per learnable: w, g, the states, in the
// kernel's order) and their sizes: one row (multiRow) per program, each
// learnable's programs in turn, solverBlock elements each but the last.
func (c solverConfig) multiTable(offs [][]int64, sizes []int) ([]int32, error) {
	row := c.multiRow()
	var tab []int32
	for i, o := range offs {
		if len(o) != 2+c.kind.states() {
			return nil, fmt.Errorf("fusion: solver table: learnable %d has %d tensors, want %d", i, len(o), 2+c.kind.states())
		}
		for at := 0; at < sizes[i]; at += solverBlock {
			for _, x := range o {
				x += int64(at)
				hi, lo := x>>31, x&(1<<31-1)
				if hi < math.MinInt32 || hi > math.MaxInt32 {
					return nil, fmt.Errorf("fusion: solver table: offset %d out of range", x)
				}
				tab = append(tab, int32(hi), int32(lo))
			}
			tab = append(tab, int32(min(solverBlock, sizes[i]-at)))
		}
	}
	if len(tab)%row != 0 {
		return nil, fmt.Errorf("fusion: solver table: %d entries, not rows of %d", len(tab), row)
	}
	return tab, nil
}

// buildSolverMultiKernel is buildSolverKernel over many tensors in one
// launch (PyTorch's multi_tensor_apply): its parameters are base (a
// pointer every tensor is addressed from), tab (multiTable) and the
// scalars of c.scalarNames; program p updates the elements row p of tab
// names. Launch it over tile.Grid{len(tab) / c.multiRow()}. The update is
// the same expression as buildSolverKernel's, element for element.
func buildSolverMultiKernel(c solverConfig, d tile.DType) (*tile.Kernel, error) {
	if d != tile.F32 && d != tile.F64 {
		return nil, fmt.Errorf("fusion: solver kernel for %v elements: want f32 or f64", d)
	}
	b := tile.NewBuilder(c.kernelName(d)+"_multi", tile.Meta{"BLOCK": solverBlock})
	base, tab := b.Ptr("base", d), b.Ptr("tab", tile.I32)
	p := map[string]*tile.Value{}
	for _, name := range c.scalarNames() {
		p[name] = b.Param(name, d)
	}
	block := b.BlockSize("BLOCK")
	row := b.Mul(b.ProgramID(0), c.multiRow())
	entry := func(k int) *tile.Value { return b.Load(b.AddPtr(tab, b.Add(row, k)), nil, nil) }
	lanes := b.Arange(0, block)
	mask := b.Lt(lanes, entry(c.multiRow()-1))
	var ptrs []*tile.Value
	for t := range 2 + c.kind.states() {
		off := b.Add(b.Mul(b.Cast(entry(2*t), tile.I64), b.I64(1<<31)), b.Cast(entry(2*t+1), tile.I64))
		ptrs = append(ptrs, b.AddPtr(b.AddPtr(base, off), lanes))
	}
	solverBody(b, c, d, p, ptrs[0], ptrs[1], ptrs[2:], mask)
	k, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("fusion: solver kernel: %w", err)
	}
	return k, nil
}

// solverBody loads w, g and the state through the pointer tiles given,
// applies c's update and stores the new value, state and a zero gradient,
// where mask holds.
func solverBody(b *tile.Builder, c solverConfig, d tile.DType, p map[string]*tile.Value, wp, gp *tile.Value, sp []*tile.Value, mask *tile.Value) {
	load := func(ptr *tile.Value) *tile.Value { return b.Load(ptr, mask, nil) }
	store := func(ptr, x *tile.Value) { b.Store(ptr, x, mask) }
	// clamp is tensor.Clamp: below the low bound → low, else above the high → high
	clamp := func(x *tile.Value) *tile.Value {
		lo, hi := p["neg_clip"], p["clip"]
		return b.Where(b.Lt(x, lo), lo, b.Where(b.Gt(x, hi), hi, x))
	}
	w, g := load(wp), load(gp)
	var st []*tile.Value
	for _, s := range sp {
		st = append(st, load(s))
	}
	// prep: the regularisation, batch and clip of the gradient (Vanilla,
	// Momentum and Adam), in Gorgonia's order; Momentum regularises with its
	// velocity, not the weights (as Gorgonia does)
	prep := func(of *tile.Value) *tile.Value {
		if c.l1() {
			g = b.Add(g, b.Mul(p["l1reg"], b.Sign(of)))
		}
		if c.useL2 {
			g = b.Add(g, b.Mul(of, p["l2reg"]))
		}
		if c.divides() {
			g = b.Mul(g, p["one_per_batch"])
		}
		if c.clips() {
			g = clamp(g)
		}
		return g
	}
	switch c.kind {
	case solverVanilla:
		g = prep(w)
		w = b.Add(w, b.Mul(g, p["neg_eta"]))
	case solverMomentum:
		v := st[0]
		g = b.Mul(prep(v), p["neg_eta"])
		v = b.Add(b.Mul(v, p["momentum"]), g)
		w = b.Add(w, v)
		store(sp[0], v)
	case solverAdam:
		g = prep(w)
		t1 := b.Mul(g, p["one_minus_beta1"])
		g2 := b.Mul(b.Mul(g, g), p["one_minus_beta2"])
		m := b.Add(t1, b.Mul(st[0], p["beta1"])) // tensor.Mul(m, β1, WithIncr(t1))
		v := b.Add(g2, b.Mul(st[1], p["beta2"]))
		mHat := b.Mul(m, p["correction1"])
		vHat := b.Add(b.Sqrt(b.Mul(v, p["correction2"])), p["eps"])
		w = b.Add(w, b.Div(b.Mul(mHat, p["neg_eta"]), vHat))
		store(sp[0], m)
		store(sp[1], v)
	case solverRMSProp, solverAdaGrad:
		cache := st[0]
		if c.kind == solverRMSProp {
			cache = b.Add(b.Mul(cache, p["decay"]), b.Mul(b.Mul(g, g), p["one_minus_decay"]))
		} else {
			cache = b.Add(cache, b.Mul(g, g))
		}
		if c.clips() {
			g = clamp(g) // after the cache took the unclipped gradient, as in Gorgonia
		}
		// tensor.InvSqrt is 1/sqrt(x), correctly rounded in each step (not an rsqrt)
		upd := b.Mul(b.Div(b.Const(1, d), b.Sqrt(b.Add(cache, p["eps"]))), b.Mul(g, p["neg_eta"]))
		if c.useL2 {
			upd = b.Sub(upd, b.Mul(w, p["l2reg"]))
		}
		w = b.Add(w, upd)
		store(sp[0], cache)
	}
	store(wp, w)
	b.Store(gp, 0.0, mask)
}
