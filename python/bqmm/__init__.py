"""bqmm for PyTorch: block-quantized weight matmul ops, modules and checkpoint loaders.

Ops (docs/PYTHON.md; the semantics are docs/CONTRACT.md's):
  torch.ops.bqmm.fp8_matmul(a, b, b_scale, a_scale=None, bias=None, *, block_size=128,
                            dynamic_act_quant=False, b_scale_block_rows=1)
  torch.ops.bqmm.nbits_matmul(a, b, scales, zero_points=None, g_idx=None, bias=None, *,
                              K, N, bits=4, block_size, accuracy_level=0)
  (both also take prepacked=: the weight's scales from torch.ops.bqmm.fp8_prepack(b_scale)
  or torch.ops.bqmm.nbits_prepack(scales, zero_points, *, K, N, bits, block_size), made
  once per weight)
Modules: bqmm.nn.Fp8Linear, bqmm.nn.NBitsLinear. Loaders: bqmm.loaders.
"""
from . import _ops
from ._ops import (extension_loaded, fp8_matmul, nbits_matmul, fp8_prepack, nbits_prepack,
                   error_code)
from . import quant, reference, nn

__all__ = ["fp8_matmul", "nbits_matmul", "fp8_prepack", "nbits_prepack", "extension_loaded",
           "error_code", "quant", "reference", "nn", "loaders"]
__version__ = "0.1.0"


def __getattr__(name):  # bqmm.loaders imports safetensors / onnx lazily
    if name == "loaders":
        import importlib
        return importlib.import_module(".loaders", __name__)
    raise AttributeError(name)
