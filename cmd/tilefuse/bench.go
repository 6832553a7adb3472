package main

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"time"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/tile"
)

type benchOpts struct {
	backend, workloads, size, json, plot, precision, cpuprofile, trace string
	runs, profile, rotate, deviceBatch                                 int
	warm                                                               time.Duration
	quiet, native, autotune, graphs, cold, noGorgonia, reuse, loop     bool
}

func benchFlags() (*flag.FlagSet, *benchOpts) {
	o := &benchOpts{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&o.backend, "backend", "cpu", "where kernels run: cpu, or cuda (the tilefuse_cuda build)")
	fs.StringVar(&o.workloads, "workload", "all", "comma-separated workloads, or all: "+workloadNames())
	fs.StringVar(&o.size, "size", "all", "small, large, all (small and large) or peer (the workloads that have the peers' shapes: BERT-base, long attention, softmax and LayerNorm at five shapes, column sums at two, the chain at 64M; a GPU round's, without Gorgonia's machine)")
	fs.StringVar(&o.precision, "precision", "ieee", "how tilefuse's products form f32 products: ieee (exact; the bench's default, as its tables have been), default (what fusion chooses without WithPrecision: 3xTF32 for products at least 256 on a side on Hopper, else ieee), tf32 (the tensor cores': A truncated and B rounded to TF32), tf32x3 (three TF32 products: near fp32's accuracy on the tensor cores) or bf16 (operands rounded to bfloat16)")
	fs.IntVar(&o.runs, "runs", 5, "timed runs per mode")
	fs.DurationVar(&o.warm, "warmup", 50*time.Millisecond, "untimed runs first, for this long (at least one)")
	fs.StringVar(&o.json, "json", "", "write the results as JSON to `file`")
	fs.StringVar(&o.plot, "plot", "", "write a PNG chart of speedups and percent of roofline to `file`")
	fs.BoolVar(&o.quiet, "q", false, "no progress on stderr (a bar on a terminal, one line a step otherwise)")
	fs.BoolVar(&o.native, "native", false, "time the fused graphs twice, their CPU kernels on the executor (fused) and as machine code (native, the default otherwise), in turn with the other modes, with a table of native against the executor")
	fs.BoolVar(&o.autotune, "autotune", false, "tilefuse's modes with fusion.WithAutotune: each kernel's meta-parameters measured on the backend at compile time (choices from and to the cache on disk; the compile times include the tuning)")
	fs.BoolVar(&o.graphs, "cuda-graphs", false, "tilefuse's modes with fusion.WithCUDAGraphs: on the GPU each run's kernels replayed as CUDA graphs, one cuGraphLaunch for the launches between ops left to the CPU")
	fs.BoolVar(&o.loop, "loop", false, "time each mode's runs (training steps) back to back, one mode after the other, with no garbage collection between them, as a user's loop (by default the modes take turns and each timed run follows a collection, which gives tilefuse's recycler the memory of the values earlier runs dropped); training steps are timed ten at a time, the device waited for at the end of the ten only, so that a step's kernels run while the host readies the next")
	fs.BoolVar(&o.reuse, "reuse-outputs", false, "tilefuse's modes with fusion.WithReuseOutputs: each run writes its readable values into the memory of the last run's (a user who reads each run's values before the next), instead of memory that no value the user may still hold has")
	fs.IntVar(&o.rotate, "rotate", 0, "input sets each mode's runs cycle through (0: 4 where the inputs take less than 64 MiB, else 1; 1: the same inputs every run, as bench/torch's timed calls)")
	fs.IntVar(&o.deviceBatch, "device-batch", 1, "on the GPU, the graph's runs back to back that each device time spans (their mean between two events, as the copy roofline is timed: an event between two runs costs the device a few µs); 1: an event between every two runs")
	fs.BoolVar(&o.cold, "cold", false, "on the CPU, time each run right after the collection that precedes it (the pool's workers parked, the caches as the collection left them), as before 2026-12-02; by default one untimed run of the mode comes between them where its warm-up run took under 20 ms, as PyTorch's timed calls follow one another")
	fs.BoolVar(&o.noGorgonia, "no-gorgonia", false, "leave Gorgonia's own machine out at every size (as -size peer does): tilefuse's modes only, for profiles and quick comparisons")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole bench (compiles, warm-ups and timed runs; go tool pprof reads it) to `file`")
	fs.StringVar(&o.trace, "trace", "", "write a Go execution trace of the whole bench (go tool trace reads it: goroutines, the device's thread, its waits) to `file`")
	fs.IntVar(&o.profile, "profile", 0, "list each workload's `N` slowest kernels per tilefuse mode, timed in runs of their own (events on the GPU, the wall clock on the CPU; each kernel's median over -runs runs, 3 to 15, after one warm-up run)")
	return fs, o
}

// benchCmd runs the standard workloads in the three modes and prints a
// Markdown table; -json and -plot write the results for machines and people.
// Progress goes to progress: a bar where it is a terminal, plain lines
// elsewhere (a log file gets no carriage-return frames).
func benchCmd(args []string, out, progress io.Writer) error {
	fs, o := benchFlags()
	if done, err := parse(fs, args, out); done || err != nil {
		return err
	}
	backend, workloads, size, runs, warm := &o.backend, &o.workloads, &o.size, &o.runs, &o.warm
	jsonOut, plotOut, quiet, profile := &o.json, &o.plot, &o.quiet, &o.profile
	var be fusion.Backend
	switch *backend {
	case "cpu":
		be = fusion.CPU
	case "cuda":
		be = fusion.CUDA
	default:
		return fmt.Errorf("-backend %q: want cpu or cuda", *backend)
	}
	var ws []bench.Workload
	if *workloads == "all" {
		ws = bench.Workloads
	} else {
		for _, name := range strings.Split(*workloads, ",") {
			w, ok := bench.Lookup(strings.TrimSpace(name))
			if !ok {
				return fmt.Errorf("no workload %q (have %s)", name, workloadNames())
			}
			ws = append(ws, w)
		}
	}
	sizes := bench.Sizes
	if *size != "all" {
		if *size != "small" && *size != "large" && *size != bench.Peer {
			return fmt.Errorf("-size %q: want small, large, all or %s", *size, bench.Peer)
		}
		sizes = []string{*size}
	}
	if *size == bench.Peer { // only the workloads that have it
		var peer []bench.Workload
		for _, w := range ws {
			if w.HasPeer() {
				peer = append(peer, w)
			} else if *workloads != "all" {
				return fmt.Errorf("workload %s has no size %s", w.Name, bench.Peer)
			}
		}
		ws = peer
	}
	prec, fopts, err := precisionOptions(o.precision)
	if err != nil {
		return err
	}
	tol := 0.0                 // bench's default: 1e-3 for float32 graphs
	if prec == tile.PrecBF16 { // bf16 operands (8 bits): as peer accepts
		tol = peerTol(prec)
	}
	if o.autotune {
		fopts = append(fopts, fusion.WithAutotune(true))
	}
	if o.graphs {
		fopts = append(fopts, fusion.WithCUDAGraphs(true))
	}
	if o.reuse {
		fopts = append(fopts, fusion.WithReuseOutputs(true))
	}
	if *runs < 1 {
		return fmt.Errorf("-runs %d: want at least 1", *runs)
	}
	if *profile < 0 {
		return fmt.Errorf("-profile %d: want a count of kernels", *profile)
	}
	if o.rotate < 0 {
		return fmt.Errorf("-rotate %d: want a count of input sets, or 0", o.rotate)
	}
	if o.deviceBatch < 1 {
		return fmt.Errorf("-device-batch %d: want at least 1 run", o.deviceBatch)
	}
	copyGBps, copyWhat, err := copyBandwidth(be)
	if err != nil {
		return err
	}
	modes := len(bench.Modes) - 1 // Native only with -native on the CPU
	if o.native && be == fusion.CPU {
		modes++
	}
	sizesOf := func(bench.Workload) []string { return sizes }
	steps := len(ws) * len(sizes) * modes
	if *size == bench.Peer {
		sizesOf = bench.Workload.PeerSizes
		steps = 0
		for _, w := range ws {
			steps += len(w.PeerSizes()) * (modes - 1)
		}
	}
	for _, r := range []struct {
		flag, path string
		start      func(io.Writer) error
		stop       func()
	}{
		{"-cpuprofile", o.cpuprofile, pprof.StartCPUProfile, pprof.StopCPUProfile},
		{"-trace", o.trace, trace.Start, trace.Stop},
	} {
		if r.path == "" {
			continue
		}
		f, err := os.Create(r.path)
		if err != nil {
			return fmt.Errorf("%s: %w", r.flag, err)
		}
		defer f.Close()
		if err := r.start(f); err != nil {
			return fmt.Errorf("%s: %w", r.flag, err)
		}
		defer r.stop()
	}
	bar := newProgress(progress, steps, *quiet)
	var results []*bench.Result
	for _, w := range ws {
		for _, sz := range sizesOf(w) {
			spec, err := w.Build(sz)
			if err != nil {
				return err
			}
			r, err := bench.Graph(spec, bench.Options{Backend: be, Tol: tol, Runs: *runs, WarmUp: *warm, Profile: *profile > 0, SkipGorgonia: *size == bench.Peer || o.noGorgonia, Native: o.native, ColdCPU: o.cold, Loop: o.loop, Rotate: o.rotate, DeviceBatch: o.deviceBatch, FusionOptions: fopts, Progress: func(mode string) {
				bar.step(w.Name + "/" + sz + " " + mode)
			}})
			if err != nil {
				bar.abort()
				return err
			}
			r.CopyGBps = copyGBps
			results = append(results, r)
		}
	}
	bar.finish()
	writeTable(out, results, be, copyGBps, copyWhat)
	if *profile > 0 {
		writeProfile(out, results, *profile)
	}
	if *jsonOut != "" {
		b, err := json.MarshalIndent(map[string]any{
			"date": time.Now().UTC().Format(time.RFC3339), "backend": be.String(),
			"copy_gb_per_s": copyGBps, "copy": copyWhat, "results": results,
		}, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if *plotOut != "" {
		if err := writePlot(*plotOut, results, be); err != nil {
			return err
		}
	}
	return nil
}

func workloadNames() string {
	var names []string
	for _, w := range bench.Workloads {
		names = append(names, w.Name)
	}
	return strings.Join(names, ", ")
}

func ms(s float64) string { return fmt.Sprintf("%.3g", s*1e3) }

// writeStages prints the fused mode's compiles stage by stage (ms), where
// a compile took 20 ms or more: what a second compile in the process
// still spends, and on what.
// writeExecutor lists, for each CPU mode with kernels that run on the
// executor rather than as machine code, how many and why (the first
// three): such kernels are several times slower, and nothing else in the
// table would say so.
func writeExecutor(out io.Writer, results []*bench.Result) {
	for _, r := range results {
		for _, m := range r.Modes {
			if m.OnExecutor == 0 {
				continue
			}
			why := m.ExecutorWhy
			if len(why) > 3 {
				why = append(why[:3:3], fmt.Sprintf("and %d more", len(m.ExecutorWhy)-3))
			}
			fmt.Fprintf(out, "%s %s %s: %d kernels on the executor, not machine code: %s\n", r.Name, r.Size, m.Mode, m.OnExecutor, strings.Join(why, "; "))
		}
	}
	for _, r := range results {
		for _, m := range r.Modes {
			if m.ExecutorLaunches > 0 {
				fmt.Fprintf(out, "%s %s %s: %d launches of machine code handed to the executor at run time in %d runs\n", r.Name, r.Size, m.Mode, m.ExecutorLaunches, m.StatsRuns)
			}
		}
	}
}

func writeStages(out io.Writer, results []*bench.Result) {
	line := func(sts []fusion.StageTime) string {
		var b strings.Builder
		for i, st := range sts {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s %.2f", st.Stage, 1e3*st.Seconds)
		}
		return b.String()
	}
	for _, r := range results {
		f := r.Mode(bench.Fused)
		if f == nil || max(f.CompileCold, f.CompileCached) < 0.020 || len(f.StagesCold) == 0 {
			continue
		}
		fmt.Fprintf(out, "\ncompile of %s %s by stage, ms: 1st %s; 2nd %s\n", r.Name, r.Size, line(f.StagesCold), line(f.StagesCached))
	}
}

// writeTable prints one row per workload and size: times in ms (median,
// with the fastest and slowest run for the fused mode), speedups over
// Gorgonia, bandwidth and percent of the copy roofline, compile times. With
// device times (the GPU), the rates come from them, and a second table puts
// the device times of the unfused and fused runs side by side.
func writeTable(out io.Writer, results []*bench.Result, be fusion.Backend, copyGBps float64, copyWhat string) {
	hasDev := false
	for _, r := range results {
		hasDev = hasDev || r.DeviceSpeedup(bench.Fused) > 0
	}
	rate := ""
	if hasDev {
		rate = " (device)"
	}
	fmt.Fprintf(out, "backend %s; roofline: %s %.1f GB/s; times are medians in ms, wall clock of a whole run (inputs in, results out)\n\n", be, copyWhat, copyGBps)
	fmt.Fprintf(out, "| workload | size | kernels unfused → fused | kernels' MB unfused → fused | Gorgonia | unfused | fused (min–max) | fused vs Gorgonia | unfused vs Gorgonia | fused GB/s%s | %% of copy | fused GFLOP/s%s | compile 1st / 2nd ms | max err Gorgonia / fused |\n", rate, rate)
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		g, u, f := r.Mode(bench.Gorgonia), r.Mode(bench.Unfused), r.Mode(bench.Fused)
		gt, gerr, fs, us := "–", "–", "–", "–" // Gorgonia's machine left out (-size peer, -no-gorgonia)
		if g != nil {
			gt, gerr = ms(g.Median), fmt.Sprintf("%.1g", g.MaxErr)
			fs, us = fmt.Sprintf("%.2fx", r.Speedup(bench.Fused)), fmt.Sprintf("%.2fx", r.Speedup(bench.Unfused))
		}
		fmt.Fprintf(out, "| %s | %s | %d → %d | %.1f → %.1f | %s | %s | %s (%s–%s) | %s | %s | %.2f | %.0f%% | %s | %s / %s | %s / %.1g |\n",
			r.Name, r.Size, u.Kernels, f.Kernels, float64(u.KernelBytes)/1e6, float64(f.KernelBytes)/1e6, gt, ms(u.Median), ms(f.Median), ms(f.Min), ms(f.Max),
			fs, us, f.GBps, 100*r.Roofline(bench.Fused), gflops(f),
			ms(f.CompileCold), ms(f.CompileCached), gerr, f.MaxErr)
	}
	fmt.Fprintln(out, "\nkernels count fused kernels plus ops left to Gorgonia; kernels' MB is what they move per run (each kernel's inputs read once, outputs written once; ops left to Gorgonia not counted); max err is max |a-b|/(1+|b|) against the unfused run.")
	writeStages(out, results)
	writeExecutor(out, results)
	writeNativeTable(out, results)
	if !hasDev {
		return
	}
	defer writeTrain(out, results)  // last
	defer writeCopies(out, results) // after the device table
	events := "events between runs"
	for _, r := range results {
		if f := r.Mode(bench.Fused); f != nil && f.DeviceBatch > 1 {
			events = fmt.Sprintf("events %d runs apart, each time the mean of those runs", f.DeviceBatch)
		}
	}
	fmt.Fprintf(out, "\nOn the device (the graph's kernels run back to back, %s, inputs already up, nothing copied: as PyTorch's are timed; \"in a run\": events around the kernels within a timed run, after its uploads), medians in ms:\n", events)
	fmt.Fprintln(out, "\n| workload | size | unfused | fused (min–max) | fused in a run | fused vs unfused | fused GB/s | % of copy | fused GFLOP/s | transfers and host, fused |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		u, f := r.Mode(bench.Unfused), r.Mode(bench.Fused)
		fmt.Fprintf(out, "| %s | %s | %s | %s (%s–%s) | %s | %.2fx | %.2f | %.0f%% | %s | %.0f%% of the run |\n",
			r.Name, r.Size, ms(u.DeviceMedian), ms(f.DeviceMedian), ms(f.DeviceMin), ms(f.DeviceMax), ms(f.DeviceInRun),
			r.DeviceSpeedup(bench.Fused), f.GBps, 100*r.Roofline(bench.Fused), gflops(f), 100*(1-f.DeviceMedian/f.Median))
	}
}

// writeNativeTable puts the fused runs with kernels as machine code (-native)
// beside the fused runs on the executor, timed in turn in the same run.
func writeNativeTable(out io.Writer, results []*bench.Result) {
	header := false
	for _, r := range results {
		f, n := r.Mode(bench.Fused), r.Mode(bench.Native)
		if f == nil || n == nil {
			continue
		}
		if !header {
			fmt.Fprintln(out, "\nFused kernels as machine code (codegen/cpu/native, -native) against the executor, in the same run, medians in ms:")
			fmt.Fprintln(out, "\n| workload | size | fused, executor (min–max) | fused, native (min–max) | native vs executor | native GB/s | % of copy | compile 1st ms | max err |")
			fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|")
			header = true
		}
		fmt.Fprintf(out, "| %s | %s | %s (%s–%s) | %s (%s–%s) | %.2fx | %.2f | %.0f%% | %s | %.1g |\n",
			r.Name, r.Size, ms(f.Median), ms(f.Min), ms(f.Max), ms(n.Median), ms(n.Min), ms(n.Max),
			f.Median/n.Median, n.GBps, 100*r.Roofline(bench.Native), ms(n.CompileCold), n.MaxErr)
	}
}

// writeCopies tabulates the fused mode's host↔device copies per timed run
// (a training step: run, solver step, loss read) and the run's host time
// (wall clock less device time), where the GPU backend reported them.
func writeCopies(out io.Writer, results []*bench.Result) {
	var rows []*bench.Result
	for _, r := range results {
		if f := r.Mode(bench.Fused); f != nil && f.Copies != nil {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(out, "\nCopies of the fused mode's last timed run (inputs the GPU holds are not uploaded; values come down where readable and changed), and its host time (wall clock less device time in the run, median):")
	fmt.Fprintln(out, "\n| workload | size | up: copies / MB | down: copies / MB | inputs held | MB hashed | host ms |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|")
	mb := func(b int64) string { return fmt.Sprintf("%.3g", float64(b)/(1<<20)) }
	for _, r := range rows {
		f := r.Mode(bench.Fused)
		c := f.Copies
		fmt.Fprintf(out, "| %s | %s | %d / %s | %d / %s | %d | %s | %s |\n", r.Name, r.Size, c.Uploads, mb(c.BytesUp), c.Downloads, mb(c.BytesDown), c.Held, mb(c.HashedBytes), ms(f.HostMedian))
	}
}

// writeTrain sets the fused mode's training steps (workloads with a
// solver: mlp_train, encoder_train) against the device time of their
// kernels, the run's and the fused solver's, where the GPU backend
// reported both.
func writeTrain(out io.Writer, results []*bench.Result) {
	header := false
	for _, r := range results {
		f := r.Mode(bench.Fused)
		if !r.Train || f == nil || f.DeviceInRun <= 0 {
			continue
		}
		if !header {
			fmt.Fprintln(out, "\nTraining steps, fused: the wall clock of a whole step (batch up, RunAll, the fused solver's step, the loss read) against the device time of its kernels (the run's, events around them in the timed step, plus the solver's), medians in ms:")
			fmt.Fprintln(out, "\n| workload | size | wall (min–max) | device: run + solver | wall / device | uploads' device µs | host ms of the run | launches / graph replays a step | host µs: check / hand-off / up / launch / wait / down / return / solver step |")
			fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|")
			header = true
		}
		dev := f.DeviceInRun + f.SolverDevice
		launches := "–"
		if c := f.Copies; c != nil {
			launches = fmt.Sprintf("%d / %d", c.Launches, c.GraphLaunches)
		}
		phases := "–"
		if p := f.Phases; p != nil {
			us := func(s float64) string { return fmt.Sprintf("%.0f", s*1e6) }
			phases = strings.Join([]string{us(p.Check), us(p.HandOff), us(p.Upload), us(p.Launch), us(p.Wait), us(p.Download), us(p.Return), us(p.Solver)}, " / ")
		}
		fmt.Fprintf(out, "| %s | %s | %s (%s–%s) | %s + %s | %.2fx | %.0f | %s | %s | %s |\n", r.Name, r.Size, ms(f.Median), ms(f.Min), ms(f.Max),
			ms(f.DeviceInRun), ms(f.SolverDevice), f.Median/dev, f.UploadDevice*1e6, ms(f.HostMedian), launches, phases)
	}
}

// writeProfile lists each workload's n slowest kernels per tilefuse mode,
// with their share of the kernels' total.
func writeProfile(out io.Writer, results []*bench.Result, n int) {
	fmt.Fprintf(out, "\nThe %d slowest kernels per mode, each one's median over a few runs (events around each launch on the GPU, the wall clock around each op on the CPU, with the minor page faults taken in it, pf), µs:\n", n)
	for _, r := range results {
		for _, mode := range []string{bench.Unfused, bench.Fused} {
			ks := slices.Clone(r.Profile[mode])
			total := 0.0
			for _, k := range ks {
				total += k.Seconds
			}
			slices.SortStableFunc(ks, func(a, b fusion.KernelTime) int { return cmp.Compare(b.Seconds, a.Seconds) })
			fmt.Fprintf(out, "\n%s/%s %s: %d kernels, %.1f µs in all\n", r.Name, r.Size, mode, len(ks), 1e6*total)
			for _, k := range ks[:min(n, len(ks))] {
				ops := strings.Join(k.Ops, "; ")
				if len(ops) > 90 {
					ops = ops[:87] + "..."
				}
				faults := "" // page faults, counted on the CPU backend
				if k.Faults >= 0 {
					faults = fmt.Sprintf("  %5d pf", k.Faults)
				}
				fmt.Fprintf(out, "  %8.1f  %4.1f%%%s  %s  %s\n", 1e6*k.Seconds, 100*k.Seconds/max(total, 1e-12), faults, k.Kernel, ops)
			}
		}
	}
}

func gflops(m *bench.Measurement) string {
	if m.GFLOPs > 0 {
		return fmt.Sprintf("%.1f", m.GFLOPs)
	}
	return "–"
}

// copyBandwidth measures the roofline of memory-bound graphs on be.
func copyBandwidth(be fusion.Backend) (float64, string, error) {
	if be == fusion.CUDA {
		gbs, err := deviceCopyGBps()
		return gbs, "device-to-device copy", err
	}
	return bench.HostCopyGBps(256 << 20), "host memory copy on all cores", nil
}

// precisionOptions reads -precision of a command that compiles graphs:
// "default" is no option (fusion chooses each kernel's precision; prec is
// reported as ieee), any other name WithPrecision of it.
func precisionOptions(s string) (prec tile.Precision, opts []fusion.Option, err error) {
	if s == "default" {
		return tile.PrecIEEE, nil, nil
	}
	if prec, err = parsePrecision(s); err != nil {
		return prec, nil, err
	}
	return prec, []fusion.Option{fusion.WithPrecision(prec)}, nil
}
