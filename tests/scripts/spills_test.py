#!/usr/bin/env python3
"""scripts/spills.py (gpu_check.sh's build step) on a build log written here: every
kernel reported spilling listed once, sorted, lines of 0 bytes left out, the summary's
count, largest store and families (demangled template names, anonymous namespaces
skipped), and no summary where nothing spills. Registered with CTest
(tests/CMakeLists.txt) where python3 exists."""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "spills.py")

WINDOW = ("_ZN4bqmm4cuda48_GLOBAL__N__ce6eaa52_15_nbits_window_cu_1ee0344821NBitsGemvWindowKernel"
          "I6__halfLi4ELb0ELb1ELi2ELb1ELb0ELb0ELb1ELb0EEEvNS0_10GemvParamsIT_S5_EE")
WINDOW2 = WINDOW.replace("Li4E", "Li8E")
FUSED = ("_ZN4bqmm4cuda15FusedGemmKernelI6__halfLNS0_11GemmWeightsE0ELi64ELi2ELb0EEEvNS0_10Gemm"
         "ParamsIT_NSt11conditionalIXeqT0_LS3_0EEfS5_E4typeEEE")


def report(symbol, stores, loads):
    return (f"ptxas warning : Registers are spilled to local memory in function '{symbol}', "
            f"{stores} bytes spill stores, {loads} bytes spill loads")


class SpillsTest(unittest.TestCase):
    def run_script(self, log_lines):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "build.log")
            out = os.path.join(tmp, "spills.txt")
            with open(log, "w") as f:
                f.write("\n".join(log_lines) + "\n")
            r = subprocess.run([sys.executable, SCRIPT, log, out], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                return r.stdout, f.read().splitlines()

    def test_every_report_once_with_families(self):
        lines = [
            "[12/69] Building CUDA object CMakeFiles/bqmm.dir/src/cuda/gemv/nbits_window.cu.o",
            report(WINDOW, 104, 104),
            report(FUSED, 16, 16),
            report(WINDOW2, 8, 12),
            report(WINDOW, 104, 104),  # a second architecture's identical report
            report(FUSED.replace("Li64E", "Li32E"), 0, 0),  # no spill: left out
        ]
        stdout, listed = self.run_script(lines)
        self.assertEqual(listed, sorted({report(WINDOW, 104, 104), report(FUSED, 16, 16),
                                         report(WINDOW2, 8, 12)}))
        self.assertEqual(stdout.strip(), "3 kernels report spills (up to 104 bytes of stores; "
                                         "NBitsGemvWindowKernel 2, FusedGemmKernel 1)")

    def test_nothing_spills(self):
        stdout, listed = self.run_script(["[1/1] Linking CXX executable bqmm-profile",
                                          report(WINDOW, 0, 0)])
        self.assertEqual(stdout, "")
        self.assertEqual(listed, [])


if __name__ == "__main__":
    unittest.main()
