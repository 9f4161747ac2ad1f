"""float64 references of the two operators (docs/CONTRACT.md sections 1 and 2) and the
accuracy check of section 4. Run on any device; the tests compare the CUDA ops with them.
"""
import torch

from . import quant
from ._ops import check_b_scale_block_rows

# Relative Frobenius error bounds of docs/CONTRACT.md section 4.
TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float32: 1e-5}


def qdq_activation(a, a_scale):
    """W8A8's A' (contract section 1): inv = 1 / a_scale (0 for 0) in float32,
    q = e4m3_saturate_rne(A * inv), A' = round_to_T(float(q) * a_scale)."""
    s = a_scale.float().reshape(())
    inv = torch.where(s != 0, 1.0 / s, torch.zeros_like(s))
    q = quant.e4m3_saturate(a.float() * inv)
    return (q.float() * s).to(a.dtype)


def dynamic_qdq_activation(a, block_size):
    """Dynamic quantization's q * s in float64 (contract section 1), per row and K block:
    s = amax |A| / 448 in float32 (NaN where the block has a NaN), inv = 1 / s (0 for 0),
    q = e4m3_saturate_rne(A * inv); not rounded to T."""
    k = a.shape[-1]
    x = a.float().reshape(-1, k)
    kb = quant.ceil_div(k, block_size)
    pad = kb * block_size - k
    blocks = torch.nn.functional.pad(x, (0, pad)).reshape(x.shape[0], kb, block_size)
    amax = blocks.abs().amax(dim=-1)
    amax = torch.where(torch.isnan(blocks).any(dim=-1), torch.full_like(amax, float("nan")), amax)
    s = (amax / 448.0).repeat_interleave(block_size, dim=-1)[:, :k]
    inv = torch.where(s != 0, 1.0 / s, torch.zeros_like(s))
    q = quant.e4m3_saturate(x * inv).float()
    return (q.double() * s.double()).reshape(a.shape)


def check_scale_row_groups(b_scale, rows):
    """b_scale_block_rows' promise, b_scale[n] == b_scale[n - n % rows] bit for bit (as
    quant.b_scale_block_rows reads it). Where it is broken the operator's Y is unspecified,
    so the reference refuses."""
    check_b_scale_block_rows(rows)
    if rows == 1:
        return
    bad = quant.first_row_off_its_group(b_scale, rows)
    if bad is not None:
        raise ValueError(f"b_scale: row {bad} differs from row {bad - bad % rows}, which "
                         f"breaks b_scale_block_rows={rows}")


def fp8_matmul(a, b, b_scale, a_scale=None, bias=None, *, block_size=128,
               dynamic_act_quant=False, b_scale_block_rows=1):
    """float64 Y of Fp8WeightMatMul (shape A[..., K] -> [..., N]). b_scale_block_rows
    changes nothing (a promise about b_scale); it is checked to hold."""
    check_scale_row_groups(b_scale, b_scale_block_rows)
    w = quant.dequantize_fp8(b, b_scale, block_size, torch.float64)
    if dynamic_act_quant:
        assert a_scale is None, "a_scale and dynamic_act_quant exclude each other"
        x = dynamic_qdq_activation(a, block_size)
    else:
        x = qdq_activation(a, a_scale) if a_scale is not None else a
    y = x.to(torch.float64) @ w.t()
    if bias is not None:
        y = y + bias.to(torch.float64)
    return y


def nbits_matmul(a, b, scales, zero_points=None, g_idx=None, bias=None, *, K, N, bits=4,
                 block_size, accuracy_level=0):
    """float64 Y of NBitsMatMul (shape A[..., K] -> [..., N])."""
    w = quant.dequantize_nbits(b, scales, zero_points, g_idx, K=K, N=N, bits=bits,
                               block_size=block_size, dtype=torch.float64)
    y = a.to(torch.float64) @ w.t()
    if bias is not None:
        y = y + bias.to(torch.float64)
    return y


def relative_error(y, y_ref):
    """||Y - Yref||_F / ||Yref||_F in float64 (0 when both are zero)."""
    y = y.to(torch.float64)
    y_ref = y_ref.to(torch.float64)
    num = torch.linalg.vector_norm(y - y_ref)
    den = torch.linalg.vector_norm(y_ref)
    if float(den) == 0.0:
        return float(num)
    return float(num / den)


def check(y, y_ref, dtype=None):
    """Contract section 4: shape equal, no NaN where the reference has none, and the
    relative error within the dtype's bound. Raises AssertionError with the numbers."""
    dtype = dtype or y.dtype
    assert tuple(y.shape) == tuple(y_ref.shape), f"shape {tuple(y.shape)} != {tuple(y_ref.shape)}"
    y_ref = y_ref.to(y.device)
    bad_nan = torch.isnan(y) & ~torch.isnan(y_ref)
    assert not bool(bad_nan.any()), f"{int(bad_nan.sum())} NaN where the reference has none"
    finite = ~torch.isnan(y_ref)
    err = relative_error(y[finite], y_ref[finite])
    tol = TOLERANCE[dtype]
    assert err <= tol, f"relative error {err:.3g} > {tol:g} ({dtype})"
    return err
