//go:build tilefuse_cuda

package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/cuda"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/kernels"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// gpuBench measures the memory-bound kernels on the GPU against the device's
// copy bandwidth measured in the same run. Every result is checked against
// a CPU reference before its time is reported.
func gpuBench(args []string, out io.Writer) error {
	fs, o := gpuBenchFlags()
	if done, err := parse(fs, args, out); done || err != nil {
		return err
	}
	reps, warm, only := &o.reps, &o.warmMs, &o.only
	d, err := cuda.Open(0)
	if err != nil {
		return err
	}
	defer d.Close()
	timer, err := d.NewTimer()
	if err != nil {
		return err
	}
	var current string // the workload and config about to be timed
	// median times batches of `batch` launches enqueued back to back between
	// two events (so that no host launch gap is counted) and returns the
	// median time per launch.
	const batch = 10
	median := func(f func(n int) error) (float64, error) {
		if *only != "" && !strings.Contains(current, *only) {
			return math.NaN(), nil
		}
		for spent := 0.0; spent < *warm; {
			ms, err := timer.Time(func() error { return f(batch) })
			if err != nil {
				return 0, err
			}
			spent += ms
		}
		ts := make([]float64, max(1, *reps/batch))
		for i := range ts {
			ms, err := timer.Time(func() error { return f(batch) })
			if err != nil {
				return 0, err
			}
			ts[i] = ms / batch
		}
		sort.Float64s(ts)
		return ts[len(ts)/2], nil
	}
	fmt.Fprintf(out, "device: %s (sm_%d, %d SMs)\n\n", d.Name, d.Arch, d.SMs)

	// copy bandwidth: 256M f32, bytes read + written
	const nCopy = 256 << 20
	src, err := d.Alloc(4 * nCopy)
	if err != nil {
		return err
	}
	dst, err := d.Alloc(4 * nCopy)
	if err != nil {
		return err
	}
	msCopy, err := median(func(n int) error { return d.CopyN(n, dst, src, 4*nCopy) })
	if err != nil {
		return err
	}
	copyTBs := 8 * nCopy / (msCopy * 1e-3) / 1e12
	fmt.Fprintf(out, "device-to-device copy, 256M f32: %.3f ms, %.2f TB/s (read + write)\n", msCopy, copyTBs)
	// the same copy at the bytes of each row shape the bench's peer size
	// has (bench.PeerRows): what a kernel moving that much can reach, its
	// launch and last wave included (1151×8192: 75 MB read + written)
	for _, rc := range bench.PeerRows {
		nb := 4 * rc[0] * rc[1]
		ms, err := median(func(n int) error { return d.CopyN(n, dst, src, int64(nb)) })
		if err != nil {
			return err
		}
		tbs := 2 * float64(nb) / (ms * 1e-3) / 1e12
		fmt.Fprintf(out, "  at %d×%d f32: %.4f ms, %.2f TB/s (%.0f%% of 256M's)\n", rc[0], rc[1], ms, tbs, 100*tbs/copyTBs)
	}
	fmt.Fprintln(out)
	d.Free(src)
	d.Free(dst)

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tconfig\tms\tTB/s\t% of copy\tregs\tshared B\tspill B\tcheck")
	row := func(name, cfg string, ms float64, bytes float64, f *cuda.Function, check string) {
		if math.IsNaN(ms) {
			return
		}
		tbs := bytes / (ms * 1e-3) / 1e12
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.2f\t%.0f%%\t%d\t%d\t%d\t%s\n", name, cfg, ms, tbs, 100*tbs/copyTBs, f.Regs, f.StaticShared+f.DynShared, f.Local, check)
	}

	// elementwise: vec add and gelu chain at 64M
	const n = 64 << 20
	rng := tiletest.RNG("gpubench")
	x, y := tiletest.Uniform(rng, n, -4, 4), tiletest.Uniform(rng, n, -2, 2)
	a, b, c := tiletest.Uniform(rng, n, -1, 1), tiletest.Uniform(rng, n, -1, 1), tiletest.Uniform(rng, n, -2, 2)
	upload := func(h []float32) (*cuda.Buffer, error) {
		buf, err := d.Alloc(int64(4 * len(h)))
		if err != nil {
			return nil, err
		}
		return buf, d.Upload(buf, h)
	}
	bx, err := upload(x)
	if err != nil {
		return err
	}
	by, _ := upload(y)
	ba, _ := upload(a)
	bb, _ := upload(b)
	bc, _ := upload(c)
	bo, err := d.Alloc(4 * n)
	if err != nil {
		return err
	}
	got := make([]float32, n)
	// every 7th element against the float64 reference, within the
	// conformance suite's elementwise tolerance
	maxErr := func(want func(i int) float64) string {
		tol := tiletest.TolElementwise
		bad, worst := 0, 0.0
		for i := 0; i < len(got); i += 7 {
			w := want(i)
			e := math.Abs(float64(got[i]) - w)
			worst = math.Max(worst, e)
			if !(e <= tol.Abs+tol.Rel*math.Abs(w)) {
				bad++
			}
		}
		if bad > 0 {
			return fmt.Sprintf("FAIL (%d bad, worst abs %.2g)", bad, worst)
		}
		return fmt.Sprintf("ok (worst abs %.1e)", worst)
	}
	for _, w := range []struct {
		name  string
		build func(tile.Meta) (*tile.Kernel, error)
		args  func() []any
		bytes float64
		want  func(i int) float64
	}{
		{"vec_add 64M", kernels.VecAdd, func() []any { return []any{bx, by, bo, n} }, 12 * n,
			func(i int) float64 { return float64(x[i]) + float64(y[i]) }},
		{"gelu(x*a+b)*c 64M", kernels.GeluChain, func() []any { return []any{bx, ba, bb, bc, bo, n} }, 20 * n,
			func(i int) float64 {
				h := float64(x[i])*float64(a[i]) + float64(b[i])
				return 0.5 * h * (1 + math.Erf(h/math.Sqrt2)) * float64(c[i])
			}},
	} {
		for _, cfg := range []struct{ block, warps int }{{1024, 4}, {2048, 4}, {4096, 8}} {
			k, err := w.build(tile.Meta{"BLOCK": cfg.block})
			if err != nil {
				return err
			}
			args := w.args()
			_, f, err := d.Compile(k, cfg.warps, args)
			if err != nil {
				return err
			}
			grid := tile.Grid{tile.CDiv(n, cfg.block)}
			current = fmt.Sprintf("%s BLOCK=%d warps=%d", w.name, cfg.block, cfg.warps)
			ms, err := median(func(n int) error { return d.LaunchN(n, f, k, grid, args...) })
			if err != nil {
				return err
			}
			if err := d.Download(got, bo); err != nil {
				return err
			}
			row(w.name, fmt.Sprintf("BLOCK=%d warps=%d", cfg.block, cfg.warps), ms, w.bytes, f, maxErr(w.want))
		}
	}
	for _, buf := range []*cuda.Buffer{bx, by, ba, bb, bc, bo} {
		d.Free(buf)
	}

	// row kernels: softmax and LayerNorm
	for _, sh := range []struct{ rows, cols int }{{8192, 4096}, {32768, 1024}} {
		rows, cols := sh.rows, sh.cols
		xs := tiletest.Uniform(rng, rows*cols, -4, 4)
		ws, bs := tiletest.Uniform(rng, cols, 0.5, 1.5), tiletest.Uniform(rng, cols, -1, 1)
		bx, err := upload(xs)
		if err != nil {
			return err
		}
		bw, _ := upload(ws)
		bbias, _ := upload(bs)
		by, _ := d.Alloc(int64(4 * rows * cols))
		bm, _ := d.Alloc(int64(4 * rows))
		br, _ := d.Alloc(int64(4 * rows))
		got = make([]float32, rows*cols)
		// references on a sample of rows
		sample := []int{0, 1, rows / 3, rows - 1}
		softmaxCheck := func() string {
			for _, r := range sample {
				want := tiletest.SoftmaxRef(xs[r*cols:(r+1)*cols], 1, cols)
				for j, wv := range want {
					if math.Abs(float64(got[r*cols+j])-wv) > 1e-7+2e-5*wv {
						return fmt.Sprintf("FAIL row %d col %d: %g vs %g", r, j, got[r*cols+j], wv)
					}
				}
			}
			return "ok"
		}
		lnCheck := func() string {
			for _, r := range sample {
				row := xs[r*cols : (r+1)*cols]
				mu, va := 0.0, 0.0
				for _, v := range row {
					mu += float64(v)
				}
				mu /= float64(cols)
				for _, v := range row {
					va += (float64(v) - mu) * (float64(v) - mu)
				}
				rs := 1 / math.Sqrt(va/float64(cols)+1e-5)
				for j, v := range row {
					wv := (float64(v)-mu)*rs*float64(ws[j]) + float64(bs[j])
					if math.Abs(float64(got[r*cols+j])-wv) > 2e-5+2e-5*math.Abs(wv) {
						return fmt.Sprintf("FAIL row %d col %d: %g vs %g", r, j, got[r*cols+j], wv)
					}
				}
			}
			return "ok"
		}
		type variant struct {
			name  string
			build func(tile.Meta) (*tile.Kernel, error)
			meta  tile.Meta
			warps int
			grid  tile.Grid
			args  []any
			check func() string
		}
		var vs []variant
		for _, stream := range []int{0, 1} {
			for _, warps := range []int{4, 8} {
				m := tile.Meta{"BLOCK": cols, "STREAM": stream}
				vs = append(vs,
					variant{"softmax", kernels.Softmax, m, warps, tile.Grid{rows}, []any{bx, by, cols, cols}, softmaxCheck},
					variant{"layer_norm", kernels.LayerNorm, m, warps, tile.Grid{rows}, []any{bx, by, bw, bbias, bm, br, cols, cols, float32(1e-5)}, lnCheck})
			}
			for _, bmw := range [][2]int{{2, 2}, {4, 4}, {8, 8}, {2, 4}, {4, 8}} {
				bmRows, warps := bmw[0], bmw[1]
				m := tile.Meta{"BM": bmRows, "BN": cols, "STREAM": stream}
				g := tile.Grid{tile.CDiv(rows, bmRows)}
				vs = append(vs,
					variant{"softmax_2d", kernels.Softmax2D, m, warps, g, []any{bx, by, rows, cols, cols}, softmaxCheck},
					variant{"layer_norm_2d", kernels.LayerNorm2D, m, warps, g, []any{bx, by, bw, bbias, bm, br, rows, cols, cols, float32(1e-5)}, lnCheck})
			}
		}
		for _, v := range vs {
			k, err := v.build(v.meta)
			if err != nil {
				return err
			}
			_, f, err := d.Compile(k, v.warps, v.args)
			if err != nil {
				return err
			}
			cfg := fmt.Sprintf("%v warps=%d", v.meta, v.warps)
			current = fmt.Sprintf("%s %dx%d %s", v.name, rows, cols, cfg)
			ms, err := median(func(n int) error { return d.LaunchN(n, f, k, v.grid, v.args...) })
			if err != nil {
				return err
			}
			if err := d.Download(got, by); err != nil {
				return err
			}
			row(fmt.Sprintf("%s %dx%d", v.name, rows, cols), cfg, ms, 8*float64(rows*cols), f, v.check())
		}
		for _, buf := range []*cuda.Buffer{bx, bw, bbias, by, bm, br} {
			d.Free(buf)
		}
	}
	return tw.Flush()
}

// deviceCopyGBps measures a device-to-device copy of 256M float32 (bytes
// read plus written per second; the median of 10 batches of 10 copies
// after 100 ms of warm-up): the roofline of memory-bound graphs.
func deviceCopyGBps() (float64, error) {
	d, err := cuda.Open(0)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	timer, err := d.NewTimer()
	if err != nil {
		return 0, err
	}
	const n, batch = 256 << 20, 10
	src, err := d.Alloc(4 * n)
	if err != nil {
		return 0, err
	}
	defer d.Free(src)
	dst, err := d.Alloc(4 * n)
	if err != nil {
		return 0, err
	}
	defer d.Free(dst)
	cp := func() error { return d.CopyN(batch, dst, src, 4*n) }
	for spent := 0.0; spent < 100; {
		ms, err := timer.Time(cp)
		if err != nil {
			return 0, err
		}
		spent += ms
	}
	ts := make([]float64, 10)
	for i := range ts {
		ms, err := timer.Time(cp)
		if err != nil {
			return 0, err
		}
		ts[i] = ms / batch
	}
	sort.Float64s(ts)
	return 8 * n / (ts[len(ts)/2] * 1e-3) / 1e9, nil
}
