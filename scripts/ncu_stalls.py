#!/usr/bin/env python3
"""Where a kernel's warps wait, instruction by instruction.

Reads what Nsight Compute prints for one profiled launch with

    ncu --section SourceCounters --section WarpStateStats \\
        --metrics group:smsp__pcsamp_warp_stall_reasons \\
        --page source --print-source sass --csv ...

(anything before its "Kernel Name" line, such as the profiled program's own output, is
skipped) and prints the kernel's warp-state samples: their share by stall reason (the
`stall_*` columns, all samples, issued or not; `other`: the samples of reasons the page
has no column for, such as waits on wgmma results) and the instructions that hold the
most samples, each with its two largest reasons. `--summary` prints one line instead (the
reasons of 5 % or more and the top instruction), as scripts/gpu_check.sh's ncu step puts
it in its summary.

    scripts/ncu_stalls.py REPORT.csv [--top N] [--summary]

Exit status 1 when the report holds no source table (ncu profiled nothing, or printed
another page)."""
import argparse
import csv
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"


def read_table(lines):
    """(kernel name, header, rows) of the first source table in `lines`, or None."""
    kernel = None
    rows = list(csv.reader(lines))
    for i, row in enumerate(rows):
        if row and row[0] == "Kernel Name":
            kernel = row[1] if len(row) > 1 else ""
        elif row and row[0] == "Address" and SAMPLES in row:
            header = row
            body = []
            for r in rows[i + 1:]:
                if len(r) != len(header):
                    break
                body.append(r)
            return kernel, header, body
    return None


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def reasons(header):
    """The stall-reason columns (all samples): stall_long_sb -> long_sb."""
    return [(i, name[len("stall_"):]) for i, name in enumerate(header)
            if name.startswith("stall_") and "(Not Issued)" not in name]


def row_reasons(row, header):
    """[(reason, samples)] of one instruction, `other` for the samples no column holds."""
    counts = [(name, number(row[i])) for i, name in reasons(header)]
    other = number(row[header.index(SAMPLES)]) - sum(v for _, v in counts)
    return counts + [("other", max(other, 0.0))]


def analyze(header, body, top):
    """Total samples, [(reason, share)] in decreasing order, and the `top` instructions as
    (share, source, [(reason, samples), (reason, samples)])."""
    col = header.index(SAMPLES)
    source = header.index("Source")
    total = sum(number(r[col]) for r in body)
    if total == 0:
        return 0, [], []
    sums = {}
    for r in body:
        for name, v in row_reasons(r, header):
            sums[name] = sums.get(name, 0.0) + v
    by_reason = sorted(((name, v / total) for name, v in sums.items()), key=lambda x: -x[1])
    busiest = sorted(body, key=lambda r: -number(r[col]))[:top]
    top_rows = []
    for r in busiest:
        largest = sorted(row_reasons(r, header), key=lambda x: -x[1])[:2]
        top_rows.append((number(r[col]) / total, " ".join(r[source].split()), largest))
    return total, by_reason, top_rows


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", help="ncu's --page source --csv output ('-': standard input)")
    ap.add_argument("--top", type=int, default=20, help="instructions listed (default 20)")
    ap.add_argument("--summary", action="store_true", help="one line")
    args = ap.parse_args(argv)
    stream = sys.stdin if args.report == "-" else open(args.report, newline="")
    with stream:
        table = read_table(stream.read().splitlines())
    if table is None:
        print("no source table (ncu --page source --csv with warp-state sampling) in " + args.report)
        return 1
    kernel, header, body = table
    total, by_reason, top_rows = analyze(header, body, max(args.top, 1))
    if total == 0:
        print("no warp-state samples in " + args.report)
        return 1
    if args.summary:
        shares = ", ".join(f"{name} {share * 100:.1f} %" for name, share in by_reason if share >= 0.05)
        share, src, largest = top_rows[0]
        print(f"{shares}; top {share * 100:.1f} % `{src}` ({largest[0][0]})")
        return 0
    print(f"kernel: {kernel}")
    print(f"samples: {total:.0f} over {len(body)} instructions")
    print("by reason: " + ", ".join(f"{name} {share * 100:.1f} %" for name, share in by_reason
                                    if share >= 0.01))
    print(f"top {len(top_rows)} instructions (share of all samples; the two largest reasons, samples):")
    for share, src, largest in top_rows:
        print(f"  {share * 100:5.1f} %  {src:60s}  " + ", ".join(f"{n} {v:.0f}" for n, v in largest))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
