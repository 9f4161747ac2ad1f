#!/usr/bin/env bash
# Checks README.md's "Using it from another project" and "Planning without a GPU" as a
# user meets them: installs the built project into a fresh prefix (cmake --install),
# builds tests/cmake/consumer against it (find_package(bqmm), bqmm::bqmm) around the
# README's planning example, copied from the README, and runs it: it must print the
# plan of its problem (no GPU needed).
#   check_install.sh CMAKE BUILD_DIR README
set -uo pipefail
cmake=$1 build=$2 readme=$3
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "check_install: FAILED: $*"; exit 1; }

"$cmake" --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "cmake --install $build"; }

# The first C++ block after the README's "### Planning without a GPU" heading.
mkdir -p "$work/src"
cp "$here/consumer/CMakeLists.txt" "$work/src/"
awk '/^### Planning without a GPU/ { section = 1 }
     section && /^```cpp/ { inside = 1; next }
     inside && /^```/ { exit }
     inside { print }' "$readme" >"$work/src/main.cc"
grep -q "plan_nbits_matmul" "$work/src/main.cc" || fail "no planning example found in $readme"

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
"$cmake" -S "$work/src" -B "$work/build" "${generator[@]}" -DCMAKE_PREFIX_PATH="$work/prefix" \
  >"$work/build.log" 2>&1 && "$cmake" --build "$work/build" >>"$work/build.log" 2>&1 ||
  { cat "$work/build.log"; fail "configuring or building a project with find_package(bqmm)"; }

out=$("$work/build/plan_example" 2>&1) || { echo "$out"; fail "the planning example exited with an error"; }
echo "  $out"
echo "$out" | grep -q "NBitsMatMulPlan{path=gemv; nbits int4 float16 M=1 N=28672 K=8192" ||
  fail "the planning example did not print its plan"
echo "check_install: ok"
