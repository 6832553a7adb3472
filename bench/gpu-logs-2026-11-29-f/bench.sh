#!/usr/bin/env bash
set -uo pipefail
out=${OUT:-gpu-logs}; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$out/nvidia-smi.txt" 2>&1
t0=$(date +%s)
timeout 250 .gpu/tilefuse bench -backend cuda -q -runs 10 -profile 5 -json "$out/bench-cuda.json" -plot "$out/bench-cuda.png" > "$out/bench-cuda.md" 2> "$out/bench-cuda.err"; gb=$?
t1=$(date +%s)
timeout 300 python3 bench/torch/workloads.py --runs 30 --json "$out/torch.json" > "$out/torch.md" 2> "$out/torch.err"; torch=$?
t2=$(date +%s)
echo "== bench rc=$gb ($((t1-t0)) s), torch rc=$torch ($((t2-t1)) s)"
grep -A20 "^| workload | size | unfused" "$out/bench-cuda.md" | cut -c1-200
tail -2 "$out/bench-cuda.err"
cat "$out/torch.md" | head -30; tail -2 "$out/torch.err"
