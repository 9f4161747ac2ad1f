"""Linear layers on bqmm's ops: y = x @ W^T + b with W block-quantized.

  Fp8Linear.from_float(weight, bias, block_size=128)          FP8 E4M3, FP32 block scales
  NBitsLinear.from_float(weight, bias, bits=4, block_size=128) 8-/4-bit, per-block scales
  *.from_quantized(...)                                        already quantized tensors

The quantized tensors are buffers (they move with .to() / .cuda() and are saved in the
state dict). forward() calls torch.ops.bqmm.*; reference() is the float64 contract
semantics on any device (bqmm.reference). prepack() (on the layer's CUDA device) writes
the weight's scales in the mixed-input GEMM's layout once, a buffer kept out of the state
dict that forward() then passes (the same Y, a pass less per call above about 128 rows on
Hopper); call it again after changing the scales or zero points, or unprepack().
"""
import torch

from . import _ops, quant, reference


def _opt(t, **kw):
    return None if t is None else t.to(**kw)


def _with_prepacked(module, kw):
    """The op's keywords with `prepacked` only where the module has it: an absent keyword
    and a plain dict read (not Module.__getattr__) keep forward()'s host time per call as
    it is without prepacking."""
    prepacked = module._buffers["prepacked"]
    if prepacked is not None:
        kw["prepacked"] = prepacked
    return kw


class Fp8Linear(torch.nn.Module):
    """Fp8WeightMatMul: weight float8_e4m3fn [out, in], weight_scale float32
    [out, ceil(in / block_size)], optional input_scale (W8A8, a 1-element float32 tensor)
    and bias (activation dtype). dynamic_act_quant: the input quantized per token and K
    block instead (scale amax / 448, as FP8 checkpoints are served); excludes w8a8.
    b_scale_block_rows: rows of the weight sharing each scale in aligned groups (a promise
    about weight_scale, passed to the op: 128 for checkpoints of 128 x 128 blocks, which
    lets the W8A8 GEMMs read one scale per 128 rows); 1 promises nothing."""

    def __init__(self, in_features, out_features, *, block_size=128, bias=True, w8a8=False,
                 dynamic_act_quant=False, b_scale_block_rows=1, dtype=torch.bfloat16,
                 device=None):
        super().__init__()
        if w8a8 and dynamic_act_quant:
            raise ValueError("bqmm: InvalidArgument: w8a8 (a static input_scale) and "
                             "dynamic_act_quant exclude each other")
        self.dynamic_act_quant = dynamic_act_quant
        self.b_scale_block_rows = b_scale_block_rows  # checked (>= 1) by the op
        self.in_features = in_features
        self.out_features = out_features
        self.block_size = block_size
        kb = quant.ceil_div(in_features, block_size)
        self.register_buffer("weight", torch.zeros(out_features, in_features,
                                                   dtype=torch.float8_e4m3fn, device=device))
        self.register_buffer("weight_scale", torch.ones(out_features, kb, device=device))
        self.register_buffer("input_scale", torch.ones((), device=device) if w8a8 else None)
        self.register_buffer("bias", torch.zeros(out_features, dtype=dtype, device=device)
                             if bias else None)
        self.register_buffer("prepacked", None, persistent=False)

    def prepack(self):
        """weight_scale prepacked (torch.ops.bqmm.fp8_prepack) for every forward()."""
        self.prepacked = torch.ops.bqmm.fp8_prepack(self.weight_scale)
        return self

    def unprepack(self):
        self.prepacked = None
        return self

    @classmethod
    def from_quantized(cls, weight, weight_scale, bias=None, input_scale=None, *,
                       block_size=128, dynamic_act_quant=False, b_scale_block_rows=1,
                       dtype=None):
        """weight float8_e4m3fn [N, K] (or uint8 codes), weight_scale float32 [N, k_blocks].
        b_scale_block_rows: R when weight_scale's rows repeat in aligned groups of R (block
        scales expanded to rows), else 1."""
        if weight.dtype == torch.uint8:
            weight = weight.view(torch.float8_e4m3fn)
        n, k = weight.shape
        dtype = dtype or (bias.dtype if bias is not None else torch.bfloat16)
        m = cls(k, n, block_size=block_size, bias=bias is not None,
                w8a8=input_scale is not None, dynamic_act_quant=dynamic_act_quant,
                b_scale_block_rows=b_scale_block_rows, dtype=dtype, device="meta")
        m.weight = weight.contiguous()
        m.weight_scale = weight_scale.to(device=weight.device, dtype=torch.float32).contiguous()
        if input_scale is not None:
            m.input_scale = torch.as_tensor(input_scale, dtype=torch.float32,
                                            device=weight.device).reshape(())
        if bias is not None:
            m.bias = bias.to(device=weight.device, dtype=dtype).contiguous()
        return m

    @classmethod
    def from_float(cls, weight, bias=None, *, block_size=128, input_scale=None,
                   dynamic_act_quant=False, dtype=None):
        """Quantizes weight [N, K] (bqmm.quant.quantize_fp8). input_scale: W8A8's static
        activation scale (a float or 1-element tensor), None for weight-only or dynamic.
        The scales are per row (b_scale_block_rows stays 1)."""
        b, s = quant.quantize_fp8(weight, block_size)
        dtype = dtype or (weight.dtype if weight.dtype in (torch.float16, torch.bfloat16)
                          else torch.bfloat16)
        return cls.from_quantized(b, s, bias, input_scale, block_size=block_size,
                                  dynamic_act_quant=dynamic_act_quant, dtype=dtype)

    def _attrs(self):
        return dict(block_size=self.block_size, dynamic_act_quant=self.dynamic_act_quant,
                    b_scale_block_rows=self.b_scale_block_rows)

    def _call_attrs(self):
        return _with_prepacked(self, self._attrs())

    def forward(self, x):
        return torch.ops.bqmm.fp8_matmul(x, self.weight, self.weight_scale, self.input_scale,
                                         self.bias, **self._call_attrs())

    def reference(self, x):
        return reference.fp8_matmul(x, self.weight, self.weight_scale, self.input_scale,
                                    self.bias, **self._attrs())

    def dequantized_weight(self, dtype=torch.float32):
        return quant.dequantize_fp8(self.weight, self.weight_scale, self.block_size, dtype)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"block_size={self.block_size}, bias={self.bias is not None}, "
                f"w8a8={self.input_scale is not None}, "
                f"dynamic_act_quant={self.dynamic_act_quant}"
                + (f", b_scale_block_rows={self.b_scale_block_rows}"
                   if self.b_scale_block_rows != 1 else ""))


class NBitsLinear(torch.nn.Module):
    """NBitsMatMul (MatMulNBits): qweight uint8 [out, k_blocks, block_size * bits / 8],
    scales [out, k_blocks] (activation dtype), optional zero_points (uint8 packed or typed),
    g_idx (int32 [in]) and bias."""

    def __init__(self, in_features, out_features, *, bits=4, block_size=128, bias=True,
                 zero_points="packed", g_idx=False, dtype=torch.bfloat16, device=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.bits = bits
        self.block_size = block_size
        self.accuracy_level = 0
        kb = quant.ceil_div(in_features, block_size)
        self.register_buffer("qweight", torch.zeros(out_features, kb, block_size * bits // 8,
                                                    dtype=torch.uint8, device=device))
        self.register_buffer("scales", torch.ones(out_features, kb, dtype=dtype, device=device))
        zp = None
        if zero_points == "packed":
            zp = torch.zeros(out_features, quant.ceil_div(kb * bits, 8), dtype=torch.uint8,
                             device=device)
        elif zero_points == "typed":
            zp = torch.zeros(out_features, kb, dtype=dtype, device=device)
        self.register_buffer("zero_points", zp)
        self.register_buffer("g_idx", torch.zeros(in_features, dtype=torch.int32, device=device)
                             if g_idx else None)
        self.register_buffer("bias", torch.zeros(out_features, dtype=dtype, device=device)
                             if bias else None)
        self.register_buffer("prepacked", None, persistent=False)

    def prepack(self):
        """scales and zero_points prepacked (torch.ops.bqmm.nbits_prepack) for every forward()."""
        self.prepacked = torch.ops.bqmm.nbits_prepack(self.scales, self.zero_points, **self._attrs())
        return self

    def unprepack(self):
        self.prepacked = None
        return self

    @classmethod
    def from_quantized(cls, qweight, scales, zero_points=None, g_idx=None, bias=None, *, K, N,
                       bits=4, block_size, accuracy_level=0, dtype=None):
        """MatMulNBits' inputs and attributes as they are (scales and zero points may be flat)."""
        dtype = dtype or scales.dtype
        device = qweight.device
        zp_kind = None if zero_points is None else (
            "packed" if zero_points.dtype == torch.uint8 else "typed")
        m = cls(K, N, bits=bits, block_size=block_size, bias=bias is not None,
                zero_points=zp_kind, g_idx=g_idx is not None, dtype=dtype, device="meta")
        m.qweight = qweight.contiguous()
        m.scales = scales.to(device=device, dtype=dtype).contiguous()
        m.zero_points = None if zero_points is None else (
            zero_points.to(device).contiguous() if zp_kind == "packed"
            else zero_points.to(device=device, dtype=dtype).contiguous())
        m.g_idx = None if g_idx is None else g_idx.to(device=device, dtype=torch.int32).contiguous()
        m.bias = None if bias is None else bias.to(device=device, dtype=dtype).contiguous()
        m.accuracy_level = accuracy_level
        return m

    @classmethod
    def from_float(cls, weight, bias=None, *, bits=4, block_size=128, zero_points="packed",
                   dtype=None):
        """Quantizes weight [N, K] (bqmm.quant.quantize_nbits); scales (and typed zero
        points) in `dtype`, default the weight's."""
        dtype = dtype or weight.dtype
        q = quant.quantize_nbits(weight, bits, block_size, zero_points, dtype)
        return cls.from_quantized(q["b"], q["scales"], q["zero_points"], None, bias,
                                  K=q["K"], N=q["N"], bits=bits, block_size=block_size,
                                  dtype=dtype)

    def _attrs(self):
        return dict(K=self.in_features, N=self.out_features, bits=self.bits,
                    block_size=self.block_size)

    def forward(self, x):
        return torch.ops.bqmm.nbits_matmul(x, self.qweight, self.scales, self.zero_points,
                                           self.g_idx, self.bias, accuracy_level=self.accuracy_level,
                                           **_with_prepacked(self, self._attrs()))

    def reference(self, x):
        return reference.nbits_matmul(x, self.qweight, self.scales, self.zero_points,
                                      self.g_idx, self.bias, **self._attrs())

    def dequantized_weight(self, dtype=torch.float32):
        return quant.dequantize_nbits(self.qweight, self.scales, self.zero_points, self.g_idx,
                                      dtype=dtype, **self._attrs())

    def extra_repr(self):
        zp = None if self.zero_points is None else (
            "packed" if self.zero_points.dtype == torch.uint8 else "typed")
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bits={self.bits}, block_size={self.block_size}, zero_points={zp}, "
                f"g_idx={self.g_idx is not None}, bias={self.bias is not None}")
