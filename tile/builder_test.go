package tile_test

import (
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
)

// TestBuilderErrors: each user mistake is an error naming the kernel, the
// caller's line, the op and what is wrong; the builder never panics.
func TestBuilderErrors(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *tile.Builder)
		want  string
	}{
		{"shapes do not broadcast", func(b *tile.Builder) {
			b.Add(b.Zeros(tile.F32, 128), b.Zeros(tile.F32, 64))
		}, "add: operands tensor<128xf32> and tensor<64xf32>: shapes [128] and [64] do not broadcast"},
		{"[M,1] with [N]", func(b *tile.Builder) {
			b.Mul(b.Zeros(tile.F32, 16, 2), b.Zeros(tile.F32, 4))
		}, "shapes [16,2] and [4] do not broadcast"},
		{"load from a non-pointer", func(b *tile.Builder) {
			b.Load(b.Zeros(tile.F32, 16), nil, nil)
		}, "load from tensor<16xf32>, not a pointer"},
		{"mask not i1", func(b *tile.Builder) {
			p := b.Ptr("p", tile.F32)
			b.Load(b.AddPtr(p, b.Arange(0, 16)), b.Arange(0, 16), nil)
		}, "mask must be i1, is tensor<16xi32>"},
		{"mask shape", func(b *tile.Builder) {
			p := b.Ptr("p", tile.F32)
			b.Load(b.AddPtr(p, b.Arange(0, 16)), b.Lt(b.Arange(0, 32), 3), nil)
		}, "mask tensor<32xi1> does not match pointer shape [16]"},
		{"other without mask", func(b *tile.Builder) {
			p := b.Ptr("p", tile.F32)
			b.Load(p, nil, 1.0)
		}, "other without a mask"},
		{"store of another dtype", func(b *tile.Builder) {
			p := b.Ptr("p", tile.F32)
			b.Store(b.AddPtr(p, b.Arange(0, 16)), b.Arange(0, 16), nil)
		}, "value tensor<16xi32> does not match pointer tensor<16x!tt.ptr<f32>>: cast it first"},
		{"pointer arithmetic with a float", func(b *tile.Builder) {
			b.AddPtr(b.Ptr("p", tile.F32), 1.5)
		}, "offset f32 must be i32 or i64"},
		{"pointer in arithmetic", func(b *tile.Builder) {
			b.Mul(b.Ptr("p", tile.F32), 2)
		}, "is a pointer: use AddPtr"},
		{"exp of an int", func(b *tile.Builder) {
			b.Exp(b.Arange(0, 16))
		}, "exp is not defined on tensor<16xi32>"},
		{"dot inner dimensions", func(b *tile.Builder) {
			b.Dot(b.Zeros(tile.F32, 16, 32), b.Zeros(tile.F32, 16, 16), nil, tile.PrecIEEE)
		}, "inner dimensions 32 and 16 differ"},
		{"dot too small", func(b *tile.Builder) {
			b.Dot(b.Zeros(tile.F32, 8, 16), b.Zeros(tile.F32, 16, 16), nil, tile.PrecIEEE)
		}, "M, N and K must be at least 16"},
		{"loop-carried type changes", func(b *tile.Builder) {
			b.For(0, 4, 1, []*tile.Value{b.Zeros(tile.F32, 16)}, func(_ *tile.Value, c []*tile.Value) []*tile.Value {
				return []*tile.Value{b.Sum(c[0], 0)}
			})
		}, "loop-carried value 0 changes type from tensor<16xf32> to f32"},
		{"loop returns too few", func(b *tile.Builder) {
			b.For(0, 4, 1, []*tile.Value{b.F32(1)}, func(_ *tile.Value, c []*tile.Value) []*tile.Value { return nil })
		}, "loop body returns 0 values, the loop carries 1"},
		{"float loop bounds", func(b *tile.Builder) {
			b.For(0, 4.5, 1, nil, func(_ *tile.Value, c []*tile.Value) []*tile.Value { return nil })
		}, "bounds and step must be scalar integers"},
		{"missing meta", func(b *tile.Builder) { b.BlockSize("BLOCK") }, "meta-parameter BLOCK is not set"},
		{"nil operand", func(b *tile.Builder) { b.Add(nil, 1) }, "add: operand is nil"},
		{"nil value operand", func(b *tile.Builder) { var v *tile.Value; b.Add(v, 1) }, "add: operand 0 is nil"},
		{"Go string operand", func(b *tile.Builder) { b.Add("x", 1) }, "operand of Go type string"},
		{"select on a float condition", func(b *tile.Builder) { b.Where(b.F32(1), 1, 2) }, "condition must be i1"},
		{"reshape changes element count", func(b *tile.Builder) { b.Reshape(b.Arange(0, 16), 4, 8) }, "cannot reshape tensor<16xi32> to [4,8]"},
		{"repeated parameter", func(b *tile.Builder) { b.Ptr("x", tile.F32); b.Param("x", tile.I32) }, `parameter name "x" is empty or already taken`},
		{"pointer to i64", func(b *tile.Builder) { b.Ptr("x", tile.I64) }, "pointers are to f32, f64 or i32"},
		{"reduce axis", func(b *tile.Builder) { b.Sum(b.Zeros(tile.F32, 4, 4), 2) }, "axis 2 of tensor<4x4xf32>"},
		{"expand_dims axis", func(b *tile.Builder) { b.ExpandDims(b.Zeros(tile.F32, 4), 2) }, "axis 2 of tensor<4xf32>"},
		{"rank 4", func(b *tile.Builder) { b.ExpandDims(b.Zeros(tile.F32, 2, 2, 2), 0) }, "rank below 3"},
		{"program_id axis", func(b *tile.Builder) { b.ProgramID(3) }, "axis 3 is outside 0..2"},
		{"i32 constant out of range", func(b *tile.Builder) { b.I32(1 << 40) }, "is not an i32"},
		{"two cache hints", func(b *tile.Builder) {
			p := b.Ptr("p", tile.F32)
			b.Load(p, nil, nil, tile.CacheStreaming, tile.CacheDefault)
		}, "give at most one known hint"},
		{"keep on a store", func(b *tile.Builder) {
			p := b.Ptr("p", tile.F32)
			b.Store(p, b.Load(p, nil, nil, tile.CacheKeep), nil, tile.CacheKeep)
		}, "cache hint keep: for loads only"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("oops", tile.Meta{})
			c.build(b)
			// later calls after an error must not panic
			b.Store(b.Ptr("late", tile.F32), b.Exp(b.Add(b.Zeros(tile.F32, 16), 1.0)), nil)
			_, err := b.Build()
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) {
				t.Fatalf("error %q does not mention %q", msg, c.want)
			}
			if !strings.HasPrefix(msg, "tile: @oops: builder_test.go:") {
				t.Fatalf("error %q does not start with the kernel and the caller's file:line", msg)
			}
		})
	}
}

// TestWeakLiteralPromotion: Go numbers take the other operand's dtype;
// a float literal beside ints makes f32; typed Go numbers keep their dtype.
func TestWeakLiteralPromotion(t *testing.T) {
	b := tile.NewBuilder("promo", nil)
	i := b.Arange(0, 16)
	cases := []struct {
		v    *tile.Value
		want tile.Type
	}{
		{b.Add(i, 1), tile.BlockOf(tile.I32, 16)},
		{b.Mul(i, 0.5), tile.BlockOf(tile.F32, 16)},
		{b.Add(b.Cast(i, tile.F64), 1), tile.BlockOf(tile.F64, 16)},
		{b.Add(i, int64(1)), tile.BlockOf(tile.I64, 16)},
		{b.Add(i, float32(1)), tile.BlockOf(tile.F32, 16)},
		{b.Add(b.Cast(i, tile.F32), b.F64(1)), tile.BlockOf(tile.F64, 16)},
		{b.Lt(i, 3.5), tile.BlockOf(tile.I1, 16)},
		{b.Add(1, 2), tile.ScalarOf(tile.I32)},
		{b.Add(b.ExpandDims(i, 1), b.ExpandDims(i, 0)), tile.BlockOf(tile.I32, 16, 16)},
	}
	if _, err := b.Build(); err != nil {
		t.Fatal(err)
	}
	for n, c := range cases {
		if c.v.Type != c.want {
			t.Errorf("case %d: %v, want %v", n, c.v.Type, c.want)
		}
	}
}

// TestIndex64: after Index64 the index sources give i64 (program ids,
// grid sizes and aranges, their i32 values cast), and offsets built from
// them with Go integers are i64; a builder without it keeps i32.
func TestIndex64(t *testing.T) {
	for _, wide := range []bool{false, true} {
		b := tile.NewBuilder("idx", nil)
		if wide {
			b.Index64()
		}
		want := tile.I32
		if wide {
			want = tile.I64
		}
		offs := b.Add(b.Mul(b.ProgramID(0), 16), b.Arange(0, 16))
		cases := []struct {
			name string
			v    *tile.Value
			want tile.Type
		}{
			{"program id", b.ProgramID(1), tile.ScalarOf(want)},
			{"programs", b.NumPrograms(0), tile.ScalarOf(want)},
			{"arange", b.Arange(0, 32), tile.BlockOf(want, 32)},
			{"offsets", offs, tile.BlockOf(want, 16)},
		}
		p := b.Ptr("p", tile.F32)
		b.Store(b.AddPtr(p, offs), b.Zeros(tile.F32, 16), nil)
		// rows 3·10⁹ elements apart: i64 offsets, or an error at the call
		// in i32 (no wrap)
		rows := b.Add(b.Mul(b.ExpandDims(b.Arange(0, 4), 1), 3_000_000_000), b.ExpandDims(b.Arange(0, 8), 0))
		_, err := b.Build()
		switch {
		case wide && (err != nil || rows.Type != tile.BlockOf(tile.I64, 4, 8)):
			t.Errorf("index64: rows 3·10⁹ apart: %v (%v)", rows.Type, err)
		case !wide && (err == nil || !strings.Contains(err.Error(), "is not an i32")):
			t.Errorf("i32: rows 3·10⁹ apart built (%v), want an error naming the literal", err)
		}
		for _, c := range cases {
			if c.v.Type != c.want {
				t.Errorf("index64 %v, %s: %v, want %v", wide, c.name, c.v.Type, c.want)
			}
		}
	}
}

// TestForeignValues: a value another Builder made is reported at the call
// that uses it, naming that builder, wherever it is used (issue 14), not
// later by the verifier as "used before its definition".
func TestForeignValues(t *testing.T) {
	other := tile.NewBuilder("other", nil)
	fx := other.Zeros(tile.F32, 16)                                            // a block
	fp := other.Ptr("q", tile.F32)                                             // a pointer
	fm := other.Lt(other.Arange(0, 16), 3)                                     // a mask
	fi := other.Arange(0, 16)                                                  // offsets
	fd := other.Zeros(tile.F32, 16, 16)                                        // a dot operand
	fs := other.F32(1)                                                         // a scalar
	ref := func(v *tile.Value) string { return strings.Fields(v.String())[0] } // %N
	for _, c := range []struct {
		name    string
		foreign *tile.Value
		use     func(b *tile.Builder)
		op      string
	}{
		{"binary operand", fx, func(b *tile.Builder) { b.Add(b.Zeros(tile.F32, 16), fx) }, "add"},
		{"unary operand", fx, func(b *tile.Builder) { b.Exp(fx) }, "exp"},
		{"load pointer", fp, func(b *tile.Builder) { b.Load(fp, nil, nil) }, "load"},
		{"load mask", fm, func(b *tile.Builder) { b.Load(b.AddPtr(b.Ptr("p", tile.F32), b.Arange(0, 16)), fm, nil) }, "load"},
		{"store value", fx, func(b *tile.Builder) { b.Store(b.AddPtr(b.Ptr("p", tile.F32), b.Arange(0, 16)), fx, nil) }, "store"},
		{"addptr offset", fi, func(b *tile.Builder) { b.AddPtr(b.Ptr("p", tile.F32), fi) }, "addptr"},
		{"reduction", fx, func(b *tile.Builder) { b.Sum(fx, 0) }, "reduce sum"},
		{"dot operand", fd, func(b *tile.Builder) { b.Dot(b.Zeros(tile.F32, 16, 16), fd, nil, tile.PrecIEEE) }, "dot"},
		{"select condition", fm, func(b *tile.Builder) { b.Where(fm, 1.0, 2.0) }, "select"},
		{"cast", fi, func(b *tile.Builder) { b.Cast(fi, tile.F32) }, "cast"},
		{"splat", fs, func(b *tile.Builder) { b.Splat(fs, tile.Shp(16)) }, "splat"},
		{"loop init", fx, func(b *tile.Builder) {
			b.For(0, 4, 1, []*tile.Value{fx}, func(_ *tile.Value, c []*tile.Value) []*tile.Value { return c })
		}, "for"},
		{"loop yield", fx, func(b *tile.Builder) {
			b.For(0, 4, 1, []*tile.Value{b.Zeros(tile.F32, 16)}, func(_ *tile.Value, c []*tile.Value) []*tile.Value { return []*tile.Value{fx} })
		}, "yield"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := tile.NewBuilder("mine", nil)
			c.use(b)
			_, err := b.Build()
			if err == nil {
				t.Fatal("a value of builder @other was accepted")
			}
			msg := err.Error()
			want := "value " + ref(c.foreign) + " is from builder @other"
			for _, w := range []string{want, "tile: @mine: builder_test.go:", c.op + ": "} {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
			if strings.Contains(msg, "before its definition") {
				t.Errorf("error %q blames the definition order", msg)
			}
		})
	}
	// a kernel put together by hand from two kernels' values: the verifier says so
	b := tile.NewBuilder("mine", nil)
	p := b.Ptr("p", tile.F32)
	b.Store(b.AddPtr(p, b.Arange(0, 16)), b.Zeros(tile.F32, 16), nil)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	st := k.Body.Values[len(k.Body.Values)-1]
	st.Args[1] = fx
	if err := k.Verify(); err == nil || !strings.Contains(err.Error(), "is from kernel @other") {
		t.Errorf("verify of a kernel holding another kernel's value: %v", err)
	}
}
