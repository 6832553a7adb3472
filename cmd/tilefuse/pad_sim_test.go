package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// TestPaddedProductsInSimulator: products whose operands' rows are not
// 16-byte aligned (graphpass's padOperands), as graphpass writes them
// for the H200, run in ptxsim for sm_90 with racecheck and initcheck:
// each pad kernel writes its operand's copy exactly (the operand's
// elements where they are, zeros past them: every element written, none
// beyond), and the product, reading the copies, agrees with float64 on
// every output element (poisoned with NaN), its copies of A (and of a
// padded B) tensor copies where the unpadded product's were 4-byte
// cp.async copies. Default meta-parameters: the wave model's 256×128
// swapped form at TF32, mma.sync at 1025³'s 64×64 where the model does
// not apply.
func TestPaddedProductsInSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: ~20 s in the simulator")
	}
	for _, c := range []struct {
		pc   peerCase
		prec tile.Precision
		tune tile.Meta
		pads int
		tma  int // tensor maps of the product: A's and a padded B's (-1: not checked)
		// narrow: B's odd rows read as they are (4- and 8-byte copies of its
		// rows' ends)
		narrow bool
	}{
		{peerCase{name: "1024x515x513 tf32", m: 1024, k: 515, n: 513}, tile.PrecTF32, tile.Meta{"BLOCK_M": 256, "BLOCK_N": 128, "wgmma": 2, "num_warps": 8, "num_stages": 4}, 2, 2, false},
		// B alone copied; A's rows (516 floats) 16-byte aligned, read by
		// tensor copies whose map bounds K (tma_k's default), as is B's copy
		{peerCase{name: "gelu 1030x516x514 tf32 (B alone)", m: 1030, k: 516, n: 514, gelu: true}, tile.PrecTF32, tile.Meta{"BLOCK_M": 256, "BLOCK_N": 128, "wgmma": 2, "num_warps": 8, "num_stages": 4}, 1, 2, false},
		{peerCase{name: "gelu 1030x516x514 tf32 (B alone), tma_k = 0", m: 1030, k: 516, n: 514, gelu: true}, tile.PrecTF32, tile.Meta{"BLOCK_M": 256, "BLOCK_N": 128, "wgmma": 2, "num_warps": 8, "num_stages": 4, "tma_k": 0}, 1, 0, false},
		{peerCase{name: "512x515x512 bf16 (A alone)", m: 512, k: 515, n: 512}, tile.PrecBF16, nil, 1, -1, false},
		{peerCase{name: "512x515x513 tf32 (A alone: m under padBMinRows, B's odd rows masked past k)", m: 512, k: 515, n: 513}, tile.PrecTF32, nil, 1, -1, false},
		{peerCase{name: "A·Bᵀ 1024x515x520 tf32", m: 1024, k: 515, n: 520, tb: true}, tile.PrecTF32, nil, 2, -1, false},
		// A copied; B's aligned rows read as they are, past k zeros from its
		// tensor map's K rows
		{peerCase{name: "512x515x512 tf32, tma_k = 0 (A copied; B's rows masked past k)", m: 512, k: 515, n: 512}, tile.PrecTF32, tile.Meta{"BLOCK_M": 256, "BLOCK_N": 128, "wgmma": 2, "num_warps": 8, "num_stages": 4, "tma_k": 0}, 1, 1, false},
		{peerCase{name: "512x515x512 tf32 (A copied; B's map of k rows)", m: 512, k: 515, n: 512}, tile.PrecTF32, tile.Meta{"BLOCK_M": 256, "BLOCK_N": 128, "wgmma": 2, "num_warps": 8, "num_stages": 4}, 1, 2, false},
		// the swapped form with A's tensor copies (its copy unmasked) and
		// B's odd rows masked past k, realigned
		{peerCase{name: "512x515x513 tf32 swapped, B realigned", m: 512, k: 515, n: 513}, tile.PrecTF32, tile.Meta{"BLOCK_M": 256, "BLOCK_N": 128, "wgmma": 2, "num_warps": 8, "num_stages": 4, "epi_smem": 1, "realign_b": 1}, 1, 1, true},
	} {
		t.Run(c.pc.name, func(t *testing.T) {
			p, err := buildPeer(c.pc, graphpass.H200, c.prec, c.tune)
			require.NoError(t, err)
			require.Len(t, p.launches, c.pads+1, "pad kernels and the product")
			sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true}
			for _, l := range p.launches[:c.pads] {
				from, to := l.args[0], l.args[1]
				n := 1
				for _, d := range to.Info.Shape {
					n *= d
				}
				got := make([]float32, n+37) // past the copy: left as it is
				for i := range got {
					got[i] = float32(math.NaN())
				}
				require.NoError(t, sim.Launch(l.k.Tile, l.k.Grid, p.host[from], got[:n]))
				want := padded(p.host[from], from.Info.Shape, to.Info.Shape)
				for i, v := range want {
					if got[i] != v {
						t.Fatalf("%v: element %d of %v is %v, want %v", l.k.Tile.Name, i, to.Info.Shape, got[i], v)
					}
				}
				for _, v := range got[n:] {
					require.True(t, math.IsNaN(float64(v)), "written past the copy")
				}
			}
			args := p.anyArgs()
			ck, _ := compileDumped(t, p.k.Tile, ptxsim.Spec(p.k.Tile, args))
			require.NoError(t, sim.Launch(p.k.Tile, p.k.Grid, args...))
			if c.tma >= 0 {
				require.Len(t, ck.TensorMaps, c.tma, "tensor copies of A and B")
				require.Equal(t, c.narrow, strings.Contains(pipeLoop(t, ck.PTX), "cp.async.ca.shared.global"), "narrow copies")
			}
			got := p.args[len(p.args)-1]
			maxRel, normRel, bad := p.check(c.pc, got, peerTol(c.prec))
			require.Zero(t, bad, "max %.2g norm %.2g", maxRel, normRel)
			// every element, not only check's rows
			for r := range c.pc.m {
				for j := range c.pc.n {
					var ref float64
					for kk := range c.pc.k {
						ref += float64(p.x[r*c.pc.k+kk]) * float64(p.w[kk*c.pc.n+j])
					}
					if c.pc.gelu {
						ref = gelu64(ref + float64(p.b[j]))
					}
					if e := math.Abs(float64(got[r*c.pc.n+j]) - ref); !(e <= 3e-2*(1+math.Abs(ref))) {
						t.Fatalf("(%d, %d): %v, want %v", r, j, got[r*c.pc.n+j], ref)
					}
				}
			}
		})
	}
}

// TestPaddedKernelsAssemble: for an sm_80 target (an A100's shared memory:
// mma.sync, no tensor copies) a product whose operands' rows are odd is
// also written with pad kernels, and ptxas assembles the pad kernels and
// the product (skipped without ptxas, which .ci/run installs, unless
// TILEFUSE_REQUIRE_PTXAS is set).
func TestPaddedKernelsAssemble(t *testing.T) {
	ptxas, err := exec.LookPath("ptxas")
	if err != nil {
		if os.Getenv("TILEFUSE_REQUIRE_PTXAS") != "" {
			t.Fatalf("ptxas is required (TILEFUSE_REQUIRE_PTXAS is set) but not found: %v", err)
		}
		t.Skip("no ptxas on PATH")
	}
	sm80 := graphpass.GPU(108, 1024, 163<<10)
	for _, prec := range []tile.Precision{tile.PrecTF32, tile.PrecBF16, tile.PrecTF32x3} {
		pc := peerCase{name: "1030x517x519", m: 1030, k: 517, n: 519, gelu: true}
		p, err := buildPeer(pc, sm80, prec, nil)
		require.NoError(t, err)
		require.Len(t, p.launches, 3, "%v: two pad kernels and the product", prec)
		for _, l := range p.launches {
			ck, err := codegen.Compile(l.k.Tile, codegen.Options{Arch: 80, NumWarps: l.k.Tile.Meta["num_warps"]})
			require.NoError(t, err)
			assembleSM80(t, ptxas, ck.PTX, fmt.Sprintf("%v %s", prec, l.k.Tile.Name))
		}
	}
}

// assembleSM80 requires ptxas to assemble ptx (what names it) for sm_80.
func assembleSM80(t *testing.T, ptxas, ptx, what string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "k.ptx")
	require.NoError(t, os.WriteFile(file, []byte(ptx), 0o644))
	out, err := exec.Command(ptxas, "-arch=sm_80", "-o", os.DevNull, file).CombinedOutput()
	require.NoError(t, err, "%s: ptxas: %s", what, out)
}
