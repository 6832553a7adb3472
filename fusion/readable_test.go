package fusion_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/fusion"
	"github.com/tilefuse/tilefuse/ops"
)

// model is a graph built twice (once for each machine) with its inputs'
// values, the nodes the user reads after a run, and the parameters whose
// gradients the user reads.
type model struct {
	g      *G.ExprGraph
	inputs map[*G.Node]*tensor.Dense
	read   map[string]*G.Node // by name in the test
	params G.Nodes
}

func paramMatrix(g *G.ExprGraph, rng *rand.Rand, name string, shape ...int) *G.Node {
	n := 1
	for _, k := range shape {
		n *= k
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64() / math.Sqrt(float64(shape[0]))
	}
	val := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
	if len(shape) == 1 {
		return G.NewVector(g, tensor.Float64, G.WithShape(shape...), G.WithName(name), G.WithValue(val))
	}
	return G.NewMatrix(g, tensor.Float64, G.WithShape(shape...), G.WithName(name), G.WithValue(val))
}

// lstmCell is one LSTM step written as Gorgonia users write it: the new h
// and c are not named or kept; both feed the loss, and the user reads them
// after the run to carry them into the next step.
func lstmCell(t *testing.T, b, in, hid int) (*model, func() map[string][]float64) {
	rng := rand.New(rand.NewPCG(11, 12))
	g := G.NewGraph()
	m := &model{g: g, inputs: map[*G.Node]*tensor.Dense{}, read: map[string]*G.Node{}}
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(b, in), G.WithName("x"))
	hPrev := G.NewMatrix(g, tensor.Float64, G.WithShape(b, hid), G.WithName("h_prev"))
	cPrev := G.NewMatrix(g, tensor.Float64, G.WithShape(b, hid), G.WithName("c_prev"))
	m.inputs[x], m.inputs[hPrev], m.inputs[cPrev] = randMatrix(rng, b, in, 1), randMatrix(rng, b, hid, 1), randMatrix(rng, b, hid, 1)
	gate := func(name string, act func(*G.Node) (*G.Node, error)) *G.Node {
		w, u, bias := paramMatrix(g, rng, "W"+name, in, hid), paramMatrix(g, rng, "U"+name, hid, hid), paramMatrix(g, rng, "b"+name, hid)
		m.params = append(m.params, w, u, bias)
		pre := G.Must(G.Add(G.Must(G.Mul(x, w)), G.Must(G.Mul(hPrev, u))))
		return G.Must(act(G.Must(G.BroadcastAdd(pre, bias, nil, []byte{0}))))
	}
	i, f, o, gg := gate("i", G.Sigmoid), gate("f", G.Sigmoid), gate("o", G.Sigmoid), gate("g", G.Tanh)
	c := G.Must(G.Add(G.Must(G.HadamardProd(f, cPrev)), G.Must(G.HadamardProd(i, gg))))
	h := G.Must(G.HadamardProd(o, G.Must(G.Tanh(c))))
	cost := G.Must(G.Add(G.Must(G.Mean(G.Must(G.Square(h)))), G.Must(G.Mean(c))))
	if _, err := G.Grad(cost, m.params...); err != nil {
		t.Fatal(err)
	}
	m.read["h"], m.read["c"], m.read["cost"] = h, c, cost
	ref := func() map[string][]float64 { // the cell in float64 Go
		p := map[string][]float64{}
		for _, n := range m.params {
			p[n.Name()] = floats(n.Value())
		}
		xv, hv, cv := floats(m.inputs[x]), floats(m.inputs[hPrev]), floats(m.inputs[cPrev])
		act := func(name string, r, j int, sig bool) float64 {
			s := p["b"+name][j]
			for k := 0; k < in; k++ {
				s += xv[r*in+k] * p["W"+name][k*hid+j]
			}
			for k := 0; k < hid; k++ {
				s += hv[r*hid+k] * p["U"+name][k*hid+j]
			}
			if sig {
				return 1 / (1 + math.Exp(-s))
			}
			return math.Tanh(s)
		}
		out := map[string][]float64{"h": make([]float64, b*hid), "c": make([]float64, b*hid)}
		sq, sum := 0.0, 0.0
		for r := 0; r < b; r++ {
			for j := 0; j < hid; j++ {
				cn := act("f", r, j, true)*cv[r*hid+j] + act("i", r, j, true)*act("g", r, j, false)
				hn := act("o", r, j, true) * math.Tanh(cn)
				out["c"][r*hid+j], out["h"][r*hid+j] = cn, hn
				sq, sum = sq+hn*hn, sum+cn
			}
		}
		out["cost"] = []float64{sq/float64(b*hid) + sum/float64(b*hid)}
		return out
	}
	return m, ref
}

// normBlock is a transformer-style block: y = LayerNorm(x + tanh(x·W + b)),
// with the loss Mean(y): y is the user's prediction and is not kept.
func normBlock(t *testing.T, rows, d int) (*model, func() map[string][]float64) {
	rng := rand.New(rand.NewPCG(21, 22))
	g := G.NewGraph()
	m := &model{g: g, inputs: map[*G.Node]*tensor.Dense{}, read: map[string]*G.Node{}}
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(rows, d), G.WithName("x"))
	m.inputs[x] = randMatrix(rng, rows, d, 1)
	w, bias, gamma, beta := paramMatrix(g, rng, "W", d, d), paramMatrix(g, rng, "b", d), paramMatrix(g, rng, "gamma", d), paramMatrix(g, rng, "beta", d)
	m.params = G.Nodes{w, bias, gamma, beta}
	inner := G.Must(G.Tanh(G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w)), bias, nil, []byte{0}))))
	y := layerNorm(G.Must(G.Add(x, inner)), gamma, beta)
	cost := G.Must(G.Mean(y))
	if _, err := G.Grad(cost, m.params...); err != nil {
		t.Fatal(err)
	}
	m.read["y"], m.read["cost"] = y, cost
	ref := func() map[string][]float64 {
		xv, wv, bv, gv, betav := floats(m.inputs[x]), floats(w.Value()), floats(bias.Value()), floats(gamma.Value()), floats(beta.Value())
		out := map[string][]float64{"y": make([]float64, rows*d)}
		total := 0.0
		for r := 0; r < rows; r++ {
			z := make([]float64, d)
			mu := 0.0
			for j := range z {
				s := bv[j]
				for k := 0; k < d; k++ {
					s += xv[r*d+k] * wv[k*d+j]
				}
				z[j] = xv[r*d+j] + math.Tanh(s)
				mu += z[j]
			}
			mu /= float64(d)
			v := 0.0
			for _, zj := range z {
				v += (zj - mu) * (zj - mu)
			}
			rs := 1 / math.Sqrt(v/float64(d)+1e-5)
			for j, zj := range z {
				out["y"][r*d+j] = (zj-mu)*rs*gv[j] + betav[j]
				total += out["y"][r*d+j]
			}
		}
		out["cost"] = []float64{total / float64(rows*d)}
		return out
	}
	return m, ref
}

// checkReadAfterRun runs a model on Gorgonia's machine and on tilefuse's
// (without WithKeep): every value the user reads is there and matches the
// float64 reference (Gorgonia's machine overwrites some of its own values in
// place, so it is not the reference for values), and every gradient matches
// Gorgonia's.
func checkReadAfterRun(t *testing.T, build func(*testing.T) (*model, func() map[string][]float64), opts ...fusion.Option) {
	ref, _ := build(t)
	fused, want := build(t)
	vmRef := G.NewTapeMachine(ref.g)
	defer vmRef.Close()
	vm := fusion.NewTapeMachine(fused.g, opts...)
	defer vm.Close()
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*model{ref, fused} {
		for n, v := range m.inputs {
			if err := G.Let(n, v.Clone()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := vmRef.RunAll(); err != nil {
		t.Fatal(err)
	}
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	wants := want()
	for name, n := range fused.read {
		if n.Value() == nil {
			t.Fatalf("%s (%v) has no value after RunAll\n%v", name, n.Name(), vm.Report())
		}
		got := floats(n.Value())
		if n.IsScalar() {
			got = []float64{scalar(n.Value())}
		}
		closeTo(t, name, got, wants[name], 1e-12)
	}
	for i, p := range fused.params {
		got, err := p.Grad()
		if err != nil {
			t.Fatalf("%s: %v", p.Name(), err)
		}
		w, err := ref.params[i].Grad()
		if err != nil {
			t.Fatalf("%s in Gorgonia: %v", p.Name(), err)
		}
		closeTo(t, fmt.Sprintf("d cost/d %s", p.Name()), floats(got), floats(w), 1e-11)
	}
	t.Logf("%d kernels\n%v", vm.Report().Kernels(), vm.Report())
}

// TestLSTMStateReadable: an LSTM cell's new h and c, which feed the loss and
// which the user reads to carry into the next step, have their values after
// RunAll without WithKeep.
func TestLSTMStateReadable(t *testing.T) {
	checkReadAfterRun(t, func(t *testing.T) (*model, func() map[string][]float64) { return lstmCell(t, 3, 5, 7) })
}

// TestBlockOutputReadable: a transformer-style block whose output y feeds
// the loss Mean(y): y has its value after RunAll without WithKeep.
func TestBlockOutputReadable(t *testing.T) {
	checkReadAfterRun(t, func(t *testing.T) (*model, func() map[string][]float64) { return normBlock(t, 6, 10) })
}

// TestStrayScalars: Grad differentiates every op with respect to all its
// operands, so a graph with a product by a constant (z·0.5) and LayerNorm's
// Means gets scalar contributions towards the constant's and the divisors'
// (SizeOf's) gradients, which Gorgonia never sums into a gradient and no
// Grad() reads. They are not kept readable, so no kernel computes them (nor
// the tensors only they read: z⊙dy); the user's scalars stay readable and
// right: the loss, a metric of the forward pass (Sum(y), unnamed), a metric
// of a gradient computed after Grad (Σ dw², unnamed), and a named scalar of
// Grad's chain (and the chain it is computed from). At most 19 kernels
// with the rule, 32 without (the stray scalars' reductions and one-element
// kernels) when it came.
func TestStrayScalars(t *testing.T) {
	type graph struct {
		g                   *G.ExprGraph
		x                   *G.Node
		params              G.Nodes
		loss, metric, gnorm *G.Node
		named               *G.Node
	}
	build := func() *graph {
		rng := rand.New(rand.NewPCG(41, 42))
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(6, 7), G.WithName("x"))
		w, gamma, beta := paramMatrix(g, rng, "w", 7, 5), paramMatrix(g, rng, "gamma", 5), paramMatrix(g, rng, "beta", 5)
		z := G.Must(G.Mul(G.Must(G.Mul(x, w)), G.NewConstant(0.5)))
		y := layerNorm(z, gamma, beta)
		loss := G.Must(G.Mean(G.Must(G.Square(y))))
		metric := G.Must(G.Sum(y))
		grads, err := G.Grad(loss, w, gamma, beta)
		if err != nil {
			t.Fatal(err)
		}
		gnorm := G.Must(G.Sum(G.Must(G.Square(grads[0]))))
		var named *G.Node // a stray scalar of Grad's chain the user names: readable
		for _, n := range g.AllNodes() {
			if n.IsScalar() && ops.MadeByGrad(n) && len(n.DerivOf()) == 0 && g.To(n.ID()).Len() == 0 && named == nil {
				named = n
				G.WithName("named_stray")(n)
			}
		}
		if named == nil {
			t.Fatal("Grad made no stray scalar: the test's premise is gone")
		}
		return &graph{g, x, G.Nodes{w, gamma, beta}, loss, metric, gnorm, named}
	}
	ref, fused := build(), build()
	xv := randMatrix(rand.New(rand.NewPCG(43, 44)), 6, 7, 1)
	for _, m := range []*graph{ref, fused} {
		if err := G.Let(m.x, xv.Clone()); err != nil {
			t.Fatal(err)
		}
	}
	vmRef := G.NewTapeMachine(ref.g)
	defer vmRef.Close()
	vm := fusion.NewTapeMachine(fused.g)
	defer vm.Close()
	if err := vmRef.RunAll(); err != nil {
		t.Fatal(err)
	}
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	r := vm.Report()
	stray := 0
	for _, n := range r.NotComputed {
		if strings.HasPrefix(n, "Sum(") {
			stray++
		}
	}
	if stray < 3 { // Σ(z⊙dy) for the constant, two Means' divisors
		t.Errorf("%d stray sums not computed, want at least 3: %v\n%v", stray, r.NotComputed, r)
	}
	if r.Kernels() > 19 {
		t.Errorf("%d kernels, want at most 19 (32 computing the stray scalars)\n%v", r.Kernels(), r)
	}
	for _, tc := range []struct {
		name      string
		got, want *G.Node
	}{
		{"the loss", fused.loss, ref.loss},
		{"the forward metric Sum(y)", fused.metric, ref.metric},
		{"the metric of a gradient Σ dw²", fused.gnorm, ref.gnorm},
		{"a named stray scalar", fused.named, ref.named},
	} {
		if tc.got.Value() == nil {
			t.Errorf("%s (%v) has no value after RunAll\n%v", tc.name, tc.got.Name(), r)
			continue
		}
		closeTo(t, tc.name, []float64{scalar(tc.got.Value())}, []float64{scalar(tc.want.Value())}, 1e-12)
	}
	for i, p := range fused.params {
		got, err := p.Grad()
		if err != nil {
			t.Fatalf("%s: %v", p.Name(), err)
		}
		want, err := ref.params[i].Grad()
		if err != nil {
			t.Fatalf("%s in Gorgonia: %v", p.Name(), err)
		}
		closeTo(t, "d loss/d "+p.Name(), floats(got), floats(want), 1e-11)
	}
	t.Logf("%v", r)
}

// unrolledLSTM is an LSTM unrolled over steps, written as Gorgonia users
// write one: the gates' weights shared by every step, h and c of each step
// feeding the next, and only the last h feeding the output h·V (training:
// the loss Mean(Square(h·V − target)) and the weights' gradients; else the
// output is the graph's root). Nothing is named or kept but the inputs
// and weights; the user reads every step's h and c after the run (the
// last ones to carry into the next batch). Neither a root, nor a scalar,
// nor a prediction (h·V is the prediction): they are values that leave a
// recurrent step.
//
// concat writes each gate as act([x_t, h_{t−1}]·W + b), one W of in+hid
// rows (h reaches the next step's product through a Concat).
func unrolledLSTM(t *testing.T, b, in, hid, out, steps int, train, concat bool) (*model, func() map[string][]float64) {
	rng := rand.New(rand.NewPCG(31, uint64(steps)))
	g := G.NewGraph()
	m := &model{g: g, inputs: map[*G.Node]*tensor.Dense{}, read: map[string]*G.Node{}}
	h := G.NewMatrix(g, tensor.Float64, G.WithShape(b, hid), G.WithName("h0"))
	c := G.NewMatrix(g, tensor.Float64, G.WithShape(b, hid), G.WithName("c0"))
	h0, c0 := h, c
	m.inputs[h], m.inputs[c] = randMatrix(rng, b, hid, 1), randMatrix(rng, b, hid, 1)
	xs := make([]*G.Node, steps)
	for s := range xs {
		xs[s] = G.NewMatrix(g, tensor.Float64, G.WithShape(b, in), G.WithName(fmt.Sprintf("x%d", s+1)))
		m.inputs[xs[s]] = randMatrix(rng, b, in, 1)
	}
	type gateW struct{ w, u, bias *G.Node }
	gates := map[string]gateW{}
	for _, name := range []string{"i", "f", "o", "g"} {
		var gw gateW
		if concat {
			gw = gateW{w: paramMatrix(g, rng, "W"+name, in+hid, hid), bias: paramMatrix(g, rng, "b"+name, hid)}
			m.params = append(m.params, gw.w, gw.bias)
		} else {
			gw = gateW{paramMatrix(g, rng, "W"+name, in, hid), paramMatrix(g, rng, "U"+name, hid, hid), paramMatrix(g, rng, "b"+name, hid)}
			m.params = append(m.params, gw.w, gw.u, gw.bias)
		}
		gates[name] = gw
	}
	v := paramMatrix(g, rng, "V", hid, out)
	m.params = append(m.params, v)
	for s := 0; s < steps; s++ {
		gate := func(name string, act func(*G.Node) (*G.Node, error)) *G.Node {
			gw := gates[name]
			var pre *G.Node
			if concat {
				pre = G.Must(G.Mul(G.Must(G.Concat(1, xs[s], h)), gw.w))
			} else {
				pre = G.Must(G.Add(G.Must(G.Mul(xs[s], gw.w)), G.Must(G.Mul(h, gw.u))))
			}
			return G.Must(act(G.Must(G.BroadcastAdd(pre, gw.bias, nil, []byte{0}))))
		}
		i, f, o, gg := gate("i", G.Sigmoid), gate("f", G.Sigmoid), gate("o", G.Sigmoid), gate("g", G.Tanh)
		c = G.Must(G.Add(G.Must(G.HadamardProd(f, c)), G.Must(G.HadamardProd(i, gg))))
		h = G.Must(G.HadamardProd(o, G.Must(G.Tanh(c))))
		m.read[fmt.Sprintf("h%d", s+1)], m.read[fmt.Sprintf("c%d", s+1)] = h, c
	}
	y := G.Must(G.Mul(h, v))
	m.read["y"] = y
	var target *G.Node
	if train {
		target = G.NewMatrix(g, tensor.Float64, G.WithShape(b, out), G.WithName("target"))
		m.inputs[target] = randMatrix(rng, b, out, 1)
		cost := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(y, target))))))
		if _, err := G.Grad(cost, m.params...); err != nil {
			t.Fatal(err)
		}
		m.read["cost"] = cost
	} else {
		m.params = nil
	}
	ref := func() map[string][]float64 { // the steps in float64 Go
		p := map[string][]float64{}
		for _, n := range append(m.params, v) {
			p[n.Name()] = floats(n.Value())
		}
		for _, gw := range gates {
			for _, n := range []*G.Node{gw.w, gw.u, gw.bias} {
				if n != nil {
					p[n.Name()] = floats(n.Value())
				}
			}
		}
		wx := func(name string, k, j int) float64 { return p["W"+name][k*hid+j] }
		uh := func(name string, k, j int) float64 {
			if concat {
				return p["W"+name][(in+k)*hid+j]
			}
			return p["U"+name][k*hid+j]
		}
		res := map[string][]float64{}
		hv, cv := floats(m.inputs[h0]), floats(m.inputs[c0])
		for s := 0; s < steps; s++ {
			xv := floats(m.inputs[xs[s]])
			act := func(name string, r, j int, sig bool) float64 {
				a := p["b"+name][j]
				for k := 0; k < in; k++ {
					a += xv[r*in+k] * wx(name, k, j)
				}
				for k := 0; k < hid; k++ {
					a += hv[r*hid+k] * uh(name, k, j)
				}
				if sig {
					return 1 / (1 + math.Exp(-a))
				}
				return math.Tanh(a)
			}
			hn, cn := make([]float64, b*hid), make([]float64, b*hid)
			for r := 0; r < b; r++ {
				for j := 0; j < hid; j++ {
					cn[r*hid+j] = act("f", r, j, true)*cv[r*hid+j] + act("i", r, j, true)*act("g", r, j, false)
					hn[r*hid+j] = act("o", r, j, true) * math.Tanh(cn[r*hid+j])
				}
			}
			hv, cv = hn, cn
			res[fmt.Sprintf("h%d", s+1)], res[fmt.Sprintf("c%d", s+1)] = hn, cn
		}
		yv := make([]float64, b*out)
		for r := 0; r < b; r++ {
			for j := 0; j < out; j++ {
				for k := 0; k < hid; k++ {
					yv[r*out+j] += hv[r*hid+k] * p["V"][k*out+j]
				}
			}
		}
		res["y"] = yv
		if train {
			tv, sq := floats(m.inputs[target]), 0.0
			for i, y := range yv {
				sq += (y - tv[i]) * (y - tv[i])
			}
			res["cost"] = []float64{sq / float64(len(yv))}
		}
		return res
	}
	return m, ref
}

// TestRecurrentStateReadable: an unrolled LSTM's h and c of every step,
// the last ones included (they feed only the output's product, or only the
// last h), have their values after RunAll without WithKeep, in training
// and inference, with products fused or not.
func TestRecurrentStateReadable(t *testing.T) {
	for _, c := range []struct {
		name          string
		steps         int
		train, concat bool
		opts          []fusion.Option
	}{
		{"training, 3 steps", 3, true, false, nil},
		{"training, 2 steps, products fused", 2, true, false, []fusion.Option{fusion.WithMatMulFusion(true)}},
		{"inference, 4 steps", 4, false, false, nil},
		{"inference, 2 steps, products fused", 2, false, false, []fusion.Option{fusion.WithMatMulFusion(true)}},
		{"[x, h]·W, training, 3 steps", 3, true, true, nil},
		{"[x, h]·W, inference, 3 steps, products fused", 3, false, true, []fusion.Option{fusion.WithMatMulFusion(true)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkReadAfterRun(t, func(t *testing.T) (*model, func() map[string][]float64) {
				return unrolledLSTM(t, 3, 5, 7, 4, c.steps, c.train, c.concat)
			}, c.opts...)
			// and no more: the gates stay inside their kernels (an LSTM's
			// four gates are one recurrence, in step)
			m, _ := unrolledLSTM(t, 3, 5, 7, 4, c.steps, c.train, c.concat)
			comp, err := fusion.Compile(m.g, c.opts...)
			if err != nil {
				t.Fatal(err)
			}
			gates := 0
			for _, n := range comp.Report.NoValue {
				if strings.HasPrefix(n, "Sigmoid(") {
					gates++
				}
			}
			if gates != 3*c.steps {
				t.Fatalf("%d of the %d sigmoid gates have no value, want all\n%v", gates, 3*c.steps, comp.Report)
			}
		})
	}
}
