#!/usr/bin/env bash
set -uo pipefail
out=${OUT:-gpu-logs}; mkdir -p "$out"
.gpu/cuda.test -test.v -test.count=1 > "$out/conformance.log" 2>&1; conf=$?
.gpu/fusion.test -test.v -test.count=1 -test.run 'OnGPU' > "$out/fusion.log" 2>&1; fus=$?
echo "conformance rc=$conf: $(grep -c -- '--- PASS' "$out/conformance.log") passed, $(grep -c -- '--- FAIL' "$out/conformance.log") failed"
grep -- '--- FAIL' "$out/conformance.log" | head
echo "fusion rc=$fus: $(grep -E 'agree on the GPU' "$out/fusion.log"); $(grep -c -- '--- PASS' "$out/fusion.log") passed, $(grep -c -- '--- FAIL' "$out/fusion.log") failed"
grep -A3 -- '--- FAIL' "$out/fusion.log" | head -20
