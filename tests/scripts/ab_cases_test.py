#!/usr/bin/env python3
"""The case files of scripts/ab_cases/ (gpu_check.sh's AB_CASES_FILE), with --sweep
scripts/sweep_cases/ (SWEEP_CASES) or with --ncu scripts/ncu_cases/ (NCU_CASES) against
the built bqmm-profile: every case line parses as gpu_check.sh parses it (A/B: NAME, then
VAR=VALUE words for the environment, then the profiler's arguments; sweep: the profiler's
arguments, as scripts/sweep_overrides.py reads them; ncu: NAME, a kernel-name regex, then
as A/B) and its arguments are ones the profiler accepts, checked with --explain (plans
for an H200 and exits; no GPU needed).

  ab_cases_test.py BQMM_PROFILE CASES_DIR [--sweep | --ncu]
"""
import glob
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import sweep_overrides  # noqa: E402


def cases(path, kernel_regex=False):
    """(line number, name, env, args) of each case of a case file; with kernel_regex the
    word after the name (an ncu case's kernel-name regex) is dropped, and a line without
    one yields no args."""
    with open(path) as f:
        for number, line in enumerate(f, 1):
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            name, rest = words[0], words[1:]
            if kernel_regex:
                if not rest or rest[0].startswith("-") or "=" in rest[0]:
                    yield number, name, {}, []
                    continue
                rest = rest[1:]
            env = {}
            while rest and not rest[0].startswith("--") and "=" in rest[0]:
                var, value = rest[0].split("=", 1)
                env[var] = value
                rest = rest[1:]
            yield number, name, env, rest


def sweep_cases(path):
    """(case number, name, env, args) of each case of a sweep case file."""
    for number, args in enumerate(sweep_overrides.read_cases(path), 1):
        yield number, sweep_overrides.case_name(args), {}, args


def main():
    profile, cases_dir = sys.argv[1], sys.argv[2]
    mode = sys.argv[3:]
    read = (sweep_cases if mode == ["--sweep"] else
            (lambda path: cases(path, kernel_regex=True)) if mode == ["--ncu"] else cases)
    files = sorted(glob.glob(os.path.join(cases_dir, "*.txt")))
    if not files:
        print(f"no case files in {cases_dir}")
        return 1
    failures = checked = 0
    for path in files:
        for number, name, env, args in read(path):
            if not args:
                print(f"{path}:{number}: case {name} has no profiler arguments (or, in an ncu "
                      "case file, no kernel-name regex before them)")
                failures += 1
                continue
            run = subprocess.run([profile, *args, "--explain", "--sm", "90", "--num-sms", "132"],
                                 env={**os.environ, **env}, capture_output=True, text=True)
            checked += 1
            if run.returncode != 0:
                print(f"{path}:{number}: case {name}: bqmm-profile exited {run.returncode}\n"
                      f"{run.stdout}{run.stderr}")
                failures += 1
    print(f"{checked} cases of {len(files)} files checked, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
