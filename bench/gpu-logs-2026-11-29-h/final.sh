#!/usr/bin/env bash
set -uo pipefail
out=${OUT:-gpu-logs}; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$out/nvidia-smi.txt" 2>&1
t0=$(date +%s)
.gpu/cuda.test -test.v -test.count=1 > "$out/conformance.log" 2>&1; conf=$?
.gpu/fusion.test -test.v -test.count=1 -test.run 'OnGPU' > "$out/fusion.log" 2>&1; fus=$?
{ compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/cuda.test -test.short -test.count=1 -test.run 'TestConformanceGPU' ; echo "rc=$?";
  compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/fusion.test -test.v -test.count=1 -test.run 'OnGPU' -test.skip 'TestGeneratedKernelsOnGPU'; echo "rc=$?";
  compute-sanitizer --tool racecheck --error-exitcode 9 .gpu/cuda.test -test.short -test.count=1 -test.run 'TestConformanceGPU/matmul'; echo "rc=$?";
  compute-sanitizer --tool racecheck --error-exitcode 9 .gpu/fusion.test -test.count=1 -test.run 'TestLinearReLUOnGPU|TestAttentionOnGPU|TestMLPTrainingOnGPU'; echo "rc=$?"; } > "$out/sanitizers.log" 2>&1
t1=$(date +%s)
timeout 200 .gpu/tilefuse bench -backend cuda -q -runs 10 -json "$out/bench-cuda.json" -plot "$out/bench-cuda.png" > "$out/bench-cuda.md" 2> "$out/bench-cuda.err"; gb=$?
t2=$(date +%s)
timeout 200 python3 bench/torch/workloads.py --runs 30 --json "$out/torch.json" > "$out/torch.md" 2> "$out/torch.err"; torch=$?
t3=$(date +%s)
echo "== s: tests+sanitizers $((t1-t0)), bench $((t2-t1)), torch $((t3-t2))"
echo "conformance rc=$conf: $(grep -c -- '--- PASS' "$out/conformance.log") passed, $(grep -c -- '--- FAIL' "$out/conformance.log") failed"
echo "fusion rc=$fus: $(grep -E 'agree on the GPU' "$out/fusion.log"); $(grep -c -- '--- PASS' "$out/fusion.log") passed, $(grep -c -- '--- FAIL' "$out/fusion.log") failed"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^rc=" "$out/sanitizers.log"
echo "bench rc=$gb torch rc=$torch"
grep -A18 "^| workload | size | unfused" "$out/bench-cuda.md" | grep "^| [a-z]" | cut -d'|' -f2,3,4,5
cat "$out/torch.md" | grep "^| [a-z]"
