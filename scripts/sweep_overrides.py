#!/usr/bin/env python3
"""Times each case of a case file under the planner and under each of a list of forced
plans (BQMM_PLAN_OVERRIDE, docs/DESIGN.md), in one build and one run: the way to find
where a planner rule leaves speed behind before writing one (an A/B then confirms it).

    scripts/sweep_overrides.py PROFILER CASES VARIANTS [--repeats N] [--margin PCT] [--out DIR]

CASES: one case per line, bqmm-profile's arguments for one shape (# starts a comment),
e.g. `--op nbits --bits 4 --zero-points packed --m 1 --n 28672 --k 4096`. VARIANTS:
`;`-separated overrides, e.g. "window=1,lines=1,tiles=2;tma=1"; the planner's own plan is
always the first column. Each (case, variant) runs REPEATS times (default 2) and keeps
the fastest `b2b_us`. One line per case: each column's time, the kernel and K split it
ran, and its time over the planner's; `*` marks a variant at least MARGIN % (default 3)
faster than the planner, FAIL an accuracy check that failed, `refused` an override the
planner refuses for that case (its message). The last line counts the marked cases.
Exit status 1 if a run failed otherwise (no JSON, a crash), else 0.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab_table import plan_short  # noqa: E402


def read_cases(path):
    cases = []
    with open(path) as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            if words:
                cases.append(words)
    return cases


def case_name(args):
    """A short name of a case from its profiler arguments."""
    def value(flag, default="-"):
        return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else default
    name = "%s %s" % (value("--op"), value("--activation-dtype", "fp16"))
    if value("--op") == "nbits":
        name += " int%s" % value("--bits", "4")
        zp = value("--zero-points", "none")
        if zp != "none":
            name += " zp=" + zp
    return name + " M=%s N=%s K=%s" % (value("--m"), value("--n"), value("--k"))


def run_once(profiler, args, override, out_dir):
    """One run: (b2b_us, kernel label, passed) or ("refused", message) or ("error", message)."""
    env = dict(os.environ)
    env.pop("BQMM_PLAN_OVERRIDE", None)
    if override:
        env["BQMM_PLAN_OVERRIDE"] = override
    fd, js = tempfile.mkstemp(suffix=".jsonl", dir=out_dir)
    os.close(fd)
    os.remove(js)
    p = subprocess.run([profiler] + args + ["--json", js], env=env, capture_output=True, text=True)
    text = (p.stdout + p.stderr).strip()
    rows = []
    if os.path.exists(js):
        with open(js) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        os.remove(js)
    if not rows:
        last = text.splitlines()[-1] if text else "rc=%d" % p.returncode
        kind = "refused" if "plan override" in text else "error"
        return (kind, last)
    row = rows[0]
    if row.get("b2b_us") is None:
        return ("error", "no b2b_us (path %s: not timed on a GPU)" % row.get("path"))
    return (float(row["b2b_us"]), plan_short(row), bool(row.get("passed", True)))


def best_of(profiler, args, override, repeats, out_dir):
    best = None
    for _ in range(repeats):
        r = run_once(profiler, args, override, out_dir)
        if isinstance(r[0], str):
            return r
        if best is None or r[0] < best[0]:
            best = r
    return best


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("profiler")
    ap.add_argument("cases")
    ap.add_argument("variants")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--margin", type=float, default=3.0)
    ap.add_argument("--out", default=tempfile.gettempdir())
    a = ap.parse_args(argv)
    if a.repeats < 1:
        ap.error("--repeats must be at least 1")
    profiler, cases_path, variants_text = a.profiler, a.cases, a.variants
    repeats, margin, out_dir = a.repeats, a.margin, a.out
    variants = [v.strip() for v in variants_text.split(";") if v.strip()]
    os.makedirs(out_dir, exist_ok=True)
    failed = marked = 0
    cases = read_cases(cases_path)
    for args in cases:
        cells = []
        plan = best_of(profiler, args, "", repeats, out_dir)
        base = plan[0] if not isinstance(plan[0], str) else None
        case_marked = False
        for name, r in [("plan", plan)] + [(v, best_of(profiler, args, v, repeats, out_dir)) for v in variants]:
            if r[0] == "refused":
                cells.append("%s: refused (%s)" % (name, r[1]))
                continue
            if r[0] == "error":
                failed = 1
                cells.append("%s: error (%s)" % (name, r[1]))
                continue
            us, label, passed = r
            cell = "%s: %.1f (%s)" % (name, us, label)
            if name != "plan" and base:
                ratio = us / base
                cell += " %.3f" % ratio
                if passed and ratio <= 1 - margin / 100:
                    cell += " *"
                    case_marked = True
            if not passed:
                cell += " FAIL"
            cells.append(cell)
        marked += case_marked
        print("%s | %s" % (case_name(args), " | ".join(cells)), flush=True)
    print("sweep: %d cases x %d variants, %d with a variant >= %g %% faster than the planner (*)"
          % (len(cases), len(variants), marked, margin))
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
