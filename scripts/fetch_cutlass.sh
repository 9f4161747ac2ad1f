#!/usr/bin/env bash
# Fetches the CUTLASS / CuTe headers the mixed-input GEMM is built on (NVIDIA's PyPI wheel
# nvidia-cutlass, pinned by version and SHA-256) into .deps/cutlass/include, where
# CMakeLists.txt looks for them (BQMM_CUTLASS_DIR). Idempotent: does nothing when they are
# there. Without them (no network) the library builds without the mixed-input GEMM and
# says so at configure time; the planner then never takes it.
#   scripts/fetch_cutlass.sh
set -euo pipefail
cd "$(dirname "$0")/.."
version=4.2.0.0
sha256=f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6
dest=.deps/cutlass
[ -f "$dest/include/cutlass/cutlass.h" ] && [ "$(cat "$dest/VERSION" 2>/dev/null)" = "$version" ] && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! python3 -m pip download -q --disable-pip-version-check --no-deps "nvidia-cutlass==$version" -d "$tmp"; then
  echo "fetch_cutlass: could not download nvidia-cutlass==$version; building without the mixed-input GEMM" >&2
  exit 0
fi
wheel=$(ls "$tmp"/nvidia_cutlass-"$version"-*.whl)
echo "$sha256  $wheel" | sha256sum -c --quiet - || { echo "fetch_cutlass: SHA-256 mismatch for $wheel" >&2; exit 1; }
python3 - "$wheel" "$tmp/x" <<'PY'
import sys, zipfile
prefix = "cutlass_library/source/include/"
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith(prefix)])
PY
rm -rf "$dest"
mkdir -p "$dest"
mv "$tmp/x/cutlass_library/source/include" "$dest/include"
echo "$version" > "$dest/VERSION"
echo "fetch_cutlass: CUTLASS $version headers in $dest/include"
