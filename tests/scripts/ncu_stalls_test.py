#!/usr/bin/env python3
"""scripts/ncu_stalls.py on source pages written here as Nsight Compute prints them (the
profiled program's output first, then the kernel's name line and its CSV table): the share
of samples by stall reason (issued or not; the "(Not Issued)" columns left out; `other`
for samples no column holds), the busiest instructions, the one-line summary, and the
exit status where there is no table or no sample. Registered with CTest
(tests/CMakeLists.txt) where python3 exists."""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "ncu_stalls.py")

HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)",'
          '"stall_long_sb","stall_selected","stall_wait","stall_long_sb (Not Issued)","stall_wait (Not Issued)"')
PAGE = "\n".join([
    "bqmm-profile: --op nbits, 1 case(s), seed 1",
    "==PROF== Disconnected from process 1",
    '"Kernel Name","void Kernel<int>(Params)"',
    HEADER,
    # 100 samples in all: long_sb 60, selected 20, wait 13, 7 in no column (other).
    '"0x10","      LDG.E R2, [R4.64]","10","8","8","0","0","8","0"',
    '"0x20","  @P1 IMAD.U32 R60, R60, 0x10000, RZ","52","50","50","2","0","50","0"',
    '"0x30","      HGMMA.64x64x16.F32 R24, R116, gdesc[UR8], R24","8","3","2","1","0","2","0"',
    '"0x40","      FFMA R1, R2, R2, R1","30","12","0","17","13","0","12"',
    '"0x50","      NOP","0","0","0","0","0","0","0"',
])


class NcuStallsTest(unittest.TestCase):
    def run_script(self, text, *args):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write(text)
            path = f.name
        try:
            p = subprocess.run([sys.executable, SCRIPT, path, *args], capture_output=True, text=True, check=False)
        finally:
            os.unlink(path)
        return p.returncode, p.stdout + p.stderr

    def test_reasons_and_top_instructions(self):
        rc, out = self.run_script(PAGE, "--top", "3")
        self.assertEqual(rc, 0, out)
        self.assertIn("kernel: void Kernel<int>(Params)\n", out)
        self.assertIn("samples: 100 over 5 instructions\n", out)
        self.assertIn("by reason: long_sb 60.0 %, selected 20.0 %, wait 13.0 %, other 7.0 %\n", out)
        lines = out.splitlines()
        top = lines[lines.index(next(l for l in lines if l.startswith("top 3 instructions"))) + 1:]
        self.assertEqual(len(top), 3, out)
        self.assertRegex(top[0], r"^\s+52\.0 %  @P1 IMAD\.U32 R60, R60, 0x10000, RZ\s+long_sb 50, selected 2$")
        self.assertRegex(top[1], r"^\s+30\.0 %  FFMA R1, R2, R2, R1\s+selected 17, wait 13$")
        self.assertRegex(top[2], r"^\s+10\.0 %  LDG\.E R2, \[R4\.64\]\s+long_sb 8, other 2$")

    def test_summary(self):
        rc, out = self.run_script(PAGE, "--summary")
        self.assertEqual(rc, 0, out)
        # Reasons of 5 % or more, then the busiest instruction and its largest reason.
        self.assertEqual(out, "long_sb 60.0 %, selected 20.0 %, wait 13.0 %, other 7.0 %; "
                              "top 52.0 % `@P1 IMAD.U32 R60, R60, 0x10000, RZ` (long_sb)\n")

    def test_no_table_or_no_samples(self):
        rc, out = self.run_script("==WARNING== No kernels were profiled.\n")
        self.assertEqual(rc, 1)
        self.assertIn("no source table", out)
        empty = "\n".join(PAGE.splitlines()[:4] + ['"0x10","      NOP","0","0","0","0","0","0","0"'])
        rc, out = self.run_script(empty, "--summary")
        self.assertEqual(rc, 1)
        self.assertIn("no warp-state samples", out)


if __name__ == "__main__":
    unittest.main()
