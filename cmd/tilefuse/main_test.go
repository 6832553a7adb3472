package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	pngpkg "image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/diskcache"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/tile"
)

// TestMain runs main itself when TILEFUSE_TEST_MAIN holds its arguments
// (separated by \x1f), so that tests can check exit codes and streams.
func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv("TILEFUSE_TEST_MAIN"); ok {
		os.Args = []string{"tilefuse"}
		if args != "" {
			os.Args = append(os.Args, strings.Split(args, "\x1f")...)
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runMain runs the command as a process: its stdout, stderr and exit code.
func runMain(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "TILEFUSE_TEST_MAIN="+strings.Join(args, "\x1f"))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), errOut.String(), exit.ExitCode()
	}
	require.NoError(t, err)
	return out.String(), errOut.String(), 0
}

// flagNames are the flags a command's help must list.
func flagNames(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, "-"+f.Name) })
	return names
}

// TestHelp: -h, -help, --help and help list every command and every flag
// of every command and exit 0; a command's -h and help COMMAND list its
// own flags.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"-help"}, {"--help"}, {"help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			stdout, stderr, code := runMain(t, args...)
			require.Equal(t, 0, code, "stderr: %s", stderr)
			assert.Empty(t, stderr)
			for _, c := range commands {
				assert.Contains(t, stdout, "tilefuse "+c.name+" ")
				if c.flags != nil {
					assert.Contains(t, stdout, "Flags of "+c.name+":")
					for _, f := range flagNames(c.flags()) {
						assert.Regexp(t, `(?m)^  `+f+`\b`, stdout, "flag %s of %s", f, c.name)
					}
				}
			}
		})
	}
	for _, c := range commands {
		if c.flags == nil {
			continue
		}
		for _, args := range [][]string{{c.name, "-h"}, {"help", c.name}} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				stdout, stderr, code := runMain(t, args...)
				require.Equal(t, 0, code, "stderr: %s", stderr)
				assert.Contains(t, stdout, "Usage: tilefuse "+c.name)
				for _, f := range flagNames(c.flags()) {
					assert.Regexp(t, `(?m)^  `+f+`\b`, stdout)
				}
			})
		}
	}
}

// TestUsageErrors: a bad flag or command exits non-zero and says where to
// look; nothing goes to stdout.
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown flag", []string{"bench", "-frobnicate"}, 2, "run 'tilefuse help bench'"},
		{"unknown flag, no command", []string{"-frobnicate"}, 2, "flag provided but not defined: -frobnicate"},
		{"stray argument", []string{"kernels", "extra"}, 2, `unexpected arguments ["extra"]`},
		{"unknown kernels backend", []string{"kernels", "-backend", "gpu"}, 2, "want cpu or interp"},
		{"unknown command", []string{"frobnicate"}, 1, `unknown command "frobnicate"`},
		{"help on an unknown command", []string{"help", "frobnicate"}, 1, "no such command"},
		{"cache: an unknown word", []string{"cache", "purge"}, 2, `unexpected arguments ["purge"]`},
		{"cache: an unknown flag", []string{"cache", "clear", "-all"}, 2, "run 'tilefuse help cache'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := runMain(t, c.args...)
			assert.Equal(t, c.code, code)
			assert.Contains(t, stderr, c.want)
			assert.Empty(t, stdout)
		})
	}
}

// TestCache: tilefuse cache prints the cache's directory on its first line
// (the default one: os.UserCacheDir()/tilefuse, or -dir) and what it
// holds; cache clear removes it and says what it held.
func TestCache(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", home)
	stdout, stderr, code := runMain(t, "cache")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, filepath.Join(home, "tilefuse")+"\n0 entries, 0 B\n", stdout)
	dir := filepath.Join(t.TempDir(), "c")
	c := diskcache.Open(dir)
	require.NoError(t, c.Put("cubin", diskcache.Key("a"), make([]byte, 3000)))
	require.NoError(t, c.Put("cubin", diskcache.Key("b"), nil))
	require.NoError(t, c.Put("tune", diskcache.Key("c"), []byte("{}")))
	stdout, _, code = runMain(t, "cache", "-dir", dir)
	require.Equal(t, 0, code)
	assert.Regexp(t, `^`+regexp.QuoteMeta(dir)+`\n3 entries, 3\.\d KiB \(1 autotuning results, 2 compiled GPU modules\)\n$`, stdout)
	stdout, _, code = runMain(t, "cache", "clear", "-dir", dir)
	require.Equal(t, 0, code)
	assert.Equal(t, "cleared "+dir+": ", stdout[:len("cleared "+dir+": ")])
	assert.Contains(t, stdout, "3 entries")
	_, err := os.Stat(dir)
	assert.True(t, os.IsNotExist(err), "the directory is gone")
	stdout, _, code = runMain(t, "cache", "-dir", dir)
	require.Equal(t, 0, code)
	assert.Equal(t, dir+"\n0 entries, 0 B\n", stdout)
}

// TestTune: tilefuse tune measures a workload's kernels on the CPU, prints
// a row per kernel text and keeps the choices: a second run takes every
// one from the cache; progress goes to stderr, one line a kernel where it
// is not a terminal.
func TestTune(t *testing.T) {
	dir := t.TempDir()
	var out, progress strings.Builder
	require.NoError(t, tuneCmd([]string{"-workload", "layernorm", "-size", "small", "-cache-dir", dir}, &out, &progress))
	assert.Contains(t, out.String(), "| fused_0_row | 1 | {BLOCK = 1024} |")
	assert.Contains(t, out.String(), "| measured |")
	assert.Contains(t, out.String(), "1 kernel texts tuned")
	assert.Regexp(t, `fused_0_row: every candidate, fastest first .*\n(  [0-9.e-]+  \{BLOCK = \d+.*\}(  \(dropped after its first measurement: [^)]*\))?\n){2,}`, out.String())
	assert.Contains(t, progress.String(), "[1/1] tuned fused_0_row\n")
	u, err := diskcache.Open(dir).Usage()
	require.NoError(t, err)
	assert.Equal(t, 1, u.Kinds["tune"])
	out.Reset()
	require.NoError(t, tuneCmd([]string{"-workload", "layernorm", "-size", "small", "-cache-dir", dir, "-q"}, &out, &progress))
	assert.Contains(t, out.String(), "| cache |")
	assert.Contains(t, out.String(), "1 taken from the cache")
	assert.Contains(t, out.String(), "fused_0_row: every candidate, fastest first") // kept in the cache
	// -size peer for a workload of several peer shapes: each in turn
	out.Reset()
	require.NoError(t, tuneCmd([]string{"-workload", "colsum", "-size", "peer", "-cache-dir", dir, "-budget", "2s", "-q"}, &out, &progress))
	for _, size := range bench.PeerColumns {
		assert.Contains(t, out.String(), fmt.Sprintf("colsum/peer:%dx%d on cpu, 1 kernels, compiled and tuned", size[0], size[1]))
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-backend", "tpu"}, "want cpu or cuda"},
		{[]string{"-workload", "nope"}, `no workload "nope"`},
		{[]string{"-size", "huge"}, "want small or large"},
		{[]string{"-precision", "fp8"}, "want ieee, tf32, tf32x3 or bf16"},
		{[]string{"-budget", "-1s"}, "a budget is not negative"},
	} {
		assert.ErrorContains(t, tuneCmd(c.args, &out, &progress), c.want)
	}
}

// TestTuneSizes: -size peer tunes each named peer shape of a workload
// (the chain's one included: it was passed on as "peer", which its
// builder refuses), a workload of one unnamed peer size at "peer", and
// any other size as given.
func TestTuneSizes(t *testing.T) {
	for _, c := range []struct {
		workload, size string
		want           []string
	}{
		{"chain", "peer", []string{"peer:64M"}},
		{"softmax", "peer", []string{"peer:8192x4096", "peer:32768x1024", "peer:4096x32768", "peer:1823x781", "peer:1151x8192"}},
		{"colsum", "peer", []string{"peer:4096x3072", "peer:4096x768"}},
		{"attention", "peer", []string{"peer"}},
		{"softmax", "large", []string{"large"}},
		{"mlp_step", "peer", []string{"peer"}}, // no peer size: its builder says so
	} {
		t.Run(c.workload+"/"+c.size, func(t *testing.T) {
			w, ok := bench.Lookup(c.workload)
			require.True(t, ok)
			assert.Equal(t, c.want, tuneSizes(w, c.size))
		})
	}
}

// TestTuneBudget: with a budget spent before any measurement (1 ns),
// tilefuse tune keeps the defaults, says in the table and under it that the
// budget ran out, and stores nothing: a run without that bound measures.
func TestTuneBudget(t *testing.T) {
	dir := t.TempDir()
	var out, progress strings.Builder
	require.NoError(t, tuneCmd([]string{"-workload", "layernorm", "-size", "small", "-cache-dir", dir, "-budget", "1ns", "-q"}, &out, &progress))
	assert.Contains(t, out.String(), "| fused_0_row | 1 | {BLOCK = 1024} | {BLOCK = 1024} |")
	assert.Contains(t, out.String(), "| not tuned: the budget of 1ns ran out |")
	assert.Contains(t, out.String(), "1 kernel texts not tuned or partly tuned: the budget ran out")
	u, err := diskcache.Open(dir).Usage()
	require.NoError(t, err)
	assert.Zero(t, u.Kinds["tune"])
	out.Reset()
	require.NoError(t, tuneCmd([]string{"-workload", "layernorm", "-size", "small", "-cache-dir", dir, "-budget", "0", "-q"}, &out, &progress))
	assert.Contains(t, out.String(), "| measured |")
	assert.NotContains(t, out.String(), "budget")
}

func TestRunPrintsIRAndTable(t *testing.T) {
	var sb strings.Builder
	dir := t.TempDir()
	require.NoError(t, run([]string{"kernels", "-run", "vec_add", "-dump", dir}, &sb, &sb))
	out := sb.String()
	for _, want := range []string{`IR of vec_add/n=1000/BLOCK=128`, `%\d+ = make_range \{0, 128\} : tensor<128xi32>`,
		`vec_add/n=1000/BLOCK=128 +8×1×1 +8 +\d+ +\S+ +ok \(float64 reference\)`, `\n4 passed, 0 failed\n`} {
		assert.Regexp(t, want, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.tile"))
	require.Len(t, files, 4)
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(b), "tt.func @vec_add("), "dump %s: %q", files[0], b)
}

// TestKernelsOnBothBackends: the same cases pass on the executor and on the
// reference interpreter.
func TestKernelsOnBothBackends(t *testing.T) {
	for _, backend := range []string{"cpu", "interp"} {
		var sb strings.Builder
		require.NoError(t, run([]string{"kernels", "-backend", backend, "-run", "softmax/", "-show", ""}, &sb, &sb), "-backend %s", backend)
		assert.Regexp(t, `\n\d+ passed, 0 failed\n`, sb.String(), "-backend %s", backend)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	var sb strings.Builder
	require.ErrorContains(t, run([]string{"kernels", "-run", "no-such-kernel"}, &sb, &sb), "no case matches")
	require.ErrorContains(t, run([]string{"kernels", "extra"}, &sb, &sb), "unexpected arguments")
}

// TestBenchWritesTableJSONAndPlot runs two small workloads once: the
// Markdown table has their rows, the JSON their measurements, the PNG is one.
func TestBenchWritesTableJSONAndPlot(t *testing.T) {
	dir := t.TempDir()
	jf, pf := filepath.Join(dir, "b.json"), filepath.Join(dir, "b.png")
	var sb, progress strings.Builder
	require.NoError(t, benchCmd([]string{"-workload", "chain, softmax", "-size", "small", "-runs", "1", "-warmup", "1ms", "-json", jf, "-plot", pf}, &sb, &progress))
	for _, want := range []string{`\| chain \| small \| 11 → 1 \|`, `\| softmax \| small \| 9 → 1 \|`, `roofline: host memory copy`} {
		assert.Regexp(t, want, sb.String())
	}
	assert.Contains(t, progress.String(), "[6/6] done\n")
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
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &doc))
	assert.Equal(t, "cpu", doc.Backend)
	require.Len(t, doc.Results, 2)
	require.Len(t, doc.Results[1].Modes, 3)
	assert.Equal(t, "fused", doc.Results[1].Modes[2].Mode)
	assert.Positive(t, doc.Results[1].Modes[2].Median)
	png, err := os.ReadFile(pf)
	require.NoError(t, err)
	require.Greater(t, len(png), 1000)
	assert.Equal(t, "PNG", string(png[1:4]))
}

// TestBenchCPUProfile: -cpuprofile writes a CPU profile of the bench
// (gzipped protobuf, as runtime/pprof writes it) whose samples include
// the bench's measuring function.
func TestBenchCPUProfile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "cpu.prof")
	var sb, progress strings.Builder
	require.NoError(t, benchCmd([]string{"-workload", "softmax", "-size", "small", "-runs", "5", "-warmup", "200ms", "-q", "-cpuprofile", f}, &sb, &progress))
	assert.Regexp(t, `\| softmax \| small \|`, sb.String())
	b, err := os.ReadFile(f)
	require.NoError(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(b))
	require.NoError(t, err, "a profile is gzipped")
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	assert.Contains(t, string(raw), "bench.Graph", "the profile's functions include the bench's")
}

// TestBenchTrace: -trace writes a Go execution trace of the bench (the
// header runtime/trace writes first names the format).
func TestBenchTrace(t *testing.T) {
	f := filepath.Join(t.TempDir(), "bench.trace")
	var sb, progress strings.Builder
	require.NoError(t, benchCmd([]string{"-workload", "chain", "-size", "small", "-runs", "3", "-warmup", "10ms", "-q", "-trace", f}, &sb, &progress))
	assert.Regexp(t, `\| chain \| small \|`, sb.String())
	b, err := os.ReadFile(f)
	require.NoError(t, err)
	require.Greater(t, len(b), 1000, "a trace of a bench has events")
	assert.True(t, bytes.HasPrefix(b, []byte("go 1.")), "a Go execution trace starts with its version header, not %q", b[:min(16, len(b))])
}

// TestProgressOnlyOnATerminal: with stderr a file (a log), the bench writes
// one line a step and no carriage-return frames; the bar, which does, is
// for terminals only.
func TestProgressOnlyOnATerminal(t *testing.T) {
	log, err := os.Create(filepath.Join(t.TempDir(), "bench.log"))
	require.NoError(t, err)
	defer log.Close()
	require.False(t, isTerminal(log))
	assert.False(t, isTerminal(&strings.Builder{}))
	var sb strings.Builder
	require.NoError(t, run([]string{"bench", "-workload", "chain", "-size", "small", "-runs", "1", "-warmup", "1ms"}, &sb, log))
	b, err := os.ReadFile(log.Name())
	require.NoError(t, err)
	assert.NotContains(t, string(b), "\r")
	assert.Regexp(t, `^\[1/3\] chain/small \w+\n\[2/3\] chain/small \w+\n\[3/3\] chain/small \w+\n\[3/3\] done\n$`, string(b))

	var quiet strings.Builder // -q: nothing at all
	q := newProgress(&quiet, 2, true)
	q.step("chain/small fused")
	q.finish()
	assert.Empty(t, quiet.String())

	var term bytes.Buffer // what a terminal gets: frames redrawn in place
	p := newBar(&term, 2)
	p.step("chain/small gorgonia")
	p.step("chain/small fused")
	p.finish()
	assert.Contains(t, term.String(), "\r")
	assert.Contains(t, term.String(), "2/2")
	assert.True(t, strings.HasSuffix(term.String(), "\n"), "the finished bar ends its line: %q", term.String())
}

func TestBenchRejectsBadInput(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"backend", []string{"-backend", "tpu"}, "want cpu or cuda"},
		{"workload", []string{"-workload", "nope"}, `no workload "nope"`},
		{"size", []string{"-size", "huge"}, "want small, large, all or peer"},
		{"a workload without the peer size", []string{"-workload", "linear_gelu", "-size", "peer"}, "linear_gelu has no size peer"},
		{"precision", []string{"-precision", "fp8"}, "want ieee, tf32, tf32x3 or bf16"},
		{"runs", []string{"-runs", "0"}, "at least 1"},
		{"profile", []string{"-profile", "-1"}, "want a count"},
		{"device batch", []string{"-device-batch", "0"}, "-device-batch 0: want at least 1 run"},
		{"cpuprofile in a missing directory", []string{"-workload", "chain", "-size", "small", "-cpuprofile", "/nonexistent/dir/cpu.prof"}, "-cpuprofile"},
		{"trace in a missing directory", []string{"-workload", "chain", "-size", "small", "-trace", "/nonexistent/dir/bench.trace"}, "-trace"},
		{"stray argument", []string{"stray"}, "unexpected arguments"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var sb, progress strings.Builder
			assert.ErrorContains(t, benchCmd(c.args, &sb, &progress), c.want)
		})
	}
	var sb strings.Builder
	assert.ErrorContains(t, run([]string{"frobnicate"}, &sb, &sb), "unknown command")
}

// TestDeviceTable: with device times (the GPU), the rates come from them and
// a second table sets the unfused and fused device times side by side, a
// third the fused run's copies; the plot gets its third panel.
func TestDeviceTable(t *testing.T) {
	r := &bench.Result{Name: "chain", Size: "large", Backend: "cuda", Bytes: 2e9, CopyGBps: 4000, Modes: []*bench.Measurement{
		{Mode: bench.Gorgonia, Median: 0.1, Min: 0.1, Max: 0.1},
		{Mode: bench.Unfused, Median: 0.012, Min: 0.012, Max: 0.012, DeviceMedian: 0.004, Kernels: 11, KernelBytes: 176e6},
		{Mode: bench.Fused, Median: 0.01, Min: 0.01, Max: 0.01, DeviceMedian: 0.001, DeviceMin: 0.001, DeviceMax: 0.001, DeviceInRun: 0.0015, Kernels: 1, KernelBytes: 32e6, GBps: 2000,
			Copies: &bench.Copies{Uploads: 2, Downloads: 1, BytesUp: 3 << 20, BytesDown: 4, Held: 4, HashedBytes: 1 << 19}, HostMedian: 0.0004},
	}}
	var buf bytes.Buffer
	writeTable(&buf, []*bench.Result{r}, fusion.CUDA, 4000, "device-to-device copy")
	out := buf.String()
	for _, want := range []string{
		"fused GB/s (device)",
		"| chain | large | 11 → 1 | 176.0 → 32.0 | 100 | 12 | 10 (10–10) | 10.00x | 8.33x | 2000.00 | 50% |",
		"On the device",
		"| chain | large | 4 | 1 (1–1) | 1.5 | 4.00x | 2000.00 | 50% | – | 90% of the run |",
		"| chain | large | 2 / 3 | 1 / 3.81e-06 | 4 | 0.5 | 0.4 |", // the copies of a run
	} {
		assert.Contains(t, out, want)
	}
	assert.Contains(t, out, "events between runs")
	r.Mode(bench.Fused).DeviceBatch = 10 // -device-batch 10
	buf.Reset()
	writeTable(&buf, []*bench.Result{r}, fusion.CUDA, 4000, "device-to-device copy")
	assert.Contains(t, buf.String(), "events 10 runs apart, each time the mean of those runs")
	png := filepath.Join(t.TempDir(), "dev.png")
	require.NoError(t, writePlot(png, []*bench.Result{r}, fusion.CUDA))
	f, err := os.Open(png)
	require.NoError(t, err)
	defer f.Close()
	cfg, err := pngpkg.DecodeConfig(f)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, cfg.Height, 900, "three panels")
}

// TestProfileList: the slowest kernels per mode, slowest first, with their
// share of the run's kernel time and, where counted (the CPU), the page
// faults taken in them.
func TestProfileList(t *testing.T) {
	r := &bench.Result{Name: "mlp_step", Size: "large", Profile: map[string][]fusion.KernelTime{
		bench.Unfused: {{Kernel: "fused_0_matmul", Ops: []string{"A × B"}, Seconds: 1e-4, Faults: -1}}, // not counted (a GPU's)
		bench.Fused: {
			{Kernel: "fused_0_matmul", Ops: []string{"A × B", "+ false"}, Seconds: 1e-4, Faults: 0},
			{Kernel: "fused_1_reduction", Ops: []string{"Σ[0]"}, Seconds: 3e-4, Faults: 1437},
			{Kernel: "fused_2_elementwise", Ops: []string{"tanh"}, Seconds: 1e-5},
		},
	}}
	var buf bytes.Buffer
	writeProfile(&buf, []*bench.Result{r}, 2)
	out := buf.String()
	for _, want := range []string{
		"mlp_step/large fused: 3 kernels, 410.0 µs in all",
		"     300.0  73.2%   1437 pf  fused_1_reduction  Σ[0]\n     100.0  24.4%      0 pf  fused_0_matmul  A × B; + false\n",
		"mlp_step/large unfused: 1 kernels, 100.0 µs in all\n     100.0  100.0%  fused_0_matmul  A × B\n",
	} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, "fused_2_elementwise", "more than 2 kernels listed")
}

// TestExecutorList: the bench names, per mode, the kernels that run on
// the CPU's executor rather than as machine code and why (the first
// three, then a count), and says nothing where every kernel is machine
// code.
func TestExecutorList(t *testing.T) {
	why := []string{"fused_0_row: a", "fused_1_row: b", "fused_2_row: c", "fused_3_row: d", "fused_4_row: e"}
	r := &bench.Result{Name: "encoder_fwd", Size: "small", Modes: []*bench.Measurement{
		{Mode: bench.Unfused, OnExecutor: 5, ExecutorWhy: why},
		{Mode: bench.Fused},
	}}
	var buf bytes.Buffer
	writeExecutor(&buf, []*bench.Result{r})
	out := buf.String()
	assert.Equal(t, "encoder_fwd small unfused: 5 kernels on the executor, not machine code: fused_0_row: a; fused_1_row: b; fused_2_row: c; and 2 more\n", out)
	assert.Equal(t, why[3], "fused_3_row: d", "the list shortened in place")
	buf.Reset()
	writeExecutor(&buf, []*bench.Result{{Name: "chain", Size: "large", Modes: []*bench.Measurement{{Mode: bench.Fused}}}})
	assert.Empty(t, buf.String())
	buf.Reset()
	writeExecutor(&buf, []*bench.Result{{Name: "colsum", Size: "large", Modes: []*bench.Measurement{{Mode: bench.Fused, ExecutorLaunches: 12, StatsRuns: 12}}}})
	assert.Equal(t, "colsum large fused: 12 launches of machine code handed to the executor at run time in 12 runs\n", buf.String())
}

// TestBenchPrecisions: bench -precision takes every precision of the
// products; attention's error against Gorgonia's fp32 machine orders them
// (3xTF32 near fp32's rounding, TF32's 10 bits, bf16's 7).
func TestBenchPrecisions(t *testing.T) {
	if testing.Short() {
		t.Skip("three attention benches on the interpreter")
	}
	errs := map[string]float64{}
	for _, prec := range []string{"tf32x3", "tf32", "bf16"} {
		jf := filepath.Join(t.TempDir(), prec+".json")
		var sb, progress strings.Builder
		require.NoError(t, benchCmd([]string{"-q", "-workload", "attention", "-size", "small", "-runs", "1", "-warmup", "1ms", "-precision", prec, "-json", jf}, &sb, &progress), prec)
		b, err := os.ReadFile(jf)
		require.NoError(t, err)
		var doc struct {
			Results []struct {
				Modes []struct {
					Mode   string
					MaxErr float64 `json:"max_err"`
				}
			}
		}
		require.NoError(t, json.Unmarshal(b, &doc))
		require.Len(t, doc.Results, 1)
		for _, m := range doc.Results[0].Modes {
			if m.Mode == "gorgonia" {
				errs[prec] = m.MaxErr
			}
		}
	}
	t.Logf("max error against Gorgonia: %v", errs)
	assert.Less(t, errs["tf32x3"], 1e-5, "3xTF32 within fp32's rounding")
	assert.Less(t, errs["tf32x3"], errs["tf32"])
	assert.Less(t, errs["tf32"], errs["bf16"])
	assert.Less(t, errs["bf16"], 3e-2)
}

// TestTrainTable: a training step's row sets its wall clock against the
// device time of the run's kernels plus the solver's (2.4 ms against
// 0.5 + 0.1: 4.00x), with the launches and graph replays of a step; a
// workload that is not a training step gets no row.
func TestTrainTable(t *testing.T) {
	fused := func(train bool) *bench.Result {
		return &bench.Result{Name: map[bool]string{true: "mlp_train", false: "mlp_step"}[train], Size: "large", Backend: "cuda", Train: train, Modes: []*bench.Measurement{
			{Mode: bench.Gorgonia, Median: 0.01, Min: 0.01, Max: 0.01},
			{Mode: bench.Unfused, Median: 0.004, Min: 0.004, Max: 0.004, DeviceMedian: 0.002, Kernels: 40},
			{Mode: bench.Fused, Median: 0.0024, Min: 0.0023, Max: 0.003, DeviceMedian: 0.0005, DeviceInRun: 0.0005, SolverDevice: 0.0001, UploadDevice: 36e-6, Kernels: 22,
				Copies: &bench.Copies{Uploads: 2, Launches: 4, GraphLaunches: 1}, HostMedian: 0.0007,
				Phases: &fusion.RunPhases{Check: 5e-6, HandOff: 9e-6, Upload: 150e-6, Launch: 20e-6, Wait: 480e-6, Download: 30e-6, Return: 8e-6, Solver: 40e-6}},
		}}
	}
	var buf bytes.Buffer
	writeTable(&buf, []*bench.Result{fused(false), fused(true)}, fusion.CUDA, 4000, "device-to-device copy")
	out := buf.String()
	assert.Contains(t, out, "Training steps, fused")
	assert.Contains(t, out, "| mlp_train | large | 2.4 (2.3–3) | 0.5 + 0.1 | 4.00x | 36 | 0.7 | 4 / 1 | 5 / 9 / 150 / 20 / 480 / 30 / 8 / 40 |")
	assert.NotContains(t, out, "| mlp_step | large | 2.4 (2.3–3) | 0.5 + 0.1 |")
}

// TestPrecisionOptions: -precision default is no option (fusion chooses
// each kernel's precision), a named precision is WithPrecision of it
// (ieee too: no longer the same as giving none), anything else an error.
func TestPrecisionOptions(t *testing.T) {
	for _, c := range []struct {
		in    string
		prec  tile.Precision
		opts  int
		valid bool
	}{
		{"default", tile.PrecIEEE, 0, true},
		{"ieee", tile.PrecIEEE, 1, true},
		{"tf32x3", tile.PrecTF32x3, 1, true},
		{"fp64", 0, 0, false},
	} {
		prec, opts, err := precisionOptions(c.in)
		if (err == nil) != c.valid || c.valid && (prec != c.prec || len(opts) != c.opts) {
			t.Errorf("%q: %v, %d options, %v; want %v, %d options, valid %v", c.in, prec, len(opts), err, c.prec, c.opts, c.valid)
		}
	}
}
