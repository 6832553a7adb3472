package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/diskcache"
	"github.com/tilefuse/tilefuse/fusion"
)

type tuneOpts struct {
	backend, workload, size, precision, cacheDir string
	quiet                                        bool
	budget                                       time.Duration
}

func tuneFlags() (*flag.FlagSet, *tuneOpts) {
	o := &tuneOpts{}
	fs := flag.NewFlagSet("tune", flag.ContinueOnError)
	fs.StringVar(&o.backend, "backend", "cpu", "where kernels run and are measured: cpu, or cuda (the tilefuse_cuda build)")
	fs.StringVar(&o.workload, "workload", "softmax", "the workload to tune, one of: "+workloadNames())
	fs.StringVar(&o.size, "size", "large", "its size: small, large, or one of its peer sizes (peer, peer:8192x4096, …; see help bench); peer for a workload of several peer shapes tunes each in turn")
	fs.StringVar(&o.precision, "precision", "default", "how products form f32 products: default (as fusion chooses without WithPrecision: 3xTF32 for products at least 256 on a side on Hopper, else ieee), ieee, tf32, tf32x3 or bf16")
	fs.StringVar(&o.cacheDir, "cache-dir", "", "the cache on disk the results go to (default: the one tilefuse uses, see tilefuse cache)")
	fs.DurationVar(&o.budget, "budget", fusion.DefaultTuneBudget, "wall time to spend measuring (0: no bound); kernels not reached keep their defaults, and the table says which (a later tune measures them, taking the others from the cache)")
	fs.BoolVar(&o.quiet, "q", false, "no progress on stderr (a bar on a terminal, one line a kernel otherwise)")
	return fs, o
}

// tuneCmd compiles a workload with fusion.WithAutotune: each kernel's
// candidates measured on the backend (or taken from the cache on disk),
// the choices printed as a Markdown table and kept for later processes.
func tuneCmd(args []string, out, progressW io.Writer) error {
	fs, o := tuneFlags()
	if done, err := parse(fs, args, out); done || err != nil {
		return err
	}
	var be fusion.Backend
	switch o.backend {
	case "cpu":
		be = fusion.CPU
	case "cuda":
		be = fusion.CUDA
	default:
		return fmt.Errorf("-backend %q: want cpu or cuda", o.backend)
	}
	opts := []fusion.Option{fusion.WithBackend(be), fusion.WithAutotune(true), fusion.WithTuneBudget(o.budget)}
	_, popts, err := precisionOptions(o.precision)
	if err != nil {
		return err
	}
	opts = append(opts, popts...)
	dir := o.cacheDir
	if dir == "" {
		var err error
		if dir, err = diskcache.Dir(); err != nil {
			return err
		}
	}
	opts = append(opts, fusion.WithCacheDir(dir))
	w, ok := bench.Lookup(o.workload)
	if !ok {
		return fmt.Errorf("no workload %q (have %s)", o.workload, workloadNames())
	}
	for i, size := range tuneSizes(w, o.size) {
		if i > 0 {
			fmt.Fprintln(out)
		}
		if err := tuneSize(w, size, be, dir, opts, o, out, progressW); err != nil {
			return err
		}
	}
	return nil
}

// tuneSizes are the sizes tuneCmd tunes w at for -size size: size, or for
// -size peer each of w's peer shapes in turn where they have names of their
// own ("peer:8192x4096", the chain's one "peer:64M").
func tuneSizes(w bench.Workload, size string) []string {
	if ps := w.PeerSizes(); size == bench.Peer && len(ps) > 0 && ps[0] != bench.Peer {
		return ps
	}
	return []string{size}
}

// tuneSize is tuneCmd for one size of w.
func tuneSize(w bench.Workload, size string, be fusion.Backend, dir string, opts []fusion.Option, o *tuneOpts, out, progressW io.Writer) error {
	spec, err := w.Build(size)
	if err != nil {
		return err
	}
	var bar progress
	opts = append(slices.Clip(opts), fusion.WithTuneProgress(func(done, total int, kernel string) {
		if bar == nil {
			bar = newProgress(progressW, total, o.quiet)
		}
		bar.step("tuned " + kernel)
	}))
	t0 := time.Now()
	c, err := fusion.Compile(spec.Graph, opts...)
	if err != nil {
		if bar != nil {
			bar.abort()
		}
		return err
	}
	if bar != nil {
		bar.finish()
	}
	writeTuning(out, c.Report, fmt.Sprintf("%s/%s on %v, %d kernels, compiled and tuned in %.2f s; results in %s", spec.Name, spec.Size, be, c.Report.Kernels(), time.Since(t0).Seconds(), dir))
	return nil
}

// writeTuning prints what the autotuner chose, one row a kernel text.
func writeTuning(out io.Writer, rep *fusion.Report, title string) {
	fmt.Fprintf(out, "%s\n\n", title)
	if len(rep.Tuning) == 0 {
		fmt.Fprintln(out, "no kernel has meta-parameters to tune")
		return
	}
	fmt.Fprintln(out, "| kernel | kernels of its text | default | chosen | default ms | chosen ms | speedup | chosen GB/s | candidates | rejected | source |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|")
	changed, cached, unfinished := 0, 0, 0
	for _, r := range rep.Tuning {
		speed, src := 1.0, "measured"
		if r.Unfinished != "" {
			src, unfinished = r.Unfinished, unfinished+1
		}
		if r.ChosenSeconds > 0 {
			speed = r.DefaultSeconds / r.ChosenSeconds
		}
		if r.FromCache {
			src, cached = "cache", cached+1
		}
		if r.Chosen.String() != r.Default.String() {
			changed++
		}
		gbs := "–"
		if r.ChosenSeconds > 0 {
			gbs = fmt.Sprintf("%.0f", float64(r.Bytes)/r.ChosenSeconds/1e9)
		}
		fmt.Fprintf(out, "| %s | %d | %v | %v | %.4g | %.4g | %.2fx | %s | %d | %d | %s |\n", r.Kernel, r.Kernels, r.Default, r.Chosen,
			1e3*r.DefaultSeconds, 1e3*r.ChosenSeconds, speed, gbs, r.Candidates, len(r.Rejected), src)
	}
	fmt.Fprintf(out, "\n%d kernel texts tuned, %d changed from the heuristic's choice, %d taken from the cache\n", len(rep.Tuning), changed, cached)
	if unfinished > 0 {
		fmt.Fprintf(out, "%d kernel texts not tuned or partly tuned: the budget ran out (-budget; a later tune measures them)\n", unfinished)
	}
	for _, r := range rep.Tuning {
		if len(r.Tried) < 2 {
			continue
		}
		tried := slices.Clone(r.Tried)
		slices.SortStableFunc(tried, func(a, b fusion.TriedMeta) int { return cmp.Compare(a.Seconds, b.Seconds) })
		fmt.Fprintf(out, "\n%s: every candidate, fastest first (one launch, ms, before the rematch):\n", r.Kernel)
		for _, x := range tried {
			dropped := ""
			if x.Dropped {
				dropped = "  (dropped after its first measurement: over 1.5× the best so far)"
			}
			fmt.Fprintf(out, "  %.4g  %v%s\n", 1e3*x.Seconds, x.Meta, dropped)
		}
	}
	for _, r := range rep.Tuning {
		for _, why := range r.Rejected {
			fmt.Fprintf(out, "  %s: rejected %s\n", r.Kernel, strings.TrimSpace(why))
		}
	}
}
