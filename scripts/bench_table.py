#!/usr/bin/env python3
"""Prints bqmm-profile JSON lines (one or more files) as one compact table, for the
summaries of gpu_check.sh and (with --markdown) for docs/PERF.md."""
import json
import sys

COLUMNS = [  # header, JSON field, format
    ("op", "op", "s"), ("dtype", "activation_dtype", "s"), ("bits", "bits", "d"),
    ("bs", "block_size", "d"), ("zp", "zero_points", "s"), ("algo", "gemv_algo", "d"),
    ("M", "m", "d"), ("N", "n", "d"), ("K", "k", "d"), ("path", "path", "s"),
    ("kernel", "kernel", "s"),
    ("rel_err", "rel_err", ".1e"), ("ok", "passed", "ok"), ("us", "median_us", ".1f"),
    ("TB/s", "weight_tbps", ".2f"), ("%copy", "pct_of_copy_bw", ".0f"),
    ("TFLOP/s", "tflops", ".1f"), ("cuBLAS us", "cublas_bf16_us", ".1f"),
    ("speedup", "speedup_vs_cublas", ".2f"), ("b2b us", "b2b_us", ".1f"),
    ("b2b %copy", "b2b_pct_of_copy_bw", ".0f"), ("b2b speedup", "b2b_speedup_vs_cublas", ".2f"),
    ("dequant %copy", "dequant_pct_of_copy_bw", ".0f"),
]


def cell(row, field, spec):
    v = row.get(field)
    if spec == "ok":
        return "-" if v is None else ("yes" if v else "NO")
    if v is None:
        return "-"
    if spec == "s":
        return str(v)
    try:
        return format(v, spec)
    except (TypeError, ValueError):
        return str(v)


def kernel_of(row):
    """The GEMV kernel a decode case ran, from its printed plan: the CUDA-core kernel
    ("fma"), a tensor-core tile with line loads ("lines": FP8's, "lines x2" with two
    tiles per warp, or N-bit's whole-window kernel), N-bit's whole-window kernel without them ("window"), TMA tiles ("tma") or
    the register-load tensor-core tile ("regs"); None off the GEMV paths."""
    plan = row.get("plan") or ""
    if not str(row.get("path", "")).startswith("gemv"):
        return None
    for key, name in (("fma=1", "fma"), ("lines=1", "lines"), ("window=1", "window"), ("tma=1", "tma")):
        if key + ";" in plan or key + "}" in plan:
            return name + " x2" if name == "lines" and "tiles=2" in plan else name
    return "fma" if row.get("path") == "gemv_fma" else "regs"


def main(argv):
    markdown = "--markdown" in argv
    paths = [a for a in argv if a != "--markdown"]
    rows = []
    for path in paths:
        with open(path) as f:
            rows += [json.loads(line) for line in f if line.strip()]
    for r in rows:
        r["kernel"] = kernel_of(r)
    # Only the columns some row has.
    cols = [c for c in COLUMNS if any(r.get(c[1]) is not None for r in rows)]
    table = [[c[0] for c in cols]] + [[cell(r, c[1], c[2]) for c in cols] for r in rows]
    if markdown:
        print("| " + " | ".join(table[0]) + " |")
        print("|" + "---|" * len(cols))
        for t in table[1:]:
            print("| " + " | ".join(t) + " |")
        return
    widths = [max(len(t[i]) for t in table) for i in range(len(cols))]
    for t in table:
        print("  ".join(v.rjust(w) for v, w in zip(t, widths)))


if __name__ == "__main__":
    main(sys.argv[1:])
