package native

import (
	"strconv"
	"strings"
	"sync"
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
}

type special struct {
	nk  *Kernel // nil: the copy did not compile (the launch falls back)
	err error
}

// specialFor is the copy of nk that launches with args run on: nk itself
// (nil, false) where every parameter nk takes as 1 is 1 or an argument
// is not of its type (bind reports it), else the specialized copy (nil
// where it does not compile or the kernel has maxSpecials already).
func (nk *Kernel) specialFor(args []any) (*Kernel, bool) {
	if len(args) != len(nk.k.Params) {
		return nil, false // bind reports it
	}
	// the common case first, allocating nothing: every such stride 1
	other := false
	for i, u := range nk.unit {
		if !u {
			continue
		}
		b, ok := scalarBits(args[i], nk.k.Params[i].Type.DType)
		if !ok {
			return nil, false
		}
		other = other || b != 1
	}
	if !other {
		return nil, false
	}
	var key strings.Builder
	vals := map[int]int64{}
	for i, u := range nk.unit {
		if b, _ := scalarBits(args[i], nk.k.Params[i].Type.DType); u && b != 1 {
			vals[i] = int64(b)
			key.WriteString(strconv.Itoa(i) + ":" + strconv.FormatInt(int64(b), 10) + ",")
		}
	}
	nk.specials.mu.Lock()
	defer nk.specials.mu.Unlock()
	if s, ok := nk.specials.m[key.String()]; ok {
		return s.nk, true
	}
	if len(nk.specials.m) >= maxSpecials {
		return nil, true
	}
	s := &special{}
	if k, err := nk.k.Specialize(vals); err != nil {
		s.err = err
	} else if s.nk, s.err = Compile(k); s.err != nil {
		s.nk = nil
	}
	if nk.specials.m == nil {
		nk.specials.m = map[string]*special{}
	}
	nk.specials.m[key.String()] = s
	return s.nk, true
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
	return first
}
