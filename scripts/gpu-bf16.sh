#!/usr/bin/env bash
# Issue 10's bf16 products on a GPU machine, from the repository root,
# after scripts/gpu-build.sh (.gpu/tilefuse and .gpu/cuda.test, -tags
# tilefuse_cuda): what the forty-second session built and could not
# measure. (Step 1 ran on an H100 in the forty-third session, r43a: the
# device test and memcheck pass, tma_b = 1 slower in six of eight pairs,
# so B stays cp.async at bf16; step 2 is still unmeasured.)
#
#   1. B's tensor copies at bf16 (codegen tma_b = 1: a 3-D map, columns
#      in groups of 32; opt-in): cuda's device test (bit for bit the
#      cp.async form), compute-sanitizer memcheck and racecheck, then
#      tilefuse peer beside the default (A by tensor copies, B by
#      cp.async) at the A·B shapes, twice;
#   2. A's tensor copies at tiles of 128 rows (tma = 1 there; the default
#      takes them from 192 rows): the same shapes at BLOCK_M = 128 with
#      and without;
#   3. cuBLAS's bf16 at the same shapes (bench/torch/workloads.py --peer),
#      for the table.
#
#   bash scripts/gpu-bf16.sh              # logs in $OUT (or ./gpu-logs/bf16)
#   STEPS="1" bash scripts/gpu-bf16.sh    # some steps only
#
# $OUT gets bf16.log: every step's output.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-logs/bf16}
mkdir -p "$out"
tf=${TILEFUSE:-.gpu/tilefuse}
steps=${STEPS:-1 2 3}
if [ ! -x "$tf" ]; then
  echo "gpu-bf16: no $tf: build it with scripts/gpu-build.sh (or set TILEFUSE)" >&2
  exit 2
fi
log=$(cd "$out" && pwd)/bf16.log
: > "$log"
fail=0
. scripts/lib-run.sh # run TIMEOUT CMD...
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv >> "$log" 2>&1
nn=("matmul 4096³" "linear_gelu 4096³" "bert NN 4096×3072×768" "bert NN 4096×768×3072" "matmul 4096×4096×4100")
for s in $steps; do
  case $s in
  1)
    run 120 .gpu/cuda.test -test.run 'TestTensorCopiesOfBOnGPU' -test.v
    run 120 compute-sanitizer --tool memcheck "$tf" peer -precision bf16 -run "bert NN 4096×768×3072" -reps 2 -warmup-ms 0 -tune "tma_b=1"
    run 300 compute-sanitizer --tool racecheck "$tf" peer -precision bf16 -run "bert NN 4096×768×768" -reps 1 -warmup-ms 0 -tune "tma_b=1"
    for i in 1 2; do
      for c in "${nn[@]}"; do
        run 120 "$tf" peer -precision bf16 -run "$c" -reps 50 -tune "tma_b=1"
      done
    done
    ;;
  2)
    for c in "${nn[@]}"; do
      run 120 "$tf" peer -precision bf16 -run "$c" -reps 50 -tune "BLOCK_M=128,tma=0;BLOCK_M=128,tma=1"
    done
    ;;
  3)
    for c in "matmul 4096³" "bert NN"; do
      run 300 python3 bench/torch/workloads.py --peer --workload "$c" --peer-compile 0
    done
    ;;
  esac
done
exit $fail
