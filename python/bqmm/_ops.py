"""Loads the extension (bqmm/_C.so: the ops' schemas and CUDA kernels, registered by
TORCH_LIBRARY in python/csrc/bqmm_torch.cc) and registers the ops' fake (meta)
implementations, which give torch.compile, opcheck and meta tensors the output's shape and
dtype without running anything.

Without the extension (a checkout that was not built, e.g. CI without a GPU toolchain for
torch), the same schemas are defined here, so the fake implementations, torch.compile
tracing on meta tensors and the schema tests still work; calling the ops on CUDA tensors
then fails with a message saying the extension is missing.
"""
import os

import torch

# The schemas, identical to the ones python/csrc/bqmm_torch.cc registers (a test compares
# them when the extension is loaded). Inputs in ONNX order, attributes keyword-only.
FP8_MATMUL_SCHEMA = (
    "fp8_matmul(Tensor a, Tensor b, Tensor b_scale, Tensor? a_scale=None, "
    "Tensor? bias=None, *, int block_size=128, bool dynamic_act_quant=False, "
    "int b_scale_block_rows=1, Tensor? prepacked=None) -> Tensor")
NBITS_MATMUL_SCHEMA = (
    "nbits_matmul(Tensor a, Tensor b, Tensor scales, Tensor? zero_points=None, "
    "Tensor? g_idx=None, Tensor? bias=None, *, int K, int N, int bits=4, int block_size, "
    "int accuracy_level=0, Tensor? prepacked=None) -> Tensor")
# The weight's prepacked scales (docs/CONTRACT.md, "Prepacked scales"): written once per
# weight, passed as the matmul ops' `prepacked`.
FP8_PREPACK_SCHEMA = "fp8_prepack(Tensor b_scale) -> Tensor"
NBITS_PREPACK_SCHEMA = (
    "nbits_prepack(Tensor scales, Tensor? zero_points=None, *, int K, int N, int bits=4, "
    "int block_size) -> Tensor")
SCHEMAS = (FP8_MATMUL_SCHEMA, NBITS_MATMUL_SCHEMA, FP8_PREPACK_SCHEMA, NBITS_PREPACK_SCHEMA)

_HERE = os.path.dirname(os.path.abspath(__file__))
_EXTENSION = os.path.join(_HERE, "_C.so")
_load_error = None


_CODES = ("InvalidArgument", "NotSupported", "WorkspaceTooSmall", "CudaError", "CublasError",
          "Internal")


def error_code(exc):
    """The bqmm Status code an exception of the ops carries ("InvalidArgument", ...), or
    None. The ops raise ValueError (InvalidArgument, WorkspaceTooSmall),
    NotImplementedError (NotSupported) or RuntimeError (CudaError, CublasError, Internal)
    with the Status's text, "bqmm: <Code>: <message>"."""
    text = str(exc)
    i = text.find("bqmm: ")
    if i < 0:
        return None
    rest = text[i + len("bqmm: "):]
    return next((c for c in _CODES if rest.startswith(c + ":")), None)


def _load():
    global _load_error
    if os.path.exists(_EXTENSION):
        try:
            torch.ops.load_library(_EXTENSION)
            return True
        except OSError as e:  # e.g. a torch other than the one it was built against
            _load_error = f"{_EXTENSION}: {e}"
    else:
        _load_error = f"{_EXTENSION} does not exist (bqmm was not built: pip install .)"
    return False


_loaded = _load()
if not _loaded:
    _lib = torch.library.Library("bqmm", "DEF")  # kept alive: it owns the definitions
    for _schema in SCHEMAS:
        _lib.define(_schema)

    def _missing(*args, **kwargs):
        raise RuntimeError(f"bqmm: the extension is not loaded: {_load_error}")

    for _schema in SCHEMAS:
        _lib.impl(_schema.split("(")[0], _missing, "CUDA")


def extension_loaded():
    """True when bqmm/_C.so (the CUDA kernels) is loaded."""
    return _loaded


def _output(a, n):
    if a.dim() < 1:
        raise ValueError(f"bqmm: InvalidArgument: a: expected rank >= 1 but got rank {a.dim()}")
    return a.new_empty((*a.shape[:-1], n))


def check_b_scale_block_rows(b_scale_block_rows):
    """The library's check of the attribute (validate_fp8_matmul), for code that does not
    run it: the fake implementation (so tracing fails where the op would) and the
    reference. Same exception type and text as the op's."""
    if b_scale_block_rows < 1:
        raise ValueError("bqmm: InvalidArgument: b_scale_block_rows: expected >= 1 (rows of B "
                         f"sharing each scale), got {b_scale_block_rows}")


@torch.library.register_fake("bqmm::fp8_matmul")
def _fp8_matmul_fake(a, b, b_scale, a_scale=None, bias=None, *, block_size=128,
                     dynamic_act_quant=False, b_scale_block_rows=1, prepacked=None):
    check_b_scale_block_rows(b_scale_block_rows)
    torch._check(b.dim() == 2, lambda: f"bqmm: InvalidArgument: b: expected rank 2 [N, K] but got rank {b.dim()}")
    torch._check(a.dim() >= 1 and a.shape[-1] == b.shape[1],
                 lambda: f"bqmm: InvalidArgument: a: last dimension must be K = {b.shape[1]}")
    return _output(a, b.shape[0])


@torch.library.register_fake("bqmm::nbits_matmul")
def _nbits_matmul_fake(a, b, scales, zero_points=None, g_idx=None, bias=None, *, K, N,
                       bits=4, block_size, accuracy_level=0, prepacked=None):
    torch._check(a.dim() >= 1 and a.shape[-1] == K,
                 lambda: f"bqmm: InvalidArgument: a: last dimension must be K = {K}")
    return _output(a, N)


@torch.library.register_fake("bqmm::fp8_prepack")
def _fp8_prepack_fake(b_scale):
    torch._check(b_scale.dim() == 2, lambda: "bqmm: InvalidArgument: b_scale: expected rank 2 "
                 f"[N, ceil(K/block_size)] but got rank {b_scale.dim()}")
    return b_scale.new_empty((b_scale.shape[1], b_scale.shape[0]), dtype=torch.float32)


def _nbits_prepacked_dtype(scales_dtype, bits):
    """The type of nbits_prepack's output: the scales' (T1), float32 for bfloat16 with 8 bits
    (the type the mixed-input GEMM takes its multiply-add in)."""
    return torch.float32 if scales_dtype == torch.bfloat16 and bits == 8 else scales_dtype


@torch.library.register_fake("bqmm::nbits_prepack")
def _nbits_prepack_fake(scales, zero_points=None, *, K, N, bits=4, block_size):
    return scales.new_empty((2, -(-K // block_size), N), dtype=_nbits_prepacked_dtype(scales.dtype, bits))


def fp8_matmul(a, b, b_scale, a_scale=None, bias=None, *, block_size=128,
               dynamic_act_quant=False, b_scale_block_rows=1, prepacked=None):
    """Y = A @ dequant(B)^T + bias (torch.ops.bqmm.fp8_matmul). a_scale: static W8A8;
    dynamic_act_quant: A quantized per row and K block (scale amax / 448) instead.
    b_scale_block_rows: a promise that rows of B share each scale in aligned groups of
    that many (b_scale[n] == b_scale[n - n % R]), as 128 x 128-block checkpoints expanded
    to per-row scales do; Y is the same, the W8A8 GEMMs may be faster with 128.
    prepacked: fp8_prepack(b_scale), made once per weight; Y is the same, the mixed-input
    GEMM (M above about 128 on Hopper) skips a pass per call."""
    return torch.ops.bqmm.fp8_matmul(a, b, b_scale, a_scale, bias, block_size=block_size,
                                     dynamic_act_quant=dynamic_act_quant,
                                     b_scale_block_rows=b_scale_block_rows, prepacked=prepacked)


def nbits_matmul(a, b, scales, zero_points=None, g_idx=None, bias=None, *, K, N, bits=4,
                 block_size, accuracy_level=0, prepacked=None):
    """Y = A @ dequant(B)^T + bias (torch.ops.bqmm.nbits_matmul). prepacked:
    nbits_prepack(scales, zero_points, ...), made once per weight (as fp8_matmul's)."""
    return torch.ops.bqmm.nbits_matmul(a, b, scales, zero_points, g_idx, bias, K=K, N=N,
                                       bits=bits, block_size=block_size,
                                       accuracy_level=accuracy_level, prepacked=prepacked)


def fp8_prepack(b_scale):
    """The weight's scales prepacked for fp8_matmul's `prepacked`: float32 [k_blocks, N],
    b_scale transposed (torch.ops.bqmm.fp8_prepack, on b_scale's device)."""
    return torch.ops.bqmm.fp8_prepack(b_scale)


def nbits_prepack(scales, zero_points=None, *, K, N, bits=4, block_size):
    """The weight's scales and zeros prepacked for nbits_matmul's `prepacked`: [2, k_blocks,
    N] of the scales' dtype, float32 for bfloat16 with 8 bits (torch.ops.bqmm.nbits_prepack,
    on the scales' device)."""
    return torch.ops.bqmm.nbits_prepack(scales, zero_points, K=K, N=N, bits=bits,
                                        block_size=block_size)
