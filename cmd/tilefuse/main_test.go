package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestRunPrintsIRAndTable(t *testing.T) {
	var sb strings.Builder
	dir := t.TempDir()
	if err := run([]string{"-run", "vec_add", "-dump", dir}, &sb); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	for _, want := range []string{`IR of vec_add/n=1000/BLOCK=128`, `%\d+ = make_range \{0, 128\} : tensor<128xi32>`,
		`vec_add/n=1000/BLOCK=128 +8×1×1 +8 +\d+ +\S+ +ok \(float64 reference\)`, `\n4 passed, 0 failed\n`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.tile"))
	if len(files) != 4 {
		t.Fatalf("dumped %d files, want 4", len(files))
	}
	b, err := os.ReadFile(files[0])
	if err != nil || !strings.HasPrefix(string(b), "tt.func @vec_add(") {
		t.Fatalf("dump %s: %q %v", files[0], b, err)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	var sb strings.Builder
	if err := run([]string{"-run", "no-such-kernel"}, &sb); err == nil || !strings.Contains(err.Error(), "no case matches") {
		t.Fatalf("got %v", err)
	}
	if err := run([]string{"extra"}, &sb); err == nil {
		t.Fatal("a stray argument was accepted")
	}
}
