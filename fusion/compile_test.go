package fusion

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/graphpass"
)

// compileThrough runs compile's stages up to and including the one named
// stop, without its verifier.
func compileThrough(t *testing.T, g *G.ExprGraph, stop string, opts ...Option) *compilation {
	t.Helper()
	cfg, err := configure(opts)
	if err != nil {
		t.Fatal(err)
	}
	c := &compilation{g: g, cfg: cfg}
	for _, st := range stages {
		if err := st.run(c); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if st.name == stop {
			return c
		}
	}
	t.Fatalf("no stage %q", stop)
	return nil
}

// smallGraph is s = Σ_1 tanh(0.5·exp(x)) over a 2×3 x: one row kernel
// whose interior (exp, the product, tanh) the user cannot read.
func smallGraph() (*G.ExprGraph, *G.Node, *G.Node) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("x"))
	y := G.Must(G.Tanh(G.Must(G.Mul(G.Must(G.Exp(x)), G.NewConstant(0.5)))))
	return g, x, G.Must(G.Sum(y, 1))
}

func stageNamed(name string) stage {
	for _, st := range stages {
		if st.name == name {
			return st
		}
	}
	panic(name)
}

// TestStageChecksRejectBrokenOutput: each stage's verifier accepts what the
// stage made and rejects it once broken the way a bug in that stage would
// break it.
func TestStageChecksRejectBrokenOutput(t *testing.T) {
	interior := func(c *compilation) *graphpass.Node { // a member that is not an output
		for _, grp := range c.groups {
			for _, m := range grp.Members {
				if m != grp.Root {
					return m
				}
			}
		}
		t.Fatal("no interior member")
		return nil
	}
	cases := []struct {
		name, stage string
		check       func(*compilation) error
		breakIt     func(c *compilation)
		want        string
	}{
		{"a user list that does not mirror the operands", "import", nil, func(c *compilation) {
			n := c.gr.Nodes[0]
			n.Users = append(n.Users, c.gr.Nodes[len(c.gr.Nodes)-1])
		}, "does not read it"},
		{"an operand after its user", "import", nil, func(c *compilation) {
			last := len(c.gr.Nodes) - 1
			c.gr.Nodes[0], c.gr.Nodes[last] = c.gr.Nodes[last], c.gr.Nodes[0]
		}, "does not come before it"},
		{"the readable set and list disagree", "readable", nil, func(c *compilation) {
			c.isRead[c.gr.Nodes[1].G] = true
		}, "readable nodes listed"},
		{"a readable node inside a kernel", "partition", nil, func(c *compilation) {
			c.isRead[interior(c).G] = true
		}, "which the user reads, is not one of its outputs"},
		{"a member that belongs to no group", "partition", nil, func(c *compilation) {
			interior(c).Group = nil
		}, "member"},
		{"a kernel whose outputs are not its group's", "emit", verifyKernels, func(c *compilation) {
			for _, k := range c.kernels {
				k.Outs++
			}
		}, "parameters for"},
		{"an order that misses a node", "rewrite", nil, func(c *compilation) {
			c.rw.order = c.rw.order[1:]
		}, "the new graph has"},
		{"a node before its operand", "rewrite", nil, func(c *compilation) {
			o := c.rw.order
			o[0], o[len(o)-1] = o[len(o)-1], o[0]
		}, "does not come before it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, _, _ := smallGraph()
			c := compileThrough(t, g, tc.stage)
			check := tc.check
			if check == nil {
				check = stageNamed(tc.stage).check
			}
			if err := check(c); err != nil {
				t.Fatalf("the %s stage's own output fails its check: %v", tc.stage, err)
			}
			tc.breakIt(c)
			if err := check(c); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("broken %s output: %v, want an error containing %q", tc.stage, err, tc.want)
			}
		})
	}
}

// TestStageDumps: with a dump directory every stage that has a dump writes
// it, numbered in pass order, and emit writes each kernel's IR.
func TestStageDumps(t *testing.T) {
	g, _, s := smallGraph()
	dir := t.TempDir()
	c, err := Compile(g, WithDumpDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // file → a line it must hold
		"01-import.txt":                     "x",
		"02-readable.txt":                   s.Name(),
		"03-partition.txt":                  "group 0",
		"07-rewrite.txt":                    c.Report.Groups[0].Kernel,
		c.Report.Groups[0].Kernel + ".tile": "tt.func @" + c.Report.Groups[0].Kernel,
	}
	for i, st := range stages {
		if st.dump == nil {
			continue
		}
		name := filepath.Join(dir, fmt.Sprintf("%02d-%s.txt", i+1, st.name))
		if _, err := os.Stat(name); err != nil {
			t.Errorf("stage %s: %v", st.name, err)
		}
	}
	for file, line := range want {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || !strings.Contains(string(b), line) {
			t.Errorf("%s: %v; want it to contain %q, got:\n%s", file, err, line, b)
		}
	}
}

// TestStageTimes: a report lists the stages of the compile that made it
// in order, each with a wall time of at least zero: the fingerprint, then
// Compile's every stage but load, a machine's every stage, and a machine
// whose front end came from the cache (the graph compiled before) the
// fingerprint, the rewrite and the load.
func TestStageTimes(t *testing.T) {
	ResetCompileCache()
	g, _, _ := smallGraph()
	c, err := Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	var ms []*Machine
	defer func() {
		for _, m := range ms {
			m.Close()
		}
	}()
	for _, opts := range [][]Option{{WithCompileCache(false)}, nil} {
		m := NewTapeMachine(g, opts...)
		ms = append(ms, m)
		if err := m.Err(); err != nil {
			t.Fatal(err)
		}
	}
	names := func(sts []stage) []string {
		out := []string{"fingerprint"}
		for _, st := range sts {
			out = append(out, st.name)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		rep  *Report
		want []string
	}{
		{"Compile", c.Report, names(stages[:len(stages)-1])},
		{"NewTapeMachine", ms[0].Report(), names(stages[:])},
		{"NewTapeMachine from the cache", ms[1].Report(), names(stages[rewriteStage:])},
	} {
		if len(tc.rep.Stages) != len(tc.want) {
			t.Fatalf("%s: %d stages timed, want %d: %v", tc.name, len(tc.rep.Stages), len(tc.want), tc.rep.Stages)
		}
		for i, st := range tc.rep.Stages {
			if st.Stage != tc.want[i] || !(st.Seconds >= 0) {
				t.Fatalf("%s: stage %d is %s in %v s, want %s in a time ≥ 0", tc.name, i, st.Stage, st.Seconds, tc.want[i])
			}
		}
	}
}

// TestTILEFUSEDUMP: the environment variable is the dump directory when no
// option names one.
func TestTILEFUSEDUMP(t *testing.T) {
	g, _, _ := smallGraph()
	dir := t.TempDir()
	t.Setenv("TILEFUSE_DUMP", dir)
	if _, err := Compile(g); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "03-partition.txt")); err != nil {
		t.Fatal(err)
	}
}
