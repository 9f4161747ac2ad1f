#!/usr/bin/env python3
"""Tests of scripts/ab_table.py (gpu_check.sh's `ab` comparison), run as a program on
JSON lines written here: the numbers it reports are what A/B claims in docs/PERF.md rest
on, so its choice of times, its ratios, its plan-change count and its failure exits are
pinned. Registered with CTest (tests/CMakeLists.txt) where python3 exists."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "ab_table.py")


def row(m, us, plan="k_split=2; tma=0; window=1; lines=1; tiles=2}", passed=True, **extra):
    r = {"op": "nbits", "activation_dtype": "fp16", "bits": 4, "zero_points": "none",
         "block_size": 128, "bias": False, "m": m, "n": 28672, "k": 8192, "path": "gemv",
         "plan": "NBitsMatMulPlan{path=gemv; sm90/132SMs; algo=0; rows=8; " + plan,
         "b2b_us": us, "median_us": None if us is None else us + 3.0, "passed": passed}
    r.update(extra)
    return r


class AbTableTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, rows):
        with open(os.path.join(self.dir.name, name), "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")

    def run_script(self):
        p = subprocess.run([sys.executable, SCRIPT, self.dir.name], capture_output=True,
                           text=True, check=False)
        return p.returncode, p.stdout

    def summary(self, out, suite):
        lines = [l for l in out.splitlines() if l.startswith("ab %s:" % suite)]
        self.assertEqual(len(lines), 1, out)
        return lines[0]

    def test_activation_quantization_is_part_of_the_case(self):
        # FP8 with and without a quantized activation at the same shape are two cases.
        plain = dict(op="fp8", bits=None, zero_points=None, act_quant="none", b_scale_block_rows=1)
        static = dict(plain, act_quant="static")
        self.write("f.base.1.jsonl", [row(8, 20.0, **plain), row(8, 22.0, **static)])
        self.write("f.head.1.jsonl", [row(8, 20.0, **plain), row(8, 23.1, **static)])
        rc, out = self.run_script()
        self.assertEqual(rc, 0, out)
        self.assertIn("ab f: 2 cases", out)
        self.assertIn("act=static", out)
        self.assertIn("1.050", out)

    def test_case_environment_and_repeated_lines_are_cases_of_their_own(self):
        # One shape under the planner, under an override (case_env) and its line again: three
        # rows, never the fastest of them merged into one.
        forced = dict(case_env="BQMM_PLAN_OVERRIDE=tiles=1")
        for side, times in (("base", (20.0, 30.0, 21.0)), ("head", (21.0, 27.0, 21.0))):
            self.write("o.%s.1.jsonl" % side,
                       [row(16, times[0]), row(16, times[1], **forced), row(16, times[2])])
        rc, out = self.run_script()
        self.assertEqual(rc, 0, out)
        self.assertIn("ab o: 3 cases", out)
        self.assertIn("M=16 N=28672 K=8192 [BQMM_PLAN_OVERRIDE=tiles=1]", out)
        self.assertIn("M=16 N=28672 K=8192 #2", out)
        self.assertIn("0.900", out)  # the override's 27 / 30
        self.assertIn("1.050", out)  # the planner's first line, 21 / 20
        self.assertIn("1.000", out)  # its second

    def test_fastest_repeat_ratio_and_plan_changes(self):
        self.write("s.base.1.jsonl", [row(1, 50.0), row(2, 40.0)])
        self.write("s.base.2.jsonl", [row(1, 48.0), row(2, 41.0)])
        self.write("s.head.1.jsonl", [row(1, 45.0, plan="k_split=4; tma=0; window=1; lines=1; tiles=2}"),
                                      row(2, 44.0)])
        self.write("s.head.2.jsonl", [row(1, 46.0, plan="k_split=4; tma=0; window=1; lines=1; tiles=2}"),
                                      row(2, 42.0)])
        rc, out = self.run_script()
        self.assertEqual(rc, 0, out)
        # M = 1: 45 / 48 = 0.9375; M = 2: 42 / 40 = 1.05; median 0.99375 (printed 0.994).
        self.assertIn("0.938", out)
        self.assertIn("1.050", out)
        self.assertIn("lines x2 k2 -> lines x2 k4", out)
        self.assertEqual(self.summary(out, "s"),
                         "ab s: 2 cases, head/base b2b_us median 0.994 (min 0.938, max 1.050), "
                         "0 within 2 %, 1 plans changed, all within tolerance: yes")

    def test_a_gemm_plan_change_is_its_tile_split_or_launch_form(self):
        # Off the GEMV paths the label is the path, tile, split and 'pdl' (dependent launch).
        w8a8 = "mainloop=wgmma; tile_m=64; tile_n=128; stages=6; k_split=2; k_reduce=cluster; "
        self.write("s.base.1.jsonl", [row(64, 33.0, path="w8a8_gemm", plan=w8a8 + "workspace=0B}")])
        self.write("s.head.1.jsonl", [row(64, 32.0, path="w8a8_gemm",
                                          plan=w8a8 + "dependent_launch=yes; workspace=0B}")])
        rc, out = self.run_script()
        self.assertEqual(rc, 0, out)
        self.assertIn("w8a8_gemm t64 k2 -> w8a8_gemm t64 k2 pdl", out)
        self.assertIn("1 plans changed", self.summary(out, "s"))

    def test_k_halves_are_a_plan_change(self):
        # tile_n=64: the block takes K in halves, whatever the split reads.
        base = "mainloop=wgmma; tile_m=64; tile_n=128; stages=6; k_split=1; workspace=0B}"
        head = "mainloop=wgmma; tile_m=64; tile_n=64; stages=4; k_split=1; workspace=0B}"
        self.write("s.base.1.jsonl", [row(64, 33.0, path="fused_gemm", plan=base)])
        self.write("s.head.1.jsonl", [row(64, 32.0, path="fused_gemm", plan=head)])
        rc, out = self.run_script()
        self.assertEqual(rc, 0, out)
        self.assertIn("fused_gemm t64 k1 -> fused_gemm t64 k1 halves", out)
        self.assertIn("1 plans changed", self.summary(out, "s"))

    def test_median_of_repeats(self):
        # Three repeats a side; the fastest would give 45 / 44 = 1.023, the medians 47 / 50.
        self.write("s.base.1.jsonl", [row(1, 50.0)])
        self.write("s.base.2.jsonl", [row(1, 44.0)])
        self.write("s.base.3.jsonl", [row(1, 51.0)])
        self.write("s.head.1.jsonl", [row(1, 47.0)])
        self.write("s.head.2.jsonl", [row(1, 48.0)])
        self.write("s.head.3.jsonl", [row(1, 45.0)])
        p = subprocess.run([sys.executable, SCRIPT, "--stat", "median", self.dir.name],
                           capture_output=True, text=True, check=False)
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("base b2b_us (median)", p.stdout)
        self.assertEqual(self.summary(p.stdout, "s"),
                         "ab s: 1 cases, head/base b2b_us (median) median 0.940 (min 0.940, max 0.940), "
                         "0 within 2 %, 0 plans changed, all within tolerance: yes")
        rc, out = self.run_script()
        self.assertIn("head/base b2b_us median 1.023", out)
        # Both options, in either order, with the per-run metric (b2b + 3 us here).
        p = subprocess.run([sys.executable, SCRIPT, "--stat", "median", "--metric", "median_us",
                            self.dir.name], capture_output=True, text=True, check=False)
        self.assertIn("head/base median_us (median) median 0.943", p.stdout)
        p = subprocess.run([sys.executable, SCRIPT, "--stat", "mean", self.dir.name],
                           capture_output=True, text=True, check=False)
        self.assertEqual(p.returncode, 2)

    def test_per_run_metric(self):
        self.write("s.base.1.jsonl", [row(1, 50.0), row(2, 40.0)])
        self.write("s.head.1.jsonl", [row(1, 50.5), row(2, 43.0)])
        p = subprocess.run([sys.executable, SCRIPT, "--metric", "median_us", self.dir.name],
                           capture_output=True, text=True, check=False)
        self.assertEqual(p.returncode, 0, p.stdout)
        # per-run: 53.5 / 53 = 1.009, 46 / 43 = 1.070; b2b would be 1.010, 1.075.
        self.assertIn("1.009", p.stdout)
        self.assertIn("head/base median_us median 1.040 (min 1.009, max 1.070), 1 within 2 %",
                      p.stdout)

    def test_a_failed_case_fails(self):
        self.write("s.base.1.jsonl", [row(1, 50.0)])
        self.write("s.head.1.jsonl", [row(1, 45.0, passed=False)])
        rc, out = self.run_script()
        self.assertEqual(rc, 1, out)
        self.assertIn("FAILED", out)
        self.assertTrue(self.summary(out, "s").endswith("all within tolerance: NO"))

    def test_a_case_on_one_side_fails(self):
        self.write("s.base.1.jsonl", [row(1, 50.0), row(2, 40.0)])
        self.write("s.head.1.jsonl", [row(1, 45.0)])
        rc, out = self.run_script()
        self.assertEqual(rc, 1, out)
        self.assertIn("1 cases on one side only", self.summary(out, "s"))

    def test_a_suite_with_one_side_fails(self):
        self.write("s.base.1.jsonl", [row(1, 50.0)])
        rc, out = self.run_script()
        self.assertEqual(rc, 1, out)
        self.assertEqual(self.summary(out, "s"), "ab s: only the base side ran")

    def test_no_suites_fails(self):
        self.write("unrelated.jsonl", [row(1, 50.0)])
        rc, out = self.run_script()
        self.assertEqual(rc, 1, out)
        self.assertIn("ab: no NAME.{base,head}.R.jsonl files", out)

    def test_cpu_rows_report_no_times(self):
        self.write("s.base.1.jsonl", [row(1, None)])
        self.write("s.head.1.jsonl", [row(1, None)])
        rc, out = self.run_script()
        self.assertEqual(rc, 0, out)
        self.assertIn("no GPU times", self.summary(out, "s"))


if __name__ == "__main__":
    unittest.main()
