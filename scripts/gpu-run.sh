#!/usr/bin/env bash
# Runs on a GPU machine from the repository root, after scripts/gpu-build.sh:
# the GPU conformance tests, the fusion pass on the GPU (generated kernels,
# the CUDA backend), compute-sanitizer (memcheck, racecheck), `tilefuse gpubench`, and
# scripts/gpu-bench.sh (tilefuse bench -backend cuda beside PyTorch). Logs go to
# $OUT (or ./gpu-logs); a summary is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-logs}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$out/nvidia-smi.txt" 2>&1

.gpu/cuda.test -test.v -test.count=1 > "$out/conformance.log" 2>&1
conf=$?
.gpu/fusion.test -test.v -test.count=1 -test.run 'OnGPU' > "$out/fusion.log" 2>&1
fus=$?
# the sanitizer runs the conformance table, 200 random kernels (-short) and the solver kernels only: TestLoadErrorCarriesJITLog makes a driver API error on purpose
compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/cuda.test -test.short -test.count=1 -test.run 'TestConformanceGPU|TestStagerOnGPU|TestRandomKernelsGPU|TestRandomMoreKernelsGPU' > "$out/memcheck.log" 2>&1
mem=$?
# the fused solvers' kernels (issue 13), every shape over 1, 1000 and 2500 elements
# and (issue 13) the residency paths: staged asynchronous uploads, solver steps on the machine's
# buffers, Sync, Touch
compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/fusion.test -test.count=1 -test.run 'TestSolverKernelsOnGPU|TestTransfersOnGPU' > "$out/memcheck-solver.log" 2>&1
memsol=$?
# the flash attention kernels (issue 11): forward, dQ and dK/dV, single patterns and heads;
# and on wgmma (meta-parameter wgmma = 1, not the default yet)
compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/fusion.test -test.count=1 -test.run 'TestFlashAttentionTrainingOnGPU|TestTransformerEncoderBlockOnGPU|TestFlashAttentionWgmmaOnGPU' > "$out/memcheck-attention.log" 2>&1
mematt=$?
compute-sanitizer --tool racecheck --error-exitcode 9 .gpu/fusion.test -test.count=1 -test.run 'TestFlashAttentionTrainingOnGPU|TestTransformerEncoderBlockOnGPU|TestFlashAttentionWgmmaOnGPU' > "$out/racecheck-attention.log" 2>&1
raceatt=$?
compute-sanitizer --tool racecheck --error-exitcode 9 .gpu/cuda.test -test.short -test.count=1 \
  -test.run 'TestConformanceGPU/(softmax|layer_norm|col_sum|matmul/130x70x90$)' > "$out/racecheck.log" 2>&1
race=$?
.gpu/tilefuse gpubench ${BENCH_ARGS:-} > "$out/gpubench.txt" 2>&1
bench=$?
# the fused-graph benchmark on the GPU beside the same workloads in PyTorch
# (table, JSON and chart of each; scripts/gpu-bench.sh)
OUT="$out" bash scripts/gpu-bench.sh > "$out/gpu-bench.txt" 2>&1
gbench=$?

echo "== summary"
echo "conformance rc=$conf: $(grep -c -- '--- PASS' "$out/conformance.log") passed, $(grep -c -- '--- FAIL' "$out/conformance.log") failed"
grep -- '--- FAIL' "$out/conformance.log" | head -20
echo "fusion on the GPU rc=$fus: $(grep -E 'agree on the GPU' "$out/fusion.log"); $(grep -c -- '--- PASS' "$out/fusion.log") passed, $(grep -c -- '--- FAIL' "$out/fusion.log") failed"
# residency (issue 13): transfers counted, GPU memory back after Close, the staging ring, cuMemGetInfo
echo "residency: $(grep -E -- '--- (PASS|FAIL|SKIP): Test(Transfers|MemoryAfterClose|SolverResident)OnGPU' "$out/fusion.log" | tr -s ' ' | tr '\n' ';') $(grep -E -- '--- (PASS|FAIL): Test(Stager|MemInfo)OnGPU' "$out/conformance.log" | tr -s ' ' | tr '\n' ';')"
echo "memcheck rc=$mem: $(grep -E 'ERROR SUMMARY' "$out/memcheck.log" | tail -1)"
echo "memcheck (solver kernels) rc=$memsol: $(grep -E 'ERROR SUMMARY' "$out/memcheck-solver.log" | tail -1)"
echo "racecheck rc=$race: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$out/racecheck.log" | tail -1)"
echo "memcheck (attention kernels) rc=$mematt: $(grep -E 'ERROR SUMMARY' "$out/memcheck-attention.log" | tail -1)"
echo "racecheck (attention kernels) rc=$raceatt: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$out/racecheck-attention.log" | tail -1)"
echo "gpubench rc=$bench (full table in gpubench.txt)"
grep -E 'copy|^vec_add 64M +BLOCK=1024|^gelu.*BLOCK=1024|^softmax 8192x4096 +\{BLOCK = 4096, STREAM = 0\} warps=4|^layer_norm 8192x4096 +\{BLOCK = 4096, STREAM = 0\} warps=4' "$out/gpubench.txt"
echo "scripts/gpu-bench.sh rc=$gbench"
cat "$out/gpu-bench.txt"
