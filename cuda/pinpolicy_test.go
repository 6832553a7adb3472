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
			p.pages = newLockedPages(4096) // the test's own, not the process's
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

// TestPinPolicySharedPages: policies that share the process's locked pages
// (two machines' stagers) do not ask the driver to lock a range with a
// page another range holds (it would refuse: "part or all of the requested
// memory range is already mapped"), whether the other policy locked the
// same range or a neighbouring one, and do not remember such ranges as
// refused; pages freed by an unlock (eviction, drop, the driver's refusal)
// can be locked again; the driver's refusals are remembered, boundedly.
func TestPinPolicySharedPages(t *testing.T) {
	const K = 1 << 10
	pages := newLockedPages(4096)
	policy := func() *pinPolicy {
		p := newPinPolicy(256*K, 4<<20)
		p.pages = pages
		return p
	}
	twice := func(p *pinPolicy, addr uintptr, n int64) pinAction {
		t.Helper()
		if got, _ := p.upload(addr, n); got != stageIt {
			t.Fatalf("first upload from %#x: %v, want stageIt", addr, got)
		}
		got, _ := p.upload(addr, n)
		return got
	}
	a, b, c := policy(), policy(), policy()
	if got := twice(a, 0x100000, 300*K); got != lockIt {
		t.Fatalf("a: %v, want lockIt", got)
	}
	a.took(0x100000, 300*K, nil, true)
	cases := []struct {
		name string
		p    *pinPolicy
		addr uintptr
		n    int64
		want pinAction
	}{
		{"b, the range a locked", b, 0x100000, 300 * K, stageIt},
		{"b, a range in a's last page", b, 0x100000 + 300*K - 100, 256 * K, stageIt},
		{"b, a range ending in a's first page", b, 0x100000 - 256*K + 8, 256 * K, stageIt},
		{"b, the next page on", b, 0x100000 + 300*K, 256 * K, lockIt},
		{"c, the page before a's", c, 0x100000 - 256*K, 256 * K, lockIt},
	}
	for _, cs := range cases {
		if got := twice(cs.p, cs.addr, cs.n); got != cs.want {
			t.Fatalf("%s: %v, want %v", cs.name, got, cs.want)
		}
		if cs.want == lockIt {
			cs.p.took(cs.addr, cs.n, nil, true)
		}
	}
	// once a unlocks its range, b may lock it (on its next two uploads)
	a.drop()
	if got := twice(b, 0x100000, 300*K); got != lockIt {
		t.Fatalf("b after a's drop: %v, want lockIt", got)
	}
	b.took(0x100000, 300*K, nil, true)
	b.drop()
	// a new policy may lock a's pages; a refusal by the driver frees them
	d := policy()
	if got := twice(d, 0x100000, 300*K); got != lockIt {
		t.Fatalf("d after a's drop: %v, want lockIt", got)
	}
	d.took(0x100000, 300*K, nil, false)
	e := policy()
	if got := twice(e, 0x100000, 300*K); got != lockIt {
		t.Fatalf("e after d's refusal: %v, want lockIt", got)
	}
	e.took(0x100000, 300*K, nil, true)
	b.drop()
	c.drop()
	e.drop()
	if len(pages.spans) != 0 {
		t.Errorf("%d spans left after every drop", len(pages.spans))
	}
	// ranges overlapping a locked one are not remembered as refused; the
	// driver's refusals are, up to refusedMax
	f, g := policy(), policy()
	if got := twice(f, 0x10000000, 4<<20); got != lockIt {
		t.Fatalf("f: %v, want lockIt", got)
	}
	f.took(0x10000000, 4<<20, nil, true)
	for i := range 100 {
		addr := uintptr(0x10000000 + 4096*i)
		if got := twice(g, addr, 256*K); got != stageIt {
			t.Fatalf("g at %#x inside f's range: %v, want stageIt", addr, got)
		}
	}
	if len(g.refused) != 0 {
		t.Errorf("%d ranges overlapping a locked one remembered as refused", len(g.refused))
	}
	f.drop()
	for i := range refusedMax + 10 {
		addr := uintptr(0x20000000 + (256*K+4096)*i)
		if got := twice(g, addr, 256*K); got != lockIt {
			t.Fatalf("g at %#x: %v, want lockIt", addr, got)
		}
		g.took(addr, 256*K, nil, false)
	}
	if len(g.refused) > refusedMax || len(pages.spans) != 0 {
		t.Errorf("%d refused ranges kept (bound %d), %d spans held", len(g.refused), refusedMax, len(pages.spans))
	}
}
