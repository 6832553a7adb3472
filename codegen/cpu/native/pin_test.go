package native_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/codegen/cpu/native"
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
			pin := rowSwitch{"pinning", "uniforms in registers", native.SetPinUniforms, native.Pins}
			pin.check(t, c.name, c.wl, c.block, c.rows, c.n, c.rel, c.abs, func(isa string) bool { return isa == "avx512" && c.pins })
		})
	}
}
