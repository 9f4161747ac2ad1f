#!/usr/bin/env bash
# Fetches nvdisasm, the SASS disassembler (NVIDIA's PyPI wheel nvidia-cuda-nvdisasm,
# pinned by version and SHA-256; the CUDA toolkits of the CPU machines ship nvcc and ptxas
# but neither nvdisasm nor cuobjdump) into .deps/nvdisasm/nvdisasm, where
# scripts/sass_loops.py looks for it. Idempotent: does nothing when it is there.
#   scripts/fetch_nvdisasm.sh
set -euo pipefail
cd "$(dirname "$0")/.."
version=13.2.51
sha256=5a7acf77c55d6d2911ed6155d4d5bc156ffadf9df7a68a89b0c1155f4b13688c
dest=.deps/nvdisasm
[ -x "$dest/nvdisasm" ] && [ "$(cat "$dest/VERSION" 2>/dev/null)" = "$version" ] && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --disable-pip-version-check --no-deps "nvidia-cuda-nvdisasm==$version" -d "$tmp"
wheel=$(ls "$tmp"/nvidia_cuda_nvdisasm-"$version"-*.whl)
echo "$sha256  $wheel" | sha256sum -c --quiet - || { echo "fetch_nvdisasm: SHA-256 mismatch for $wheel" >&2; exit 1; }
python3 - "$wheel" "$tmp/x" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.endswith("/bin/nvdisasm")])
PY
rm -rf "$dest"
mkdir -p "$dest"
mv "$(find "$tmp/x" -name nvdisasm -type f)" "$dest/nvdisasm"
chmod +x "$dest/nvdisasm"
echo "$version" > "$dest/VERSION"
echo "fetch_nvdisasm: nvdisasm $version in $dest"
