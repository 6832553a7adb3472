#!/usr/bin/env bash
# Issue 10's odd shapes on a GPU machine, from the repository root, after
# scripts/gpu-build.sh (.gpu/tilefuse and .gpu/fusion.test, -tags
# tilefuse_cuda):
#
#   1. tilefuse peer at the odd shapes (every side at least 1024, one side
#      odd at a time, A·Bᵀ with an odd K, K = 4100, 1025³, GPT-2's
#      vocabulary projection) and their aligned neighbours, each with the
#      operands' padded copies (graphpass padOperands: the default) and
#      without them (TILEFUSE_PAD=0), TF32, 3xTF32 and bf16;
#   2. codegen's tma_k = 1 (tensor maps that bound K; opt-in, not yet
#      measured): K = 4100 and 784 without copies and with tma_k, against
#      the default; compute-sanitizer memcheck of those kernels first;
#   3. cuBLAS at the same shapes (bench/torch/workloads.py --peer);
#   4. fusion's padded-operand tests on the device;
#   5. tensors past 32-bit offsets (graphpass.MaxElements): fusion's
#      64-bit kernels and flattened grids on the device (the bounds
#      lowered), compute-sanitizer
#      memcheck of the logits' product (65536×50257×768, its output indexed
#      in 64 bits) at TF32, then its times beside cuBLAS's.
#
#   bash scripts/gpu-pad.sh                 # logs in $OUT (or ./gpu-logs/pad)
#   STEPS="2" bash scripts/gpu-pad.sh       # some steps only
#
# $OUT gets pad.log: every step's output.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-logs/pad}
mkdir -p "$out"
tf=${TILEFUSE:-.gpu/tilefuse}
case $tf in /*) ;; *) tf=$PWD/$tf ;; esac # step 4 runs from fusion/
steps=${STEPS:-1 2 3 4 5}
if [ ! -x "$tf" ]; then
  echo "gpu-pad: no $tf: build it with scripts/gpu-build.sh (or set TILEFUSE)" >&2
  exit 2
fi
log=$(cd "$out" && pwd)/pad.log
: > "$log"
fail=0
. scripts/lib-run.sh # run TIMEOUT CMD...
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv >> "$log" 2>&1
odd=("matmul 4096³" "matmul 1024³" "1025³" "4095×4097×4099" "matmul 4096×4096×4099" "NT 4096×4096×4099" "4096×4097×4096" "4096×4096×4100" "4096×1024×784" "vocab 4096×50257×768")
for s in $steps; do
  case $s in
  1)
    for pad in "" 0; do
      for c in "${odd[@]}"; do
        run 300 env TILEFUSE_PAD=$pad "$tf" peer -precision tf32,tf32x3,bf16 -run "$c" -reps 50
      done
    done
    ;;
  2)
    for c in "4096×4096×4100" "4096×1024×784"; do
      run 300 env TILEFUSE_PAD=0 compute-sanitizer --tool memcheck "$tf" peer -precision tf32,tf32x3 -run "$c" -reps 10 -warmup-ms 0 -tune "tma_k=1"
      run 300 env TILEFUSE_PAD=0 "$tf" peer -precision tf32,tf32x3 -run "$c" -reps 50 -tune "tma_k=1"
      run 300 "$tf" peer -precision tf32,tf32x3 -run "$c" -reps 50
    done
    ;;
  3)
    for c in "${odd[@]}"; do
      run 300 python3 bench/torch/workloads.py --peer --workload "$c" --peer-compile 0
    done
    ;;
  4)
    # from the package's directory: its testdata
    (cd fusion && run 300 ../.gpu/fusion.test -test.run 'TestPaddedOperandsOnGPU|TestWeightGradientTransposedOnceOnGPU' -test.v)
    ;;
  5)
    (cd fusion && run 300 ../.gpu/fusion.test -test.run 'TestIndex64KernelsOnGPU|TestOversizedLeftToGorgonia|TestFlattenedGridsOnGPU' -test.v)
    run 300 compute-sanitizer --tool memcheck "$tf" peer -precision tf32 -run "logits" -reps 1 -warmup-ms 0
    run 300 "$tf" peer -precision tf32,tf32x3,bf16 -run "logits" -reps 20
    run 300 python3 bench/torch/workloads.py --peer --workload "logits" --peer-compile 0
    ;;
  esac
done
exit $fail
