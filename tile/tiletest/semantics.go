package tiletest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/kernels"
)

// RunSemantics checks, on l, what the IR promises beyond the numbers of
// the conformance table: which program handles which elements of a ragged
// grid, that masked-off lanes are neither read nor written, that an enabled
// lane outside its buffer is a fault naming the kernel, program, op and
// offset, that bad arguments and grids are errors, atomics, loop edges and
// integer division by zero. A backend that cannot report faults (a GPU)
// does not run it.
func RunSemantics(t *testing.T, l Launcher) {
	t.Helper()
	for _, c := range []struct {
		name string
		run  func(*testing.T, Launcher)
	}{
		{"VecAddGridAndTail", semVecAddGridAndTail},
		{"UnmaskedStoreOutOfBounds", semUnmaskedStoreOutOfBounds},
		{"UnmaskedLoadOutOfBounds", semUnmaskedLoadOutOfBounds},
		{"MaskedLanesUntouched", semMaskedLanesUntouched},
		{"LaunchArgumentErrors", semLaunchArgumentErrors},
		{"Grid3D", semGrid3D},
		{"AtomicAddOldValues", semAtomicAddOldValues},
		{"ForLoopEdges", semForLoopEdges},
		{"LoopSwapsCarriedValues", semLoopSwapsCarriedValues},
		{"IntegerDivisionByZero", semIntegerDivisionByZero},
		{"RejectsUnverifiedKernel", semRejectsUnverifiedKernel},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, l) })
	}
}

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

func semVecAddGridAndTail(t *testing.T, l Launcher) {
	const n, block = 1000, 128
	grid := tile.Grid{tile.CDiv(n, block)}
	if grid[0] != 8 {
		t.Fatalf("CDiv(1000, 128) = %d, want 8", grid[0])
	}
	owner := make([]int32, n+Pad)
	for i := range owner {
		owner[i] = -1
	}
	if err := l.Launch(whoWrote(t, block), grid, owner, n); err != nil {
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
	if err := RunCase(l, Cases()[0]); err != nil {
		t.Fatal(err)
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

func semUnmaskedStoreOutOfBounds(t *testing.T, l Launcher) {
	const n = 1000
	x, y, out := make([]float32, n), make([]float32, n), make([]float32, n)
	err := l.Launch(vecAddNoStoreMask(t, 128), tile.Grid{8}, x, y, out, n)
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

func semUnmaskedLoadOutOfBounds(t *testing.T, l Launcher) {
	b := tile.NewBuilder("read_before", nil)
	x, out := b.Ptr("x", tile.F32), b.Ptr("out", tile.F32)
	offs := b.Sub(b.Arange(0, 16), 3) // -3 .. 12
	b.Store(b.AddPtr(out, b.Arange(0, 16)), b.Load(b.AddPtr(x, offs), nil, nil), nil)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	err = l.Launch(k, tile.Grid{1}, make([]float32, 16), make([]float32, 16))
	if err == nil || !strings.Contains(err.Error(), "lane 0 reads offset -3 of x") {
		t.Fatalf("a load before the start was not reported well: %v", err)
	}
}

// semMaskedLanesUntouched: masked-off lanes may point anywhere; they are
// neither read nor written, and loads give other there.
func semMaskedLanesUntouched(t *testing.T, l Launcher) {
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
	xs := Uniform(RNG("masked"), 8, -1, 1)
	got := Output(24)
	if err := l.Launch(k, tile.Grid{1}, xs, got); err != nil {
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
	if err := Close("out", got, want, Tol{}); err != nil {
		t.Fatal(err)
	}
}

func semLaunchArgumentErrors(t *testing.T, l Launcher) {
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
		{"negative grid", tile.Grid{-1}, []any{f, f, f, 4}, "dimension x is -1"},
		{"negative y", tile.Grid{2, -3}, []any{f, f, f, 4}, "dimension y is -3"},
		{"empty grid", tile.Grid{0}, []any{f, f, f, 4}, "grid [0 0 0] launches no program"},
		{"empty x", tile.Grid{0, 4}, []any{f, f, f, 4}, "launches no program: x is 0"},
		{"too many programs", tile.Grid{1 << 16, 1 << 16}, []any{f, f, f, 4}, "more than 2147483647"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := l.Launch(k, c.grid, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, c.want)
			}
		})
	}
}

// semGrid3D: every program of a 3-D grid runs once and sees its coordinates
// and the grid's size.
func semGrid3D(t *testing.T, l Launcher) {
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
	if err := l.Launch(k, g, got); err != nil {
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

// semAtomicAddOldValues: 1000 programs add 1 to one counter; the old values
// they get back are 0..999, each once.
func semAtomicAddOldValues(t *testing.T, l Launcher) {
	b := tile.NewBuilder("counter", nil)
	ctr, olds := b.Ptr("ctr", tile.I32), b.Ptr("olds", tile.I32)
	old := b.AtomicAdd(b.AddPtr(ctr, 0), int32(1), nil)
	b.Store(b.AddPtr(olds, b.ProgramID(0)), old, nil)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctrBuf, got := []int32{0}, make([]int32, 1000)
	if err := l.Launch(k, tile.Grid{1000}, ctrBuf, got); err != nil {
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

func semForLoopEdges(t *testing.T, l Launcher) {
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
		err := l.Launch(k, tile.Grid{1}, got, c.lo, c.hi, c.step)
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

// semLoopSwapsCarriedValues: yielding the carried values in swapped order
// must read both before writing either.
func semLoopSwapsCarriedValues(t *testing.T, l Launcher) {
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
	if err := l.Launch(k, tile.Grid{1}, got); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 16; i++ {
		if got[i] != int32(100+i) || got[16+i] != int32(i) {
			t.Fatalf("after 3 swaps: lane %d = (%d, %d), want (%d, %d)", i, got[i], got[16+i], 100+i, i)
		}
	}
}

// semIntegerDivisionByZero: a zero divisor gives a defined value rather
// than a fault, because lanes that a mask discards often hold zeros
// (x/0 = -1, x%0 = x; unspecified on the GPU).
func semIntegerDivisionByZero(t *testing.T, l Launcher) {
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
	if err := l.Launch(k, tile.Grid{1}, xs, qs, rs); err != nil {
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

func semRejectsUnverifiedKernel(t *testing.T, l Launcher) {
	k, err := kernels.VecAdd(tile.Meta{"BLOCK": 16})
	if err != nil {
		t.Fatal(err)
	}
	k.Body.Values = k.Body.Values[1:] // drop program_id: its users now see an undefined value
	if err := l.Launch(k, tile.Grid{1}, []float32{}, []float32{}, []float32{}, 0); err == nil {
		t.Fatal("an invalid kernel ran")
	}
	if err := l.Launch(nil, tile.Grid{1}); err == nil {
		t.Fatal("a nil kernel ran")
	}
}
