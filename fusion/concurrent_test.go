package fusion_test

import (
	"fmt"
	"sync"
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/tilefuse/tilefuse/fusion"
)

// TestOneMachineFromManyGoroutines: RunAll from several goroutines at once
// is serialised (no data race under -race), every run completes, and the
// values are right.
func TestOneMachineFromManyGoroutines(t *testing.T) {
	m, want := lstmCell(t, 3, 5, 7)
	vm := fusion.NewTapeMachine(m.g)
	defer vm.Close()
	for n, v := range m.inputs {
		if err := G.Let(n, v); err != nil {
			t.Fatal(err)
		}
	}
	const goroutines, runs = 4, 5
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*runs)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range runs {
				errs <- vm.RunAll()
				_ = vm.Stats()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if s := vm.Stats(); s.Runs != goroutines*runs {
		t.Fatalf("%d runs counted, want %d", s.Runs, goroutines*runs)
	}
	wants := want()
	for _, name := range []string{"h", "c"} {
		closeTo(t, name, floats(m.read[name].Value()), wants[name], 1e-12)
	}
}

// TestMachinesInParallel: machines over their own graphs run in parallel
// goroutines (no data race under -race) and give the values and gradients
// of a machine run alone.
func TestMachinesInParallel(t *testing.T) { checkMachinesInParallel(t) }

func checkMachinesInParallel(t *testing.T, opts ...fusion.Option) {
	type result struct {
		vals  map[string][]float64
		grads [][]float64
	}
	runModel := func(build func(*testing.T) (*model, func() map[string][]float64)) (result, error) {
		m, _ := build(t)
		vm := fusion.NewTapeMachine(m.g, opts...)
		defer vm.Close()
		for n, v := range m.inputs {
			if err := G.Let(n, v.Clone()); err != nil {
				return result{}, err
			}
		}
		for range 3 {
			if err := vm.RunAll(); err != nil {
				return result{}, err
			}
		}
		r := result{vals: map[string][]float64{}}
		for name, n := range m.read {
			if n.Value() == nil {
				return r, fmt.Errorf("%s has no value", name)
			}
			if n.IsScalar() {
				r.vals[name] = []float64{scalar(n.Value())}
			} else {
				r.vals[name] = append([]float64(nil), floats(n.Value())...)
			}
		}
		for _, p := range m.params {
			gv, err := p.Grad()
			if err != nil {
				return r, err
			}
			r.grads = append(r.grads, append([]float64(nil), floats(gv)...))
		}
		return r, nil
	}
	models := []func(*testing.T) (*model, func() map[string][]float64){
		func(t *testing.T) (*model, func() map[string][]float64) { return lstmCell(t, 3, 5, 7) },
		func(t *testing.T) (*model, func() map[string][]float64) { return normBlock(t, 6, 10) },
	}
	alone := make([]result, len(models))
	for i, build := range models {
		r, err := runModel(build)
		if err != nil {
			t.Fatal(err)
		}
		alone[i] = r
	}
	const copies = 3
	var wg sync.WaitGroup
	got := make([]result, copies*len(models))
	errs := make([]error, len(got))
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = runModel(models[i%len(models)])
		}()
	}
	wg.Wait()
	for i, r := range got {
		if errs[i] != nil {
			t.Fatalf("machine %d: %v", i, errs[i])
		}
		want := alone[i%len(models)]
		for name, v := range want.vals {
			closeTo(t, fmt.Sprintf("machine %d: %s", i, name), r.vals[name], v, 1e-12)
		}
		for j, gv := range want.grads {
			closeTo(t, fmt.Sprintf("machine %d: gradient %d", i, j), r.grads[j], gv, 1e-12)
		}
	}
}
