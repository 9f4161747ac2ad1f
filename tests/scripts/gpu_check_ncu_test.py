#!/usr/bin/env python3
"""gpu_check.sh's `ncu` step run as a program, on a stand-in `ncu` (no GPU, no Nsight
Compute): the bash that reads the case file, passes each case's environment and
arguments, and summarizes each report is what these tests pin. A temporary root holds a
copy of gpu_check.sh and ncu_stalls.py, an empty CMakeLists.txt, build-gpu/bqmm-profile (never run: the
stand-in only names it) and bin/ncu, a script that prints its arguments, the case's
BQMM_PLAN_OVERRIDE and a details page as Nsight Compute writes one. Registered with CTest
(tests/CMakeLists.txt) where python3 and bash exist."""
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_check_env import gpu_check_env, stand_in_tree  # noqa: E402


# The stand-in: exits 3 for a case whose arguments hold --fail, prints no metrics for one
# that holds --empty (as ncu when no kernel matched), a source page in CSV where asked for
# one (--page source: two instructions' warp-state samples), else a details page.
NCU = r'''#!/usr/bin/env python3
import os, sys
args = sys.argv[1:]
print("args: " + " ".join(args))
print("override: " + os.environ.get("BQMM_PLAN_OVERRIDE", "(none)"))
if "--fail" in args:
    sys.exit(3)
if "--empty" in args:
    print("==WARNING== No kernels were profiled.")
    sys.exit(0)
if "--page" in args:
    print('"Kernel Name","K"')
    print('"Address","Source","Warp Stall Sampling (All Samples)","stall_long_sb","stall_wait",'
          '"stall_long_sb (Not Issued)"')
    print('"0x10","      LDG.E R2, [R4]","30","28","2","20"')
    print('"0x20","      FFMA R1, R2, R2, R1","10","0","8","0"')
    sys.exit(0)
print("""  NBitsGemvWindowKernel (64, 1, 1)x(256, 1, 1), Context 1, Stream 13, Device 0, CC 9.0
    Section: GPU Speed Of Light Throughput
    ----------------------- ----------- ------------
    Metric Name             Metric Unit Metric Value
    ----------------------- ----------- ------------
    DRAM Throughput                   %        61.08
    Duration                         us        14.37
    L1/TEX Cache Throughput           %        40.12
    L2 Cache Throughput               %        35.50
    Section: Memory Workload Analysis
    L1/TEX Hit Rate                   %        43.10
    L2 Hit Rate                       %        20.70
    Section: Occupancy
    Achieved Occupancy                %        81.90
""")
'''


class GpuCheckNcuTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        stand_in_tree(self.root, ("gpu_check.sh", "ncu_stalls.py"))
        open(os.path.join(self.root, "CMakeLists.txt"), "w").close()
        os.makedirs(os.path.join(self.root, "build-gpu"))
        profiler = os.path.join(self.root, "build-gpu", "bqmm-profile")
        with open(profiler, "w") as f:
            f.write("#!/bin/sh\nexit 1\n")
        os.chmod(profiler, 0o755)
        ncu = os.path.join(self.root, "bin", "ncu")
        with open(ncu, "w") as f:
            f.write(NCU.replace("/usr/bin/env python3", "/usr/bin/env " + os.path.basename(sys.executable)))
        os.chmod(ncu, 0o755)

    def tearDown(self):
        self.tmp.cleanup()

    def run_ncu(self, cases, **env):
        with open(os.path.join(self.root, "cases.txt"), "w") as f:
            f.write(cases)
        out = os.path.join(self.root, "out")
        full = gpu_check_env(os.path.join(self.root, "bin"), OUT=out, NCU_CASES="cases.txt")
        full.update(env)
        p = subprocess.run(["bash", os.path.join(self.root, "scripts", "gpu_check.sh"), "ncu"],
                           cwd=self.root, env=full, capture_output=True, text=True, check=False)
        with open(os.path.join(out, "ncu.txt")) as f:
            reports = f.read()
        return p.returncode, p.stdout + p.stderr, reports

    def test_cases_environment_arguments_and_summary(self):
        rc, log, reports = self.run_ncu(
            "# two cases\n"
            "plain NBitsGemvWindowKernel --op nbits --bits 4 --m 1 --n 8192 --k 8192\n"
            "\n"
            "forced Fp8GemvMmaKernel BQMM_PLAN_OVERRIDE=tiles=2 --op fp8 --m 16 --n 8192 --k 8192\n")
        self.assertEqual(rc, 0, log)
        self.assertIn("ncu plain: DRAM Throughput % 61.08; Duration us 14.37; L1/TEX Cache "
                      "Throughput % 40.12; L2 Cache Throughput % 35.50; L1/TEX Hit Rate % 43.10; "
                      "L2 Hit Rate % 20.70; Achieved Occupancy % 81.90\n", log)
        self.assertIn("ncu forced: DRAM Throughput % 61.08;", log)
        self.assertIn("ncu: rc=0", log)
        self.assertIn("==== ncu plain: kernel ~ NBitsGemvWindowKernel,  --op nbits --bits 4", reports)
        self.assertIn("==== ncu forced: kernel ~ Fp8GemvMmaKernel, BQMM_PLAN_OVERRIDE=tiles=2 --op fp8", reports)
        self.assertIn("override: tiles=2", reports)
        self.assertIn("override: (none)", reports)
        self.assertIn("args: --clock-control none --kernel-name regex:NBitsGemvWindowKernel "
                      "--launch-skip 5 --launch-count 1 --section SpeedOfLight", reports)
        self.assertIn("build-gpu/bqmm-profile --op nbits --bits 4 --m 1 --n 8192 --k 8192", reports)

    def test_skip_and_sections(self):
        rc, log, reports = self.run_ncu("a K --op fp8 --m 1 --n 64 --k 64\n", NCU_SKIP="9",
                                        NCU_SECTIONS="Occupancy")
        self.assertEqual(rc, 0, log)
        self.assertIn("--launch-skip 9 --launch-count 1 --section Occupancy " +
                      os.path.join("build-gpu", "bqmm-profile"), reports)
        self.assertIn("ncu a: DRAM Throughput % 61.08; Duration us 14.37;", log)

    def test_source_page_stalls(self):
        # NCU_SOURCE=1: a second run of the same launch for the source page, its CSV kept,
        # ncu_stalls.py's table in ncu.txt and its line in the summary (long_sb 28 of 40
        # samples, wait 10, 2 in no column: `other`).
        rc, log, reports = self.run_ncu("plain K BQMM_PLAN_OVERRIDE=tiles=2 --op fp8 --m 1 --n 64 --k 64\n",
                                        NCU_SOURCE="1", NCU_SOURCE_TOP="1")
        self.assertEqual(rc, 0, log)
        self.assertIn("ncu plain: DRAM Throughput % 61.08;", log)
        self.assertIn("ncu plain stalls: long_sb 70.0 %, wait 25.0 %, other 5.0 %; "
                      "top 75.0 % `LDG.E R2, [R4]` (long_sb)\n", log)
        self.assertIn("ncu: rc=0", log)
        with open(os.path.join(self.root, "out", "ncu_source_plain.csv")) as f:
            csv_text = f.read()
        self.assertIn("--launch-skip 5 --launch-count 1 --section SourceCounters --section WarpStateStats "
                      "--metrics group:smsp__pcsamp_warp_stall_reasons --page source --print-source sass "
                      "--csv", csv_text)
        self.assertIn("override: tiles=2", csv_text)
        self.assertIn("==== ncu plain: where the warps wait (ncu_source_plain.csv)", reports)
        self.assertIn("by reason: long_sb 70.0 %, wait 25.0 %, other 5.0 %", reports)
        self.assertIn("top 1 instructions", reports)
        self.assertNotIn("FFMA", reports.split("where the warps wait")[1])

    def test_source_page_without_samples_is_reported(self):
        rc, log, _ = self.run_ncu("none K --op fp8 --empty\n", NCU_SOURCE="1")
        self.assertEqual(rc, 0, log)
        self.assertIn("ncu none stalls: none (no source table", log)
        self.assertIn("ncu: rc=1", log)

    def test_failures_are_reported(self):
        rc, log, _ = self.run_ncu("bad K --op fp8 --fail\nnone K --op fp8 --empty\n")
        self.assertEqual(rc, 0, log)  # the step reports them in the summary
        self.assertIn("ncu bad: no report (rc=3; see ncu.txt)", log)
        self.assertIn("ncu none: no report (rc=0; see ncu.txt)", log)
        self.assertIn("ncu: rc=1", log)


if __name__ == "__main__":
    unittest.main()
