package graphpass

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/tile"
)

// TestWaveModel: the tilings the wave model chooses for the BERT-base
// encoder layer's products (8×512 rows, hidden 768, FFN 3072) as the peer
// cases spell them (NN y = x·W, NT input gradients dy·Wᵀ, TN weight
// gradients xᵀ·dy; bare products, so that SPLIT_K is writable) and for
// 4096³, which keeps the choice of before the model (256×128 swapped
// wgmma); a product with an epilogue takes no split; each choice is the
// least estimate of the tilings the model weighs (a split by a tenth).
func TestWaveModel(t *testing.T) {
	swapped256 := tile.Meta{"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 4, "num_warps": 8, "wgmma": 2}
	swapped192 := tile.Meta{"BLOCK_M": 192, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 4, "num_warps": 8, "wgmma": 2}
	// bf16: each stage holds A's bf16 tile too (64 KiB at 256×128)
	swapped256bf := tile.Meta{"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 3, "num_warps": 8, "wgmma": 2}
	// over K = 4096 a wave's panels of A and B outgrow the L2: tiles in
	// groups of 8 rows (groupTiles)
	grouped := func(m tile.Meta) tile.Meta { return with(m, "GROUP_M", 8) }
	mma64 := tile.Meta{"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 3, "num_warps": 4}
	split3 := tile.Meta{"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 3, "num_warps": 8, "SPLIT_K": 3}
	staged192split4 := tile.Meta{"BLOCK_M": 192, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 3, "num_warps": 8, "SPLIT_K": 4, "wg_stage": 1, "wgmma": 2}
	swapped128split3 := tile.Meta{"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 4, "num_warps": 8, "SPLIT_K": 3, "wgmma": 2}
	swapped64 := tile.Meta{"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 4, "num_warps": 8, "wgmma": 2}
	swapped128 := tile.Meta{"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 4, "num_warps": 8, "wgmma": 2}
	swapped128x64 := tile.Meta{"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "num_stages": 4, "num_warps": 4, "wgmma": 2}
	cases := []struct {
		name         string
		m, k, n      int
		ta, tb, tanh bool
		writeY       bool // tanh(y + 1), y + 1 written out too
		heavy        bool // y ⊙ (1 − tanh(u)²), u an input of y's shape
		heavyExp     bool // y ⊙ e^u
		prec         tile.Precision
		want         tile.Meta
	}{
		{name: "4096³ tf32: as before the model", m: 4096, k: 4096, n: 4096, prec: tile.PrecTF32, want: grouped(swapped256)},
		{name: "4096³ bf16: as before the model", m: 4096, k: 4096, n: 4096, prec: tile.PrecBF16, want: grouped(swapped256bf)},
		{name: "NN 4096×3072×768 tf32: 384 tiles, 2.9 waves", m: 4096, k: 768, n: 3072, prec: tile.PrecTF32, want: swapped256},
		{name: "NN 4096×768×3072 tf32: 132 tiles of 192×128 (one wave), not 96 of 256×128 (0.73) nor 192 of 128×128 (1.45)", m: 4096, k: 3072, n: 768, prec: tile.PrecTF32, want: swapped192},
		{name: "NN 4096×768×768 tf32", m: 4096, k: 768, n: 768, prec: tile.PrecTF32, want: swapped192},
		{name: "NT 4096×768×3072 tf32: B stored [n][k] read by ldmatrix in the swapped form", m: 4096, k: 3072, n: 768, tb: true, prec: tile.PrecTF32, want: swapped192},
		{name: "NT 4096×3072×768 tf32", m: 4096, k: 768, n: 3072, tb: true, prec: tile.PrecTF32, want: swapped256},
		{name: "NT 4096×768×768 tf32", m: 4096, k: 768, n: 768, tb: true, prec: tile.PrecTF32, want: swapped192},
		{name: "TN 768×3072×4096 tf32: Aᵀ staged on the swapped form, 192×128, K in 4 parts (the H200: 0.148 ms against mma.sync 64×128's 0.183)", m: 768, k: 4096, n: 3072, ta: true, prec: tile.PrecTF32, want: staged192split4},
		{name: "TN 3072×768×4096 tf32", m: 3072, k: 4096, n: 768, ta: true, prec: tile.PrecTF32, want: staged192split4},
		{name: "TN 768×3072×4096 bf16: Aᵀ on mma.sync (the staged form not weighed at bf16), K in 4 parts reduced in the L2", m: 768, k: 4096, n: 3072, ta: true, prec: tile.PrecBF16, want: with(mma64, "SPLIT_K", 4)},
		{name: "TN 768×768×4096 tf32: 36 tiles of 128×128, K in 3 parts", m: 768, k: 4096, n: 768, ta: true, prec: tile.PrecTF32, want: split3},
		{name: "NN 4096×768×3072 bf16", m: 4096, k: 3072, n: 768, prec: tile.PrecBF16, want: swapped192},
		{name: "NT 4096×768×3072 bf16: B stored [n][k] in bf16's swapped form too, as NN", m: 4096, k: 3072, n: 768, tb: true, prec: tile.PrecBF16, want: swapped192},
		{name: "NT 4096×3072×768 bf16", m: 4096, k: 768, n: 3072, tb: true, prec: tile.PrecBF16, want: swapped256bf},
		{name: "TN 768×768×4096 bf16", m: 768, k: 4096, n: 768, ta: true, prec: tile.PrecBF16, want: split3},
		{name: "NN 768×3072×4096 tf32, bare: 96 tiles of 192×128 in one wave, unsplit (the H200, 2026-12-03: 0.080 ms against 0.089 in 4 parts)", m: 768, k: 4096, n: 3072, prec: tile.PrecTF32, want: swapped192},
		{name: "NN 768×768×4096 tf32, bare: 36 tiles of 128×128 in a quarter wave, K in 3 parts on the swapped form", m: 768, k: 4096, n: 768, prec: tile.PrecTF32, want: swapped128split3},
		{name: "NN 768×3072×4096 tf32 with an epilogue", m: 768, k: 4096, n: 3072, tanh: true, prec: tile.PrecTF32, want: swapped192},
		{name: "NN 4096×3072×768 tf32 through exp of a value of its shape: 64 rows on the swapped form (the H200, the BERT layer's dO·W2ᵀ ⊙ gelu'(z) with the exact tanh: 0.168 ms against 0.269 at 256)", m: 4096, k: 768, n: 3072, heavyExp: true, prec: tile.PrecTF32, want: swapped64},
		{name: "NN 4096×3072×768 tf32 through tanh's derivative (1 − t·t, by ex2 and rsqrt at TF32): the model's 256 rows (the H200, r28k: 0.097 ms against 0.115 at 64), its epilogue through shared memory (0.087)", m: 4096, k: 768, n: 3072, heavy: true, prec: tile.PrecTF32, want: with(swapped256, "epi_smem", 1)},
		{name: "NN 4096×3072×768 tf32 with tanh(y + 1), writing y + 1 too: its epilogue through shared memory (the H200, r28j: 0.0878 → 0.0812 ms)", m: 4096, k: 768, n: 3072, tanh: true, writeY: true, prec: tile.PrecTF32, want: with(swapped256, "epi_smem", 1)},
		{name: "NN 4096×3072×768 tf32 with tanh: one output, from the accumulator", m: 4096, k: 768, n: 3072, tanh: true, prec: tile.PrecTF32, want: swapped256},
		// the output not whole tiles of columns: the epilogue through
		// shared memory, B's copies realigned where its rows are not
		// 16-byte aligned (partialColumns)
		{name: "vocabulary 4096×30522×768 tf32: epi_smem, B realigned (rows 8-byte aligned)", m: 4096, k: 768, n: 30522, prec: tile.PrecTF32, want: with(swapped256, "epi_smem", 1, "realign_b", 1)},
		{name: "vocabulary 4096×50257×768 tf32: epi_smem, B realigned (rows of an odd number of words)", m: 4096, k: 768, n: 50257, prec: tile.PrecTF32, want: with(swapped256, "epi_smem", 1, "realign_b", 1)},
		{name: "4096×4100×768 tf32: epi_smem (rows 16-byte aligned)", m: 4096, k: 768, n: 4100, prec: tile.PrecTF32, want: with(swapped256, "epi_smem", 1)},
		{name: "NT 4096×30522×768 tf32: epi_smem, Bᵀ not realigned", m: 4096, k: 768, n: 30522, tb: true, prec: tile.PrecTF32, want: with(swapped256, "epi_smem", 1)},
		{name: "vocabulary 4096×30522×768 bf16: epi_smem only", m: 4096, k: 768, n: 30522, prec: tile.PrecBF16, want: with(swapped256bf, "epi_smem", 1)},
		// fewer 128×128 tiles than SMs (fewTiles): mma.sync 64×64 before
		{name: "1024³ tf32: 64 tiles of 128×128, 128 of 128×64 at 4 warps (an H100: 168.0 TFLOP/s against 114.6 on mma.sync 64×64)", m: 1024, k: 1024, n: 1024, prec: tile.PrecTF32, want: swapped128x64},
		{name: "1024³ tf32 with tanh", m: 1024, k: 1024, n: 1024, tanh: true, prec: tile.PrecTF32, want: swapped128x64},
		{name: "1000³ tf32: the output not whole tiles of columns (epi_smem)", m: 1000, k: 1000, n: 1000, prec: tile.PrecTF32, want: with(swapped128x64, "epi_smem", 1)},
		{name: "2048×1024×1024 tf32: one wave of 128×128 (229.5 against 127.0)", m: 2048, k: 1024, n: 1024, prec: tile.PrecTF32, want: swapped128},
		{name: "1024³ bf16: 64×128 at 8 warps (130.4 against 120.9; 128×64 at 4 warps 110.5 is no choice)", m: 1024, k: 1024, n: 1024, prec: tile.PrecBF16, want: swapped64},
		{name: "2048×1024×1024 bf16", m: 2048, k: 1024, n: 1024, prec: tile.PrecBF16, want: swapped128},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			grp := productGroupOut(t, c.m, c.k, c.n, c.ta, c.tb, func(g *G.ExprGraph, y *G.Node) {
				switch {
				case c.writeY: // tanh(y + 1), and a second product reads y + 1: written out too
					u := G.Must(G.Add(y, G.NewConstant(float32(1))))
					G.Must(G.Tanh(u))
					G.Must(G.Mul(u, G.NewMatrix(g, tensor.Float32, G.WithShape(c.n, 8), G.WithName("w2"))))
				case c.tanh:
					G.Must(G.Tanh(y))
				}
				heavyEpilogueOf(g, y, c.m, c.n, c.heavy, c.heavyExp)
			})
			if got := len(grp.Extra) > 0; got != c.writeY {
				t.Fatalf("extra outputs %v, want %v", grp.Extra, c.writeY)
			}
			got := defaultMeta(grp, H200, c.prec)
			if got.String() != c.want.String() {
				t.Errorf("meta %v, want %v", got, c.want)
			}
			s, ok := productWaveShape(grp)
			if !ok || s.m != c.m || s.n != c.n || s.k != c.k || s.transA != c.ta || s.transB != c.tb || s.bare == (c.tanh || c.heavy || c.heavyExp) || s.heavyEpi != (c.heavy || c.heavyExp) || s.geluTanh != c.heavy || (s.outputs > 1) != c.writeY {
				t.Fatalf("shape %+v", s)
			}
			if !waveModelApplies(H200, c.prec, s) {
				t.Fatal("the wave model does not apply")
			}
			ch := chooseWaves(H200, c.prec, s)
			for _, o := range waveTilings(H200, c.prec, s) {
				if ch.split == 1 && o.split == 1 && o.est < ch.est || ch.split > 1 && o.est < ch.est {
					t.Errorf("%v chosen over the cheaper %v", ch, o)
				}
				if ch.split == 1 && o.split > 1 && o.est < 0.9*ch.est {
					t.Errorf("%v chosen over %v, cheaper by more than a tenth", ch, o)
				}
				if o.split > 1 && (c.tanh || c.heavy) {
					t.Errorf("%v: a split of a product with an epilogue", o)
				}
			}
		})
	}
}

// TestFewTiles: the products the wave model takes below a wave of
// 128×128 tiles (fewTiles) are ones of at least a quarter wave that it did
// not take before, and at TF32 with A stored as read from an eighth of a
// wave; bare ones over K ≥ 2048 (which it took before, without the
// 64-column tiles) are as they were, and so are bf16 products under a
// quarter wave, TN ones under it and anything under an eighth.
func TestFewTiles(t *testing.T) {
	older32 := tile.Meta{"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "num_stages": 3, "num_warps": 4}
	cases := []struct {
		name     string
		m, k, n  int
		ta, tb   bool
		prec     tile.Precision
		applies  bool
		fewTiles bool
		want     tile.Meta // the choice: the model's where it applies, else the older rule's
	}{
		{name: "1024³ tf32", m: 1024, k: 1024, n: 1024, prec: tile.PrecTF32, applies: true, fewTiles: true,
			want: tile.Meta{"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "num_stages": 4, "num_warps": 4, "wgmma": 2}},
		{name: "1025³ tf32: 81 tiles (B read as it is here, realigned; fusion copies it into aligned rows first)", m: 1025, k: 1025, n: 1025, prec: tile.PrecTF32, applies: true, fewTiles: true,
			want: tile.Meta{"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "epi_smem": 1, "num_stages": 4, "num_warps": 8, "realign_b": 1, "wgmma": 2}},
		{name: "NT 1024³ tf32: 128×64 (an H100: 172.8 TFLOP/s against 116.4)", m: 1024, k: 1024, n: 1024, tb: true, prec: tile.PrecTF32, applies: true, fewTiles: true,
			want: tile.Meta{"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "num_stages": 4, "num_warps": 4, "wgmma": 2}},
		{name: "NT 1024³ bf16: 64×128 (133.4 against 124.0)", m: 1024, k: 1024, n: 1024, tb: true, prec: tile.PrecBF16, applies: true, fewTiles: true,
			want: tile.Meta{"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 4, "num_warps": 8, "wgmma": 2}},
		{name: "TN 1024³ tf32: mma.sync 64×128 (116.7 against 106.7)", m: 1024, k: 1024, n: 1024, ta: true, prec: tile.PrecTF32, applies: true, fewTiles: true,
			want: tile.Meta{"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 3, "num_warps": 4}},
		{name: "TN 1024³ bf16: mma.sync 64×128 (129.4 against 117.6)", m: 1024, k: 1024, n: 1024, ta: true, prec: tile.PrecBF16, applies: true, fewTiles: true,
			want: tile.Meta{"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 3, "num_warps": 4}},
		{name: "512×1024×784 tf32: 32 tiles, 64×64 at 4 warps (95.9 against 53.8)", m: 512, k: 784, n: 1024, prec: tile.PrecTF32, applies: true, fewTiles: true,
			want: tile.Meta{"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_stages": 4, "num_warps": 4, "wgmma": 2}},
		{name: "512³ tf32: 16 tiles, 64×64 (41.2 against 37.3)", m: 512, k: 512, n: 512, prec: tile.PrecTF32, applies: true, fewTiles: true,
			want: tile.Meta{"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_stages": 4, "num_warps": 4, "wgmma": 2}},
		{name: "NT 512×1024×784 tf32: 64×64 at 4 warps (an H100, r55a: 89.0–91.8 against 50.4–51.7)", m: 512, k: 784, n: 1024, tb: true, prec: tile.PrecTF32, applies: true, fewTiles: true,
			want: tile.Meta{"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_stages": 4, "num_warps": 4, "wgmma": 2}},
		{name: "512³ bf16: the older rule", m: 512, k: 512, n: 512, prec: tile.PrecBF16, want: older32},
		{name: "TN 512³ tf32: the older rule", m: 512, k: 512, n: 512, ta: true, prec: tile.PrecTF32, want: older32},
		{name: "384×256×384 tf32: 9 tiles, the older rule", m: 384, k: 256, n: 384, prec: tile.PrecTF32, want: older32},
		{name: "1024×1024×4096 bare: the model's before", m: 1024, k: 4096, n: 1024, prec: tile.PrecTF32, applies: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			grp := productGroupOut(t, c.m, c.k, c.n, c.ta, c.tb, func(*G.ExprGraph, *G.Node) {})
			s, ok := productWaveShape(grp)
			if !ok {
				t.Fatal("no product shape")
			}
			if got := waveModelApplies(H200, c.prec, s); got != c.applies {
				t.Fatalf("the model applies: %v, want %v", got, c.applies)
			}
			if got := s.fewTiles(H200, c.prec); got != c.fewTiles {
				t.Fatalf("fewTiles %v, want %v", got, c.fewTiles)
			}
			if c.want != nil {
				if got := defaultMeta(grp, H200, c.prec); got.String() != c.want.String() {
					t.Errorf("meta %v, want %v", got, c.want)
				}
			}
			if !c.applies {
				return
			}
			narrow := slices.ContainsFunc(waveTilings(H200, c.prec, s), func(o tcTiling) bool { return o.bn == 64 && o.form.wgmma == 2 })
			if want := c.fewTiles && c.prec == tile.PrecTF32 && !c.ta; narrow != want {
				t.Errorf("64-column swapped tiles weighed: %v, want %v", narrow, want)
			}
		})
	}
}

// TestWaveCandidates: where the wave model chooses, the autotuner's
// candidates are its tilings (every unsplit one, the cheapest splits), the
// heuristic's first, each different; for 4096×768 over K 3072 they include
// 128×128 on the swapped form and on mma.sync (the choice before the
// model) and 64×128, and for the bare 768×768 weight gradient the
// unsplit 128×128 and 64×128 beside the chosen split.
func TestWaveCandidates(t *testing.T) {
	cases := []struct {
		name    string
		m, k, n int
		ta      bool
		want    []string
	}{
		{"NN 4096×768×3072", 4096, 3072, 768, false, []string{
			"{BLOCK_K = 32, BLOCK_M = 128, BLOCK_N = 128, num_stages = 4, num_warps = 8, wgmma = 2}",
			"{BLOCK_K = 32, BLOCK_M = 64, BLOCK_N = 128, num_stages = 4, num_warps = 8, wgmma = 2}",
			"{BLOCK_K = 32, BLOCK_M = 128, BLOCK_N = 128, num_stages = 3, num_warps = 8}",
			"{BLOCK_K = 32, BLOCK_M = 192, BLOCK_N = 128, epi_smem = 1, num_stages = 4, num_warps = 8, wgmma = 2}"}},
		{"TN 768×768×4096", 768, 4096, 768, true, []string{
			"{BLOCK_K = 32, BLOCK_M = 128, BLOCK_N = 128, num_stages = 3, num_warps = 8}",
			"{BLOCK_K = 32, BLOCK_M = 64, BLOCK_N = 128, num_stages = 3, num_warps = 4}",
			// the staged swapped form for Aᵀ (wg_stage = 1): candidates only
			"{BLOCK_K = 32, BLOCK_M = 192, BLOCK_N = 128, num_stages = 3, num_warps = 8, wg_stage = 1, wgmma = 2}",
			"{BLOCK_K = 32, BLOCK_M = 128, BLOCK_N = 128, num_stages = 4, num_warps = 8, wg_stage = 1, wgmma = 2}",
			"{BLOCK_K = 32, BLOCK_M = 64, BLOCK_N = 128, num_stages = 4, num_warps = 8, wg_stage = 1, wgmma = 2}"}},
		{"TN 768×3072×4096", 768, 4096, 3072, true, []string{
			"{BLOCK_K = 32, BLOCK_M = 128, BLOCK_N = 128, num_stages = 4, num_warps = 8, wg_stage = 1, wgmma = 2}"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			xs := []int{1, c.m, c.k}
			if c.ta {
				xs = []int{1, c.k, c.m}
			}
			x := G.NewTensor(g, tensor.Float32, 3, G.WithShape(xs...), G.WithName("x"))
			w := G.NewTensor(g, tensor.Float32, 3, G.WithShape(1, c.k, c.n), G.WithName("w"))
			G.Must(G.BatchedMatMul(x, w, c.ta, false))
			gr, err := Import(g)
			if err != nil {
				t.Fatal(err)
			}
			groups := Partition(gr, Options{Target: H200, MatMul: true})
			if len(groups) != 1 {
				t.Fatalf("%d groups", len(groups))
			}
			cands := Candidates(groups[0], H200, tile.PrecTF32)
			if cands[0].String() != defaultMeta(groups[0], H200, tile.PrecTF32).String() {
				t.Errorf("first candidate %v is not the heuristic's", cands[0])
			}
			seen := map[string]bool{}
			for _, m := range cands {
				if seen[m.String()] {
					t.Errorf("%v twice", m)
				}
				seen[m.String()] = true
			}
			for _, w := range c.want {
				if !seen[w] {
					t.Errorf("no candidate %s among %v", w, cands)
				}
			}
			// only Aᵀ products are staged, by default (TF32) or offered it
			if defaultMeta(groups[0], H200, tile.PrecTF32)["wg_stage"] != 0 && !c.ta {
				t.Errorf("the default stages a product that is not Aᵀ·B")
			}
			// every swapped tiling is offered with the epilogue through
			// shared memory too (epi_smem = 1), which the default never has
			if defaultMeta(groups[0], H200, tile.PrecTF32)["epi_smem"] != 0 {
				t.Errorf("the default's epilogue goes through shared memory")
			}
			for _, m := range cands {
				if m["wgmma"] == 2 && m["epi_smem"] == 0 && !seen[with(m, "epi_smem", 1).String()] {
					t.Errorf("%v is not offered with epi_smem = 1", m)
				}
			}
			// never warp-specialised (ws = 1: slower than the barrier form
			// at every tiling measured on the H200), by default or as a
			// candidate
			for _, m := range cands {
				if m["ws"] != 0 {
					t.Errorf("candidate %v is warp-specialised", m)
				}
			}
			for _, m := range cands {
				if m["wg_stage"] != 0 && (!c.ta || m["wgmma"] != 2) {
					t.Errorf("candidate %v stages a product that is not Aᵀ·B in the swapped form", m)
				}
			}
		})
	}
}

// TestTF32x3WeightGradients: 3xTF32 Aᵀ·B over a long K takes the staged
// swapped form (Aᵀ copied 16 bytes wide along m and transposed by its
// copying threads): 64×128 tiles in 4 parts where the group is the bare
// product, 128×128 at 3 stages with an epilogue where those fill the SMs;
// A·B keeps the swapped form of before, and so does Aᵀ·B over a short K.
func TestTF32x3WeightGradients(t *testing.T) {
	staged := tile.Meta{"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 4, "num_warps": 8, "wgmma": 2, "wg_stage": 1}
	swapped := tile.Meta{"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 4, "num_warps": 8, "wgmma": 2}
	for _, c := range []struct {
		name     string
		m, k, n  int
		ta, tanh bool
		want     tile.Meta
	}{
		{"TN 768×3072×4096, bare: 64×128 in 4 parts (the H200: 0.335 ms against 1.03)", 768, 4096, 3072, true, false, with(staged, "SPLIT_K", 4)},
		{"TN 3072×768×4096, bare", 3072, 4096, 768, true, false, with(staged, "SPLIT_K", 4)},
		{"TN 768×3072×4096 with an epilogue: 128×128 (144 tiles), 3 stages", 768, 4096, 3072, true, true, with(with(staged, "BLOCK_M", 128), "num_stages", 3)},
		{"TN 256×256×4096 with an epilogue: 64×128 (4 tiles of 128×128 do not fill the SMs)", 256, 4096, 256, true, true, staged},
		{"TN 768×3072×512: K too short, the swapped form of before (64×128: 1.09 waves of 128×128)", 768, 512, 3072, true, false, with(with(swapped, "BLOCK_M", 64), "num_stages", 6)},
		{"NN 768×3072×4096: not Aᵀ, the swapped form of before (64×128: 1.09 waves of 128×128)", 768, 4096, 3072, false, false, with(with(swapped, "BLOCK_M", 64), "num_stages", 6)},
		{"NN 4096×30522×768, a vocabulary projection: the output not whole tiles of columns, the epilogue through shared memory", 4096, 768, 30522, false, false, with(swapped, "epi_smem", 1)},
		{"NN 4096×50257×768", 4096, 768, 50257, false, false, with(swapped, "epi_smem", 1)},
		{"NN 4000×3072×768: rows not whole tiles, from the accumulator (measured alike)", 4000, 768, 3072, false, false, swapped},
	} {
		t.Run(c.name, func(t *testing.T) {
			grp := productGroup(t, c.m, c.k, c.n, c.ta, false, func(_ *G.ExprGraph, y *G.Node) {
				if c.tanh {
					G.Must(G.Tanh(y))
				}
			})
			if got := defaultMeta(grp, H200, tile.PrecTF32x3); got.String() != c.want.String() {
				t.Errorf("meta %v, want %v", got, c.want)
			}
		})
	}
}

// productGroup is the one matmul group of m×k by k×n (x·w, or a batch of one
// with xᵀ where ta, wᵀ where tb) followed by what epi adds to y, on the H200.
func productGroup(t *testing.T, m, k, n int, ta, tb bool, epi func(g *G.ExprGraph, y *G.Node)) *Group {
	t.Helper()
	grp := productGroupOut(t, m, k, n, ta, tb, epi)
	if len(grp.Extra) > 0 {
		t.Fatalf("extra outputs %v", grp.Extra)
	}
	return grp
}

// productGroupOut is productGroup where epi may add other groups (a second
// product reading y): the group of y's product.
func productGroupOut(t *testing.T, m, k, n int, ta, tb bool, epi func(g *G.ExprGraph, y *G.Node)) *Group {
	t.Helper()
	g := G.NewGraph()
	var y *G.Node
	if ta || tb {
		xs, ws := []int{1, m, k}, []int{1, k, n}
		if ta {
			xs = []int{1, k, m}
		}
		if tb {
			ws = []int{1, n, k}
		}
		x := G.NewTensor(g, tensor.Float32, 3, G.WithShape(xs...), G.WithName("x"))
		w := G.NewTensor(g, tensor.Float32, 3, G.WithShape(ws...), G.WithName("w"))
		y = G.Must(G.BatchedMatMul(x, w, ta, tb))
	} else {
		x := G.NewMatrix(g, tensor.Float32, G.WithShape(m, k), G.WithName("x"))
		w := G.NewMatrix(g, tensor.Float32, G.WithShape(k, n), G.WithName("w"))
		y = G.Must(G.Mul(x, w))
	}
	epi(g, y)
	gr, err := Import(g)
	if err != nil {
		t.Fatal(err)
	}
	var grp *Group
	for _, g := range Partition(gr, Options{Target: H200, MatMul: true}) {
		if g.Kind == MatMulGroup && g.MatMul != nil && g.MatMul.G == y {
			if grp != nil {
				t.Fatal("two groups of y's product")
			}
			grp = g
		} else if g.Kind != MatMulGroup || g.MatMul == nil || slices.ContainsFunc(g.MatMul.Inputs, func(in *Node) bool { return in.G == y }) {
			t.Fatalf("group %v: want y's product and at most other products (not of y)", g)
		}
	}
	if grp == nil {
		t.Fatal("no group of y's product")
	}
	return grp
}

// TestStoreBoundProducts: TF32 products over K of at most 64 with a wave
// of 128×128 tiles (issue 10's odd shapes and their aligned neighbours)
// take the swapped form at 128×128, 3 stages, registers capped at 128,
// whatever the operands' row lengths, the epilogue stored from the
// accumulator where the output's rows are 16-byte aligned and whole tiles
// of them, else through
// shared memory (at 256×128, 2 stages, where the output's rows are an odd
// number of words and A's not 16-byte aligned), and offer the autotuner 256×128 with and without
// shared memory, 64 and 128 rows with it, 128 without it, and the choice
// without k_tail (every form has it: the last iteration's k steps and
// copies past K left out); longer K, Aᵀ, bf16, products too small for a
// wave and a heavy epilogue keep the other rules.
func TestStoreBoundProducts(t *testing.T) {
	sb := func(bm int, extra string) string {
		extra = "k_tail = 1, " + extra
		if bm != 256 { // two CTAs an SM: registers capped (storeBoundMeta)
			extra += "max_registers = 128, "
		}
		return fmt.Sprintf("{BLOCK_K = 32, BLOCK_M = %d, BLOCK_N = 128, epi_smem = 1, %snum_stages = %d, num_warps = 8, wgmma = 2}", bm, extra, map[bool]int{true: 2, false: 3}[bm == 256])
	}
	noTail := func(m string) string { return strings.Replace(m, "k_tail = 1, ", "", 1) }
	for _, c := range []struct {
		name     string
		m, k, n  int
		ta, tb   bool
		heavy    bool
		heavyExp bool
		prec     tile.Precision
		bm       int  // 0: not store-bound
		direct   bool // the epilogue stored from the accumulator (storeBoundDirect)
	}{
		{name: "4095×4097×33: 4-byte copies of A and B, odd output rows", m: 4095, k: 33, n: 4097, prec: tile.PrecTF32, bm: 256},
		{name: "4096×4097×32: 4-byte copies of B, odd output rows, A's copies 16 bytes wide", m: 4096, k: 32, n: 4097, prec: tile.PrecTF32, bm: 128},
		{name: "4096×4096×33: 4-byte copies of A, aligned output rows", m: 4096, k: 33, n: 4096, prec: tile.PrecTF32, bm: 128, direct: true},
		{name: "4096×4096×50: 8-byte copies of A, aligned output rows", m: 4096, k: 50, n: 4096, prec: tile.PrecTF32, bm: 128, direct: true},
		{name: "4096×4094×50: 8-byte copies, output rows 8-byte aligned", m: 4096, k: 50, n: 4094, prec: tile.PrecTF32, bm: 128},
		{name: "4096×4096×32", m: 4096, k: 32, n: 4096, prec: tile.PrecTF32, bm: 128, direct: true},
		{name: "4095×4096×32: rows not whole tiles, through shared memory", m: 4095, k: 32, n: 4096, prec: tile.PrecTF32, bm: 128},
		{name: "4096×4100×32: rows 16-byte aligned, columns not whole tiles, through shared memory", m: 4096, k: 32, n: 4100, prec: tile.PrecTF32, bm: 128},
		{name: "4096×4224×32: 33 whole tiles of columns, from the accumulator", m: 4096, k: 32, n: 4224, prec: tile.PrecTF32, bm: 128, direct: true},
		{name: "4096×4096×64", m: 4096, k: 64, n: 4096, prec: tile.PrecTF32, bm: 128, direct: true},
		{name: "A·Bᵀ 4096×4097×32: Bᵀ's rows K long, odd output rows", m: 4096, k: 32, n: 4097, tb: true, prec: tile.PrecTF32, bm: 128},
		{name: "A·Bᵀ 4096×4097×33: odd output rows, A's copies 4 bytes wide", m: 4096, k: 33, n: 4097, tb: true, prec: tile.PrecTF32, bm: 256},
		{name: "4096×4096×96: K past two steps", m: 4096, k: 96, n: 4096, prec: tile.PrecTF32},
		{name: "1000³", m: 1000, k: 1000, n: 1000, prec: tile.PrecTF32},
		{name: "1024×1024×32: 64 tiles of 128×128, under a wave", m: 1024, k: 32, n: 1024, prec: tile.PrecTF32},
		{name: "Aᵀ 4096×4096×32", m: 4096, k: 32, n: 4096, ta: true, prec: tile.PrecTF32},
		{name: "bf16 4096×4096×32", m: 4096, k: 32, n: 4096, prec: tile.PrecBF16},
		{name: "heavy epilogue 4096×4096×32 (through exp)", m: 4096, k: 32, n: 4096, heavyExp: true, prec: tile.PrecTF32},
		{name: "4096×4096×32 through tanh's derivative at TF32 (not heavy: by ex2 and rsqrt)", m: 4096, k: 32, n: 4096, heavy: true, prec: tile.PrecTF32, bm: 128, direct: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			grp := productGroup(t, c.m, c.k, c.n, c.ta, c.tb, func(g *G.ExprGraph, y *G.Node) {
				heavyEpilogueOf(g, y, c.m, c.n, c.heavy, c.heavyExp)
			})
			cands := Candidates(grp, H200, c.prec)
			if c.bm == 0 {
				// (epi_smem alone is no sign: the wave model's choice for an
				// output not whole tiles of columns has it, 1000³'s)
				if cands[0]["k_tail"] != 0 || cands[0]["max_registers"] != 0 {
					t.Fatalf("meta %v: store-bound", cands[0])
				}
				return
			}
			// the choice's form: from the accumulator (no epi_smem) where direct
			form := func(m string) string {
				if c.direct {
					return strings.Replace(m, "epi_smem = 1, ", "", 1)
				}
				return m
			}
			def := form(sb(c.bm, ""))
			if got := cands[0].String(); got != def {
				t.Fatalf("meta %v, want %s", got, def)
			}
			var want []string
			for _, m := range []string{sb(256, ""), strings.Replace(sb(256, ""), "epi_smem = 1, ", "", 1), sb(64, ""), sb(128, ""),
				strings.Replace(sb(128, ""), "epi_smem = 1, ", "", 1), form(noTail(sb(c.bm, "")))} {
				if m != cands[0].String() {
					want = append(want, m)
				}
			}
			if c.direct { // and without k_tail through shared memory (epiSmemCandidates)
				want = append(want, noTail(sb(c.bm, "")))
			}
			if c.n%4 != 0 && !c.tb { // B's rows unaligned: its copies realigned
				want = append(want, strings.Replace(def, "wgmma", "realign_b = 1, wgmma", 1))
			}
			var got []string
			for _, m := range cands[1:] {
				got = append(got, m.String())
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("candidates\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// heavyEpilogueOf adds to product y's graph an epilogue that reads an m×n
// input u: y ⊙ (1 − tanh(u)²) (tanh's derivative: GELU's form) where
// tanhForm is set, y ⊙ e^u where exp is.
func heavyEpilogueOf(g *G.ExprGraph, y *G.Node, m, n int, tanhForm, exp bool) {
	if !tanhForm && !exp {
		return
	}
	u := G.NewMatrix(g, tensor.Float32, G.WithShape(m, n), G.WithName("u"))
	if exp {
		G.Must(G.HadamardProd(y, G.Must(G.Exp(u))))
		return
	}
	th := G.Must(G.Tanh(u))
	G.Must(G.HadamardProd(y, G.Must(G.Sub(G.NewConstant(float32(1)), G.Must(G.HadamardProd(th, th))))))
}

// TestSplitLongK: on the H200 a bare 2-D product whose output is a few
// tiles over a long K (a convolution's weight gradient: every pixel of the
// batch summed) takes K in parts (splitLongK), at every precision the wave
// model leaves; an epilogue, a short K or a product of many tiles keeps
// one part. On a CPU likewise where its kernels are machine code, and
// where more tiles than half the cores would leave many idle in the last
// wave.
func TestSplitLongK(t *testing.T) {
	for _, c := range []struct {
		name    string
		m, k, n int
		prec    tile.Precision
		tanh    bool
		want    int // SPLIT_K, 0 for none
	}{
		{"the convnet's first layer, 32×9 over 78400 (one tile: 128 parts)", 32, 78400, 9, tile.PrecIEEE, false, 128},
		{"the same at TF32", 32, 78400, 9, tile.PrecTF32, false, 128},
		{"its second layer, 64×288 over 19600 (18 tiles: 4 parts)", 64, 19600, 288, tile.PrecIEEE, false, 4},
		{"32×9 over 3136 (98 steps: parts of at least 16)", 32, 3136, 9, tile.PrecIEEE, false, 4},
		{"32×9 over 1024: K short", 32, 1024, 9, tile.PrecIEEE, false, 0},
		{"32×9 over 78400 with an epilogue", 32, 78400, 9, tile.PrecIEEE, true, 0},
		{"768×768 over 4096 at ieee: 144 tiles", 768, 4096, 768, tile.PrecIEEE, false, 0},
		{"the encoder's 256×256 over 1024", 256, 1024, 256, tile.PrecIEEE, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			grp := productGroup(t, c.m, c.k, c.n, false, false, func(_ *G.ExprGraph, y *G.Node) {
				if c.tanh {
					G.Must(G.Tanh(y))
				}
			})
			if got := defaultMeta(grp, H200, c.prec)["SPLIT_K"]; got != c.want {
				t.Errorf("SPLIT_K %d, want %d (%v)", got, c.want, defaultMeta(grp, H200, c.prec))
			}
		})
	}
	// a CPU whose kernels are machine code: where the output is fewer tiles
	// than half the cores, up to two programs a core; parts of at most
	// cpuPartK (a whole K streams the tiles' panels from memory); a
	// bare product over a long K keeps tiles of 64 (cpuLongK); the
	// executor's kernels never
	native2, native16, exec16 := CPU(2), CPU(16), CPU(16)
	native2.Native, native16.Native = true, true
	for _, c := range []struct {
		name           string
		m, k, n        int
		target         Target
		bm, bn, splitK int
	}{
		{"32×9 over 78400, 2 cores: 64 parts of 1225", 32, 78400, 9, native2, 32, 16, 64},
		{"32×9 over 78400, 16 cores: 64 parts", 32, 78400, 9, native16, 32, 16, 64},
		{"32×9 over 78400 on the executor", 32, 78400, 9, exec16, 32, 32, 0},
		{"288×64 over 19600, 16 cores: 3 tiles of 96×64 (64 pads 288), 16 parts of 1225", 288, 19600, 64, native16, 96, 64, 16},
		{"288×64 over 19600, 2 cores: 3 tiles of 96×64 (not 18 of 32), 16 parts", 288, 19600, 64, native2, 96, 64, 16},
		{"19600×288 over 64, 2 cores: 128×96 tiles (wholeSide)", 19600, 64, 288, native2, 128, 96, 0},
		{"4900×576 over 128, 2 cores: 128×192 tiles (wholeSide)", 4900, 128, 576, native2, 128, 192, 0},
		{"19600×96 over 64, 2 cores: 128×96, not 128×128", 19600, 64, 96, native2, 128, 96, 0},
		{"19600×288 over 64 on the executor: 64×64", 19600, 64, 288, exec16, 64, 64, 0},
		{"576×128 over 4900, 16 cores: 18 tiles of 64, 4 waves of 4 parts at 90%", 576, 4900, 128, native16, 64, 64, 4},
		{"576×128 over 4900, 2 cores: 18 tiles, 4 parts of 1225", 576, 4900, 128, native2, 64, 64, 4},
		{"1024×1024 over 4096, 2 cores: 128×128 tiles, 2 parts", 1024, 4096, 1024, native2, 128, 128, 2},
		{"1024×1024 over 2048, 2 cores: whole K", 1024, 2048, 1024, native2, 128, 128, 0},
		{"512×512 over 8192, 16 cores: 64 tiles of 64, 4 parts of 2048", 512, 8192, 512, native16, 64, 64, 4},
		{"32×9 over 2048, 16 cores: K short", 32, 2048, 9, native16, 32, 16, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			grp := productGroup(t, c.m, c.k, c.n, false, false, func(*G.ExprGraph, *G.Node) {})
			m := defaultMeta(grp, c.target, tile.PrecIEEE)
			if m["BLOCK_M"] != c.bm || m["BLOCK_N"] != c.bn || m["SPLIT_K"] != c.splitK {
				t.Errorf("%v, want BLOCK_M %d, BLOCK_N %d, SPLIT_K %d", m, c.bm, c.bn, c.splitK)
			}
		})
	}
}
