//go:build tilefuse_cuda

package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/tilefuse/tilefuse/cuda"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// peerCmd times the fusion pass's matrix-product kernels at the peers'
// shapes on the GPU: batches of launches between events, after a warm-up,
// each result checked against float64 first.
func peerCmd(args []string, out io.Writer) error {
	fs, o := peerFlags()
	if done, err := parse(fs, args, out); done || err != nil {
		return err
	}
	precs, err := parsePrecisions(o.precs)
	if err != nil {
		return err
	}
	tunes, err := parseTunes(o.tune)
	if err != nil {
		return err
	}
	d, err := cuda.Open(0)
	if err != nil {
		return err
	}
	defer d.Close()
	timer, err := d.NewTimer()
	if err != nil {
		return err
	}
	t := graphpass.GPU(d.SMs, d.MaxThreads, d.SharedMemoryOptin)
	t.L2 = d.L2
	fmt.Fprintf(out, "device: %s (sm_%d, %d SMs, %d KiB shared memory a CTA, %d MiB L2)\n\n", d.Name, d.Arch, d.SMs, d.SharedMemoryOptin>>10, d.L2>>20)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tprecision\tms\tTFLOP/s\tmax err/max|ref|\t‖err‖/‖ref‖\tmeta\tregs\tshared KiB\tspill B\tcheck")
	for _, c := range peerCases {
		if o.only != "" && !strings.Contains(c.name, o.only) {
			continue
		}
		for _, prec := range precs {
			for _, tune := range tunes {
				// a candidate that cannot be written, compiled or run is a
				// row of its own (its error), not the end of the run
				row, err := peerRow(d, timer, t, c, prec, tune, o)
				if err != nil {
					fmt.Fprintf(tw, "%s\t%v\t-\t-\t-\t-\t%v\t-\t-\t-\terror: %v\n", c.name, prec, tune, err)
				} else {
					fmt.Fprint(tw, row)
				}
				tw.Flush()
			}
		}
	}
	return tw.Flush()
}

// peerRow builds, checks and times case c at prec under tune (nil: the
// heuristic's choice) and returns its row of the table.
func peerRow(d *cuda.Device, timer *cuda.Timer, t graphpass.Target, c peerCase, prec tile.Precision, tune tile.Meta, o *peerOpts) (string, error) {
	const batch = 10
	p, err := buildPeer(c, t, prec, tune)
	if err != nil {
		return "", err
	}
	bufs := make([]any, 0, len(p.args))
	defer func() {
		for _, b := range bufs {
			d.Free(b.(*cuda.Buffer))
		}
	}()
	for _, h := range p.args {
		b, err := d.Alloc(int64(4 * len(h)))
		if err != nil {
			return "", err
		}
		bufs = append(bufs, b)
		if err := d.Upload(b, h); err != nil {
			return "", err
		}
	}
	kt := p.k.Tile
	_, f, err := d.Compile(kt, kt.Meta["num_warps"], bufs)
	if err != nil {
		return "", err
	}
	if err := d.Launch(f, kt, p.k.Grid, bufs...); err != nil {
		return "", err
	}
	got := p.args[len(p.args)-1]
	if err := d.Download(got, bufs[len(bufs)-1].(*cuda.Buffer)); err != nil {
		return "", err
	}
	maxRel, normRel, bad := p.check(c, got, peerTol(prec))
	check := "ok"
	if bad > 0 {
		check = fmt.Sprintf("FAIL (%d bad)", bad)
	}
	launch := func() error { return d.LaunchN(batch, f, kt, p.k.Grid, bufs...) }
	for spent := 0.0; spent < o.warmMs; {
		ms, err := timer.Time(launch)
		if err != nil {
			return "", err
		}
		spent += ms
	}
	ts := make([]float64, max(1, o.reps/batch))
	for i := range ts {
		ms, err := timer.Time(launch)
		if err != nil {
			return "", err
		}
		ts[i] = ms / batch
	}
	sort.Float64s(ts)
	ms := ts[len(ts)/2]
	if math.IsNaN(ms) {
		return "", fmt.Errorf("no time")
	}
	return fmt.Sprintf("%s\t%v\t%.3f\t%.1f\t%.2e\t%.2e\t%v\t%d\t%d\t%d\t%s\n", c.name, prec, ms, c.flops()/(ms*1e-3)/1e12,
		maxRel, normRel, kt.Meta, f.Regs, (f.StaticShared+f.DynShared)>>10, f.Local, check), nil
}
