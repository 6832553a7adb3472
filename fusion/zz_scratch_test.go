package fusion_test

import (
	"runtime"
	"testing"
	"time"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/fusion"
)

func TestScratchWarm(t *testing.T) {
	w, _ := bench.Lookup("softmax")
	s, _ := w.Build("small")
	for n, v := range s.Inputs {
		G.Let(n, v)
	}
	vm := fusion.NewTapeMachine(s.Graph)
	defer vm.Close()
	var ds []time.Duration
	var total time.Duration
	for i := 0; i < 3000; i++ {
		runtime.GC()
		vm.RunAll()
		t0 := time.Now()
		vm.RunAll()
		d := time.Since(t0)
		ds = append(ds, d)
		total += d
	}
	t.Logf("mean %v", total/time.Duration(len(ds)))
}
