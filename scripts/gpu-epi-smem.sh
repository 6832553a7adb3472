#!/usr/bin/env bash
# Runs on a GPU machine from the repository root, after scripts/gpu-build.sh:
# the swapped wgmma form's epilogue through shared memory (epi_smem = 1:
# the accumulator of Cᵀ stored into the stages' memory after the K loop and
# read back row-major, 16-byte loads and stores) beside the heuristic's
# choice (the same tiling with the 4-byte epilogue), on the products whose
# epilogue cost most (4096×3072 bare 198 TFLOP/s, with gelu(x·W+b) 131);
# then `tilefuse tune` of the encoder layer at the peer size, whose swapped
# kernels (the A·Bᵀ + GELU-backward one: 275 µs) have epi_smem = 1 among
# their candidates (graphpass epiSmemCandidates). Not measured yet: no
# heuristic chooses it. Logs go to $OUT (or ./gpu-logs).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-logs}
mkdir -p "$out"
# the heuristic's tiling with epi_smem = 1; at TF32 also the wave model's
# 256×128 and 192×128 with and without it (bf16's stages differ: its
# heuristic's own only)
s='wgmma=2,SPLIT_K=1,BLOCK_K=32,BLOCK_N=128,num_warps=8'
tf32="epi_smem=1;$s,BLOCK_M=256,num_stages=4;$s,BLOCK_M=256,num_stages=4,epi_smem=1"
tf32="$tf32;$s,BLOCK_M=192,num_stages=4;$s,BLOCK_M=192,num_stages=4,epi_smem=1"
for prec in tf32 bf16; do
  tunes='epi_smem=1'
  [ "$prec" = tf32 ] && tunes=$tf32
  for run in 'matmul 4096³' 'linear_gelu 4096³' 'bert NN gelu' 'bert NN 4096×3072' 'bert NT 4096×3072' 'bert NN 4096×768×3072'; do
    f="$out/peer-epi-$prec-${run// /_}.txt"
    .gpu/tilefuse peer -precision "$prec" -run "$run" -tune "$tunes" > "$f" 2>&1
    echo "peer $prec '$run' rc=$?"; cat "$f"
  done
done
for prec in tf32 bf16; do
  .gpu/tilefuse tune -backend cuda -workload encoder_fwd_bwd -size peer -precision "$prec" -q \
    -cache-dir "$out/tune-cache-epi" > "$out/tune-encoder-epi-$prec.txt" 2>&1
  echo "encoder_fwd_bwd $prec rc=$?"; grep -E 'epi_smem' "$out/tune-encoder-epi-$prec.txt"
done
