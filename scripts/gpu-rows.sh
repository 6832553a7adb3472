#!/usr/bin/env bash
# Issue 12's GPU round, on a GPU machine, from the repository root, after
# scripts/gpu-build.sh (which builds .gpu/tilefuse, .gpu/cuda.test and
# .gpu/fusion.test with -tags tilefuse_cuda):
#
#   1. tests of what the round measures: the module cache on disk, the
#      back-to-back device times, every form of generated row kernel on the
#      GPU against float64;
#   2. the generated row kernels alone at the peer shapes, timed as gpubench
#      times the hand-written ones (tilefuse tune: 5 ms of launches, then
#      batches of 10 between events; default and tuned choice, GB/s of the
#      kernel's inputs and outputs), and the hand-written ones (tilefuse
#      gpubench) beside them: how far the generated kernels are from the
#      hand-written ones, without the graph around them;
#   3. the peer-size graphs (softmax and LayerNorm at five shapes, the chain
#      at 64M) through tilefuse bench -backend cuda, heuristic and
#      autotuned, and the same in PyTorch (eager, library, torch.compile,
#      Triton's tutorial softmax);
#   4. compile times of encoder_fwd_bwd large with an empty cache: cold and
#      a second compile in one process, then a second process (the cubins
#      on disk); both with CUDA_CACHE_DISABLE=1, so that the driver's own
#      JIT cache (~/.nv/ComputeCache) does not make "cold" warm; tilefuse
#      bench prints each compile by stage (fusion.Report.Stages);
#   5. tilefuse tune on encoder_fwd_bwd large (target: 30 s), then again
#      (every choice from the cache).
#
#   bash scripts/gpu-rows.sh                  # logs in $OUT (or ./gpu-logs/rows)
#   STEPS="2 3" bash scripts/gpu-rows.sh      # some steps only
#   DEVICE_BATCH=10 bash scripts/gpu-rows.sh  # step 3: device times of 10
#                                             # runs (calls) between events
#
# $OUT gets two files (the device tool brings back at most 8): rows.log,
# every step's table, the last lines of its stderr and the steps' status
# (also printed), and rows-logs.tar.gz, every step's full stdout, stderr
# and JSON.
#
# Each step has a timeout; the script goes on after a failed step and exits
# non-zero if any failed. Prints every table last.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-logs/rows}
mkdir -p "$out"
# the steps' own files, gathered into $out at the end
logs=$(mktemp -d)
tf=${TILEFUSE:-.gpu/tilefuse}
steps=${STEPS:-1 2 3 4 5}
if [ ! -x "$tf" ]; then
  echo "gpu-rows: no $tf: build it with scripts/gpu-build.sh (or set TILEFUSE)" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$logs/nvidia-smi.txt" 2>&1
fail=0
# a scratch cache for the measurements, so that the user's is left alone
# and step 4 starts from nothing
cache=$(mktemp -d)
trap 'rm -rf "$cache" "$logs"' EXIT
peer="peer:8192x4096 peer:32768x1024 peer:4096x32768 peer:1823x781 peer:1151x8192"

step() { # step NAME TIMEOUT CMD...: run CMD into $logs/NAME.{md,err}, say how it went
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$logs/$name.md" 2> "$logs/$name.err"
  local rc=$?
  echo "== $name: rc=$rc ($((SECONDS - t0)) s): $*" | tee -a "$logs/steps.txt"
  [ "$rc" -eq 0 ] || fail=1
}

for s in $steps; do
  case $s in
  1)
    step test-cuda 300 .gpu/cuda.test -test.run 'TestModuleCacheOnGPU|TestCompileManyOnGPU|TestConformanceGPU' -test.v
    step test-fusion 600 .gpu/fusion.test -test.run 'TestRowPatternsOnGPU|TestSquaresAboutARowValueOnGPU|TestDeviceTimesOnGPU|TestDeviceTimeOnGPU' -test.v
    ;;
  2)
    for w in softmax layernorm; do
      for sz in $peer; do
        step "kernel-$w-${sz#peer:}" 120 "$tf" tune -backend cuda -workload "$w" -size "$sz" -cache-dir "$cache/xdg3/tilefuse" -q
      done
    done
    step kernel-chain-64M 120 "$tf" tune -backend cuda -workload chain -size peer:64M -cache-dir "$cache/xdg3/tilefuse" -q
    step gpubench 300 "$tf" gpubench
    ;;
  3)
    # step 2's tuning results are in this cache: -autotune takes them
    step bench-peer 900 env XDG_CACHE_HOME="$cache/xdg3" "$tf" bench -backend cuda -q -runs "${RUNS:-10}" -workload chain,softmax,layernorm -size peer \
      -device-batch "${DEVICE_BATCH:-1}" -json "$logs/bench-peer.json"
    step bench-peer-autotune 900 env XDG_CACHE_HOME="$cache/xdg3" "$tf" bench -backend cuda -q -runs "${RUNS:-10}" -workload chain,softmax,layernorm -size peer \
      -device-batch "${DEVICE_BATCH:-1}" -autotune -json "$logs/bench-peer-autotune.json"
    step torch-peer 900 python3 bench/torch/workloads.py --runs "${TORCH_RUNS:-30}" --workload chain,softmax,layernorm --sizes peer \
      --device-batch "${DEVICE_BATCH:-1}" --json "$logs/torch-peer.json"
    ;;
  4)
    # a fresh cache directory: the first process compiles cold (the
    # bench's "compile 1st" is its first NewTapeMachine, "2nd" a second
    # one in the same process); the second process finds the cubins
    x4=$cache/xdg4
    step compile-process1 600 env CUDA_CACHE_DISABLE=1 XDG_CACHE_HOME="$x4" "$tf" bench -backend cuda -q -runs 1 -workload encoder_fwd_bwd -size large -json "$logs/compile-process1.json"
    step compile-cache-after1 60 env XDG_CACHE_HOME="$x4" "$tf" cache
    step compile-process2 600 env CUDA_CACHE_DISABLE=1 XDG_CACHE_HOME="$x4" "$tf" bench -backend cuda -q -runs 1 -workload encoder_fwd_bwd -size large -json "$logs/compile-process2.json"
    ;;
  5)
    step tune-encoder 300 "$tf" tune -backend cuda -workload encoder_fwd_bwd -size large -cache-dir "$cache/tune5"
    step tune-encoder-again 300 "$tf" tune -backend cuda -workload encoder_fwd_bwd -size large -cache-dir "$cache/tune5" -q
    ;;
  esac
done

{
  cat "$logs/nvidia-smi.txt"
  for f in "$logs"/*.md; do
    echo
    echo "=== $(basename "$f" .md)"
    cat "$f"
    tail -3 "${f%.md}.err"
  done
  echo
  cat "$logs/steps.txt"
} | tee "$out/rows.log"
tar -czf "$out/rows-logs.tar.gz" -C "$logs" .
exit $fail
