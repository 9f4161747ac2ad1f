"""GPU: the ops against the float64 reference with the contract's tolerance
(docs/CONTRACT.md section 4), errors, opcheck (all checks), torch.compile(fullgraph=True),
CUDA graph capture and replay, streams, the plan cache's alignment key and BQMM_PRINT_PLAN."""
import os
import subprocess
import sys

import pytest
import torch

import bqmm
from bqmm import quant, reference

pytestmark = pytest.mark.gpu
DEV = "cuda"


def fp8_case(m, n, k, dtype, bs=128, bias=False, w8a8=False, lead=()):
    w = torch.randn(n, k, device=DEV) / k ** 0.5
    b, s = quant.quantize_fp8(w, bs)
    a = torch.randn(*lead, m, k, device=DEV).to(dtype)
    args = [a, b, s, None, None]
    if w8a8:
        args[3] = (a.float().abs().amax() / 448.0 * 0.9).reshape(())
    if bias:
        args[4] = torch.randn(n, device=DEV).to(dtype)
    return args, {"block_size": bs}


def nbits_case(m, n, k, dtype, bits=4, bs=32, zp="packed", g_idx=False, bias=False, flat=False):
    w = torch.randn(n, k, device=DEV) / k ** 0.5
    q = quant.quantize_nbits(w, bits, bs, zp, dtype)
    a = torch.randn(m, k, device=DEV).to(dtype)
    scales, z = q["scales"], q["zero_points"]
    if flat:
        scales = scales.reshape(-1)
        z = None if z is None else z.reshape(-1)
    g = None
    if g_idx:  # act order: a random assignment of k to blocks
        g = torch.randint(0, quant.ceil_div(k, bs), (k,), device=DEV, dtype=torch.int32)
    args = [a, q["b"], scales, z, g, torch.randn(n, device=DEV).to(dtype) if bias else None]
    return args, dict(K=k, N=n, bits=bits, block_size=bs)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("m", [1, 3, 8, 40])
@pytest.mark.parametrize("n,k,bs", [(256, 512, 128), (100, 300, 128), (64, 4096, 64)])
@pytest.mark.parametrize("bias,w8a8,dynamic", [(False, False, False), (True, False, False),
                                               (True, True, False), (True, False, True)])
def test_fp8_matmul_matches_reference(dtype, m, n, k, bs, bias, w8a8, dynamic, seed):
    args, kw = fp8_case(m, n, k, dtype, bs, bias, w8a8)
    kw["dynamic_act_quant"] = dynamic
    y = torch.ops.bqmm.fp8_matmul(*args, **kw)
    assert y.dtype == dtype and tuple(y.shape) == (m, n)
    reference.check(y, reference.fp8_matmul(*args, **kw))


def test_fp8_leading_dims_and_rank1(seed):
    args, kw = fp8_case(3, 64, 256, torch.bfloat16, lead=(2,))
    y = torch.ops.bqmm.fp8_matmul(*args, **kw)
    assert tuple(y.shape) == (2, 3, 64)
    reference.check(y, reference.fp8_matmul(*args, **kw))
    args[0] = args[0][0, 0]
    y1 = torch.ops.bqmm.fp8_matmul(*args, **kw)
    assert tuple(y1.shape) == (64,)
    reference.check(y1, reference.fp8_matmul(*args, **kw))


def fp8_row_block_case(m, n, k, dtype, mode, rows=128, bias=True):
    """A weight quantized in rows x 128 blocks (DeepSeek-V3 / Qwen3-FP8's layout), the
    block scales expanded to per-row ones as the safetensors loader does, so b_scale keeps
    b_scale_block_rows=rows. The row blocks are scaled 1/4x to 4x apart, so that a scale
    read from the wrong row block fails the check. mode: "static" (a_scale) or "dynamic"."""
    nb, kb = quant.ceil_div(n, rows), quant.ceil_div(k, 128)
    spread = torch.pow(2.0, torch.empty(nb, device=DEV).uniform_(-2, 2))
    w = torch.randn(n, k, device=DEV) / k ** 0.5 * spread.repeat_interleave(rows)[:n, None]
    blocks = torch.nn.functional.pad(w, (0, kb * 128 - k, 0, nb * rows - n))
    blocks = blocks.reshape(nb, rows, kb, 128)
    amax = blocks.abs().amax(dim=(1, 3))
    scale_inv = torch.where(amax > 0, amax / 448.0, torch.ones_like(amax))
    codes = quant.e4m3_saturate(blocks / scale_inv[:, None, :, None])
    b = codes.reshape(nb * rows, kb * 128)[:n, :k].contiguous()
    b_scale = bqmm.loaders.expand_block_scales(scale_inv, n, k, rows, 128)
    a = torch.randn(m, k, device=DEV).to(dtype)
    a_scale = (a.float().abs().amax() / 448.0 * 0.9).reshape(()) if mode == "static" else None
    args = [a, b, b_scale, a_scale, torch.randn(n, device=DEV).to(dtype) if bias else None]
    return args, dict(block_size=128, dynamic_act_quant=mode == "dynamic",
                      b_scale_block_rows=rows)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("mode", ["static", "dynamic"])
@pytest.mark.parametrize("m", [300, 1024])
@pytest.mark.parametrize("n", [1000, 1024])  # 1000: a partial last row block
@pytest.mark.parametrize("k", [2048, 2000])  # 2000: a partial last K block
def test_fp8_b_scale_block_rows_matches_reference(dtype, mode, m, n, k, seed):
    # Checkpoint-layout scales with the promise made: the W8A8 GEMMs may read one scale
    # per 128 rows (the first of each group); Y must still be the contract's.
    args, kw = fp8_row_block_case(m, n, k, dtype, mode)
    y = torch.ops.bqmm.fp8_matmul(*args, **kw)
    assert y.dtype == dtype and tuple(y.shape) == (m, n)
    reference.check(y, reference.fp8_matmul(*args, **kw))


def test_fp8_b_scale_block_rows_below_one_is_rejected(seed):
    args, kw = fp8_row_block_case(300, 256, 256, torch.bfloat16, "dynamic")
    for bad in (0, -128):
        with pytest.raises(ValueError, match="b_scale_block_rows") as e:
            torch.ops.bqmm.fp8_matmul(*args, **{**kw, "b_scale_block_rows": bad})
        assert bqmm.error_code(e.value) == "InvalidArgument"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("m", [1, 5, 40])
@pytest.mark.parametrize("zp,g_idx,bias,flat", [
    ("packed", False, False, False), ("none", False, True, True), ("typed", False, False, False),
    ("packed", True, True, False)])
def test_nbits_matmul_matches_reference(dtype, bits, m, zp, g_idx, bias, flat, seed):
    args, kw = nbits_case(m, 96, 320, dtype, bits, 32, zp, g_idx, bias, flat)
    y = torch.ops.bqmm.nbits_matmul(*args, **kw)
    assert y.dtype == dtype and tuple(y.shape) == (m, 96)
    reference.check(y, reference.nbits_matmul(*args, **kw))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("m", [1, 300])
def test_fp8_prepacked_scales_same_y(dtype, m, seed):
    # prepacked: b_scale transposed; the mixed-input GEMM (M = 300 on Hopper) reads it
    # instead of writing it each call, other paths ignore it: Y the same bit for bit.
    args, kw = fp8_case(m, 1000, 1024, dtype, bias=True)
    pp = bqmm.fp8_prepack(args[2])
    assert pp.dtype == torch.float32 and tuple(pp.shape) == (8, 1000)
    assert torch.equal(pp, args[2].t())
    y = torch.ops.bqmm.fp8_matmul(*args, **kw)
    assert torch.equal(torch.ops.bqmm.fp8_matmul(*args, **kw, prepacked=pp), y)
    layer = bqmm.nn.Fp8Linear.from_quantized(args[1], args[2], args[4]).prepack()
    assert "prepacked" not in layer.state_dict()
    assert torch.equal(layer(args[0]), y)
    with pytest.raises(ValueError, match="prepacked: expected shape") as e:
        torch.ops.bqmm.fp8_matmul(*args, **kw, prepacked=pp.t().contiguous())
    assert bqmm.error_code(e.value) == "InvalidArgument"


@pytest.mark.parametrize("zp", ["none", "packed", "typed"])
@pytest.mark.parametrize("bits", [4, 8])
def test_nbits_prepacked_scales_same_y(zp, bits, seed):
    args, kw = nbits_case(300, 264, 1024, torch.bfloat16, bits, 128, zp, bias=True)
    pp = bqmm.nbits_prepack(args[2], args[3], **kw)
    # bfloat16 scales: prepacked as bfloat16 for 4 bits, float32 for 8 (the GEMM's types)
    assert pp.dtype == (torch.float32 if bits == 8 else torch.bfloat16) and tuple(pp.shape) == (2, 8, 264)
    if zp == "none":
        zero = torch.full_like(args[2], 2 ** (bits - 1), dtype=torch.float32)
    elif zp == "packed":
        zero = quant.unpack_bits(args[3], bits, 8).float()
    else:
        zero = args[3].float()
    assert torch.equal(pp[0], args[2].to(pp.dtype).t())
    assert torch.equal(pp[1], (-zero * args[2].float()).to(pp.dtype).t())
    y = torch.ops.bqmm.nbits_matmul(*args, **kw)
    assert torch.equal(torch.ops.bqmm.nbits_matmul(*args, **kw, prepacked=pp), y)
    layer = bqmm.nn.NBitsLinear.from_quantized(*args[1:], **kw).prepack()
    assert torch.equal(layer(args[0]), y)
    assert torch.equal(layer.unprepack()(args[0]), y)


@pytest.mark.parametrize("bits", [4, 8])
def test_nbits_decode_shape_block_128(bits, seed):
    args, kw = nbits_case(1, 1024, 4096, torch.float16, bits, 128)
    reference.check(torch.ops.bqmm.nbits_matmul(*args, **kw), reference.nbits_matmul(*args, **kw))


def test_errors_carry_the_status_message(seed):
    args, kw = fp8_case(2, 64, 256, torch.float16, bs=128)
    bad = list(args)
    bad[2] = args[2][:, :1].contiguous()  # b_scale [64, 1] instead of [64, 2]
    with pytest.raises(ValueError, match=r"b_scale: expected shape \[64, 2\]") as e:
        torch.ops.bqmm.fp8_matmul(*bad, **kw)
    assert bqmm.error_code(e.value) == "InvalidArgument"
    with pytest.raises(ValueError, match="block_size"):
        torch.ops.bqmm.fp8_matmul(*args, block_size=0)
    with pytest.raises(ValueError, match="a: expected a CUDA tensor"):
        torch.ops.bqmm.fp8_matmul(args[0].cpu(), *args[1:], **kw)
    with pytest.raises(ValueError, match="b: expected a tensor on cuda"):
        torch.ops.bqmm.fp8_matmul(args[0], args[1].cpu(), *args[2:], **kw)
    with pytest.raises(ValueError, match="dtype"):
        torch.ops.bqmm.fp8_matmul(args[0].double(), *args[1:], **kw)

    nargs, nkw = nbits_case(2, 64, 256, torch.float16, 4, 32)
    with pytest.raises(NotImplementedError, match="NotSupported") as e:
        torch.ops.bqmm.nbits_matmul(*nargs, **{**nkw, "bits": 2})
    assert bqmm.error_code(e.value) == "NotSupported"
    with pytest.raises(ValueError, match="bits"):
        torch.ops.bqmm.nbits_matmul(*nargs, **{**nkw, "bits": 3})
    with pytest.raises(ValueError, match="block_size"):
        torch.ops.bqmm.nbits_matmul(*nargs, **{**nkw, "block_size": 48})


def _as_bytes(args):
    """FP8 args with B as its uint8 bytes: torch's schema checker (opcheck's test_schema)
    cannot compare float8_e4m3fn tensors on CUDA ("mul_cuda" is not implemented for them),
    so opcheck runs on the op's uint8 form of B; test_fp8_weight_as_bytes checks that both
    forms give the same result."""
    return [args[0], args[1].view(torch.uint8), *args[2:]]


def test_fp8_weight_as_bytes(seed):
    args, kw = fp8_case(5, 64, 256, torch.float16, bias=True)
    y = torch.ops.bqmm.fp8_matmul(*args, **kw)
    y_bytes = torch.ops.bqmm.fp8_matmul(*_as_bytes(args), **kw)
    assert torch.equal(y, y_bytes)


def _opcheck_cases():
    torch.manual_seed(0)
    args, kw = fp8_case(3, 64, 256, torch.bfloat16, bias=True)
    yield "fp8", torch.ops.bqmm.fp8_matmul.default, _as_bytes(args), kw
    args, kw = fp8_case(9, 64, 256, torch.float16, w8a8=True)
    yield "fp8_w8a8", torch.ops.bqmm.fp8_matmul.default, _as_bytes(args), kw
    args, kw = fp8_row_block_case(300, 256, 256, torch.bfloat16, "dynamic")
    yield "fp8_block_rows", torch.ops.bqmm.fp8_matmul.default, _as_bytes(args), kw
    yield "nbits4", torch.ops.bqmm.nbits_matmul.default, *nbits_case(2, 64, 256, torch.float16, 4, 32, bias=True)
    yield "nbits8_gidx", torch.ops.bqmm.nbits_matmul.default, *nbits_case(17, 64, 256, torch.float32, 8, 32, g_idx=True)


@pytest.mark.parametrize("case", ["fp8", "fp8_w8a8", "fp8_block_rows", "nbits4", "nbits8_gidx"])
def test_opcheck(case):
    for name, op, args, kw in _opcheck_cases():
        if name == case:
            # Every check opcheck has (schema, autograd registration, fake tensor, AOT
            # dispatch with dynamic shapes).
            torch.library.opcheck(op, tuple(args), kw)


def test_torch_compile_fullgraph(seed):
    w1 = torch.randn(256, 512, device=DEV, dtype=torch.bfloat16) / 512 ** 0.5
    w2 = torch.randn(128, 256, device=DEV, dtype=torch.bfloat16) / 256 ** 0.5
    l1 = bqmm.nn.Fp8Linear.from_float(w1, torch.randn(256, device=DEV, dtype=torch.bfloat16))
    l2 = bqmm.nn.NBitsLinear.from_float(w2, None, bits=4, block_size=32)

    def f(x):
        return l2(torch.nn.functional.silu(l1(x)))

    cf = torch.compile(f, fullgraph=True)
    for m in (1, 4, 7):  # several M: recompiles or a dynamic-shape graph, never a break
        x = torch.randn(m, 512, device=DEV, dtype=torch.bfloat16)
        torch.testing.assert_close(cf(x), f(x), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("op", ["fp8", "nbits4", "nbits8_dequant"])
def test_cuda_graph_capture_and_replay(op, seed):
    if op == "fp8":
        args, kw = fp8_case(1, 512, 1024, torch.bfloat16, bias=True)
        fn, ref = torch.ops.bqmm.fp8_matmul, reference.fp8_matmul
    elif op == "nbits4":
        args, kw = nbits_case(1, 512, 1024, torch.float16, 4, 128)
        fn, ref = torch.ops.bqmm.nbits_matmul, reference.nbits_matmul
    else:  # M = 40: dequant + cuBLAS, with a workspace from the graph's pool
        args, kw = nbits_case(40, 512, 1024, torch.float16, 8, 32, bias=True)
        fn, ref = torch.ops.bqmm.nbits_matmul, reference.nbits_matmul
    x = args[0]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up off the capture (handle, plan cache)
        for _ in range(2):
            fn(*args, **kw)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = fn(*args, **kw)
    for _ in range(3):
        x.copy_(torch.randn_like(x.float()).to(x.dtype))
        g.replay()
        torch.cuda.synchronize()
        reference.check(y, ref(*args, **kw))
        torch.testing.assert_close(y, fn(*args, **kw), rtol=1e-2, atol=1e-2)


def test_runs_on_the_current_stream(seed):
    args, kw = fp8_case(4, 1024, 4096, torch.float16, bias=True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = torch.ops.bqmm.fp8_matmul(*args, **kw)
        z = y * 2  # ordered after the op only if the op ran on s
    s.synchronize()
    reference.check(z / 2, reference.fp8_matmul(*args, **kw))


def test_plan_cache_keys_on_alignment(seed):
    # A starting 2 bytes into a buffer: alignment 2, a plan without vectorized loads; the
    # aligned call before and after keeps its own plan.
    args, kw = nbits_case(1, 256, 512, torch.float16, 4, 128)
    a = args[0]
    buf = torch.empty(a.numel() + 8, device=DEV, dtype=a.dtype)
    for offset in (0, 1, 0, 3):
        view = buf[offset:offset + a.numel()].view_as(a)
        view.copy_(a)
        y = torch.ops.bqmm.nbits_matmul(view, *args[1:], **kw)
        reference.check(y, reference.nbits_matmul(*args, **kw))


def test_empty_problems(seed):
    args, kw = fp8_case(0, 64, 256, torch.float16, bias=True)
    assert tuple(torch.ops.bqmm.fp8_matmul(*args, **kw).shape) == (0, 64)
    args, kw = nbits_case(0, 64, 256, torch.float16)
    assert tuple(torch.ops.bqmm.nbits_matmul(*args, **kw).shape) == (0, 64)


def test_print_plan_in_a_child_process():
    # The library reads BQMM_PRINT_PLAN once per process, so the op runs in a child that sets
    # it. The plan is printed (to stderr) when the run first uses it and the op still returns
    # a finite result (its accuracy is the other tests'). Printing crashes the child where
    # _C.so exports the symbols of a statically linked C++ runtime (python/CMakeLists.txt).
    script = (
        "import torch, bqmm\n"
        "from bqmm import quant\n"
        "w = torch.randn(256, 512, device='cuda') / 512 ** 0.5\n"
        "b, s = quant.quantize_fp8(w, 128)\n"
        "a = torch.randn(4, 512, device='cuda', dtype=torch.float16)\n"
        "y = torch.ops.bqmm.fp8_matmul(a, b, s, None, None, block_size=128)\n"
        "torch.cuda.synchronize()\n"
        "print('ok', tuple(y.shape), bool(torch.isfinite(y).all()))\n"
    )
    env = dict(os.environ, BQMM_PRINT_PLAN="1")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"child exited {done.returncode}:\n{done.stderr[-2000:]}"
    assert "ok (4, 256) True" in done.stdout
    assert "bqmm: Fp8MatMulPlan{path=" in done.stderr
    assert "M=4 N=256 K=512" in done.stderr
