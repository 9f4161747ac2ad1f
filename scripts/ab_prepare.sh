#!/usr/bin/env bash
# Exports the source tree of a git revision (the files a build of bqmm-profile needs) into
# DIR (default ab-base/, git-ignored), for gpu_check.sh's `ab` step: the GPU machine builds
# it beside the working tree and times both in one run, suites interleaved, so that a
# change is judged against its baseline on the same machine state (docs/PERF.md: times of
# separate runs move by up to 10 %, cuBLAS's by up to 14 %).
#
#   scripts/ab_prepare.sh REV [DIR]
#   then, through the device tool, with DIR carried (it is ignored by git):
#   scripts/gpu_check.sh build,ab        AB_SUITES, AB_REPEATS: see gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: scripts/ab_prepare.sh REV [DIR]" >&2
  exit 2
fi
rev=$1
dir=${2:-ab-base}
commit=$(git rev-parse --verify --quiet "$rev^{commit}") || {
  echo "ab_prepare: '$rev' is not a commit of this repository" >&2
  exit 2
}
rm -rf "$dir"
mkdir -p "$dir"
# Every top-level entry CMake may reach (tests and tools are subdirectories of the build).
git archive "$commit" CMakeLists.txt cmake include src tools tests | tar -x -C "$dir"
echo "$commit" > "$dir/AB_COMMIT"
echo "ab_prepare: $(git log -1 --format='%h %s' "$commit") -> $dir/"
