package codegen

import (
	"fmt"
	"strings"
)

// Blocked is a distributed layout of a block of shape Shape over the threads
// of one CTA, Triton's BlockedEncoding: along each dimension d, each thread
// holds SPT[d] consecutive elements, TPW[d] threads of a warp and WPC[d]
// warps tile the dimension, and the tile repeats reps(d) times to cover it.
// Where a tile is larger than its dimension, coordinates wrap (threads hold
// copies). Lanes and warps are numbered with the last dimension fastest.
//
// WRep (nil: all 1) puts a level of registers between the lanes and the
// warps: the warp's SPT·TPW tile repeats WRep[d] times, each warp owning a
// contiguous warp tile of SPT·TPW·WRep elements along d. That is how the
// tensor cores' fragments are laid out (mmaLayout): the coordinate of
// element (rep, w, s) of a thread with lane index l and warp index u along
// d is rep·tile + u·SPT·TPW·WRep + w·SPT·TPW + l·SPT + s.
type Blocked struct {
	Shape []int
	SPT   []int
	TPW   []int
	WPC   []int
	WRep  []int
}

func (b *Blocked) rank() int { return len(b.Shape) }

// wrep is the register repetition inside a warp's tile along d.
func (b *Blocked) wrep(d int) int {
	if b.WRep == nil {
		return 1
	}
	return b.WRep[d]
}

// warpTile is the extent of one warp's tile along d.
func (b *Blocked) warpTile(d int) int { return b.SPT[d] * b.TPW[d] * b.wrep(d) }

func (b *Blocked) tile(d int) int { return b.warpTile(d) * b.WPC[d] }

// reps is how many times the CTA tile repeats along d.
func (b *Blocked) reps(d int) int { return max(1, b.Shape[d]/b.tile(d)) }

// wraps reports whether the CTA tile is larger than dimension d.
func (b *Blocked) wraps(d int) bool { return b.tile(d) > b.Shape[d] }

// key identifies a layout for memoisation and printing.
func (b *Blocked) key() string {
	if b.WRep != nil {
		return fmt.Sprintf("blocked<shape=%v spt=%v tpw=%v wrep=%v wpc=%v>", b.Shape, b.SPT, b.TPW, b.WRep, b.WPC)
	}
	return fmt.Sprintf("blocked<shape=%v spt=%v tpw=%v wpc=%v>", b.Shape, b.SPT, b.TPW, b.WPC)
}

// slot is one element position a thread holds: per dimension, a repetition
// of the CTA tile, a repetition inside the warp's tile and an index within
// its SPT run. Its coordinate along d is (base_d + Off[d]) mod Shape[d],
// base_d depending on the thread.
type slot struct {
	Off []int // rep*tile + w*SPT*TPW + s, per dimension
	Rep []int
	W   []int
	S   []int
}

// slots lists the positions each thread holds, in row-major order of
// (rep, w, s) with s innermost per dimension, so that an SPT run along the
// last dimension is a run of consecutive slots.
func (b *Blocked) slots() []slot {
	r := b.rank()
	n := 1
	for d := 0; d < r; d++ {
		n *= b.reps(d) * b.wrep(d) * b.SPT[d]
	}
	out := make([]slot, 0, n)
	idx := make([]int, 3*r) // rep_0, w_0, s_0, rep_1, ...
	lim := make([]int, 3*r)
	for d := 0; d < r; d++ {
		lim[3*d], lim[3*d+1], lim[3*d+2] = b.reps(d), b.wrep(d), b.SPT[d]
	}
	for {
		s := slot{Off: make([]int, r), Rep: make([]int, r), W: make([]int, r), S: make([]int, r)}
		for d := 0; d < r; d++ {
			s.Rep[d], s.W[d], s.S[d] = idx[3*d], idx[3*d+1], idx[3*d+2]
			s.Off[d] = s.Rep[d]*b.tile(d) + s.W[d]*b.SPT[d]*b.TPW[d] + s.S[d]
		}
		out = append(out, s)
		i := 3*r - 1
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

// coordOf is the coordinate of slot s held by the thread with lane index
// lane and warp index warp: the meaning of the layout, which the emitted
// code computes with base and coord.
func (b *Blocked) coordOf(lane, warp int, s slot) []int {
	c := make([]int, b.rank())
	for d := range c {
		l := (lane >> b.laneShift(d)) & (b.TPW[d] - 1)
		w := (warp >> b.warpShift(d)) & (b.WPC[d] - 1)
		c[d] = w*b.warpTile(d) + l*b.SPT[d] + s.Off[d]
		if b.wraps(d) {
			c[d] &= b.Shape[d] - 1
		}
	}
	return c
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
	wpc = min(b.WPC[d], max(1, n/b.warpTile(d)))
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
		t := min(lanes, room&-room) // a power of two that divides the dimension's room (192 = 3·64)
		b.TPW[d] = t
		lanes /= t
	}
	// leftover lanes and warps hold copies, along a dimension that is a
	// power of two (its coordinates wrap under a mask) where there is one:
	// a tile wider than a dimension of three times a power of two (96)
	// does not hold it (tilesExactly), so [1, 96] at 4 warps takes its
	// copies along the 1, not the 96 (FuzzFusion, 2026-12-03: the CPU's
	// column tail)
	copies := func(from, step int) int {
		for d := from; d >= 0 && d < r; d += step {
			if s[d] > 0 && s[d]&(s[d]-1) == 0 {
				return d
			}
		}
		return from
	}
	b.TPW[copies(last, -1)] *= lanes
	warps := numWarps
	for d := 0; d < r && warps > 1; d++ {
		room := max(1, s[d]/(b.SPT[d]*b.TPW[d]))
		w := min(warps, room&-room)
		b.WPC[d] = w
		warps /= w
	}
	b.WPC[copies(0, 1)] *= warps
	return b
}

// tilesExactly reports why b cannot hold its shape, or nil: a dimension
// that is not a power of two (three times one: 192) must be a multiple of
// the CTA tile (no wrapping: coordinates wrap with a mask), and the lanes
// and warps along every dimension are powers of two.
func (b *Blocked) tilesExactly() error {
	for d := range b.Shape {
		p2 := func(n int) bool { return n > 0 && n&(n-1) == 0 }
		if !p2(b.SPT[d]) && b.SPT[d]%3 != 0 || !p2(b.TPW[d]) || !p2(b.WPC[d]) {
			return fmt.Errorf("layout %s: lanes or warps along dimension %d are not a power of two", b.key(), d)
		}
		if !p2(b.Shape[d]) && b.Shape[d]%b.tile(d) != 0 {
			return fmt.Errorf("layout %s: dimension %d of %d is no multiple of its tile %d", b.key(), d, b.Shape[d], b.tile(d))
		}
	}
	return nil
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
			fmt.Fprintf(&sb, "%d.%d.%d,", s.Rep[d], s.W[d], s.S[d])
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
