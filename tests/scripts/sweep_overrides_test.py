#!/usr/bin/env python3
"""scripts/sweep_overrides.py run as a program on a stand-in profiler (no GPU): a script
that writes one JSON line per run whose time, plan and accuracy depend on
BQMM_PLAN_OVERRIDE, refuses one override as the planner does and crashes on another.
Registered with CTest (tests/CMakeLists.txt) where python3 exists."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_check_env import gpu_check_env  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "sweep_overrides.py")

# Planner 10 us on the register tile; two tiles 8 us (marked), TMA 9.9 (within the 3 %
# margin), "fail=1" 7 us with a failed accuracy check (not marked), k_split=16 refused,
# "crash=1" no JSON at all. Each run appends to calls.txt, so the repeats can be counted.
PROFILER = r'''#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
def value(flag, default=None):
    return args[args.index(flag) + 1] if flag in args else default
o = os.environ.get("BQMM_PLAN_OVERRIDE", "")
with open(os.path.join(os.path.dirname(value("--json")), "calls.txt"), "a") as f:
    f.write(o + "\n")
if o == "k_split=16":
    print("bqmm-profile: nbits: InvalidArgument: plan override: k_split=16: this plan's GEMV takes up to 8", file=sys.stderr)
    sys.exit(2)
if o == "crash=1":
    sys.exit(1)
plans = {"": (10.0, "k_split=4; tma=0; window=0; lines=0; tiles=1"),
         "window=1,lines=1,tiles=2": (8.0, "k_split=2; tma=0; window=1; lines=1; tiles=2"),
         "tma=1": (9.9, "k_split=4; tma=1; window=0; lines=0; tiles=1"),
         "fail=1": (7.0, "k_split=8; tma=0; window=1; lines=0; tiles=1")}
us, plan = plans[o]
row = {"op": value("--op"), "activation_dtype": value("--activation-dtype", "fp16"),
       "bits": int(value("--bits", 4)), "m": int(value("--m")), "n": int(value("--n")),
       "k": int(value("--k")), "path": "gemv", "plan": "NBitsMatMulPlan{path=gemv; " + plan + "}",
       "b2b_us": us, "passed": o != "fail=1"}
with open(value("--json"), "a") as f:
    f.write(json.dumps(row) + "\n")
'''


class SweepOverridesTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        self.profiler = os.path.join(self.root, "bqmm-profile")
        with open(self.profiler, "w") as f:
            f.write(PROFILER.replace("/usr/bin/env python3", "/usr/bin/env " + os.path.basename(sys.executable)))
        os.chmod(self.profiler, 0o755)
        self.cases = os.path.join(self.root, "cases.txt")
        with open(self.cases, "w") as f:
            f.write("# one case\n")
            f.write("--op nbits --bits 4 --zero-points packed --m 1 --n 28672 --k 4096  # gate/up\n")
        self.out = os.path.join(self.root, "out")

    def tearDown(self):
        self.tmp.cleanup()

    def sweep(self, variants, *extra):
        env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
        env.pop("BQMM_PLAN_OVERRIDE", None)
        p = subprocess.run([sys.executable, SCRIPT, self.profiler, self.cases, variants, "--out", self.out]
                           + list(extra), env=env, capture_output=True, text=True, check=False)
        return p.returncode, p.stdout + p.stderr

    def test_marks_a_faster_variant_against_the_planner(self):
        rc, log = self.sweep("window=1,lines=1,tiles=2;tma=1")
        self.assertEqual(rc, 0, log)
        self.assertIn("nbits fp16 int4 zp=packed M=1 N=28672 K=4096 | plan: 10.0 (regs k4)", log)
        self.assertIn("window=1,lines=1,tiles=2: 8.0 (lines x2 k2) 0.800 *", log)
        self.assertIn("tma=1: 9.9 (tma k4) 0.990", log)
        self.assertNotIn("0.990 *", log)
        self.assertIn("sweep: 1 cases x 2 variants, 1 with a variant >= 3 % faster than the planner", log)

    def test_margin_and_repeats(self):
        rc, log = self.sweep("tma=1", "--margin", "0.5", "--repeats", "3")
        self.assertEqual(rc, 0, log)
        self.assertIn("tma=1: 9.9 (tma k4) 0.990 *", log)
        with open(os.path.join(self.out, "calls.txt")) as f:
            self.assertEqual(len(f.read().splitlines()), 6)  # planner and variant, 3 each

    def test_refused_failed_and_crashed_runs(self):
        rc, log = self.sweep("k_split=16;fail=1")
        self.assertEqual(rc, 0, log)  # a refusal is the planner's answer, not a failure
        self.assertIn("k_split=16: refused (bqmm-profile: nbits: InvalidArgument: plan override", log)
        self.assertIn("fail=1: 7.0 (window k8) 0.700 FAIL", log)
        self.assertIn("0 with a variant", log)  # a failed accuracy check is never marked
        rc, log = self.sweep("crash=1")
        self.assertEqual(rc, 1, log)
        self.assertIn("crash=1: error (rc=1)", log)

    def test_gpu_check_step(self):
        # gpu_check.sh's `sweep` step: its bash, on the same stand-in as build-gpu's profiler.
        scripts = os.path.join(self.root, "scripts")
        os.makedirs(scripts)
        for name in ("gpu_check.sh", "sweep_overrides.py", "ab_table.py", "bench_table.py"):
            shutil.copy(os.path.join(os.path.dirname(SCRIPT), name), os.path.join(scripts, name))
        open(os.path.join(self.root, "CMakeLists.txt"), "w").close()
        os.makedirs(os.path.join(self.root, "build-gpu"))
        shutil.copy(self.profiler, os.path.join(self.root, "build-gpu", "bqmm-profile"))
        env = gpu_check_env(OUT=self.out, SWEEP_CASES=self.cases, SWEEP_REPEATS="1")
        gpu_check = os.path.join(scripts, "gpu_check.sh")
        p = subprocess.run(["bash", gpu_check, "sweep"], cwd=self.root, env=env,
                           capture_output=True, text=True, check=False)
        self.assertIn("sweep: needs SWEEP_CASES", p.stdout, p.stdout + p.stderr)
        env["SWEEP_VARIANTS"] = "window=1,lines=1,tiles=2"
        p = subprocess.run(["bash", gpu_check, "sweep"], cwd=self.root, env=env,
                           capture_output=True, text=True, check=False)
        log = p.stdout + p.stderr
        self.assertIn("sweep: rc=0", log)
        self.assertIn("sweep: 1 cases x 1 variants, 1 with a variant >= 3 % faster", log)
        with open(os.path.join(self.out, "sweep.txt")) as f:
            self.assertIn("8.0 (lines x2 k2) 0.800 *", f.read())


if __name__ == "__main__":
    unittest.main()
