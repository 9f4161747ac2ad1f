#!/usr/bin/env bash
# The Python package on a GPU machine, offline: builds and installs it into a venv that
# sees the system's torch, onnx, onnxruntime and safetensors, then runs the whole Python
# suite, the op benchmark (beside bqmm-profile's C++ times of the same cases) and the
# decode example. Logs and JSON go to $OUT (default ./out); a summary is printed last.
#   scripts/py_check.sh
# Needs scikit-build-core and ninja in the system Python, or wheels of them in .whl/
# (git-ignored; see docs/PYTHON.md). Environment: PYTHON (default python3),
# BQMM_CUDA_ARCHITECTURES (default native), PY_CHECK_LAYERS (decode example, default 8),
# PY_CHECK_VENV=0 to install into $PYTHON's own environment instead of a venv.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
OUT=${OUT:-$root/out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
python=${PYTHON:-python3}
venv=$root/build/pycheck-venv
build_dir=build/pycheck
start=$(date +%s)
step() { echo "== $(( $(date +%s) - start ))s: $*"; }
status=0

if [ "${PY_CHECK_VENV:-1}" = 0 ]; then
  py=$python
else
  step "venv ($venv, system site-packages)"
  [ -x "$venv/bin/python" ] || "$python" -m venv --system-site-packages "$venv" || exit 1
  py=$venv/bin/python
  # When $python is itself a venv (the GPU machine's python3 is /opt/torch/.venv's), the
  # new venv's "system" packages are the base interpreter's, not that venv's: a .pth file
  # adds $python's site-packages after the new venv's own.
  purelib=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  "$python" -c "import site; print('\n'.join(site.getsitepackages()))" > "$purelib/_py_check_parent.pth"
fi
if ! "$py" -c "import scikit_build_core" 2>/dev/null; then
  if [ -d .whl ]; then
    step "scikit-build-core from .whl/"
    "$py" -m pip install -q --no-index --find-links .whl scikit-build-core || exit 1
  else
    echo "py_check: scikit-build-core is missing and there is no .whl/ folder of wheels" >&2
    exit 1
  fi
fi
"$py" - <<'EOF' | tee "$OUT/versions.txt"
import importlib
for name in ("torch", "scikit_build_core", "onnx", "onnxruntime", "safetensors", "pytest"):
    try:
        print(f"{name} {importlib.import_module(name).__version__}")
    except Exception as e:
        print(f"{name} missing ({e})")
import torch
print("cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
EOF

step "pip install --no-build-isolation . (log: $OUT/pip_install.log)"
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
if ! "$py" -m pip install -v --no-deps --no-build-isolation --no-index . \
    -C build-dir="$build_dir" \
    -C cmake.define.BQMM_BUILD_TOOLS=ON \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES="${BQMM_CUDA_ARCHITECTURES:-native}" \
    > "$OUT/pip_install.log" 2>&1; then
  tail -n 40 "$OUT/pip_install.log"
  echo "py_check: pip install failed"
  exit 1
fi

step "pytest python/tests (log: $OUT/pytest.log)"
# From the repository root, `import bqmm` is the installed package (python/ is not on sys.path).
"$py" -m pytest -p no:cacheprovider -rs -q python/tests --junitxml="$OUT/pytest.xml" \
  > "$OUT/pytest.log" 2>&1 || status=1
tail -n 5 "$OUT/pytest.log"

step "bqmm-profile: the C++ back-to-back times of the benchmark's cases"
profile=$build_dir/bqmm-profile
rm -f "$OUT/cpp_fp8.jsonl" "$OUT/cpp_nbits4.jsonl"
if [ -x "$profile" ]; then
  "$profile" --op fp8 --activation-dtype fp16 --m 1 --n 8192 --k 8192 --block-size 128 \
    --json "$OUT/cpp_fp8.jsonl" > "$OUT/cpp_profile.log" 2>&1
  "$profile" --op nbits --bits 4 --zero-points packed --activation-dtype fp16 --m 1 \
    --n 8192 --k 8192 --block-size 128 --json "$OUT/cpp_nbits4.jsonl" >> "$OUT/cpp_profile.log" 2>&1
else
  echo "no $profile: the benchmark reports no C++ comparison"
fi

step "python/benchmarks/op_overhead.py"
"$py" python/benchmarks/op_overhead.py --json "$OUT/op_overhead.json" \
  --cpp-json "$OUT/cpp_fp8.jsonl" "$OUT/cpp_nbits4.jsonl" > "$OUT/op_overhead.log" 2>&1 || status=1

step "examples/decode_step.py"
"$py" examples/decode_step.py --layers "${PY_CHECK_LAYERS:-8}" --json "$OUT/decode_step.json" \
  > "$OUT/decode_step.log" 2>&1 || status=1
cat "$OUT/decode_step.log"

step "summary"
"$py" - "$OUT" <<'EOF' || status=1
import json, os, re, sys
out = sys.argv[1]
ok = True
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except Exception as e:
        return {"error": str(e)}
log = open(os.path.join(out, "pytest.log")).read().strip().splitlines()
print("pytest:", log[-1] if log else "no output")
if not log or re.search(r"\b(failed|error)", log[-1]):
    ok = False
ov = load("op_overhead.json")
for c in ov.get("graph", []):
    r = c.get("ratio_to_cpp")
    verdict = "n/a" if r is None else ("PASS" if r <= 1.03 else "FAIL")
    ok &= verdict != "FAIL"
    print(f"graph b2b {c['op']:5} M=1 N=K={c['n']}: python {c['graph_b2b_us']:.2f} us, "
          f"C++ {c.get('cpp_b2b_us')} us, ratio {r if r is None else round(r, 4)} (<= 1.03: {verdict})")
e = ov.get("eager_overhead", {})
if e:
    print(f"eager host us/call (M=1, N=K=256): fp8 op {e['bqmm_fp8_op_us']:.1f}, nbits op "
          f"{e['bqmm_nbits_op_us']:.1f}, fp8 module {e['bqmm_fp8_module_us']:.1f}, "
          f"F.linear {e['torch_linear_us']:.1f}, torch.empty {e['torch_empty_us']:.1f}")
if "error" in ov:
    print("op_overhead:", ov["error"]); ok = False
dec = load("decode_step.json")
for r in dec.get("results", []):
    if r["batch"] == 1 and r["format"] in ("fp8", "int8", "int4"):
        need = {"fp8": 1.6, "int4": 2.0}.get(r["format"])
        sp = r["speedup_vs_bf16"]
        verdict = "" if need is None else (" (>= %.1fx: %s)" % (need, "PASS" if sp >= need else "FAIL"))
        ok &= not verdict.endswith("FAIL)")
        print(f"decode batch 1 {r['format']} (glue {dec.get('glue', '?')}): {r['layer_us']:.1f} us/layer, "
              f"{r['tokens_per_s']:.0f} tok/s, "
              f"{sp:.2f}x bf16{verdict}")
if "error" in dec:
    print("decode_step:", dec["error"]); ok = False
print("py_check:", "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
EOF
echo "py_check: $(( $(date +%s) - start ))s; logs and JSON in $OUT"
exit $status
