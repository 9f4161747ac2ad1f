#!/usr/bin/env python3
"""Prints bqmm-profile JSON lines (one or more files) as one compact table, for the
summaries of gpu_check.sh and for docs/PERF.md."""
import json
import sys


def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "-"


def main(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            rows += [json.loads(line) for line in f if line.strip()]
    head = ("op", "dtype", "M", "N", "K", "path", "rel_err", "ok", "us", "TB/s", "%copy",
            "TFLOP/s", "cublas_us", "speedup", "dq_%copy")
    print("{:<5} {:<5} {:>5} {:>6} {:>6} {:<13} {:>8} {:>3} {:>9} {:>6} {:>6} {:>8} {:>9} {:>7} {:>8}".format(*head))
    for r in rows:
        print("{:<5} {:<5} {:>5} {:>6} {:>6} {:<13} {:>8} {:>3} {:>9} {:>6} {:>6} {:>8} {:>9} {:>7} {:>8}".format(
            r.get("op", "?"), r.get("activation_dtype", "?"), r.get("m"), r.get("n"), r.get("k"),
            str(r.get("path")), fmt(r.get("rel_err"), ".1e"), "yes" if r.get("passed") else "NO",
            fmt(r.get("median_us"), ".1f"), fmt(r.get("weight_tbps"), ".2f"),
            fmt(r.get("pct_of_copy_bw"), ".0f"), fmt(r.get("tflops"), ".1f"),
            fmt(r.get("cublas_bf16_us"), ".1f"), fmt(r.get("speedup_vs_cublas"), ".2f"),
            fmt(r.get("dequant_pct_of_copy_bw"), ".0f")))


if __name__ == "__main__":
    main(sys.argv[1:])
