package codegen_test

import (
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
)

// TestRoundTF32InKernels: a TF32 dot's B operand is rounded as
// tile.RoundTF32 says (to nearest, ties to even) by the kernels for sm_90
// (cvt.rn.tf32.f32) and sm_80 (integer ops: it has cvt.rna only) in the
// simulator and by the interpreter, bit for bit: C = I·B gives B's
// elements rounded, ties in both directions and of both signs among them.
func TestRoundTF32InKernels(t *testing.T) {
	p := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	bvals := []float32{1 + p(-11), 1 + 3*p(-11), -(1 + p(-11)), -(1 + 3*p(-11)), 1 + 3*p(-12), 1 + p(-12),
		math.Float32frombits(0x7f7fefff), 3.1415927, -2.7182817, 1e-30, 0, 65504.5}
	b := tile.NewBuilder("round_tf32", tile.Meta{})
	pa, pb, pc := b.Ptr("a", tile.F32), b.Ptr("b", tile.F32), b.Ptr("c", tile.F32)
	r, c := b.ExpandDims(b.Arange(0, 16), 1), b.ExpandDims(b.Arange(0, 16), 0)
	off := b.Add(b.Mul(r, 16), c)
	av := b.Load(b.AddPtr(pa, off), nil, nil)
	bv := b.Load(b.AddPtr(pb, off), nil, nil)
	b.Store(b.AddPtr(pc, off), b.Dot(av, bv, b.Zeros(tile.F32, 16, 16), tile.PrecTF32), nil)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	a, bm := make([]float32, 16*16), make([]float32, 16*16)
	for i := range 16 {
		a[i*16+i] = 1
	}
	for i := range bm {
		bm[i] = float32(math.Ldexp(float64(bvals[i%len(bvals)]), -i/len(bvals))) // ties stay ties
	}
	run := func(name string, launch func(c []float32) error) {
		c := make([]float32, 16*16)
		for i := range c {
			c[i] = float32(math.NaN())
		}
		if err := launch(c); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, got := range c {
			want := tile.RoundTF32(bm[i])
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Errorf("%s: C[%d][%d] = %v (%#x), want RoundTF32(%v) = %v (%#x)", name, i/16, i%16, got, math.Float32bits(got), bm[i], want, math.Float32bits(want))
			}
		}
	}
	run("interpreter", func(c []float32) error { return interp.Interpret(k, tile.Grid{1}, a, bm, c) })
	for _, arch := range []int{80, 90} {
		sim := &ptxsim.Launcher{Arch: arch, Racecheck: true, Initcheck: true}
		run(sim.Name(), func(c []float32) error { return sim.Launch(k, tile.Grid{1}, a, bm, c) })
	}
}
