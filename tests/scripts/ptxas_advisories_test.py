#!/usr/bin/env python3
"""scripts/ptxas_advisories.py (scripts/test.sh's and gpu_check.sh's build-log check) on
build logs written here: ptxas's coded advisories listed once, sorted, with a count, and
exit status 1; a log with spill warnings and plain ptxas info lines but no advisory
passes silently. Registered with CTest (tests/CMakeLists.txt) where python3 exists."""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "ptxas_advisories.py")

INJECTED = ("ptxas info    : (C7517) warpgroup.wait is injected in around line 84 by compiler to "
            "allow use of registers defined by GMMA in function '_Z3BadPfmj'")
SERIALIZED = ("ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions "
              "are serialized due to the presence of Extern calls in the function '_Z4Bad2v'")
SPILL = ("ptxas warning : Registers are spilled to local memory in function '_Z1fv', "
         "8 bytes spill stores, 8 bytes spill loads")


class PtxasAdvisoriesTest(unittest.TestCase):
    def run_script(self, log_lines):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "build.log")
            with open(log, "w") as f:
                f.write("\n".join(log_lines) + "\n")
            return subprocess.run([sys.executable, SCRIPT, log], capture_output=True, text=True)

    def test_advisories_listed_once_and_fail(self):
        r = self.run_script([
            "[3/101] Building CUDA object CMakeFiles/bqmm_gemm_wgmma.dir/src/cuda/gemm/int4_wgmma.cu.o",
            INJECTED,
            SPILL,
            SERIALIZED,
            INJECTED,  # the same advisory from a second architecture
        ])
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[:-1], sorted([INJECTED, SERIALIZED]))
        self.assertIn("2 advisories", lines[-1])

    def test_clean_log_passes_silently(self):
        r = self.run_script([
            "[1/2] Building CUDA object CMakeFiles/bqmm.dir/src/cuda/gemv/fma_gemv.cu.o",
            SPILL,
            "ptxas info    : Used 168 registers, used 1 barriers, 1024 bytes smem",
            "[2/2] Linking CXX executable bqmm-profile",
        ])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "")


if __name__ == "__main__":
    unittest.main()
