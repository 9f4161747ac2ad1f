"""Loaders of real checkpoint formats into bqmm.nn modules.

* load_fp8_safetensors: FP8 checkpoints in the DeepSeek-V3 / Qwen3-FP8 layout, where
  `<name>.weight` is float8_e4m3fn [N, K] and `<name>.weight_scale_inv` float32
  [ceil(N / bn), ceil(K / bk)] scales one bn x bk block (128 x 128; dequantized weight =
  weight * weight_scale_inv). Fp8WeightMatMul has one scale per row and K block, so the
  block scales are repeated over their bn rows: b_scale[n, j] = weight_scale_inv[n // bn, j],
  with block_size = bk and b_scale_block_rows = bn (the rows share each scale in aligned
  groups of bn, which the operator's W8A8 GEMMs use with 128). Shapes that are not
  multiples of the block are handled (the last row and column blocks are partial).
* load_onnx: every MatMulNBits and MatMulBlockQuantizedFp8Weight node (domain
  com.microsoft) of an ONNX model, its initializers and attributes read with the `onnx`
  package, as NBitsLinear / Fp8Linear modules keyed by node name (an FP8 module's
  b_scale_block_rows found from its b_scale: quant.b_scale_block_rows).
"""
import json
import os

import torch

from . import nn, quant

_FP8_SCALE_SUFFIX = ".weight_scale_inv"


def _block_size_from_config(path):
    """quantization_config.weight_block_size of a config.json beside the checkpoint."""
    d = path if os.path.isdir(path) else os.path.dirname(path)
    cfg = os.path.join(d, "config.json")
    if not os.path.exists(cfg):
        return None
    with open(cfg) as f:
        q = json.load(f).get("quantization_config") or {}
    bs = q.get("weight_block_size")
    return tuple(bs) if bs else None


def expand_block_scales(scale_inv, n, k, block_n, block_k):
    """[ceil(N / bn), ceil(K / bk)] block scales -> the operator's [N, ceil(K / bk)]."""
    rows = quant.ceil_div(n, block_n)
    cols = quant.ceil_div(k, block_k)
    if tuple(scale_inv.shape) != (rows, cols):
        raise ValueError(f"weight_scale_inv: expected shape [{rows}, {cols}] for a weight of "
                         f"[{n}, {k}] in {block_n} x {block_k} blocks but got "
                         f"{list(scale_inv.shape)}")
    return scale_inv.float().repeat_interleave(block_n, dim=0)[:n].contiguous()


def fp8_linear_from_block_scales(weight, scale_inv, bias=None, *, block_size=(128, 128),
                                 dynamic_act_quant=False, dtype=torch.bfloat16, device=None):
    """One DeepSeek-V3-layout layer (weight e4m3 [N, K], weight_scale_inv) -> Fp8Linear.
    dynamic_act_quant: quantize its input per token and K block, as these checkpoints
    are served (default: weight-only, the input at full precision). The module's
    b_scale_block_rows is bn: the expanded scales repeat over each block's rows."""
    block_n, block_k = block_size
    if weight.dtype == torch.uint8:
        weight = weight.view(torch.float8_e4m3fn)
    if weight.dtype != torch.float8_e4m3fn or weight.dim() != 2:
        raise ValueError(f"weight: expected float8_e4m3fn [N, K] but got {weight.dtype} "
                         f"{list(weight.shape)}")
    n, k = weight.shape
    b_scale = expand_block_scales(scale_inv, n, k, block_n, block_k)
    if device is not None:
        weight, b_scale = weight.to(device), b_scale.to(device)
        bias = None if bias is None else bias.to(device)
    # expand_block_scales checked weight_scale_inv's shape against (bn, bk), so the rows of
    # b_scale are equal in aligned groups of bn: the promise b_scale_block_rows makes.
    return nn.Fp8Linear.from_quantized(weight, b_scale, bias, block_size=block_k,
                                       dynamic_act_quant=dynamic_act_quant,
                                       b_scale_block_rows=block_n, dtype=dtype)


def load_fp8_safetensors(path, *, block_size=None, dynamic_act_quant=False,
                         dtype=torch.bfloat16, device=None, prefix=""):
    """Fp8Linear modules of every `<name>.weight` that has a `<name>.weight_scale_inv` in
    the safetensors file `path` (or every *.safetensors file of a directory), keyed by
    <name>. block_size: (bn, bk), default config.json's weight_block_size, else (128, 128).
    dynamic_act_quant: every module quantizes its input per token and K block (the
    checkpoints' own serving mode). Every module's b_scale_block_rows is bn. Other tensors
    (norms, embeddings) are not returned; read them with safetensors itself."""
    from safetensors import safe_open

    files = ([os.path.join(path, f) for f in sorted(os.listdir(path)) if f.endswith(".safetensors")]
             if os.path.isdir(path) else [path])
    block_size = tuple(block_size or _block_size_from_config(path) or (128, 128))
    tensors = {}
    for f in files:
        with safe_open(f, framework="pt") as h:
            for key in h.keys():
                if key.startswith(prefix):
                    tensors[key] = h.get_tensor(key)
    modules = {}
    for key, scale_inv in tensors.items():
        if not key.endswith(_FP8_SCALE_SUFFIX):
            continue
        name = key[: -len(_FP8_SCALE_SUFFIX)]
        weight = tensors.get(name + ".weight")
        if weight is None:
            raise ValueError(f"{key}: no {name}.weight beside it")
        modules[name] = fp8_linear_from_block_scales(
            weight, scale_inv, tensors.get(name + ".bias"), block_size=block_size,
            dynamic_act_quant=dynamic_act_quant, dtype=dtype, device=device)
    return modules


# ---------------------------------------------------------------- ONNX

_MS_DOMAIN = "com.microsoft"
_NBITS_OP = "MatMulNBits"
_FP8_OP = "MatMulBlockQuantizedFp8Weight"


def _tensor_to_torch(t):
    """An onnx TensorProto -> torch tensor (FLOAT8E4M3FN as float8_e4m3fn)."""
    import numpy as np
    from onnx import TensorProto, numpy_helper

    if t.data_type == TensorProto.FLOAT8E4M3FN:
        if t.raw_data:
            codes = np.frombuffer(t.raw_data, dtype=np.uint8).copy()
        else:  # codes stored one per int32
            codes = np.asarray(t.int32_data, dtype=np.int32).astype(np.uint8)
        u8 = torch.from_numpy(codes.reshape(tuple(t.dims)))
        return u8.view(torch.float8_e4m3fn)
    arr = numpy_helper.to_array(t)
    if arr.dtype == np.uint16 and t.data_type == TensorProto.BFLOAT16:
        return torch.from_numpy(arr.astype(np.int32)).to(torch.int16).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(arr).copy())


def _attrs(node):
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def load_onnx(model, *, device=None, dtype=None):
    """{node name: module} for every MatMulNBits (-> NBitsLinear) and
    MatMulBlockQuantizedFp8Weight (-> Fp8Linear) node of `model` (a path or ModelProto).
    Weights, scales, zero points, g_idx and bias must be initializers. The NBits modules'
    dtype is the scales' (ONNX's T1); `dtype` sets the FP8 modules' activation dtype
    (default: the bias's, else bfloat16)."""
    import onnx

    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(model)
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}

    def init(node, i, what):
        if i >= len(node.input) or not node.input[i]:
            return None
        name = node.input[i]
        if name not in inits:
            raise ValueError(f"{node.op_type} node {node.name!r}: {what} ({name!r}) is not an "
                             "initializer")
        t = _tensor_to_torch(inits[name])
        return t if device is None else t.to(device)

    modules = {}
    for idx, node in enumerate(graph.node):
        if node.domain != _MS_DOMAIN or node.op_type not in (_NBITS_OP, _FP8_OP):
            continue
        name = node.name or f"{node.op_type}_{idx}"
        a = _attrs(node)
        if node.op_type == _NBITS_OP:
            # Inputs: A, B, scales, zero_points, g_idx, bias; attributes K, N, bits,
            # block_size, accuracy_level.
            b, scales = init(node, 1, "B"), init(node, 2, "scales")
            zp, g_idx, bias = init(node, 3, "zero_points"), init(node, 4, "g_idx"), init(node, 5, "bias")
            modules[name] = nn.NBitsLinear.from_quantized(
                b, scales, zp, g_idx, bias, K=int(a["K"]), N=int(a["N"]),
                bits=int(a.get("bits", 4)), block_size=int(a["block_size"]),
                accuracy_level=int(a.get("accuracy_level", 0)))
        else:
            # Inputs: A, B (float8e4m3fn [N, K]), b_scale (float32 [N, k_blocks]), a_scale,
            # bias; attribute block_size (default 128). ONNX's operator has no
            # b_scale_block_rows: it is read off b_scale (128 where a 128 x 128-block
            # checkpoint was expanded to rows, else 1).
            b, b_scale = init(node, 1, "B"), init(node, 2, "b_scale")
            a_scale, bias = init(node, 3, "a_scale"), init(node, 4, "bias")
            modules[name] = nn.Fp8Linear.from_quantized(
                b, b_scale, bias, a_scale, block_size=int(a.get("block_size", 128)),
                b_scale_block_rows=quant.b_scale_block_rows(b_scale), dtype=dtype)
    return modules
