package codegen

import (
	"fmt"
	"strings"
)

// Blocked is a distributed layout of a block of shape Shape over the threads
// of one CTA, Triton's BlockedEncoding: along each dimension d, each thread
// holds SPT[d] consecutive elements, TPW[d] threads of a warp and WPC[d]
// warps tile the dimension, and the tile repeats Reps[d] times to cover it.
// Where a tile is larger than its dimension, coordinates wrap (threads hold
// copies). Lanes and warps are numbered with the last dimension fastest.
type Blocked struct {
	Shape []int
	SPT   []int
	TPW   []int
	WPC   []int
}

func (b *Blocked) rank() int { return len(b.Shape) }

func (b *Blocked) tile(d int) int { return b.SPT[d] * b.TPW[d] * b.WPC[d] }

// reps is how many times the CTA tile repeats along d.
func (b *Blocked) reps(d int) int { return max(1, b.Shape[d]/b.tile(d)) }

// wraps reports whether the CTA tile is larger than dimension d.
func (b *Blocked) wraps(d int) bool { return b.tile(d) > b.Shape[d] }

// key identifies a layout for memoisation and printing.
func (b *Blocked) key() string {
	return fmt.Sprintf("blocked<shape=%v spt=%v tpw=%v wpc=%v>", b.Shape, b.SPT, b.TPW, b.WPC)
}

// slot is one element position a thread holds: per dimension, a repetition
// and an index within its SPT run. Its coordinate along d is
// (base_d + Off[d]) mod Shape[d], base_d depending on the thread.
type slot struct {
	Off []int // rep*tile + s, per dimension
	Rep []int
	S   []int
}

// slots lists the positions each thread holds, in row-major order of
// (rep, s) with s innermost per dimension, so that an SPT run along the last
// dimension is a run of consecutive slots.
func (b *Blocked) slots() []slot {
	r := b.rank()
	n := 1
	for d := 0; d < r; d++ {
		n *= b.reps(d) * b.SPT[d]
	}
	out := make([]slot, 0, n)
	idx := make([]int, 2*r) // rep_0, s_0, rep_1, s_1, ...
	lim := make([]int, 2*r)
	for d := 0; d < r; d++ {
		lim[2*d], lim[2*d+1] = b.reps(d), b.SPT[d]
	}
	for {
		s := slot{Off: make([]int, r), Rep: make([]int, r), S: make([]int, r)}
		for d := 0; d < r; d++ {
			s.Rep[d], s.S[d] = idx[2*d], idx[2*d+1]
			s.Off[d] = s.Rep[d]*b.tile(d) + s.S[d]
		}
		out = append(out, s)
		i := 2*r - 1
		for ; i >= 0; i-- {
			idx[i]++
			if idx[i] < lim[i] {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return out
		}
	}
}

// laneBits and warpBits give, per dimension, the position of its lowest bit
// in the lane id and the warp id (the last dimension is fastest).
func (b *Blocked) laneShift(d int) int {
	s := 0
	for e := b.rank() - 1; e > d; e-- {
		s += log2(b.TPW[e])
	}
	return s
}

func (b *Blocked) warpShift(d int) int {
	s := 0
	for e := b.rank() - 1; e > d; e-- {
		s += log2(b.WPC[e])
	}
	return s
}

// distinct is how many of the SPT, TPW and WPC positions along d hold
// different coordinates (the rest wrap onto copies).
func (b *Blocked) distinct(d int) (spt, tpw, wpc int) {
	n := b.Shape[d]
	spt = min(b.SPT[d], n)
	tpw = min(b.TPW[d], max(1, n/b.SPT[d]))
	wpc = min(b.WPC[d], max(1, n/(b.SPT[d]*b.TPW[d])))
	return
}

func log2(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}

// newBlocked chooses the layout of a block of shape s for numWarps warps,
// with up to vec consecutive elements per thread along the last dimension
// (16-byte accesses): lanes fill the last dimension first, warps the first.
func newBlocked(s []int, numWarps, vec int) *Blocked {
	r := len(s)
	b := &Blocked{Shape: append([]int(nil), s...), SPT: ones(r), TPW: ones(r), WPC: ones(r)}
	if r == 0 {
		return b
	}
	last := r - 1
	b.SPT[last] = max(1, min(vec, s[last]))
	lanes := 32
	for d := last; d >= 0 && lanes > 1; d-- {
		room := max(1, s[d]/b.SPT[d])
		t := min(lanes, room)
		b.TPW[d] = t
		lanes /= t
	}
	b.TPW[last] *= lanes // leftover lanes hold copies
	warps := numWarps
	for d := 0; d < r && warps > 1; d++ {
		room := max(1, s[d]/(b.SPT[d]*b.TPW[d]))
		w := min(warps, room)
		b.WPC[d] = w
		warps /= w
	}
	b.WPC[0] *= warps // leftover warps hold copies
	return b
}

func ones(n int) []int {
	o := make([]int, n)
	for i := range o {
		o[i] = 1
	}
	return o
}

// Layout says which thread holds which element of a value: the value's
// dimension i is dimension Src[i] of the blocked layout B's shape, or a
// dimension of size 1 when Src[i] is -1. A value whose layout leaves out a
// dimension of B (a reduction's result, a broadcast's operand) is held
// identically by all threads that differ only along it. Scalars have no
// layout: every thread holds them.
type Layout struct {
	B   *Blocked
	Src []int
}

func (l Layout) String() string {
	parts := make([]string, len(l.Src))
	for i, s := range l.Src {
		parts[i] = fmt.Sprint(s)
	}
	return l.B.key() + "[" + strings.Join(parts, ",") + "]"
}

// plain is the layout of a value with B's own shape.
func plain(b *Blocked) Layout {
	src := make([]int, b.rank())
	for i := range src {
		src[i] = i
	}
	return Layout{B: b, Src: src}
}

// classKey says which slots of a layout hold the same element of the value
// for every thread: those that agree on (rep, s) along the dimensions the
// value uses.
func (l Layout) classKey(s slot) string {
	var sb strings.Builder
	for _, d := range l.Src {
		if d >= 0 {
			fmt.Fprintf(&sb, "%d.%d,", s.Rep[d], s.S[d])
		} else {
			sb.WriteString("_,")
		}
	}
	return sb.String()
}

func (l Layout) uses(d int) bool {
	for _, s := range l.Src {
		if s == d {
			return true
		}
	}
	return false
}
