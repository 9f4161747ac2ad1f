"""Quantizers and packers in torch, with docs/CONTRACT.md's semantics and the same rules as
the C++ reference quantizers (src/reference/fp8_quantize.cc, nbits_quantize.cc). They run
on any device (CPU or CUDA) and are exact functions of their input.

FP8 (Fp8WeightMatMul): per row and K block, scale = amax / 448 (1 for an all-zero block),
codes = e4m3(w / scale) with saturation to +-448 and round-to-nearest-even.

N-bit (NBitsMatMul): per row and K block, over the block's range [lo, hi] (which always
holds 0):
  zero_points="packed": scale = (hi - lo) / (2^bits - 1), zp = clamp(round(-lo / scale)),
                         uint8 packed along the blocks (ONNX Runtime's layout);
  zero_points="typed":  the same scale, zp = -lo / scale stored in the scales' dtype;
  zero_points="none":   symmetric, scale = max(-lo, hi) / (2^(bits-1) - 1), zp = 2^(bits-1);
scales are stored in the activation dtype rounded up (the block's range still fits),
codes q = clamp(round(w / scale + zp), 0, 2^bits - 1), packed low bits first along K.
"""
import torch

E4M3_MAX = 448.0


def ceil_div(a, b):
    return -(-a // b)


def _blocks(w, block_size):
    """[N, K] -> [N, k_blocks, block_size] (zero padded), as float64-free float32 view."""
    n, k = w.shape
    kb = ceil_div(k, block_size)
    pad = kb * block_size - k
    if pad:
        w = torch.nn.functional.pad(w, (0, pad))
    return w.reshape(n, kb, block_size)


def e4m3_saturate(x):
    """float32 -> float8_e4m3fn, saturating to +-448, round to nearest even; NaN stays NaN."""
    return x.float().clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)


def quantize_fp8(weight, block_size=128):
    """weight [N, K] (any float dtype) -> (b float8_e4m3fn [N, K], b_scale float32
    [N, ceil(K / block_size)])."""
    if weight.dim() != 2:
        raise ValueError(f"weight: expected [N, K] but got shape {list(weight.shape)}")
    n, k = weight.shape
    w = weight.float()
    blocks = _blocks(w, block_size)
    amax = blocks.abs().amax(dim=-1) if k > 0 else w.new_zeros(n, 0)
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    scaled = blocks / scale.unsqueeze(-1)
    codes = e4m3_saturate(scaled.reshape(n, -1)[:, :k])
    return codes.contiguous(), scale.contiguous()


def first_row_off_its_group(b_scale, rows):
    """The first row of b_scale [N, k_blocks] whose scales differ, bit for bit (so NaN
    repeats), from those of its aligned group's first row (row n - n % rows), or None."""
    n = torch.arange(b_scale.shape[0], device=b_scale.device)
    bits = b_scale.contiguous().view(torch.int32).reshape(b_scale.shape[0], -1)
    same = (bits == bits[n - n % rows]).all(dim=1)
    return None if bool(same.all()) else int(n[~same][0])


def b_scale_block_rows(b_scale, rows=128):
    """`rows` where every aligned group of `rows` rows of b_scale [N, k_blocks] repeats its
    first row's scales bit for bit (the promise of Fp8Linear's b_scale_block_rows, read off
    the data: a 128 x 128-block checkpoint expanded to rows), else 1. One pass over b_scale."""
    return rows if first_row_off_its_group(b_scale, rows) is None else 1


def dequantize_fp8(b, b_scale, block_size=128, dtype=torch.float64):
    """The exact dequantized weight e4m3(B) * b_scale, [N, K] in `dtype`."""
    k = b.shape[1]
    s = b_scale.to(dtype).repeat_interleave(block_size, dim=1)[:, :k]
    return b.to(dtype) * s


def _store_up(wanted, dtype):
    """`wanted` (float64) stored in `dtype`, rounded up: the smallest value of `dtype` that
    the C++ quantizer's loop reaches (x *= 1 + 2^-12 until the stored value >= wanted)."""
    up = wanted.clone()
    stored = up.to(dtype)
    low = stored.double() < wanted
    for _ in range(64):
        if not bool(low.any()):
            break
        up = torch.where(low, up * (1.0 + 2.0 ** -12), up)
        stored = up.to(dtype)
        low = stored.double() < wanted
    return stored


def pack_bits(q, bits):
    """uint8 codes [..., L] (L * bits a multiple of 8) -> [..., L * bits / 8], element 2j
    in the low nibble of byte j for 4 bits."""
    if bits == 8:
        return q.to(torch.uint8)
    if bits != 4:
        raise ValueError(f"bits: expected 4 or 8 but got {bits}")
    q = q.to(torch.uint8)
    return (q[..., 0::2] | (q[..., 1::2] << 4)).contiguous()


def unpack_bits(packed, bits, count):
    """The inverse of pack_bits: [..., bytes] -> [..., count] uint8 codes."""
    if bits == 8:
        return packed[..., :count]
    lo = packed & 0xF
    hi = packed >> 4
    return torch.stack((lo, hi), dim=-1).reshape(*packed.shape[:-1], -1)[..., :count]


def quantize_nbits(weight, bits=4, block_size=128, zero_points="packed", dtype=None):
    """weight [N, K] -> dict with b (uint8 [N, k_blocks, block_size * bits / 8]), scales
    ([N, k_blocks] in `dtype`, default the weight's), zero_points (uint8 packed
    [N, ceil(k_blocks * bits / 8)], typed [N, k_blocks] in `dtype`, or None) and the
    attributes K, N, bits, block_size."""
    if bits not in (4, 8):
        raise ValueError(f"bits: expected 4 or 8 but got {bits}")
    if block_size < 16 or block_size & (block_size - 1):
        raise ValueError(f"block_size: expected a power of two >= 16 but got {block_size}")
    if zero_points not in ("packed", "typed", "none", None):
        raise ValueError(f"zero_points: expected 'packed', 'typed' or 'none' but got {zero_points!r}")
    zero_points = zero_points or "none"
    dtype = dtype or weight.dtype
    n, k = weight.shape
    kb = ceil_div(k, block_size)
    q_max = float((1 << bits) - 1)
    half = float(1 << (bits - 1))
    w = weight.double()
    blocks = _blocks(w, block_size)  # zero padding keeps lo <= 0 <= hi
    lo = blocks.amin(dim=-1).clamp(max=0.0)
    hi = blocks.amax(dim=-1).clamp(min=0.0)
    raw = torch.maximum(-lo, hi) / (half - 1.0) if zero_points == "none" else (hi - lo) / q_max
    wanted = torch.where(raw > 0, raw, torch.ones_like(raw))
    scales = _store_up(wanted, dtype)
    scale = scales.double()
    zp_out = None
    if zero_points == "packed":
        zp = torch.round(-lo / scale).clamp(0.0, q_max)
        zp_codes = zp.to(torch.uint8)
        zp_bytes = ceil_div(kb * bits, 8)
        pad = zp_bytes * 8 // bits - kb
        if pad:
            zp_codes = torch.nn.functional.pad(zp_codes, (0, pad))
        zp_out = pack_bits(zp_codes, bits)
    elif zero_points == "typed":
        zp_out = (-lo / scale).to(dtype)
        zp = zp_out.double()
    else:
        zp = torch.full_like(scale, half)
    q = torch.round(blocks / scale.unsqueeze(-1) + zp.unsqueeze(-1)).clamp(0.0, q_max)
    q = q.to(torch.uint8)
    # Codes past K (padding of the last block) are zeros, as the C++ packer writes them.
    if kb * block_size != k:
        q = q.reshape(n, -1)
        q[:, k:] = 0
        q = q.reshape(n, kb, block_size)
    b = pack_bits(q, bits)
    return {"b": b.contiguous(), "scales": scales.contiguous(),
            "zero_points": None if zp_out is None else zp_out.contiguous(),
            "K": k, "N": n, "bits": bits, "block_size": block_size}


def dequantize_nbits(b, scales, zero_points=None, g_idx=None, *, K, N, bits=4, block_size,
                     dtype=torch.float64):
    """The exact dequantized weight (q - zp) * scale, [N, K] in `dtype` (contract section 2).
    An out-of-range g_idx value gives NaN weights, as the kernels do."""
    kb = ceil_div(K, block_size)
    codes = unpack_bits(b.reshape(N, -1), bits, kb * block_size)[:, :K].to(dtype)
    s = scales.reshape(N, kb).to(dtype)
    if zero_points is None:
        zp = torch.full_like(s, float(1 << (bits - 1)))
    elif zero_points.dtype == torch.uint8:
        zp = unpack_bits(zero_points.reshape(N, -1), bits, kb).to(dtype)
    else:
        zp = zero_points.reshape(N, kb).to(dtype)
    if g_idx is None:
        g = torch.arange(K, device=b.device) // block_size
        valid = torch.ones(K, dtype=torch.bool, device=b.device)
    else:
        g = g_idx.to(torch.int64).to(b.device)
        valid = (g >= 0) & (g < kb)
        g = g.clamp(0, max(kb - 1, 0))
    w = (codes - zp[:, g]) * s[:, g]
    if not bool(valid.all()):
        w[:, ~valid] = float("nan")
    return w
