//go:build tilefuse_cuda

package fusion_test

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
)

// TestTransfersOnGPU counts the host↔device copies of a training loop on
// the CUDA backend with the fused Adam (Machine.Stats: copies since the
// run began, the solver's step included), on an MLP whose batch (512×1100
// float32, 2.2 MB) is larger than the upload stager's slots:
//   - the first run uploads every input and downloads the readable set,
//     gradients included; the first Step uploads the four learnables;
//   - then, with a new batch let at every step, a step uploads the batch
//     only (2 copies, its bytes) and downloads the readable set less the
//     gradients (the solver reads them on the device): no parameter or
//     gradient crosses;
//   - with the batch kept, a step copies nothing up once the batch has
//     been seen twice (hashed);
//   - Sync downloads the learnables and their gradients once, and a
//     second Sync nothing;
//   - a write into a learnable's host tensor after Sync goes up at the next
//     run under CheckContents (one copy), and the loss is Gorgonia's over
//     the same values; under CheckLet it does not until Touch.
//
// Losses are checked against Gorgonia's machine over the same values at
// the steps that compare (float32, 2e-5 relative).
func TestTransfersOnGPU(t *testing.T) {
	if err := fusion.Available(fusion.CUDA); err != nil {
		t.Fatal(err)
	}
	const batch, in, hidden, out = 512, 1100, 64, 10
	for _, check := range []fusion.InputCheck{fusion.CheckContents, fusion.CheckLet} {
		t.Run(check.String(), func(t *testing.T) {
			dt := tensor.Float32
			m := newMLP(t, dt, batch, in, hidden, out, 11)
			vm := fusion.NewTapeMachine(m.g, fusion.WithBackend(fusion.CUDA), fusion.WithInputCheck(check))
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			defer vm.Close()
			sol, err := fusion.NewSolver(vm, G.NewAdamSolver(G.WithLearnRate(1e-3)))
			if err != nil {
				t.Fatal(err)
			}
			defer sol.Close()
			es := int64(dt.Size())
			batchBytes := es * (batch*in + batch*out)
			var paramBytes int64
			for _, w := range m.learnables {
				paramBytes += es * int64(w.Shape().TotalSize())
			}
			rng := rand.New(rand.NewPCG(2, 9))
			xv, yv := data(dt, rng, batch, in), data(dt, rng, batch, out)
			step := func(newBatch bool) fusion.Stats {
				t.Helper()
				if newBatch {
					xv, yv = data(dt, rng, batch, in), data(dt, rng, batch, out)
				}
				G.Let(m.x, xv)
				G.Let(m.y, yv)
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				if err := sol.Step(G.NodesToValueGrads(m.learnables)); err != nil {
					t.Fatal(err)
				}
				if math.IsNaN(scalar(m.loss.Value())) {
					t.Fatal("loss NaN")
				}
				vm.Reset()
				return vm.Stats()
			}
			// the first step: everything up, the readable set down
			st := step(false)
			if st.Uploads != 6+4 || st.BytesUp != batchBytes+2*paramBytes {
				t.Fatalf("first step: %d uploads of %d bytes, want every input and the solver's learnables (10, %d)", st.Uploads, st.BytesUp, batchBytes+2*paramBytes)
			}
			readable := st.BytesDown // the readable set, gradients included
			if readable < paramBytes {
				t.Fatalf("first step: %d bytes down, less than the gradients' %d", readable, paramBytes)
			}
			for i := 1; i <= 10; i++ {
				st := step(true)
				if st.Uploads != 2 || st.BytesUp != batchBytes || st.Held != 4 {
					t.Fatalf("step %d, new batch: %d uploads of %d bytes, %d inputs held; want the batch only (2, %d bytes), 4 held", i, st.Uploads, st.BytesUp, st.Held, batchBytes)
				}
				if st.BytesDown != readable-paramBytes {
					t.Fatalf("step %d: %d bytes down, want the readable set less the gradients (%d)", i, st.BytesDown, readable-paramBytes)
				}
			}
			for i := 11; i <= 15; i++ {
				st := step(false)
				want := int64(0)
				if i == 11 { // seen once before: up again, hashed now
					want = batchBytes
				}
				if check == fusion.CheckLet {
					want = 0
				}
				if st.BytesUp != want {
					t.Fatalf("step %d, same batch: %d bytes up, want %d", i, st.BytesUp, want)
				}
			}
			if err := vm.Sync(); err != nil {
				t.Fatal(err)
			}
			if st := vm.Stats(); st.BytesDown-(readable-paramBytes) != 2*paramBytes {
				t.Fatalf("Sync: %d bytes down in the step's window, want the step's %d and the learnables' and gradients' %d", st.BytesDown, readable-paramBytes, 2*paramBytes)
			}
			before := vm.Stats().BytesDown
			if err := vm.Sync(); err != nil {
				t.Fatal(err)
			}
			if st := vm.Stats(); st.BytesDown != before {
				t.Fatalf("a second Sync copied %d bytes", st.BytesDown-before)
			}
			// a write into w1's host memory after Sync
			w1 := m.w1.Value().Data().([]float32)
			for i := range w1[:100] {
				w1[i] += 0.25
			}
			lossOf := func() (fused, ref float64) {
				t.Helper()
				r := newMLP(t, dt, batch, in, hidden, out, 11)
				for i, w := range m.learnables {
					G.Let(r.learnables[i], w.Value().(tensor.Tensor).Clone())
				}
				G.Let(r.x, xv)
				G.Let(r.y, yv)
				vmRef := G.NewTapeMachine(r.g)
				defer vmRef.Close()
				if err := vmRef.RunAll(); err != nil {
					t.Fatal(err)
				}
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				vm.Reset()
				return scalar(m.loss.Value()), scalar(r.loss.Value())
			}
			lf, lr := lossOf()
			st = vm.Stats()
			switch check {
			case fusion.CheckContents:
				if st.Uploads != 1 || math.Abs(lf-lr) > 2e-5*math.Abs(lr) {
					t.Fatalf("after a write into w1: %d uploads (want 1), loss %v against Gorgonia's %v", st.Uploads, lf, lr)
				}
			case fusion.CheckLet:
				if st.Uploads != 0 {
					t.Fatalf("after a write into w1 under CheckLet: %d uploads, want 0", st.Uploads)
				}
				if err := vm.Touch(m.w1); err != nil {
					t.Fatal(err)
				}
				lf, lr = lossOf()
				if st := vm.Stats(); st.Uploads != 1 || math.Abs(lf-lr) > 2e-5*math.Abs(lr) {
					t.Fatalf("after Touch: %d uploads (want 1), loss %v against Gorgonia's %v", st.Uploads, lf, lr)
				}
			}
		})
	}
}

// TestBatchInPlaceOnGPU runs an MLP's forward and backward on the CUDA
// backend with its batch refilled in place before every run (the same
// tensors, new contents), the way a loader reuses its buffers, and with two
// batches taken in turn: the 2.2 MB batch input goes up every run, from
// the third run on straight from its own memory, page-locked in place
// (Stats.BytesUpInPlace: the labels, 20 KB, stay staged), and each run's
// loss is Gorgonia's over the same values (float32, 2e-5 relative).
func TestBatchInPlaceOnGPU(t *testing.T) {
	if err := fusion.Available(fusion.CUDA); err != nil {
		t.Fatal(err)
	}
	const batch, in, hidden, out = 512, 1100, 64, 10
	dt := tensor.Float32
	m := newMLP(t, dt, batch, in, hidden, out, 5)
	r := newMLP(t, dt, batch, in, hidden, out, 5)
	vm := fusion.NewTapeMachine(m.g, fusion.WithBackend(fusion.CUDA))
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	defer vm.Close()
	ref := G.NewTapeMachine(r.g)
	defer ref.Close()
	rng := rand.New(rand.NewPCG(8, 3))
	xBytes := int64(4 * batch * in)
	for _, turns := range []int{1, 2} {
		t.Run(map[int]string{1: "one batch refilled", 2: "two batches in turn"}[turns], func(t *testing.T) {
			var xs, ys []tensor.Tensor
			for range turns {
				xs, ys = append(xs, data(dt, rng, batch, in)), append(ys, data(dt, rng, batch, out))
			}
			for step := range 6 {
				x, y := xs[step%turns], ys[step%turns]
				for _, v := range []tensor.Tensor{x, y} { // new contents, same memory
					d := v.Data().([]float32)
					for i := range d {
						d[i] = float32(rng.Float64()*2 - 1)
					}
				}
				G.Let(m.x, x)
				G.Let(m.y, y)
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				st := vm.Stats()
				vm.Reset()
				G.Let(r.x, x.Clone())
				G.Let(r.y, y.Clone())
				if err := ref.RunAll(); err != nil {
					t.Fatal(err)
				}
				got, want := scalar(m.loss.Value()), scalar(r.loss.Value())
				ref.Reset()
				if math.Abs(got-want) > 2e-5*math.Abs(want) {
					t.Fatalf("step %d: loss %v, Gorgonia %v", step, got, want)
				}
				if st.BytesUp < xBytes {
					t.Fatalf("step %d: %d bytes up, the batch's contents changed (%d)", step, st.BytesUp, xBytes)
				}
				if step >= 2*turns && st.BytesUpInPlace != xBytes {
					t.Fatalf("step %d: %d bytes up from locked memory, want the batch's %d", step, st.BytesUpInPlace, xBytes)
				}
			}
		})
	}
}
