#!/usr/bin/env bash
# The Python suite's GPU-free tests (python/tests without the `gpu` marker: quantizers,
# references, schemas, fake implementations, opcheck on meta tensors, loaders against
# safetensors and onnxruntime). They need torch; CI installs it into .deps/py (.ci/run).
# Exit 77 (CTest: skipped) when no Python with torch is found, saying so.
#   python_tests.sh [PYTHON]   (default: $BQMM_PYTHON, else .deps/py/bin/python, else python3)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${1:-${BQMM_PYTHON:-}}
if [ -z "$py" ]; then
  if [ -x "$root/.deps/py/bin/python" ]; then py=$root/.deps/py/bin/python; else py=python3; fi
fi
if ! "$py" -c "import torch, pytest" 2>/dev/null; then
  echo "python_tests: torch (or pytest) is absent for $py: the Python tests are skipped" \
       "(.ci/run installs them into .deps/py; or set BQMM_PYTHON)"
  exit 77
fi
cd "$root"
exec "$py" -m pytest -p no:cacheprovider -q -rs -m "not gpu" python/tests
