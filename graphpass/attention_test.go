package graphpass

import (
	"fmt"
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/analysis"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestAttentionPatterns: which attention patterns are claimed, as what
// groups, and what the claim recognised (a causal mask, the scale folded
// into Q's block), from graphs as Gorgonia users write them.
func TestAttentionPatterns(t *testing.T) {
	const b, s, d = 2, 6, 4
	must := G.Must
	tri := func(masked float64) *tensor.Dense {
		v := make([]float64, s*s)
		for i := range s {
			for j := i + 1; j < s; j++ {
				v[i*s+j] = masked
			}
		}
		return tensor.New(tensor.WithShape(s, s), tensor.WithBacking(v))
	}
	type built struct {
		roots G.Nodes
		grad  bool
	}
	attend := func(g *G.ExprGraph, q, k, v *G.Node, mask func(*G.Node) *G.Node) *G.Node {
		sc := must(G.Mul(must(G.BatchedMatMul(q, k, false, true)), G.NewConstant(0.5)))
		if mask != nil {
			sc = mask(sc)
		}
		return must(G.BatchedMatMul(must(G.SoftMax(sc)), v, false, false))
	}
	cases := []struct {
		name  string
		build func(g *G.ExprGraph, q, k, v *G.Node) built
		want  []string // the groups of attention kinds, as kinds() writes them
		check func(t *testing.T, a *attention)
	}{
		{"inference: one kernel, the scale folded", func(g *G.ExprGraph, q, k, v *G.Node) built {
			return built{G.Nodes{attend(g, q, k, v, nil)}, false}
		}, []string{"attention:A,⊙,Softmax{-1,,A"}, func(t *testing.T, a *attention) {
			if a.scale == nil || a.scaleC != 0.5 || a.lse != nil {
				t.Errorf("scale %v (%v), lse %v: want the Mul by 0.5 folded, no log-sum-exp", a.scale, a.scaleC, a.lse)
			}
		}},
		{"training: a forward and two backward kernels, the scale's gradient a Σ output", func(g *G.ExprGraph, q, k, v *G.Node) built {
			return built{G.Nodes{attend(g, q, k, v, nil)}, true}
		}, []string{"attention:A,⊙,Softmax{-1,,A +A", "attention_dkv:Aᵀ,⊙,Σ[0,Aᵀ +Aᵀ +Σ[0", "attention_dq:A,SoftmaxDiff{-1,,⊙,A +A +A"}, func(t *testing.T, a *attention) {
			if len(a.sums) != 1 || len(a.rowSums) != 1 || a.lse == nil || a.delta == nil {
				t.Errorf("sums %v, row sums %v, lse %v, delta %v", a.sums, a.rowSums, a.lse, a.delta)
			}
		}},
		{"a causal constant of −∞: key blocks above the diagonal skipped", func(g *G.ExprGraph, q, k, v *G.Node) built {
			c := G.NewConstant(tri(math.Inf(-1)), G.In(g))
			return built{G.Nodes{attend(g, q, k, v, func(x *G.Node) *G.Node { return must(G.BroadcastAdd(x, c, nil, []byte{0})) })}, true}
		}, []string{"attention:A,⊙,Reshape(1,,Repeat0,+,Softmax{-1,,A +A", "attention_dkv:Aᵀ,⊙,Σ[0,Aᵀ +Aᵀ +Σ[0", "attention_dq:A,SoftmaxDiff{-1,,⊙,A +A +A"}, func(t *testing.T, a *attention) {
			if a.causal == nil || !a.skipsBlocks() {
				t.Errorf("causal %v, skips blocks %v", a.causal, a.skipsBlocks())
			}
		}},
		{"a causal constant of −1e9: computed from indices, no block skipped", func(g *G.ExprGraph, q, k, v *G.Node) built {
			c := G.NewConstant(tri(-1e9), G.In(g))
			return built{G.Nodes{attend(g, q, k, v, func(x *G.Node) *G.Node { return must(G.BroadcastAdd(x, c, nil, []byte{0})) })}, false}
		}, []string{"attention:A,⊙,Reshape(1,,Repeat0,+,Softmax{-1,,A"}, func(t *testing.T, a *attention) {
			if a.causal == nil || a.skipsBlocks() {
				t.Errorf("causal %v, skips blocks %v", a.causal, a.skipsBlocks())
			}
		}},
		{"a constant that is not triangular is loaded", func(g *G.ExprGraph, q, k, v *G.Node) built {
			m := tri(math.Inf(-1))
			m.Data().([]float64)[s+5] = 1 // below the diagonal
			c := G.NewConstant(m, G.In(g))
			return built{G.Nodes{attend(g, q, k, v, func(x *G.Node) *G.Node { return must(G.BroadcastAdd(x, c, nil, []byte{0})) })}, false}
		}, []string{"attention:A,⊙,Reshape(1,,Repeat0,+,Softmax{-1,,A"}, func(t *testing.T, a *attention) {
			if a.causal != nil {
				t.Errorf("causal %v", a.causal)
			}
		}},
		{"a mask that another attention reads is read, not computed", func(g *G.ExprGraph, q, k, v *G.Node) built {
			m := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, s, s), G.WithName("m"))
			m2 := must(G.Mul(m, G.NewConstant(-1e9)))
			add := func(x *G.Node) *G.Node { return must(G.Add(x, m2)) }
			return built{G.Nodes{attend(g, q, k, v, add), attend(g, k, q, v, add)}, false}
		}, []string{"attention:A,⊙,+,Softmax{-1,,A", "attention:A,⊙,+,Softmax{-1,,A"}, nil},
		{"probabilities read by the user: no flash kernel", func(g *G.ExprGraph, q, k, v *G.Node) built {
			p := must(G.SoftMax(must(G.BatchedMatMul(q, k, false, true))))
			return built{G.Nodes{must(G.BatchedMatMul(p, v, false, false)), p}, false}
		}, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			q := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, s, d), G.WithName("q"))
			k := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, s, d), G.WithName("k"))
			v := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, s, d), G.WithName("v"))
			bt := c.build(g, q, k, v)
			writeOut := map[*G.Node]bool{}
			for _, r := range bt.roots {
				writeOut[r] = true
			}
			if bt.grad {
				cost := must(G.Sum(must(G.Square(bt.roots[0]))))
				grads, err := G.Grad(cost, q, k, v)
				if err != nil {
					t.Fatal(err)
				}
				for _, n := range append(grads, cost) {
					writeOut[n] = true
				}
			}
			gr, err := Import(g)
			if err != nil {
				t.Fatal(err)
			}
			groups := Partition(gr, Options{MatMul: true, WriteOut: writeOut, Target: CPU(2)})
			var got []*Group
			var a *attention
			for _, grp := range groups {
				if grp.attn != nil {
					got, a = append(got, grp), grp.attn
				}
			}
			if gk, wk := kinds(got), c.want; len(gk) != len(wk) || len(gk) > 0 && !equalStrings(gk, wk) {
				t.Fatalf("attention groups %q, want %q", gk, wk)
			}
			for _, grp := range got {
				if _, err := Emit(grp, CPU(2), 0); err != nil {
					t.Fatalf("%v: %v", grp, err)
				}
			}
			if c.check != nil && a != nil {
				c.check(t, a)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestHeadsPatterns: per-head projections, attention and a Concat become
// the heads' kernels (the weights stacked, one product, one attention
// kernel over the heads) only when every head computes alike from one x.
func TestHeadsPatterns(t *testing.T) {
	const b, s, d, h = 2, 6, 8, 2
	dh := d / h
	must := G.Must
	cases := []struct {
		name   string
		scales []float64 // each head's
		twoXs  bool      // head 1 projects another input
		merged bool
		limit  int // Options.MaxElements
	}{
		{"alike heads", []float64{0.5, 0.5}, false, true, 0},
		{"a head with another scale", []float64{0.5, 0.25}, false, false, 0},
		{"a head projecting another input", []float64{0.5, 0.5}, true, false, 0},
		// every value within the bound (x and the concatenation: 96
		// elements), the projections' stack not (288): the heads' own
		// kernels could not index it
		{"stacks past Options.MaxElements", []float64{0.5, 0.5}, false, false, 200},
		{"stacks within Options.MaxElements", []float64{0.5, 0.5}, false, true, 384},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float64, G.WithShape(b*s, d), G.WithName("x"))
			x2 := G.NewMatrix(g, tensor.Float64, G.WithShape(b*s, d), G.WithName("x2"))
			var outs G.Nodes
			for i := range h {
				src := x
				if c.twoXs && i == 1 {
					src = x2
				}
				proj := func(name string) *G.Node {
					w := G.NewMatrix(g, tensor.Float64, G.WithShape(d, dh), G.WithName(name+string(rune('0'+i))))
					return must(G.Reshape(must(G.Mul(src, w)), tensor.Shape{b, s, dh}))
				}
				q, k, v := proj("wq"), proj("wk"), proj("wv")
				sc := must(G.Mul(must(G.BatchedMatMul(q, k, false, true)), G.NewConstant(c.scales[i])))
				o := must(G.BatchedMatMul(must(G.SoftMax(sc)), v, false, false))
				outs = append(outs, must(G.Reshape(o, tensor.Shape{b * s, dh})))
			}
			out := must(G.Concat(1, outs...))
			gr, err := Import(g)
			if err != nil {
				t.Fatal(err)
			}
			groups := Partition(gr, Options{MatMul: true, WriteOut: map[*G.Node]bool{out: true}, Target: CPU(2), MaxElements: c.limit})
			kinds := map[GroupKind]int{}
			for _, grp := range groups {
				kinds[grp.Kind]++
				if _, err := Emit(grp, CPU(2), 0); err != nil {
					t.Fatalf("%v: %v", grp, err)
				}
			}
			want := map[GroupKind]int{AttentionGroup: h}
			if c.merged {
				want = map[GroupKind]int{HeadsWeightsGroup: 1, HeadsProjGroup: 1, AttentionGroup: 1}
			}
			for k, n := range want {
				if kinds[k] != n {
					t.Errorf("%d %v groups, want %d (%v)", kinds[k], k, n, kinds)
				}
			}
		})
	}
}

// multiHead is h heads of f32 attention over an input x [b·s, d] as the
// bench's encoder writes them (per head q, k and v = Reshape(x·W), the
// scores scaled, softmax, ·v, Reshape), and the Concat of their outputs;
// ws are the weights, q, k, v a head in turn.
func multiHead(g *G.ExprGraph, b, s, d, h int, scale float32) (out *G.Node, ws G.Nodes) {
	must := G.Must
	dh := d / h
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(b*s, d), G.WithName("x"))
	var outs G.Nodes
	for i := range h {
		proj := func(name string) *G.Node {
			w := G.NewMatrix(g, tensor.Float32, G.WithShape(d, dh), G.WithName(fmt.Sprintf("%s%d", name, i)))
			ws = append(ws, w)
			return must(G.Reshape(must(G.Mul(x, w)), tensor.Shape{b, s, dh}))
		}
		q, k, v := proj("wq"), proj("wk"), proj("wv")
		sc := must(G.Mul(must(G.BatchedMatMul(q, k, false, true)), G.NewConstant(scale)))
		o := must(G.BatchedMatMul(must(G.SoftMax(sc)), v, false, false))
		outs = append(outs, must(G.Reshape(o, tensor.Shape{b * s, dh})))
	}
	return must(G.Concat(1, outs...)), ws
}

// TestHeadsAttentionTiles: the heads' attention kernels of a BERT-base
// layer (batch 8, 12 heads, seq 512, head dim 64) in TF32 on the H200 run
// 8·12 programs per block of the sequence, a wave of 128-row blocks: the
// tiles of the wide rule (128 queries at 4 warps for the forward and dQ,
// 128 keys for dK/dV), not those of a grid of the batch alone. The heads'
// weight gradients xᵀ·dP in 3xTF32 take the staged swapped form at 64×64
// (TF32 keeps tuneMatMul's tiles).
func TestHeadsAttentionTiles(t *testing.T) {
	const b, s, d, h = 8, 512, 768, 12
	must := G.Must
	g := G.NewGraph()
	out, ws := multiHead(g, b, s, d, h, 0.125)
	cost := must(G.Sum(must(G.Square(out))))
	if _, err := G.Grad(cost, ws...); err != nil {
		t.Fatal(err)
	}
	gr, err := Import(g)
	if err != nil {
		t.Fatal(err)
	}
	groups := Partition(gr, Options{MatMul: true, Target: H200})
	want := map[GroupKind]tile.Meta{
		AttentionGroup:    {"BLOCK_M": 128, "BLOCK_N": 32, "num_stages": 3, "num_warps": 8, "wgmma": 1},
		AttentionDQGroup:  {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "wgmma": 1},
		AttentionDKVGroup: {"BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8, "wgmma": 1},
	}
	seen := map[GroupKind]bool{}
	for _, grp := range groups {
		w, ok := want[grp.Kind]
		if !ok {
			continue
		}
		if grp.heads == nil {
			t.Fatalf("%v: not the heads' kernel", grp)
		}
		seen[grp.Kind] = true
		k, err := Emit(grp, H200, tile.PrecTF32)
		if err != nil {
			t.Fatal(err)
		}
		if got := k.Tile.Meta; got["BLOCK_M"] != w["BLOCK_M"] || got["BLOCK_N"] != w["BLOCK_N"] || got["num_warps"] != w["num_warps"] || got["num_stages"] != w["num_stages"] || got["wgmma"] != w["wgmma"] {
			t.Errorf("%v: meta %v, want %v", grp.Kind, got, w)
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("attention kernels %v, want the forward, dQ and dK/dV", seen)
	}
	grads := 0
	for _, grp := range groups {
		if grp.Kind != HeadsGradGroup {
			continue
		}
		grads++
		for _, c := range []struct {
			prec   tile.Precision
			staged bool
		}{{tile.PrecTF32x3, true}, {tile.PrecTF32, false}} {
			k, err := Emit(grp, H200, c.prec)
			if err != nil {
				t.Fatal(err)
			}
			m := k.Tile.Meta
			staged := m["wg_stage"] == 1 && m["wgmma"] == 2 && m["BLOCK_M"] == 64 && m["BLOCK_N"] == 64 && m["num_warps"] == 4 && m["num_stages"] == 6
			if staged != c.staged || (!c.staged && m["wg_stage"] != 0) {
				t.Errorf("%v at %v: meta %v, staged form %v, want %v", grp, c.prec, m, staged, c.staged)
			}
			// 3xTF32: 144 or 288 programs (64×64 tiles of 12 or 24
			// weights' 768×64) for 132 SMs: K's 4096 tokens in parts (4
			// or 2), added into zeroed outputs, for four programs an SM;
			// TF32 in one part (headsSplit)
			progs := k.Grid[0] * k.Grid[1] * len(grp.dw)
			want := 1
			for c.prec == tile.PrecTF32x3 && progs*want < 4*H200.SMs {
				want *= 2
			}
			split := max(m["SPLIT_K"], 1)
			if split != want || k.Accumulates != (want > 1) || k.Grid[2] != want*len(grp.dw) || c.prec == tile.PrecTF32x3 && want < 2 {
				t.Errorf("%v at %v: meta %v, grid %v, accumulates %v: want K in %d parts", grp, c.prec, m, k.Grid, k.Accumulates, want)
			}
		}
	}
	if grads == 0 {
		t.Fatal("no heads_grad kernel")
	}
}

// TestAttentionTrainingTiles: the tiles of a training step's attention
// kernels at TF32, B4 H16 S2048 D64 (the bench's attention_fwd_bwd at the
// peer size): on the H200 all three on wgmma at 8 warps (the forward
// 128×32, dQ 64 keys a step, dK/dV 64 queries a step: tilefuse tune,
// 2026-12-03); with 160 KiB of shared memory (not Hopper's) at 4 warps on
// mma.sync; at S512 dQ too on wgmma at 64 keys a step (faster there since
// P's exp2 flushes and dS's scale left the loop: r28j).
func TestAttentionTrainingTiles(t *testing.T) {
	type want map[GroupKind]tile.Meta
	for _, c := range []struct {
		name   string
		seq    int
		target Target
		want   want
	}{
		{"H200, S2048", 2048, H200, want{
			AttentionGroup:    {"BLOCK_M": 128, "BLOCK_N": 32, "num_stages": 3, "num_warps": 8, "wgmma": 1},
			AttentionDQGroup:  {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "wgmma": 1},
			AttentionDKVGroup: {"BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8, "wgmma": 1},
		}},
		{"H200, S512", 512, H200, want{
			AttentionGroup:    {"BLOCK_M": 128, "BLOCK_N": 32, "num_stages": 3, "num_warps": 8, "wgmma": 1},
			AttentionDQGroup:  {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "wgmma": 1},
			AttentionDKVGroup: {"BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8, "wgmma": 1},
		}},
		{"160 KiB of shared memory, S2048", 2048, GPU(132, 1024, 160<<10), want{
			AttentionGroup:    {"BLOCK_M": 128, "BLOCK_N": 32, "num_stages": 3, "num_warps": 4},
			AttentionDQGroup:  {"BLOCK_M": 128, "BLOCK_N": 32, "num_warps": 4},
			AttentionDKVGroup: {"BLOCK_M": 32, "BLOCK_N": 128, "num_warps": 4},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			nb := 64 * 2048 / c.seq // B·H: 64 at S2048, 256 at S512
			gr := attentionTraining(t, nb, c.seq, 0.125)
			seen := map[GroupKind]bool{}
			for _, grp := range Partition(gr, Options{MatMul: true, Target: c.target}) {
				w, ok := c.want[grp.Kind]
				if !ok {
					continue
				}
				seen[grp.Kind] = true
				k, err := Emit(grp, c.target, tile.PrecTF32)
				if err != nil {
					t.Fatal(err)
				}
				got := k.Tile.Meta
				for _, key := range []string{"BLOCK_M", "BLOCK_N", "num_warps", "num_stages", "wgmma"} {
					if got[key] != w[key] {
						t.Errorf("%v: meta %v, want %v", grp.Kind, got, w)
						break
					}
				}
			}
			if len(seen) != len(c.want) {
				t.Fatalf("attention kernels %v, want the forward, dQ and dK/dV", seen)
			}
		})
	}
}

// TestAttentionExpForms: with TF32 or bf16 products the forward's and the
// backward's P are 2^(x·log₂e − m·log₂e) that may flush subnormal results
// (Exp2Flush: the rounded products and sums of P cannot tell), with ieee
// and 3xTF32 the exact e^x; on the H200, a training graph's three kernels.
func TestAttentionExpForms(t *testing.T) {
	groups := Partition(attentionTraining(t, 4, 256, 0.125), Options{MatMul: true, Target: H200})
	for _, c := range []struct {
		prec    tile.Precision
		rounded bool
	}{{tile.PrecTF32, true}, {tile.PrecBF16, true}, {tile.PrecTF32x3, false}, {tile.PrecIEEE, false}} {
		t.Run(c.prec.String(), func(t *testing.T) {
			kernels := 0
			for _, grp := range groups {
				switch grp.Kind {
				case AttentionGroup, AttentionDQGroup, AttentionDKVGroup:
				default:
					continue
				}
				kernels++
				k, err := Emit(grp, H200, c.prec)
				if err != nil {
					t.Fatal(err)
				}
				exp, flush, plain := 0, 0, 0
				k.Tile.Walk(func(v *tile.Value) {
					switch {
					case v.Op == tile.OpExp:
						exp++
					case v.Op == tile.OpExp2 && v.Aux == 1:
						flush++
					case v.Op == tile.OpExp2:
						plain++
					}
				})
				if c.rounded && (flush == 0 || exp+plain != 0) || !c.rounded && (exp == 0 || flush+plain != 0) {
					t.Errorf("%v: exp %d, exp2 flushing %d, exp2 %d; rounded %v", grp.Kind, exp, flush, plain, c.rounded)
				}
			}
			if kernels != 3 {
				t.Fatalf("%d attention kernels, want the forward, dQ and dK/dV", kernels)
			}
		})
	}
}

// TestAttentionBackwardScaleHoisted: dS's constant factor (the gradient of
// the scores' scale) leaves the backward kernels' loops, as one multiply
// of dQ's and dK's sums after them, where it is a power of two or the
// products are rounded (TF32, bf16); there the scores' own scale joins the
// exponent's log₂e. A scale of 0.1 at ieee or 3xTF32 stays in the loop.
func TestAttentionBackwardScaleHoisted(t *testing.T) {
	for _, c := range []struct {
		name    string
		scale   float64
		prec    tile.Precision
		hoisted bool
	}{
		{"0.125, tf32", 0.125, tile.PrecTF32, true},
		{"0.1, tf32", 0.1, tile.PrecTF32, true},
		{"0.1, bf16", 0.1, tile.PrecBF16, true},
		{"0.125, ieee", 0.125, tile.PrecIEEE, true},
		{"0.1, ieee", 0.1, tile.PrecIEEE, false},
		{"0.1, 3xTF32", 0.1, tile.PrecTF32x3, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			seen := 0
			for _, grp := range Partition(attentionTraining(t, 4, 256, float32(c.scale)), Options{MatMul: true, Target: H200}) {
				if grp.Kind != AttentionDQGroup && grp.Kind != AttentionDKVGroup {
					continue
				}
				seen++
				kern, err := Emit(grp, H200, c.prec)
				if err != nil {
					t.Fatal(err)
				}
				// the multiplies by the scale that the stored values depend
				// on: inside the loop, or after it
				in, after := 0, 0
				scale := float64(float32(c.scale))
				var walk func(vs []*tile.Value, loop bool)
				live := analysis.Live(kern.Tile)
				walk = func(vs []*tile.Value, loop bool) {
					for _, v := range vs {
						if v.Op == tile.OpFor {
							walk(v.Body.Values, true)
						}
						if v.Op != tile.OpMul || !live[v.ID] {
							continue
						}
						for _, a := range v.Args {
							for a.Op == tile.OpSplat {
								a = a.Args[0]
							}
							if a.Op == tile.OpConst && a.AuxF == scale {
								if loop {
									in++
								} else {
									after++
								}
							}
						}
					}
				}
				walk(kern.Tile.Body.Values, false)
				// in the loop: the scores' scale where it does not join
				// log₂e (the exact exp at ieee and 3xTF32), dS's where it
				// is not hoisted
				wantIn, wantAfter := 0, 1
				if c.prec == tile.PrecIEEE || c.prec == tile.PrecTF32x3 {
					wantIn = 1
				}
				if !c.hoisted {
					wantIn, wantAfter = wantIn+1, 0
				}
				if in != wantIn || after != wantAfter {
					t.Errorf("%v: %d multiplies by the scale in the loop, %d after; want %d, %d\n%s", grp.Kind, in, after, wantIn, wantAfter, kern.Tile)
				}
			}
			if seen != 2 {
				t.Fatalf("%d backward kernels, want dQ and dK/dV", seen)
			}
		})
	}
}

// attentionTraining imports a float32 training graph of attention as
// users write it: nb batches·heads of seq queries and keys at head dim 64,
// scores scaled by scale, the loss Σo², gradients of q, k and v.
func attentionTraining(t *testing.T, nb, seq int, scale float32) *Graph {
	t.Helper()
	must := G.Must
	g := G.NewGraph()
	in := func(name string) *G.Node {
		return G.NewTensor(g, tensor.Float32, 3, G.WithShape(nb, seq, 64), G.WithName(name))
	}
	q, k, v := in("q"), in("k"), in("v")
	sc := must(G.Mul(must(G.BatchedMatMul(q, k, false, true)), G.NewConstant(scale)))
	o := must(G.BatchedMatMul(must(G.SoftMax(sc)), v, false, false))
	if _, err := G.Grad(must(G.Sum(must(G.Square(o)))), q, k, v); err != nil {
		t.Fatal(err)
	}
	gr, err := Import(g)
	if err != nil {
		t.Fatal(err)
	}
	return gr
}
