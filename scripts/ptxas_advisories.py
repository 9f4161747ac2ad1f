#!/usr/bin/env python3
"""ptxas's coded advisories in a build log, each once, and a failing exit status where
there is any.

ptxas writes a numbered advisory ("ptxas info : (C7517) warpgroup.wait is injected ...
in function 'F'", "(C7515) ... wgmma.mma_async instructions are serialized ...") where
it compiles a wgmma pipeline other than the source says: every wgmma serialized, or a
wait inserted before registers a wgmma still uses. The kernel stays correct and loses its
overlap of decode and tensor work without any error, so the Hopper kernels' builds must
have none (a default build has none). scripts/test.sh runs this on its build's output,
gpu_check.sh's build step on build.log.

    scripts/ptxas_advisories.py BUILD_LOG

Prints the advisories, sorted, one line each, then a line saying how many; exit status
1 where there is one or more, else 0 and nothing printed.
"""
import re
import sys

ADVISORY = re.compile(r"ptxas (?:info|warning)\s*:\s*\(C\d+\)")


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    with open(argv[1], errors="replace") as log:
        found = sorted({line.strip() for line in log if ADVISORY.search(line)})
    if not found:
        return 0
    for line in found:
        print(line)
    print(f"ptxas_advisories: {len(found)} advisories: ptxas changed a wgmma pipeline "
          f"(docs/DESIGN.md, \"Register spills\")")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
