package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/tilefuse/tilefuse/bench"
)

type compareOpts struct {
	tilefuse, torch string
	mode, precision string
}

func compareFlags() (*flag.FlagSet, *compareOpts) {
	o := &compareOpts{}
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.StringVar(&o.tilefuse, "tilefuse", "", "`files` written by tilefuse bench -json, comma-separated: one a turn")
	fs.StringVar(&o.torch, "torch", "", "`files` written by bench/torch/workloads.py --json, comma-separated: one a turn, in the same order")
	fs.StringVar(&o.mode, "mode", bench.Fused, "the tilefuse mode to compare: fused or unfused")
	fs.StringVar(&o.precision, "precision", "fp32", "PyTorch's rows of this precision (fp32, tf32 or bf16)")
	return fs, o
}

// torchFile is what bench/torch/workloads.py --json writes.
type torchFile struct {
	Device  string     `json:"device"`
	Results []torchRow `json:"results"`
}

// torchRow is one workload's times in seconds; a mode that did not run is
// absent (0).
type torchRow struct {
	Name      string  `json:"name"`
	Size      string  `json:"size"`
	Precision string  `json:"precision"`
	Eager     float64 `json:"eager_s"`
	Library   float64 `json:"library_s"`
	Compiled  float64 `json:"compiled_s"`
	Triton    float64 `json:"triton_tutorial_s"`
}

// best is the row's fastest mode and its time (0 where none ran).
func (r torchRow) best() (string, float64) {
	mode, t := "", 0.0
	for _, m := range []struct {
		name string
		t    float64
	}{{"eager", r.Eager}, {"library", r.Library}, {"compile", r.Compiled}, {"triton", r.Triton}} {
		if m.t > 0 && (t == 0 || m.t < t) {
			mode, t = m.name, m.t
		}
	}
	return mode, t
}

// benchFile is what tilefuse bench -json writes (the fields compare reads).
type benchFile struct {
	Backend string          `json:"backend"`
	Results []*bench.Result `json:"results"`
}

// compareRow is one workload and size over the turns: tilefuse's time and
// PyTorch's best mode's in each turn (0 where the turn has no such row).
type compareRow struct {
	name, size string
	tf, pt     []float64
	ptMode     []string
}

// compareCmd reads turns of tilefuse bench -json and workloads.py --json
// files and prints, per workload and size, each turn's tilefuse and
// PyTorch times side by side, the medians' ratio and how many turns
// tilefuse was at least as fast as PyTorch's best mode in.
func compareCmd(args []string, out io.Writer) error {
	fs, o := compareFlags()
	if done, err := parse(fs, args, out); done || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{"compare", fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	if o.mode != bench.Fused && o.mode != bench.Unfused {
		return usageError{"compare", fmt.Errorf("-mode %q: want %s or %s", o.mode, bench.Fused, bench.Unfused)}
	}
	tfFiles, ptFiles := splitList(o.tilefuse), splitList(o.torch)
	switch {
	case len(tfFiles) == 0 || len(ptFiles) == 0:
		return usageError{"compare", errors.New("want -tilefuse and -torch files")}
	case len(tfFiles) != len(ptFiles):
		return usageError{"compare", fmt.Errorf("%d tilefuse files and %d torch files: want one of each a turn", len(tfFiles), len(ptFiles))}
	}
	var tfs []benchFile
	var pts []torchFile
	for i := range tfFiles {
		var b benchFile
		if err := readJSON(tfFiles[i], &b); err != nil {
			return err
		}
		var p torchFile
		if err := readJSON(ptFiles[i], &p); err != nil {
			return err
		}
		// a CPU table against PyTorch on a GPU (or the reverse) compares
		// nothing: workloads.py names a CPU "CPU …" and a GPU by its name
		if onCPU := strings.HasPrefix(p.Device, "CPU"); p.Device != "" && b.Backend != "" && onCPU != (b.Backend == "cpu") {
			return fmt.Errorf("compare: turn %d: tilefuse ran on the %s backend (%s), PyTorch on %q (%s)", i+1, b.Backend, tfFiles[i], p.Device, ptFiles[i])
		}
		tfs, pts = append(tfs, b), append(pts, p)
	}
	rows := compareRows(tfs, pts, o.mode, o.precision)
	if len(rows) == 0 {
		return fmt.Errorf("compare: no workload and size in both sides' files (precision %s)", o.precision)
	}
	writeCompare(out, rows, o.mode)
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// readJSON decodes file into v, saying which file failed.
func readJSON(file string, v any) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("compare: %s: %w", file, err)
	}
	return nil
}

// compareRows pairs turn i's tilefuse file with its torch file: the rows
// of every workload and size either side has in some turn, in the order
// they first appear in tilefuse's files (then torch's). tilefuse's time
// is the mode's device time where it has one (the GPU), else its wall
// clock median, as workloads.py times the GPU by events and the CPU by
// the wall clock.
func compareRows(tfs []benchFile, pts []torchFile, mode, precision string) []*compareRow {
	var rows []*compareRow
	index := map[[2]string]*compareRow{}
	row := func(name, size string) *compareRow {
		k := [2]string{name, size}
		if r := index[k]; r != nil {
			return r
		}
		r := &compareRow{name: name, size: size, tf: make([]float64, len(tfs)), pt: make([]float64, len(tfs)), ptMode: make([]string, len(tfs))}
		index[k] = r
		rows = append(rows, r)
		return r
	}
	for i, f := range tfs {
		for _, res := range f.Results {
			if m := res.Mode(mode); m != nil && m.Time() > 0 {
				row(res.Name, res.Size).tf[i] = m.Time()
			}
		}
	}
	for i, f := range pts {
		for _, res := range f.Results {
			if res.Precision != "" && res.Precision != precision {
				continue
			}
			if m, t := res.best(); t > 0 {
				r := row(res.Name, res.Size)
				r.pt[i], r.ptMode[i] = t, m
			}
		}
	}
	return slices.DeleteFunc(rows, func(r *compareRow) bool { return median(r.tf) == 0 || median(r.pt) == 0 })
}

// median is the median of xs' positive values (the upper one of an even
// count), 0 where there are none.
func median(xs []float64) float64 {
	var v []float64
	for _, x := range xs {
		if x > 0 {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// writeCompare prints rows as a Markdown table, times in ms.
func writeCompare(out io.Writer, rows []*compareRow, mode string) {
	ms := func(t float64) string {
		if t == 0 {
			return "–"
		}
		return fmt.Sprintf("%.3g", 1e3*t)
	}
	fmt.Fprintf(out, "tilefuse %s against PyTorch's fastest mode in each turn, ms; ratio: the medians' (below 1: tilefuse faster)\n\n", mode)
	fmt.Fprintln(out, "| workload | size | tilefuse each turn | PyTorch's best each turn | ratio | turns tilefuse is at least as fast |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|")
	for _, r := range rows {
		var tf, pt []string
		ahead, turns := 0, 0
		for i := range r.tf {
			tf = append(tf, ms(r.tf[i]))
			p := ms(r.pt[i])
			if r.pt[i] > 0 {
				p += " (" + r.ptMode[i] + ")"
			}
			pt = append(pt, p)
			if r.tf[i] > 0 && r.pt[i] > 0 {
				turns++
				if r.tf[i] <= r.pt[i] {
					ahead++
				}
			}
		}
		// compareRows kept only rows with a time on both sides: no 0 here
		fmt.Fprintf(out, "| %s | %s | %s | %s | %.2f | %d of %d |\n", r.name, r.size, strings.Join(tf, ", "), strings.Join(pt, ", "), median(r.tf)/median(r.pt), ahead, turns)
	}
}
