package fusion_test

import (
	"math"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/tile"
)

// TestStatsCountRunsAndTheReportStays: the report is what compilation did
// and does not change when the machine runs; Stats counts the runs.
func TestStatsCountRunsAndTheReportStays(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(7, 13), G.WithName("x"))
	G.Must(G.Sum(G.Must(G.SoftMax(G.Must(G.Tanh(x)))), 1))
	m := fusion.NewTapeMachine(g)
	defer m.Close()
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
	before := m.Report().String()
	if s := m.Stats(); s.Runs != 0 {
		t.Fatalf("Stats before any run: %+v", s)
	}
	if err := G.Let(x, tensor.New(tensor.WithShape(7, 13), tensor.WithBacking(make([]float32, 91)))); err != nil {
		t.Fatal(err)
	}
	for run := 1; run <= 3; run++ {
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		s := m.Stats()
		if s.Runs != run || s.HostOps != 0 || s.Uploads != 0 || s.DeviceTime != 0 || s.ReturnedEarly {
			t.Fatalf("Stats after %d CPU runs: %+v", run, s)
		}
		if err := m.Wait(); err != nil { // a CPU run has ended when it returns
			t.Fatalf("Wait after %d CPU runs: %v", run, err)
		}
	}
	if after := m.Report().String(); after != before {
		t.Fatalf("the report changed with runs:\n%s\nthen\n%s", before, after)
	}
	if times, ok, err := m.DeviceTimes(3, 0); ok || err != nil || times != nil {
		t.Fatalf("DeviceTimes on the CPU: %v, ok %v, %v", times, ok, err)
	}
}

// TestMisuseIsAClearError: each misuse is an error that names the option or
// the call, never a panic or a nil dereference.
func TestMisuseIsAClearError(t *testing.T) {
	other := G.NewGraph()
	foreign := G.NewMatrix(other, tensor.Float64, G.WithShape(2, 2), G.WithName("foreign"))
	cases := []struct {
		name string
		opts []fusion.Option
		want string
	}{
		{"an unknown precision", []fusion.Option{fusion.WithPrecision(tile.Precision(99))}, "WithPrecision(precision(99))"},
		{"graphpass's attention precision, not a user's", []fusion.Option{fusion.WithPrecision(tile.PrecTF32TB)}, "WithPrecision(tf32tb)"},
		{"an unknown backend", []fusion.Option{fusion.WithBackend(fusion.Backend(7))}, "WithBackend(Backend(7))"},
		{"a group of no ops", []fusion.Option{fusion.WithMaxGroup(0)}, "WithMaxGroup(0)"},
		{"a negative group size", []fusion.Option{fusion.WithMaxGroup(-1)}, "WithMaxGroup(-1)"},
		{"keeping nil", []fusion.Option{fusion.WithKeep(nil)}, "WithKeep: node 1 of 1 is nil"},
		{"keeping a node of another graph", []fusion.Option{fusion.WithKeep(foreign)}, "WithKeep: node foreign is not in the graph"},
		{"a nil option", []fusion.Option{nil}, "nil Option"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 2), G.WithName("x"))
			G.Must(G.Exp(x))
			if _, err := fusion.Compile(g, tc.opts...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Compile: %v, want an error containing %q", err, tc.want)
			}
			m := fusion.NewTapeMachine(g, tc.opts...)
			defer m.Close()
			if err := m.RunAll(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("RunAll: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	t.Run("a nil graph", func(t *testing.T) {
		if _, err := fusion.Compile(nil); err == nil || !strings.Contains(err.Error(), "nil graph") {
			t.Fatalf("Compile(nil): %v", err)
		}
		m := fusion.NewTapeMachine(nil)
		if err := m.RunAll(); err == nil || !strings.Contains(err.Error(), "nil graph") {
			t.Fatalf("RunAll of a machine for a nil graph: %v", err)
		}
		if m.Report() != nil {
			t.Fatal("a report for a nil graph")
		}
	})
	t.Run("a tensor without elements", func(t *testing.T) {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(5, 0), G.WithName("x"))
		G.Must(G.Sum(x, 1))
		if _, err := fusion.Compile(g); err == nil || !strings.Contains(err.Error(), "x has shape (5, 0), with no elements") {
			t.Fatalf("Compile: %v", err)
		}
	})
	t.Run("RunAll after Close", func(t *testing.T) {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 2), G.WithName("x"))
		G.Must(G.Exp(x))
		m := fusion.NewTapeMachine(g)
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if err := m.RunAll(); err == nil || !strings.Contains(err.Error(), "RunAll after Close") {
			t.Fatalf("RunAll after Close: %v", err)
		}
		if err := m.Close(); err != nil {
			t.Fatalf("a second Close: %v", err)
		}
	})
}

// TestWriteBackIsTheReadableSet: a run writes back the readable set and no
// more (the interior of a kernel has no value); WithReadAll(true) gives
// every node its value. The reference is float64 Go: Gorgonia's own machine
// leaves exp(x) holding 0.5·exp(x) here (the product runs in place over its
// operand's value), so its interior values are not a reference.
func TestWriteBackIsTheReadableSet(t *testing.T) {
	data := []float64{0.1, -0.3, 0.7, 1.2, -2, 0.05, 0.9, -0.4, 0.33, 1.7, -1.1, 0.2, 0.6, -0.8, 0.01}
	want := make([][]float64, 4) // exp, product, tanh, row sums
	for i, v := range data {
		e := math.Exp(v)
		want[0] = append(want[0], e)
		want[1] = append(want[1], 0.5*e)
		want[2] = append(want[2], math.Tanh(0.5*e))
		if i%5 == 0 {
			want[3] = append(want[3], 0)
		}
		want[3][i/5] += math.Tanh(0.5 * e)
	}
	for _, readAll := range []bool{false, true} {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 5), G.WithName("x"))
		e := G.Must(G.Exp(x))
		p := G.Must(G.Mul(e, G.NewConstant(0.5)))
		th := G.Must(G.Tanh(p))
		s := G.Must(G.Sum(th, 1))
		m := fusion.NewTapeMachine(g, fusion.WithReadAll(readAll))
		if err := G.Let(x, tensor.New(tensor.WithShape(3, 5), tensor.WithBacking(append([]float64(nil), data...)))); err != nil {
			t.Fatal(err)
		}
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		for i, n := range []*G.Node{e, p, th, s} {
			switch {
			case i < 3 && !readAll:
				if n.Value() != nil {
					t.Errorf("%v, inside a kernel, has a value written back", n.Name())
				}
			case n.Value() == nil:
				t.Errorf("readAll %v: %v has no value", readAll, n.Name())
			default:
				got := n.Value().Data().([]float64)
				for j, w := range want[i] {
					if d := math.Abs(got[j] - w); d > 1e-14*(1+math.Abs(w)) {
						t.Errorf("readAll %v: %v[%d] = %v, want %v", readAll, n.Name(), j, got[j], w)
					}
				}
			}
		}
		t.Logf("readAll %v: %d kernels", readAll, m.Report().Kernels())
		m.Close()
	}
}

// TestValuesSurviveTheNextRun: values the user read after a run stay as
// they were through the next run (results collected batch by batch), on
// every path a value takes: a kernel's root and extra outputs, a reshape
// that shares its operand's memory, Gorgonia's own matrix product, a
// gradient. WithReuseOutputs(true), the fast path, overwrites them.
func TestValuesSurviveTheNextRun(t *testing.T) {
	for _, tc := range []struct {
		name          string
		matmul, reuse bool
	}{
		{"fused products", true, false},
		{"Gorgonia's products", false, false},
		{"fused products, reusing outputs", true, true},
		{"Gorgonia's products, reusing outputs", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 6), G.WithName("x"))
			wv := make([]float64, 30)
			for i := range wv {
				wv[i] = float64(i%7)/7 - 0.4
			}
			w := G.NewMatrix(g, tensor.Float64, G.WithShape(6, 5), G.WithName("w"), G.WithValue(tensor.New(tensor.WithShape(6, 5), tensor.WithBacking(wv))))
			h := G.Must(G.Mul(x, w))
			a := G.Must(G.Tanh(h))
			G.WithName("a")(a)
			r := G.Must(G.Reshape(a, tensor.Shape{5, 4}))
			G.WithName("r")(r)
			b := G.Must(G.Exp(a))
			cost := G.Must(G.Add(G.Must(G.Sum(G.Must(G.Square(b)))), G.Must(G.Sum(r))))
			if _, err := G.Grad(cost, w); err != nil {
				t.Fatal(err)
			}
			m := fusion.NewTapeMachine(g, fusion.WithMatMulFusion(tc.matmul), fusion.WithReuseOutputs(tc.reuse), fusion.WithKeep(h))
			defer m.Close()
			held := map[string]func() G.Value{"h": h.Value, "a": a.Value, "r": r.Value, "b": b.Value, "cost": cost.Value,
				"dw": func() G.Value { v, _ := w.Grad(); return v }}
			run := func(seed float64) map[string]G.Value {
				xv := make([]float64, 24)
				for i := range xv {
					xv[i] = math.Sin(seed + float64(i))
				}
				if err := G.Let(x, tensor.New(tensor.WithShape(4, 6), tensor.WithBacking(xv))); err != nil {
					t.Fatal(err)
				}
				if err := m.RunAll(); err != nil {
					t.Fatal(err)
				}
				vals := map[string]G.Value{}
				for name, get := range held {
					if vals[name] = get(); vals[name] == nil {
						t.Fatalf("%s has no value\n%v", name, m.Report())
					}
				}
				return vals
			}
			first := run(1)
			copies := map[string][]float64{}
			for name, v := range first {
				copies[name] = append([]float64(nil), asFloats(v)...)
			}
			run(2)
			overwritten := 0
			for name, v := range first {
				got := asFloats(v)
				for i := range got {
					if got[i] != copies[name][i] {
						overwritten++
						if !tc.reuse {
							t.Errorf("%s[%d] read after run 1 is %v after run 2, was %v", name, i, got[i], copies[name][i])
						}
						break
					}
				}
			}
			if tc.reuse && overwritten == 0 {
				t.Errorf("WithReuseOutputs(true): no value of run 1 was overwritten by run 2; the test does not see reuse")
			}
		})
	}
}

func asFloats(v G.Value) []float64 {
	switch d := v.Data().(type) {
	case []float64:
		return d
	case float64:
		return []float64{d}
	}
	panic(v)
}
