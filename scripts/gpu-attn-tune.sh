#!/usr/bin/env bash
# Runs on a GPU machine from the repository root, after scripts/gpu-build.sh:
# `tilefuse tune` of the attention workloads at the peer sizes (B4 H16 S2048
# D64, B2 H16 S4096 D128, and the training step at D64), TF32, bf16 and
# 3xTF32. Each log lists every candidate's time, fastest first: among them
# the forms on Hopper's wgmma (meta-parameter wgmma = 1, and wg_stage = 1
# for the TF32 and 3xTF32 forward; codegen's MMA loops on wgmma), which the
# heuristic does not choose until they are measured. Tuning results also go
# to the cache on disk; -cache-dir keeps them apart. Logs go to $OUT (or
# ./gpu-logs).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-logs}
mkdir -p "$out"
for prec in tf32 bf16 tf32x3; do
  for w in attention attention_d128 attention_fwd_bwd; do
    .gpu/tilefuse tune -backend cuda -workload "$w" -size peer -precision "$prec" -q \
      -cache-dir "$out/tune-cache" > "$out/tune-$w-$prec.txt" 2>&1
    echo "$w $prec rc=$?"; grep -E '^\| .*attention' "$out/tune-$w-$prec.txt"
  done
done
