#!/usr/bin/env python3
"""gpu_check.sh's `ab` step run as a program, on a stand-in profiler (no GPU, no build):
the bash that picks each side's profiler and environment is what these tests pin. A
temporary root holds copies of the three scripts the step runs, an empty CMakeLists.txt
and build-gpu/bqmm-profile, a script that writes one JSON line per case whose time and
plan depend on BQMM_PLAN_OVERRIDE. Registered with CTest (tests/CMakeLists.txt) where
python3 and bash exist."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_check_env import gpu_check_env  # noqa: E402

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")

# The stand-in: 9 us under the planner, 10 us with the fused GEMM forced (gemm=1); the plan
# names the override so that the table counts the plan as changed.
PROFILER = r'''#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
def value(flag, default=None):
    return args[args.index(flag) + 1] if flag in args else default
override = os.environ.get("BQMM_PLAN_OVERRIDE", "")
row = {"op": value("--op"), "activation_dtype": value("--activation-dtype", "fp16"),
       "bits": int(value("--bits", 4)), "zero_points": "none", "act_quant": "none",
       "b_scale_block_rows": 1, "block_size": 128, "bias": False,
       "m": int(value("--m")), "n": int(value("--n")), "k": int(value("--k")),
       "path": "fused_gemm" if "gemm=1" in override else "gemv",
       "plan": "override=" + override + "}",
       "b2b_us": 10.0 if "gemm=1" in override else 9.0, "median_us": 12.0, "passed": True}
with open(value("--json"), "a") as f:
    f.write(json.dumps(row) + "\n")
'''


class GpuCheckAbTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        os.makedirs(os.path.join(self.root, "scripts"))
        for name in ("gpu_check.sh", "ab_table.py", "bench_table.py", "spills.py", "ptxas_advisories.py"):
            shutil.copy(os.path.join(SCRIPTS, name), os.path.join(self.root, "scripts", name))
        open(os.path.join(self.root, "CMakeLists.txt"), "w").close()
        os.makedirs(os.path.join(self.root, "build-gpu"))
        profiler = os.path.join(self.root, "build-gpu", "bqmm-profile")
        with open(profiler, "w") as f:
            f.write(PROFILER.replace("/usr/bin/env python3", "/usr/bin/env " + os.path.basename(sys.executable)))
        os.chmod(profiler, 0o755)
        with open(os.path.join(self.root, "cases.txt"), "w") as f:
            f.write("# two cases\n")
            f.write("g16 --op nbits --bits 4 --m 16 --n 8192 --k 8192\n")
            f.write("g16 --op nbits --bits 8 --m 12 --n 8192 --k 8192\n")

    def tearDown(self):
        self.tmp.cleanup()

    def run_ab(self, steps="ab", **env):
        out = os.path.join(self.root, "out")
        full = gpu_check_env(OUT=out, AB_CASES_FILE="cases.txt", AB_REPEATS="1")
        full.update(env)
        p = subprocess.run(["bash", os.path.join(self.root, "scripts", "gpu_check.sh"), steps],
                           cwd=self.root, env=full, capture_output=True, text=True, check=False)
        return p.returncode, p.stdout + p.stderr, out

    def stand_in_cmake(self):
        """A baseline tree (ab-base/, as ab_prepare.sh exports it: no .deps), this
        checkout's CUTLASS headers, and a stand-in cmake that records its arguments in
        CMAKE_ARGS_LOG and, building a tree other than build-gpu, copies the stand-in
        profiler there; the PATH that puts it first."""
        os.makedirs(os.path.join(self.root, "ab-base"))
        open(os.path.join(self.root, "ab-base", "CMakeLists.txt"), "w").close()
        cutlass = os.path.join(self.root, ".deps", "cutlass", "include", "cutlass")
        os.makedirs(cutlass)
        open(os.path.join(cutlass, "cutlass.h"), "w").close()
        bin_dir = os.path.join(self.root, "bin")
        os.makedirs(bin_dir)
        with open(os.path.join(bin_dir, "cmake"), "w") as f:
            f.write("#!/usr/bin/env bash\n"
                    'echo "$@" >> "$CMAKE_ARGS_LOG"\n'
                    'if [ "$1" = --build ]; then [ "$2" = build-gpu ] || cp build-gpu/bqmm-profile "$2/bqmm-profile"; '
                    'else mkdir -p "$4"; fi\n')
        os.chmod(os.path.join(bin_dir, "cmake"), 0o755)
        return bin_dir + os.pathsep + os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")

    def test_this_tree_against_itself_with_a_forced_base(self):
        rc, log, out = self.run_ab(AB_TREE=".", AB_BASE_ENV="BQMM_PLAN_OVERRIDE=gemm=1")
        self.assertEqual(rc, 0, log)
        self.assertIn("ab: baseline this tree with BQMM_PLAN_OVERRIDE=gemm=1, rc=0", log)
        self.assertIn("ab g16: 2 cases, head/base b2b_us median 0.900", log)
        self.assertIn("2 plans changed", log)
        self.assertFalse(os.path.exists(os.path.join(self.root, "build-ab")), log)
        with open(os.path.join(out, "ab_table.txt")) as f:
            table = f.read()
        self.assertIn("M=16 N=8192 K=8192", table)
        self.assertIn("0.900", table)

    def test_a_case_lines_environment_makes_its_own_case(self):
        # The same shape under the planner and under an override in one NAME: two rows, the
        # override's labelled with it.
        with open(os.path.join(self.root, "cases.txt"), "w") as f:
            f.write("g16 --op nbits --bits 4 --m 16 --n 8192 --k 8192\n")
            f.write("g16 BQMM_PLAN_OVERRIDE=gemm=1 --op nbits --bits 4 --m 16 --n 8192 --k 8192\n")
        rc, log, out = self.run_ab(AB_TREE=".")
        self.assertEqual(rc, 0, log)
        self.assertIn("ab g16: 2 cases, head/base b2b_us median 1.000", log)
        with open(os.path.join(out, "ab_table.txt")) as f:
            table = f.read()
        self.assertIn("M=16 N=8192 K=8192 [BQMM_PLAN_OVERRIDE=gemm=1]", table)
        self.assertIn("fused_gemm", table)

    def test_head_environment(self):
        rc, log, _ = self.run_ab(AB_TREE=".", AB_HEAD_ENV="BQMM_PLAN_OVERRIDE=gemm=1")
        self.assertEqual(rc, 0, log)
        self.assertIn("head with BQMM_PLAN_OVERRIDE=gemm=1", log)
        self.assertIn("ab g16: 2 cases, head/base b2b_us median 1.111", log)

    def test_baseline_built_with_this_checkouts_cutlass(self):
        # A baseline exported by ab_prepare.sh has no .deps of its own: its build is given
        # this checkout's CUTLASS headers (else it has no mixed-input GEMM).
        args_log = os.path.join(self.root, "cmake_args.txt")
        rc, log, _ = self.run_ab(PATH=self.stand_in_cmake(), CMAKE_ARGS_LOG=args_log)
        self.assertEqual(rc, 0, log)
        with open(args_log) as f:
            configure = f.readline()
        self.assertIn("-S ab-base -B build-ab", configure)
        self.assertIn("-DBQMM_CUTLASS_DIR=" + os.path.join(self.root, ".deps", "cutlass", "include"), configure)
        self.assertNotIn("built beside the steps before it", log)  # built in the ab step
        self.assertIn("ab g16: 2 cases", log)

    def test_baseline_built_in_the_background_from_the_build_step(self):
        # With the build step, the baseline builds in the background after this tree's
        # build, and the ab step waits for it rather than building it again.
        args_log = os.path.join(self.root, "cmake_args.txt")
        rc, log, _ = self.run_ab(steps="build,ab", PATH=self.stand_in_cmake(), CMAKE_ARGS_LOG=args_log)
        self.assertEqual(rc, 0, log)
        with open(args_log) as f:
            calls = [line.split()[:3] for line in f]
        self.assertEqual(calls[0][:2], ["-S", "."])  # this tree first, then the baseline once
        self.assertEqual([c for c in calls if c[:2] == ["-S", "ab-base"]], [["-S", "ab-base", "-B"]])
        self.assertIn("ab: the baseline built beside the steps before it (rc=0", log)
        self.assertIn("ab g16: 2 cases", log)

    def test_build_of_another_baseline_starts_afresh(self):
        # ab_prepare.sh's files carry their commit's time, so a build-ab/ left by an earlier
        # call for another baseline would look up to date to ninja: it is removed first;
        # one of the same baseline is kept (an incremental build).
        bin_path = self.stand_in_cmake()
        with open(os.path.join(self.root, "ab-base", "AB_COMMIT"), "w") as f:
            f.write("new\n")
        marker = os.path.join(self.root, "build-ab", "object.o")
        for earlier, kept in (("old", False), ("new", True)):
            os.makedirs(os.path.join(self.root, "build-ab"), exist_ok=True)
            open(marker, "w").close()
            with open(os.path.join(self.root, "build-ab", "AB_COMMIT"), "w") as f:
                f.write(earlier + "\n")
            rc, log, _ = self.run_ab(steps="ab", PATH=bin_path,
                                     CMAKE_ARGS_LOG=os.path.join(self.root, "cmake_args.txt"))
            self.assertEqual(rc, 0, log)
            self.assertEqual(os.path.exists(marker), kept, earlier)
            with open(os.path.join(self.root, "build-ab", "AB_COMMIT")) as f:
                self.assertEqual(f.read(), "new\n")
            self.assertIn("ab: baseline new, rc=0", log)

    def test_baseline_build_failure_in_the_background(self):
        bin_path = self.stand_in_cmake()
        with open(os.path.join(self.root, "bin", "cmake"), "a") as f:
            f.write('[ "$2" = build-ab ] && exit 1\n'
                    'exit 0\n')
        rc, log, _ = self.run_ab(steps="build,ab", PATH=bin_path,
                                 CMAKE_ARGS_LOG=os.path.join(self.root, "cmake_args.txt"))
        self.assertEqual(rc, 0, log)  # the step reports it in the summary
        self.assertIn("built beside the steps before it (rc=1", log)
        self.assertIn("ab: the baseline's build failed (see build_ab.log)", log)
        self.assertNotIn("ab g16", log)

    def test_no_baseline_tree(self):
        rc, log, _ = self.run_ab(AB_TREE="missing")
        self.assertEqual(rc, 0, log)  # the step reports it in the summary
        self.assertIn("ab: no baseline tree at missing", log)


if __name__ == "__main__":
    unittest.main()
