package graphpass

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
)

// TestOversizedNodes: a node that reads or writes a tensor of more than
// MaxElements elements (2³¹ − 2²⁴, which is 127·2²⁴) joins no group on a
// CPU and says why; on a GPU it joins one whose kernel indexes in 64 bits
// (its program ids and aranges cast to i64). At MaxElements exactly both
// fuse it in 32 bits, and its small neighbours are in 32-bit kernels
// everywhere. Shapes only: no tensor of that size is allocated.
func TestOversizedNodes(t *testing.T) {
	const wide = 1 << 24
	if MaxElements != 127*wide {
		t.Fatalf("MaxElements = %d, the cases assume 127·2²⁴", MaxElements)
	}
	cases := []struct {
		name     string
		rows     int  // x is rows×2²⁴ float32
		oversize bool // exp(x) and Σx are left to Gorgonia on a CPU, 64-bit on a GPU
	}{
		{"at the bound", 127, false},
		{"2³¹ elements", 128, true},
		{"past int32", 129, true},
	}
	for _, c := range cases {
		for _, tg := range []Target{H200, CPU(16)} {
			t.Run(fmt.Sprintf("%s on %v", c.name, tg), func(t *testing.T) {
				g := G.NewGraph()
				x := G.NewMatrix(g, tensor.Float32, G.WithShape(c.rows, wide), G.WithName("x"))
				e := G.Must(G.Exp(x))
				s := G.Must(G.Sum(x, 1))
				w := G.NewMatrix(g, tensor.Float32, G.WithShape(64, 64), G.WithName("w"))
				small := G.Must(G.Tanh(G.Must(G.Exp(w))))
				gr, err := Import(g)
				if err != nil {
					t.Fatal(err)
				}
				groups := Partition(gr, Options{Target: tg, MatMul: true, WriteOut: map[*G.Node]bool{e: true, s: true, small: true}})
				left := c.oversize && !tg.GPU()
				for _, n := range []*G.Node{e, s} {
					nd := gr.Lookup(n)
					elems, over := Oversized(nd)
					if over != left || (nd.Group == nil) != left {
						t.Fatalf("%v: oversized %v (%d elements), group %v; want oversized %v", n, over, elems, nd.Group, left)
					}
					if left && (elems != c.rows*wide || nd.Info.Kind != ops.Opaque || !strings.Contains(nd.Info.Why, "32-bit offsets")) {
						t.Fatalf("%v: %d elements, kind %v, why %q", n, elems, nd.Info.Kind, nd.Info.Why)
					}
					if !left && nd.Group.index64 != c.oversize {
						t.Fatalf("%v in %v: 64-bit indices %v, want %v", n, nd.Group, nd.Group.index64, c.oversize)
					}
				}
				if grp := gr.Lookup(small).Group; grp == nil || grp.index64 {
					t.Fatalf("the small graph's tanh: group %v", grp)
				}
				for _, grp := range groups {
					k, err := Emit(grp, tg, tile.PrecTF32)
					if err != nil {
						t.Fatalf("%v: %v", grp, err)
					}
					if casts := strings.Count(k.Tile.String(), "-> i64"); (casts > 0) != grp.index64 {
						t.Fatalf("%v (64-bit: %v): %d casts to i64 in\n%v", grp, grp.index64, casts, k.Tile)
					}
				}
			})
		}
	}
}

// TestOversizedBound: Options.MaxElements lowers the bound, and never
// raises it past MaxElements; a node is oversized by its value's elements
// or any operand's (a reduction of a large value that writes a small one).
func TestOversizedBound(t *testing.T) {
	for _, c := range []struct {
		limit int
		want  []string
	}{
		{1000, []string{"exp", "Σ[1]"}},
		{100, []string{"exp", "tanh", "Σ[1]", "Σ[1]"}},
		{6400, nil},
		{0, nil},
		{MaxElements + 1000, nil},
	} {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(64, 100), G.WithName("x"))
		y := G.NewMatrix(g, tensor.Float64, G.WithShape(64, 10), G.WithName("y"))
		sx := G.Must(G.Sum(G.Must(G.Exp(x)), 1))                      // exp: 6400 elements; Σ reads 6400, writes 64
		out := G.Must(G.Add(sx, G.Must(G.Sum(G.Must(G.Tanh(y)), 1)))) // tanh: 640
		gr, err := Import(g)
		if err != nil {
			t.Fatal(err)
		}
		Partition(gr, Options{Target: CPU(2), MaxElements: c.limit, WriteOut: map[*G.Node]bool{out: true}})
		var got []string
		for _, n := range gr.Nodes {
			if _, ok := Oversized(n); ok {
				got = append(got, n.Info.Name)
				if n.Group != nil {
					t.Fatalf("limit %d: %v is oversized and in %v", c.limit, n, n.Group)
				}
			} else if n.Info.Kind == ops.Opaque {
				t.Fatalf("limit %d: %v is opaque (%s) but not oversized", c.limit, n, n.Info.Why)
			} else if n.Info.Kind != ops.Input && n.Group == nil {
				t.Fatalf("limit %d: %v is in no group", c.limit, n)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("limit %d: oversized %q, want %q", c.limit, got, c.want)
		}
	}
}

// TestPadsPastMaxElements: a product whose operands fit 32-bit offsets
// but whose aligned copies do not (the bound lowered between them) still
// reads the copies: the pad kernels of a copy past the bound and the
// product index in 64 bits (Group.index64), and one within stays 32-bit.
func TestPadsPastMaxElements(t *testing.T) {
	const n = 1025 // A's copy 1025×1056, B's 1056×1152
	for _, c := range []struct {
		name          string
		limit         int
		aWide, bWide  bool // the pad kernels in 64 bits
		prod64, out64 bool
	}{
		{"copies within", 0, false, false, false, false},
		{"A's copy within, B's past", 1056 * 1100, false, true, true, false},
		{"both past", n*n + 1000, true, true, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float32, G.WithShape(n, n), G.WithName("x"))
			w := G.NewMatrix(g, tensor.Float32, G.WithShape(n, n), G.WithName("w"))
			G.Must(G.Mul(x, w))
			gr, err := Import(g)
			if err != nil {
				t.Fatal(err)
			}
			groups := Partition(gr, Options{Target: H200, MatMul: true, Precision: tile.PrecTF32, MaxElements: c.limit})
			prod := groups[len(groups)-1]
			if prod.Kind != MatMulGroup || prod.aPad == nil || prod.bPad == nil {
				t.Fatalf("the last group is %v, copies %v and %v", prod, prod.aPad, prod.bPad)
			}
			if prod.index64 != c.prod64 || prod.out64 != c.out64 {
				t.Fatalf("the product: 64-bit %v, output 64-bit %v; want %v, %v", prod.index64, prod.out64, c.prod64, c.out64)
			}
			for _, grp := range groups[:len(groups)-1] {
				want := map[*Node]bool{prod.aPad: c.aWide, prod.bPad: c.bWide}[grp.Root]
				if grp.index64 != want {
					t.Fatalf("%v: 64-bit %v, want %v", grp, grp.index64, want)
				}
			}
			for _, grp := range groups {
				k, err := Emit(grp, H200, tile.PrecTF32)
				if err != nil {
					t.Fatalf("%v: %v", grp, err)
				}
				if casts := strings.Count(k.Tile.String(), "-> i64"); (casts > 0) != (grp.index64 || grp.out64) {
					t.Fatalf("%v: %d casts to i64", grp, casts)
				}
			}
		})
	}
}

// TestOversizedAttention: an attention pattern whose scores are larger
// than the bound but stay on chip (flash attention stores no score) is
// claimed still, its kernels in 32 bits; one that reads a mask of the
// scores' size from memory is not (its kernel would index the mask in 32
// bits), and then its ops are left to Gorgonia on a CPU and in 64-bit
// kernels on a GPU, as their tensors say (the scores' product, whose q and
// k fit, its output side alone). Training too: its backward
// kernels read and write only values of q's size.
func TestOversizedAttention(t *testing.T) {
	const b, s, d = 2, 64, 8 // q, k, v: 1024 elements; the scores 8192
	must := G.Must
	for _, c := range []struct {
		name      string
		mask      bool
		training  bool
		limit     int
		attention bool // attention groups claimed
	}{
		{"scores past the bound, on chip", false, false, 4096, true},
		{"training, scores past the bound", false, true, 4096, true},
		{"a mask past the bound", true, false, 4096, false},
		{"a mask within the bound", true, false, 8192, true},
	} {
		for _, tg := range []Target{H200, CPU(16)} {
			t.Run(fmt.Sprintf("%s on %v", c.name, tg), func(t *testing.T) {
				g := G.NewGraph()
				in := func(name string, sh ...int) *G.Node {
					return G.NewTensor(g, tensor.Float64, len(sh), G.WithShape(sh...), G.WithName(name))
				}
				q, k, v := in("q", b, s, d), in("k", b, s, d), in("v", b, s, d)
				sc := must(G.Mul(must(G.BatchedMatMul(q, k, false, true)), G.NewConstant(0.5)))
				if c.mask {
					sc = must(G.Add(sc, in("mask", b, s, s)))
				}
				out := must(G.BatchedMatMul(must(G.SoftMax(sc)), v, false, false))
				if c.training {
					if _, err := G.Grad(must(G.Sum(must(G.Square(out)))), q, k, v); err != nil {
						t.Fatal(err)
					}
				}
				gr, err := Import(g)
				if err != nil {
					t.Fatal(err)
				}
				groups := Partition(gr, Options{Target: tg, MatMul: true, MaxElements: c.limit, WriteOut: map[*G.Node]bool{out: true}})
				claimed := 0
				for _, grp := range groups {
					if grp.Kind == AttentionGroup || grp.Kind == AttentionDQGroup || grp.Kind == AttentionDKVGroup {
						claimed++
						if grp.index64 {
							t.Fatalf("%v indexes in 64 bits", grp)
						}
					}
					if _, err := Emit(grp, tg, tile.PrecIEEE); err != nil {
						t.Fatalf("%v: %v", grp, err)
					}
				}
				if want := map[bool]int{false: 0, true: 1}[c.attention]; c.training && c.attention {
					want = 3
					if claimed != want {
						t.Fatalf("%d attention groups, want %d", claimed, want)
					}
				} else if claimed != want {
					t.Fatalf("%d attention groups, want %d", claimed, want)
				}
				qk := gr.Lookup(sc).Inputs[0]
				if c.mask {
					qk = qk.Inputs[0]
				}
				_, over := Oversized(qk)
				switch {
				case c.attention && (over || qk.Group == nil):
					t.Fatalf("the scores' product: oversized %v, group %v", over, qk.Group)
				case !c.attention && !tg.GPU() && (!over || qk.Group != nil):
					t.Fatalf("the scores' product on a CPU: oversized %v, group %v; want Gorgonia's", over, qk.Group)
				case !c.attention && tg.GPU() && (over || qk.Group == nil || !qk.Group.out64):
					// q and k within the bound: only its output side in 64 bits
					t.Fatalf("the scores' product on a GPU: oversized %v, group %v; want its output in 64 bits", over, qk.Group)
				}
			})
		}
	}
}

// TestLogitsPastMaxElements: a language model's logits over a large batch
// (65536 tokens × GPT-2's 50257 words, 3.3 billion elements; x 65536×768
// and W 50257×768 far smaller) as users write them, softmax(x·Wᵀ), for the
// H200 at TF32: the product indexes its output side alone in 64 bits and
// its K loop is the 32-bit one's (wgmma, A and B by tensor copies, no
// copy under 16 bytes), the softmax's kernel indexes in 64 bits. Shapes
// only: the kernels are written and lowered to PTX, nothing allocated.
func TestLogitsPastMaxElements(t *testing.T) {
	const tokens, vocab, d = 65536, 50257, 768
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(tokens, d), G.WithName("x"))
	w := G.NewMatrix(g, tensor.Float32, G.WithShape(vocab, d), G.WithName("w"))
	logits := G.Must(G.Mul(x, G.Must(G.Transpose(w))))
	p := G.Must(G.SoftMax(logits))
	gr, err := Import(g)
	if err != nil {
		t.Fatal(err)
	}
	groups := Partition(gr, Options{Target: H200, MatMul: true, Precision: tile.PrecTF32, WriteOut: map[*G.Node]bool{p: true}})
	var prod, sm *Group
	for _, grp := range groups {
		switch grp.Kind {
		case MatMulGroup:
			prod = grp
		case RowGroup:
			sm = grp
		}
	}
	if prod == nil || sm == nil {
		t.Fatalf("groups %v: want a product and a softmax", groups)
	}
	if !prod.out64 || prod.index64 || !sm.index64 {
		t.Fatalf("product: output 64-bit %v, 64-bit %v; softmax: 64-bit %v", prod.out64, prod.index64, sm.index64)
	}
	k, err := Emit(prod, H200, tile.PrecTF32)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := codegen.Compile(k.Tile, codegen.Options{Arch: 90, NumWarps: k.Tile.Meta["num_warps"]})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"wgmma.mma_async", "cp.async.bulk.tensor.2d"} {
		if !strings.Contains(ck.PTX, f) {
			t.Errorf("the logits' product (%v): no %s", k.Tile.Meta, f)
		}
	}
	for _, f := range []string{"], 4, %r", "], 8, %r"} {
		if strings.Contains(ck.PTX, f) {
			t.Errorf("the logits' product (%v): a copy %q", k.Tile.Meta, f)
		}
	}
	if len(ck.TensorMaps) < 2 {
		t.Errorf("the logits' product: tensor maps %v, want A's and B's", ck.TensorMaps)
	}
	ks, err := Emit(sm, H200, tile.PrecTF32)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := codegen.Compile(ks.Tile, codegen.Options{Arch: 90, NumWarps: ks.Tile.Meta["num_warps"]}); err != nil {
		t.Fatalf("the softmax's kernel: %v", err)
	}
}

// TestGridsPastAxisBounds: for the H200 (at most 65535 programs on a
// launch's second and third axes) attention over 70000 batches of heads
// and a product over a batch of 70000 run flattened onto the first axis,
// their kernels lowered to PTX; a CPU keeps their grids. Shapes only.
func TestGridsPastAxisBounds(t *testing.T) {
	const nb, s, d = 70000, 16, 8
	for _, tg := range []Target{H200, CPU(16)} {
		g := G.NewGraph()
		in := func(name string, sh ...int) *G.Node {
			return G.NewTensor(g, tensor.Float32, len(sh), G.WithShape(sh...), G.WithName(name))
		}
		q, k, v := in("q", nb, s, d), in("k", nb, s, d), in("v", nb, s, d)
		out := G.Must(G.BatchedMatMul(G.Must(G.SoftMax(G.Must(G.Mul(G.Must(G.BatchedMatMul(q, k, false, true)), G.NewConstant(float32(0.35)))))), v, false, false))
		prod := G.Must(G.BatchedMatMul(in("a", nb, 5, 7), in("b", nb, 7, 6), false, false))
		gr, err := Import(g)
		if err != nil {
			t.Fatal(err)
		}
		groups := Partition(gr, Options{Target: tg, MatMul: true, Precision: tile.PrecTF32, WriteOut: map[*G.Node]bool{out: true, prod: true}})
		seen := map[GroupKind]bool{}
		for _, grp := range groups {
			kern, err := Emit(grp, tg, tile.PrecTF32)
			if err != nil {
				t.Fatalf("%v on %v: %v", grp, tg, err)
			}
			seen[grp.Kind] = true
			flat := kern.Grid[1] <= 1 && kern.Grid[2] <= 1 && strings.Count(kern.Tile.String(), "get_program_id") == 1
			if tg.GPU() != flat {
				t.Fatalf("%v on %v: grid %v, flattened %v", grp, tg, kern.Grid, flat)
			}
			if tg.GPU() {
				if _, err := codegen.Compile(kern.Tile, codegen.Options{Arch: 90, NumWarps: kern.Tile.Meta["num_warps"]}); err != nil {
					t.Fatalf("%v: %v", grp, err)
				}
			}
		}
		if !seen[AttentionGroup] || !seen[MatMulGroup] {
			t.Fatalf("groups on %v: %v", tg, groups)
		}
	}
}
