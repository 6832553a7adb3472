#!/usr/bin/env bash
# Runs on a GPU machine from the repository root, after scripts/gpu-build.sh:
# the weight gradients Aᵀ·B (tilefuse peer's 'bert TN' shapes) in the
# swapped wgmma form with Aᵀ staged (wg_stage = 1: 16-byte copies into a
# staging tile, transposed by their threads into wgmma's K-major tile),
# beside the heuristic's choice (mma.sync) and the swapped form with
# 4-byte copies (wg_stage unset); then `tilefuse tune` of the encoder
# layer at the peer size, whose Aᵀ·B kernels have the staged form among
# their candidates (graphpass stagedCandidates). Not measured yet: the
# heuristic does not choose it. Logs go to $OUT (or ./gpu-logs).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-logs}
mkdir -p "$out"
s='wgmma=2,wg_stage=1,SPLIT_K=1,BLOCK_K=32,BLOCK_N=128,num_warps=8'
tunes="$s,BLOCK_M=192,num_stages=3;$s,BLOCK_M=128,num_stages=4;$s,BLOCK_M=64,num_stages=4"
tunes="$tunes;$s,BLOCK_M=128,num_stages=4,SPLIT_K=2;$s,BLOCK_M=192,num_stages=3,SPLIT_K=2"
tunes="$tunes;wgmma=2,SPLIT_K=1,BLOCK_K=32,BLOCK_N=128,num_warps=8,BLOCK_M=128,num_stages=4"
.gpu/tilefuse peer -precision tf32,tf32x3 -run 'bert TN' -tune "$tunes" > "$out/peer-tn-tf32.txt" 2>&1
echo "peer TN tf32,tf32x3 rc=$?"; cat "$out/peer-tn-tf32.txt"
.gpu/tilefuse peer -precision bf16 -run 'bert TN' -tune "$tunes;$s,BLOCK_M=256,num_stages=3" > "$out/peer-tn-bf16.txt" 2>&1
echo "peer TN bf16 rc=$?"; cat "$out/peer-tn-bf16.txt"
# bf16's swapped form now keeps its bf16 tile in each stage (3 stages at
# 256×128; the two tiles after the ring raced): its 4096³ rows again
.gpu/tilefuse peer -precision bf16 -run '4096³' > "$out/peer-bf16-4096.txt" 2>&1
echo "peer bf16 4096³ rc=$?"; cat "$out/peer-bf16-4096.txt"
for prec in tf32 bf16; do
  .gpu/tilefuse tune -backend cuda -workload encoder_fwd_bwd -size peer -precision "$prec" -q \
    -cache-dir "$out/tune-cache-tn" > "$out/tune-encoder-$prec.txt" 2>&1
  echo "encoder_fwd_bwd $prec rc=$?"; grep -E 'Aᵀ|wg_stage' "$out/tune-encoder-$prec.txt"
done
