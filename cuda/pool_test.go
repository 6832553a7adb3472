package cuda

import (
	"slices"
	"testing"
)

// TestFreeList: a freed block comes back only for an allocation of its own
// size, last freed first; the list holds no more than its bound (the
// block beyond it is the caller's to free); a block freed twice is an
// error and is held once; drain hands back every block and empties it.
func TestFreeList(t *testing.T) {
	type op struct {
		kind    string // put, take, drain
		n       int64
		p       uintptr
		ok      bool // put: kept; take: found
		err     bool // put: an error
		drained []uintptr
		held    int64 // after the op
	}
	cases := []struct {
		name string
		max  int64
		ops  []op
	}{
		{"same size back, last freed first", 1000, []op{
			{kind: "put", n: 256, p: 0x1000, ok: true, held: 256},
			{kind: "put", n: 256, p: 0x2000, ok: true, held: 512},
			{kind: "take", n: 256, p: 0x2000, ok: true, held: 256},
			{kind: "take", n: 256, p: 0x1000, ok: true, held: 0},
			{kind: "take", n: 256, held: 0},
		}},
		{"no block of another size", 1000, []op{
			{kind: "put", n: 300, p: 0x1000, ok: true, held: 300},
			{kind: "take", n: 299, held: 300},
			{kind: "take", n: 301, held: 300},
			{kind: "take", n: 300, p: 0x1000, ok: true, held: 0},
		}},
		{"the bound: the block beyond it is not kept", 600, []op{
			{kind: "put", n: 400, p: 0x1000, ok: true, held: 400},
			{kind: "put", n: 300, p: 0x2000, held: 400},
			{kind: "put", n: 200, p: 0x3000, ok: true, held: 600},
			{kind: "take", n: 300, held: 600},
		}},
		{"freed twice: an error, held once", 1000, []op{
			{kind: "put", n: 100, p: 0x1000, ok: true, held: 100},
			{kind: "put", n: 100, p: 0x1000, err: true, held: 100},
			{kind: "take", n: 100, p: 0x1000, ok: true, held: 0},
			{kind: "take", n: 100, held: 0},
			{kind: "put", n: 100, p: 0x1000, ok: true, held: 100}, // its own again after a take
		}},
		{"drain", 1000, []op{
			{kind: "put", n: 100, p: 0x1000, ok: true, held: 100},
			{kind: "put", n: 200, p: 0x2000, ok: true, held: 300},
			{kind: "drain", drained: []uintptr{0x1000, 0x2000}, held: 0},
			{kind: "take", n: 100, held: 0},
			{kind: "put", n: 100, p: 0x1000, ok: true, held: 100},
		}},
		{"an empty block is not kept", 1000, []op{
			{kind: "put", n: 0, p: 0x1000, held: 0},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newFreeList[uintptr](c.max)
			for i, o := range c.ops {
				switch o.kind {
				case "put":
					ok, err := l.put(o.n, o.p)
					if ok != o.ok || (err != nil) != o.err {
						t.Fatalf("op %d: put(%d, %#x) = %v, %v; want %v, error %v", i, o.n, o.p, ok, err, o.ok, o.err)
					}
				case "take":
					p, ok := l.take(o.n)
					if ok != o.ok || ok && p != o.p {
						t.Fatalf("op %d: take(%d) = %#x, %v; want %#x, %v", i, o.n, p, ok, o.p, o.ok)
					}
				case "drain":
					got := l.drain()
					slices.Sort(got)
					if !slices.Equal(got, o.drained) {
						t.Fatalf("op %d: drain = %#x, want %#x", i, got, o.drained)
					}
				}
				if h := l.bytes(); h != o.held {
					t.Fatalf("op %d (%s): holds %d bytes, want %d", i, o.kind, h, o.held)
				}
			}
		})
	}
}
