package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tilefuse/tilefuse/codegen"
	"github.com/tilefuse/tilefuse/codegen/ptxsim"
	"github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// TestTensorCopiesOfB: the swapped TF32 form with B's tile copied by one
// four-dimensional tensor copy a stage (tma_b = 1) and, with tma_b = 2,
// no CTA-wide barrier in the loop (each thread releases the stages it
// read on their empty mbarriers, thread 0 waits on them before copying),
// run in ptxsim with racecheck and initcheck against float64, the output
// poisoned with NaN: more iterations than stages (the ring wraps and the
// empty mbarriers' parity flips), rows masked (A's map of M rows), one
// and two column groups of 64, and the cases it declines (B's columns or
// K masked), which keep cp.async and the barrier. Without the barrier the
// copies run stages-1 iterations ahead (thread 0 waits for the release of
// the iteration before), stages-2 with tma_ahead = 0 or early_copies.
func TestTensorCopiesOfB(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds in the simulator")
	}
	big := tile.Meta{"wgmma": 2, "tma": 1, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}
	small := tile.Meta{"wgmma": 2, "tma": 1, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}
	for _, c := range []struct {
		pc       peerCase
		tune     tile.Meta
		declined string // "": B by tensor copies
	}{
		{peerCase{name: "512x288x256 256x128 tma_b 1", m: 512, k: 288, n: 256}, metaWith(big, "tma_b", 1), ""},
		{peerCase{name: "512x288x256 256x128 tma_b 2", m: 512, k: 288, n: 256}, metaWith(big, "tma_b", 2), ""},
		{peerCase{name: "gelu 300x288x256 256x128 rows masked tma_b 2", m: 300, k: 288, n: 256, gelu: true}, metaWith(big, "tma_b", 2), ""},
		{peerCase{name: "gelu 256x224x192 128x64 tma_b 2", m: 256, k: 224, n: 192, gelu: true}, metaWith(small, "tma_b", 2), ""},
		{peerCase{name: "256x224x192 128x64 early_copies tma_b 2", m: 256, k: 224, n: 192}, metaWith(small, "tma_b", 2, "early_copies", 1), ""},
		{peerCase{name: "512x288x256 256x128 tma_ahead 0", m: 512, k: 288, n: 256}, metaWith(big, "tma_ahead", 0), ""},
		{peerCase{name: "gelu 256x224x192 128x64 tma_ahead", m: 256, k: 224, n: 192, gelu: true}, metaWith(small, "tma_ahead", 1), ""},
		{peerCase{name: "256x224x192 128x64 tma_ahead early_copies", m: 256, k: 224, n: 192}, metaWith(small, "tma_ahead", 1, "early_copies", 1), ""},
		{peerCase{name: "512x96x200 256x128 columns masked", m: 512, k: 96, n: 200}, metaWith(big, "tma_b", 2), "B's load is masked"},
		{peerCase{name: "512x100x256 256x128 K masked, tma_k = 0", m: 512, k: 100, n: 256}, metaWith(big, "tma_b", 2, "tma_k", 0), "A is not copied by tensor copies"},
		// K masked (rows of 100 floats), tma_k by default or 1: A's map
		// bounds K, B's its rows
		{peerCase{name: "512x100x256 256x128 K masked: maps bounding K", m: 512, k: 100, n: 256}, metaWith(big, "tma_b", 2), ""},
		{peerCase{name: "512x100x256 256x128 K masked, tma_k: maps bounding K", m: 512, k: 100, n: 256}, metaWith(big, "tma_b", 2, "tma_k", 1), ""},
		{peerCase{name: "gelu 300x100x192 128x64 K masked, rows masked, tma_k", m: 300, k: 100, n: 192, gelu: true}, metaWith(small, "tma_b", 2, "tma_k", 1), ""},
		{peerCase{name: "512x98x256 256x128 K masked, tma_k, A's rows not 16-byte aligned", m: 512, k: 98, n: 256}, metaWith(big, "tma_b", 2, "tma_k", 1), "A is not copied by tensor copies"},
	} {
		t.Run(c.pc.name, func(t *testing.T) {
			p, ck, dump, loop := simulateDumped(t, c.pc, tile.PrecTF32, c.tune)
			if c.declined != "" {
				require.Contains(t, dump, "tma_b declined: "+c.declined)
				require.NotContains(t, ck.PTX, "cp.async.bulk.tensor.4d")
				require.Contains(t, loop, "bar.sync 0;", "the loop's barrier")
			} else {
				require.Contains(t, dump, "B by one tensor copy a stage too")
				require.Len(t, ck.TensorMaps, 2)
				var kRows, kCols int64 // the maps' bounds along K where the loop masks it
				if c.pc.k%32 != 0 {
					kRows, kCols = int64(c.pc.k), int64(c.pc.k)
				}
				require.Equal(t, kCols, ck.TensorMaps[0].Cols, "A's map's columns")
				require.Equal(t, codegen.TensorMap{Param: 1, ElemBytes: 4, Inner: int64(c.pc.n), Rows: kRows, Box: [2]int{c.tune["BLOCK_N"], 32}, Swizzle: 128, Paired: true}, ck.TensorMaps[1])
				require.Contains(t, loop, "cp.async.bulk.tensor.4d", "B's copies in the loop")
				// B's copies by thread 0 only: no cp.async of 16 bytes left
				require.NotContains(t, ck.PTX, "cp.async.cg.shared.global")
				noBar := c.tune["tma_b"] != 1
				// the copies stages-2 iterations ahead, stages-1 with tma_ahead
				ahead := c.tune["num_stages"] - 2
				if v, ok := c.tune["tma_ahead"]; noBar && c.tune["early_copies"] == 0 && (!ok || v != 0) {
					ahead++ // not before the iteration's release
				}
				require.Contains(t, dump, fmt.Sprintf("%d ahead", ahead))
				require.Equal(t, !noBar, strings.Contains(loop, "bar.sync"), "a CTA barrier in the loop with tma_b = %d", c.tune["tma_b"])
				// tma_b = 2: each iteration releases the stage before
				// (every thread) and thread 0 waits for the release
				require.Equal(t, noBar, strings.Count(loop, "mbarrier.arrive.shared::cta.b64") == 2, "two releases (the unrolled iterations)")
				require.Equal(t, noBar, strings.Contains(loop, "$L_tma_empty_"), "thread 0's wait for the stage's release")
			}
			maxRel, normRel, bad := p.check(c.pc, p.args[len(p.args)-1], peerTol(tile.PrecTF32))
			require.Zero(t, bad, "max %.2g norm %.2g", maxRel, normRel)
			t.Logf("max %.2g norm %.2g", maxRel, normRel)
		})
	}
}

// TestTensorCopiesOfBBF16: at bf16 B's tile is one three-dimensional
// tensor copy a stage where tma_b asks (TensorMap.Groups32: columns in
// groups of 32, a group's rows one 128-byte line each, so the pair reads
// of rows 2t and 2t+1 find distinct swizzle phases), beside A's; the loop
// keeps its barrier (the pass over A's copies). Run in ptxsim with
// racecheck and initcheck against float64 at bf16's tolerance: more
// iterations than stages, rows masked, K masked (the maps' bounds), 192-
// and 256-row tiles, 64 columns, gelu; declined where B's columns are
// masked, and by default (unmeasured).
func TestTensorCopiesOfBBF16(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds in the simulator")
	}
	big := tile.Meta{"wgmma": 2, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}
	mid := tile.Meta{"wgmma": 2, "BLOCK_M": 192, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}
	small := tile.Meta{"wgmma": 2, "tma": 1, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}
	for _, c := range []struct {
		pc       peerCase
		tune     tile.Meta
		declined string // "": B by tensor copies; "-": not asked
	}{
		{peerCase{name: "512x288x256 256x128 tma_b 1", m: 512, k: 288, n: 256}, metaWith(big, "tma_b", 1), ""},
		{peerCase{name: "gelu 300x288x256 256x128 rows masked tma_b 2", m: 300, k: 288, n: 256, gelu: true}, metaWith(big, "tma_b", 2), ""},
		{peerCase{name: "430x100x256 192x128 K masked", m: 430, k: 100, n: 256}, metaWith(mid, "tma_b", 1), ""},
		{peerCase{name: "gelu 200x160x192 128x64", m: 200, k: 160, n: 192, gelu: true}, metaWith(small, "tma_b", 1), ""},
		{peerCase{name: "512x96x200 256x128 columns masked", m: 512, k: 96, n: 200}, metaWith(big, "tma_b", 1), "B's load is masked"},
		{peerCase{name: "512x96x256 256x128 by default", m: 512, k: 96, n: 256}, big, "-"},
	} {
		t.Run(c.pc.name, func(t *testing.T) {
			p, ck, dump, loop := simulateDumped(t, c.pc, tile.PrecBF16, c.tune)
			require.Contains(t, loop, "bar.sync 0;", "the loop's barrier (the pass over A's copies)")
			require.Contains(t, loop, "cp.async.bulk.tensor.2d", "A's tensor copies")
			switch c.declined {
			case "":
				require.Contains(t, dump, "columns in groups of 32")
				require.Len(t, ck.TensorMaps, 2)
				var kRows int64
				if c.pc.k%32 != 0 {
					kRows = int64(c.pc.k)
				}
				require.Equal(t, codegen.TensorMap{Param: 1, ElemBytes: 4, Inner: int64(c.pc.n), Rows: kRows, Box: [2]int{c.tune["BLOCK_N"], 32}, Swizzle: 128, Groups32: true}, ck.TensorMaps[1])
				require.Contains(t, loop, "cp.async.bulk.tensor.3d", "B's copies in the loop")
				require.NotContains(t, ck.PTX, "cp.async.cg.shared.global", "a thread's own copies left")
			case "-":
				require.Len(t, ck.TensorMaps, 1, "B's tensor copies by default")
				require.Contains(t, ck.PTX, "cp.async.cg.shared.global")
			default:
				require.Contains(t, dump, "tma_b declined: "+c.declined)
				require.Len(t, ck.TensorMaps, 1)
			}
			maxRel, normRel, bad := p.check(c.pc, p.args[len(p.args)-1], peerTol(tile.PrecBF16))
			require.Zero(t, bad, "max %.2g norm %.2g", maxRel, normRel)
		})
	}
}

// simulateDumped is simulateCompiled's kernel, compiled form and dump,
// and the PTX of its pipelined loop.
func simulateDumped(t *testing.T, pc peerCase, prec tile.Precision, tune tile.Meta) (*peerKernel, *codegen.Kernel, string, string) {
	t.Helper()
	p, ck, dump := simulateCompiled(t, pc, prec, tune)
	return p, ck, dump, pipeLoop(t, ck.PTX)
}

// simulateCompiled builds pc's kernel as graphpass writes it for the H200
// at prec, compiles it with its pipeline dump and runs it in ptxsim for
// sm_90 with racecheck and initcheck (the PTX the simulator ran the
// compiled one): the kernel, its compiled form and the dump.
func simulateCompiled(t *testing.T, pc peerCase, prec tile.Precision, tune tile.Meta) (*peerKernel, *codegen.Kernel, string) {
	t.Helper()
	p, err := buildPeer(pc, graphpass.H200, prec, tune)
	require.NoError(t, err)
	args := p.anyArgs()
	ck, dump := compileDumped(t, p.k.Tile, ptxsim.Spec(p.k.Tile, args))
	sim := &ptxsim.Launcher{Arch: 90, Racecheck: true, Initcheck: true}
	require.NoError(t, sim.Launch(p.k.Tile, p.k.Grid, args...))
	require.Equal(t, ck.PTX, sim.Last.PTX)
	return p, ck, dump
}

// pipeLoop is the PTX of the pipelined loop's body (from its head to its end).
func pipeLoop(t *testing.T, ptx string) string {
	hl := regexp.MustCompile(`\$L_pipe_\d+:`).FindStringIndex(ptx)
	el := regexp.MustCompile(`\$L_pipe_end_\d+:`).FindStringIndex(ptx)
	require.True(t, hl != nil && el != nil && el[0] > hl[0], "no pipelined loop")
	return ptx[hl[0]:el[0]]
}

// TestWarpSpecialisedTensorCopies: ws = 2, a producer warpgroup (or with
// ws_warps = 1 one warp) beside the consumers, whose first thread issues
// the tensor copies of A and B after waiting on each stage's empty
// mbarrier (the other producer warps exit once setmaxnreg gave their
// registers to the consumers), the consumers without a CTA
// barrier in their loop, in ptxsim under racecheck and initcheck against
// float64 (output poisoned): more iterations than stages, rows masked, 4
// and 8 consumer warps, and a B the tensor copies cannot take (columns
// masked), where the kernel is the plain form and the dump says why.
func TestWarpSpecialisedTensorCopies(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds in the simulator")
	}
	big := tile.Meta{"wgmma": 2, "ws": 2, "BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}
	small := tile.Meta{"wgmma": 2, "ws": 2, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}
	for _, c := range []struct {
		pc       peerCase
		tune     tile.Meta
		declined string
	}{
		{peerCase{name: "512x288x256 256x128", m: 512, k: 288, n: 256}, big, ""},
		{peerCase{name: "gelu 300x288x256 256x128 rows masked", m: 300, k: 288, n: 256, gelu: true}, big, ""},
		{peerCase{name: "gelu 256x224x192 128x64", m: 256, k: 224, n: 192, gelu: true}, small, ""},
		{peerCase{name: "512x288x256 256x128 one producer warp", m: 512, k: 288, n: 256}, metaWith(big, "ws_warps", 1), ""},
		{peerCase{name: "512x96x200 256x128 columns masked", m: 512, k: 96, n: 200}, big, "ws = 2 needs A's and B's tensor copies"},
		// bf16 passes over its copies: declined, the plain bf16 form (the
		// fallback once planned A's tensor copies regardless: initcheck)
		{peerCase{name: "bf16 512x288x256 256x128", m: 512, k: 288, n: 256}, big, "ws = 2 needs A's and B's tensor copies"},
	} {
		t.Run(c.pc.name, func(t *testing.T) {
			prec := tile.PrecTF32
			if strings.HasPrefix(c.pc.name, "bf16") {
				prec = tile.PrecBF16
			}
			p, ck, dump := simulateCompiled(t, c.pc, prec, c.tune)
			if c.declined != "" {
				require.Contains(t, dump, c.declined)
				require.Zero(t, ck.ProducerWarps)
			} else {
				pw := 4
				if c.tune["ws_warps"] == 1 {
					pw = 1
				}
				require.Contains(t, dump, fmt.Sprintf("%d producer warps, the first one's first thread issuing the tensor copies", pw))
				require.Equal(t, pw, ck.ProducerWarps)
				require.Len(t, ck.TensorMaps, 2)
				// a producer warpgroup beside 8 consumer warps gives its
				// registers to them; 4 + 4 warps and one producer warp do not
				split := pw == 4 && c.tune["num_warps"] == 8
				require.Equal(t, split, strings.Contains(ck.PTX, "setmaxnreg.inc"), "setmaxnreg")
				require.Equal(t, split, ck.RegSplit != [2]int{}, "RegSplit %v", ck.RegSplit)
				// the producer's loop: the empty wait, A's and B's copies;
				// the consumers': the full wait, no CTA barrier
				between := func(from, to string) string {
					a := regexp.MustCompile(regexp.QuoteMeta(from) + `\d+:`).FindStringIndex(ck.PTX)
					b := regexp.MustCompile(regexp.QuoteMeta(to) + `\d+:`).FindStringIndex(ck.PTX)
					require.True(t, a != nil && b != nil && b[0] > a[0], "no %s…%s", from, to)
					return ck.PTX[a[0]:b[0]]
				}
				prod := between("$L_ws_produce_", "$L_ws_drain_")
				require.Contains(t, prod, "$L_ws_empty_")
				require.Contains(t, prod, "cp.async.bulk.tensor.2d")
				require.Contains(t, prod, "cp.async.bulk.tensor.4d")
				require.NotContains(t, prod, "cp.async.cg")
				cons := between("$L_ws_consume_", "$L_ws_end_")
				require.Contains(t, cons, "$L_ws_full_")
				require.NotContains(t, cons, "bar.sync")
				require.NotContains(t, cons, "fence.proxy.async", "tensor copies need no proxy fence")
			}
			maxRel, normRel, bad := p.check(c.pc, p.args[len(p.args)-1], peerTol(prec))
			require.Zero(t, bad, "max %.2g norm %.2g", maxRel, normRel)
			t.Logf("max %.2g norm %.2g", maxRel, normRel)
		})
	}
}

// TestTensorCopies3xTF32: the swapped 3xTF32 form with one block
// accumulator and A's (and B's) tiles by tensor copies (tma = 1): the pass
// that splits A reads the stage once its copies completed on the full
// mbarrier, the loop keeps its barrier (the pass's writes); ptxsim with
// racecheck and initcheck, against float64 at 3xTF32's tolerance, output
// poisoned.
func TestTensorCopies3xTF32(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds in the simulator")
	}
	base := tile.Meta{"wgmma": 2, "tma": 1, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}
	for _, c := range []struct {
		pc    peerCase
		tune  tile.Meta
		maps  int
		bSkip bool
	}{
		{peerCase{name: "512x288x256", m: 512, k: 288, n: 256}, metaWith(base), 2, false},
		{peerCase{name: "gelu 300x288x256 rows masked", m: 300, k: 288, n: 256, gelu: true}, metaWith(base), 2, false},
		{peerCase{name: "512x288x256 tma_b 0", m: 512, k: 288, n: 256}, metaWith(base, "tma_b", 0), 1, true},
		{peerCase{name: "gelu 300x224x256 x3_span 1", m: 300, k: 224, n: 256, gelu: true}, metaWith(base, "x3_span", 1), 2, false},
	} {
		t.Run(c.pc.name, func(t *testing.T) {
			p, sim := simulatePeer(t, c.pc, tile.PrecTF32x3, c.tune)
			require.Len(t, sim.Last.TensorMaps, c.maps)
			require.Contains(t, sim.Last.PTX, "cp.async.bulk.tensor.2d")
			require.Equal(t, !c.bSkip, strings.Contains(sim.Last.PTX, "cp.async.bulk.tensor.4d"))
			loop := pipeLoop(t, sim.Last.PTX)
			require.Contains(t, loop, "$L_tma_full_", "the pass waits for the stage's tensor copies")
			require.Contains(t, loop, "bar.sync", "the pass's writes before the wgmmas read them")
			maxRel, normRel, bad := p.check(c.pc, p.args[len(p.args)-1], peerTol(tile.PrecTF32x3))
			require.Zero(t, bad, "max %.2g norm %.2g", maxRel, normRel)
			t.Logf("max %.2g norm %.2g", maxRel, normRel)
		})
	}
}

// metaWith is a copy of m with the pairs kv (name, value) set.
func metaWith(m tile.Meta, kv ...any) tile.Meta {
	r := tile.Meta{}
	for k, v := range m {
		r[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		r[kv[i].(string)] = kv[i+1].(int)
	}
	return r
}
