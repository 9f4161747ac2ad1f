#!/usr/bin/env bash
# Builds bqmm and runs the main job: the profiler's smoke suite. With a CUDA device it
# times every kernel path against dense cuBLAS; without one it runs the CPU reference and
# says so. Extra arguments go to bqmm-profile (e.g. --suite decode --json out.jsonl).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
bash scripts/fetch_cutlass.sh  # the mixed-input GEMM's CUTLASS headers, once
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${BQMM_CMAKE_ARGS:-}
cmake --build build -j "$(nproc)" --target bqmm-profile
if [ $# -eq 0 ]; then set -- --suite smoke; fi
exec build/bqmm-profile "$@"
