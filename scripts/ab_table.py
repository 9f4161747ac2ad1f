#!/usr/bin/env python3
"""Compares the JSON lines of gpu_check.sh's `ab` step: for every suite NAME, the files
NAME.base.R.jsonl and NAME.head.R.jsonl (R = 1, 2, ...: repeats, run interleaved) of one
directory. Per case the time of each side is its fastest repeat's back-to-back time
(`b2b_us`, the judged figure; `--metric median_us` compares the per-run medians instead;
`--stat median` takes the median of the repeats instead of the fastest, steadier where
single runs move by several per cent, as large-M GEMMs under sustained load do: three
repeats or more); the ratio is head / base (< 1: the head is faster). Prints one table
per suite, then one summary line per suite (what gpu_check's summary shows):

  ab NAME: C cases, head/base b2b_us median R (min A, max B), W within 2 %, P plans changed, all within tolerance: yes

Exit status 1 when a case failed its accuracy check on either side, a side is missing a
case of the other, or no suite was found; 0 otherwise.

  scripts/ab_table.py [--metric b2b_us|median_us] [--stat fastest|median] DIR
"""
import collections
import json
import os
import re
import statistics
import sys

from bench_table import kernel_of

# case_env: the environment words of a case file's line (gpu_check.sh's ab_cases adds them,
# e.g. "BQMM_PLAN_OVERRIDE=tiles=1"), so that one shape under two overrides is two cases.
KEY_FIELDS = ("op", "activation_dtype", "bits", "zero_points", "act_quant", "b_scale_block_rows",
              "block_size", "bias", "m", "n", "k", "case_env")
FILE_RE = re.compile(r"^(?P<suite>.+)\.(?P<side>base|head)\.(?P<rep>\d+)\.jsonl$")


def case_key(row):
    return tuple(row.get(f) for f in KEY_FIELDS)


def keyed(rows):
    """(key, row) of one run's rows, the key case_key and the row's occurrence among the
    run's rows of that case_key (cases run in file order, so the n-th occurrence is the
    same case file line in every repeat): no two lines merge into one case."""
    seen = collections.Counter()
    for r in rows:
        k = case_key(r)
        yield k + (seen[k],), r
        seen[k] += 1


def case_label(row):
    zp = row.get("zero_points")
    bits = row.get("bits")
    parts = [row.get("op", "?"), row.get("activation_dtype", "?")]
    if bits is not None:
        parts.append("int%d" % bits)
    if zp not in (None, "none"):
        parts.append("zp=" + zp)
    act_quant = row.get("act_quant")
    if act_quant not in (None, "none"):
        parts.append("act=" + act_quant)
    if row.get("b_scale_block_rows") not in (None, 1):
        parts.append("scale_rows=%s" % row.get("b_scale_block_rows"))
    parts.append("bs=%s" % row.get("block_size"))
    parts.append("M=%s N=%s K=%s" % (row.get("m"), row.get("n"), row.get("k")))
    if row.get("case_env"):
        parts.append("[%s]" % row["case_env"])
    return " ".join(str(p) for p in parts)


def plan_short(row):
    """The kernel a case ran (bench_table.kernel_of) and its K split; off the GEMV paths,
    its path with the plan's tile height, K split, 'halves' where the block takes K in
    halves (tile_n=64) and 'pdl' where it launches as a programmatic dependent (a forced
    launch form is a changed plan)."""
    plan = row.get("plan") or ""
    split = re.search(r"k_split=(\d+)", plan)
    kernel = kernel_of(row)
    if kernel is None:
        tile = re.search(r"tile_m=(\d+)", plan)
        label = str(row.get("path", "-")) + (" t" + tile.group(1) if tile else "")
        label += " k" + split.group(1) if split else ""
        label += " halves" if re.search(r"tile_n=64\b", plan) else ""
        return label + (" pdl" if "dependent_launch=yes" in plan else "")
    return kernel + (" k%s" % split.group(1) if split else "")


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


STATS = {"fastest": min, "median": statistics.median}


def compare(suite, sides, metric, stat="fastest"):
    """sides: {"base": [rows of each repeat], "head": [...]} -> (lines, summary, ok); each
    side's time of a case is `stat` (STATS) over its repeats."""
    ok = True
    best = {}
    for side, repeats in sides.items():
        cases = collections.OrderedDict()
        for rows in repeats:
            for key, r in keyed(rows):
                cases.setdefault(key, []).append(r)
        best[side] = cases
    keys = list(best["head"].keys())
    missing = set(best["base"]) ^ set(best["head"])
    if missing:
        ok = False
    lines = []
    ratios = []
    changed = 0
    all_passed = True
    of = "" if stat == "fastest" else " (%s)" % stat
    header = ("case", "base " + metric + of, "head " + metric + of, "head/base", "base repeats",
              "head repeats", "kernel")
    table = [header]
    for key in keys:
        if key not in best["base"]:
            continue
        b_rows, h_rows = best["base"][key], best["head"][key]
        passed = all(r.get("passed") for r in b_rows + h_rows)
        all_passed &= passed
        b_times = [r[metric] for r in b_rows if r.get(metric) is not None]
        h_times = [r[metric] for r in h_rows if r.get(metric) is not None]
        b_plan, h_plan = plan_short(b_rows[0]), plan_short(h_rows[0])
        plan = h_plan if b_plan == h_plan else "%s -> %s" % (b_plan, h_plan)
        changed += b_plan != h_plan
        if b_times and h_times:
            b, h = STATS[stat](b_times), STATS[stat](h_times)
            ratio = h / b
            ratios.append(ratio)
            cells = ("%.1f" % b, "%.1f" % h, "%.3f" % ratio)
        else:  # no GPU timing (CPU fallback): accuracy only
            cells = ("-", "-", "-")
        label = case_label(h_rows[0]) + (" #%d" % (key[-1] + 1) if key[-1] else "")
        table.append((label + ("" if passed else "  FAILED"),) + cells +
                     (" ".join("%.1f" % t for t in b_times) or "-",
                      " ".join("%.1f" % t for t in h_times) or "-", plan))
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines.append("== ab %s" % suite)
    for row in table:
        lines.append("  ".join(v.ljust(w) if i in (0, 6) else v.rjust(w)
                               for i, (v, w) in enumerate(zip(row, widths))).rstrip())
    if ratios:
        within = sum(1 for r in ratios if abs(r - 1) <= 0.02)
        timing = "head/base %s%s median %.3f (min %.3f, max %.3f), %d within 2 %%" % (
            metric, of, statistics.median(ratios), min(ratios), max(ratios), within)
    else:
        timing = "no GPU times"
    summary = "ab %s: %d cases, %s, %d plans changed, all within tolerance: %s" % (
        suite, len(table) - 1, timing, changed, "yes" if all_passed else "NO")
    if missing:
        summary += ", %d cases on one side only" % len(missing)
    return lines, summary, ok and all_passed


def main(argv):
    choices = {"--metric": ("b2b_us", "median_us"), "--stat": tuple(STATS)}
    chosen = {"--metric": "b2b_us", "--stat": "fastest"}
    while len(argv) >= 3 and argv[0] in choices and argv[1] in choices[argv[0]]:
        chosen[argv[0]] = argv[1]
        argv = argv[2:]
    metric, stat = chosen["--metric"], chosen["--stat"]
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    directory = argv[0]
    suites = collections.OrderedDict()
    for name in sorted(os.listdir(directory)):
        m = FILE_RE.match(name)
        if m:
            suites.setdefault(m.group("suite"), {"base": {}, "head": {}})[m.group("side")][
                int(m.group("rep"))] = os.path.join(directory, name)
    ok = bool(suites)
    summaries = []
    for suite, sides in suites.items():
        if not sides["base"] or not sides["head"]:
            summaries.append("ab %s: only the %s side ran" % (suite, "head" if sides["head"] else "base"))
            ok = False
            continue
        loaded = {side: [load(p) for _, p in sorted(files.items())] for side, files in sides.items()}
        lines, summary, suite_ok = compare(suite, loaded, metric, stat)
        print("\n".join(lines))
        print()
        summaries.append(summary)
        ok &= suite_ok
    if not suites:
        summaries.append("ab: no NAME.{base,head}.R.jsonl files in %s" % directory)
    print("\n".join(summaries))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
