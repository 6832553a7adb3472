package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// peerOpts are the flags of peer (defined in both builds, for help).
type peerOpts struct {
	reps   int
	warmMs float64
	only   string
	precs  string
	tune   string
}

func peerFlags() (*flag.FlagSet, *peerOpts) {
	o := &peerOpts{}
	fs := flag.NewFlagSet("peer", flag.ContinueOnError)
	fs.IntVar(&o.reps, "reps", 50, "timed launches, in batches of 10 (the median batch's time per launch is reported)")
	fs.Float64Var(&o.warmMs, "warmup-ms", 100, "device time to run each kernel before timing it (clocks ramp up under load)")
	fs.StringVar(&o.only, "run", "", "only the cases whose name contains this")
	fs.StringVar(&o.precs, "precision", "ieee,tf32,bf16,tf32x3", "the precisions to run, comma-separated")
	fs.StringVar(&o.tune, "tune", "", "meta-parameter choices to run beside the heuristic's, ';'-separated, each k=v,k=v (e.g. 'BLOCK_N=256,num_stages=4')")
	return fs, o
}

// peerCase is a matrix product at the shapes the peers (cuBLAS,
// torch.compile) are measured at in bench/torch/workloads.py --peer:
// y = x·W, or with bias gelu(x·W + b) (tanh form, as the bench's
// linear_gelu). x is m×k, W k×n, inputs uniform in ±1 (W in ±1/√k).
type peerCase struct {
	name    string
	m, k, n int
	gelu    bool
}

var peerCases = []peerCase{
	{"matmul 4096³", 4096, 4096, 4096, false},
	{"linear_gelu 4096³", 4096, 4096, 4096, true},
	{"matmul 1024³", 1024, 1024, 1024, false},
	{"matmul 1000³", 1000, 1000, 1000, false},
	{"matmul 4095×4097×33", 4095, 33, 4097, false},
	{"matmul 4096×4096×50", 4096, 50, 4096, false},
}

func (c peerCase) flops() float64 { return 2 * float64(c.m) * float64(c.n) * float64(c.k) }

// peerKernel is a peer case's fused kernel for a target and precision, the
// host data of its arguments in order (inputs, then the output poisoned
// with NaN) and a float64 reference of output row r.
type peerKernel struct {
	k    *graphpass.Kernel
	args [][]float32
	x, w []float32
	b    []float32
}

func gelu64(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

func buildPeer(c peerCase, t graphpass.Target, prec tile.Precision, tune tile.Meta) (*peerKernel, error) {
	if len(tune) > 0 {
		t.Tune = func(_ *graphpass.Group, m tile.Meta) {
			for k, v := range tune {
				m[k] = v
			}
		}
	}
	rng := rand.New(rand.NewPCG(7, uint64(c.m*c.k*c.n)))
	fill := func(n int, scale float64) []float32 {
		d := make([]float32, n)
		for i := range d {
			d[i] = float32((rng.Float64()*2 - 1) * scale)
		}
		return d
	}
	p := &peerKernel{x: fill(c.m*c.k, 1), w: fill(c.k*c.n, 1/math.Sqrt(float64(c.k)))}
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(c.m, c.k), G.WithName("x"))
	w := G.NewMatrix(g, tensor.Float32, G.WithShape(c.k, c.n), G.WithName("w"))
	host := map[*G.Node][]float32{x: p.x, w: p.w}
	y := G.Must(G.Mul(x, w))
	if c.gelu {
		p.b = fill(c.n, 1)
		b := G.NewVector(g, tensor.Float32, G.WithShape(c.n), G.WithName("b"))
		host[b] = p.b
		s := G.Must(G.BroadcastAdd(y, b, nil, []byte{0}))
		cube := G.Must(G.HadamardProd(G.Must(G.HadamardProd(s, s)), s))
		inner := G.Must(G.Mul(G.Must(G.Add(s, G.Must(G.Mul(cube, G.NewConstant(float32(0.044715)))))), G.NewConstant(float32(math.Sqrt(2/math.Pi)))))
		G.Must(G.Mul(G.Must(G.HadamardProd(s, G.Must(G.Add(G.Must(G.Tanh(inner)), G.NewConstant(float32(1)))))), G.NewConstant(float32(0.5))))
	}
	gr, err := graphpass.Import(g)
	if err != nil {
		return nil, err
	}
	groups := graphpass.Partition(gr, graphpass.Options{Target: t, MatMul: true})
	if len(groups) != 1 || groups[0].Kind != graphpass.MatMulGroup {
		return nil, fmt.Errorf("peer %s: %d groups, want one matmul group", c.name, len(groups))
	}
	grp := groups[0]
	if p.k, err = graphpass.Emit(grp, t, prec); err != nil {
		return nil, err
	}
	for _, in := range grp.Inputs {
		d, ok := host[in.G]
		if !ok {
			return nil, fmt.Errorf("peer %s: kernel input %v is not x, W or b", c.name, in.G.Name())
		}
		p.args = append(p.args, d)
	}
	out := make([]float32, c.m*c.n)
	for i := range out {
		out[i] = float32(math.NaN())
	}
	p.args = append(p.args, out)
	return p, nil
}

// check compares output rows spread over the matrix (every row for small
// ones, and the last) with the float64 reference: the largest error over the largest
// reference magnitude, the relative error in the 2-norm, and the number of
// elements left unwritten or wrong beyond tol (relative to the largest
// magnitude).
func (p *peerKernel) check(c peerCase, got []float32, tol float64) (maxRel, normRel float64, bad int) {
	step := max(1, c.m/32)
	ref := make([]float64, c.n)
	var worst, refMax, errSq, refSq float64
	rows := []int{}
	for r := 0; r < c.m; r += step {
		rows = append(rows, r)
	}
	if rows[len(rows)-1] != c.m-1 {
		rows = append(rows, c.m-1) // the last row, at the edge of the last tiles
	}
	for _, r := range rows {
		for j := range ref {
			ref[j] = 0
		}
		for kk := 0; kk < c.k; kk++ {
			a := float64(p.x[r*c.k+kk])
			wr := p.w[kk*c.n : (kk+1)*c.n]
			for j := range ref {
				ref[j] += a * float64(wr[j])
			}
		}
		for j, v := range ref {
			if c.gelu {
				v = gelu64(v + float64(p.b[j]))
				ref[j] = v
			}
			e := math.Abs(float64(got[r*c.n+j]) - v)
			if math.IsNaN(e) {
				bad++
				continue
			}
			worst, refMax = max(worst, e), max(refMax, math.Abs(v))
			errSq, refSq = errSq+e*e, refSq+v*v
		}
	}
	maxRel, normRel = worst/refMax, math.Sqrt(errSq/refSq)
	if !(maxRel <= tol) {
		bad++
	}
	return maxRel, normRel, bad
}

// peerTol is the largest error peer accepts per precision: relative to the
// largest output, well above each one's rounding (fp32 sums, TF32 operands).
func peerTol(p tile.Precision) float64 {
	switch p {
	case tile.PrecIEEE:
		return 1e-5
	case tile.PrecTF32x3: // 3.2e-5 at 4096³ on the H200: the tensor cores' sums
		return 1e-4
	case tile.PrecBF16:
		return 3e-2
	}
	return 5e-3
}

// parsePrecision reads bench's and tune's -precision: one precision.
func parsePrecision(s string) (tile.Precision, error) {
	for _, p := range tile.Precisions {
		if strings.TrimSpace(s) == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("-precision %q: want ieee, tf32, tf32x3 or bf16", s)
}

func parsePrecisions(s string) ([]tile.Precision, error) {
	var out []tile.Precision
next:
	for _, f := range strings.Split(s, ",") {
		for _, p := range tile.Precisions {
			if strings.TrimSpace(f) == p.String() {
				out = append(out, p)
				continue next
			}
		}
		return nil, fmt.Errorf("-precision %q: want ieee, tf32, bf16 or tf32x3", f)
	}
	return out, nil
}

// parseTunes reads -tune: the heuristic's choice (nil) first, then each
// configuration.
func parseTunes(s string) ([]tile.Meta, error) {
	out := []tile.Meta{nil}
	for _, cfg := range strings.Split(s, ";") {
		if strings.TrimSpace(cfg) == "" {
			continue
		}
		m := tile.Meta{}
		for _, kv := range strings.Split(cfg, ",") {
			var k string
			var v int
			name, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if _, err := fmt.Sscan(val, &v); !ok || err != nil || name == "" {
				return nil, fmt.Errorf("-tune %q: want name=integer, got %q", cfg, kv)
			}
			k = name
			m[k] = v
		}
		out = append(out, m)
	}
	return out, nil
}
