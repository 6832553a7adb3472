#!/usr/bin/env bash
set -uo pipefail
out=${OUT:-gpu-logs}; mkdir -p "$out"
.gpu/cuda.test -test.v -test.count=1 -test.run 'TestConformanceGPU' > "$out/conformance.log" 2>&1; conf=$?
.gpu/fusion.test -test.v -test.count=1 -test.run 'OnGPU' > "$out/fusion.log" 2>&1; fus=$?
for i in 1 2; do
  for b in old new; do
    if [ $b = old ]; then export TILEFUSE_NO_VECDOT=1; else unset TILEFUSE_NO_VECDOT; fi; .gpu/tilefuse bench -backend cuda -q -runs 10 -workload linear_gelu,attention,mlp_step,encoder_fwd,encoder_fwd_bwd -size large > "$out/bench-$b-$i.md" 2>&1
  done
done
echo "conformance rc=$conf: $(grep -c -- '--- PASS' "$out/conformance.log") passed, $(grep -c -- '--- FAIL' "$out/conformance.log") failed"
grep -- '--- FAIL' "$out/conformance.log" | head
echo "fusion rc=$fus: $(grep -E 'agree on the GPU' "$out/fusion.log"); $(grep -c -- '--- PASS' "$out/fusion.log") passed, $(grep -c -- '--- FAIL' "$out/fusion.log") failed"
for f in "$out"/bench-*.md; do echo "== $f"; grep -A8 "^| workload | size | unfused" "$f" | grep "^| [a-z]" | cut -d'|' -f2,3,5; done
