#!/usr/bin/env bash
# The H200 table of bench/RESULTS.md in one call, on a GPU machine, from the
# repository root, after scripts/gpu-build.sh: `tilefuse bench -backend cuda`
# (the standard workloads; Gorgonia, tilefuse unfused and fused) and then the
# same workloads in PyTorch (bench/torch/workloads.py: eager, library ops,
# torch.compile), so that both sides run on the same machine minutes apart.
#
#   bash scripts/gpu-bench.sh            # logs, JSON and charts in $OUT (or ./gpu-logs)
#   RUNS=20 TORCH_RUNS=50 bash scripts/gpu-bench.sh
#   BENCH_ARGS='-workload softmax -size large' bash scripts/gpu-bench.sh
#   BENCH_ARGS='-size peer -precision tf32' TORCH_ARGS='--sizes peer --precisions fp32,tf32' bash scripts/gpu-bench.sh
#
# Exits non-zero if either side failed; prints both tables last.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-logs}
mkdir -p "$out"
tilefuse=${TILEFUSE:-.gpu/tilefuse}
if [ ! -x "$tilefuse" ]; then
  echo "gpu-bench: no $tilefuse: build it with scripts/gpu-build.sh (or set TILEFUSE)" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$out/nvidia-smi.txt" 2>&1

t0=$(date +%s)
# shellcheck disable=SC2086 # BENCH_ARGS is a list of flags
timeout "${BENCH_TIMEOUT:-300}" "$tilefuse" bench -backend cuda -q -runs "${RUNS:-10}" ${BENCH_ARGS:-} \
  -json "$out/bench-cuda.json" -plot "$out/bench-cuda.png" > "$out/bench-cuda.md" 2> "$out/bench-cuda.err"
gbench=$?
t1=$(date +%s)
# shellcheck disable=SC2086 # TORCH_ARGS is a list of flags
timeout "${TORCH_TIMEOUT:-300}" python3 bench/torch/workloads.py --runs "${TORCH_RUNS:-30}" ${TORCH_ARGS:-} \
  --json "$out/torch.json" > "$out/torch.md" 2> "$out/torch.err"
torch=$?
t2=$(date +%s)

echo "== tilefuse bench -backend cuda: rc=$gbench ($((t1 - t0)) s)"
cat "$out/bench-cuda.md"
tail -3 "$out/bench-cuda.err"
echo "== bench/torch/workloads.py: rc=$torch ($((t2 - t1)) s)"
cat "$out/torch.md"
tail -3 "$out/torch.err"
[ "$gbench" -eq 0 ] && [ "$torch" -eq 0 ]
