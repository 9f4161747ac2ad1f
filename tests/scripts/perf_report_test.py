#!/usr/bin/env python3
"""Tests of scripts/perf_report.py (the tables of docs/PERF.md), run as a program on JSON
lines and a document written here: the rows it writes, their order, the text outside the
markers it must keep, and its failure exits are pinned. Registered with CTest
(tests/CMakeLists.txt) where python3 exists."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "perf_report.py")

BEFORE = "# Title\n\nHand-written method text.\n\n"
AFTER = "\n## Next steps\n\n* an idea not yet tried\n"
STALE = "<!-- perf-report:begin -->\nOLD TABLE ROW\n<!-- perf-report:end -->\n"


def row(op, m, n, k, dtype="fp16", path="gemv_mma", plan="k_split=2; tma=0; lines=1; tiles=1}",
        b2b=10.0, median=13.0, cublas=20.0, passed=True, **extra):
    r = {"op": op, "activation_dtype": dtype, "m": m, "n": n, "k": k, "block_size": 128,
         "bias": False, "path": path,
         "plan": ("Fp8MatMulPlan{path=%s; sm90/132SMs; " % path) + plan,
         "b2b_us": b2b, "median_us": median, "cublas_bf16_b2b_us": cublas,
         "b2b_speedup_vs_cublas": cublas / b2b, "b2b_pct_of_copy_bw": 81.4,
         "pct_of_copy_bw": 70.0, "copy_bw_tbps": 4.26, "device": "NVIDIA H200", "sm": 90,
         "num_sms": 132, "date": "2026-12-01T08:00:00Z", "passed": passed}
    if op == "nbits":
        r.update({"bits": 4, "zero_points": "packed", "path": "gemv",
                  "plan": "NBitsMatMulPlan{path=gemv; sm90/132SMs; algo=0; rows=8; " + plan})
    r.update(extra)
    return r


class PerfReportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.data = os.path.join(self.tmp.name, "data")
        os.mkdir(self.data)
        self.doc = os.path.join(self.tmp.name, "PERF.md")
        with open(self.doc, "w") as f:
            f.write(BEFORE + STALE + AFTER)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, rows):
        with open(os.path.join(self.data, name), "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")

    def run_script(self, *extra):
        p = subprocess.run([sys.executable, SCRIPT, self.data, "--doc", self.doc] + list(extra),
                           capture_output=True, text=True, check=False)
        return p.returncode, p.stdout + p.stderr

    def doc_text(self):
        with open(self.doc) as f:
            return f.read()

    def table_rows(self, text):
        return [l for l in text.splitlines() if l.startswith("| ") and not l.startswith("| shape")]

    def write_suites(self):
        # Deliberately out of order: the script sorts by shape, then M, then dtype.
        self.write("bench_decode.jsonl", [
            row("fp8", 2, 8192, 8192, b2b=19.6, median=22.4, cublas=34.2),
            row("fp8", 1, 4096, 4096, path="gemv_fma", plan="rows_per_warp=1; workspace=0B}",
                b2b=6.3, median=9.2, cublas=12.5, floor_b2b_us=5.1, b2b_pct_of_floor=80.95),
            row("fp8", 1, 8192, 8192, dtype="bf16", path="gemv_fma",
                plan="rows_per_warp=1; workspace=0B}", b2b=17.6, median=20.4, cublas=34.0),
            row("fp8", 1, 8192, 8192, path="gemv_fma", plan="rows_per_warp=1; workspace=0B}",
                b2b=17.5, median=20.3, cublas=34.1, passed=False),
        ])
        self.write("bench_nbits4_decode_zp_packed.jsonl", [
            row("nbits", 1, 28672, 8192, b2b=40.5, median=43.3, cublas=107.0,
                plan="k_split=4; tma=0; window=1; lines=1; tiles=2; regs=128; workspace=0B}"),
        ])
        self.write("bench_w8a8_static_prefill.jsonl", [
            row("fp8", 256, 8192, 8192, path="w8a8_gemm", b2b=61.0, median=65.0, cublas=49.6,
                plan="act_scales=static; mainloop=wgmma; tile_m=128; tile_n=128; stages=6; k_split=1}",
                act_quant="static", w8a8=True),
        ])
        self.write("not_a_bench.jsonl", [row("fp8", 8, 1, 1)])  # not bench_*: ignored

    def test_tables_rows_and_text_outside_markers(self):
        self.write_suites()
        rc, out = self.run_script()
        self.assertEqual(rc, 0, out)
        text = self.doc_text()
        self.assertTrue(text.startswith(BEFORE), text)
        self.assertTrue(text.endswith(AFTER), text)
        self.assertNotIn("OLD TABLE ROW", text)
        self.assertEqual(text.count("<!-- perf-report:begin -->"), 1)
        self.assertEqual(text.count("<!-- perf-report:end -->"), 1)
        rows = self.table_rows(text)
        self.assertEqual(rows, [
            "| 4096 x 4096 | 1 | fp16 | fma | 6.3 | 9.2 | 12.5 | 1.98 | 81 | 5.1 | 81 | yes |",
            "| 8192 x 8192 | 1 | fp16 | fma | 17.5 | 20.3 | 34.1 | 1.95 | 81 | - | - | NO |",
            "| 8192 x 8192 | 1 | bf16 | fma | 17.6 | 20.4 | 34.0 | 1.93 | 81 | - | - | yes |",
            "| 8192 x 8192 | 2 | fp16 | mma lines k2 | 19.6 | 22.4 | 34.2 | 1.74 | 81 | - | - | yes |",
            "| 8192 x 8192 | 256 | fp16 | w8a8 t128 k1 | 61.0 | 65.0 | 49.6 | 0.81 | 81 | - | - | yes |",
            "| 28672 x 8192 | 1 | fp16 | lines x2 k4 | 40.5 | 43.3 | 107.0 | 2.64 | 81 | - | - | yes |",
        ])
        # One table per file, FP8 first, each with its GPU, date and command above it.
        fp8 = text.index("### Fp8WeightMatMul, decode, block 128")
        nb = text.index("### NBitsMatMul 4-bit, decode, block 128, packed zero points")
        self.assertLess(fp8, nb)
        self.assertIn("`bqmm-profile --op fp8 --suite decode --json bench_decode.jsonl`", text)
        self.assertIn("`bqmm-profile --op nbits --bits 4 --zero-points packed --block-size 128 "
                      "--suite decode --activation-dtype fp16 --json bench_nbits4_decode_zp_packed.jsonl`",
                      text)
        # FP8 with the activation quantized: its own table after FP8's, the mode in the
        # title and the command (one dtype: the command names it).
        w8 = text.index("### Fp8WeightMatMul, prefill, block 128, activation quantized (static)")
        self.assertLess(fp8, w8)
        self.assertLess(w8, nb)
        self.assertIn("`bqmm-profile --op fp8 --suite prefill --act-quant static --activation-dtype fp16 "
                      "--json bench_w8a8_static_prefill.jsonl`", text)
        self.assertEqual(text.count("NVIDIA H200 (sm90, 132 SMs"), 3)
        self.assertEqual(text.count("2026-12-01T08:00:00Z"), 3)
        self.assertIn("1 failed the accuracy check", text)

    def test_update_replaces_only_the_tables_measured_again(self):
        self.write_suites()
        rc, out = self.run_script()
        self.assertEqual(rc, 0, out)
        # The decode suite measured again, and one new suite: --update replaces the decode
        # table in place, keeps the other two byte for byte and puts the new one last.
        for name in os.listdir(self.data):
            os.remove(os.path.join(self.data, name))
        self.write("bench_decode.jsonl", [
            row("fp8", 1, 4096, 4096, path="gemv_fma", plan="rows_per_warp=1; workspace=0B}",
                b2b=5.9, median=8.8, cublas=12.4, date="2026-12-02T15:00:00Z"),
        ])
        self.write("bench_nbits8_decode.jsonl", [
            row("nbits", 1, 8192, 8192, b2b=17.0, median=20.0, cublas=34.0, bits=8,
                zero_points="none", date="2026-12-02T15:00:00Z"),
        ])
        before = self.doc_text()
        rc, out = self.run_script("--update")
        self.assertEqual(rc, 0, out)
        text = self.doc_text()
        self.assertTrue(text.startswith(BEFORE), text)
        self.assertTrue(text.endswith(AFTER), text)
        self.assertEqual(self.table_rows(text), [
            "| 4096 x 4096 | 1 | fp16 | fma | 5.9 | 8.8 | 12.4 | 2.10 | 81 | - | - | yes |",
            "| 8192 x 8192 | 256 | fp16 | w8a8 t128 k1 | 61.0 | 65.0 | 49.6 | 0.81 | 81 | - | - | yes |",
            "| 28672 x 8192 | 1 | fp16 | lines x2 k4 | 40.5 | 43.3 | 107.0 | 2.64 | 81 | - | - | yes |",
            "| 8192 x 8192 | 1 | fp16 | lines k2 | 17.0 | 20.0 | 34.0 | 2.00 | 81 | - | - | yes |",
        ])
        kept = before[before.index("### Fp8WeightMatMul, prefill"):before.index("<!-- perf-report:end -->")]
        self.assertIn(kept, text)
        self.assertEqual(text.count("2026-12-01T08:00:00Z"), 2)  # the two kept tables
        self.assertEqual(text.count("2026-12-02T15:00:00Z"), 2)
        self.assertLess(text.index("### Fp8WeightMatMul, decode"),
                        text.index("### NBitsMatMul 8-bit, decode"))
        self.assertLess(text.index("### NBitsMatMul 4-bit"), text.index("### NBitsMatMul 8-bit"))
        # Twice is the same.
        rc, out = self.run_script("--update")
        self.assertEqual(rc, 0, out)
        self.assertEqual(self.doc_text(), text)

    def test_gemm_path_labels(self):
        sys.path.insert(0, os.path.dirname(SCRIPT))
        import perf_report
        mixed = {"path": "mixed_gemm", "plan": "path=mixed_gemm; tile_m=256; tile_n=128; workspace=0B"}
        self.assertEqual(perf_report.short_path(mixed), "mixed t256")
        stream_k = {"path": "mixed_gemm", "plan": "path=mixed_gemm; tile_m=128; tile_n=128; schedule=stream_k"}
        self.assertEqual(perf_report.short_path(stream_k), "mixed t128 sk")
        fused = {"path": "fused_gemm", "plan": "mainloop=wgmma; tile_m=64; tile_n=128; stages=3; k_split=2"}
        self.assertEqual(perf_report.short_path(fused), "wgmma t64 k2")
        w8a8 = {"path": "w8a8_gemm", "plan": "mainloop=wgmma; tile_m=64; tile_n=128; stages=6; k_split=2; "
                "k_reduce=cluster; workspace=0B"}
        self.assertEqual(perf_report.short_path(w8a8), "w8a8 t64 k2c")
        halves = {"path": "w8a8_gemm", "plan": "mainloop=wgmma; tile_m=32; tile_n=64; stages=6; k_split=1; "
                  "workspace=0B"}
        self.assertEqual(perf_report.short_path(halves), "w8a8 t32 k1h")
        self.assertEqual(perf_report.short_path({"path": "dequant_gemm", "plan": ""}), "dequant + cuBLAS")
        group = {"path": "gemv", "plan": "window=1; lines=1; tiles=2; regs=128; row_groups=1; workspace=0B}"}
        self.assertEqual(perf_report.short_path(group), "lines x2 rg1")
        fp8_group = {"path": "gemv_mma", "plan": "k_split=8; tma=0; lines=1; tiles=1; row_groups=1; workspace=0B}"}
        self.assertEqual(perf_report.short_path(fp8_group), "mma lines k8 rg1")
        cublaslt = {"path": "w8a8_cublaslt", "plan": "act_scales=static; weight_scales=per_row; scales=per_run; workspace=0B}"}
        self.assertEqual(perf_report.short_path(cublaslt), "w8a8 cublaslt")
        cublaslt["plan"] = "act_scales=dynamic; weight_scales=per_128_rows; workspace=0B}"
        self.assertEqual(perf_report.short_path(cublaslt), "w8a8 cublaslt r128")

    def test_weight_scales_per_128_rows(self):
        # The W8A8 suites with b_scale_block_rows 128: the title and the command say so, and
        # cuBLASLt's GEMM's label says which weight scales it reads.
        self.write("bench_w8a8_dynamic_rows128_prefill.jsonl", [
            row("fp8", 1024, 8192, 8192, path="w8a8_cublaslt", b2b=123.3, median=127.0, cublas=195.7,
                plan="act_scales=dynamic; weight_scales=per_128_rows; lt_algo=0; workspace=0B}",
                act_quant="dynamic", b_scale_block_rows=128),
        ])
        rc, out = self.run_script()
        self.assertEqual(rc, 0, out)
        text = self.doc_text()
        self.assertIn("### Fp8WeightMatMul, prefill, block 128, activation quantized (dynamic), "
                      "weight scales per 128 rows", text)
        self.assertIn("`bqmm-profile --op fp8 --suite prefill --act-quant dynamic --b-scale-block-rows 128 "
                      "--activation-dtype fp16 --json bench_w8a8_dynamic_rows128_prefill.jsonl`", text)
        self.assertEqual(self.table_rows(text), [
            "| 8192 x 8192 | 1024 | fp16 | w8a8 cublaslt r128 | 123.3 | 127.0 | 195.7 | 1.59 | 81 | - | - | yes |"])

    def test_prepacked_scales(self):
        # A suite run with --prepack: its own table, the title and the command say so.
        self.write("bench_prefill_prepacked.jsonl", [
            row("fp8", 256, 8192, 8192, path="mixed_gemm", b2b=61.6, median=65.0, cublas=50.1,
                plan="tile_m=128; tile_n=128; schedule=persistent; scales=prepacked; workspace=0B}",
                prepacked=True),
        ])
        rc, out = self.run_script()
        self.assertEqual(rc, 0, out)
        text = self.doc_text()
        self.assertIn("### Fp8WeightMatMul, prefill, block 128, prepacked scales", text)
        self.assertIn("`bqmm-profile --op fp8 --suite prefill --prepack --activation-dtype fp16 "
                      "--json bench_prefill_prepacked.jsonl`", text)

    def test_second_run_is_identical(self):
        self.write_suites()
        self.assertEqual(self.run_script()[0], 0)
        first = self.doc_text()
        self.assertEqual(self.run_script()[0], 0)
        self.assertEqual(self.doc_text(), first)

    def test_missing_or_doubled_markers_fail_and_leave_the_doc(self):
        self.write_suites()
        for body in (BEFORE + AFTER, BEFORE + STALE + STALE + AFTER,
                     "<!-- perf-report:end -->\n<!-- perf-report:begin -->\n"):
            with open(self.doc, "w") as f:
                f.write(body)
            rc, out = self.run_script()
            self.assertEqual(rc, 2, out)
            self.assertEqual(self.doc_text(), body)

    def test_no_input_fails(self):
        rc, out = self.run_script()
        self.assertEqual(rc, 1, out)
        self.assertEqual(self.doc_text(), BEFORE + STALE + AFTER)


if __name__ == "__main__":
    unittest.main()
