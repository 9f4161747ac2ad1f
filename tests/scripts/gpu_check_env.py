"""The environment the gpu_check.sh tests run the script under: this process's, less every
variable gpu_check.sh reads as a knob, plus the test's own, with this Python (and any
stand-in tools' folders) first on PATH. The tests run inside a real
gpu_check.sh call on the GPU machine (its `test` step), whose own knobs (PACK_OUT=1,
MICRO_AB=1, BENCH_SUITES=...) would otherwise steer the script under test."""
import os
import sys

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
