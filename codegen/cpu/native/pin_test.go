package native_test

import (
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
	"github.com/tilefuse/tilefuse/tile"
)

// TestPinUniformsNative: the row kernels' zmm loops keep their uniforms
// (LayerNorm's mean and 1/σ, softmax's maximum) in registers where the
// CPU has AVX-512 (pin.go) and never without; the outputs are the bits of
// the code that reads them from memory, and within the zmm tests'
// tolerances of the reference, on poisoned outputs, with rows shorter
// than the block (masked loops) and rows of a tail.
func TestPinUniformsNative(t *testing.T) {
	requireJIT(t)
	for _, c := range []struct {
		name     string
		wl       string
		block, n int
		rows     int
		pins     bool // pins expected with AVX-512
		rel, abs float64
	}{
		{name: "layernorm 37 rows of 1024", wl: "layernorm", block: 1024, n: 1024, rows: 37, pins: true, rel: 1e-5, abs: 1e-5},
		{name: "layernorm 9 rows of 96 in blocks of 128", wl: "layernorm", block: 128, n: 96, rows: 9, pins: true, rel: 1e-5, abs: 1e-5},
		{name: "layernorm 5 rows of 48 in blocks of 64", wl: "layernorm", block: 64, n: 48, rows: 5, pins: true, rel: 1e-5, abs: 1e-5},
		{name: "softmax 21 rows of 1000 in blocks of 1024", wl: "softmax", block: 1024, n: 1000, rows: 21, pins: true, rel: 2e-6, abs: 1e-9},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, run, want := rowCase(t, c.name, c.wl, c.block, c.rows, c.n)
			for _, isa := range isas(t) {
				native.SetAVX512(isa == "avx512")
				var outs [2][]float32
				for i, pin := range []bool{false, true} {
					was := native.SetPinUniforms(pin)
					nk, err := native.Compile(k)
					native.SetPinUniforms(was)
					if err != nil {
						t.Fatal(err)
					}
					if got, wantPins := native.Pins(nk) > 0, pin && isa == "avx512" && c.pins; got != wantPins {
						t.Errorf("%s, pinning %v: %d uniforms in registers, want some: %v", isa, pin, native.Pins(nk), wantPins)
					}
					outs[i] = run(func(args ...any) error { return nk.Launch(tile.Grid{c.rows}, args...) })
					nk.Free()
				}
				for i, v := range outs[1] {
					if math.Float32bits(v) != math.Float32bits(outs[0][i]) {
						t.Fatalf("%s: y[%d] = %v pinned, %v from memory", isa, i, v, outs[0][i])
					}
					if d := math.Abs(float64(v) - float64(want[i])); !(d <= c.abs+c.rel*math.Abs(float64(want[i]))) {
						t.Fatalf("%s: y[%d] = %v, reference %v", isa, i, v, want[i])
					}
				}
			}
		})
	}
}
