package graphpass

import (
	"math"
	"testing"

	"github.com/tilefuse/tilefuse/ops"
	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/interp"
	"github.com/tilefuse/tilefuse/tile/tiletest"
)

// TestTransposedProducts: on a CPU whose kernels are machine code, the
// product that only a col2im reads (a convolution's patches' gradient) is
// stored column by column (transposedProducts), computed as its transpose;
// not on a GPU, not on the executor, and not where the caller reads it.
// On the reference interpreter (odd sizes: tiles masked on both sides)
// its kernel writes element (i, j) of the product at j·M + i and nothing
// past it, and the col2im's kernel, reading it so, gives the image's
// gradient bit for bit as the kernels of the row-major form do.
func TestTransposedProducts(t *testing.T) {
	for _, c := range []struct {
		name   string
		target Target
		keep   bool
		want   bool
	}{
		{"native CPU", nativeCPU, false, true},
		{"native CPU(16)", Target{Cores: 16, Native: true}, false, true},
		{"native CPU, the product read by the caller", nativeCPU, true, false},
		{"the executor", CPU(2), false, false},
		{"H200", H200, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			gr := convGrad(t, []int{3, 2, 9, 7}, []int{5, 2, 3, 3}, true)
			var prod, col2im *Node // the patches' gradient [3·9·7, 2·3·3] and its col2im
			for _, n := range gr.Nodes {
				if n.Info.Kind != ops.Col2Im {
					continue
				}
				col2im = n
				for p := n.Inputs[0]; p != nil; {
					if p.Info.Kind == ops.MatMul {
						prod = p
						break
					}
					if p.Info.Kind != ops.Reshape || len(p.Inputs) != 1 {
						break
					}
					p = p.Inputs[0]
				}
			}
			if prod == nil || !sameShape(prod.Info.Shape, []int{189, 18}) {
				t.Fatalf("no product [189 18] before a col2im: %v", prod)
			}
			var keep *Node
			if c.keep {
				keep = prod
			}
			partitionKeeping(t, gr, c.target, keep)
			if prod.ColMajor() != c.want {
				t.Fatalf("the product stored column by column: %v, want %v", prod.ColMajor(), c.want)
			}
			if !c.want {
				return
			}
			pg, cg := prod.Group, col2im.Group
			if pg == nil || pg.Root != prod || cg == nil || cg == pg {
				t.Fatalf("the product's group %v, the col2im's %v", pg, cg)
			}
			m, n, k := 189, 18, productK(prod)
			rng := tiletest.RNG(c.name)
			vals := map[*Node][]float32{}
			var args []any
			for _, in := range pg.Inputs {
				vals[in] = tiletest.Uniform(rng, numel(in.Info.Shape), -1, 1)
				args = append(args, vals[in])
			}
			a, b := vals[prod.Inputs[0]], vals[prod.Inputs[1]]
			at := func(i, kk int) float64 { // A(i, k), A stored k×m where transposed
				if prod.Info.TransA {
					return float64(a[kk*m+i])
				}
				return float64(a[i*k+kk])
			}
			bt := func(kk, j int) float64 {
				if prod.Info.TransB {
					return float64(b[j*k+kk])
				}
				return float64(b[kk*n+j])
			}
			kern, err := Emit(pg, c.target, 0)
			if err != nil {
				t.Fatal(err)
			}
			// computed as the transpose (not the product's tiles stored
			// lane by lane a column apart): the grid's first axis walks
			// the product's columns in tiles of BLOCK_N
			bm, bn := kern.Tile.Meta["BLOCK_M"], kern.Tile.Meta["BLOCK_N"]
			if kern.Grid[0] != (n+bn-1)/bn || kern.Grid[1] != (m+bm-1)/bm {
				t.Fatalf("grid %v at %d×%d tiles: want the transpose's, [%d %d]", kern.Grid, bm, bn, (n+bn-1)/bn, (m+bm-1)/bm)
			}
			// the transpose Bᵀ·Aᵀ reads both its operands across their rows
			// (dYᵀ and Wᵀ as stored): its dot is swapped back (swapDot), dY's
			// tile times W's, and the accumulator stored through a transpose
			trans := 0
			kern.Tile.Walk(func(v *tile.Value) {
				if v.Op == tile.OpTrans {
					trans++
				}
			})
			if trans != 1 {
				t.Fatalf("%d transposes in the kernel, want the accumulator's one:\n%v", trans, kern.Tile)
			}
			const poison = float32(-7777)
			stored := make([]float32, m*n+64)
			for i := range stored {
				stored[i] = poison
			}
			if err := interp.Interpret(kern.Tile, kern.Grid, append(args, stored)...); err != nil {
				t.Fatal(err)
			}
			for i := range m {
				for j := range n {
					want, sum := 0.0, 0.0
					for kk := range k {
						want += at(i, kk) * bt(kk, j)
						sum += math.Abs(at(i, kk) * bt(kk, j))
					}
					if got := float64(stored[j*m+i]); math.Abs(got-want) > 1e-6*(1+sum) {
						t.Fatalf("product (%d, %d) at %d·%d + %d: %g, want %g", i, j, j, m, i, got, want)
					}
				}
			}
			for i := m * n; i < len(stored); i++ {
				if stored[i] != poison {
					t.Fatalf("element %d past the product written: %g", i, stored[i])
				}
			}
			// the col2im's kernel over the column-major product against
			// the same group's kernel over the product row by row
			col2imOver := func(patches []float32) []float32 {
				t.Helper()
				kern, err := Emit(cg, c.target, 0)
				if err != nil {
					t.Fatal(err)
				}
				var args []any
				for _, in := range cg.Inputs {
					if in != prod {
						t.Fatalf("the col2im's kernel reads %v too", in)
					}
					args = append(args, patches)
				}
				img := make([]float32, numel(cg.Root.Info.Shape)+64)
				for i := range img {
					img[i] = poison
				}
				if err := interp.Interpret(kern.Tile, kern.Grid, append(args, img)...); err != nil {
					t.Fatal(err)
				}
				return img
			}
			got := col2imOver(stored[:m*n])
			rows := make([]float32, m*n)
			for i := range m {
				for j := range n {
					rows[i*n+j] = stored[j*m+i]
				}
			}
			prod.colMajor = false
			want := col2imOver(rows)
			prod.colMajor = true
			for i := range want {
				if got[i] != want[i] || i < numel(cg.Root.Info.Shape) && got[i] == poison {
					t.Fatalf("the image's gradient element %d: %g over the column-major product, %g over its rows", i, got[i], want[i])
				}
			}
		})
	}
}

// TestSwappedProducts: on a CPU whose kernels are machine code, a product
// at ieee whose operands are both read across their rows (a convolution's
// weight gradient dW = dYᵀ·patches, the patches stored column by column)
// is computed as its transpose, dot(B's tile [BN,BK], A's [BK,BM]), and
// its accumulator read through a transpose; not at TF32 (which truncates
// A and rounds B), not on the executor, not on a GPU. On the reference
// interpreter (odd sizes: tiles masked on both sides, K no multiple of
// the step) the kernel gives the product within the sums' rounding, and
// writes nothing past it.
func TestSwappedProducts(t *testing.T) {
	for _, c := range []struct {
		name   string
		target Target
		prec   tile.Precision
		want   bool
	}{
		{"native CPU", nativeCPU, tile.PrecIEEE, true},
		{"native CPU(16)", Target{Cores: 16, Native: true}, tile.PrecIEEE, true},
		{"native CPU at TF32", nativeCPU, tile.PrecTF32, false},
		{"the executor", CPU(2), tile.PrecIEEE, false},
		{"H200", H200, tile.PrecIEEE, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			gr := convGrad(t, []int{3, 2, 9, 7}, []int{5, 2, 3, 3}, true)
			partitionKeeping(t, gr, c.target, nil)
			var prod *Node // the weight gradient [5, 18] over K = 3·9·7
			for _, n := range gr.Nodes {
				if n.Info.Kind == ops.MatMul && sameShape(n.Info.Shape, []int{5, 18}) {
					prod = n
				}
			}
			if prod == nil || prod.Group == nil || prod.Group.MatMul != prod {
				t.Fatalf("no product [5 18] with a group of its own: %v", prod)
			}
			kern, err := Emit(prod.Group, c.target, c.prec)
			if err != nil {
				t.Fatal(err)
			}
			bm, bn := kern.Tile.Meta["BLOCK_M"], kern.Tile.Meta["BLOCK_N"]
			var dots, swappedDots, trans int
			kern.Tile.Walk(func(v *tile.Value) {
				switch v.Op {
				case tile.OpDot:
					dots++
					if s := v.Type.Shape; s.Dims[0] == bn && s.Dims[1] == bm && bm != bn {
						swappedDots++
					}
				case tile.OpTrans:
					trans++
				}
			})
			if dots == 0 {
				t.Fatalf("no dot in the product's kernel:\n%v", kern.Tile)
			}
			if got := swappedDots == dots && trans > 0; got != c.want {
				t.Fatalf("%d of %d dots over [BLOCK_N, BLOCK_M] = [%d, %d], %d transposes: swapped %v, want %v\n%v", swappedDots, dots, bn, bm, trans, got, c.want, kern.Tile)
			}
			if !c.want {
				return
			}
			if !prod.Inputs[1].ColMajor() {
				t.Fatalf("the patches are not stored column by column: the case does not read both operands across their rows")
			}
			m, n, k := 5, 18, productK(prod)
			rng := tiletest.RNG(c.name)
			vals := map[*Node][]float32{}
			var args []any
			for _, in := range prod.Group.Inputs {
				vals[in] = tiletest.Uniform(rng, numel(in.Info.Shape), -1, 1)
				args = append(args, vals[in])
			}
			a, b := vals[prod.Inputs[0]], vals[prod.Inputs[1]]
			const poison = float32(-7777)
			out := make([]float32, m*n*max(1, kern.Parts)+64)
			for i := range out {
				out[i] = poison
			}
			if err := interp.Interpret(kern.Tile, kern.Grid, append(args, out)...); err != nil {
				t.Fatal(err)
			}
			if kern.Combine != nil {
				t.Fatalf("a product over K = %d in parts: the test reads one part", k)
			}
			for i := range m {
				for j := range n {
					want, sum := 0.0, 0.0
					for kk := range k {
						x := float64(a[kk*m+i]) * float64(b[j*k+kk]) // A stored k×m, B n×k
						want += x
						sum += math.Abs(x)
					}
					if got := float64(out[i*n+j]); math.Abs(got-want) > 1e-6*(1+sum) {
						t.Fatalf("product (%d, %d): %g, want %g", i, j, got, want)
					}
				}
			}
			for i := m * n; i < len(out); i++ {
				if out[i] != poison {
					t.Fatalf("element %d past the product written: %g", i, out[i])
				}
			}
		})
	}
}
