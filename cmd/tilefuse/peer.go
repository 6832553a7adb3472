package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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
// ta stores x transposed (k×m in memory: y = Aᵀ·B of the k×m matrix, as
// a weight gradient reads its activations), tb stores W transposed (n×k:
// y = A·Bᵀ, as an input gradient reads a weight); such products are
// BatchedMatMul over one batch, Gorgonia's only op that takes the
// transposes from its user. Names give m×n×k.
type peerCase struct {
	name    string
	m, k, n int
	gelu    bool
	ta, tb  bool
	// maxElements: graphpass.Options.MaxElements (0: the default; tests
	// lower it to build the kernels of tensors past 32-bit offsets)
	maxElements int
}

var peerCases = []peerCase{
	{name: "matmul 4096³", m: 4096, k: 4096, n: 4096},
	{name: "linear_gelu 4096³", m: 4096, k: 4096, n: 4096, gelu: true},
	{name: "matmul NT 4096³", m: 4096, k: 4096, n: 4096, tb: true}, // W stored n×k: both operands K-major
	{name: "matmul 1024³", m: 1024, k: 1024, n: 1024},
	{name: "matmul 1000³", m: 1000, k: 1000, n: 1000},
	// products of fewer than a wave of 128×128 tiles (tuneMatMul's rules
	// below the wave model), GELU's epilogue at 1024³ (the bench's
	// linear_gelu large)
	{name: "matmul 2048×1024×1024", m: 2048, k: 1024, n: 1024},
	{name: "matmul 512³", m: 512, k: 512, n: 512},
	{name: "linear_gelu 1024³", m: 1024, k: 1024, n: 1024, gelu: true},
	{name: "matmul NT 1024³", m: 1024, k: 1024, n: 1024, tb: true},
	{name: "matmul TN 1024³", m: 1024, k: 1024, n: 1024, ta: true},
	// under a quarter wave: the encoder's (8×128 tokens, model 256, FF
	// 1024) second FF product and its projections
	{name: "matmul 1024×256×1024", m: 1024, k: 1024, n: 256},
	{name: "matmul 1024×256×256", m: 1024, k: 256, n: 256},
	// the MLP step's first layer (512 × 784 → 1024): 32 tiles of 128×128
	{name: "matmul 512×1024×784", m: 512, k: 784, n: 1024},
	// A·Bᵀ under a quarter wave (the model's choice from an eighth at TF32)
	{name: "matmul NT 512×1024×784", m: 512, k: 784, n: 1024, tb: true},
	{name: "matmul NT 1024×256×1024", m: 1024, k: 1024, n: 256, tb: true},
	{name: "matmul NT 512³", m: 512, k: 512, n: 512, tb: true},
	{name: "matmul 4095×4097×33", m: 4095, k: 33, n: 4097},
	{name: "matmul 4096×4096×50", m: 4096, k: 50, n: 4096},
	// the odd shapes' aligned neighbours (issue 10: an odd shape at least
	// 0.8× the aligned rate per FLOP): K = 32 beside 4095×4097×33, K = 64
	// beside K = 50
	{name: "matmul 4096×4096×32", m: 4096, k: 32, n: 4096},
	{name: "matmul 4096×4096×64", m: 4096, k: 64, n: 4096},
	// K = 50's neighbour at nearly its FLOPs, and 4095×4097×33's
	// oddities one at a time: odd output rows (4097 words: scalar
	// stores), odd K (A's copies 4 bytes wide), odd M (a masked last tile)
	{name: "matmul 4096×4096×48", m: 4096, k: 48, n: 4096},
	{name: "matmul 4096×4097×32", m: 4096, k: 32, n: 4097},
	{name: "matmul 4096×4096×33", m: 4096, k: 33, n: 4096},
	{name: "matmul 4095×4096×32", m: 4095, k: 32, n: 4096},
	// K past a multiple of 32 (a second iteration: ×34, ×36, ×40
	// against ×32 and ×48) and rows of A 4 or 8 bytes aligned (×33
	// against ×34); odd M and odd N together at K = 32
	{name: "matmul 4096×4096×34", m: 4096, k: 34, n: 4096},
	{name: "matmul 4096×4096×36", m: 4096, k: 36, n: 4096},
	{name: "matmul 4096×4096×40", m: 4096, k: 40, n: 4096},
	{name: "matmul 4095×4097×32", m: 4095, k: 32, n: 4097},
	// odd N's two effects apart: rows of 4100 words are 16-byte aligned
	// but leave a last column of tiles 4 wide, as 4097's leaves one 1
	// wide; 4224 is 33 whole tiles
	{name: "matmul 4096×4100×32", m: 4096, k: 32, n: 4100},
	{name: "matmul 4096×4224×32", m: 4096, k: 32, n: 4224},
	// 4096³'s output at other depths: a tile's time against K (1024,
	// 2048, 4096, 8192) parts its fixed cost (the pipeline's fill, the
	// epilogue's stores, the last wave) from the K loop's
	{name: "matmul 4096×4096×1024", m: 4096, k: 1024, n: 4096},
	{name: "matmul 4096×4096×2048", m: 4096, k: 2048, n: 4096},
	{name: "matmul 4096×4096×8192", m: 4096, k: 8192, n: 4096},
	// odd shapes at least 1024 on every side (issue 10's "0.8× the
	// aligned rate per FLOP at ≥ 1024"), beside 4096³ and 1024³: every
	// side odd (rows of A and B and C not 16-byte aligned), each one odd
	// alone, and 1025³ beside 1024³
	{name: "matmul 4095×4097×4099", m: 4095, k: 4099, n: 4097},
	{name: "matmul 4096×4096×4099", m: 4096, k: 4099, n: 4096},
	{name: "matmul 4096×4097×4096", m: 4096, k: 4096, n: 4097},
	{name: "matmul 4095×4096×4096", m: 4095, k: 4096, n: 4096},
	{name: "matmul 1025³", m: 1025, k: 1025, n: 1025},
	// rows 16-byte aligned, but k no multiple of 32 (A's tensor copies)
	// or n of 64 (B's)
	{name: "matmul 4096×4096×4100", m: 4096, k: 4100, n: 4096},
	{name: "matmul 4096×4100×4096", m: 4096, k: 4096, n: 4100},
	// K a multiple of 4, not of 32, at fewer columns (an MLP's 784
	// inputs at 4096 rows): A's tensor copies bound K themselves
	{name: "matmul 4096×1024×784", m: 4096, k: 784, n: 1024},
	// an odd n at fewer rows: B's copy against padBMinRows (graphpass)
	{name: "matmul 1024×4097×4096", m: 1024, k: 4096, n: 4097},
	{name: "matmul 768×4097×4096", m: 768, k: 4096, n: 4097},
	// GPT-2's embedding gradient dE = dLogitsᵀ·h (dLogits stored
	// tokens×vocab: rows of 50257)
	{name: "vocab TN 50257×768×4096", m: 50257, k: 4096, n: 768, ta: true},
	// W stored n×k (an input gradient's dY·Wᵀ): rows of k, odd
	{name: "matmul NT 4096×4096×4099", m: 4096, k: 4099, n: 4096, tb: true},
	// the BERT-base encoder layer's products (batch 8 × seq 512 rows,
	// model 768, FF 3072) forward (NN) and backward (NT: input gradients,
	// TN: weight gradients)
	{name: "bert NN 4096×3072×768", m: 4096, k: 768, n: 3072},
	{name: "bert NN gelu 4096×3072×768", m: 4096, k: 768, n: 3072, gelu: true},
	{name: "bert NN 4096×768×3072", m: 4096, k: 3072, n: 768},
	{name: "bert NN 4096×768×768", m: 4096, k: 768, n: 768},
	{name: "bert NT 4096×768×3072", m: 4096, k: 3072, n: 768, tb: true},
	{name: "bert NT 4096×3072×768", m: 4096, k: 768, n: 3072, tb: true},
	{name: "bert NT 4096×768×768", m: 4096, k: 768, n: 768, tb: true},
	{name: "bert TN 768×3072×4096", m: 768, k: 4096, n: 3072, ta: true},
	{name: "bert TN 3072×768×4096", m: 3072, k: 4096, n: 768, ta: true},
	{name: "bert TN 768×768×4096", m: 768, k: 4096, n: 768, ta: true},
	// the first two weight gradients as a graph at TF32 on Hopper runs
	// them: A transposed once by a kernel of its own, then A·B
	// (graphpass's pretranspose; the transpose is not timed here)
	{name: "bert NN 768×3072×4096", m: 768, k: 4096, n: 3072},
	{name: "bert NN 3072×768×4096", m: 3072, k: 4096, n: 768},
	// vocabulary projections (8×512 tokens, model 768): BERT's 30522 words
	// (rows 8-byte aligned), GPT-2's 50257 (an odd number: B's copies 4
	// bytes wide)
	{name: "vocab 4096×30522×768", m: 4096, k: 768, n: 30522},
	{name: "vocab 4096×50257×768", m: 4096, k: 768, n: 50257},
	// the same with the embedding matrix [vocabulary][model] as the
	// weights (tied: logits = h·Eᵀ)
	{name: "vocab NT 4096×50257×768", m: 4096, k: 768, n: 50257, tb: true},
	// a language model's logits over 16 batches of 4096 tokens: 3.3
	// billion outputs, past 32-bit offsets (graphpass.MaxElements): the
	// output side indexed in 64 bits, the K loop as the 32-bit one's
	{name: "logits NT 65536×50257×768", m: 65536, k: 768, n: 50257, tb: true},
	// the layer's products at 4000 tokens (8×500): rows not whole tiles
	{name: "bert NN 4000×3072×768", m: 4000, k: 768, n: 3072},
	{name: "bert NN 4000×768×3072", m: 4000, k: 3072, n: 768},
}

// transposed is the r×c row-major x stored c×r.
func transposed(x []float32, r, c int) []float32 {
	t := make([]float32, len(x))
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			t[j*r+i] = x[i*c+j]
		}
	}
	return t
}

func (c peerCase) flops() float64 { return 2 * float64(c.m) * float64(c.n) * float64(c.k) }

// peerKernel is a peer case's fused kernels for a target and precision:
// the product's (k, the last) and those that copy its operands first
// (graphpass's pad groups: operands whose rows are not 16-byte aligned),
// in order, each with the values its arguments are (inputs, then its
// output); the host data of the graph's inputs, and x, W and b for the
// float64 reference.
type peerKernel struct {
	k        *graphpass.Kernel
	launches []peerLaunch
	// args: the host data of the product kernel's arguments in order
	// (inputs, a padded copy's as its kernel writes it, then the output
	// poisoned with NaN), to run it alone
	args [][]float32
	host map[*graphpass.Node][]float32
	out  *graphpass.Node // the product's output
	x, w []float32
	b    []float32
}

// peerLaunch is one kernel of a peer case and the values of its
// arguments.
type peerLaunch struct {
	k    *graphpass.Kernel
	args []*graphpass.Node
}

func gelu64(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

func buildPeer(c peerCase, t graphpass.Target, prec tile.Precision, tune tile.Meta) (*peerKernel, error) {
	if len(tune) > 0 {
		t.Tune = func(grp *graphpass.Group, m tile.Meta) {
			if grp.Kind != graphpass.MatMulGroup {
				return // the choices are the product's
			}
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
	var x, w, y *G.Node
	var host map[*G.Node][]float32
	if c.ta || c.tb {
		xs, xd := []int{1, c.m, c.k}, p.x
		if c.ta {
			xs, xd = []int{1, c.k, c.m}, transposed(p.x, c.m, c.k)
		}
		ws, wd := []int{1, c.k, c.n}, p.w
		if c.tb {
			ws, wd = []int{1, c.n, c.k}, transposed(p.w, c.k, c.n)
		}
		x = G.NewTensor(g, tensor.Float32, 3, G.WithShape(xs...), G.WithName("x"))
		w = G.NewTensor(g, tensor.Float32, 3, G.WithShape(ws...), G.WithName("w"))
		host = map[*G.Node][]float32{x: xd, w: wd}
		y = G.Must(G.BatchedMatMul(x, w, c.ta, c.tb))
	} else {
		x = G.NewMatrix(g, tensor.Float32, G.WithShape(c.m, c.k), G.WithName("x"))
		w = G.NewMatrix(g, tensor.Float32, G.WithShape(c.k, c.n), G.WithName("w"))
		host = map[*G.Node][]float32{x: p.x, w: p.w}
		y = G.Must(G.Mul(x, w))
	}
	if c.gelu {
		p.b = fill(c.n, 1)
		b := G.NewVector(g, tensor.Float32, G.WithShape(c.n), G.WithName("b"))
		host[b] = p.b
		pat := []byte{0}
		if c.ta || c.tb { // y is [1][m][n]
			pat = []byte{0, 1}
		}
		s := G.Must(G.BroadcastAdd(y, b, nil, pat))
		cube := G.Must(G.HadamardProd(G.Must(G.HadamardProd(s, s)), s))
		inner := G.Must(G.Mul(G.Must(G.Add(s, G.Must(G.Mul(cube, G.NewConstant(float32(0.044715)))))), G.NewConstant(float32(math.Sqrt(2/math.Pi)))))
		G.Must(G.Mul(G.Must(G.HadamardProd(s, G.Must(G.Add(G.Must(G.Tanh(inner)), G.NewConstant(float32(1)))))), G.NewConstant(float32(0.5))))
	}
	gr, err := graphpass.Import(g)
	if err != nil {
		return nil, err
	}
	// the graph as fusion partitions it at prec: an operand whose rows are
	// not 16-byte aligned copied first (pad groups). (Transposed operands
	// are BatchedMatMul's, which pretranspose leaves as they are: the NN
	// rows of the weight gradients' shapes time the product of its copy.)
	groups := graphpass.Partition(gr, graphpass.Options{Target: t, MatMul: true, Precision: prec, MaxElements: c.maxElements})
	if len(groups) == 0 || groups[len(groups)-1].Kind != graphpass.MatMulGroup {
		return nil, fmt.Errorf("peer %s: %d groups, want a matmul group last", c.name, len(groups))
	}
	p.host = map[*graphpass.Node][]float32{}
	for i, grp := range groups {
		if i < len(groups)-1 && grp.Kind != graphpass.PadGroup {
			return nil, fmt.Errorf("peer %s: group %v before the product", c.name, grp)
		}
		k, err := graphpass.Emit(grp, t, prec)
		if err != nil {
			return nil, err
		}
		l := peerLaunch{k: k, args: append(append([]*graphpass.Node(nil), grp.Inputs...), grp.Root)}
		for _, in := range grp.Inputs {
			if in.Internal() {
				continue // written by an earlier kernel
			}
			d, ok := host[in.G]
			if !ok {
				return nil, fmt.Errorf("peer %s: kernel input %v is not x, W or b", c.name, in.G.Name())
			}
			p.host[in] = d
		}
		p.launches = append(p.launches, l)
		p.k, p.out = k, grp.Root
	}
	prod := groups[len(groups)-1]
	for _, in := range prod.Inputs {
		d, ok := p.host[in]
		if !ok { // a padded copy: its pad group's operand, padded here
			src := slices.IndexFunc(groups, func(g *graphpass.Group) bool { return g.Root == in })
			if src < 0 {
				return nil, fmt.Errorf("peer %s: no kernel writes %v", c.name, in)
			}
			from := groups[src].Inputs[0]
			d = padded(p.host[from], from.Info.Shape, in.Info.Shape)
		}
		p.args = append(p.args, d)
	}
	out := make([]float32, c.m*c.n)
	for i := range out {
		out[i] = float32(math.NaN())
		if p.k.Accumulates { // SPLIT_K: the parts add into a zeroed output
			out[i] = 0
		}
	}
	p.args = append(p.args, out)
	return p, nil
}

// padded is x, a matrix or a batch of them (shape s), each matrix in rows
// of a larger one (ps), zeros past its rows and columns, as graphpass's
// pad kernels write it.
func padded(x []float32, s, ps []int) []float32 {
	r := len(s)
	batch := 1
	if r == 3 {
		batch = s[0]
	}
	rows, cols, prows, pcols := s[r-2], s[r-1], ps[r-2], ps[r-1]
	out := make([]float32, batch*prows*pcols)
	for z := range batch {
		for i := range rows {
			copy(out[(z*prows+i)*pcols:], x[(z*rows+i)*cols:(z*rows+i+1)*cols])
		}
	}
	return out
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
