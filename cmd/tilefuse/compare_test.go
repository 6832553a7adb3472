package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFiles writes each of contents to a file of its own in a temporary
// directory and returns their names, comma-separated.
func writeFiles(t *testing.T, prefix string, contents ...string) string {
	t.Helper()
	dir := t.TempDir()
	var names []string
	for i, c := range contents {
		name := filepath.Join(dir, prefix+string(rune('a'+i))+".json")
		if err := os.WriteFile(name, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return strings.Join(names, ",")
}

// TestCompare: turns of tilefuse bench -json and workloads.py --json
// files side by side — each turn's times, PyTorch's fastest mode in the
// turn, the medians' ratio, the turns tilefuse is at least as fast in;
// device times where bench has them; PyTorch's rows of other precisions
// left out; a workload one side lacks in a turn shown as –.
func TestCompare(t *testing.T) {
	tf := writeFiles(t, "tf",
		`{"backend": "cpu", "results": [
			{"name": "softmax", "size": "small", "modes": [{"mode": "unfused", "median_s": 0.05}, {"mode": "fused", "median_s": 0.010}]},
			{"name": "linear_gelu", "size": "large", "modes": [{"mode": "fused", "median_s": 0.0020, "device_median_s": 0.0015}]}]}`,
		`{"backend": "cpu", "results": [
			{"name": "softmax", "size": "small", "modes": [{"mode": "fused", "median_s": 0.012}]},
			{"name": "linear_gelu", "size": "large", "modes": [{"mode": "fused", "median_s": 0.0016}]}]}`,
		`{"backend": "cpu", "results": [
			{"name": "softmax", "size": "small", "modes": [{"mode": "fused", "median_s": 0.011}]}]}`)
	pt := writeFiles(t, "pt",
		`{"device": "CPU x86_64, 16 threads", "results": [
			{"name": "softmax", "size": "small", "precision": "fp32", "eager_s": 0.020, "library_s": 0.011},
			{"name": "linear_gelu", "size": "large", "precision": "fp32", "eager_s": 0.005, "library_s": 0.0021, "compiled_s": 0.0016},
			{"name": "linear_gelu", "size": "large", "precision": "tf32", "library_s": 0.0001}]}`,
		`{"device": "CPU x86_64, 16 threads", "results": [
			{"name": "softmax", "size": "small", "precision": "fp32", "eager_s": 0.009, "library_s": 0.013},
			{"name": "linear_gelu", "size": "large", "precision": "fp32", "library_s": 0.0018}]}`,
		`{"device": "CPU x86_64, 16 threads", "results": [
			{"name": "softmax", "size": "small", "precision": "fp32", "library_s": 0.011},
			{"name": "linear_gelu", "size": "large", "precision": "fp32", "library_s": 0.0019}]}`)
	var out bytes.Buffer
	if err := compareCmd([]string{"-tilefuse", tf, "-torch", pt}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		// medians 11 against 11: level; turns: 10 ≤ 11, 12 > 9, 11 ≤ 11
		"| softmax | small | 10, 12, 11 | 11 (library), 9 (eager), 11 (library) | 1.00 | 2 of 3 |",
		// the device time 1.5 where bench has one; the third turn has no
		// tilefuse row; medians 1.6 (upper of two) against 1.8
		"| linear_gelu | large | 1.5, 1.6, – | 1.6 (compile), 1.8 (library), 1.9 (library) | 0.89 | 2 of 2 |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("want the row\n%s\nin\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "0.1 (library)") {
		t.Errorf("a tf32 row of PyTorch's compared with fp32 ones:\n%s", out.String())
	}

	out.Reset()
	if err := compareCmd([]string{"-tilefuse", tf, "-torch", pt, "-mode", "unfused"}, &out); err != nil {
		t.Fatal(err)
	}
	if want := "| softmax | small | 50, –, – | 11 (library), 9 (eager), 11 (library) | 4.55 | 0 of 1 |"; !strings.Contains(out.String(), want) || strings.Contains(out.String(), "linear_gelu") {
		t.Errorf("-mode unfused: want only the row\n%s\nin\n%s", want, out.String())
	}
}

// TestCompareErrors: bad flags and files are errors that say what is
// wrong, usage errors (exit status 2) where the command line is.
func TestCompareErrors(t *testing.T) {
	tf := writeFiles(t, "tf", `{"backend": "cpu", "results": [{"name": "chain", "size": "large", "modes": [{"mode": "fused", "median_s": 0.001}]}]}`)
	pt := writeFiles(t, "pt", `{"results": [{"name": "softmax", "size": "large", "precision": "fp32", "library_s": 0.001}]}`)
	bad := writeFiles(t, "bad", `{"results": [`)
	gpu := writeFiles(t, "gpu", `{"device": "NVIDIA H200", "results": [{"name": "chain", "size": "large", "precision": "fp32", "library_s": 0.001}]}`)
	two := writeFiles(t, "two", `{"results": []}`, `{"results": []}`)
	for _, c := range []struct {
		name  string
		args  []string
		usage bool
		want  string
	}{
		{"no files", nil, true, "want -tilefuse and -torch files"},
		{"turns that do not pair", []string{"-tilefuse", tf, "-torch", two}, true, "1 tilefuse files and 2 torch files"},
		{"a mode bench does not have", []string{"-tilefuse", tf, "-torch", pt, "-mode", "gorgonia"}, true, `-mode "gorgonia"`},
		{"arguments after the flags", []string{"-tilefuse", tf, "-torch", pt, "extra"}, true, "unexpected arguments"},
		{"a file that is not JSON", []string{"-tilefuse", bad, "-torch", pt}, false, "bada.json"},
		{"a file that is not there", []string{"-tilefuse", tf + "x", "-torch", pt}, false, "no such file"},
		{"no workload on both sides", []string{"-tilefuse", tf, "-torch", pt}, false, "no workload and size in both sides' files"},
		{"the CPU against a GPU", []string{"-tilefuse", tf, "-torch", gpu}, false, `turn 1: tilefuse ran on the cpu backend`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			err := compareCmd(c.args, &out)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one that says %q", err, c.want)
			}
			var ue usageError
			if got := errors.As(err, &ue); got != c.usage {
				t.Errorf("a usage error: %v, want %v (%v)", got, c.usage, err)
			}
		})
	}
}
