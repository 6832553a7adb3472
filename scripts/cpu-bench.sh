#!/usr/bin/env bash
# The CPU table beside PyTorch's CPU build, in one call, from the repository
# root on the machine to measure (the GPU host's 16 cores: its GPU is not
# used): `tilefuse bench -backend cpu` (Gorgonia, tilefuse unfused and
# fused, the fused kernels as machine code) and then the same workloads in
# PyTorch on the CPU (bench/torch/workloads.py --device cpu: eager, library
# ops, torch.compile), minutes apart on the same cores.
#
#   bash scripts/cpu-bench.sh                 # logs and JSON in $OUT (or ./cpu-logs)
#   RUNS=10 TORCH_RUNS=30 THREADS=16 bash scripts/cpu-bench.sh
#   BENCH_ARGS='-workload linear_gelu,mlp_step -native' TORCH_ARGS='--workload linear_gelu,mlp_step' bash scripts/cpu-bench.sh
#
# TILEFUSE is the tilefuse binary (default .gpu/tilefuse from
# scripts/gpu-build.sh; any build runs the CPU backend). Exits non-zero if
# either side failed; prints both tables last.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib-run.sh
. scripts/lib-run.sh
cpu_setup cpu-bench
{ nproc; grep -m1 'model name' /proc/cpuinfo; } > "$out/cpu.txt" 2>&1

t0=$(date +%s)
# shellcheck disable=SC2086 # BENCH_ARGS is a list of flags
GOMAXPROCS=$threads timeout "${BENCH_TIMEOUT:-600}" "$tilefuse" bench -backend cpu -q -runs "${RUNS:-10}" ${BENCH_ARGS:-} \
  -json "$out/bench-cpu.json" > "$out/bench-cpu.md" 2> "$out/bench-cpu.err"
gbench=$?
t1=$(date +%s)
# shellcheck disable=SC2086 # TORCH_ARGS is a list of flags
timeout "${TORCH_TIMEOUT:-600}" python3 bench/torch/workloads.py --device cpu --threads "$threads" --runs "${TORCH_RUNS:-30}" \
  --compile-sizes "${TORCH_COMPILE_SIZES:-small,large}" ${TORCH_ARGS:-} --json "$out/torch-cpu.json" > "$out/torch-cpu.md" 2> "$out/torch-cpu.err"
torch=$?
t2=$(date +%s)

echo "== tilefuse bench -backend cpu ($threads threads): rc=$gbench ($((t1 - t0)) s)"
cat "$out/bench-cpu.md"
tail -3 "$out/bench-cpu.err"
echo "== bench/torch/workloads.py --device cpu --threads $threads: rc=$torch ($((t2 - t1)) s)"
cat "$out/torch-cpu.md"
tail -3 "$out/torch-cpu.err"
[ "$gbench" -eq 0 ] && [ "$torch" -eq 0 ]
