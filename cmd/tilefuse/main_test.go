package main

import (
	"bytes"
	"encoding/json"
	pngpkg "image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/fusion"
)

func TestRunPrintsIRAndTable(t *testing.T) {
	var sb strings.Builder
	dir := t.TempDir()
	if err := run([]string{"kernels", "-run", "vec_add", "-dump", dir}, &sb); err != nil {
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
	if err := run([]string{"kernels", "-run", "no-such-kernel"}, &sb); err == nil || !strings.Contains(err.Error(), "no case matches") {
		t.Fatalf("got %v", err)
	}
	if err := run([]string{"kernels", "extra"}, &sb); err == nil {
		t.Fatal("a stray argument was accepted")
	}
}

// TestBenchWritesTableJSONAndPlot runs two small workloads once: the
// Markdown table has their rows, the JSON their measurements, the PNG is one.
func TestBenchWritesTableJSONAndPlot(t *testing.T) {
	dir := t.TempDir()
	jf, pf := filepath.Join(dir, "b.json"), filepath.Join(dir, "b.png")
	var sb, progress strings.Builder
	err := benchCmd([]string{"-workload", "chain, softmax", "-size", "small", "-runs", "1", "-warmup", "1ms", "-json", jf, "-plot", pf}, &sb, &progress)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`\| chain \| small \| 11 → 1 \|`, `\| softmax \| small \| 9 → 1 \|`, `roofline: host memory copy`} {
		if !regexp.MustCompile(want).MatchString(sb.String()) {
			t.Errorf("table lacks %s:\n%s", want, sb.String())
		}
	}
	if !strings.Contains(progress.String(), "6/6 done") {
		t.Errorf("progress bar did not finish: %q", progress.String())
	}
	var doc struct {
		Backend string
		Results []struct {
			Name  string
			Modes []struct {
				Mode   string
				Median float64 `json:"median_s"`
			}
		}
	}
	b, err := os.ReadFile(jf)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Backend != "cpu" || len(doc.Results) != 2 || len(doc.Results[1].Modes) != 3 || doc.Results[1].Modes[2].Mode != "fused" || doc.Results[1].Modes[2].Median <= 0 {
		t.Fatalf("JSON: %+v", doc)
	}
	png, err := os.ReadFile(pf)
	if err != nil || len(png) < 1000 || string(png[1:4]) != "PNG" {
		t.Fatalf("plot: %d bytes, %v", len(png), err)
	}
}

func TestBenchRejectsBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-backend", "tpu"}, "want cpu or cuda"},
		{[]string{"-workload", "nope"}, `no workload "nope"`},
		{[]string{"-size", "huge"}, "want small, large or all"},
		{[]string{"-runs", "0"}, "at least 1"},
		{[]string{"-profile", "-1"}, "want a count"},
		{[]string{"stray"}, "unexpected arguments"},
	} {
		var sb, progress strings.Builder
		if err := benchCmd(c.args, &sb, &progress); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.args, err, c.want)
		}
	}
	var sb strings.Builder
	if err := run([]string{"frobnicate"}, &sb); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Errorf("unknown command: got %v", err)
	}
}

// TestDeviceTable: with device times (the GPU), the rates come from them and
// a second table sets the unfused and fused device times side by side; the
// plot gets its third panel.
func TestDeviceTable(t *testing.T) {
	r := &bench.Result{Name: "chain", Size: "large", Backend: "cuda", Bytes: 2e9, CopyGBps: 4000, Modes: []*bench.Measurement{
		{Mode: bench.Gorgonia, Median: 0.1, Min: 0.1, Max: 0.1},
		{Mode: bench.Unfused, Median: 0.012, Min: 0.012, Max: 0.012, DeviceMedian: 0.004, Kernels: 11},
		{Mode: bench.Fused, Median: 0.01, Min: 0.01, Max: 0.01, DeviceMedian: 0.001, DeviceMin: 0.001, DeviceMax: 0.001, Kernels: 1, GBps: 2000},
	}}
	var buf bytes.Buffer
	writeTable(&buf, []*bench.Result{r}, fusion.CUDA, 4000, "device-to-device copy")
	out := buf.String()
	for _, want := range []string{
		"fused GB/s (device)",
		"| chain | large | 11 → 1 | 100 | 12 | 10 (10–10) | 10.00x | 8.33x | 2000.00 | 50% |",
		"On the device",
		"| chain | large | 4 | 1 (1–1) | 4.00x | 2000.00 | 50% | – | 90% of the run |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	png := filepath.Join(t.TempDir(), "dev.png")
	if err := writePlot(png, []*bench.Result{r}, fusion.CUDA); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(png)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := pngpkg.DecodeConfig(f)
	if err != nil || cfg.Height < 900 {
		t.Fatalf("plot %v x %v (%v): want three panels", cfg.Width, cfg.Height, err)
	}
}

// TestProfileList: the slowest kernels per mode, slowest first, with their
// share of the run's kernel time.
func TestProfileList(t *testing.T) {
	r := &bench.Result{Name: "mlp_step", Size: "large", Profile: map[string][]fusion.KernelTime{
		bench.Unfused: {{Kernel: "fused_0_matmul", Ops: []string{"A × B"}, Seconds: 1e-4}},
		bench.Fused: {
			{Kernel: "fused_0_matmul", Ops: []string{"A × B", "+ false"}, Seconds: 1e-4},
			{Kernel: "fused_1_reduction", Ops: []string{"Σ[0]"}, Seconds: 3e-4},
			{Kernel: "fused_2_elementwise", Ops: []string{"tanh"}, Seconds: 1e-5},
		},
	}}
	var buf bytes.Buffer
	writeProfile(&buf, []*bench.Result{r}, 2)
	out := buf.String()
	for _, want := range []string{
		"mlp_step/large fused: 3 kernels, 410.0 µs in all",
		"     300.0  73.2%  fused_1_reduction  Σ[0]\n     100.0  24.4%  fused_0_matmul  A × B; + false\n",
		"mlp_step/large unfused: 1 kernels, 100.0 µs in all",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("profile lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "fused_2_elementwise") {
		t.Errorf("more than 2 kernels listed:\n%s", out)
	}
}
