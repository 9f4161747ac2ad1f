#!/usr/bin/env python3
"""scripts/sass_loops.py on an nvdisasm -c listing written here: the main loop is the
innermost loop holding a tensor instruction (not a spin loop inside it or before it, not
the whole kernel's outer loop), its instructions and opcodes counted, its order written
as --sequence says; kernels without such a loop and those --kernel leaves out are not
reported. Registered with CTest (tests/CMakeLists.txt) where python3 exists."""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "sass_loops.py")


def listing(functions):
    """An nvdisasm -c style listing: {name: [instruction or label]} -> text."""
    out, address = ["\t.headerflags\t@\"EF_CUDA_SM90\""], 0
    for name, body in functions.items():
        out.append(f"\t.section\t.text.{name},\"ax\",@progbits")
        out.append(f".text.{name}:")
        for item in body:
            if item.endswith(":"):
                out.append(item)
            else:
                out.append(f"        /*{address:04x}*/                   {item} ;")
                address += 16
    return "\n".join(out) + "\n"


GEMM = [
    "MOV R1, c[0x0][0x28]",
    ".L_x_0:",  # a spin loop before the main loop: no tensor instruction
    "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2",
    "@!P0 BRA `(.L_x_0)",
    ".L_x_1:",  # the outer loop around the main loop (a persistent grid's tiles)
    "IADD3 R3, R3, 0x1, RZ",
    ".L_x_2:",  # the main loop
    "LDSM.16.M88.4 R8, [R4]",
    "LOP3.LUT R9, R8, 0xf000f, RZ, 0xc0, !PT",
    "HFMA2 R10, R9, R5, R6",
    "HFMA2 R11, R9, R5, R6",
    ".L_x_3:",  # a spin loop inside the main loop
    "SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR5], R2",
    "@!P1 BRA `(.L_x_3)",
    "WARPGROUP.ARRIVE",
    "HGMMA.64x64x16.F32 R24, R8, gdesc[UR8], R24",
    "HGMMA.64x64x16.F32 R24, R12, gdesc[UR8], R24, gsb0",
    "WARPGROUP.DEPBAR.LE gsb0, 0x1",
    "@P2 BRA `(.L_x_2)",
    "@P3 BRA `(.L_x_1)",
    "EXIT",
]
COPY = ["LDG.E R2, desc[UR4][R2.64]", ".L_x_4:", "STG.E desc[UR4][R4.64], R2", "@P0 BRA `(.L_x_4)", "EXIT"]


class SassLoopsTest(unittest.TestCase):
    def run_script(self, functions, *flags):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "k.sass")
            with open(path, "w") as f:
                f.write(listing(functions))
            r = subprocess.run([sys.executable, SCRIPT, path, *flags], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            return r.stdout.splitlines()

    def test_main_loop_counted_and_ordered(self):
        out = self.run_script({"_Z4Gemmv": GEMM, "_Z4Copyv": COPY}, "--sequence")
        self.assertIn(out[0], ("Gemm()", "_Z4Gemmv"))  # demangled where c++filt is there
        self.assertIn("main loop 11 instructions, 2 tensor, 5.5 per tensor instruction", out[1])
        counts = dict(item.rsplit(" ", 1) for item in out[2].strip().split(", "))
        self.assertEqual(counts, {"HFMA2": "2", "BRA": "2", "WARPGROUP": "2", "HGMMA": "2", "LDSM": "1",
                                  "LOP3": "1", "SYNCS": "1"})
        self.assertEqual(out[3], "  L 1 C2 S 2 G G W 1")
        self.assertEqual(len(out), 4)  # Copy has no tensor loop: not reported

    def test_kernel_filter(self):
        self.assertEqual(self.run_script({"_Z4Gemmv": GEMM}, "--kernel", "Copy"), [])


if __name__ == "__main__":
    unittest.main()
