#!/usr/bin/env bash
# Issue 16's judgement in one call: tilefuse's CPU backend and PyTorch's CPU
# build in turn, TURNS times, on the machine to measure (the GPU hosts' 16
# cores), then `tilefuse compare` of the turns: per workload, each turn's
# times side by side, the medians' ratio, the turns tilefuse is at least as
# fast in. From the repository root.
#
#   bash scripts/cpu-turns.sh                        # logs and JSON in $OUT (or ./cpu-logs)
#   TURNS=3 SIZES=large WORKLOADS=linear_gelu,mlp_step bash scripts/cpu-turns.sh
#   COMPILE_TURN=2 bash scripts/cpu-turns.sh         # torch.compile in the second turn only
#
# TILEFUSE is the tilefuse binary (default .gpu/tilefuse; any build runs the
# CPU backend). torch.compile takes seconds a graph, so it runs in one turn
# (COMPILE_TURN, 0 for none); the others time eager and library ops. After
# each PyTorch run the script waits for torch.compile's worker processes to
# exit (lib-run.sh: settle): in a call on a host (2026-12-07) tilefuse's
# small table right after the compile turn ran 1.2–4.9× slower in 11 of its
# 14 rows, those workers presumably still busy (not observed).
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib-run.sh
. scripts/lib-run.sh
cpu_setup cpu-turns
sizes=${SIZES:-small,large}
workloads=${WORKLOADS:-all}
declare -A tfs pts
for turn in $(seq "${TURNS:-3}"); do
  for size in ${sizes//,/ }; do
    echo "turn $turn $size: load $(cat /proc/loadavg)" >> "$out/load.txt"
    runs=${RUNS:-20}
    [ "$size" = small ] && runs=${SMALL_RUNS:-100}
    GOMAXPROCS=$threads timeout "${BENCH_TIMEOUT:-300}" "$tilefuse" bench -backend cpu -q -loop -rotate 1 -no-gorgonia \
      -size "$size" -runs "$runs" -workload "$workloads" -json "$out/tf-$size-$turn.json" > "$out/tf-$size-$turn.md" 2> "$out/tf-$size-$turn.err" ||
      echo "cpu-turns: tilefuse bench, $size, turn $turn: rc=$?" >&2
    cs=""
    [ "$turn" = "${COMPILE_TURN:-2}" ] && cs=$size
    timeout "${TORCH_TIMEOUT:-300}" python3 bench/torch/workloads.py --device cpu --threads "$threads" --sizes "$size" \
      --compile-sizes "$cs" --runs "$runs" --workload "$workloads" --json "$out/pt-$size-$turn.json" > "$out/pt-$size-$turn.md" 2> "$out/pt-$size-$turn.err" ||
      echo "cpu-turns: workloads.py, $size, turn $turn: rc=$?" >&2
    settle # torch.compile's workers gone before tilefuse's next turn
    tfs[$size]="${tfs[$size]:-}${tfs[$size]:+,}$out/tf-$size-$turn.json"
    pts[$size]="${pts[$size]:-}${pts[$size]:+,}$out/pt-$size-$turn.json"
  done
done
# per size, one pair of files a turn: compare pairs them in order
rc=0
for size in ${sizes//,/ }; do
  echo "== $size"
  "$tilefuse" compare -tilefuse "${tfs[$size]}" -torch "${pts[$size]}" || rc=1
done
exit $rc
