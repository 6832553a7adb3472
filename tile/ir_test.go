package tile_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/kernels"
)

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

// TestAnonymous: a kernel's text without its name is the same for kernels
// that differ only in their names, and differs where anything else does (a
// constant, a meta-parameter, a cache hint); it is String with the name
// left out.
func TestAnonymous(t *testing.T) {
	build := func(name string, scale float64, block int, hint ...tile.CacheHint) *tile.Kernel {
		b := tile.NewBuilder(name, tile.Meta{"BLOCK": block})
		x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
		offs := b.Add(b.Mul(b.ProgramID(0), block), b.Arange(0, block))
		v := b.Load(b.AddPtr(x, offs), nil, nil, hint...)
		b.Store(b.AddPtr(y, offs), b.Mul(v, scale), nil)
		k, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	a, b := build("fused_3_elementwise", 0.5, 256), build("fused_17_elementwise", 0.5, 256)
	if a.String() == b.String() || a.Anonymous() != b.Anonymous() {
		t.Fatalf("kernels differing only in name:\n%s\n%s", a.Anonymous(), b.Anonymous())
	}
	if got, want := a.Anonymous(), strings.Replace(a.String(), "@fused_3_elementwise(", "@(", 1); got != want {
		t.Fatalf("Anonymous is not String without the name:\n%s\n%s", got, want)
	}
	for name, other := range map[string]*tile.Kernel{
		"a constant":       build("fused_3_elementwise", 0.25, 256),
		"a meta-parameter": build("fused_3_elementwise", 0.5, 512),
		"a cache hint":     build("fused_3_elementwise", 0.5, 256, tile.CacheStreaming),
	} {
		if other.Anonymous() == a.Anonymous() {
			t.Errorf("kernels differing in %s have the same anonymous text", name)
		}
	}
}

// TestExp2Flush: Exp2Flush is an exp2 with attribute 1, printed {ftz} so
// that a kernel with it and one without differ in their text (the kernel
// caches' key); it verifies, and exp2's other values print as before.
func TestExp2Flush(t *testing.T) {
	b := tile.NewBuilder("exp2s", tile.Meta{"BLOCK": 16})
	x, y := b.Ptr("x", tile.F32), b.Ptr("y", tile.F32)
	offs := b.Arange(0, 16)
	v := b.Load(b.AddPtr(x, offs), nil, nil)
	f, e := b.Exp2Flush(v), b.Exp2(v)
	b.Store(b.AddPtr(y, offs), b.Add(f, e), nil)
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if f.Op != tile.OpExp2 || f.Aux != 1 || e.Aux != 0 {
		t.Fatalf("Exp2Flush: %v aux %d, Exp2 aux %d", f.Op, f.Aux, e.Aux)
	}
	text := k.String()
	for _, want := range []string{fmt.Sprintf("%%%d = exp2 %%%d {ftz} : tensor<16xf32>", f.ID, v.ID), fmt.Sprintf("%%%d = exp2 %%%d : tensor<16xf32>", e.ID, v.ID)} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
}
