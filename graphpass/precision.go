package graphpass

import "github.com/tilefuse/tilefuse/tile"

// DefaultPrecision is the precision of group grp's f32 products on t where
// the user chose none (fusion's default on the GPU): tile.PrecTF32x3 where
// grp is a matrix product (its epilogue fused) at least defaultX3Side on
// each side (m, n and K) on a GPU with Hopper's shared memory (hopperSmem: codegen
// takes the swapped wgmma form there, sm_90) whose 3xTF32 kernel is that
// form (meta-parameter wgmma = 2): its sums of 64 k in block accumulators
// make it more accurate than SGEMM, and it runs at twice SGEMM's rate.
// Measured on the H200 (2026-12-03, nineteenth session, `tilefuse peer`
// beside PyTorch in one call), 4096³: 3xTF32 99.6 TFLOP/s, max error 6.1e-7
// of the largest reference; cuBLAS's strict fp32 49.3, 3.5e-6; ieee (the
// FMA kernel) 35.7, 2.6e-6. tile.PrecIEEE everywhere else: other groups
// (attention, the heads', rows), smaller products, and targets without
// wgmma, where 3xTF32 runs on mma.sync with one accumulator over all of K
// (9× less accurate than SGEMM at K = 4096).
func DefaultPrecision(grp *Group, t Target) tile.Precision {
	ws, ok := productWaveShape(grp)
	if !ok || grp.MatMul.Info.DType != tile.F32 || !t.GPU() || !hopperSmem(t) || min(ws.m, ws.n, ws.k) < defaultX3Side {
		return tile.PrecIEEE
	}
	if !BlockSummed(defaultMeta(grp, t, tile.PrecTF32x3)) {
		return tile.PrecIEEE
	}
	return tile.PrecTF32x3
}

// defaultX3Side is the least side (m, n, K) of a product DefaultPrecision
// gives 3xTF32. The H200, 2026-12-03 (r19f, `tilefuse bench -backend cuda
// -size all -precision ieee|default`, fused device ms, with a side of 128
// as the bound): linear_gelu 128³ 0.00722 → 0.00899 (slower), 1024³ 0.0805
// → 0.0308; mlp_step large 0.160 → 0.118, encoder_fwd large 0.121 →
// 0.0963 and encoder_fwd_bwd large 0.472 → 0.328 (their products 256 or
// more on each side); so 256.
const defaultX3Side = 256

// BlockSummed reports whether a 3xTF32 matrix product written with
// meta-parameters meta sums in block accumulators: the swapped wgmma form
// (wgmma = 2), staged or not, warp-specialised or not. Where
// DefaultPrecision chose 3xTF32, the autotuner tunes among such
// candidates only.
func BlockSummed(meta tile.Meta) bool { return meta["wgmma"] == 2 }
