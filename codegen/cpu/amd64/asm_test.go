package amd64

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func encode(t *testing.T, emit func(a *Asm)) []byte {
	t.Helper()
	var a Asm
	emit(&a)
	code, err := a.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// TestGolden checks each instruction's bytes against the table's, which
// TestAgainstGoAssembler checks against Go's assembler.
func TestGolden(t *testing.T) {
	for _, c := range encCases {
		t.Run(c.name, func(t *testing.T) {
			got := hex.EncodeToString(encode(t, c.emit))
			if got != c.hex {
				t.Errorf("%s: got %s, want %s", c.goas, got, c.hex)
			}
		})
	}
}

// TestAgainstGoAssembler assembles every case's Go spelling with `go tool
// asm -S` and compares its bytes with the table's. It needs a Go
// toolchain on the PATH (skipped without one, and with -short).
func TestAgainstGoAssembler(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the Go assembler: skipped with -short")
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		if gobin, err = exec.LookPath("go"); err != nil {
			t.Skip("no Go toolchain to cross-check with")
		}
	}
	got, err := goAssemble(t, gobin, encCases)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range encCases {
		if got[i] != c.hex {
			t.Errorf("%s (%s): Go's assembler gives %s, the table %s", c.name, c.goas, got[i], c.hex)
		}
	}
}

var asmLine = regexp.MustCompile(`^\s+0x([0-9a-f]{4}) \d+ \(x\.s:(\d+)\)\s+(\S.*)$`)
var hexLine = regexp.MustCompile(`^\s+0x[0-9a-f]{4}((?: [0-9a-f]{2})+)`)

// goAssemble assembles the cases into one function and returns each one's
// bytes as hex, from the listing of `go tool asm -S`.
func goAssemble(t *testing.T, gobin string, cases []encCase) ([]string, error) {
	dir := t.TempDir()
	var src strings.Builder
	src.WriteString("#include \"textflag.h\"\nTEXT ·f(SB), NOSPLIT|NOFRAME, $0-0\n")
	for _, c := range cases {
		src.WriteString("\t" + c.goas + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "x.s"), []byte(src.String()), 0o644); err != nil {
		return nil, err
	}
	goroot, err := exec.Command(gobin, "env", "GOROOT").Output()
	if err != nil {
		return nil, err
	}
	inc := filepath.Join(strings.TrimSpace(string(goroot)), "pkg", "include")
	cmd := exec.Command(gobin, "tool", "asm", "-S", "-p", "x", "-I", inc, "-o", filepath.Join(dir, "x.o"), "x.s")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOARCH=amd64", "GOOS=linux")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go tool asm: %v\n%s", err, out)
	}
	offs := make([]int, len(cases)+1)
	for i := range offs {
		offs[i] = -1
	}
	var code []byte
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if m := asmLine.FindStringSubmatch(line); m != nil {
			off, _ := strconv.ParseInt(m[1], 16, 64)
			ln, _ := strconv.Atoi(m[2])
			if i := ln - 3; i >= 0 && i < len(cases) && offs[i] < 0 {
				offs[i] = int(off)
			}
			continue
		}
		if m := hexLine.FindStringSubmatch(line); m != nil && !strings.Contains(line, "(x.s:") {
			b, err := hex.DecodeString(strings.ReplaceAll(m[1], " ", ""))
			if err != nil {
				return nil, err
			}
			code = append(code, b...)
		}
	}
	offs[len(cases)] = len(code)
	res := make([]string, len(cases))
	for i := range cases {
		if offs[i] < 0 || offs[i+1] < offs[i] {
			return nil, fmt.Errorf("case %d (%s): no offset in the listing:\n%s", i, cases[i].goas, out)
		}
		res[i] = hex.EncodeToString(code[offs[i]:offs[i+1]])
	}
	return res, nil
}
