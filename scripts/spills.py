#!/usr/bin/env python3
"""ptxas's spill reports in a build log, whole, and a one-line summary of them.

gpu_check.sh's build step runs it on build.log: every kernel ptxas reports spilling
(-Xptxas --warn-on-spills; lines of 0 bytes left out), one line each, sorted and without
repeats, into OUT; on standard output "N kernels report spills (...)": the count, the
largest spill store, and the count per kernel family (the template's name, demangled from
the symbol), most first. Nothing is printed where no kernel spills.

    scripts/spills.py BUILD_LOG OUT
"""
import collections
import re
import sys

SPILL = re.compile(r"spilled to local memory in function '([^']+)', (\d+) bytes spill stores, "
                   r"(\d+) bytes spill loads")


def family(symbol):
    """The kernel template's name in an Itanium-mangled bqmm::cuda symbol (its first
    name past the namespaces, anonymous ones included), else the symbol."""
    m = re.match(r"_ZN4bqmm4cuda", symbol)
    if not m:
        return symbol
    rest = symbol[m.end():]
    while True:
        n = re.match(r"\d+", rest)
        if not n:
            return symbol
        length = int(n.group(0))
        name = rest[n.end():n.end() + length]
        rest = rest[n.end() + length:]
        if not name.startswith("_GLOBAL__N"):
            return name


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    reports = {}  # line -> (symbol, bytes of spill stores)
    with open(argv[1], errors="replace") as log:
        for line in log:
            m = SPILL.search(line)
            if m and (int(m.group(2)) or int(m.group(3))):
                reports[line.strip()] = (m.group(1), int(m.group(2)))
    lines = sorted(reports)
    with open(argv[2], "w") as out:
        out.writelines(line + "\n" for line in lines)
    if not lines:
        return
    families = collections.Counter(family(symbol) for symbol, _ in reports.values())
    largest = max(stores for _, stores in reports.values())
    by_family = ", ".join(f"{name} {count}" for name, count in families.most_common())
    print(f"{len(lines)} kernels report spills (up to {largest} bytes of stores; {by_family})")


if __name__ == "__main__":
    main(sys.argv)
