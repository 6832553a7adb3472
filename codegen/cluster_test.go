package codegen_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/tile"
)

// TestClusterMulticast: with cluster = 2 the swapped TF32 loop with A's
// tensor copies runs in clusters of 1×2 CTAs (.reqnctapercluster 1, 2, 1;
// Kernel.Cluster), each CTA copying half of A's tile (a map of boxes of
// BLOCK_M/2 rows) multicast to both, its empty mbarriers (two warps' worth
// a CTA's warps) released by every warp through mapa after the wgmmas that
// read a stage retire and waited for by thread 0 before its copy, a
// cluster barrier after the mbarriers' set-up and another after the loop.
// Where the CTAs could read different tiles of A, or A is not copied by
// tensor copies, the plan declines and says why (the .pipe dump), and the
// kernel is the one without clusters. The simulator refuses a cluster
// kernel (clusters are not simulated): cuda's TestClusterProductOnGPU runs
// these kernels on the device, bit for bit against the form without.
func TestClusterMulticast(t *testing.T) {
	for _, c := range []struct {
		name     string
		bm       int
		meta     tile.Meta
		maskA    string
		declined string // "": applied
	}{
		{"256x128", 256, tile.Meta{"cluster": 2}, "", ""},
		{"128x128, A's rows masked", 128, tile.Meta{"cluster": 2, "tma": 1}, "rows", ""},
		{"clusters of 4", 256, tile.Meta{"cluster": 4}, "", "clusters of 2 only"},
		{"A masked along k, tma_k = 0: no tensor copies", 256, tile.Meta{"cluster": 2, "tma_k": 0}, "rows and k", "A is not copied by tensor copies"},
		{"A masked along k: a map bounding K (tma_k's default)", 256, tile.Meta{"cluster": 2}, "rows and k", "A's tensor map bounds K"},
		{"A read by cp.async", 256, tile.Meta{"cluster": 2, "tma": 0}, "", "A is not copied by tensor copies"},
		{"A's rows by program axis 1", 256, tile.Meta{"cluster": 2, "swap_axes": 1}, "", "depend on program axis 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			meta := tile.Meta{"wgmma": 2, "num_warps": 8, "num_stages": 4}
			for k, v := range c.meta {
				meta[k] = v
			}
			kk := tmaProduct(t, 512, 256, 96, c.bm, 128, tile.PrecTF32, c.maskA, meta)
			if meta["swap_axes"] == 1 {
				kk = swappedAxesProduct(t, 512, 256, 96, c.bm, 128, meta)
			}
			dir := t.TempDir()
			ck, err := codegen.Compile(kk, codegen.Options{NumWarps: 8, Arch: 90, Spec: []int{16, 16, 16}, DumpDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			pipe, err := os.ReadFile(filepath.Join(dir, kk.Name+".pipe"))
			if err != nil {
				t.Fatal(err)
			}
			if c.declined != "" {
				if !regexp.MustCompile("cluster declined: [^;)]*" + regexp.QuoteMeta(c.declined)).Match(pipe) {
					t.Fatalf("the plan does not say %q:\n%s", c.declined, pipe)
				}
				if ck.Cluster != [3]int{} || strings.Contains(ck.PTX, "cluster") && strings.Contains(ck.PTX, "multicast") {
					t.Fatalf("declined, yet Cluster %v or multicast copies in the PTX", ck.Cluster)
				}
				return
			}
			if ck.Cluster != [3]int{1, 2, 1} || !strings.Contains(string(pipe), "clusters of 2 along the columns") {
				t.Fatalf("Cluster %v, plan:\n%s", ck.Cluster, pipe)
			}
			if len(ck.TensorMaps) != 1 || ck.TensorMaps[0].Box != [2]int{32, c.bm / 2} {
				t.Fatalf("tensor maps %v: want one of boxes 32 x %d", ck.TensorMaps, c.bm/2)
			}
			for _, want := range []struct {
				what, re string
				n        int
			}{
				{"the cluster's shape", `\.reqnctapercluster 1, 2, 1\n`, 1},
				{"full mbarriers of one arrival", `mbarrier\.init\.shared::cta\.b64 \[%r\d+\+\d+\], 1;`, 4},
				{"empty mbarriers of both CTAs' warps", `mbarrier\.init\.shared::cta\.b64 \[%r\d+\+\d+\], 16;`, 4},
				{"cluster barriers (set-up, after the loop)", `barrier\.cluster\.arrive\.release\.aligned;\n\s*barrier\.cluster\.wait\.acquire\.aligned;`, 2},
				{"the CTA's rank", `mov\.u32 %r\d+, %cluster_ctarank;`, 1},
				{"multicast tensor copies of half the tile", `cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.tile\.mbarrier::complete_tx::bytes\.multicast::cluster \[%r\d+\], \[%rd\d+, \{%r\d+, %r\d+\}\], \[%r\d+\], %h\d+;`, -1},
				{"the whole tile expected on each CTA's full mbarrier", `mbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, \[%r\d+\], ` + map[int]string{256: "32768", 128: "16384"}[c.bm] + `;`, -1},
				{"releases to the peer", `mapa\.shared::cluster\.u32 %r\d+, %r\d+, %r\d+;\n(.*\n){2}\s*@%p\d+ mbarrier\.arrive\.shared::cta\.b64 _, \[%r\d+\];\n\s*@%p\d+ mbarrier\.arrive\.shared::cluster\.b64 _, \[%r\d+\];`, -1},
				{"thread 0 waits for the releases before its copy", `mbarrier\.try_wait\.parity\.shared::cta\.b64 %p\d+, \[%r\d+\], %r\d+;\n\s*@!%p\d+ bra \$L_tma_empty_\d+;\n\$L_tma_released_\d+:\n(.*\n){0,4}\s*@%p\d+ mbarrier\.arrive\.expect_tx`, -1},
			} {
				got := len(regexp.MustCompile(want.re).FindAllString(ck.PTX, -1))
				if want.n >= 0 && got != want.n || want.n < 0 && got == 0 {
					t.Errorf("%s: %d of %q, want %d (-1: some)", want.what, got, want.re, want.n)
				}
			}
			a, b, out := make([]float32, 512*96), make([]float32, 96*256), make([]float32, 512*256)
			err = (&ptxsim.Launcher{Arch: 90}).Launch(kk, tile.Grid{512 / c.bm, 2}, a, b, out)
			if err == nil || !strings.Contains(err.Error(), "not simulated") {
				t.Fatalf("the simulator ran a cluster kernel: error %v", err)
			}
		})
	}
}

// swappedAxesProduct is C = A·B with the tile's rows taken from program
// axis 1 and its columns from axis 0 (A unmasked, B and C masked on n).
func swappedAxesProduct(t *testing.T, m, n, k, bm, bn int, meta tile.Meta) *tile.Kernel {
	t.Helper()
	const bk = 32
	b := tile.NewBuilder("swapped_axes_product", meta)
	pa, pb, pc := b.Ptr("a", tile.F32), b.Ptr("b", tile.F32), b.Ptr("c", tile.F32)
	rm := b.ExpandDims(b.Add(b.Mul(b.ProgramID(1), bm), b.Arange(0, bm)), 1)
	rn := b.ExpandDims(b.Add(b.Mul(b.ProgramID(0), bn), b.Arange(0, bn)), 0)
	rkRow, rkCol := b.ExpandDims(b.Arange(0, bk), 0), b.ExpandDims(b.Arange(0, bk), 1)
	offA, offB := b.Add(b.Mul(rm, k), rkRow), b.Add(b.Mul(rkCol, n), rn)
	inN := b.Lt(rn, n)
	acc := b.For(0, k, bk, []*tile.Value{b.Zeros(tile.F32, bm, bn)}, func(k0 *tile.Value, c []*tile.Value) []*tile.Value {
		av := b.Load(b.AddPtr(pa, b.Add(offA, k0)), nil, nil)
		bv := b.Load(b.AddPtr(pb, b.Add(offB, b.Mul(k0, n))), b.And(b.Lt(b.Add(rkCol, k0), k), inN), 0.0)
		return []*tile.Value{b.Dot(av, bv, c[0], tile.PrecTF32)}
	})
	b.Store(b.AddPtr(pc, b.Add(b.Mul(rm, n), rn)), acc[0], b.And(b.Lt(rm, m), inN))
	kk, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return kk
}
