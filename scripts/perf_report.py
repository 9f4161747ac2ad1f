#!/usr/bin/env python3
"""Writes the measured tables of docs/PERF.md from bqmm-profile's JSON lines.

    python3 scripts/perf_report.py DIR [--doc PATH] [--print] [--update]

DIR holds the profiler's `bench_*.jsonl` files as scripts/gpu_check.sh's bench step writes
them (one JSON object per case). Each file becomes one table, with the GPU, the date and
the profiler command that produced it stated above it; rows are sorted by shape (N x K),
then M, then dtype. The tables replace everything between the lines

    <!-- perf-report:begin -->
    <!-- perf-report:end -->

of the document (default: docs/PERF.md of this repository); everything outside the
markers is kept byte for byte. --print writes the generated section to stdout instead.
--update replaces only the tables whose titles DIR's files make (a suite measured again)
and keeps the document's other tables as they are, each with its own date and command;
a table with a new title goes after them.
Exit codes: 0 written, 1 no or unreadable input, 2 bad arguments or markers.
"""
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_table import kernel_of  # noqa: E402  (one definition of the kernel names)

BEGIN = "<!-- perf-report:begin -->"
END = "<!-- perf-report:end -->"
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DTYPE_ORDER = {"fp32": 0, "fp16": 1, "bf16": 2}
HEADER = ["shape (N x K)", "M", "dtype", "path", "b2b us", "per-run us",
          "cuBLAS BF16 b2b us", "speedup b2b", "% of copy bw b2b", "floor b2b us",
          "% of floor b2b", "accuracy passed"]


def fmt(v, spec):
    if v is None:
        return "-"
    try:
        return format(v, spec)
    except (TypeError, ValueError):
        return str(v)


def short_path(row):
    """The path in a few characters: the decode GEMV's kernel (bench_table.kernel_of:
    fma, regs, tma, window, lines, lines x2), 'mma' for FP8's tensor-core GEMV, the K
    split, a 168-register bound and above 8 rows the row groups of 16 ('rg<G>') where the
    plan has them; the fused GEMM's mainloop
    ('fused' for mma.sync, 'wgmma') or FP8's W8A8 GEMM ('w8a8'), tile height and K split
    ('c' where a thread-block cluster sums it, 'h' where the block's two consumer
    warpgroups take K in halves: plan tile_n=64);
    the mixed-input GEMM ('mixed'), its tile height and 'sk' where it runs stream-K;
    otherwise the path name."""
    path = str(row.get("path") or "-")
    plan = str(row.get("plan") or "")
    if path in ("fused_gemm", "w8a8_gemm"):  # "fused|wgmma|w8a8 t<tile_m> k<k_split>[c|h]"
        tile = re.search(r"tile_m=(\d+)", plan)
        split = re.search(r"k_split=(\d+)", plan)
        loop = "w8a8" if path == "w8a8_gemm" else "wgmma" if "mainloop=wgmma" in plan else "fused"
        cluster = "c" if "k_reduce=cluster" in plan else ""  # the split summed in a cluster
        halves = "h" if re.search(r"tile_n=64\b", plan) else ""  # K halves in the block
        return "%s t%s k%s%s%s" % (loop, tile.group(1) if tile else "?", split.group(1) if split else "?",
                                   cluster, halves)
    if path == "w8a8_cublaslt":  # cuBLASLt's block-scaled FP8 GEMM (one weight scale per 128 rows: r128)
        return "w8a8 cublaslt" + (" r128" if "weight_scales=per_128_rows" in plan else "")
    if path == "mixed_gemm":  # "mixed t<tile_m>[ sk]"
        tile = re.search(r"tile_m=(\d+)", plan)
        stream_k = " sk" if "schedule=stream_k" in plan else ""
        return "mixed t%s%s" % (tile.group(1) if tile else "?", stream_k)
    kernel = kernel_of(row)
    if kernel is None:
        return {"dequant_gemm": "dequant + cuBLAS", "bias_only": "bias only"}.get(path, path)
    name = kernel
    if path == "gemv_mma":
        name = "mma " + kernel
    m = re.search(r"k_split=(\d+)", plan)
    if m and kernel != "fma":
        name += " k" + m.group(1)
    if re.search(r"regs=168\b", plan):
        name += " r168"
    groups = re.search(r"row_groups=(\d+)", plan)
    if groups:
        name += " rg" + groups.group(1)
    return name


def table_row(r):
    return ["%s x %s" % (r.get("n"), r.get("k")), str(r.get("m")),
            str(r.get("activation_dtype")), short_path(r),
            fmt(r.get("b2b_us"), ".1f"), fmt(r.get("median_us"), ".1f"),
            fmt(r.get("cublas_bf16_b2b_us"), ".1f"),
            fmt(r.get("b2b_speedup_vs_cublas"), ".2f"),
            fmt(r.get("b2b_pct_of_copy_bw"), ".0f"),
            fmt(r.get("floor_b2b_us"), ".1f"),
            fmt(r.get("b2b_pct_of_floor"), ".0f"),
            "-" if r.get("passed") is None else ("yes" if r.get("passed") else "NO")]


def sort_key(r):
    n, k = r.get("n") or 0, r.get("k") or 0
    return (n * k, n, k, r.get("m") or 0, DTYPE_ORDER.get(r.get("activation_dtype"), 9),
            str(r.get("plan")))


def suite_of(stem, op):
    """gpu_check's file names: bench_<suite>, bench_w8a8_<static|dynamic>_[rows<R>_]<suite>
    (FP8 with the activation quantized, weight scales shared by R rows),
    bench_nbits<bits>_<suite>[_zp_<kind>][_bs<B>], each with _prepacked after it for a run with
    --prepack."""
    s = stem[len("bench_"):] if stem.startswith("bench_") else stem
    s = re.sub(r"_prepacked$", "", s)
    if op == "fp8":
        s = re.sub(r"^w8a8_(static|dynamic)_(rows\d+_)?", "", s)
    if op == "nbits":
        s = re.sub(r"^nbits\d+_", "", s)
        s = re.sub(r"_bs\d+$", "", s)
        s = re.sub(r"_zp_\w+$", "", s)
    return s


def distinct(rows, field):
    return sorted({str(r.get(field)) for r in rows if r.get(field) is not None})


def title_and_command(stem, rows):
    r0 = rows[0]
    op = r0.get("op")
    suite = suite_of(stem, op)
    bs = "/".join(distinct(rows, "block_size")) or "?"
    if op == "nbits":
        bits = "/".join(distinct(rows, "bits")) or "?"
        zp = "/".join(distinct(rows, "zero_points")) or "none"
        title = "NBitsMatMul %s-bit, %s, block %s" % (bits, suite, bs)
        if zp != "none":
            title += ", %s zero points" % zp
        cmd = ("bqmm-profile --op nbits --bits %s --zero-points %s --block-size %s --suite %s"
               % (bits, zp, bs, suite))
    else:
        title = "Fp8WeightMatMul, %s, block %s" % (suite, bs)
        cmd = "bqmm-profile --op %s --suite %s" % (op, suite)
        if bs != "128":
            cmd += " --block-size " + bs
    act = distinct([r for r in rows if r.get("act_quant") not in (None, "none")], "act_quant")
    if act:
        title += ", activation quantized (%s)" % "/".join(act)
        cmd += " --act-quant " + "/".join(act)
    elif any(r.get("w8a8") for r in rows):
        title += ", W8A8"
    scale_rows = "/".join(distinct([r for r in rows if r.get("b_scale_block_rows", 1) != 1],
                                   "b_scale_block_rows"))
    if scale_rows:
        title += ", weight scales per %s rows" % scale_rows
        cmd += " --b-scale-block-rows " + scale_rows
    if any(r.get("prepacked") for r in rows):
        title += ", prepacked scales"
        cmd += " --prepack"
    if any(r.get("bias") for r in rows):
        title += ", bias"
    dtypes = distinct(rows, "activation_dtype")
    if len(dtypes) == 1:
        cmd += " --activation-dtype " + dtypes[0]
    return title, cmd + " --json %s.jsonl" % stem


def gpu_line(rows):
    r0 = rows[0]
    gpu = "/".join(distinct(rows, "device")) or "unknown GPU"
    extra = []
    if r0.get("sm"):
        extra.append("sm%s" % r0["sm"])
    if r0.get("num_sms"):
        extra.append("%s SMs" % r0["num_sms"])
    bw = [r.get("copy_bw_tbps") for r in rows if r.get("copy_bw_tbps")]
    if bw:
        extra.append("measured copy bandwidth %.2f TB/s" % (sum(bw) / len(bw)))
    dates = distinct(rows, "date")
    date = dates[0] if len(dates) == 1 else ("%s to %s" % (dates[0], dates[-1]) if dates else "?")
    return "%s (%s); measured %s" % (gpu, ", ".join(extra), date)


HEAD_LINES = [BEGIN, "<!-- Generated by `python3 scripts/perf_report.py DIR`; edits between these "
              "markers are overwritten. -->", ""]


def tables(files):
    """(title, lines) of each file's table, in the files' order."""
    out = []
    for path, rows in files:
        stem = os.path.splitext(os.path.basename(path))[0]
        title, cmd = title_and_command(stem, rows)
        failed = sum(1 for r in rows if r.get("passed") is False)
        t = ["### %s" % title, "",
             "%s. Command: `%s`. %d cases%s." % (
                 gpu_line(rows), cmd, len(rows),
                 "" if not failed else ", **%d failed the accuracy check**" % failed),
             "", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        t += ["| " + " | ".join(table_row(r)) + " |" for r in sorted(rows, key=sort_key)]
        t.append("")
        out.append((title, t))
    return out


def section(files):
    out = list(HEAD_LINES)
    for _, t in tables(files):
        out += t
    out.append(END)
    return "\n".join(out) + "\n"


def marked_tables(text):
    """(title, lines) of each table between the document's markers, in order; None if the
    markers are not one begin line followed by one end line."""
    lines = text.splitlines()
    span = marker_span(lines)
    if span is None:
        return None
    out = []
    for line in lines[span[0] + 1:span[1]]:
        if line.startswith("### "):
            out.append((line[4:], [line]))
        elif out:
            out[-1][1].append(line)
    return out


def updated_section(text, files):
    """The marked section with DIR's tables in place of the document's tables of the same
    titles, the others kept; None on bad markers."""
    old = marked_tables(text)
    if old is None:
        return None
    new = tables(files)
    fresh = dict(new)
    out = list(HEAD_LINES)
    for title, t in old:
        out += fresh.pop(title, t)
    for title, t in new:
        if title in fresh:
            out += t
    out.append(END)
    return "\n".join(out) + "\n"


def file_key(item):
    """Tables in a fixed order: FP8 first (decode, prefill, then other suites), then
    NBits 8-bit before 4-bit, without zero points before packed before typed, then by
    block size."""
    path, rows = item
    r0 = rows[0]
    op = r0.get("op")
    stem = os.path.splitext(os.path.basename(path))[0]
    suite = suite_of(stem, op)
    return ({"fp8": 0, "nbits": 1}.get(op, 2), -(r0.get("bits") or 0),
            {"smoke": 0, "decode": 1, "prefill": 2}.get(suite, 3),
            {"none": 0, "packed": 1, "typed": 2}.get(r0.get("zero_points"), 0),
            r0.get("block_size") or 0, stem)


def read_files(directory):
    paths = glob.glob(os.path.join(directory, "bench_*.jsonl"))
    files = []
    for p in paths:
        with open(p) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        if rows:
            files.append((p, rows))
    return sorted(files, key=file_key)


def marker_span(lines):
    """(begin, end) line indices of the markers; None unless one begin line is followed
    by one end line."""
    begins = [i for i, l in enumerate(lines) if l.strip() == BEGIN]
    ends = [i for i, l in enumerate(lines) if l.strip() == END]
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        return None
    return begins[0], ends[0]


def replace_section(text, new_section):
    """The document with the marked section replaced; None on bad markers."""
    lines = text.splitlines(keepends=True)
    span = marker_span(lines)
    if span is None:
        return None
    return "".join(lines[:span[0]]) + new_section + "".join(lines[span[1] + 1:])


def main(argv):
    args, doc, to_stdout, update = [], os.path.join(REPO, "docs", "PERF.md"), False, False
    it = iter(argv)
    for a in it:
        if a == "--doc":
            doc = next(it, None)
            if doc is None:
                print("perf_report: --doc needs a path", file=sys.stderr)
                return 2
        elif a == "--print":
            to_stdout = True
        elif a == "--update":
            update = True
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        elif a.startswith("-"):
            print("perf_report: unknown option %s" % a, file=sys.stderr)
            return 2
        else:
            args.append(a)
    if len(args) != 1:
        print("usage: perf_report.py DIR [--doc PATH] [--print] [--update]", file=sys.stderr)
        return 2
    try:
        files = read_files(args[0])
    except (OSError, ValueError) as e:
        print("perf_report: %s" % e, file=sys.stderr)
        return 1
    if not files:
        print("perf_report: no bench_*.jsonl with rows in %s" % args[0], file=sys.stderr)
        return 1
    text = None
    if update or not to_stdout:
        with open(doc) as f:
            text = f.read()
    new = updated_section(text, files) if update else section(files)
    if new is None:
        out = None
    elif to_stdout:
        sys.stdout.write(new)
        return 0
    else:
        out = replace_section(text, new)
    if out is None:
        print("perf_report: %s needs exactly one line '%s' followed by one line '%s'"
              % (doc, BEGIN, END), file=sys.stderr)
        return 2
    with open(doc, "w") as f:
        f.write(out)
    n = sum(len(rows) for _, rows in files)
    print("perf_report: %d tables, %d rows written to %s" % (len(files), n, doc))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
