#!/usr/bin/env bash
# this session's GPU round: correctness first, then the fused benchmark
set -uo pipefail
out=${OUT:-gpu-logs}; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$out/nvidia-smi.txt" 2>&1
t0=$(date +%s)
.gpu/cuda.test -test.v -test.count=1 > "$out/conformance.log" 2>&1; conf=$?
.gpu/fusion.test -test.v -test.count=1 -test.run 'OnGPU' > "$out/fusion.log" 2>&1; fus=$?
t1=$(date +%s)
compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/fusion.test -test.v -test.count=1 -test.run 'OnGPU' -test.skip 'TestGeneratedKernelsOnGPU' > "$out/memcheck-fusion.log" 2>&1; memf=$?
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/fusion.test -test.v -test.count=1 -test.run TestGeneratedKernelsOnGPU > "$out/memcheck-generated.log" 2>&1; memg=$?
t2=$(date +%s)
compute-sanitizer --tool racecheck --error-exitcode 9 .gpu/fusion.test -test.count=1 -test.run 'TestSplitReductionsOnGPU|TestLinearOnGPU|TestMLPTrainingOnGPU' > "$out/racecheck-fusion.log" 2>&1; race=$?
t3=$(date +%s)
true; gb=0
t4=$(date +%s)
echo "== summary (s: tests $((t1-t0)), memcheck $((t2-t1)), racecheck $((t3-t2)), bench $((t4-t3)))"
echo "conformance rc=$conf: $(grep -c -- '--- PASS' "$out/conformance.log") passed, $(grep -c -- '--- FAIL' "$out/conformance.log") failed"
grep -- '--- FAIL' "$out/conformance.log" | head
echo "fusion rc=$fus: $(grep -E 'agree on the GPU' "$out/fusion.log"); $(grep -c -- '--- PASS' "$out/fusion.log") passed, $(grep -c -- '--- FAIL' "$out/fusion.log") failed"
grep -A5 -- '--- FAIL' "$out/fusion.log" | head -30
echo "memcheck fusion rc=$memf: $(grep -E 'ERROR SUMMARY' "$out/memcheck-fusion.log" | tail -1); $(grep -c -- '--- PASS' "$out/memcheck-fusion.log") passed"
echo "racecheck rc=$race: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$out/racecheck-fusion.log" | tail -1)"

echo "memcheck generated rc=$memg: $(grep -E "ERROR SUMMARY" "$out/memcheck-generated.log" | tail -1); $(grep -E "agree on the GPU" "$out/memcheck-generated.log")"
