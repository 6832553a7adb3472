package cuda

import "testing"

// TestPinPolicy replays uploads through the rule UploadKept follows and
// checks each action: lock on the second upload from a range, straight
// from it after that, small and one-off ranges staged, the least recently
// used range unlocked when the bound needs room, nothing new locked after
// maxEvictions, a refused range never tried again.
func TestPinPolicy(t *testing.T) {
	type up struct {
		addr  uintptr
		n     int64
		want  pinAction
		evict []uintptr // unlocked first, oldest first
		ok    bool      // for lockIt: the driver locks it
	}
	const K = 1 << 10
	cases := []struct {
		name     string
		min, max int64
		evictMax int
		ups      []up
		held     int // ranges locked at the end
	}{
		{"second upload locks", 256 * K, 1 << 20, 16, []up{
			{addr: 0x10000, n: 300 * K, want: stageIt},
			{addr: 0x10000, n: 300 * K, want: lockIt, ok: true},
			{addr: 0x10000, n: 300 * K, want: directly},
			{addr: 0x10000, n: 100 * K, want: directly}, // a shorter upload from the same memory
		}, 1},
		{"small ranges staged", 256 * K, 1 << 20, 16, []up{
			{addr: 0x10000, n: 255 * K, want: stageIt},
			{addr: 0x10000, n: 255 * K, want: stageIt},
			{addr: 0x10000, n: 255 * K, want: stageIt},
		}, 0},
		{"another length is another range", 256 * K, 1 << 20, 16, []up{
			{addr: 0x10000, n: 300 * K, want: stageIt},
			{addr: 0x10000, n: 400 * K, want: stageIt},
			{addr: 0x10000, n: 400 * K, want: lockIt, ok: true},
			{addr: 0x10000, n: 500 * K, want: stageIt}, // grew past what is locked
		}, 1},
		{"turns of four batches", 256 * K, 1 << 30, 16, []up{
			{addr: 0x1000000, n: 1 << 20, want: stageIt},
			{addr: 0x2000000, n: 1 << 20, want: stageIt},
			{addr: 0x3000000, n: 1 << 20, want: stageIt},
			{addr: 0x4000000, n: 1 << 20, want: stageIt},
			{addr: 0x1000000, n: 1 << 20, want: lockIt, ok: true},
			{addr: 0x2000000, n: 1 << 20, want: lockIt, ok: true},
			{addr: 0x3000000, n: 1 << 20, want: lockIt, ok: true},
			{addr: 0x4000000, n: 1 << 20, want: lockIt, ok: true},
			{addr: 0x1000000, n: 1 << 20, want: directly},
			{addr: 0x4000000, n: 1 << 20, want: directly},
		}, 4},
		{"bound unlocks the least recent", 256 * K, 2 << 20, 16, []up{
			{addr: 0x1000000, n: 1 << 20, want: stageIt},
			{addr: 0x1000000, n: 1 << 20, want: lockIt, ok: true},
			{addr: 0x2000000, n: 1 << 20, want: stageIt},
			{addr: 0x2000000, n: 1 << 20, want: lockIt, ok: true},
			{addr: 0x1000000, n: 1 << 20, want: directly}, // 0x2000000 now the least recent
			{addr: 0x3000000, n: 1 << 20, want: stageIt},
			{addr: 0x3000000, n: 1 << 20, want: lockIt, evict: []uintptr{0x2000000}, ok: true},
			{addr: 0x2000000, n: 1 << 20, want: stageIt}, // unlocked: seen anew
			{addr: 0x1000000, n: 1 << 20, want: directly},
		}, 2},
		{"larger than the bound staged", 256 * K, 1 << 20, 16, []up{
			{addr: 0x1000000, n: 2 << 20, want: stageIt},
			{addr: 0x1000000, n: 2 << 20, want: stageIt},
		}, 0},
		{"no new locks after maxEvictions", 256 * K, 1 << 20, 1, []up{
			{addr: 0x1000000, n: 1 << 20, want: stageIt},
			{addr: 0x1000000, n: 1 << 20, want: lockIt, ok: true},
			{addr: 0x2000000, n: 1 << 20, want: stageIt},
			{addr: 0x2000000, n: 1 << 20, want: lockIt, evict: []uintptr{0x1000000}, ok: true},
			{addr: 0x3000000, n: 1 << 20, want: stageIt},
			{addr: 0x3000000, n: 1 << 20, want: stageIt},
			{addr: 0x2000000, n: 1 << 20, want: directly}, // what is locked stays so
		}, 1},
		{"refused never tried again", 256 * K, 1 << 20, 16, []up{
			{addr: 0x1000000, n: 300 * K, want: stageIt},
			{addr: 0x1000000, n: 300 * K, want: lockIt, ok: false},
			{addr: 0x1000000, n: 300 * K, want: stageIt},
			{addr: 0x1000000, n: 300 * K, want: stageIt},
		}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPinPolicy(c.min, c.max)
			p.maxEvictions = c.evictMax
			for i, u := range c.ups {
				got, evict := p.upload(u.addr, u.n)
				var ev []uintptr
				for _, e := range evict {
					ev = append(ev, e.addr)
				}
				if got != u.want || len(ev) != len(u.evict) {
					t.Fatalf("upload %d (%#x, %d bytes): %v evicting %#x, want %v evicting %#x", i, u.addr, u.n, got, ev, u.want, u.evict)
				}
				for j := range ev {
					if ev[j] != u.evict[j] {
						t.Fatalf("upload %d: evicts %#x, want %#x", i, ev, u.evict)
					}
				}
				if got == lockIt {
					p.took(u.addr, u.n, nil, u.ok)
				}
				if p.bytes > c.max {
					t.Fatalf("upload %d: %d bytes locked, bound %d", i, p.bytes, c.max)
				}
			}
			if got := len(p.drop()); got != c.held {
				t.Errorf("%d ranges locked at the end, want %d", got, c.held)
			}
			if p.bytes != 0 || len(p.locked) != 0 {
				t.Errorf("drop left %d bytes, %d ranges", p.bytes, len(p.locked))
			}
		})
	}
}
