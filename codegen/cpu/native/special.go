package native

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tilefuse/tilefuse/tile"
)

// maxSpecials bounds how many specialized copies a kernel keeps (one per
// distinct set of stride values a launch passes); past it such a launch
// runs on the executor.
const maxSpecials = 8

// specials are a kernel's copies compiled for strides other than 1
// (Kernel.unit): Triton's specialization of integer arguments, made on
// the first launch that needs one. A kernel whose A is stored transposed
// (sak = M) runs as machine code addressing A's rows by the constant M,
// where the code compiled for sak = 1 would hand the launch to the
// executor.
type specials struct {
	mu sync.Mutex
	m  map[string]*special
	// last is the latest launch's parameters and copy: a loop that
	// launches with the same values again finds it without allocating
	last atomic.Pointer[lastSpecial]
}

// lastSpecial: the (parameter, value) pairs a launch specialized, in
// parameter order (up to 8), and the copy they chose.
type lastSpecial struct {
	pairs [16]int64
	n     int
	nk    *Kernel
}

type special struct {
	nk *Kernel // nil: the copy did not compile (the launch falls back)
}

// specialFor is the copy of nk that launches with args run on: nk itself
// (nil, false) where every parameter nk takes as 1 is 1 and nk has no
// parameter it always specializes (consts), or an argument is not of its
// type (bind reports it; a kernel without code of its own falls back),
// else the specialized copy (nil where it does not compile, where more
// than 8 parameters would be constants, or where the kernel has
// maxSpecials already).
func (nk *Kernel) specialFor(args []any) (*Kernel, bool) {
	if len(args) != len(nk.k.Params) {
		return nil, false // bind reports it
	}
	// the (parameter, value) pairs to make constants, allocating nothing:
	// none in the common case, every such stride 1
	var cur lastSpecial
	for i, p := range nk.k.Params {
		always := slices.Contains(nk.consts, i)
		if !nk.unit[i] && !always {
			continue
		}
		b, ok := scalarBits(args[i], p.Type.DType)
		if !ok {
			return nil, false
		}
		if always || b != 1 {
			if cur.n == len(cur.pairs) {
				return nil, true
			}
			cur.pairs[cur.n], cur.pairs[cur.n+1] = int64(i), int64(b)
			cur.n += 2
		}
	}
	if cur.n == 0 {
		return nil, false
	}
	if l := nk.specials.last.Load(); l != nil && l.n == cur.n && l.pairs == cur.pairs {
		return l.nk, true
	}
	var key strings.Builder
	vals := map[int]int64{}
	for j := 0; j < cur.n; j += 2 {
		vals[int(cur.pairs[j])] = cur.pairs[j+1]
		key.WriteString(strconv.FormatInt(cur.pairs[j], 10) + ":" + strconv.FormatInt(cur.pairs[j+1], 10) + ",")
	}
	nk.specials.mu.Lock()
	defer nk.specials.mu.Unlock()
	if s, ok := nk.specials.m[key.String()]; ok {
		nk.specials.remember(cur, s.nk)
		return s.nk, true
	}
	if len(nk.specials.m) >= maxSpecials {
		return nil, true
	}
	s := &special{}
	if k, err := nk.k.Specialize(vals); err == nil {
		if sk, err := Compile(k); err == nil {
			s.nk = sk
		}
	}
	if nk.specials.m == nil {
		nk.specials.m = map[string]*special{}
	}
	nk.specials.m[key.String()] = s
	nk.specials.remember(cur, s.nk)
	return s.nk, true
}

// remember keeps cur's copy as the latest.
func (s *specials) remember(cur lastSpecial, nk *Kernel) {
	cur.nk = nk
	s.last.Store(&cur)
}

// freeSpecials frees the specialized copies' code.
func (nk *Kernel) freeSpecials() error {
	nk.specials.mu.Lock()
	defer nk.specials.mu.Unlock()
	var first error
	for _, s := range nk.specials.m {
		if s.nk != nil {
			if err := s.nk.Free(); err != nil && first == nil {
				first = err
			}
		}
	}
	nk.specials.m = nil
	nk.specials.last.Store(nil)
	return first
}

// divisorParams are the integer parameters k divides lanes by (Triton's
// offs % M): an integer div or rem whose divisor is a parameter, splat or
// broadcast. The machine code divides lanes by constants only (plan.go:
// affine), so Compile makes a kernel of no code of its own that compiles
// a copy with them as constants for each set of values its launches pass.
func divisorParams(k *tile.Kernel) []int {
	var ps []int
	k.Walk(func(v *tile.Value) {
		if (v.Op != tile.OpDiv && v.Op != tile.OpRem) || !v.Type.DType.IsInt() {
			return
		}
		y := v.Args[1]
		for y.Op == tile.OpSplat || y.Op == tile.OpBroadcast || y.Op == tile.OpExpandDims {
			y = y.Args[0]
		}
		if y.Op == tile.OpParam && !slices.Contains(ps, int(y.Aux)) {
			ps = append(ps, int(y.Aux))
		}
	})
	slices.Sort(ps)
	return ps
}
