package fusion_test

import (
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
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
