#!/usr/bin/env python3
"""The main loop of each kernel in a cubin, from its SASS: how many instructions an
iteration issues, of which kinds, and in what order around the tensor-core instructions.
No GPU needed: what a change to a kernel's loop costs in instructions, and whether ptxas
kept the order the source asks for (a decode between wgmma, say), can be read on the CPU
machine before a GPU run times it.

    scripts/sass_loops.py FILE... [--kernel REGEX] [--sequence]

FILE: a cubin (disassembled with nvdisasm: $NVDISASM, else .deps/nvdisasm/nvdisasm from
scripts/fetch_nvdisasm.sh, else nvdisasm on PATH) or a listing nvdisasm -c already wrote.
A cubin of one translation unit, for example the 4-bit wgmma kernels:

    nvcc -O3 -std=c++17 --expt-relaxed-constexpr -arch=sm_90a -Iinclude -Isrc \\
         -I.deps/cutlass/include -cubin -o /tmp/int4.cubin src/cuda/gemm/int4_wgmma.cu

A kernel's main loop is its innermost loop (a backward branch and the instructions from
its target up to it) that issues tensor-core instructions (HGMMA, HMMA, IMMA); kernels
without one are left out. Per kernel (--kernel: those whose mangled name matches REGEX):
its name, the loop's instructions, its tensor instructions and instructions per tensor
instruction, and the opcodes that make up the loop, most first. --sequence adds the
loop's order, space-separated: G a tensor instruction, L ldmatrix, W a wgmma wait
(WARPGROUP.DEPBAR), S an mbarrier operation (SYNCS), CN a run of N half-precision or
conversion instructions (HADD2, HFMA2, HMUL2, F2FP, F2F, I2F: a decode's arithmetic),
N a run of N others.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FUNCTION = re.compile(r"^\s*\.text\.(\S+):\s*$")
LABEL = re.compile(r"^\s*(\.L_x_\d+):")
INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P[T\d]+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)")
BRANCH = re.compile(r"\bBRA\b.*`\((\.L_x_\d+)\)")
TENSOR = {"HGMMA", "HMMA", "IMMA"}
CONVERT = {"HADD2", "HFMA2", "HMUL2", "F2FP", "F2F", "I2F"}


def disassembler():
    for path in (os.environ.get("NVDISASM"), os.path.join(ROOT, ".deps", "nvdisasm", "nvdisasm"),
                 shutil.which("nvdisasm")):
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    sys.exit("sass_loops: no nvdisasm (set NVDISASM, or run scripts/fetch_nvdisasm.sh)")


def listing(path):
    with open(path, "rb") as f:
        elf = f.read(4) == b"\x7fELF"
    if not elf:
        with open(path, errors="replace") as f:
            return f.read()
    r = subprocess.run([disassembler(), "-c", path], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"sass_loops: nvdisasm failed on {path}: {r.stderr.strip()}")
    return r.stdout


def functions(text):
    """{mangled name: [its lines]} in listing order."""
    out, current = {}, None
    for line in text.splitlines():
        m = FUNCTION.match(line)
        if m:
            current = out.setdefault(m.group(1), [])
        elif current is not None:
            current.append(line)
    return out


def main_loop(lines):
    """The innermost loop holding a tensor instruction: (first line, branch line), or None."""
    labels = {}
    for i, line in enumerate(lines):
        m = LABEL.match(line)
        if m:
            labels[m.group(1)] = i
    best = None
    for i, line in enumerate(lines):
        m = BRANCH.search(line)
        if not m or labels.get(m.group(1), i) >= i:
            continue
        first = labels[m.group(1)]
        tensor = any((op := INSTRUCTION.match(x)) and op.group(1) in TENSOR for x in lines[first:i])
        if tensor and (best is None or i - first < best[1] - best[0]):
            best = (first, i)
    return best


def letter(opcode, modifiers):
    if opcode in TENSOR:
        return "G"
    if opcode == "LDSM":
        return "L"
    if opcode == "WARPGROUP" and "DEPBAR" in modifiers:
        return "W"
    if opcode == "SYNCS":
        return "S"
    if opcode in CONVERT:
        return "C"
    return "."


def compact(sequence):
    """Space-separated tokens: G, L, W, S as they come, a run of N C's "CN", of N others "N"."""
    return " ".join(run[0] * (run[0] in "GLWS") or ("C" if run[0] == "C" else "") + str(len(run))
                    for run in re.findall(r"\.+|C+|[GLWS]", sequence))


def demangled(names):
    """The kernels' names demangled by c++filt where there is one, else as they are."""
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    r = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    out = r.stdout.splitlines()
    return dict(zip(names, out)) if r.returncode == 0 and len(out) == len(names) else {n: n for n in names}


def report(path, pattern, sequence):
    found = {n: ls for n, ls in functions(listing(path)).items() if re.search(pattern, n)}
    names = demangled(list(found))
    for name, lines in found.items():
        loop = main_loop(lines)
        if loop is None:
            continue
        opcodes = collections.Counter()
        order = []
        for line in lines[loop[0]:loop[1] + 1]:
            m = INSTRUCTION.match(line)
            if m:
                opcodes[m.group(1)] += 1
                order.append(letter(m.group(1), m.group(2)))
        total = sum(opcodes.values())
        tensor = sum(opcodes[t] for t in TENSOR)
        print(f"{names[name]}")
        print(f"  {path}: main loop {total} instructions, {tensor} tensor, "
              f"{total / tensor:.1f} per tensor instruction")
        print("  " + ", ".join(f"{op} {n}" for op, n in opcodes.most_common()))
        if sequence:
            print("  " + compact("".join(order)))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", metavar="FILE")
    parser.add_argument("--kernel", default="", metavar="REGEX")
    parser.add_argument("--sequence", action="store_true")
    args = parser.parse_args(argv[1:])
    for path in args.files:
        report(path, args.kernel, args.sequence)


if __name__ == "__main__":
    main(sys.argv)
