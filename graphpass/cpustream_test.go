package graphpass_test

import (
	"regexp"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	. "github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// TestStoresPastTheCachesOnCPU: on a CPU whose kernels run as machine
// code, a row group whose outputs go to the user alone, in memory of their
// own each run (Options.FreshOutputs), and take cpuStreamBytes (4 MiB) or
// more stores with the streaming hint (STREAM = 3: codegen/cpu/native
// writes such stores past the caches) and loads without it; not where that
// memory is reused, the kernels run on the executor or a GPU, the outputs
// are smaller or float64 (unmeasured where it would pay), or a node outside
// the group reads them.
func TestStoresPastTheCachesOnCPU(t *testing.T) {
	nativeCPU := Target{Cores: 2, Native: true}
	hinted := regexp.MustCompile(`(?m)^.*\bstore\b.*\{cache = streaming\}`)
	hintedLoad := regexp.MustCompile(`(?m)^.*\bload\b.*\{cache = `)
	for _, c := range []struct {
		name          string
		rows, cols    int
		ln            bool
		fresh         bool
		target        Target
		readByProduct bool
		want          bool
		f64           bool
	}{
		{"softmax 4096×1024, memory of its own", 4096, 1024, false, true, nativeCPU, false, true, false},
		{"LayerNorm 4096×1024, memory of its own", 4096, 1024, true, true, nativeCPU, false, true, false},
		{"softmax 1024×1024 (4 MiB)", 1024, 1024, false, true, nativeCPU, false, true, false},
		{"softmax 1023×1024 (under 4 MiB)", 1023, 1024, false, true, nativeCPU, false, false, false},
		{"softmax 4096×1024, memory reused", 4096, 1024, false, false, nativeCPU, false, false, false},
		{"softmax 4096×1024 on the executor", 4096, 1024, false, true, CPU(2), false, false, false},
		{"softmax 4096×1024 on the H200", 4096, 1024, false, true, H200, false, false, false},
		{"softmax 4096×1024 read by a product", 4096, 1024, false, true, nativeCPU, true, false, false},
		{"softmax 4096×1024 in float64", 4096, 1024, false, true, nativeCPU, false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			dt := tensor.Float32
			if c.f64 {
				dt = tensor.Float64
			}
			x := G.NewMatrix(g, dt, G.WithShape(c.rows, c.cols), G.WithName("x"))
			var y *G.Node
			if c.ln {
				y = opLayerNormAffine(x)
			} else {
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
			if grp == nil || grp.Kind != RowGroup {
				t.Fatalf("no row group writes y: %v", grp)
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
