#!/usr/bin/env bash
# Runs on a GPU machine from the repository root, after scripts/gpu-build.sh:
# the warp-specialised swapped wgmma form (ws = 1: a producer warpgroup
# copying the stages, the consumer warps running the wgmmas, full and empty
# mbarriers between them, setmaxnreg; codegen/ws.go). First its GPU test
# (bit for bit the same as without ws, and against float64; the driver's
# register allocation checked against setmaxnreg's split before any launch)
# and compute-sanitizer memcheck and racecheck on its small shapes; then
# `tilefuse peer` beside the heuristic's choice at 4096³ (tf32, bf16;
# matmul and linear_gelu), with a few stage, lag, register and width
# choices. Not measured yet: no heuristic chooses it. Logs go to $OUT (or
# ./gpu-logs).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-logs}
mkdir -p "$out"
.gpu/cuda.test -test.v -test.count=1 -test.run 'TestWarpSpecialisedProductOnGPU' > "$out/ws-gpu-test.log" 2>&1
echo "TestWarpSpecialisedProductOnGPU rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|regs' "$out/ws-gpu-test.log" | head -40
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --error-exitcode 9 .gpu/cuda.test -test.count=1 \
    -test.run 'TestWarpSpecialisedProductOnGPU/(tf32_256x128_8\+4_warps_4_stages|tf32_256x128_8\+8_warps|bf16_256x128_8\+4_warps_3_stages|bf16_192x128_8\+4_warps_4_stages_lag_1)/200x136x72' > "$out/ws-$tool.log" 2>&1
  echo "$tool rc=$?"; tail -3 "$out/ws-$tool.log"
done
s='wgmma=2,SPLIT_K=1,BLOCK_K=32,BLOCK_N=128,num_warps=8'
tf32="ws=1;ws=1,ws_warps=8,BLOCK_M=128;ws=1,ws_regs=40;ws=1,ws_regs=24;ws=1,num_stages=3;ws=1,ws_lag=1;ws=1,ws_lag=3"
tf32="$tf32;$s,BLOCK_M=192,num_stages=4;$s,BLOCK_M=192,num_stages=5,ws=1;$s,BLOCK_M=128,num_stages=6;$s,BLOCK_M=128,num_stages=6,ws=1"
bf16="ws=1;ws=1,ws_warps=8,BLOCK_M=128;ws=1,ws_regs=56;ws=1,ws_lag=2"
bf16="$bf16;$s,BLOCK_M=192,num_stages=4;$s,BLOCK_M=192,num_stages=4,ws=1;$s,BLOCK_M=128,num_stages=5;$s,BLOCK_M=128,num_stages=5,ws=1"
gelu="ws=1;ws=1,ws_warps=8,BLOCK_M=128;ws=1,ws_regs=40;ws=1,epi_smem=1;epi_smem=1"
for prec in tf32 bf16; do
  tunes=$tf32
  [ "$prec" = bf16 ] && tunes=$bf16
  f="$out/peer-ws-$prec-matmul.txt"
  .gpu/tilefuse peer -precision "$prec" -run 'matmul 4096³' -tune "$tunes" > "$f" 2>&1
  echo "peer $prec matmul 4096³ rc=$?"; cat "$f"
  f="$out/peer-ws-$prec-linear_gelu.txt"
  .gpu/tilefuse peer -precision "$prec" -run 'linear_gelu 4096³' -tune "$gelu" > "$f" 2>&1
  echo "peer $prec linear_gelu 4096³ rc=$?"; cat "$f"
done
