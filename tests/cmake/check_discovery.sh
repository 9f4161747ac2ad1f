#!/usr/bin/env bash
# Checks that the project's GoogleTest registration (cmake/BqmmGTest.cmake) works with
# each CMake given: configures and builds tests/cmake/discovery with it, runs its CTest,
# and requires one test passed and one reported skipped. CMake 4.x once broke here (every
# generated test file a syntax error, CTest running nothing), so CI installs one
# (.ci/run: .deps/cmake-4) and this check runs it beside the CMake that built the project.
#   check_discovery.sh CMAKE [CMAKE ...]   (a missing path is reported and skipped;
#                                           exit 77 when none of them exists)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ran=0
for cmake in "$@"; do
  if [ ! -x "$cmake" ]; then
    echo "check_discovery: $cmake not found: not checked"
    continue
  fi
  ctest=$(dirname "$cmake")/ctest
  version=$("$cmake" --version | head -n 1)
  work=$(mktemp -d)
  if ! "$cmake" -S "$here/discovery" -B "$work" -G Ninja >"$work.log" 2>&1 ||
     ! "$cmake" --build "$work" >>"$work.log" 2>&1; then
    cat "$work.log"
    echo "check_discovery: FAILED to configure or build with $version"
    exit 1
  fi
  out=$("$ctest" --test-dir "$work" 2>&1)
  echo "$out" | sed 's/^/  /'
  if ! echo "$out" | grep -q "Discovery.Passes .*Passed" ||
     ! echo "$out" | grep -q "Discovery.SkipsItself .*Skipped" ||
     ! echo "$out" | grep -qE "100% tests passed(, 0 tests failed)? out of 2"; then
    echo "check_discovery: FAILED with $version: expected 2 tests, one passed, one skipped"
    exit 1
  fi
  echo "check_discovery: ok with $version"
  ran=$((ran + 1))
  rm -rf "$work" "$work.log"
done
[ "$ran" -gt 0 ] || exit 77
