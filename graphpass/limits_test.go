package graphpass

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

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

// TestPadsWithinMaxElements: a product whose operands fit the bound but
// whose aligned copies would not reads its operands where they are (no pad
// group), on the GPU where it would copy them otherwise.
func TestPadsWithinMaxElements(t *testing.T) {
	const n = 1025
	for _, c := range []struct {
		name  string
		limit int
		a, b  []int
	}{
		{"copies within", 0, []int{n, 1056}, []int{1056, 1152}},
		{"A's copy within, B's past", 1056 * 1100, []int{n, 1056}, nil},
		{"both past", n*n + 1000, nil, nil},
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
			if prod.Kind != MatMulGroup {
				t.Fatalf("the last group is %v", prod)
			}
			if !slices.Equal(shapeOf(prod.aPad), c.a) || !slices.Equal(shapeOf(prod.bPad), c.b) {
				t.Fatalf("copies %v and %v, want %v and %v", shapeOf(prod.aPad), shapeOf(prod.bPad), c.a, c.b)
			}
			for _, grp := range groups {
				if _, err := Emit(grp, H200, tile.PrecTF32); err != nil {
					t.Fatalf("%v: %v", grp, err)
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
// kernels on a GPU, as their tensors say. Training too: its backward
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
				case !c.attention && tg.GPU() && (over || qk.Group == nil || !qk.Group.index64):
					t.Fatalf("the scores' product on a GPU: oversized %v, group %v; want a 64-bit kernel", over, qk.Group)
				}
			})
		}
	}
}
