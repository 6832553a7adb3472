package graphpass_test

import (
	"math"
	"regexp"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	. "github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// TestStoresPastTheCachesOnCPU: on a CPU whose kernels run as machine
// code, a row or elementwise group whose outputs go to the user alone, in
// memory of their own each run (Options.FreshOutputs), and take
// cpuStreamBytes (4 MiB) or more stores with the streaming hint (STREAM =
// 3: codegen/cpu/native writes such stores past the caches) and loads
// without it; not where that memory is reused, the kernels run on the
// executor or a GPU, the outputs are smaller or float64 (unmeasured where
// it would pay), or a node outside the group reads them.
func TestStoresPastTheCachesOnCPU(t *testing.T) {
	nativeCPU := Target{Cores: 2, Native: true}
	hinted := regexp.MustCompile(`(?m)^.*\bstore\b.*\{cache = streaming\}`)
	hintedLoad := regexp.MustCompile(`(?m)^.*\bload\b.*\{cache = `)
	// the group: a softmax or a LayerNorm (row groups), GELU's tanh form
	// (elementwise)
	const softmax, layerNorm, gelu = "softmax", "LayerNorm", "gelu"
	for _, c := range []struct {
		name          string
		build         string
		rows, cols    int
		fresh         bool
		target        Target
		readByProduct bool
		f64           bool
		want          bool
	}{
		{"softmax 4096×1024, memory of its own", softmax, 4096, 1024, true, nativeCPU, false, false, true},
		{"LayerNorm 4096×1024, memory of its own", layerNorm, 4096, 1024, true, nativeCPU, false, false, true},
		{"softmax 1024×1024 (4 MiB)", softmax, 1024, 1024, true, nativeCPU, false, false, true},
		{"softmax 1023×1024 (under 4 MiB)", softmax, 1023, 1024, true, nativeCPU, false, false, false},
		{"softmax 4096×1024, memory reused", softmax, 4096, 1024, false, nativeCPU, false, false, false},
		{"softmax 4096×1024 on the executor", softmax, 4096, 1024, true, CPU(2), false, false, false},
		{"softmax 4096×1024 on the H200", softmax, 4096, 1024, true, H200, false, false, false},
		{"softmax 4096×1024 read by a product", softmax, 4096, 1024, true, nativeCPU, true, false, false},
		{"softmax 4096×1024 in float64", softmax, 4096, 1024, true, nativeCPU, false, true, false},
		{"gelu 4096×1024, memory of its own", gelu, 4096, 1024, true, nativeCPU, false, false, true},
		{"gelu 1024×1023 (under 4 MiB)", gelu, 1024, 1023, true, nativeCPU, false, false, false},
		{"gelu 4096×1024, memory reused", gelu, 4096, 1024, false, nativeCPU, false, false, false},
		{"gelu 4096×1024 on the H200", gelu, 4096, 1024, true, H200, false, false, false},
		{"gelu 4096×1024 read by a product", gelu, 4096, 1024, true, nativeCPU, true, false, false},
		{"gelu 4096×1024 in float64", gelu, 4096, 1024, true, nativeCPU, false, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			dt := tensor.Float32
			if c.f64 {
				dt = tensor.Float64
			}
			x := G.NewMatrix(g, dt, G.WithShape(c.rows, c.cols), G.WithName("x"))
			var y *G.Node
			kind := RowGroup
			switch c.build {
			case layerNorm:
				y = opLayerNormAffine(x)
			case gelu:
				y, kind = opGelu(x), ElementwiseGroup
			default:
				y = opSoftmax(x)
			}
			writeOut := map[*G.Node]bool{y: true}
			if c.readByProduct { // Gorgonia's product (MatMul off) reads y
				w := G.NewMatrix(g, dt, G.WithShape(c.cols, 8), G.WithName("w"))
				writeOut[G.Must(G.Mul(y, w))] = true
			}
			gr, err := Import(g)
			if err != nil {
				t.Fatal(err)
			}
			var grp *Group
			for _, gp := range Partition(gr, Options{Target: c.target, WriteOut: writeOut, FreshOutputs: c.fresh}) {
				if gp.Root == gr.Lookup(y) {
					grp = gp
				}
			}
			if grp == nil || grp.Kind != kind {
				t.Fatalf("no %v group writes y: %v", kind, grp)
			}
			k, err := Emit(grp, c.target, tile.PrecIEEE)
			if err != nil {
				t.Fatal(err)
			}
			ir := k.Tile.String()
			stores := len(hinted.FindAllString(ir, -1))
			if got := k.Tile.Meta["STREAM"] == 3; got != c.want || (stores > 0) != c.want {
				t.Errorf("STREAM = %d, %d stores with the streaming hint: want the stores hinted %v", k.Tile.Meta["STREAM"], stores, c.want)
			}
			if c.want && hintedLoad.MatchString(ir) {
				t.Errorf("a load with a hint:\n%s", ir)
			}
		})
	}
}

// opGelu is GELU's tanh form op by op: ½·x·(1 + tanh(√(2/π)·(x +
// 0.044715·x³))).
func opGelu(x *G.Node) *G.Node {
	c := func(v float64) *G.Node {
		if x.Dtype() == tensor.Float32 {
			return G.NewConstant(float32(v))
		}
		return G.NewConstant(v)
	}
	must := G.Must
	cube := must(G.HadamardProd(must(G.HadamardProd(x, x)), x))
	u := must(G.Mul(must(G.Add(x, must(G.Mul(cube, c(0.044715))))), c(math.Sqrt(2/math.Pi))))
	return must(G.Mul(must(G.HadamardProd(x, must(G.Add(must(G.Tanh(u)), c(1))))), c(0.5)))
}
