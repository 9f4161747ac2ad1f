"""Loaders on files written here with the real libraries: safetensors FP8 checkpoints in
the DeepSeek-V3 / Qwen3-FP8 layout, and ONNX models (onnx.helper) whose MatMulNBits nodes
ONNX Runtime's CPU provider executes. GPU-free checks use the modules' float64 reference;
the `gpu` ones run the modules' CUDA forward."""
import json

import pytest
import torch

import bqmm
from bqmm import quant, reference

# The IR version the models are written with: onnx writes its newest by default, which an
# older onnxruntime refuses to load ("Unsupported model IR version"); 10 covers opset 17.
ONNX_IR_VERSION = 10

safetensors = pytest.importorskip("safetensors.torch", reason="safetensors is not installed")


# ---------------------------------------------------------------- safetensors FP8

def _deepseek_layer(n, k, bn=128, bk=128):
    """weight e4m3 [N, K] and weight_scale_inv [ceil(N/bn), ceil(K/bk)] as DeepSeek-V3's
    quantizer writes them (one scale per bn x bk block, amax / 448)."""
    w = torch.randn(n, k) / k ** 0.5
    rn, ck = quant.ceil_div(n, bn), quant.ceil_div(k, bk)
    pad = torch.nn.functional.pad(w, (0, ck * bk - k, 0, rn * bn - n))
    blocks = pad.reshape(rn, bn, ck, bk)
    amax = blocks.abs().amax(dim=(1, 3))
    scale = torch.where(amax > 0, amax / 448.0, torch.ones_like(amax))
    codes = quant.e4m3_saturate(blocks / scale[:, None, :, None]).reshape(rn * bn, ck * bk)
    return codes[:n, :k].contiguous(), scale.float().contiguous()


def _dequant_2d(weight, scale_inv, bn=128, bk=128):
    n, k = weight.shape
    s = scale_inv.double().repeat_interleave(bn, 0)[:n].repeat_interleave(bk, 1)[:, :k]
    return weight.double() * s


@pytest.fixture
def fp8_checkpoint(tmp_path):
    torch.manual_seed(7)
    shapes = {"model.layers.0.self_attn.q_proj": (256, 384),   # multiples of 128
              "model.layers.0.mlp.down_proj": (300, 200),        # neither is
              "model.layers.0.mlp.up_proj": (130, 129)}
    tensors, expected = {}, {}
    for name, (n, k) in shapes.items():
        wq, s = _deepseek_layer(n, k)
        tensors[name + ".weight"] = wq
        tensors[name + ".weight_scale_inv"] = s
        expected[name] = _dequant_2d(wq, s)
    tensors["model.layers.0.mlp.up_proj.bias"] = torch.randn(130, dtype=torch.bfloat16)
    tensors["model.norm.weight"] = torch.ones(384, dtype=torch.bfloat16)  # not FP8: ignored
    path = tmp_path / "model.safetensors"
    safetensors.save_file(tensors, str(path))
    (tmp_path / "config.json").write_text(json.dumps(
        {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}))
    return path, expected, tensors


def test_safetensors_fp8_layout(fp8_checkpoint):
    path, expected, tensors = fp8_checkpoint
    mods = bqmm.loaders.load_fp8_safetensors(str(path))
    assert sorted(mods) == sorted(expected)
    for name, w in expected.items():
        m = mods[name]
        n, k = w.shape
        assert m.block_size == 128 and tuple(m.weight_scale.shape) == (n, quant.ceil_div(k, 128))
        # The expanded scales repeat over each 128-row block: the module promises it.
        assert m.b_scale_block_rows == 128 and "b_scale_block_rows=128" in repr(m)
        g = m.weight_scale[torch.arange(n) // 128 * 128]
        assert torch.equal(m.weight_scale, g)
        assert torch.equal(m.weight.view(torch.uint8), tensors[name + ".weight"].view(torch.uint8))
        assert torch.equal(m.dequantized_weight(torch.float64), w)
    assert mods["model.layers.0.mlp.up_proj"].bias is not None
    # A directory loads the same, block size from config.json.
    mods2 = bqmm.loaders.load_fp8_safetensors(str(path.parent))
    assert sorted(mods2) == sorted(expected)
    assert not any(m.dynamic_act_quant for m in mods2.values())
    assert all(m.b_scale_block_rows == 128 for m in mods2.values())
    # The checkpoints' serving mode: every module quantizes its input dynamically.
    dyn = bqmm.loaders.load_fp8_safetensors(str(path), dynamic_act_quant=True)
    assert all(m.dynamic_act_quant and m.input_scale is None for m in dyn.values())
    assert all(m.b_scale_block_rows == 128 for m in dyn.values())


def test_safetensors_fp8_row_block_from_config(tmp_path):
    # 64 x 128 blocks (config.json's weight_block_size): 64 rows share each scale.
    torch.manual_seed(8)
    wq, s = _deepseek_layer(200, 300, bn=64, bk=128)
    path = tmp_path / "m.safetensors"
    safetensors.save_file({"x.weight": wq, "x.weight_scale_inv": s}, str(path))
    (tmp_path / "config.json").write_text(json.dumps(
        {"quantization_config": {"quant_method": "fp8", "weight_block_size": [64, 128]}}))
    m = bqmm.loaders.load_fp8_safetensors(str(tmp_path))["x"]
    assert (m.block_size, m.b_scale_block_rows) == (128, 64)
    assert torch.equal(m.dequantized_weight(torch.float64), _dequant_2d(wq, s, bn=64, bk=128))
    x = torch.randn(2, 300, dtype=torch.bfloat16)
    assert tuple(m.reference(x).shape) == (2, 200)  # the reference checks the promise


def test_safetensors_bad_scale_shape(tmp_path):
    wq, s = _deepseek_layer(200, 300)
    path = tmp_path / "bad.safetensors"
    safetensors.save_file({"x.weight": wq, "x.weight_scale_inv": s[:, :2].contiguous()}, str(path))
    with pytest.raises(ValueError, match=r"weight_scale_inv: expected shape \[2, 3\]"):
        bqmm.loaders.load_fp8_safetensors(str(path))


@pytest.mark.gpu
@pytest.mark.parametrize("rows,dynamic", [(3, False), (300, False), (300, True)])
def test_safetensors_fp8_forward(fp8_checkpoint, rows, dynamic):
    # 300 rows, dynamic: the W8A8 GEMMs, which may read one scale per 128 rows of B.
    path, expected, _ = fp8_checkpoint
    mods = bqmm.loaders.load_fp8_safetensors(str(path), device="cuda", dynamic_act_quant=dynamic)
    for name, w in expected.items():
        m = mods[name]
        x = torch.randn(rows, w.shape[1], device="cuda", dtype=torch.bfloat16)
        y = m(x)
        if dynamic:  # the input quantized as the op does
            y_ref = m.reference(x)
        else:
            y_ref = x.double() @ w.t().to(x.device)
            if m.bias is not None:
                y_ref = y_ref + m.bias.double()
        reference.check(y, y_ref)


# ---------------------------------------------------------------- ONNX

onnx = pytest.importorskip("onnx", reason="onnx is not installed")


def _nbits_model(path, layers, dtype=torch.float32):
    """A chain of MatMulNBits nodes (com.microsoft) with the weights as initializers:
    layers = [(N, K, bits, block_size, zero_points, bias)]."""
    from onnx import TensorProto, helper, numpy_helper

    elem = {torch.float32: TensorProto.FLOAT, torch.float16: TensorProto.FLOAT16}[dtype]
    nodes, inits = [], []
    inp = "A"
    k0 = layers[0][1]
    for i, (n, k, bits, bs, zp, bias) in enumerate(layers):
        w = torch.randn(n, k) / k ** 0.5
        q = quant.quantize_nbits(w, bits, bs, zp, dtype)
        names = [inp, f"B{i}", f"scales{i}", "", "", ""]
        inits.append(numpy_helper.from_array(q["b"].numpy(), f"B{i}"))
        inits.append(numpy_helper.from_array(q["scales"].reshape(-1).numpy(), f"scales{i}"))
        if q["zero_points"] is not None:
            names[3] = f"zp{i}"
            inits.append(numpy_helper.from_array(q["zero_points"].reshape(-1).numpy(), f"zp{i}"))
        if bias:
            names[5] = f"bias{i}"
            inits.append(numpy_helper.from_array((torch.randn(n) * 0.1).to(dtype).numpy(), f"bias{i}"))
        while names and names[-1] == "":
            names.pop()
        out = f"Y{i}"
        nodes.append(helper.make_node("MatMulNBits", names, [out], name=f"layer{i}",
                                      domain="com.microsoft", K=k, N=n, bits=bits, block_size=bs))
        inp = out
    graph = helper.make_graph(nodes, "nbits", [helper.make_tensor_value_info("A", elem, ["M", k0])],
                              [helper.make_tensor_value_info(inp, elem, ["M", layers[-1][0]])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)],
                              ir_version=ONNX_IR_VERSION)
    onnx.save(model, str(path))
    return model


LAYERS = [(96, 256, 4, 32, "packed", False), (64, 96, 8, 16, "none", True),
          (48, 64, 4, 64, "typed", False)]


def _ort_run(path, a):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return torch.from_numpy(sess.run(None, {"A": a.numpy()})[0])


@pytest.mark.parametrize("layers", [LAYERS[:1], LAYERS[:2], LAYERS],
                         ids=["4bit_packed", "plus_8bit_bias", "plus_typed_zp"])
def test_onnx_nbits_reference_matches_onnxruntime(tmp_path, layers):
    torch.manual_seed(3)
    path = tmp_path / "m.onnx"
    _nbits_model(path, layers)
    try:
        a = torch.randn(5, layers[0][1])
        y_ort = _ort_run(path, a)
    except Exception as e:  # typed zero points / bias need a recent onnxruntime
        if "Exception" in type(e).__name__ or "Fail" in type(e).__name__:
            pytest.skip(f"onnxruntime cannot run this model: {e}")
        raise
    mods = bqmm.loaders.load_onnx(str(path))
    assert list(mods) == [f"layer{i}" for i in range(len(layers))]
    x = a.double()
    for i, (n, k, bits, bs, zp, bias) in enumerate(layers):
        m = mods[f"layer{i}"]
        assert (m.in_features, m.out_features, m.bits, m.block_size) == (k, n, bits, bs)
        assert (m.bias is not None) == bias
        x = m.reference(x)
    reference.check(x.float(), y_ort.double())  # float32 bound, 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("layers", [LAYERS[:1], LAYERS], ids=["4bit_packed", "three_layers"])
def test_onnx_nbits_module_matches_onnxruntime(tmp_path, layers):
    torch.manual_seed(4)
    path = tmp_path / "m.onnx"
    _nbits_model(path, layers)
    a = torch.randn(3, layers[0][1])
    try:
        y_ort = _ort_run(path, a)
    except Exception as e:
        if "Exception" in type(e).__name__ or "Fail" in type(e).__name__:
            pytest.skip(f"onnxruntime cannot run this model: {e}")
        raise
    mods = bqmm.loaders.load_onnx(str(path), device="cuda")
    x = a.cuda()
    for i in range(len(layers)):
        x = mods[f"layer{i}"](x)
    reference.check(x, y_ort.double())


def test_onnx_fp8_node_initializers(tmp_path):
    from onnx import TensorProto, helper, numpy_helper

    n, k, bs = 40, 200, 64
    w = torch.randn(n, k) / k ** 0.5
    b, s = quant.quantize_fp8(w, bs)
    b_init = helper.make_tensor("B", TensorProto.FLOAT8E4M3FN, [n, k],
                                b.view(torch.uint8).numpy().tobytes(), raw=True)
    inits = [b_init, numpy_helper.from_array(s.numpy(), "b_scale"),
             numpy_helper.from_array(torch.tensor(0.02).numpy(), "a_scale")]
    node = helper.make_node("MatMulBlockQuantizedFp8Weight", ["A", "B", "b_scale", "a_scale"],
                            ["Y"], name="fp8", domain="com.microsoft", block_size=bs)
    graph = helper.make_graph([node], "fp8",
                              [helper.make_tensor_value_info("A", TensorProto.FLOAT16, ["M", k])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT16, ["M", n])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)],
                              ir_version=ONNX_IR_VERSION)
    path = tmp_path / "fp8.onnx"
    onnx.save(model, str(path))
    mods = bqmm.loaders.load_onnx(str(path), dtype=torch.float16)
    m = mods["fp8"]
    assert m.block_size == bs and m.bias is None
    assert m.b_scale_block_rows == 1  # per-row scales of 40 rows: not one shared group
    # The same node with every row's scales equal (a 128 x 128-block checkpoint converted to
    # ONNX): the loader reads the promise off b_scale.
    inits[1] = numpy_helper.from_array(s[:1].expand(n, -1).contiguous().numpy(), "b_scale")
    graph = helper.make_graph([node], "fp8",
                              [helper.make_tensor_value_info("A", TensorProto.FLOAT16, ["M", k])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT16, ["M", n])],
                              inits)
    shared = tmp_path / "fp8_shared.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                       helper.make_opsetid("com.microsoft", 1)],
                                ir_version=ONNX_IR_VERSION), str(shared))
    assert bqmm.loaders.load_onnx(str(shared), dtype=torch.float16)["fp8"].b_scale_block_rows == 128
    assert torch.equal(m.weight.view(torch.uint8), b.view(torch.uint8))
    assert torch.equal(m.weight_scale, s)
    assert float(m.input_scale) == pytest.approx(0.02)
    x = torch.randn(2, k, dtype=torch.float16)
    y = m.reference(x)
    assert tuple(y.shape) == (2, n)


def test_onnx_non_initializer_weight_is_rejected(tmp_path):
    from onnx import TensorProto, helper

    node = helper.make_node("MatMulNBits", ["A", "B", "S"], ["Y"], name="x",
                            domain="com.microsoft", K=32, N=8, bits=4, block_size=32)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("A", TensorProto.FLOAT, [1, 32]),
                      helper.make_tensor_value_info("B", TensorProto.UINT8, [8, 1, 16]),
                      helper.make_tensor_value_info("S", TensorProto.FLOAT, [8])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 8])])
    with pytest.raises(ValueError, match="not an initializer"):
        bqmm.loaders.load_onnx(helper.make_model(graph))
