"""The environment the gpu_check.sh tests run the script under: this process's, less every
variable gpu_check.sh reads as a knob, plus the test's own, with this Python (and any
stand-in tools' folders) first on PATH. The tests run inside a real
gpu_check.sh call on the GPU machine (its `test` step), whose own knobs (PACK_OUT=1,
MICRO_AB=1, BENCH_SUITES=...) would otherwise steer the script under test."""
import os
import shutil
import sys

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")

# Every knob gpu_check.sh reads is one of these names or starts with one of these prefixes.
KNOB_PREFIXES = ("AB_", "BENCH_", "MICRO", "NBITS_", "NCU_", "SWEEP_", "MEMCHECK_",
                 "RACECHECK_", "SANITIZE_", "GPU_TEST_")
KNOBS = ("OUT", "PACK_OUT", "BQMM_CUDA_ARCH", "BQMM_PLAN_OVERRIDE")


def gpu_check_env(*path_dirs, **overrides):
    """os.environ without gpu_check.sh's knobs; PATH = path_dirs, this Python's folder, the
    caller's PATH; then `overrides` on top."""
    env = {k: v for k, v in os.environ.items()
           if k not in KNOBS and not k.startswith(KNOB_PREFIXES)}
    env["PATH"] = os.pathsep.join(list(path_dirs) + [os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    env.update(overrides)
    return env


def stand_in_tree(root, scripts=("gpu_check.sh",)):
    """A tree for gpu_check.sh under test in `root`: `scripts` copied into root/scripts and
    root/bin/nvidia-smi, a stand-in for the query the script makes first. Returns root/bin,
    where the tests put their other stand-in tools."""
    os.makedirs(os.path.join(root, "scripts"))
    for name in scripts:
        shutil.copy(os.path.join(SCRIPTS, name), os.path.join(root, "scripts", name))
    bin_dir = os.path.join(root, "bin")
    os.makedirs(bin_dir)
    smi = os.path.join(bin_dir, "nvidia-smi")
    with open(smi, "w") as f:
        f.write("#!/bin/sh\necho 'stand-in GPU'\n")
    os.chmod(smi, 0o755)
    return bin_dir
