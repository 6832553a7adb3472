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
	// a buffer for each value: the inputs uploaded, the copies' outputs
	// left as they are (their kernels write every element), the product's
	// output poisoned with NaN (zeros where SPLIT_K's parts add into it)
	bufOf := map[*graphpass.Node]*cuda.Buffer{}
	defer func() {
		for _, b := range bufOf {
			d.Free(b)
		}
	}()
	for _, l := range p.launches {
		for _, v := range l.args {
			if bufOf[v] != nil {
				continue
			}
			n := 1
			for _, e := range v.Info.Shape {
				n *= e
			}
			b, err := d.Alloc(int64(4 * n))
			if err != nil {
				return "", err
			}
			bufOf[v] = b
			h := p.host[v]
			if v == p.out {
				h = make([]float32, n)
				for i := range h {
					h[i] = float32(math.NaN())
					if p.k.Accumulates {
						h[i] = 0
					}
				}
			}
			if h != nil {
				if err := d.Upload(b, h); err != nil {
					return "", err
				}
			}
		}
	}
	type compiled struct {
		f    *cuda.Function
		args []any
		l    peerLaunch
	}
	var ks []compiled
	for _, l := range p.launches {
		args := make([]any, len(l.args))
		for i, v := range l.args {
			args[i] = bufOf[v]
		}
		kt := l.k.Tile
		_, f, err := d.Compile(kt, kt.Meta["num_warps"], args)
		if err != nil {
			return "", err
		}
		ks = append(ks, compiled{f, args, l})
	}
	prod := ks[len(ks)-1]
	kt := p.k.Tile
	runAll := func(n int) error {
		if len(ks) == 1 {
			return d.LaunchN(n, prod.f, kt, p.k.Grid, prod.args...)
		}
		for range n {
			for _, c := range ks {
				if err := d.Launch(c.f, c.l.k.Tile, c.l.k.Grid, c.args...); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := runAll(1); err != nil {
		return "", err
	}
	got := make([]float32, c.m*c.n)
	if err := d.Download(got, bufOf[p.out]); err != nil {
		return "", err
	}
	maxRel, normRel, bad := p.check(c, got, peerTol(prec))
	check := "ok"
	if bad > 0 {
		check = fmt.Sprintf("FAIL (%d bad)", bad)
	}
	launch := func() error { return runAll(batch) }
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
	meta := fmt.Sprint(kt.Meta)
	if len(ks) > 1 { // the time is all the kernels'
		meta = fmt.Sprintf("%s after %d copies", meta, len(ks)-1)
	}
	f := prod.f
	return fmt.Sprintf("%s\t%v\t%.3f\t%.1f\t%.2e\t%.2e\t%s\t%d\t%d\t%d\t%s\n", c.name, prec, ms, c.flops()/(ms*1e-3)/1e12,
		maxRel, normRel, meta, f.Regs, (f.StaticShared+f.DynShared)>>10, f.Local, check), nil
}
