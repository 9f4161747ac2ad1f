#!/usr/bin/env python3
"""gpu_check.sh's `micro` step run as a program, on a stand-in `nvcc` (no GPU, no CUDA
compiler needed): the bash that picks the microbenches of MICRO, builds each alone for
the GPU's architecture, runs it, keeps its output in $OUT and its binary out of $OUT, and
summarizes each is what these tests pin. A temporary root holds a copy of gpu_check.sh,
tools/microbench/ sources written by each test and bin/nvcc, a script that logs its
arguments and writes an executable that prints its name and exits with the status the
source asks for (`EXIT=N`), or fails like a compile error where the source says
`BUILD_FAIL`. With MICRO_AB=1 an ab-base/ tree beside it holds the baseline's source;
PACK_OUT=1 (any step's) is pinned here too.
Registered with CTest (tests/CMakeLists.txt) where python3 and bash exist."""
import os
import subprocess
import sys
import tarfile
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_check_env import gpu_check_env, stand_in_tree  # noqa: E402


NVCC = r'''#!/usr/bin/env python3
import os, re, sys
args = sys.argv[1:]
out = args[args.index("-o") + 1]
src = args[-1]
print("nvcc " + " ".join(args))
text = open(src).read()
if "BUILD_FAIL" in text:
    print(src + "(1): error: the stand-in's compile error")
    sys.exit(2)
m = re.search(r"EXIT=(\d+)", text)
with open(out, "w") as f:
    f.write("#!/bin/sh\necho ran %s\nexit %s\n" % (os.path.basename(src), m.group(1) if m else "0"))
os.chmod(out, 0o755)
'''


class GpuCheckMicroTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        stand_in_tree(self.root)
        os.makedirs(os.path.join(self.root, "tools", "microbench"))
        nvcc = os.path.join(self.root, "bin", "nvcc")
        with open(nvcc, "w") as f:
            f.write(NVCC.replace("/usr/bin/env python3", "/usr/bin/env " + os.path.basename(sys.executable)))
        os.chmod(nvcc, 0o755)

    def tearDown(self):
        self.tmp.cleanup()

    def source(self, name, text):
        with open(os.path.join(self.root, "tools", "microbench", name + ".cu"), "w") as f:
            f.write(text)

    def run_micro(self, **env):
        out = os.path.join(self.root, "out")
        full = gpu_check_env(os.path.join(self.root, "bin"), OUT=out)
        full.update(env)
        p = subprocess.run(["bash", os.path.join(self.root, "scripts", "gpu_check.sh"), "micro"],
                           cwd=self.root, env=full, capture_output=True, text=True, check=False)
        return p.returncode, p.stdout + p.stderr, out

    def read(self, out, name):
        with open(os.path.join(out, name)) as f:
            return f.read()

    def test_default_builds_and_runs_wgmma_rate_for_sm90a(self):
        self.source("wgmma_rate", "// a microbench\n")
        rc, log, out = self.run_micro()
        self.assertEqual(rc, 0, log)
        self.assertRegex(log, r"micro wgmma_rate: rc=0 \(\d+s\), output in micro_wgmma_rate.txt")
        text = self.read(out, "micro_wgmma_rate.txt")
        self.assertIn("nvcc -O3 -std=c++17 --expt-relaxed-constexpr -arch=sm_90a -Iinclude -Isrc -o ", text)
        self.assertIn(" tools/microbench/wgmma_rate.cu", text)
        self.assertIn("ran wgmma_rate.cu", text)
        # Only the outputs come back: no binary in $OUT.
        self.assertEqual(sorted(os.listdir(out)), ["gpu.txt", "micro_wgmma_rate.txt"])

    def test_each_name_its_own_status(self):
        self.source("good", "// EXIT=0\n")
        self.source("exits", "// EXIT=3\n")
        self.source("broken", "// BUILD_FAIL\n")
        rc, log, out = self.run_micro(MICRO="good exits broken missing")
        self.assertEqual(rc, 0, log)  # the step reports them in the summary
        self.assertRegex(log, r"micro good: rc=0 \(\d+s\)")
        self.assertRegex(log, r"micro exits: rc=3 \(\d+s\)")
        self.assertRegex(log, r"micro broken: build failed \(\d+s, see micro_broken.txt\)")
        self.assertIn("micro missing: no tools/microbench/missing.cu", log)
        self.assertIn("error: the stand-in's compile error", self.read(out, "micro_broken.txt"))
        self.assertIn("ran exits.cu", self.read(out, "micro_exits.txt"))

    def test_other_architectures_build_for_their_own(self):
        self.source("stream_shapes", "\n")
        rc, log, out = self.run_micro(MICRO="stream_shapes", BQMM_CUDA_ARCH="80")
        self.assertEqual(rc, 0, log)
        self.assertIn(" -arch=sm_80 ", self.read(out, "micro_stream_shapes.txt"))

    def base_tree(self, text):
        """A baseline tree as scripts/ab_prepare.sh writes it: the microbench and AB_COMMIT."""
        base = os.path.join(self.root, "ab-base")
        os.makedirs(os.path.join(base, "tools", "microbench"))
        with open(os.path.join(base, "tools", "microbench", "quant_pass.cu"), "w") as f:
            f.write(text)
        with open(os.path.join(base, "AB_COMMIT"), "w") as f:
            f.write("0123abcd\n")

    def test_ab_runs_base_head_base_each_on_its_own_headers(self):
        self.source("quant_pass", "// head EXIT=0\n")
        self.base_tree("// base EXIT=0\n")
        rc, log, out = self.run_micro(MICRO="quant_pass", MICRO_AB="1")
        self.assertEqual(rc, 0, log)
        self.assertRegex(log, r"micro quant_pass: rc=0 \(\d+s, base head base\), output in micro_quant_pass.txt")
        text = self.read(out, "micro_quant_pass.txt")
        self.assertIn("-Iab-base/include -Iab-base/src -o ", text)
        self.assertIn(" ab-base/tools/microbench/quant_pass.cu", text)
        self.assertIn("-Iinclude -Isrc -o ", text)
        runs = [line for line in text.splitlines() if line.startswith("== ")]
        self.assertEqual(runs, ["== base (ab-base 0123abcd)", "== head (this tree)", "== base (ab-base 0123abcd)"])
        self.assertEqual(text.count("ran quant_pass.cu"), 3)
        self.assertEqual(sorted(os.listdir(out)), ["gpu.txt", "micro_quant_pass.txt"])

    def test_ab_reports_a_failing_side_and_a_missing_base(self):
        self.source("quant_pass", "// EXIT=0\n")
        self.base_tree("// EXIT=4\n")
        rc, log, _ = self.run_micro(MICRO="quant_pass", MICRO_AB="1")
        self.assertEqual(rc, 0, log)
        self.assertRegex(log, r"micro quant_pass: rc=4 \(\d+s, base head base\)")
        self.source("wgmma_rate", "\n")
        rc, log, _ = self.run_micro(MICRO="wgmma_rate", MICRO_AB="1")
        self.assertIn("micro wgmma_rate: MICRO_AB=1 but no ab-base/tools/microbench/wgmma_rate.cu", log)

    def test_pack_out_leaves_the_summary_and_one_archive(self):
        self.source("good", "// EXIT=0\n")
        self.source("exits", "// EXIT=3\n")
        rc, log, out = self.run_micro(MICRO="good exits", PACK_OUT="1")
        self.assertEqual(rc, 0, log)
        self.assertEqual(sorted(os.listdir(out)), ["gpu_check.tgz", "summary.txt"])
        summary = self.read(out, "summary.txt")
        self.assertIn("================ gpu_check summary", summary)
        self.assertRegex(summary, r"micro exits: rc=3 \(\d+s\)")
        with tarfile.open(os.path.join(out, "gpu_check.tgz")) as tar:
            self.assertEqual(sorted(tar.getnames()), ["gpu.txt", "micro_exits.txt", "micro_good.txt"])
            self.assertIn(b"ran good.cu", tar.extractfile("micro_good.txt").read())


if __name__ == "__main__":
    unittest.main()
