package fusion

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestInputVerdicts walks one input through the cases a run must tell
// apart, under both checks: what the device holds, and what the user did
// to the node's value since.
func TestInputVerdicts(t *testing.T) {
	dense := func(n int) *tensor.Dense {
		d := make([]float32, n)
		for i := range d {
			d[i] = float32(i) * 0.25
		}
		return tensor.New(tensor.WithShape(n), tensor.WithBacking(d))
	}
	type step struct {
		do   func(h *held, v G.Value) G.Value // what the user (or the machine) does; returns the node's value
		want map[InputCheck]bool              // uploads under each check
	}
	same := func(h *held, v G.Value) G.Value { return v }
	write := func(i int) func(h *held, v G.Value) G.Value {
		return func(h *held, v G.Value) G.Value {
			d := v.Data().([]float32)
			d[i%len(d)] += 1
			return v
		}
	}
	both := func(up bool) map[InputCheck]bool { return map[InputCheck]bool{CheckContents: up, CheckLet: up} }
	contentsOnly := map[InputCheck]bool{CheckContents: true, CheckLet: false}
	for _, c := range []struct {
		name  string
		value func() G.Value
		steps []step
	}{
		{"a tensor kept and written", func() G.Value { return dense(1000) }, []step{
			{same, both(true)}, // first sight: up, not hashed
			{same, map[InputCheck]bool{CheckContents: true, CheckLet: false}}, // seen again: hashed as it goes up (contents); kept (Let)
			{same, both(false)},        // unchanged
			{write(0), contentsOnly},   // a write into the first element
			{same, both(false)},        // unchanged since that upload
			{write(999), contentsOnly}, // into the last
			{write(500), contentsOnly}, // in the middle
			{func(h *held, v G.Value) G.Value { h.touched = true; return v }, both(true)}, // Machine.Touch
			{same, both(false)},
			{func(h *held, v G.Value) G.Value { return dense(1000) }, both(true)}, // a Let of a new tensor with the same values
		}},
		{"a tensor of more than one hash chunk", func() G.Value { return dense(3*hashChunk/4 + 17) }, []step{
			{same, both(true)}, {same, contentsOnly}, {same, both(false)},
			{write(hashChunk / 4), contentsOnly}, // the second chunk
			{write(3*hashChunk/4 + 16), contentsOnly},
			{same, both(false)},
		}},
		{"a scalar written in place", func() G.Value { v := G.F32(2); return &v }, []step{
			{same, both(true)}, {same, contentsOnly}, {same, both(false)},
			{func(h *held, v G.Value) G.Value { *v.(*G.F32) = 3; return v }, contentsOnly},
			{func(h *held, v G.Value) G.Value { return G.NewF32(3) }, both(true)},
		}},
		{"a view", func() G.Value {
			d := dense(12)
			d.Reshape(3, 4)
			v, err := d.Slice(nil, tensor.S(1, 3))
			if err != nil {
				panic(err)
			}
			return v.(*tensor.Dense)
		}, []step{{same, both(true)}, {same, both(true)}, {same, both(true)}}},
		{"a solver's learnable", func() G.Value { return dense(300) }, []step{
			{func(h *held, v G.Value) G.Value { h.stepped = true; return v }, both(true)}, // hashed at once
			{func(h *held, v G.Value) G.Value { h.dirty = true; return v }, both(false)},  // stepped on the device: kept
			{same, both(false)},
			{write(7), both(false)}, // into the stale host tensor: the device's copy stands
			{func(h *held, v G.Value) G.Value { // Machine.Sync: the host tensor is current
				b, _ := valueBytes(v)
				h.took(v, b, contentHash(b), true)
				return v
			}, both(false)},
			{write(8), contentsOnly}, // a write after Sync is seen
			{func(h *held, v G.Value) G.Value { h.dirty = true; h.touched = true; return v }, both(true)},
			{func(h *held, v G.Value) G.Value { h.dirty = true; return dense(300) }, both(true)}, // a Let wins over the steps
		}},
	} {
		for _, check := range []InputCheck{CheckContents, CheckLet} {
			t.Run(c.name+"/"+check.String(), func(t *testing.T) {
				hs := []held{{}}
				v := c.value()
				for i, s := range c.steps {
					v = s.do(&hs[0], v)
					p := planInputs(hs, []G.Value{v}, check)
					if want := s.want[check]; p.up[0] != want {
						t.Fatalf("step %d: upload %v, want %v (held %+v)", i, p.up[0], want, hs[0])
					}
					if check == CheckLet && p.hashedB != 0 {
						t.Fatalf("step %d: CheckLet hashed %d bytes", i, p.hashedB)
					}
					if p.up[0] {
						if hs[0].stepped && check == CheckContents && !p.hashed[0] {
							t.Fatalf("step %d: a solver's learnable went up unhashed", i)
						}
						hs[0].took(v, p.bytes[0], p.sums[0], p.hashed[0])
					}
				}
			})
		}
	}
}

// TestContentHash: the parallel hash of many buffers is each one's serial
// hash, for sizes around the chunk size; flipping any one bit changes it.
func TestContentHash(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	sizes := []int{0, 1, 7, hashChunk - 1, hashChunk, hashChunk + 1, 3*hashChunk + 5, 1 << 20, 5<<20 + 3}
	var bs [][]byte
	for _, n := range sizes {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		bs = append(bs, b)
	}
	sums := hashAll(bs)
	for i, b := range bs {
		if want := contentHash(b); sums[i] != want {
			t.Errorf("%d bytes: hashAll %x, contentHash %x", len(b), sums[i], want)
		}
		for _, at := range []int{0, len(b) / 2, hashChunk, len(b) - 1} {
			if at < 0 || at >= len(b) {
				continue
			}
			for _, bit := range []byte{1, 0x80} {
				b[at] ^= bit
				if contentHash(b) == sums[i] {
					t.Errorf("%d bytes: flipping bit %#x of byte %d leaves the hash", len(b), bit, at)
				}
				b[at] ^= bit
			}
		}
	}
	if got := hashAll(bs[:1]); got[0] != contentHash(nil) {
		t.Error("the hash of no bytes differs between hashAll and contentHash")
	}
}

// TestMemVersions: a host copy is current until its memory is written;
// views share their operand's memory, and a host op's copy is kept apart
// from the written-back one.
func TestMemVersions(t *testing.T) {
	v := newMemVersions()
	a, view, b := "a", "view of a", "b"
	v.add(a, nil)
	v.add(view, a)
	v.add(b, nil)
	v.add(opKey{}, b)
	if v.current(a) || v.current("unknown") {
		t.Fatal("current before any copy")
	}
	v.copied(a)
	v.copied(view)
	v.copied(b)
	if !v.current(a) || !v.current(view) || !v.current(b) || v.current(opKey{}) {
		t.Fatal("copies not current, or a copy never made current")
	}
	v.wrote(view)
	if v.current(a) || v.current(view) || !v.current(b) {
		t.Fatal("a write through the view: a and the view stale, b current")
	}
	v.copied(opKey{})
	v.wrote(b)
	if v.current(b) || v.current(opKey{}) {
		t.Fatal("b written: both of its copies stale")
	}
	v.copied(b)
	v.forget(b)
	if v.current(b) {
		t.Fatal("forgotten copy current")
	}
}

// TestTouchAndInputCheckErrors: Touch takes the machine's inputs only;
// WithInputCheck takes the two checks only.
func TestTouchAndInputCheckErrors(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("x"))
	y := G.Must(G.Exp(x))
	other := G.NewMatrix(G.NewGraph(), tensor.Float64, G.WithShape(2, 3), G.WithName("other"))
	m := NewTapeMachine(g, WithInputCheck(CheckLet))
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		ns   []*G.Node
		want string
	}{
		{"an input", []*G.Node{x}, ""},
		{"nothing", nil, ""},
		{"a nil node", []*G.Node{x, nil}, "node 2 of 2 is nil"},
		{"not an input", []*G.Node{y}, "is not an input of the machine's graph"},
		{"another graph's", []*G.Node{other}, "other is not an input"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := m.Touch(c.ns...)
			if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Touch: %v, want %q", err, c.want)
			}
		})
	}
	m.Close()
	if err := m.Touch(x); err == nil || !strings.Contains(err.Error(), "after Close") {
		t.Errorf("Touch after Close: %v", err)
	}
	bad := NewTapeMachine(g, WithInputCheck(InputCheck(9)))
	if err := bad.Err(); err == nil || !strings.Contains(err.Error(), "WithInputCheck(InputCheck(9))") {
		t.Errorf("WithInputCheck(9): %v", err)
	}
}

// fakeDevice is a backend whose "device" is host memory apart from the
// user's: each input's device copy is a clone made when residency decides
// to upload it, and the graph runs (on the CPU backend) on those copies. A
// copy skipped wrongly makes the run compute on stale values, so results
// against Gorgonia's machine check the upload decisions.
type fakeDevice struct {
	cpu     *cpuBackend
	c       *Compiled
	check   InputCheck
	hs      []held
	dev     []G.Value
	uploads int
	bytesUp int64
	hashed  int64
	redos   int  // runs computed twice: a kept input changed (run)
	stale   bool // the last run found a kept input changed: hash first
}

func newFakeDevice(t *testing.T, m *Machine) *fakeDevice {
	t.Helper()
	cb, ok := m.be.(*cpuBackend)
	if !ok {
		t.Fatalf("backend %T, want the CPU's", m.be)
	}
	f := &fakeDevice{cpu: cb, c: m.c, check: m.c.cfg.inCheck, hs: make([]held, len(m.c.rw.inputs)), dev: make([]G.Value, len(m.c.rw.inputs))}
	m.be = f
	return f
}

func (f *fakeDevice) run() error {
	ins := f.c.rw.inputs
	vals := make([]G.Value, len(ins))
	for i, in := range ins {
		vals[i] = in.orig.Value()
	}
	// as the GPU's run: the inputs kept on a hash are hashed while the
	// compute runs on the guess that they did not change, then settled; a
	// change uploads them and runs again (f.redos); after a run that found
	// one changed, they are hashed first
	p := planInputsLater(f.hs, vals, f.check)
	settled := f.stale
	if settled {
		f.stale = len(p.settle(f.hs, hashAll(p.laterBytes()))) > 0
	}
	f.uploads, f.bytesUp = 0, 0
	upload := func(i int) {
		switch v := vals[i].(type) {
		case *tensor.Dense:
			f.dev[i] = v.Clone().(*tensor.Dense)
		case *G.F64:
			f.dev[i] = G.NewF64(float64(*v))
		case *G.F32:
			f.dev[i] = G.NewF32(float32(*v))
		}
		f.hs[i].took(vals[i], p.bytes[i], p.sums[i], p.hashed[i])
		f.uploads++
		f.bytesUp += int64(len(p.bytes[i]))
	}
	for i := range ins {
		if p.up[i] {
			upload(i)
		}
	}
	compute := func() error {
		for i, in := range ins { // the run sees the device's copies
			G.UnsafeLet(in.orig, f.dev[i])
		}
		err := f.cpu.run()
		for i, in := range ins {
			G.UnsafeLet(in.orig, vals[i])
		}
		return err
	}
	err := compute()
	if settled {
		f.hashed = p.hashedB
		return err
	}
	changed := p.settle(f.hs, hashAll(p.laterBytes()))
	f.stale = len(changed) > 0
	if len(changed) > 0 && err == nil {
		for _, i := range changed {
			upload(i)
		}
		f.redos++
		err = compute()
	}
	f.hashed = p.hashedB
	return err
}

func (f *fakeDevice) touch(n *G.Node) error {
	for i, in := range f.c.rw.inputs {
		if in.orig == n {
			f.hs[i].touched = true
		}
	}
	return nil
}

func (f *fakeDevice) deviceTime() float64       { return 0 }
func (f *fakeDevice) kernelTimes() []KernelTime { return nil }
func (f *fakeDevice) stats(*Stats)              {}
func (f *fakeDevice) close() error              { return f.cpu.close() }
func (f *fakeDevice) prepare(c *Compiled) error { return nil }
func (f *fakeDevice) String() string            { return "fake device" }
func (f *fakeDevice) valueOf(n *G.Node) G.Value {
	for i, in := range f.c.rw.inputs {
		if in.orig == n {
			return f.dev[i]
		}
	}
	return nil
}

func (f *fakeDevice) inputsBytes(ns ...*G.Node) int64 {
	var b int64
	for _, n := range ns {
		b += int64(n.Shape().TotalSize()) * int64(n.Dtype().Size())
	}
	return b
}

// TestResidencyWithGorgoniaSolver trains a small MLP with Gorgonia's own
// Adam, which steps the parameters in their host memory, through a machine
// whose device holds the inputs (fakeDevice), against Gorgonia's machine:
// under CheckContents the losses agree at every step (float64, 1e-12) and
// every step uploads the batch and the four stepped parameters; under
// CheckLet the device does not see the steps until Touch, so the losses
// part from Gorgonia's and come back after a Touch of the parameters. An
// inference loop over unchanged inputs uploads nothing.
func TestResidencyWithGorgoniaSolver(t *testing.T) {
	type net struct {
		g          *G.ExprGraph
		x, y, loss *G.Node
		learnables G.Nodes
	}
	build := func() net {
		g := G.NewGraph()
		rng := rand.New(rand.NewPCG(9, 9))
		param := func(name string, shape ...int) *G.Node {
			n := 1
			for _, s := range shape {
				n *= s
			}
			d := make([]float64, n)
			for i := range d {
				d[i] = rng.NormFloat64() * 0.3
			}
			return G.NewTensor(g, tensor.Float64, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))))
		}
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(6, 5), G.WithName("x"))
		y := G.NewMatrix(g, tensor.Float64, G.WithShape(6, 2), G.WithName("y"))
		w1, b1, w2 := param("w1", 5, 7), param("b1", 7), param("w2", 7, 2)
		h := G.Must(G.Tanh(G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w1)), b1, nil, []byte{0}))))
		loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(G.Must(G.Mul(h, w2)), y))))))
		ls := G.Nodes{w1, b1, w2}
		if _, err := G.Grad(loss, ls...); err != nil {
			t.Fatal(err)
		}
		return net{g, x, y, loss, ls}
	}
	batch := func(rng *rand.Rand, r, c int) *tensor.Dense {
		d := make([]float64, r*c)
		for i := range d {
			d[i] = rng.NormFloat64()
		}
		return tensor.New(tensor.WithShape(r, c), tensor.WithBacking(d))
	}
	for _, check := range []InputCheck{CheckContents, CheckLet} {
		t.Run(check.String(), func(t *testing.T) {
			ref, fu := build(), build()
			vmRef := G.NewTapeMachine(ref.g)
			defer vmRef.Close()
			m := NewTapeMachine(fu.g, WithInputCheck(check))
			if err := m.Err(); err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			dev := newFakeDevice(t, m)
			solRef, sol := G.NewAdamSolver(G.WithLearnRate(0.05)), G.NewAdamSolver(G.WithLearnRate(0.05))
			rng := rand.New(rand.NewPCG(4, 4))
			paramBytes := dev.inputsBytes(fu.learnables...)
			batchBytes := dev.inputsBytes(fu.x, fu.y)
			apart := false
			for step := range 30 {
				xv, yv := batch(rng, 6, 5), batch(rng, 6, 2)
				G.Let(ref.x, xv)
				G.Let(ref.y, yv)
				G.Let(fu.x, xv.Clone())
				G.Let(fu.y, yv.Clone())
				if check == CheckLet && step == 20 {
					if err := m.Touch(fu.learnables...); err != nil {
						t.Fatal(err)
					}
				}
				if err := vmRef.RunAll(); err != nil {
					t.Fatal(err)
				}
				redos := dev.redos
				if err := m.RunAll(); err != nil {
					t.Fatal(err)
				}
				// Gorgonia's Adam steps the learnables in place: the third
				// run (the second hashed them as they went up) guesses them
				// unchanged (hashed while it computes), finds them written
				// and computes again on the new values; later runs, after
				// one that found a change, hash first and compute once
				if want := map[bool]int{true: 1}[check == CheckContents && step == 2]; dev.redos-redos != want {
					t.Fatalf("step %d: %d runs again, want %d", step, dev.redos-redos, want)
				}
				lr, lf := ref.loss.Value().Data().(float64), fu.loss.Value().Data().(float64)
				same := math.Abs(lr-lf) <= 1e-12*math.Abs(lr)
				switch {
				case check == CheckContents && !same:
					t.Fatalf("step %d: loss %v, Gorgonia %v", step, lf, lr)
				case check == CheckContents && step > 0 && (dev.uploads != 5 || dev.bytesUp != paramBytes+batchBytes):
					t.Fatalf("step %d: %d uploads of %d bytes, want the batch and the stepped parameters (5, %d)", step, dev.uploads, dev.bytesUp, paramBytes+batchBytes)
				case check == CheckLet && step > 0 && step != 20 && (dev.uploads != 2 || dev.hashed != 0):
					t.Fatalf("step %d: %d uploads, %d bytes hashed; want the batch only, no hashing", step, dev.uploads, dev.hashed)
				case check == CheckLet && step == 20:
					if dev.uploads != 5 {
						t.Fatalf("step %d, after Touch: %d uploads, want 5", step, dev.uploads)
					}
					for _, w := range fu.learnables {
						if d, h := dev.valueOf(w).Data().([]float64), w.Value().Data().([]float64); !slices.Equal(d, h) {
							t.Fatalf("step %d, after Touch: the device's %v is not the host's", step, w.Name())
						}
					}
				}
				apart = apart || !same
				if err := solRef.Step(G.NodesToValueGrads(ref.learnables)); err != nil {
					t.Fatal(err)
				}
				if err := sol.Step(G.NodesToValueGrads(fu.learnables)); err != nil {
					t.Fatal(err)
				}
				m.Reset()
				vmRef.Reset()
			}
			if check == CheckLet && !apart {
				t.Error("CheckLet saw the in-place steps without Touch: the test does not test it")
			}
			// inference over the same inputs: under CheckContents the first
			// run uploads the batch (seen once before: hashed now) and the
			// parameters of the last step; then nothing goes up, the
			// unchanged values told apart by their hashes
			for run := range 3 {
				redos := dev.redos
				if err := m.RunAll(); err != nil {
					t.Fatal(err)
				}
				if dev.redos != redos { // the last step found its parameters changed: hashed first
					t.Fatalf("inference run %d: %d runs again, want none (the last step's parameters, written in place, are hashed first)", run, dev.redos-redos)
				}
				want := 0
				if run == 0 {
					want = map[InputCheck]int{CheckContents: 5, CheckLet: 0}[check]
				}
				if dev.uploads != want {
					t.Fatalf("inference run %d: %d uploads, want %d", run, dev.uploads, want)
				}
			}
			if want := map[InputCheck]int64{CheckContents: paramBytes + batchBytes}[check]; dev.hashed != want {
				t.Errorf("hashed %d bytes, want %d", dev.hashed, want)
			}
		})
	}
}
