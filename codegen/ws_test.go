package codegen

import (
	"strings"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
	"github.com/tilefuse/tilefuse/tile/kernels"
)

// TestWgmmaWarpSpecialised: with ws = 1 beside wgmma = 2 on sm_90 the
// swapped K loop is warp-specialised: a warpgroup (the producer) launched
// beside the consumers' num_warps, its copies laid out over its 4 warps
// (ws_warps = 8: as many warps as the consumers, in their layouts); the
// producer's loop waits on each stage's
// empty mbarrier and issues the stage's cp.async copies, which complete on
// the stage's full mbarrier (cp.async.mbarrier.arrive.noinc: TF32's A is
// read by the tensor cores as it landed, no pass over it), then drains and
// exits; the consumers' loop waits on full, fences A for the async proxy,
// runs the wgmmas (two iterations unrolled, as the other swapped form)
// and arrives on the previous stage's empty barrier once its wgmmas are
// retired. Neither loop has a bar.sync: that is the point of the form
// (this test fails if it regresses to barrier pipelining). Registers move
// from producer to consumers with setmaxnreg past 8 warps (56/224 at TF32,
// 80/208 where the pass converts to bf16; 40/216 and 56/200 at 8 + 8
// warps); epilogue
// barriers are over the consumers only (named barrier 1). ptxas 11.8
// cannot assemble sm_90a: checked here structurally, assembled on the GPU.
func TestWgmmaWarpSpecialised(t *testing.T) {
	k := constMatmul(t, 4096, 4096, 4096, 256, 128, 32, tile.PrecTF32)
	k.Meta["wgmma"], k.Meta["ws"], k.Meta["num_stages"] = 2, 1, 4
	ck, pipe := compilePipe(t, k, Options{Arch: 90, NumWarps: 8, Spec: all16(k)})
	if !strings.Contains(pipe, "4 stages of 49152 B (warp-specialised: 4 producer warps, full/empty mbarriers, copies completing on full, setmaxnreg 56/224") {
		t.Errorf("the .pipe dump does not show the warp-specialised plan:\n%s", pipe)
	}
	if ck.NumWarps != 8 || ck.ProducerWarps != 4 || ck.Threads() != 384 {
		t.Errorf("warps %d + %d (%d threads), want 8 + 4", ck.NumWarps, ck.ProducerWarps, ck.Threads())
	}
	// the launch's 168 registers a thread, all of them (the cuda package
	// refuses a kernel allocated fewer: setmaxnreg.inc would wait for ever)
	if ck.RegSplit != [2]int{56, 224} || ck.RegisterPool() != 168*384 {
		t.Errorf("register split %v (pool %d), want 56/224 (168·384)", ck.RegSplit, ck.RegisterPool())
	}
	// 4 stages and 1 KiB for the mbarriers before the 1024-aligned scratch
	if want := 1024 + 4*49152; ck.SharedBytes != want {
		t.Errorf("%d B of shared memory, want %d", ck.SharedBytes, want)
	}
	p := ck.PTX
	section := func(from, to string) string {
		i, j := strings.Index(p, "\n"+from), strings.Index(p, "\n"+to)
		if i < 0 || j < i {
			t.Fatalf("no %s … %s in\n%s", from, to, p)
		}
		return p[i:j]
	}
	before := p[:strings.Index(p, "\n$L_ws_produce_")]
	prod := section("$L_ws_produce_", "$L_ws_drain_")
	drain := section("$L_ws_drain_", "$L_ws_consumer_")
	cons := section("$L_ws_consume_", "$L_ws_end_")
	after := p[strings.Index(p, "\n$L_ws_end_"):]
	for _, c := range []struct {
		name, re, in string
		want         int
	}{
		{"target", `\.version 8\.0\n\.target sm_90a\n`, p, 1},
		{"threads", `\.maxntid 384, 1, 1`, p, 1},
		// full: an arrival from each of the 128 producer threads (their
		// copies complete on it); empty: one from each of the 256
		// consumer threads
		{"full mbarriers", `mbarrier\.init\.shared::cta\.b64 \[%r\d+\+\d+\], 128;`, before, 4},
		{"empty mbarriers", `mbarrier\.init\.shared::cta\.b64 \[%r\d+\+\d+\], 256;`, before, 4},
		{"one barrier before the roles split", `bar\.sync 0;`, before, 1},
		{"producer's registers", `setmaxnreg\.dec\.sync\.aligned\.u32 56;`, before + prod, 1},
		{"consumers' registers", `setmaxnreg\.inc\.sync\.aligned\.u32 224;`, p, 1},
		// the producer: A 256×32 and B 32×128 by 128 threads, 16 + 8
		// 16-byte copies an iteration, completing on the stage's full
		// barrier; no pass over A (no groups, no waits, no conversion)
		{"producer's copies", `cp\.async\.cg\.shared\.global \[%r\d+(\+-?\d+)?\], \[%rd\d+(\+-?\d+)?\], 16`, prod, 24},
		{"producer waits on empty", `mbarrier\.try_wait\.parity\.shared::cta\.b64`, prod, 1},
		{"copies complete on full", `cp\.async\.mbarrier\.arrive\.noinc\.shared\.b64 \[%r\d+\];`, prod, 1},
		{"no groups", `cp\.async\.(commit|wait)_group`, prod + drain, 0},
		{"no conversion", `cvt\.rna?\.tf32\.f32|0xffffe000`, prod + drain, 0},
		{"drain", `cp\.async\.wait_all;\n\texit;`, drain, 1},
		{"no wgmma in the producer", `wgmma`, prod + drain, 0},
		// the consumers: two iterations a trip, 4 k steps each
		{"consumer's wgmmas", `wgmma\.mma_async\.sync\.aligned\.m64n256k8\.f32\.tf32\.tf32`, cons, 8},
		{"consumers wait on full", `mbarrier\.try_wait\.parity\.shared::cta\.b64`, cons, 2},
		{"consumers fence A", `@!%p\d+ bra \$L_ws_full_\d+;\n\tfence\.proxy\.async\.shared::cta;`, cons, 2},
		{"Bᵀ's fragments rounded", `cvt\.rna?\.tf32\.f32`, cons, 2 * 16},
		{"consumers release the stage before, each thread", `@%p\d+ mbarrier\.arrive\.shared::cta\.b64 _, \[%r\d+\];`, cons, 2},
		{"no lane's release for its warp", `bar\.warp\.sync`, p, 0},
		{"wgmmas left running", `wgmma\.wait_group\.sync\.aligned 1;`, cons, 2},
		{"no copies in the consumers", `cp\.async`, cons, 0},
		{"B's fragments", `ld\.shared\.b32`, cons, 2 * 16},
		// no barrier of the CTA in either loop
		{"no bar.sync in the producer", `bar\.sync`, prod + drain, 0},
		{"no bar.sync in the consumers", `bar\.sync`, cons, 0},
		// after the loop: the last wgmmas, then barriers of the consumers
		{"last wgmmas", `wgmma\.wait_group\.sync\.aligned 0;`, after, 1},
		{"consumers' barrier", `bar\.sync 1, 256;`, after, 1},
		{"no CTA barrier after", `bar\.sync 0`, after, 0},
		{"stores", `st\.global\.f32`, after, 128},
	} {
		if n := count(c.re, c.in); n != c.want {
			t.Errorf("%s: %d × %s, want %d", c.name, n, c.re, c.want)
		}
	}
	// bf16: the pass converts A into the stage's bf16 tile, one
	// iteration behind the copies, each thread handing its part of the
	// stage over (fence, an arrival: full expects one a producer thread,
	// 128); 3xTF32 splits A, two behind where 4 stages fit; 4 consumer
	// warps (256 threads) keep the launch's registers (no setmaxnreg)
	for _, c := range []struct {
		name     string
		prec     tile.Precision
		bm, bn   int
		nw, pw   int
		meta     tile.Meta
		want     []string
		wantNone []string
	}{
		// (3 stages of 64 KiB fit: the pass one behind)
		{"bf16 256x128", tile.PrecBF16, 256, 128, 8, 4, tile.Meta{}, []string{"cvt.rn.bf16x2.f32", "3 stages of 65536 B", "pass 1 behind the copies", "cp.async.commit_group", "cp.async.wait_group 0;\n\tadd", "fence.proxy.async.shared::cta;\n\tmbarrier.arrive.shared::cta.b64 _, [%r", "], 128;", "setmaxnreg.dec.sync.aligned.u32 80;", "setmaxnreg.inc.sync.aligned.u32 208;"}, []string{"cvt.rn.tf32", "cp.async.mbarrier.arrive", "cp.async.wait_group 1;"}},
		{"tf32x3 128x64 4 warps", tile.PrecTF32x3, 128, 64, 4, 4, tile.Meta{}, []string{"cvt.rn.tf32.f32", "pass 2 behind the copies", "cp.async.wait_group 1;", "cp.async.wait_group 0;"}, []string{"cp.async.mbarrier.arrive"}},
		{"tf32x3 128x64 4 warps lag 1", tile.PrecTF32x3, 128, 64, 4, 4, tile.Meta{"ws_lag": 1, "num_stages": 3}, []string{".maxntid 256,", "cvt.rn.tf32.f32", "pass 1 behind the copies", "cp.async.wait_group 0;\n\tadd", "bar.sync 1, 128;"}, []string{"setmaxnreg", "cp.async.wait_group 1;", "cp.async.mbarrier.arrive"}},
		{"producer registers 40", tile.PrecTF32, 256, 128, 8, 4, tile.Meta{"ws_regs": 40}, []string{"setmaxnreg.dec.sync.aligned.u32 40;", "setmaxnreg.inc.sync.aligned.u32 232;"}, nil},
		{"producer registers 24", tile.PrecTF32, 256, 128, 8, 4, tile.Meta{"ws_regs": 24}, []string{"setmaxnreg.dec.sync.aligned.u32 24;", "setmaxnreg.inc.sync.aligned.u32 240;"}, nil},
		// a producer as wide as the consumers, in their layouts: 8
		// copies a thread, 40/216 registers at 16 warps (128×128: 64
		// accumulators a thread within 16 warps' 128 registers)
		{"8 producer warps", tile.PrecTF32, 128, 128, 8, 8, tile.Meta{"ws_warps": 8}, []string{".maxntid 512,", "8 producer warps", "setmaxnreg.dec.sync.aligned.u32 40;", "setmaxnreg.inc.sync.aligned.u32 216;"}, nil},
		{"bf16 8 producer warps", tile.PrecBF16, 128, 128, 8, 8, tile.Meta{"ws_warps": 8}, []string{"setmaxnreg.dec.sync.aligned.u32 56;", "setmaxnreg.inc.sync.aligned.u32 200;"}, nil},
		// at 256×128 16 warps' 128 registers a thread cannot hold 128
		// accumulators and the loop (the H200's ptxas refused it): the
		// plain swapped form, and the dump says why
		{"8 producer warps at 256x128: declined", tile.PrecTF32, 256, 128, 8, 0, tile.Meta{"ws_warps": 8, "tma": 0}, []string{"ws = 1 declined: 8+8 warps allow 128 registers a thread, the accumulators take 128", ".maxntid 256,"}, []string{"mbarrier", "setmaxnreg"}},
	} {
		k := constMatmul(t, 4096, 4096, 4096, c.bm, c.bn, 32, c.prec)
		k.Meta["wgmma"], k.Meta["ws"], k.Meta["num_stages"] = 2, 1, 4
		for key, v := range c.meta {
			k.Meta[key] = v
		}
		ck, pipe := compilePipe(t, k, Options{Arch: 90, NumWarps: c.nw, Spec: all16(k)})
		text := ck.PTX + pipe
		if ck.ProducerWarps != c.pw {
			t.Errorf("%s: %d producer warps, want %d", c.name, ck.ProducerWarps, c.pw)
		}
		for _, s := range c.want {
			if !strings.Contains(text, s) {
				t.Errorf("%s: no %q", c.name, s)
			}
		}
		for _, s := range c.wantNone {
			if strings.Contains(text, s) {
				t.Errorf("%s: %q", c.name, s)
			}
		}
	}
	// a loop that carries its pointers (tile/kernels.Matmul): the
	// producer is as wide as the consumers, in their layouts (in a
	// warpgroup's, the carried pointers would be converted in its loop)
	km, err := kernels.Matmul(tile.Meta{"BM": 128, "BN": 128, "BK": 32, "PREC": int(tile.PrecTF32), "wgmma": 2, "ws": 1, "num_stages": 4})
	if err != nil {
		t.Fatal(err)
	}
	ck, err = Compile(km, Options{Arch: 90, NumWarps: 8, Spec: all16(km)})
	if err != nil {
		t.Fatal(err)
	}
	if ck.ProducerWarps != 8 || count(`bar\.sync`, ck.PTX[strings.Index(ck.PTX, "\n$L_ws_produce_"):strings.Index(ck.PTX, "\n$L_ws_end_")]) != 0 {
		t.Errorf("carried pointers: %d producer warps, want 8, and no bar.sync in the loops", ck.ProducerWarps)
	}
	// where the form does not apply, ws changes nothing: without wgmma =
	// 2, on sm_80, or with a store before the loop
	for _, c := range []struct {
		name string
		arch int
		wg   int
	}{{"wgmma=1", 90, 1}, {"mma.sync", 90, 0}, {"sm_80", 80, 2}} {
		k := constMatmul(t, 4096, 4096, 4096, 128, 128, 32, tile.PrecTF32)
		k.Meta["wgmma"], k.Meta["ws"] = c.wg, 1
		ck, err := Compile(k, Options{Arch: c.arch, NumWarps: 8, Spec: all16(k)})
		if err != nil {
			t.Fatal(err)
		}
		if ck.ProducerWarps != 0 || strings.Contains(ck.PTX, "mbarrier") {
			t.Errorf("%s: warp-specialised", c.name)
		}
	}
}
