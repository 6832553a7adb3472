//go:build tilefuse_cuda

package cuda

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/tile"
)

// tmaProduct is wsProduct with A's load unmasked (m a multiple of bm, k
// of 32) or masked by its rows' bound alone, the forms whose A tiles the
// swapped loop copies by tensor copies with tma = 1.
func tmaProduct(t *testing.T, m, n, k, bm, bn int, meta tile.Meta) *tile.Kernel {
	maskA := ""
	if m%bm != 0 {
		maskA = "rows"
	}
	return product(t, "tma_product", m, n, k, bm, bn, tile.PrecTF32, maskA, meta)
}

// TestTensorCopyProductOnGPU: the swapped wgmma loop with A's tiles
// copied by cp.async.bulk.tensor through a tensor map the launcher encodes
// (tma = 1; A unmasked, or masked by its rows' bound: a map of m rows)
// runs on the device, through Launch (a packed launch: the map
// is a 128-byte parameter) and through Pack with the arguments set anew
// outside the device's thread (the maps are encoded on it, at the launch:
// the driver refused the encoding without the context, CUresult 201),
// and gives the same result, bit for bit, as the same kernel with cp.async
// copies (the same operands reach the same wgmmas), within TF32's tolerance
// of the float64 product; outputs poisoned with NaN.
func TestTensorCopyProductOnGPU(t *testing.T) {
	if dev.Arch < 90 {
		t.Skipf("device %s is sm_%d: tensor copies and wgmma need sm_90a (Hopper)", dev.Name, dev.Arch)
	}
	gpu := &Launcher{Dev: dev}
	refs := map[[3]int][2][]float64{}
	for _, c := range []struct {
		name    string
		m, n, k int
		bm, bn  int
		meta    tile.Meta
	}{
		{"256x128 8 warps 4 stages", 512, 200, 96, 256, 128, tile.Meta{"num_warps": 8, "num_stages": 4}},
		{"256x128 8 warps 4 stages, 1024 rows", 1024, 1000, 1024, 256, 128, tile.Meta{"num_warps": 8, "num_stages": 4}},
		{"128x64 4 warps 3 stages", 384, 136, 160, 128, 64, tile.Meta{"num_warps": 4, "num_stages": 3}},
		{"192x128 A's rows masked", 1000, 300, 768, 192, 128, tile.Meta{"num_warps": 8, "num_stages": 4}},
		{"256x128 A's rows masked", 300, 200, 96, 256, 128, tile.Meta{"num_warps": 8, "num_stages": 4}},
	} {
		t.Run(fmt.Sprintf("%s/%dx%dx%d", c.name, c.m, c.n, c.k), func(t *testing.T) {
			m, n, k := c.m, c.n, c.k
			a, b := seededOperands(m, n, k)
			grid := tile.Grid{tile.CDiv(m, c.bm), tile.CDiv(n, c.bn)}
			metaOf := func(tma int) tile.Meta { return withMeta(tile.Meta{"wgmma": 2, "tma": tma}, c.meta) }
			run := func(tma int) []float32 {
				return launchPoisoned(t, gpu, tmaProduct(t, m, n, k, c.bm, c.bn, metaOf(tma)), grid, a, b, m, n)
			}
			kt := tmaProduct(t, m, n, k, c.bm, c.bn, metaOf(1))
			ck, err := codegen.Compile(kt, codegen.Options{NumWarps: c.meta["num_warps"], Arch: dev.Target(), Spec: []int{16, 16, 16}})
			if err != nil {
				t.Fatal(err)
			}
			if len(ck.TensorMaps) != 1 || !strings.Contains(ck.PTX, "cp.async.bulk.tensor") {
				t.Fatalf("not the tensor-copy form: %v", ck.TensorMaps)
			}
			got, base := run(1), run(0)
			sameBits(t, got, base, n, [2]string{"with tensor copies", "with cp.async"})
			nearFloat64(t, refs, [3]int{m, n, k}, a, b, got, 4e-3)
			// a packed launch, its A set anew to a buffer of other values
			packed := packedAnew(t, ck, kt, grid, a, b, m, n, 0)
			for i := range packed {
				if math.Float32bits(packed[i]) != math.Float32bits(got[i]) {
					t.Fatalf("packed launch, element (%d, %d): %v, Launch gave %v", i/n, i%n, packed[i], got[i])
				}
			}
		})
	}
}

// packedAnew launches kernel kt (compiled as ck) of C = A·B through a Pack
// whose operand which (0: A, 1: B) is first a buffer of zeros and then set
// anew to its values (so that a tensor map of it is encoded again), the
// output poisoned with NaN, and returns the output.
func packedAnew(t *testing.T, ck *codegen.Kernel, kt *tile.Kernel, grid tile.Grid, a, b []float32, m, n, which int) []float32 {
	t.Helper()
	f, err := dev.Load(ck)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, m*n)
	for i := range out {
		out[i] = float32(math.NaN())
	}
	zeros := make([]float32, len(a))
	if which == 1 {
		zeros = make([]float32, len(b))
	}
	bufs := make([]*Buffer, 4)
	for i, h := range [][]float32{a, b, out, zeros} {
		if bufs[i], err = dev.Alloc(int64(4 * len(h))); err != nil {
			t.Fatal(err)
		}
		defer dev.Free(bufs[i])
		if err := dev.Upload(bufs[i], h); err != nil {
			t.Fatal(err)
		}
	}
	args := []*Buffer{bufs[0], bufs[1], bufs[2]}
	args[which] = bufs[3]
	p, err := dev.Pack(f, kt, grid, args[0], args[1], args[2])
	if err != nil {
		t.Fatal(err)
	}
	defer p.Free()
	if err := p.Set(which, bufs[which]); err != nil { // its map encoded for it
		t.Fatal(err)
	}
	if err := dev.Run(func(th *Thread) error { return th.LaunchPacked(p) }); err != nil {
		t.Fatal(err)
	}
	packed := make([]float32, m*n)
	if err := dev.Download(packed, bufs[2]); err != nil {
		t.Fatal(err)
	}
	return packed
}
