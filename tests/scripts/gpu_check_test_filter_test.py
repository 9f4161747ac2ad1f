#!/usr/bin/env python3
"""gpu_check.sh's `test` step with GPU_TEST_FILTER run as a program, on a stand-in GPU test
binary (no GPU, no build): the filter reaches the binary, the summary counts what it
passed and skipped, a failure lists the failed tests, a crash names its signal and the
test it happened in, and without the build step's binary the step says so. A temporary
root holds a copy of gpu_check.sh, bin/nvidia-smi and build-gpu/tests/bqmm_gpu_tests, a
script that prints its arguments and the GoogleTest lines its environment asks for
(STAND_IN_FAIL=1: one failed test; STAND_IN_CRASH=1: killed by SIGFPE in its second test).
Registered with CTest (tests/CMakeLists.txt) where python3 and bash exist."""
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_check_env import gpu_check_env, stand_in_tree  # noqa: E402

GPU_TESTS = r'''#!/bin/sh
echo "args: $*"
if [ "${STAND_IN_CRASH:-0}" = 1 ]; then
  echo "[ RUN      ] Fp8GemvRowGroups.EveryLineConfigurationAgainstReference"
  echo "[       OK ] Fp8GemvRowGroups.EveryLineConfigurationAgainstReference (5 ms)"
  echo "[ RUN      ] Fp8GemvRowGroups.SanitizeSmall"
  kill -FPE $$
fi
if [ "${STAND_IN_FAIL:-0}" = 1 ]; then
  echo "[  FAILED  ] Fp8GemvRowGroups.SanitizeSmall (3 ms)"
  echo "[  PASSED  ] 4 tests."
  echo "[  SKIPPED ] 1 test, listed below:"
  exit 1
fi
echo "[  PASSED  ] 5 tests."
exit 0
'''


class GpuCheckTestFilterTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        stand_in_tree(self.root)

    def tearDown(self):
        self.tmp.cleanup()

    def binary(self):
        path = os.path.join(self.root, "build-gpu", "tests", "bqmm_gpu_tests")
        os.makedirs(os.path.dirname(path))
        with open(path, "w") as f:
            f.write(GPU_TESTS)
        os.chmod(path, 0o755)

    def run_test_step(self, **env):
        out = os.path.join(self.root, "out")
        full = gpu_check_env(os.path.join(self.root, "bin"), OUT=out, GPU_TEST_FILTER="*RowGroups*")
        full.update(env)
        p = subprocess.run(["bash", os.path.join(self.root, "scripts", "gpu_check.sh"), "test"],
                           cwd=self.root, env=full, capture_output=True, text=True, check=False)
        return p.returncode, p.stdout + p.stderr, out

    def test_the_filter_alone_and_its_counts(self):
        self.binary()
        rc, log, out = self.run_test_step()
        self.assertEqual(rc, 0, log)
        self.assertRegex(log, r"gpu tests \(\*RowGroups\*\): 5 passed, 0 skipped, rc=0 \(\d+s\)")
        with open(os.path.join(out, "gpu_tests.log")) as f:
            self.assertIn("args: --gtest_filter=*RowGroups*\n", f.read())
        self.assertNotIn("ctest", log)  # not the README's test command

    def test_a_failure_lists_the_failed_tests(self):
        self.binary()
        rc, log, _ = self.run_test_step(STAND_IN_FAIL="1")
        self.assertRegex(log, r"gpu tests \(\*RowGroups\*\): 4 passed, 1 skipped, rc=1 \(\d+s\)")
        self.assertIn("[  FAILED  ] Fp8GemvRowGroups.SanitizeSmall (3 ms)", log)

    def test_a_crash_names_its_signal_and_test(self):
        self.binary()
        rc, log, _ = self.run_test_step(STAND_IN_CRASH="1")
        self.assertRegex(log, r"gpu tests \(\*RowGroups\*\): 0 passed, 0 skipped, rc=136 \(\d+s\)")
        self.assertIn("gpu tests: killed by signal 8 (SIGFPE) in Fp8GemvRowGroups.SanitizeSmall", log)

    def test_without_the_build_says_so(self):
        rc, log, _ = self.run_test_step()
        self.assertIn("gpu tests: no build-gpu/tests/bqmm_gpu_tests (run the build step first)", log)


if __name__ == "__main__":
    unittest.main()
