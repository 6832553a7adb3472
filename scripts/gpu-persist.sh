#!/usr/bin/env bash
# Issue 12's persistent row form (meta-parameter PERSIST, a candidate of
# the autotuner, off by default) on a GPU machine, from the repository
# root, after scripts/gpu-build.sh (.gpu/tilefuse, -tags tilefuse_cuda):
#
#   1. tilefuse tune -budget 0 of softmax and LayerNorm at each peer row
#      shape (8192x4096, 32768x1024, 4096x32768, 1823x781, 1151x8192): the
#      table (default and chosen kernel device time) and every candidate's
#      time, the default's and PERSIST = 1..4's among them;
#   2. gpubench: the device-to-device copy at 256M f32 and at each peer row
#      shape's bytes (the ceiling a kernel of that size can reach), and the
#      hand-written row kernels;
#   3. tilefuse bench -size peer, heuristic and -autotune (the choices of
#      step 1, from its cache): the graphs' device time.
#
#   bash scripts/gpu-persist.sh               # logs in $OUT (or ./gpu-logs/persist)
#   STEPS="1" bash scripts/gpu-persist.sh     # some steps only
#
# $OUT gets persist.log: every step's output, then a summary of step 1
# (per kernel: the default's time and each persistent candidate's).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-logs/persist}
mkdir -p "$out"
tf=${TILEFUSE:-.gpu/tilefuse}
steps=${STEPS:-1 2 3}
if [ ! -x "$tf" ]; then
  echo "gpu-persist: no $tf: build it with scripts/gpu-build.sh (or set TILEFUSE)" >&2
  exit 2
fi
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
log=$out/persist.log
: > "$log"
fail=0
. scripts/lib-run.sh # run TIMEOUT CMD...
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv >> "$log" 2>&1
for s in $steps; do
  case $s in
  1)
    for w in softmax layernorm; do
      for sz in 1151x8192 8192x4096 4096x32768 32768x1024 1823x781; do
        run 300 "$tf" tune -backend cuda -workload "$w" -size "peer:$sz" -budget 0 -cache-dir "$cache/xdg/tilefuse" -q
      done
    done
    ;;
  2)
    run 300 "$tf" gpubench
    ;;
  3)
    run 900 env XDG_CACHE_HOME="$cache/xdg" "$tf" bench -backend cuda -q -runs "${RUNS:-10}" -workload softmax,layernorm -size peer
    run 900 env XDG_CACHE_HOME="$cache/xdg" "$tf" bench -backend cuda -q -runs "${RUNS:-10}" -workload softmax,layernorm -size peer -autotune
    ;;
  esac
done
# the summary: each kernel's candidate list, the persistent ones and the
# default (the candidate without PERSIST whose meta is the table's default)
{
  echo
  echo "=== summary: every candidate without PERSIST fastest first (first 3), and every PERSIST one"
  awk '/^== .* tune /{print; next}
       /every candidate, fastest first/{print; n=0; next}
       /^  [0-9.e+-]+  \{/{ if ($0 ~ /PERSIST/) print; else if (n++ < 3) print }' "$log"
} | tee -a "$log"
exit $fail
