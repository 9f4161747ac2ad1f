"""GPU-free: the ops' schemas and fake (meta) implementations, opcheck on meta tensors and
torch.compile tracing; with the extension loaded, its C++ schemas equal bqmm._ops's."""
import pytest
import torch

import bqmm
from bqmm import _ops


def test_schemas():
    fp8 = str(torch.ops.bqmm.fp8_matmul.default._schema)
    nbits = str(torch.ops.bqmm.nbits_matmul.default._schema)
    assert fp8 == "bqmm::" + _ops.FP8_MATMUL_SCHEMA
    assert nbits == "bqmm::" + _ops.NBITS_MATMUL_SCHEMA
    assert str(torch.ops.bqmm.fp8_prepack.default._schema) == "bqmm::" + _ops.FP8_PREPACK_SCHEMA
    assert str(torch.ops.bqmm.nbits_prepack.default._schema) == "bqmm::" + _ops.NBITS_PREPACK_SCHEMA
    # ONNX order of inputs; attributes keyword-only.
    args = [a.name for a in torch.ops.bqmm.fp8_matmul.default._schema.arguments]
    assert args == ["a", "b", "b_scale", "a_scale", "bias", "block_size", "dynamic_act_quant",
                    "b_scale_block_rows", "prepacked"]
    kwarg_only = [a.name for a in torch.ops.bqmm.fp8_matmul.default._schema.arguments
                  if a.kwarg_only]
    assert kwarg_only == ["block_size", "dynamic_act_quant", "b_scale_block_rows", "prepacked"]
    args = [a.name for a in torch.ops.bqmm.nbits_matmul.default._schema.arguments]
    assert args == ["a", "b", "scales", "zero_points", "g_idx", "bias", "K", "N", "bits",
                    "block_size", "accuracy_level", "prepacked"]


def _fp8_meta(shape_a=(2, 3, 200), n=48, bs=128, bias=True, a_scale=False,
              dtype=torch.bfloat16):
    k = shape_a[-1]
    kb = -(-k // bs)
    a = torch.empty(shape_a, device="meta", dtype=dtype)
    b = torch.empty(n, k, device="meta", dtype=torch.float8_e4m3fn)
    s = torch.empty(n, kb, device="meta")
    return (a, b, s, torch.empty((), device="meta") if a_scale else None,
            torch.empty(n, device="meta", dtype=dtype) if bias else None), {"block_size": bs}


def _nbits_meta(m=5, n=40, k=96, bits=4, bs=32, dtype=torch.float16, zp="packed", g_idx=True):
    kb = -(-k // bs)
    a = torch.empty(m, k, device="meta", dtype=dtype)
    b = torch.empty(n, kb, bs * bits // 8, device="meta", dtype=torch.uint8)
    s = torch.empty(n * kb, device="meta", dtype=dtype)
    z = (torch.empty(n, -(-kb * bits // 8), device="meta", dtype=torch.uint8) if zp == "packed"
         else torch.empty(n, kb, device="meta", dtype=dtype) if zp == "typed" else None)
    g = torch.empty(k, device="meta", dtype=torch.int32) if g_idx else None
    bias = torch.empty(n, device="meta", dtype=dtype)
    return (a, b, s, z, g, bias), dict(K=k, N=n, bits=bits, block_size=bs)


def test_fake_shapes_and_dtypes():
    args, kw = _fp8_meta()
    y = torch.ops.bqmm.fp8_matmul(*args, **kw)
    assert tuple(y.shape) == (2, 3, 48) and y.dtype == torch.bfloat16 and y.device.type == "meta"
    args, kw = _fp8_meta(shape_a=(200,), dtype=torch.float16)
    assert tuple(torch.ops.bqmm.fp8_matmul(*args, **kw).shape) == (48,)
    args, kw = _fp8_meta()
    kw["dynamic_act_quant"] = True
    assert tuple(torch.ops.bqmm.fp8_matmul(*args, **kw).shape) == (2, 3, 48)
    args, kw = _nbits_meta(dtype=torch.float32)
    y = torch.ops.bqmm.nbits_matmul(*args, **kw)
    assert tuple(y.shape) == (5, 40) and y.dtype == torch.float32


def test_fake_b_scale_block_rows():
    # A promise about b_scale's values: the output's shape and dtype do not change.
    for kwargs in ({"b_scale_block_rows": 128}, {"b_scale_block_rows": 7},
                   {"b_scale_block_rows": 128, "dynamic_act_quant": True}):
        args, kw = _fp8_meta()
        y = torch.ops.bqmm.fp8_matmul(*args, **kw, **kwargs)
        assert tuple(y.shape) == (2, 3, 48) and y.dtype == torch.bfloat16
    # < 1 fails as the op does (the library's InvalidArgument, a ValueError).
    args, kw = _fp8_meta()
    for bad in (0, -128):
        with pytest.raises(ValueError, match="b_scale_block_rows: expected >= 1") as e:
            torch.ops.bqmm.fp8_matmul(*args, **kw, b_scale_block_rows=bad)
        assert bqmm.error_code(e.value) == "InvalidArgument"


def test_fake_prepack_shapes():
    # The prepack ops' outputs: float32 [k_blocks, N] and [2, k_blocks, N] of the scales'
    # dtype (float32 for bfloat16 with 8 bits); the matmul ops take them by keyword without
    # changing Y's shape.
    s = torch.empty(48, 2, device="meta")
    pp = torch.ops.bqmm.fp8_prepack(s)
    assert tuple(pp.shape) == (2, 48) and pp.dtype == torch.float32 and pp.device.type == "meta"
    args, kw = _fp8_meta(shape_a=(2, 3, 200))
    assert tuple(torch.ops.bqmm.fp8_matmul(*args, **kw, prepacked=pp).shape) == (2, 3, 48)
    args, kw = _nbits_meta()
    pp = torch.ops.bqmm.nbits_prepack(args[2], args[3], **kw)
    assert tuple(pp.shape) == (2, 3, 40) and pp.dtype == torch.float16
    assert tuple(torch.ops.bqmm.nbits_matmul(*args, **kw, prepacked=pp).shape) == (5, 40)
    for bits, dtype in ((4, torch.bfloat16), (8, torch.float32)):
        args, kw = _nbits_meta(bits=bits, dtype=torch.bfloat16)
        assert torch.ops.bqmm.nbits_prepack(args[2], args[3], **kw).dtype == dtype


def test_fake_rejects_wrong_k():
    args, kw = _nbits_meta()
    kw["K"] = 95
    with pytest.raises(Exception, match="K = 95"):
        torch.ops.bqmm.nbits_matmul(*args, **kw)


@pytest.mark.parametrize("case", ["fp8", "fp8_w8a8", "fp8_block_rows", "nbits_packed",
                                  "nbits_typed", "nbits_none"])
def test_opcheck_meta(case):
    if case.startswith("fp8"):
        args, kw = _fp8_meta(a_scale=case == "fp8_w8a8")
        if case == "fp8_block_rows":
            kw.update(dynamic_act_quant=True, b_scale_block_rows=128)
        op = torch.ops.bqmm.fp8_matmul.default
    else:
        args, kw = _nbits_meta(zp=case.split("_")[1])
        op = torch.ops.bqmm.nbits_matmul.default
    torch.library.opcheck(op, args, kw)


def test_compile_traces_with_fake_tensors():
    # Dynamo + AOT on fake tensors only: the graph holds the custom ops (no graph breaks).
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x, b, s, q, sc):
        y = torch.ops.bqmm.fp8_matmul(x, b, s, None, None, block_size=128)
        return torch.ops.bqmm.nbits_matmul(y, q, sc, None, None, None, K=48, N=16, bits=4,
                                           block_size=16)

    x = torch.empty(4, 200, dtype=torch.float16, device="meta")
    b = torch.empty(48, 200, dtype=torch.float8_e4m3fn, device="meta")
    s = torch.empty(48, 2, device="meta")
    q = torch.empty(16, 3, 8, dtype=torch.uint8, device="meta")
    sc = torch.empty(16, 3, dtype=torch.float16, device="meta")
    gm = make_fx(f, tracing_mode="symbolic")(x, b, s, q, sc)
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert torch.ops.bqmm.fp8_matmul.default in targets
    assert torch.ops.bqmm.nbits_matmul.default in targets


def test_error_code_parsing():
    assert bqmm.error_code(ValueError("bqmm: InvalidArgument: b: x")) == "InvalidArgument"
    assert bqmm.error_code(NotImplementedError("bqmm: NotSupported: bits")) == "NotSupported"
    assert bqmm.error_code(RuntimeError("other")) is None
