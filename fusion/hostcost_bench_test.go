package fusion_test

import (
	"runtime"
	"testing"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/fusion"
)

// BenchmarkTrainStepHost models, without a GPU, the host work of a fused
// training step on the CUDA backend that is not a driver call, for the
// bench's mlp_train and encoder_train at size large:
//   - handoff: one Device.Do, the hand-over of a function to the device's
//     goroutine locked to its OS thread and back (cuda/device.go's
//     pattern; a step makes two: RunAll's Run and the solver's Step);
//   - stage: the batch's bytes copied into the Stager's page-locked
//     slots (here plain memory, 4 slots of 1 MiB, as for these inputs),
//     before cuMemcpyHtoDAsync takes each slot;
//   - plan: residency's check of the step's inputs (the learnables held
//     by the device, the batch let anew, as the bench rotates 4 batches).
//
// The driver's own costs (cuLaunchKernel ≈ 2–4 µs a kernel, an event
// record, cuEventSynchronize, a pageable cuMemcpyDtoH of the loss ≈
// 10 µs) come on top and are measured only on a GPU.
func BenchmarkTrainStepHost(b *testing.B) {
	b.Run("handoff", func(b *testing.B) {
		work := make(chan func())
		go func() {
			runtime.LockOSThread()
			for f := range work {
				f()
			}
		}()
		defer close(work)
		do := func(f func() error) error {
			var err error
			ch := make(chan struct{})
			work <- func() {
				defer close(ch)
				err = f()
			}
			<-ch
			return err
		}
		for b.Loop() {
			do(func() error { return nil })
		}
	})
	for _, name := range []string{"mlp_train", "encoder_train"} {
		w, _ := bench.Lookup(name)
		s, err := w.Build("large")
		if err != nil {
			b.Fatal(err)
		}
		learnable := map[*G.Node]bool{}
		for _, n := range s.Train.Learnables {
			learnable[n] = true
		}
		var vals []G.Value
		var isL []bool
		var batch [][]float32
		var batchBytes int64
		for n, v := range s.Inputs {
			vals, isL = append(vals, v), append(isL, learnable[n])
			if !learnable[n] {
				batch = append(batch, v.Data().([]float32))
				batchBytes += int64(v.MemSize())
			}
		}
		b.Run("stage/"+name, func(b *testing.B) {
			const slot, slots = 1 << 20, 4
			ring := make([]byte, slot*slots)
			b.SetBytes(batchBytes)
			for b.Loop() {
				cur, off := 0, 0
				for _, x := range batch {
					src := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 4*len(x))
					for len(src) > 0 {
						if off == slot {
							cur, off = (cur+1)%slots, 0
						}
						k := min(len(src), slot-off)
						copy(ring[cur*slot+off:], src[:k])
						off += k
						src = src[k:]
					}
				}
			}
		})
		b.Run("plan/"+name, func(b *testing.B) {
			rot := make([][]G.Value, 4) // the batch in 4 copies, as the bench rotates it
			for r := range rot {
				rot[r] = make([]G.Value, len(vals))
				for i, v := range vals {
					if r > 0 && !isL[i] {
						v = v.(tensor.Tensor).Clone().(tensor.Tensor)
					}
					rot[r][i] = v
				}
			}
			c := fusion.NewStepChecker(vals, isL)
			i := 0
			for b.Loop() {
				i++
				if ups, hashed := c.Check(rot[i%4]); hashed != 0 || ups != len(batch) {
					b.Fatalf("%d uploads, %d bytes hashed: want the batch's %d, none", ups, hashed, len(batch))
				}
			}
		})
	}
}
