"""GPU-free: the torch quantizers, packers and float64 references against the contract's
text (docs/CONTRACT.md), computed independently here element by element."""
import itertools
import math

import pytest
import torch

from bqmm import nn, quant, reference


def test_fp8_block_max_lands_on_448_and_codes_round_to_nearest(seed):
    n, k, bs = 5, 300, 128  # K not a multiple of the block: a partial last block
    w = torch.randn(n, k) * 0.1
    w[2, 128:256] = 0  # an all-zero block keeps scale 1
    b, s = quant.quantize_fp8(w, bs)
    assert b.dtype == torch.float8_e4m3fn and tuple(b.shape) == (n, k)
    assert s.dtype == torch.float32 and tuple(s.shape) == (n, 3)
    assert float(s[2, 1]) == 1.0
    for r, j in itertools.product(range(n), range(3)):
        blk = w[r, j * bs:(j + 1) * bs]
        amax = float(blk.abs().max())
        if amax == 0:
            continue
        assert float(s[r, j]) == pytest.approx(amax / 448.0, rel=1e-6)
        assert float(b[r, j * bs:(j + 1) * bs].float().abs().max()) == 448.0
    # Every code is the nearest E4M3 value of w / scale: within half a step of E4M3's
    # 3-bit mantissa (relative 2^-4) or of the subnormal step 2^-9.
    x = w / s.repeat_interleave(bs, 1)[:, :k]
    err = (b.float() - x).abs()
    bound = torch.maximum(x.abs() * 2.0 ** -4, torch.full_like(x, 2.0 ** -10))
    assert bool((err <= bound + 1e-12).all())


def test_e4m3_saturates_and_keeps_nan():
    x = torch.tensor([1000.0, -1000.0, 448.0, float("nan"), 0.0])
    y = quant.e4m3_saturate(x).float()
    assert y[:3].tolist() == [448.0, -448.0, 448.0]
    assert math.isnan(float(y[3])) and float(y[4]) == 0.0


@pytest.mark.parametrize("bits", [4, 8])
def test_pack_unpack_round_trip(bits, seed):
    q = torch.randint(0, 1 << bits, (3, 64), dtype=torch.uint8)
    p = quant.pack_bits(q, bits)
    assert p.shape[-1] == 64 * bits // 8
    assert torch.equal(quant.unpack_bits(p, bits, 64), q)
    if bits == 4:  # element 2j is the low nibble of byte j
        assert int(p[0, 0]) == int(q[0, 0]) | (int(q[0, 1]) << 4)


def _naive_nbits_weight(b, scales, zp, g_idx, K, N, bits, block_size):
    """Contract section 2, element by element from the packed bytes."""
    kb = quant.ceil_div(K, block_size)
    b = b.reshape(N, -1)
    s = scales.reshape(N, kb).double()
    w = torch.empty(N, K, dtype=torch.float64)
    for n in range(N):
        for k in range(K):
            byte = int(b[n, k * bits // 8])
            q = byte if bits == 8 else ((byte >> 4) if k % 2 else (byte & 0xF))
            g = int(g_idx[k]) if g_idx is not None else k // block_size
            if zp is None:
                z = 2 ** (bits - 1)
            elif zp.dtype == torch.uint8:
                zb = int(zp.reshape(N, -1)[n, g * bits // 8])
                z = zb if bits == 8 else ((zb >> 4) if g % 2 else (zb & 0xF))
            else:
                z = float(zp.reshape(N, kb)[n, g])
            w[n, k] = (q - z) * float(s[n, g])
    return w


@pytest.mark.parametrize("bits,zp,dtype", [
    (4, "packed", torch.float32), (4, "none", torch.float16), (4, "typed", torch.bfloat16),
    (8, "packed", torch.float16), (8, "none", torch.float32), (8, "typed", torch.float16)])
def test_nbits_quantizer_matches_contract(bits, zp, dtype, seed):
    N, K, bs = 3, 80, 32  # 3 blocks (odd: packed 4-bit zero points pad a nibble)
    w = torch.randn(N, K)
    q = quant.quantize_nbits(w, bits, bs, zp, dtype)
    kb = 3
    assert tuple(q["b"].shape) == (N, kb, bs * bits // 8)
    assert q["scales"].dtype == dtype and tuple(q["scales"].shape) == (N, kb)
    if zp == "packed":
        assert q["zero_points"].dtype == torch.uint8
        assert tuple(q["zero_points"].shape) == (N, quant.ceil_div(kb * bits, 8))
    elif zp == "typed":
        assert q["zero_points"].dtype == dtype
    else:
        assert q["zero_points"] is None
    ref = _naive_nbits_weight(q["b"], q["scales"], q["zero_points"], None, K, N, bits, bs)
    got = quant.dequantize_nbits(q["b"], q["scales"], q["zero_points"], K=K, N=N, bits=bits,
                                 block_size=bs)
    assert torch.equal(got, ref)
    # Quantization error: at most half a step (the scale), plus the zero point's rounding
    # for the typed ones (stored in a 16-bit dtype).
    step = q["scales"].double().repeat_interleave(bs, 1)[:, :K]
    slack = 0.5 if zp != "typed" else 0.5 + 0.01 * (1 << bits)
    assert bool(((got - w.double()).abs() <= step * slack + 1e-9).all())


def test_nbits_g_idx_and_out_of_range_nan(seed):
    N, K, bs, bits = 2, 64, 16, 4
    w = torch.randn(N, K)
    q = quant.quantize_nbits(w, bits, bs, "packed", torch.float32)
    g_idx = torch.randint(0, K // bs, (K,), dtype=torch.int32)
    ref = _naive_nbits_weight(q["b"], q["scales"], q["zero_points"], g_idx, K, N, bits, bs)
    got = quant.dequantize_nbits(q["b"], q["scales"], q["zero_points"], g_idx, K=K, N=N,
                                 bits=bits, block_size=bs)
    assert torch.equal(got, ref)
    g_idx[5] = 99
    bad = quant.dequantize_nbits(q["b"], q["scales"], q["zero_points"], g_idx, K=K, N=N,
                                 bits=bits, block_size=bs)
    assert bool(torch.isnan(bad[:, 5]).all()) and not bool(torch.isnan(bad[:, 6]).any())


def test_w8a8_activation_qdq():
    a = torch.tensor([[0.3, -7.0, 1000.0, float("nan")]], dtype=torch.float16)
    s = torch.tensor(0.5)
    y = reference.qdq_activation(a, s).float()
    # 0.3 / 0.5 = 0.6 -> e4m3 0.625 -> 0.3125; -14 exact; 2000 saturates to 448 -> 224
    assert y[0, :3].tolist() == [0.3125, -7.0, 224.0]
    assert math.isnan(float(y[0, 3]))
    assert reference.qdq_activation(a[:, :2], torch.tensor(0.0)).float().tolist() == [[0.0, 0.0]]


def test_dynamic_activation_quantization():
    # Per row and K block of 2: s = amax / 448. Row 0: s = 1 and 2^-6, exact. Row 1: 100
    # rounds to 96 (a tie between e4m3 96 and 104, to even); the second block has a NaN.
    a = torch.tensor([[448.0, 224.0, 3.5, 7.0], [-448.0, 100.0, float("nan"), 1.0],
                      [0.0, 0.0, 1.0, 2.0]], dtype=torch.float16)
    x = reference.dynamic_qdq_activation(a, 2)
    assert x.dtype == torch.float64
    assert x[0].tolist() == [448.0, 224.0, 3.5, 7.0]
    assert x[1, :2].tolist() == [-448.0, 96.0]
    assert bool(torch.isnan(x[1, 2:]).all())
    assert x[2, :2].tolist() == [0.0, 0.0]  # an all-zero block: s = 0, nothing
    # A partial last block (K = 5, block 2) and leading dimensions keep the shape.
    assert tuple(reference.dynamic_qdq_activation(torch.ones(2, 3, 5), 2).shape) == (2, 3, 5)


def test_fp8_linear_dynamic_reference(seed):
    w = torch.randn(16, 300) / 300 ** 0.5
    m = nn.Fp8Linear.from_float(w, torch.randn(16), block_size=128, dynamic_act_quant=True,
                                     dtype=torch.bfloat16)
    assert "dynamic_act_quant=True" in repr(m)
    x = torch.randn(5, 300, dtype=torch.bfloat16)
    y = m.reference(x)
    xq = reference.dynamic_qdq_activation(x, 128)
    assert torch.allclose(y, xq @ m.dequantized_weight(torch.float64).t() + m.bias.double())
    with pytest.raises(ValueError, match="exclude each other"):
        nn.Fp8Linear(300, 16, w8a8=True, dynamic_act_quant=True)


def test_fp8_reference_and_check(seed):
    w = torch.randn(16, 200) / 200 ** 0.5
    b, s = quant.quantize_fp8(w, 64)
    a = torch.randn(3, 200, dtype=torch.bfloat16)
    bias = torch.randn(16, dtype=torch.bfloat16)
    y = reference.fp8_matmul(a, b, s, None, bias, block_size=64)
    wd = (b.double() * s.double().repeat_interleave(64, 1)[:, :200])
    assert torch.allclose(y, a.double() @ wd.t() + bias.double())
    reference.check(y.to(torch.bfloat16), y)
    with pytest.raises(AssertionError):
        reference.check((y * 1.05).to(torch.bfloat16), y)  # 5 % off fails
    nan_y = y.clone().to(torch.bfloat16)
    nan_y[0, 0] = float("nan")
    with pytest.raises(AssertionError):
        reference.check(nan_y, y)


def test_fp8_linear_b_scale_block_rows(seed):
    # from_float's scales are per row: no promise, nothing in the repr.
    w = torch.randn(256, 300) / 300 ** 0.5
    m = nn.Fp8Linear.from_float(w, None, block_size=128)
    assert m.b_scale_block_rows == 1 and "b_scale_block_rows" not in repr(m)
    # Scales of 128-row blocks expanded to rows keep the promise: stored, shown, passed on.
    s = m.weight_scale[::128].repeat_interleave(128, 0)[:256].contiguous()
    g = nn.Fp8Linear.from_quantized(m.weight, s, None, block_size=128, b_scale_block_rows=128)
    assert g.b_scale_block_rows == 128 and "b_scale_block_rows=128" in repr(g)
    x = torch.randn(3, 300, dtype=torch.bfloat16)
    y = reference.fp8_matmul(x, g.weight, s, block_size=128)
    assert torch.equal(g.reference(x), y)  # the promise changes nothing


def test_fp8_reference_checks_the_row_group_promise(seed):
    b, s = quant.quantize_fp8(torch.randn(200, 64), 64)  # per-row scales: rows differ
    a = torch.randn(2, 64, dtype=torch.float16)
    reference.fp8_matmul(a, b, s, block_size=64, b_scale_block_rows=1)
    grouped = s[::128].repeat_interleave(128, 0)[:200]  # 2 groups, the last partial
    reference.fp8_matmul(a, b, grouped, block_size=64, b_scale_block_rows=128)
    with pytest.raises(ValueError, match=r"row 1 differs from row 0.*b_scale_block_rows=128"):
        reference.fp8_matmul(a, b, s, block_size=64, b_scale_block_rows=128)
    with pytest.raises(ValueError, match="b_scale_block_rows: expected >= 1"):
        reference.fp8_matmul(a, b, s, block_size=64, b_scale_block_rows=0)


def test_b_scale_block_rows_read_off_the_scales(seed):
    _, s = quant.quantize_fp8(torch.randn(300, 256), 128)  # per-row scales: rows differ
    assert quant.b_scale_block_rows(s) == 1
    grouped = s[::128].repeat_interleave(128, 0)[:300].contiguous()  # 3 groups, the last partial
    assert quant.b_scale_block_rows(grouped) == 128
    assert quant.b_scale_block_rows(grouped, rows=64) == 64  # 128-row groups hold 64-row ones
    broken = grouped.clone()
    broken[299, 1] *= 1.0000001  # one scale of the partial group off by an ulp or so
    assert quant.b_scale_block_rows(broken) == 1
    nan = grouped.clone()
    nan[128:256, 0] = float("nan")  # a whole group NaN still repeats its first row
    assert quant.b_scale_block_rows(nan) == 128
    assert quant.b_scale_block_rows(torch.full((40, 2), 0.5)) == 128  # fewer rows than a group
