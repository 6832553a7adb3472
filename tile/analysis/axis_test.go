package analysis_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/analysis"
)

// named builds a kernel with b and returns it with the values marked by name.
func named(t *testing.T, name string, build func(b *tile.Builder, mark func(string, *tile.Value) *tile.Value)) (*tile.Kernel, map[string]*tile.Value) {
	t.Helper()
	b := tile.NewBuilder(name, nil)
	vals := map[string]*tile.Value{}
	build(b, func(n string, v *tile.Value) *tile.Value { vals[n] = v; return v })
	k, err := b.Build()
	if err != nil {
		t.Fatalf("build %s: %v", name, err)
	}
	return k, vals
}

func TestAxes(t *testing.T) {
	const B = 128
	type want map[string]analysis.AxisInfo
	for _, c := range []struct {
		name  string
		spec  []int
		build func(b *tile.Builder, mark func(string, *tile.Value) *tile.Value)
		want  want
	}{{
		// the offsets of an elementwise block: pid·B + [0, B)
		name: "vector_offsets",
		spec: []int{16, 16},
		build: func(b *tile.Builder, mark func(string, *tile.Value) *tile.Value) {
			x, n := b.Ptr("x", tile.F32), b.Param("n", tile.I32)
			start := mark("start", b.Mul(b.ProgramID(0), B))
			offs := mark("offs", b.Add(start, mark("range", b.Arange(0, B))))
			mask := mark("mask", b.Lt(offs, n))
			p := mark("ptr", b.AddPtr(x, offs))
			b.Store(p, mark("loaded", b.Load(p, mask, nil)), mask)
		},
		want: want{
			"start":  {Row: 1, Contig: 1, Div: B, Const: 1, Uniform: true, Contiguous: true},
			"range":  {Row: B, Contig: B, Div: analysis.MaxDiv, Const: 1, Contiguous: true},
			"offs":   {Row: B, Contig: B, Div: B, Const: 1, Contiguous: true},
			"ptr":    {Row: B, Contig: B, Div: 16, Const: 1, Contiguous: true}, // min(16, B·4 bytes)
			"mask":   {Row: B, Contig: 1, Div: 1, Const: 16, Uniform: false},   // n divisible by 16: flips at a multiple of 16
			"loaded": {Row: B, Contig: 1, Div: 1, Const: 1},
		},
	}, {
		// the same offsets in 64 bits (tile.Builder.Index64): the widening
		// casts keep the runs and divisibility; a narrowing cast, which
		// may wrap, and a cast to float keep only constancy
		name: "vector_offsets_i64",
		spec: []int{16, 16},
		build: func(b *tile.Builder, mark func(string, *tile.Value) *tile.Value) {
			x := b.Ptr("x", tile.F32)
			b.Index64()
			offs := mark("offs", b.Add(b.Mul(b.ProgramID(0), B), mark("range", b.Arange(0, B))))
			mark("narrow", b.Cast(offs, tile.I32))
			mark("float", b.Cast(offs, tile.F32))
			p := mark("ptr", b.AddPtr(x, offs))
			b.Store(p, b.Load(p, nil, nil), nil)
		},
		want: want{
			"range":  {Row: B, Contig: B, Div: analysis.MaxDiv, Const: 1, Contiguous: true},
			"offs":   {Row: B, Contig: B, Div: B, Const: 1, Contiguous: true},
			"ptr":    {Row: B, Contig: B, Div: 16, Const: 1, Contiguous: true},
			"narrow": {Row: B, Contig: 1, Div: 1, Const: 1},
			"float":  {Row: B, Contig: 1, Div: 1, Const: 1},
		},
	}, {
		// n of unknown divisibility: the mask may flip anywhere
		name: "mask_unknown_n",
		spec: []int{16, 0},
		build: func(b *tile.Builder, mark func(string, *tile.Value) *tile.Value) {
			x, n := b.Ptr("x", tile.F32), b.Param("n", tile.I32)
			offs := b.Add(b.Mul(b.ProgramID(0), B), b.Arange(0, B))
			mask := mark("mask", b.Lt(offs, n))
			b.Store(b.AddPtr(x, offs), 1.0, mask)
		},
		want: want{"mask": {Row: B, Contig: 1, Div: 1, Const: 1}},
	}, {
		// a 2-D tile of a row-major matrix with row stride s: rows[:, None]·s + cols[None, :]
		name: "tile_stride_unknown",
		spec: []int{16, 0},
		build: func(b *tile.Builder, mark func(string, *tile.Value) *tile.Value) {
			x, s := b.Ptr("x", tile.F32), b.Param("s", tile.I32)
			rows := mark("rows", b.Add(b.Mul(b.ProgramID(0), 16), b.Arange(0, 16)))
			col := mark("col", b.ExpandDims(rows, 1))
			rowOff := mark("rowOff", b.Mul(col, s))
			offs := mark("offs", b.Add(rowOff, b.ExpandDims(b.Arange(0, 32), 0)))
			p := mark("ptr", b.AddPtr(x, offs))
			b.Store(p, 0.0, nil)
		},
		want: want{
			"rows": {Row: 16, Contig: 16, Div: 16, Const: 1, Contiguous: true},
			// each lane is a run of its own: pid·16 + i is divisible by 1 only
			"col":    {Row: 1, Contig: 1, Div: 1, Const: 1, Contiguous: true}, // row-major order: still 16 consecutive lanes
			"rowOff": {Row: 1, Contig: 1, Div: 1, Const: 1},
			"offs":   {Row: 32, Contig: 32, Div: 1, Const: 1},
			"ptr":    {Row: 32, Contig: 32, Div: 4, Const: 1}, // rows start at any element
		},
	}, {
		name: "tile_stride_div4",
		spec: []int{16, 4},
		build: func(b *tile.Builder, mark func(string, *tile.Value) *tile.Value) {
			x, s := b.Ptr("x", tile.F32), b.Param("s", tile.I32)
			rows := b.Add(b.Mul(b.ProgramID(0), 16), b.Arange(0, 16))
			offs := mark("offs", b.Add(b.Mul(b.ExpandDims(rows, 1), s), b.ExpandDims(b.Arange(0, 32), 0)))
			b.Store(mark("ptr", b.AddPtr(x, offs)), 0.0, nil)
		},
		want: want{
			"offs": {Row: 32, Contig: 32, Div: 4, Const: 1},
			"ptr":  {Row: 32, Contig: 32, Div: 16, Const: 1}, // every row 16-byte aligned
		},
	}, {
		// a run of 4 that starts inside a longer operand run: [16 17 18 19 4 5 6 7]
		name: "run_inside_run",
		build: func(b *tile.Builder, mark func(string, *tile.Value) *tile.Value) {
			x := b.Ptr("x", tile.I32)
			r := b.Arange(0, 8)
			low := mark("low", b.Lt(r, 4))
			hi := mark("hi", b.Mul(b.Cast(low, tile.I32), 16))
			v := mark("v", b.Add(r, hi))
			b.Store(b.AddPtr(x, r), v, nil)
		},
		want: want{
			"low": {Row: 8, Contig: 1, Div: 1, Const: 4},
			"hi":  {Row: 8, Contig: 1, Div: 16, Const: 4},
			"v":   {Row: 8, Contig: 4, Div: 4, Const: 1}, // 4 is not divisible by 16
		},
	}, {
		name: "reshape_and_broadcast",
		build: func(b *tile.Builder, mark func(string, *tile.Value) *tile.Value) {
			x := b.Ptr("x", tile.I32)
			r := b.Arange(0, 32)
			rs := mark("reshaped", b.Reshape(r, 4, 8))
			col := mark("col", b.ExpandDims(b.Arange(0, 4), 1))
			bc := mark("bcast", b.BroadcastTo(col, tile.Shp(4, 8)))
			sp := mark("splat", b.Splat(b.Param("s", tile.I32), tile.Shp(4, 8)))
			tr := mark("trans", b.Trans(rs))
			b.Store(b.AddPtr(x, rs), b.Add(b.Add(bc, sp), b.Reshape(tr, 4, 8)), nil)
		},
		want: want{
			"reshaped": {Row: 8, Contig: 8, Div: 8, Const: 1, Contiguous: true},
			"col":      {Row: 1, Contig: 1, Div: 1, Const: 1, Contiguous: true},
			"bcast":    {Row: 8, Contig: 1, Div: 1, Const: 8},
			"splat":    {Row: 8, Contig: 1, Div: 1, Const: 8, Uniform: true},
			"trans":    {Row: 4, Contig: 1, Div: 1, Const: 1},
		},
	}, {
		// an offset chosen by the program id among multiples of 4096 (the
		// heads' kernels pick each head's weights so): divisible by 4096;
		// with a lane-varying operand, by what divides both
		name: "select_offsets",
		spec: []int{16},
		build: func(b *tile.Builder, mark func(string, *tile.Value) *tile.Value) {
			x := b.Ptr("x", tile.F32)
			z := b.ProgramID(2)
			off := mark("off", b.Where(b.Eq(z, 1), 8192, b.Where(b.Eq(z, 2), 4096, 0)))
			r := b.Arange(0, 16)
			lanes := mark("lanes", b.Where(b.Lt(r, 8), b.Mul(r, 4), 12))
			b.Store(mark("ptr", b.AddPtr(b.AddPtr(x, off), lanes)), 0.0, nil)
		},
		want: want{
			"off":   {Row: 1, Contig: 1, Div: 4096, Const: 1, Uniform: true, Contiguous: true},
			"lanes": {Row: 16, Contig: 1, Div: 4, Const: 1},
			"ptr":   {Row: 16, Contig: 1, Div: 16, Const: 1},
		},
	}, {
		name: "loop_carried",
		build: func(b *tile.Builder, mark func(string, *tile.Value) *tile.Value) {
			x := b.Ptr("x", tile.F32)
			p0 := b.AddPtr(x, b.Arange(0, 16))
			res := b.For(0, 64, 16, []*tile.Value{p0}, func(iv *tile.Value, c []*tile.Value) []*tile.Value {
				mark("carried", c[0])
				mark("iv", iv)
				return []*tile.Value{b.AddPtr(c[0], 16)}
			})
			b.Store(mark("result", res[0]), 0.0, nil)
		},
		want: want{
			"carried": {Row: 16, Contig: 1, Div: 1, Const: 1},
			"iv":      {Row: 1, Contig: 1, Div: 16, Const: 1, Uniform: true, Contiguous: true}, // 0 + i·16
			"result":  {Row: 16, Contig: 1, Div: 1, Const: 1},
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			k, vals := named(t, c.name, c.build)
			info := analysis.Axes(k, c.spec)
			if len(info) != k.NumValues() {
				t.Fatalf("%d facts for %d values", len(info), k.NumValues())
			}
			for name, w := range c.want {
				v := vals[name]
				if got := info[v.ID]; got != w {
					t.Errorf("%s (%v):\n got %+v\nwant %+v\n%v", name, v, got, w, k)
				}
			}
		})
	}
}

func TestRowFacts(t *testing.T) {
	for _, c := range []struct {
		name          string
		a             analysis.AxisInfo
		contig, unifm bool
	}{
		{"contiguous_rows", analysis.AxisInfo{Row: 8, Contig: 8, Div: 1, Const: 1}, true, false},
		{"uniform_rows", analysis.AxisInfo{Row: 8, Contig: 1, Div: 1, Const: 8}, false, true},
		{"short_runs", analysis.AxisInfo{Row: 8, Contig: 4, Div: 1, Const: 2}, false, false},
		{"scalar", analysis.AxisInfo{Row: 1, Contig: 1, Div: 1, Const: 1}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.a.RowContiguous() != c.contig || c.a.RowUniform() != c.unifm {
				t.Errorf("%+v: RowContiguous %v RowUniform %v, want %v %v", c.a, c.a.RowContiguous(), c.a.RowUniform(), c.contig, c.unifm)
			}
		})
	}
}

func TestPow2Div(t *testing.T) {
	for _, c := range []struct {
		x    int64
		want int
	}{{0, analysis.MaxDiv}, {1, 1}, {-6, 2}, {96, 32}, {1 << 40, analysis.MaxDiv}, {-1 << 31, analysis.MaxDiv}} {
		if got := analysis.Pow2Div(c.x); got != c.want {
			t.Errorf("Pow2Div(%d) = %d, want %d", c.x, got, c.want)
		}
	}
}
