#!/usr/bin/env bash
# Builds what a GPU machine runs, on a machine without a GPU: the tagged test
# binaries of packages cuda and fusion and the tilefuse command, into .gpu/
# (git-ignored).
# Needs the CUDA headers and libcuda stub (Debian: nvidia-cuda-toolkit).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .gpu
go test -c -tags tilefuse_cuda -o .gpu/cuda.test ./cuda
go test -c -tags tilefuse_cuda -o .gpu/fusion.test ./fusion
go build -tags tilefuse_cuda -o .gpu/tilefuse ./cmd/tilefuse
cp scripts/gpu-run.sh .gpu/run.sh
echo "built .gpu/: $(ls .gpu | tr '\n' ' ')"
