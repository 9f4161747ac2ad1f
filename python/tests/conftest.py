"""pytest configuration of the Python suite (python/tests).

`import bqmm` finds the installed package (pip install .); without one, the source tree's
python/bqmm (no extension: GPU-free tests only). Tests that need a CUDA device and the
built extension use the `cuda` fixture, which skips them, saying why, where either is
missing.
"""
import os
import sys

import pytest

try:
    import bqmm  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    import bqmm  # noqa: F401

import torch


def cuda_skip_reason():
    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is False)"
    if not bqmm.extension_loaded():
        return f"the bqmm extension is not loaded ({bqmm._ops._load_error})"
    return None


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device and the built extension")


def pytest_collection_modifyitems(config, items):
    reason = cuda_skip_reason()
    if reason is None:
        return
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def seed():
    torch.manual_seed(1234)
    return 1234
