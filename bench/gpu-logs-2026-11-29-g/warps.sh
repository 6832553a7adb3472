#!/usr/bin/env bash
set -uo pipefail
out=${OUT:-gpu-logs}; mkdir -p "$out"
for i in 1 2; do
  for wv in 4 8; do
    XMMWARPS=$wv .gpu/tilefuse bench -backend cuda -q -runs 10 -workload linear_gelu,attention,mlp_step,encoder_fwd,encoder_fwd_bwd -size large > "$out/bench-w$wv-$i.md" 2>&1
  done
done
for f in "$out"/bench-*.md; do echo "== $f"; grep -A18 "^| workload | size | unfused" "$f" | grep "^| [a-z]" | cut -d'|' -f2,3,5; grep -i "error\|fail" "$f" | head -3; done
