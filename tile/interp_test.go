package tile_test

import (
	"errors"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/kernels"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// whoWrote builds vec_add's indexing but stores each lane's program id, so a
// test can see which program handled which element.
func whoWrote(t *testing.T, block int) *tile.Kernel {
	t.Helper()
	b := tile.NewBuilder("who_wrote", tile.Meta{"BLOCK": block})
	out, n := b.Ptr("out", tile.I32), b.Param("n", tile.I32)
	BLOCK := b.BlockSize("BLOCK")
	pid := b.ProgramID(0)
	offs := b.Add(b.Mul(pid, BLOCK), b.Arange(0, BLOCK))
	b.Store(b.AddPtr(out, offs), pid, b.Lt(offs, n))
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestVecAddGridAndTail(t *testing.T) {
	const n, block = 1000, 128
	grid := tile.Grid{tile.CDiv(n, block)}
	if grid[0] != 8 {
		t.Fatalf("CDiv(1000, 128) = %d, want 8", grid[0])
	}
	owner := make([]int32, n+tiletest.Pad)
	for i := range owner {
		owner[i] = -1
	}
	if err := tile.Interpret(whoWrote(t, block), grid, owner, n); err != nil {
		t.Fatal(err)
	}
	count := map[int32]int{}
	for _, p := range owner[:n] {
		count[p]++
	}
	for p := int32(0); p < 7; p++ {
		if count[p] != 128 {
			t.Errorf("program %d handled %d elements, want 128", p, count[p])
		}
	}
	if count[7] != 104 {
		t.Errorf("the last program handled %d elements, want 104", count[7])
	}
	if len(count) != 8 {
		t.Errorf("%d programs wrote, want 8: %v", len(count), count)
	}
	for i, p := range owner[n:] {
		if p != -1 {
			t.Errorf("padding element %d written by program %d", n+i, p)
		}
	}
	// and vec_add itself at that size
	if err := tiletest.RunCase(tiletest.Interp{}, tiletest.Cases()[0]); err != nil {
		t.Fatal(err)
	}
}

func TestBlockSizeMustBePowerOfTwo(t *testing.T) {
	_, err := kernels.VecAdd(tile.Meta{"BLOCK": 100})
	if err == nil {
		t.Fatal("BLOCK=100 was accepted")
	}
	if !strings.Contains(err.Error(), "BLOCK = 100 is not a power of two") {
		t.Fatalf("error does not name the value: %v", err)
	}
	var be *tile.BuildError
	if !errors.As(err, &be) || be.Kernel != "vec_add" {
		t.Fatalf("want a *tile.BuildError naming vec_add, got %T %v", err, err)
	}
	b := tile.NewBuilder("r", nil)
	b.Arange(0, 100)
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "range {0, 100} has size 100, not a power of two") {
		t.Fatalf("Arange(0, 100): %v", err)
	}
	b = tile.NewBuilder("z", nil)
	b.Zeros(tile.F32, 16, 24)
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "is 24, not a power of two") {
		t.Fatalf("Zeros(16, 24): %v", err)
	}
}

// vecAddNoStoreMask is vec_add with its store unmasked.
func vecAddNoStoreMask(t *testing.T, block int) *tile.Kernel {
	t.Helper()
	b := tile.NewBuilder("vec_add_nomask", tile.Meta{"BLOCK": block})
	x, y, out := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32), b.Ptr("out", tile.F32)
	n := b.Param("n", tile.I32)
	offs := b.Add(b.Mul(b.ProgramID(0), block), b.Arange(0, block))
	mask := b.Lt(offs, n)
	b.Store(b.AddPtr(out, offs), b.Add(b.Load(b.AddPtr(x, offs), mask, nil), b.Load(b.AddPtr(y, offs), mask, nil)), nil)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestUnmaskedStoreOutOfBounds(t *testing.T) {
	const n = 1000
	x, y, out := make([]float32, n), make([]float32, n), make([]float32, n)
	err := tile.Interpret(vecAddNoStoreMask(t, 128), tile.Grid{8}, x, y, out, n)
	if err == nil {
		t.Fatal("an unmasked store past the end was not reported")
	}
	var ee *tile.ExecError
	if !errors.As(err, &ee) {
		t.Fatalf("want *tile.ExecError, got %T: %v", err, err)
	}
	if ee.Kernel != "vec_add_nomask" || ee.Program != [3]int{7, 0, 0} {
		t.Errorf("fault located at kernel %q program %v, want vec_add_nomask (7,0,0)", ee.Kernel, ee.Program)
	}
	for _, want := range []string{"@vec_add_nomask", "program (7,0,0)", "store", "offset 1000 of out", "outside its 1000 elements"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestUnmaskedLoadOutOfBounds(t *testing.T) {
	b := tile.NewBuilder("read_before", nil)
	x, out := b.Ptr("x", tile.F32), b.Ptr("out", tile.F32)
	offs := b.Sub(b.Arange(0, 16), 3) // -3 .. 12
	b.Store(b.AddPtr(out, b.Arange(0, 16)), b.Load(b.AddPtr(x, offs), nil, nil), nil)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	err = tile.Interpret(k, tile.Grid{1}, make([]float32, 16), make([]float32, 16))
	if err == nil || !strings.Contains(err.Error(), "lane 0 reads offset -3 of x") {
		t.Fatalf("a load before the start was not reported well: %v", err)
	}
}

// TestMaskedLanesUntouched: masked-off lanes may point anywhere; they are
// neither read nor written, and loads give other there.
func TestMaskedLanesUntouched(t *testing.T) {
	b := tile.NewBuilder("masked", nil)
	x, out := b.Ptr("x", tile.F32), b.Ptr("out", tile.F32)
	r := b.Arange(0, 64)
	wild := b.Where(b.Lt(r, 8), r, b.Add(b.Mul(r, 1000003), -1<<30)) // far outside for lanes ≥ 8
	mask := b.Lt(r, 8)
	v := b.Load(b.AddPtr(x, wild), mask, 42.0)
	b.Store(b.AddPtr(out, wild), v, mask)
	b.Store(b.AddPtr(out, b.Add(r, 8)), v, b.Lt(r, 16)) // other shows up in lanes 8..15
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	xs := tiletest.Uniform(tiletest.RNG("masked"), 8, -1, 1)
	got := tiletest.Output(24)
	if err := tile.Interpret(k, tile.Grid{1}, xs, got); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, 24)
	for i := range want {
		switch {
		case i < 8:
			want[i] = float64(xs[i])
		case i < 16:
			want[i] = float64(xs[i-8])
		default:
			want[i] = 42
		}
	}
	if err := tiletest.Close("out", got, want, tiletest.Tol{}); err != nil {
		t.Fatal(err)
	}
}

func TestLaunchArgumentErrors(t *testing.T) {
	k, err := kernels.VecAdd(tile.Meta{"BLOCK": 16})
	if err != nil {
		t.Fatal(err)
	}
	f := make([]float32, 4)
	cases := []struct {
		name string
		grid tile.Grid
		args []any
		want string
	}{
		{"too few", tile.Grid{1}, []any{f, f, f}, "3 arguments for 4 parameters"},
		{"wrong buffer type", tile.Grid{1}, []any{f, make([]float64, 4), f, 4}, "argument 1 (y !tt.ptr<f32>) is []float64, want []float32"},
		{"scalar for a pointer", tile.Grid{1}, []any{f, f, 3, 4}, "argument 2 (out !tt.ptr<f32>) is int"},
		{"too large for i32", tile.Grid{1}, []any{f, f, f, int64(1) << 40}, "does not fit i32"},
		{"float for i32", tile.Grid{1}, []any{f, f, f, 4.5}, "float"},
		{"negative grid", tile.Grid{-1}, []any{f, f, f, 4}, "dimension 0 is -1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := tile.Interpret(k, c.grid, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, c.want)
			}
		})
	}
	if err := tile.Interpret(k, tile.Grid{0}, f, f, f, 4); err != nil {
		t.Fatalf("an empty grid should run nothing: %v", err)
	}
}

// TestGrid3D: every program of a 3-D grid runs once and sees its coordinates
// and the grid's size.
func TestGrid3D(t *testing.T) {
	b := tile.NewBuilder("grid3d", nil)
	out := b.Ptr("out", tile.I32)
	x, y, z := b.ProgramID(0), b.ProgramID(1), b.ProgramID(2)
	nx, ny := b.NumPrograms(0), b.NumPrograms(1)
	lin := b.Add(b.Mul(b.Add(b.Mul(z, ny), y), nx), x)
	code := b.Add(b.Add(b.Mul(x, 10000), b.Mul(y, 100)), z)
	b.AtomicAdd(b.AddPtr(out, lin), code, nil)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	g := tile.Grid{5, 3, 4}
	got := make([]int32, 60)
	if err := tile.Interpret(k, g, got); err != nil {
		t.Fatal(err)
	}
	for zz := 0; zz < 4; zz++ {
		for yy := 0; yy < 3; yy++ {
			for xx := 0; xx < 5; xx++ {
				if w := int32(xx*10000 + yy*100 + zz); got[(zz*3+yy)*5+xx] != w {
					t.Fatalf("program (%d,%d,%d) wrote %d, want %d", xx, yy, zz, got[(zz*3+yy)*5+xx], w)
				}
			}
		}
	}
}

// TestAtomicAddOldValues: 1000 programs add 1 to one counter; the old values
// they get back are 0..999, each once.
func TestAtomicAddOldValues(t *testing.T) {
	b := tile.NewBuilder("counter", nil)
	ctr, olds := b.Ptr("ctr", tile.I32), b.Ptr("olds", tile.I32)
	old := b.AtomicAdd(b.AddPtr(ctr, 0), int32(1), nil)
	b.Store(b.AddPtr(olds, b.ProgramID(0)), old, nil)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctrBuf, got := []int32{0}, make([]int32, 1000)
	e, err := tile.NewExec(k)
	if err != nil {
		t.Fatal(err)
	}
	e.Workers = 4
	if err := e.Launch(tile.Grid{1000}, ctrBuf, got); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	for i, v := range got {
		if v != int32(i) {
			t.Fatalf("old values are not a permutation of 0..999: sorted[%d] = %d", i, v)
		}
	}
	if ctrBuf[0] != 1000 {
		t.Fatalf("counter = %d, want 1000", ctrBuf[0])
	}
}

func TestForLoopEdges(t *testing.T) {
	// sum of iv over [lo, hi) step s, with i64 bounds; zero trips keep the init.
	b := tile.NewBuilder("loop", nil)
	out := b.Ptr("out", tile.F64)
	lo, hi, st := b.Param("lo", tile.I64), b.Param("hi", tile.I64), b.Param("step", tile.I64)
	res := b.For(lo, hi, st, []*tile.Value{b.F64(0.5)}, func(iv *tile.Value, c []*tile.Value) []*tile.Value {
		return []*tile.Value{b.Add(c[0], b.Cast(iv, tile.F64))}
	})
	b.Store(b.AddPtr(out, 0), res[0], nil)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		lo, hi, step int64
		want         float64
		err          string
	}{
		{0, 10, 1, 45.5, ""},
		{3, 10, 3, 3 + 6 + 9 + 0.5, ""},
		{5, 5, 1, 0.5, ""},
		{9, 2, 1, 0.5, ""},
		{1 << 40, 1<<40 + 2, 1, 2*(1<<40) + 1 + 0.5, ""},
		{0, 10, 0, 0, "step 0 is not positive"},
	}
	for _, c := range cases {
		got := []float64{-1}
		err := tile.Interpret(k, tile.Grid{1}, got, c.lo, c.hi, c.step)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("for %d..%d step %d: got %v, want error %q", c.lo, c.hi, c.step, err, c.err)
			}
			continue
		}
		if err != nil || got[0] != c.want {
			t.Errorf("for %d..%d step %d: got %v (%v), want %v", c.lo, c.hi, c.step, got[0], err, c.want)
		}
	}
}

// TestLoopSwapsCarriedValues: yielding the carried values in swapped order
// must read both before writing either.
func TestLoopSwapsCarriedValues(t *testing.T) {
	b := tile.NewBuilder("swap", nil)
	out := b.Ptr("out", tile.I32)
	r := b.Arange(0, 16)
	res := b.For(0, 3, 1, []*tile.Value{r, b.Add(r, 100)}, func(_ *tile.Value, c []*tile.Value) []*tile.Value {
		return []*tile.Value{c[1], c[0]}
	})
	b.Store(b.AddPtr(out, r), res[0], nil)
	b.Store(b.AddPtr(out, b.Add(r, 16)), res[1], nil)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]int32, 32)
	if err := tile.Interpret(k, tile.Grid{1}, got); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 16; i++ {
		if got[i] != int32(100+i) || got[16+i] != int32(i) {
			t.Fatalf("after 3 swaps: lane %d = (%d, %d), want (%d, %d)", i, got[i], got[16+i], 100+i, i)
		}
	}
}

// TestIntegerDivisionByZero: a zero divisor gives a defined value rather
// than a fault, because lanes that a mask discards often hold zeros
// (x/0 = -1, x%0 = x; unspecified on the GPU).
func TestIntegerDivisionByZero(t *testing.T) {
	b := tile.NewBuilder("idiv", nil)
	x, q, r := b.Ptr("x", tile.I32), b.Ptr("q", tile.I32), b.Ptr("r", tile.I32)
	offs := b.Arange(0, 16)
	xv := b.Load(b.AddPtr(x, offs), nil, nil)
	b.Store(b.AddPtr(q, offs), b.Div(100, xv), nil)
	b.Store(b.AddPtr(r, offs), b.Rem(100, xv), nil)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	xs := make([]int32, 16)
	for i := range xs {
		xs[i] = int32(i - 5)
	}
	qs, rs := make([]int32, 16), make([]int32, 16)
	if err := tile.Interpret(k, tile.Grid{1}, xs, qs, rs); err != nil {
		t.Fatal(err)
	}
	for i, d := range xs {
		wq, wr := int32(-1), int32(100)
		if d != 0 {
			wq, wr = 100/d, 100%d
		}
		if qs[i] != wq || rs[i] != wr {
			t.Errorf("100 / %d = %d rem %d, want %d rem %d", d, qs[i], rs[i], wq, wr)
		}
	}
}

// TestConcurrentLaunches: one Exec launched from several goroutines at once.
func TestConcurrentLaunches(t *testing.T) {
	k, err := kernels.VecAdd(tile.Meta{"BLOCK": 64})
	if err != nil {
		t.Fatal(err)
	}
	e, err := tile.NewExec(k)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for g := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 1000 + g
			x, y, out := make([]float32, n), make([]float32, n), make([]float32, n)
			for i := range x {
				x[i], y[i] = float32(i), float32(g)
			}
			if err := e.Launch(tile.Grid{tile.CDiv(n, 64)}, x, y, out, n); err != nil {
				errs[g] = err
				return
			}
			for i := range out {
				if out[i] != float32(i+g) {
					errs[g] = errors.New("wrong sum")
					return
				}
			}
		}()
	}
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			t.Errorf("launch %d: %v", g, err)
		}
	}
}

func TestTextDump(t *testing.T) {
	k, err := kernels.VecAdd(tile.Meta{"BLOCK": 1024})
	if err != nil {
		t.Fatal(err)
	}
	text := k.String()
	for _, re := range []string{
		`^tt\.func @vec_add\(%x: !tt\.ptr<f32>, %y: !tt\.ptr<f32>, %out: !tt\.ptr<f32>, %n: i32\) meta \{BLOCK = 1024\} \{\n`,
		`\n  %\d+ = get_program_id x : i32\n`,
		`\n  %\d+ = make_range \{0, 1024\} : tensor<1024xi32>\n`,
		`\n  %\d+ = splat %\d+ : i32 -> tensor<1024xi32>\n`,
		`\n  %\d+ = cmp lt %\d+, %\d+ : tensor<1024xi1>\n`,
		`\n  %\d+ = addptr %\d+, %\d+ : tensor<1024x!tt\.ptr<f32>>\n`,
		`\n  %\d+ = load %\d+, %\d+ : tensor<1024x!tt\.ptr<f32>>\n`,
		`\n  store %\d+, %\d+, %\d+ : tensor<1024x!tt\.ptr<f32>>\n}\n$`,
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("dump does not match %s:\n%s", re, text)
		}
	}
	mm, err := kernels.Matmul(tile.Meta{"BM": 32, "BN": 32, "BK": 32})
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`\n  %(\d+) = for %\d+ = %\d+ to %K step %\d+ iter_args\(%\d+ = %\d+, %\d+ = %\d+, %\d+ = %\d+\) \{\n`,
		`\n    %\d+ = dot %\d+, %\d+, %\d+ \{precision = ieee\} : tensor<32x32xf32> \* tensor<32x32xf32> -> tensor<32x32xf32>\n`,
		`\n    yield %\d+, %\d+, %\d+\n  \}\n`,
		`\n  %\d+ = for_result %\d+ #0 : tensor<32x32xf32>\n`,
	} {
		if !regexp.MustCompile(re).MatchString(mm.String()) {
			t.Errorf("matmul dump does not match %s:\n%s", re, mm)
		}
	}
	if n := mm.Count(tile.OpDot); n != 1 {
		t.Errorf("matmul has %d dots, want 1", n)
	}
}

func TestInterpretRejectsUnverifiedKernel(t *testing.T) {
	k, err := kernels.VecAdd(tile.Meta{"BLOCK": 16})
	if err != nil {
		t.Fatal(err)
	}
	k.Body.Values = k.Body.Values[1:] // drop program_id: its users now see an undefined value
	if err := tile.Interpret(k, tile.Grid{1}, []float32{}, []float32{}, []float32{}, 0); err == nil {
		t.Fatal("an invalid kernel ran")
	}
	if _, err := tile.NewExec(nil); err == nil {
		t.Fatal("NewExec(nil) gave no error")
	}
}

var _ = math.Inf

// TestLaneZeroOffsets: offsets used only as contiguous addresses are
// computed for lane 0 alone; the same offsets used also as values, or
// through a chain of integer ops, still give every lane its own.
func TestLaneZeroOffsets(t *testing.T) {
	const n, block = 4096, 256
	cases := []struct {
		name  string
		build func(b *tile.Builder, x, y *tile.Value, offs *tile.Value)
		want  func(i int, x float32) float32
	}{
		{"addresses only", func(b *tile.Builder, x, y, offs *tile.Value) {
			b.Store(b.AddPtr(y, offs), b.Mul(b.Load(b.AddPtr(x, offs), nil, nil), 2.0), nil)
		}, func(i int, x float32) float32 { return 2 * x }},
		{"through a chain of integer ops", func(b *tile.Builder, x, y, offs *tile.Value) {
			o := b.Sub(b.Add(b.Mul(offs, 3), 7), b.Add(b.Mul(offs, 2), 7)) // = offs
			b.Store(b.AddPtr(y, o), b.Load(b.AddPtr(x, o), nil, nil), nil)
		}, func(i int, x float32) float32 { return x }},
		{"also a value", func(b *tile.Builder, x, y, offs *tile.Value) {
			b.Store(b.AddPtr(y, offs), b.Add(b.Load(b.AddPtr(x, offs), nil, nil), b.Cast(offs, tile.F32)), nil)
		}, func(i int, x float32) float32 { return x + float32(i) }},
		{"a part of it a value", func(b *tile.Builder, x, y, offs *tile.Value) {
			r := b.Rem(offs, 16)
			b.Store(b.AddPtr(y, offs), b.Add(b.Load(b.AddPtr(x, offs), nil, nil), b.Cast(r, tile.F32)), nil)
		}, func(i int, x float32) float32 { return x + float32(i%16) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("lane0", nil)
			x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
			offs := b.Add(b.Mul(b.ProgramID(0), block), b.Arange(0, block))
			c.build(b, x, y, offs)
			k, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			in, out := make([]float32, n), make([]float32, n)
			for i := range in {
				in[i] = float32(i%7) - 3
				out[i] = float32(math.NaN())
			}
			if err := tile.Interpret(k, tile.Grid{n / block}, in, out); err != nil {
				t.Fatal(err)
			}
			for i := range out {
				if w := c.want(i, in[i]); out[i] != w {
					t.Fatalf("y[%d] = %v, want %v", i, out[i], w)
				}
			}
		})
	}
}

// TestRowTiles: a 2-D tile whose rows are contiguous runs of a row-major
// matrix loads and stores row by row; rows partly masked, and a row that
// would read past the buffer, go lane by lane (the fault names its lane).
func TestRowTiles(t *testing.T) {
	const rows, cols = 20, 30 // the matrix; tiles of 8×16 at (r0, c0)
	build := func(masked bool) *tile.Kernel {
		b := tile.NewBuilder("row_tiles", nil)
		x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
		r0, c0 := b.Param("r0", tile.I32), b.Param("c0", tile.I32)
		r := b.ExpandDims(b.Add(b.Arange(0, 8), r0), 1)
		c := b.ExpandDims(b.Add(b.Arange(0, 16), c0), 0)
		off := b.Add(b.Mul(r, cols), c)
		var m *tile.Value
		if masked {
			m = b.And(b.Lt(r, rows), b.Lt(c, cols))
		}
		var v *tile.Value
		if m != nil {
			v = b.Load(b.AddPtr(x, off), m, -1.0)
		} else {
			v = b.Load(b.AddPtr(x, off), nil, nil)
		}
		b.Store(b.AddPtr(y, off), b.Mul(v, 2.0), m)
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	for _, c := range []struct {
		name   string
		masked bool
		r0, c0 int
		fault  string
	}{
		{"whole rows inside", false, 3, 5, ""},
		{"rows cut by the mask at the right edge", true, 4, 20, ""},
		{"rows cut by the mask at the bottom", true, 16, 0, ""},
		{"past the end without a mask", false, 16, 20, "lane"},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := build(c.masked)
			lanes := tile.AnalyzeLanes(k)
			k.Walk(func(v *tile.Value) {
				if v.Op == tile.OpLoad || v.Op == tile.OpStore {
					if li := lanes[v.Args[0].ID]; !li.RowContiguous || li.Contiguous {
						t.Fatalf("%v: %+v, want rows contiguous (and not the whole tile)", v, li)
					}
				}
			})
			x, y := make([]float32, rows*cols), make([]float32, rows*cols)
			for i := range x {
				x[i] = float32(i)
				y[i] = -7
			}
			err := tile.Interpret(k, tile.Grid{1}, x, y, c.r0, c.c0)
			if c.fault != "" {
				if err == nil || !strings.Contains(err.Error(), c.fault) {
					t.Fatalf("error %v, want a fault naming the %s", err, c.fault)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range y {
				r, cc := i/cols, i%cols
				want := float32(-7)
				if r >= c.r0 && r < c.r0+8 && cc >= c.c0 && cc < c.c0+16 {
					want = 2 * x[i]
				}
				if y[i] != want {
					t.Fatalf("y[%d,%d] = %v, want %v", r, cc, y[i], want)
				}
			}
		})
	}
}

// TestFoldedSplats: integer splats whose users only add them (an add, an
// addptr's offset) are read as scalars and never filled; the results are
// those of the filled splats, in a K loop as a matmul has it, beside a
// splat that another op also uses and an add of two splats.
func TestFoldedSplats(t *testing.T) {
	const rows, cols, steps = 8, 16, 3
	b := tile.NewBuilder("folded", nil)
	x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
	r := b.ExpandDims(b.Arange(0, rows), 1)
	c := b.ExpandDims(b.Arange(0, cols), 0)
	base := b.Add(b.Mul(r, cols*steps), c) // [rows, cols]: rows of x, cols wide
	acc := b.For(0, steps, 1, []*tile.Value{b.Zeros(tile.F32, rows, cols)}, func(k *tile.Value, carried []*tile.Value) []*tile.Value {
		kc := b.Mul(k, cols)
		v := b.Load(b.AddPtr(x, b.Add(base, kc)), nil, nil) // splat(kc): only added
		two := b.Add(b.Splat(k, tile.Shp(rows, cols)), b.Splat(kc, tile.Shp(rows, cols)))
		w := b.Cast(b.Mul(b.Splat(k, tile.Shp(rows, cols)), two), tile.F32) // a splat used by a mul too
		return []*tile.Value{b.Add(carried[0], b.Add(v, w))}
	})[0]
	b.Store(b.AddPtr(y, b.Add(b.Mul(r, cols), c)), acc, nil)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	in := make([]float32, rows*cols*steps)
	for i := range in {
		in[i] = float32(i%13) - 6
	}
	out := make([]float32, rows*cols)
	for i := range out {
		out[i] = float32(math.NaN())
	}
	if err := tile.Interpret(k, tile.Grid{1}, in, out); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			want := float32(0)
			for s := 0; s < steps; s++ {
				want += in[i*cols*steps+s*cols+j] + float32(s*(s+s*cols))
			}
			if got := out[i*cols+j]; got != want {
				t.Fatalf("y[%d,%d] = %v, want %v\n%s", i, j, got, want, k)
			}
		}
	}
}
