package fusion_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/codegen/cpu/jit"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/graphpass"
)

// TestReportSpeaksTheUsersLanguage: the report names nodes by the names the
// user gave them (else by op and operands), ops by the functions the user
// called, per kernel, with a reason for each op left to Gorgonia, the nodes
// that will have no value, and a summary line; no Gorgonia op strings or
// node ids.
func TestReportSpeaksTheUsersLanguage(t *testing.T) {
	build := func() *G.ExprGraph {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 3), G.WithName("x"))
		w := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 5), G.WithName("w"))
		y := G.Must(G.Tanh(G.Must(G.Mul(x, w))))
		z := G.Must(G.Sum(G.Must(G.HadamardProd(y, y)), 1))
		G.WithName("z")(z)
		G.Must(G.Gte(x, G.Must(G.Exp(x)), false)) // booleans: left to Gorgonia
		return g
	}
	for _, tc := range []struct {
		name    string
		opts    []fusion.Option
		matmul  string // the product's line: in a kernel, or its reason
		fused   bool
		exclude string
	}{
		{"products fused", []fusion.Option{fusion.WithMatMulFusion(true)}, "MatMul", true, ""},
		{"products off by the user", []fusion.Option{fusion.WithMatMulFusion(false)}, "WithMatMulFusion(false)", false, "by default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := fusion.Compile(build(), tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			rep := c.Report
			text := rep.String()
			for _, bad := range []string{"(%", "⊙", "Σ", "×", ">= false", "Aᵀ"} {
				if strings.Contains(text, bad) {
					t.Errorf("the report holds Gorgonia's %q:\n%s", bad, text)
				}
			}
			if tc.exclude != "" && strings.Contains(text, tc.exclude) {
				t.Errorf("the report says %q:\n%s", tc.exclude, text)
			}
			summary := strings.SplitN(text, "\n", 2)[0]
			for _, want := range []string{"kernels run", "ops left to Gorgonia", "extra outputs", "less memory traffic per run"} {
				if !strings.Contains(summary, want) {
					t.Errorf("the summary line %q lacks %q", summary, want)
				}
			}
			var row *fusion.GroupInfo
			for i, gi := range rep.Groups {
				if gi.Root == "z" {
					row = &rep.Groups[i]
				}
			}
			if row == nil || !slices.Contains(row.Ops, "Tanh") || !slices.Contains(row.Ops, "Mul") || !slices.Contains(row.Ops, "Sum along axis 1") {
				t.Fatalf("no kernel → z running Tanh, Mul and Sum along axis 1:\n%s", text)
			}
			if !slices.Contains(row.NoValue, "Tanh(MatMul(…))") && !slices.Contains(row.NoValue, "Tanh(…)") {
				t.Errorf("the kernel → z does not list tanh's node as having no value: %v\n%s", row.NoValue, text)
			}
			var whys []string
			for _, u := range rep.Unfused {
				whys = append(whys, u.Op+": "+u.Why)
				if u.Why == "" {
					t.Errorf("%s (%s) left to Gorgonia without a reason", u.Node, u.Op)
				}
			}
			if !slices.ContainsFunc(whys, func(s string) bool {
				return strings.HasPrefix(s, "Gte: ") && strings.Contains(s, "not in tilefuse's catalogue")
			}) {
				t.Errorf("the boolean comparison is not left to Gorgonia with its reason: %v", whys)
			}
			inKernel := false
			for _, gi := range rep.Groups {
				inKernel = inKernel || slices.Contains(gi.Ops, "MatMul")
			}
			if tc.fused != inKernel {
				t.Errorf("the product in a kernel: %v, want %v\n%s", inKernel, tc.fused, text)
			}
			if !strings.Contains(text, tc.matmul) {
				t.Errorf("the report lacks %q:\n%s", tc.matmul, text)
			}
			if !strings.Contains(text, "fusion.WithKeep(node)") {
				t.Errorf("the report does not say how to keep a value:\n%s", text)
			}
		})
	}
}

// colsumValues runs spec's graph fused on the CPU backend with opts and
// returns its first output's values.
func colsumValues(t *testing.T, spec bench.Spec, opts []fusion.Option) []float64 {
	t.Helper()
	for n, v := range spec.Inputs {
		if err := G.Let(n, v); err != nil {
			t.Fatal(err)
		}
	}
	vm := fusion.NewTapeMachine(spec.Graph, append([]fusion.Option{fusion.WithBackend(fusion.CPU), fusion.WithReadAll(true)}, opts...)...)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	var out []float64
	for _, v := range spec.Outputs[0].Value().Data().([]float32) {
		out = append(out, float64(v))
	}
	if len(out) == 0 {
		t.Fatal("no values")
	}
	return out
}

// TestReportSaysWhereKernelsRun: on the CPU backend the report names each
// kernel that runs on the executor rather than as machine code, and why:
// none of a column sum's where the CPU has machine code; every kernel
// with WithNativeCPU(false). A GPU's split column sum (its parts added
// with atomics) written for the H200 and run on the CPU is machine code
// too since 2026-12-07 (before, the code generator declined its atomics
// and the report said so), its sums the CPU target's within 1e-4. The
// summary counts them.
func TestReportSaysWhereKernelsRun(t *testing.T) {
	wl, ok := bench.Lookup("colsum")
	if !ok {
		t.Fatal("no colsum workload")
	}
	for _, c := range []struct {
		name   string
		opts   []fusion.Option
		native bool   // needs machine code on this CPU
		want   string // in each kernel's Executor ("" : none on the executor)
	}{
		{"machine code", nil, true, ""},
		{"machine code off", []fusion.Option{fusion.WithNativeCPU(false)}, false, "machine code is off"},
		{"a GPU's atomics", []fusion.Option{fusion.WithTarget(graphpass.H200)}, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.native && !jit.Supported() {
				t.Skip("no machine code in this build (not amd64 with AVX2 and FMA, or -tags purego)")
			}
			spec, err := wl.Build("small")
			if err != nil {
				t.Fatal(err)
			}
			vm := fusion.NewTapeMachine(spec.Graph, append([]fusion.Option{fusion.WithBackend(fusion.CPU)}, c.opts...)...)
			defer vm.Close()
			if err := vm.Err(); err != nil {
				t.Fatal(err)
			}
			rep := vm.Report()
			if c.want == "" {
				if n := rep.OnExecutor(); n != 0 {
					t.Fatalf("%d kernels on the executor:\n%v", n, rep)
				}
				if strings.Contains(rep.String(), "executor") {
					t.Fatalf("the report speaks of the executor:\n%v", rep)
				}
				if len(c.opts) > 0 {
					// the GPU's kernels as machine code compute the CPU's sums
					got := colsumValues(t, spec, c.opts)
					want := colsumValues(t, spec, nil)
					for i := range want {
						if d := math.Abs(got[i] - want[i]); !(d <= 1e-4*(1+math.Abs(want[i]))) {
							t.Fatalf("column %d: %v, the CPU target's %v", i, got[i], want[i])
						}
					}
				}
				return
			}
			if rep.OnExecutor() != rep.Kernels() || rep.Kernels() == 0 {
				t.Fatalf("%d of %d kernels on the executor, want all:\n%v", rep.OnExecutor(), rep.Kernels(), rep)
			}
			for _, g := range rep.Groups {
				if !strings.Contains(g.Executor, c.want) {
					t.Errorf("kernel %s: Executor %q, want it to say %q", g.Kernel, g.Executor, c.want)
				}
			}
			if want := fmt.Sprintf("%d kernels on the CPU's executor", rep.Kernels()); !strings.Contains(rep.Summary(), want) {
				t.Errorf("summary %q does not say %q", rep.Summary(), want)
			}
			if !strings.Contains(rep.String(), "on the executor, not machine code: ") {
				t.Errorf("the report does not list why:\n%v", rep)
			}
		})
	}
}
