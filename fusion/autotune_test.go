package fusion_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// tunedSoftmax is a softmax over 512 rows of 100 written op by op, twice
// (two kernels of one text), with its inputs bound.
func tunedSoftmax(t *testing.T) (*G.ExprGraph, []*G.Node) {
	g := G.NewGraph()
	var ys []*G.Node
	for i, name := range []string{"x1", "x2"} {
		x := G.NewMatrix(g, tensor.Float32, G.WithShape(512, 100), G.WithName(name))
		e := G.Must(G.Exp(G.Must(G.BroadcastSub(x, G.Must(G.Max(x, 1)), nil, []byte{1}))))
		ys = append(ys, G.Must(G.BroadcastHadamardDiv(e, G.Must(G.Sum(e, 1)), nil, []byte{1})))
		d := make([]float32, 512*100)
		for j := range d {
			d[j] = float32((j*7+i*3)%23) / 5
		}
		require.NoError(t, G.Let(x, tensor.New(tensor.WithShape(512, 100), tensor.WithBacking(d))))
	}
	return g, ys
}

// fakeTimes runs each kernel on the CPU (so that its outputs are real) and
// says it took the time times gives its meta-parameters (the default's:
// 1), counting the calls.
func fakeTimes(calls *atomic.Int32, times func(m tile.Meta) float64) func(*graphpass.Kernel, []any) (float64, error) {
	return func(k *graphpass.Kernel, args []any) (float64, error) {
		calls.Add(1)
		if _, err := fusion.CPUKernelTime(k, args); err != nil {
			return 0, err
		}
		return times(k.Tile.Meta), nil
	}
}

// TestAutotuneOnTheCPU: WithAutotune on the CPU backend measures the
// candidates of each kernel text once (two identical softmax kernels tune
// together), keeps the fastest (here 4 rows a program, as the timer says),
// writes the kernels with it, computes what the untuned machine computes,
// and stores the choice on disk: a later compile with the same cache takes
// it without measuring; without a cache on disk it measures again.
func TestAutotuneOnTheCPU(t *testing.T) {
	var calls atomic.Int32
	defer fusion.SetTuneTimer(fakeTimes(&calls, func(m tile.Meta) float64 {
		switch m["BLOCK_M"] {
		case 4:
			return 0.5
		case 2:
			return 0.8
		}
		return 1
	}))()
	dir := t.TempDir()
	g, ys := tunedSoftmax(t)
	var progress []string
	opts := []fusion.Option{fusion.WithTarget(graphpass.CPU(2)), fusion.WithAutotune(true), fusion.WithCacheDir(dir),
		fusion.WithTuneProgress(func(done, total int, kernel string) {
			progress = append(progress, strings.Repeat("#", done)+"/"+strings.Repeat("#", total))
		})}
	m := fusion.NewTapeMachine(g, opts...)
	require.NoError(t, m.Err())
	defer m.Close()
	rep := m.Report()
	require.Len(t, rep.Tuning, 1, "one text, tuned once")
	r := rep.Tuning[0]
	assert.Equal(t, 2, r.Kernels)
	assert.False(t, r.FromCache)
	assert.Equal(t, 4, r.Chosen["BLOCK_M"], "%v", r)
	assert.Empty(t, r.Default["BLOCK_M"])
	assert.Greater(t, r.Candidates, 2)
	assert.Empty(t, r.Rejected)
	assert.Equal(t, []string{"#/##", "##/##"}, progress)
	for _, n := range m.Compiled().Graph.AllNodes() {
		if f, ok := n.Op().(*fusion.FusedOp); ok {
			assert.Equal(t, 4, f.Kernel().Meta["BLOCK_M"], f.Kernel().Name)
		}
	}
	measured := calls.Load()
	assert.Equal(t, int32(r.Candidates+6), measured, "each candidate once, then the default and the best three times each")
	require.NoError(t, m.RunAll())
	want := untunedValues(t, g, ys)
	for i, y := range ys {
		closeTo(t, "softmax", floats(y.Value()), want[i], 1e-6)
	}

	again := fusion.NewTapeMachine(g, opts...)
	require.NoError(t, again.Err())
	defer again.Close()
	assert.Equal(t, measured, calls.Load(), "a later compile measures nothing")
	require.Len(t, again.Report().Tuning, 1)
	assert.True(t, again.Report().Tuning[0].FromCache)
	assert.Equal(t, r.Chosen, again.Report().Tuning[0].Chosen)

	noDisk := fusion.NewTapeMachine(g, fusion.WithTarget(graphpass.CPU(2)), fusion.WithAutotune(true), fusion.WithCacheDir(""))
	require.NoError(t, noDisk.Err())
	defer noDisk.Close()
	assert.False(t, noDisk.Report().Tuning[0].FromCache)
	assert.Greater(t, calls.Load(), measured)
}

// untunedValues are the graph's outputs on a machine without tuning.
func untunedValues(t *testing.T, g *G.ExprGraph, ys []*G.Node) [][]float64 {
	m := fusion.NewTapeMachine(g, fusion.WithTarget(graphpass.CPU(2)))
	require.NoError(t, m.Err())
	defer m.Close()
	require.NoError(t, m.RunAll())
	var out [][]float64
	for _, y := range ys {
		out = append(out, floats(y.Value()))
	}
	return out
}

// TestAutotuneRejectsAndNeverSlows: a candidate whose outputs differ from
// the default's is rejected however fast it says it is; a candidate
// faster by less than the noise margin, or only in the first measurement,
// is not chosen: the default stays.
func TestAutotuneRejectsAndNeverSlows(t *testing.T) {
	cases := []struct {
		name   string
		times  func(m tile.Meta) float64
		wrong  int // BLOCK_M whose outputs the timer spoils
		chosen int // BLOCK_M chosen (0: the default, one row)
	}{
		{"a wrong candidate", func(m tile.Meta) float64 {
			if m["BLOCK_M"] == 8 {
				return 0.1
			}
			if m["BLOCK_M"] == 2 {
				return 0.7
			}
			return 1
		}, 8, 2},
		{"within the margin", func(m tile.Meta) float64 {
			if m["BLOCK_M"] == 4 {
				return 0.97
			}
			return 1
		}, 0, 0},
		{"all slower", func(m tile.Meta) float64 {
			if len(m) > 1 {
				return 2
			}
			return 1
		}, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int32
			timer := fakeTimes(&calls, c.times)
			defer fusion.SetTuneTimer(func(k *graphpass.Kernel, args []any) (float64, error) {
				s, err := timer(k, args)
				if c.wrong != 0 && k.Tile.Meta["BLOCK_M"] == c.wrong {
					args[len(args)-1].([]float32)[17] += 1
				}
				return s, err
			})()
			g, _ := tunedSoftmax(t)
			m := fusion.NewTapeMachine(g, fusion.WithTarget(graphpass.CPU(2)), fusion.WithAutotune(true), fusion.WithCacheDir(""))
			require.NoError(t, m.Err())
			defer m.Close()
			r := m.Report().Tuning[0]
			assert.Equal(t, c.chosen, r.Chosen["BLOCK_M"], "%v", r)
			if c.wrong != 0 {
				require.Len(t, r.Rejected, 1)
				assert.Contains(t, r.Rejected[0], "computes otherwise")
			}
			assert.LessOrEqual(t, r.ChosenSeconds, r.DefaultSeconds)
		})
	}
}

// TestAutotuneMeasures: with the CPU's own measurement, every kernel text
// of a graph with several kinds is tuned, each choice is one of its
// candidates and measured no slower than the default, and the graph
// computes what it computes untuned.
func TestAutotuneMeasures(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(300, 100), G.WithName("x"))
	s := G.Must(G.Sum(G.Must(G.SoftMax(G.Must(G.Tanh(x)))), 0))
	d := make([]float32, 300*100)
	for i := range d {
		d[i] = float32(math.Sin(float64(i)))
	}
	require.NoError(t, G.Let(x, tensor.New(tensor.WithShape(300, 100), tensor.WithBacking(d))))
	m := fusion.NewTapeMachine(g, fusion.WithTarget(graphpass.CPU(2)), fusion.WithAutotune(true), fusion.WithCacheDir(""))
	require.NoError(t, m.Err())
	defer m.Close()
	rep := m.Report()
	require.NotEmpty(t, rep.Tuning)
	for _, r := range rep.Tuning {
		assert.Positive(t, r.DefaultSeconds, r.Kernel)
		assert.LessOrEqual(t, r.ChosenSeconds, r.DefaultSeconds, r.Kernel)
		t.Log(r)
	}
	require.NoError(t, m.RunAll())
	got := floats(s.Value())
	want := untunedValues(t, g, []*G.Node{s})[0]
	closeTo(t, "column sums", got, want, 1e-5)
}

// TestAutotuneOnePointerKernels: the kernels that take one pointer to all
// their outputs (the heads' attention backward, the weights' gradients of
// an encoder block) are measured like any other: every candidate runs (none
// is rejected for its arguments), and the tuned machine computes what the
// untuned one does.
func TestAutotuneOnePointerKernels(t *testing.T) {
	var calls atomic.Int32
	defer fusion.SetTuneTimer(fakeTimes(&calls, func(m tile.Meta) float64 { return 1 }))()
	const b, s, d, h, ff = 2, 5, 12, 3, 24
	e := newEncoder(t, b, s, d, h, ff)
	xv := randMatrix(rand.New(rand.NewPCG(5, 6)), b*s, d, 1)
	require.NoError(t, G.Let(e.x, xv))
	m := fusion.NewTapeMachine(e.g, fusion.WithTarget(graphpass.CPU(2)), fusion.WithMatMulFusion(true),
		fusion.WithAutotune(true), fusion.WithCacheDir(t.TempDir()))
	require.NoError(t, m.Err())
	defer m.Close()
	onePointer := map[string]bool{}
	for _, n := range m.Compiled().Graph.AllNodes() {
		if f, ok := n.Op().(*fusion.FusedOp); ok && f.OnePointer() {
			onePointer[f.Kernel().Name] = true
		}
	}
	require.NotEmpty(t, onePointer, "the encoder's backward has kernels with one pointer to their outputs")
	tuned := 0
	for _, r := range m.Report().Tuning {
		assert.Empty(t, r.Rejected, "%s", r.Kernel)
		if onePointer[r.Kernel] {
			tuned++
			assert.Len(t, r.Tried, r.Candidates, "%s: every candidate measured", r.Kernel)
		}
	}
	assert.Positive(t, tuned, "one-pointer kernels tuned")
	require.NoError(t, m.RunAll())
	want := fusion.NewTapeMachine(e.g, fusion.WithTarget(graphpass.CPU(2)), fusion.WithMatMulFusion(true))
	require.NoError(t, want.Err())
	defer want.Close()
	got := floats(e.out.Value())
	for _, gn := range e.grads {
		got = append(got, floats(gn.Value())...)
	}
	require.NoError(t, want.RunAll())
	ref := floats(e.out.Value())
	for _, gn := range e.grads {
		ref = append(ref, floats(gn.Value())...)
	}
	closeTo(t, "output and gradients", got, ref, 1e-12)
}

// twoTexts is tunedSoftmax and a softmax over 256 rows of 300: two
// kernel texts (rows are not in a row kernel's text, its width is), the
// first of two kernels.
func twoTexts(t *testing.T) *G.ExprGraph {
	g, _ := tunedSoftmax(t)
	z := G.NewMatrix(g, tensor.Float32, G.WithShape(256, 300), G.WithName("z"))
	e := G.Must(G.Exp(G.Must(G.BroadcastSub(z, G.Must(G.Max(z, 1)), nil, []byte{1}))))
	G.Must(G.BroadcastHadamardDiv(e, G.Must(G.Sum(e, 1)), nil, []byte{1}))
	d := make([]float32, 256*300)
	for j := range d {
		d[j] = float32((j*5)%19) / 4
	}
	require.NoError(t, G.Let(z, tensor.New(tensor.WithShape(256, 300), tensor.WithBacking(d))))
	return g
}

// fakeClock is a clock a fake timer moves: each measurement costs the
// seconds it says a launch takes, times the launches it stands for.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) spend(seconds float64) {
	c.now = c.now.Add(time.Duration(seconds * float64(time.Second)))
}

// TestAutotuneBudget: WithTuneBudget bounds the measuring on a fake clock
// (each measurement costs 10 launches of the time the fake timer gives;
// the 300-wide text's default 3 s a launch, the 100-wide text's 1 s, of
// two kernels: the 300-wide text has the larger share and is tuned
// first).
// The budget is kept (passed by at most one candidate and one rematch),
// texts not reached keep their defaults and say so in Report.Tuning, and
// unfinished texts are not stored: a later compile measures them again.
func TestAutotuneBudget(t *testing.T) {
	const launches = 10
	cases := []struct {
		name   string
		budget time.Duration
		// finished: the texts (by width) measured to the end
		finished []int
		// reached: the texts with a candidate measured besides the default
		reached []int
	}{
		{"no bound", 0, []int{100, 300}, []int{100, 300}},
		{"ample", time.Hour, []int{100, 300}, []int{100, 300}},
		{"the defaults only", 40 * time.Second, nil, nil},
		// the defaults 40 s, then the 300-wide text's two candidates 45 s
		{"in the costliest's candidates", 50 * time.Second, nil, []int{300}},
		{"the costliest first", 100 * time.Second, []int{300}, []int{300}},
		{"nothing", time.Nanosecond, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
			defer fusion.SetTuneClock(clock.Now)()
			var calls atomic.Int32
			costliest := 0.0
			timer := fakeTimes(&calls, func(m tile.Meta) float64 { return 1 })
			defer fusion.SetTuneTimer(func(k *graphpass.Kernel, args []any) (float64, error) {
				if _, err := timer(k, args); err != nil {
					return 0, err
				}
				s := 1.0
				if k.Shape(0)[1] == 300 {
					s = 3
				}
				if k.Tile.Meta["BLOCK_M"] == 4 {
					s /= 2
				}
				costliest = max(costliest, s)
				clock.spend(launches * s)
				return s, nil
			})()
			start := clock.now
			dir := t.TempDir()
			opts := []fusion.Option{fusion.WithTarget(graphpass.CPU(2)), fusion.WithAutotune(true), fusion.WithCacheDir(dir), fusion.WithTuneBudget(c.budget)}
			m := fusion.NewTapeMachine(twoTexts(t), opts...)
			require.NoError(t, m.Err())
			defer m.Close()
			if c.budget > 0 {
				spent := clock.now.Sub(start)
				assert.LessOrEqual(t, spent, c.budget+time.Duration(7*launches*costliest*float64(time.Second)),
					"one candidate and one rematch past the budget at most")
			}
			rep := m.Report()
			require.Len(t, rep.Tuning, 2)
			rows := map[int]fusion.TuneResult{}
			for _, n := range m.Compiled().Graph.AllNodes() {
				if f, ok := n.Op().(*fusion.FusedOp); ok {
					for _, r := range rep.Tuning {
						if r.Kernel == f.Kernel().Name {
							rows[n.Shape()[1]] = r
						}
					}
				}
			}
			require.Len(t, rows, 2)
			for _, n := range []int{100, 300} {
				r := rows[n]
				finished, reached := slices.Contains(c.finished, n), slices.Contains(c.reached, n)
				assert.Equal(t, finished, r.Unfinished == "", "%d wide: %v", n, r)
				assert.Equal(t, reached, len(r.Tried) > 1, "%d wide: %v", n, r)
				if finished {
					assert.Equal(t, 4, r.Chosen["BLOCK_M"], "%d wide: %v", n, r)
					assert.Len(t, r.Tried, r.Candidates)
					continue
				}
				assert.Contains(t, r.String(), "budget")
				if !reached {
					assert.Empty(t, r.Chosen["BLOCK_M"], "%d wide: the default kept: %v", n, r)
				}
			}
			// a later compile takes the finished texts from the disk and
			// measures the others again
			again := fusion.NewTapeMachine(twoTexts(t), opts...)
			require.NoError(t, again.Err())
			defer again.Close()
			for _, r := range again.Report().Tuning {
				var n int
				for k, v := range rows {
					if v.Kernel == r.Kernel {
						n = k
					}
				}
				assert.Equal(t, slices.Contains(c.finished, n), r.FromCache, "%d wide", n)
			}
		})
	}
}

// TestAutotuneEarlyDrop: a candidate whose first measurement is over 1.5×
// the best so far is measured no further (the fake timer is told the
// limit, and stops there as the backends' timers do) and marked Dropped;
// the fastest candidate is never dropped and is chosen, after the
// rematch, only where it beats the default by the margin.
func TestAutotuneEarlyDrop(t *testing.T) {
	cases := []struct {
		name    string
		times   map[int]float64 // by BLOCK_M (0: the default, one row)
		chosen  int
		dropped []int
	}{
		{"the fastest last", map[int]float64{0: 1, 2: 1.4, 4: 0.9, 8: 0.5}, 8, nil},
		{"slow ones after a fast one", map[int]float64{0: 1, 2: 0.5, 4: 0.76, 8: 2}, 2, []int{4, 8}},
		{"slower than the default", map[int]float64{0: 1, 2: 1.6, 4: 1.2, 8: 3}, 0, []int{2, 8}},
		{"within the margin", map[int]float64{0: 1, 2: 0.95, 4: 2, 8: 1.5}, 0, []int{4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var calls, stopped atomic.Int32
			timer := fakeTimes(&calls, func(m tile.Meta) float64 {
				if s, ok := c.times[m["BLOCK_M"]]; ok {
					return s
				}
				return 4 // the other candidates: slow
			})
			defer fusion.SetTuneLimitTimer(func(k *graphpass.Kernel, args []any, limit float64) (float64, error) {
				s, err := timer(k, args)
				if s > limit {
					stopped.Add(1)
				}
				return s, err
			})()
			g, _ := tunedSoftmax(t)
			m := fusion.NewTapeMachine(g, fusion.WithTarget(graphpass.CPU(2)), fusion.WithAutotune(true), fusion.WithCacheDir(""))
			require.NoError(t, m.Err())
			defer m.Close()
			r := m.Report().Tuning[0]
			assert.Equal(t, c.chosen, r.Chosen["BLOCK_M"], "%v", r)
			assert.Empty(t, r.Rejected)
			assert.Len(t, r.Tried, r.Candidates, "every candidate measured, dropped or not")
			var dropped []int
			fastest := r.Tried[0]
			for _, x := range r.Tried {
				if x.Dropped {
					dropped = append(dropped, x.Meta["BLOCK_M"])
				}
				if x.Seconds < fastest.Seconds {
					fastest = x
				}
			}
			assert.False(t, fastest.Dropped, "the fastest is never dropped")
			for _, b := range c.dropped {
				assert.Contains(t, dropped, b)
			}
			for _, b := range []int{c.chosen} {
				assert.NotContains(t, dropped, b)
			}
			assert.Equal(t, int(stopped.Load()), len(dropped), "dropped where the timer was told it could stop")
			assert.LessOrEqual(t, r.ChosenSeconds, r.DefaultSeconds)
		})
	}
}

// TestAutotuneSplitCandidates: a product whose default does not split K
// has SPLIT_K candidates (fewer output tiles than the H200's SMs), which
// add their parts into their output: the tuner zeros the output for them
// (it poisoned it with NaN for the default, which writes it), so that they
// compute what the default computes, are not rejected, and win where they
// are fastest; in TF32 too, whose candidates sum in another order.
func TestAutotuneSplitCandidates(t *testing.T) {
	for _, prec := range []tile.Precision{tile.PrecIEEE, tile.PrecTF32} {
		t.Run(prec.String(), func(t *testing.T) {
			var calls atomic.Int32
			defer fusion.SetTuneTimer(fakeTimes(&calls, func(m tile.Meta) float64 {
				if m["SPLIT_K"] == 4 {
					return 0.5
				}
				return 1
			}))()
			const m, k, n = 200, 1024, 136
			g := G.NewGraph()
			rng := rand.New(rand.NewPCG(3, 4))
			mat := func(r, c int) *tensor.Dense {
				v := make([]float32, r*c)
				for i := range v {
					v[i] = float32(rng.Float64()*2 - 1)
				}
				return tensor.New(tensor.WithShape(r, c), tensor.WithBacking(v))
			}
			a := G.NewMatrix(g, tensor.Float32, G.WithShape(m, k), G.WithName("a"), G.WithValue(mat(m, k)))
			b := G.NewMatrix(g, tensor.Float32, G.WithShape(k, n), G.WithName("b"), G.WithValue(mat(k, n)))
			y := G.Must(G.Mul(a, b))
			opts := []fusion.Option{fusion.WithTarget(graphpass.H200), fusion.WithMatMulFusion(true), fusion.WithPrecision(prec)}
			tm := fusion.NewTapeMachine(g, append(opts, fusion.WithAutotune(true), fusion.WithCacheDir(t.TempDir()))...)
			require.NoError(t, tm.Err())
			defer tm.Close()
			rep := tm.Report()
			require.Len(t, rep.Tuning, 1)
			r := rep.Tuning[0]
			assert.Empty(t, r.Default["SPLIT_K"], "the default does not split: %v", r.Default)
			assert.Empty(t, r.Rejected)
			assert.Equal(t, 4, r.Chosen["SPLIT_K"], "%v", r)
			require.NoError(t, tm.RunAll())
			got := floats(y.Value())
			plain := fusion.NewTapeMachine(g, opts...)
			require.NoError(t, plain.Err())
			defer plain.Close()
			require.NoError(t, plain.RunAll())
			closeTo(t, "a·b", got, floats(y.Value()), 1e-3)
		})
	}
}

// TestAutotuneColumnParts: a CPU column sum split into partial sums
// (FusedOp.Parts: a second kernel adds them) tunes as any kernel: each
// candidate's chunks (CHUNK halved and doubled) and tiles run both kernels
// on the CPU, none computes otherwise, the one the timer favours is
// chosen, and the machine's sums are float64 column sums' within
// 1e-5·Σ|x|.
func TestAutotuneColumnParts(t *testing.T) {
	const rows, cols = 1000, 777
	tg := splittingCPU(t)
	var calls atomic.Int32
	defer fusion.SetTuneTimer(fakeTimes(&calls, func(m tile.Meta) float64 {
		if m["CHUNK"] == 168 {
			return 0.5
		}
		return 1
	}))()
	g := G.NewGraph()
	rng := rand.New(rand.NewPCG(7, 7))
	d := make([]float32, rows*cols)
	for i := range d {
		d[i] = float32(rng.Float64()*4 - 2)
	}
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(rows, cols), G.WithName("x"), G.WithValue(tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(d))))
	y := G.Must(G.Sum(x, 0))
	tm := fusion.NewTapeMachine(g, fusion.WithTarget(tg), fusion.WithAutotune(true), fusion.WithCacheDir(t.TempDir()))
	require.NoError(t, tm.Err())
	defer tm.Close()
	rep := tm.Report()
	require.Len(t, rep.Tuning, 1)
	r := rep.Tuning[0]
	assert.Equal(t, 84, r.Default["CHUNK"], "%v", r.Default) // 768 columns and a tail of 16
	assert.Equal(t, 16, r.Default["TAIL"], "%v", r.Default)
	assert.Empty(t, r.Rejected)
	assert.Equal(t, 168, r.Chosen["CHUNK"], "%v", r)
	parts := 0
	for _, n := range tm.Compiled().Graph.AllNodes() {
		if f, ok := n.Op().(*fusion.FusedOp); ok {
			parts = max(parts, f.Parts())
		}
	}
	assert.Equal(t, 6, parts, "1000 rows in chunks of 168")
	require.NoError(t, tm.RunAll())
	got := floats(y.Value())
	require.Len(t, got, cols)
	for j := range cols {
		var want, scale float64
		for i := range rows {
			want += float64(d[i*cols+j])
			scale += math.Abs(float64(d[i*cols+j]))
		}
		require.InDelta(t, want, got[j], 1e-5*scale, "column %d", j)
	}
}
