#!/usr/bin/env bash
# Builds bqmm and runs every test (the CPU suite and the script tests; the GPU suite runs
# too and each GPU test skips itself, saying so, where there is no CUDA device). The build
# fails where ptxas reports changing a wgmma pipeline (scripts/ptxas_advisories.py, on the
# build's output, kept in BUILD_DIR/build.log).
#   scripts/test.sh [build-dir]      (default: build)
# BQMM_CMAKE_ARGS: more configure arguments; BQMM_CTEST_ARGS: more ctest arguments (e.g.
# -LE same_every_build, as .ci/run's second build).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
jobs=$(nproc)
bash scripts/fetch_cutlass.sh  # the mixed-input GEMM's CUTLASS headers, once
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${BQMM_CMAKE_ARGS:-}
cmake --build "$build" -j "$jobs" 2>&1 | tee "$build/build.log"
if command -v python3 >/dev/null; then python3 scripts/ptxas_advisories.py "$build/build.log"; fi
ctest --test-dir "$build" --output-on-failure -j "$jobs" ${BQMM_CTEST_ARGS:-}
