#!/usr/bin/env python3
"""One decode step of a stack of Llama-3-8B-shaped layers, captured as one CUDA graph, with
the projection weights in BF16 (torch), FP8 (bqmm Fp8Linear), 8-bit and 4-bit (bqmm
NBitsLinear); prints tokens per second and the time per layer at batch 1, 8 and 64.

Layer (hidden 4096, 32 query / 8 KV heads of 128, MLP 14336), weights random N(0, 1/K):

    h = rms_norm(x);  q, k, v = qkv_proj(h)            # [4096 | 1024 | 1024]
    x = x + o_proj(attention_stand_in(q, k, v))
    h = rms_norm(x);  g, u = gate_up_proj(h)           # [14336 | 14336]
    x = x + down_proj(silu(g) * u)

q/k/v and gate/up are fused into one projection each, as serving engines do (--no-fuse runs
the seven projections separately). The attention itself (KV cache, softmax) does not depend
on the weight format and is replaced by a cheap elementwise stand-in that uses q, k and v.
The glue between the projections (each residual add with the norm after it, the stand-in,
SiLU with the gate product) is compiled by torch.compile, as serving engines fuse it;
--eager-glue runs it as torch's separate eager ops. Every format runs the same code; only
the Linear modules differ.

  python examples/decode_step.py [--layers 8] [--batches 1 8 64] [--eager-glue] [--json out.json]
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F

import bqmm

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, MLP = 4096, 32, 8, 128, 14336
KV = KV_HEADS * HEAD_DIM


def make_linear(fmt, w):
    if fmt == "bf16":
        lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, device="meta")
        lin.weight = torch.nn.Parameter(w, requires_grad=False)
        return lin
    if fmt == "fp8":
        return bqmm.nn.Fp8Linear.from_float(w, None, block_size=128, dtype=torch.bfloat16)
    bits = 8 if fmt == "int8" else 4
    return bqmm.nn.NBitsLinear.from_float(w, None, bits=bits, block_size=128,
                                          zero_points="packed", dtype=torch.bfloat16)


def rms_norm(x, w):
    return F.rms_norm(x, (HIDDEN,), w, 1e-5)


def add_rms_norm(x, y, w):
    """The residual add and the next norm: (x + y, rms_norm(x + y))."""
    x = x + y
    return x, rms_norm(x, w)


def attention_stand_in(q, k, v):
    """Every query head takes its KV group's k and v."""
    group = HEADS // KV_HEADS
    kv = (k * v).unsqueeze(-2).expand(*k.shape[:-1], group, KV).reshape(q.shape)
    return q * torch.sigmoid(kv)


def silu_mul(g, u):
    return F.silu(g) * u


class Glue:
    """The elementwise steps of a layer: eager torch ops, or each compiled by torch.compile."""

    def __init__(self, compiled):
        wrap = (lambda f: torch.compile(f, fullgraph=True, dynamic=False)) if compiled else (lambda f: f)
        self.rms_norm = wrap(rms_norm)
        self.add_rms_norm = wrap(add_rms_norm)
        self.attention_stand_in = wrap(attention_stand_in)
        self.silu_mul = wrap(silu_mul)


class Layer(torch.nn.Module):
    def __init__(self, weights, fmt, fuse, glue):
        super().__init__()
        self.fuse = fuse
        self.glue = glue
        if fuse:
            self.qkv = make_linear(fmt, torch.cat([weights["q"], weights["k"], weights["v"]]))
            self.gate_up = make_linear(fmt, torch.cat([weights["gate"], weights["up"]]))
        else:
            for name in ("q", "k", "v", "gate", "up"):
                setattr(self, name, make_linear(fmt, weights[name]))
        self.o = make_linear(fmt, weights["o"])
        self.down = make_linear(fmt, weights["down"])
        self.norm1 = torch.ones(HIDDEN, device="cuda", dtype=torch.bfloat16)
        self.norm2 = torch.ones(HIDDEN, device="cuda", dtype=torch.bfloat16)

    def forward(self, x, y):
        """The residual stream entering the layer is x + y (y: the previous layer's last
        projection, or None); returns the layer's (x, y)."""
        glue = self.glue
        if y is None:
            h = glue.rms_norm(x, self.norm1)
        else:
            x, h = glue.add_rms_norm(x, y, self.norm1)
        if self.fuse:
            q, k, v = self.qkv(h).split([HIDDEN, KV, KV], dim=-1)
        else:
            q, k, v = self.q(h), self.k(h), self.v(h)
        x, h = glue.add_rms_norm(x, self.o(glue.attention_stand_in(q, k, v)), self.norm2)
        if self.fuse:
            g, u = self.gate_up(h).split([MLP, MLP], dim=-1)
        else:
            g, u = self.gate(h), self.up(h)
        return x, self.down(glue.silu_mul(g, u))


class Stack(torch.nn.Module):
    def __init__(self, layer_weights, fmt, fuse, glue):
        super().__init__()
        self.layers = torch.nn.ModuleList(Layer(w, fmt, fuse, glue) for w in layer_weights)

    def forward(self, x):
        y = None
        for layer in self.layers:
            x, y = layer(x, y)
        return x + y


def random_weights(layers, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    shapes = {"q": (HIDDEN, HIDDEN), "k": (KV, HIDDEN), "v": (KV, HIDDEN), "o": (HIDDEN, HIDDEN),
              "gate": (MLP, HIDDEN), "up": (MLP, HIDDEN), "down": (HIDDEN, MLP)}
    out = []
    for _ in range(layers):
        out.append({name: (torch.randn(*s, device="cuda", generator=g) / s[1] ** 0.5)
                    .to(torch.bfloat16) for name, s in shapes.items()})
    return out


def time_graph(model, batch, replays):
    x = torch.randn(batch, HIDDEN, device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(2):  # warm-up outside the capture: handles, plans, cuBLAS
            model(x)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        y = model(x)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        graph.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3)  # us
    return statistics.median(times), x, y, graph


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8, 64])
    p.add_argument("--formats", nargs="+", default=["bf16", "fp8", "int8", "int4"])
    p.add_argument("--replays", type=int, default=20)
    p.add_argument("--no-fuse", action="store_true", help="run q/k/v and gate/up separately")
    p.add_argument("--eager-glue", action="store_true",
                   help="run the elementwise steps as eager torch ops instead of compiled")
    p.add_argument("--json", help="write the results to this file")
    args = p.parse_args()
    if not torch.cuda.is_available() or not bqmm.extension_loaded():
        print("decode_step: needs a CUDA device and the built bqmm extension; skipped")
        return 0

    weights = random_weights(args.layers, seed=0)
    glue = Glue(compiled=not args.eager_glue)
    results = []
    outputs = {}
    for fmt in args.formats:
        model = Stack(weights, fmt, not args.no_fuse, glue)
        torch.cuda.synchronize()
        for batch in args.batches:
            step_us, x, y, graph = time_graph(model, batch, args.replays)
            if batch == args.batches[0]:  # same input for every format: compare outputs
                torch.manual_seed(1)
                x.copy_(torch.randn_like(x))
                graph.replay()
                torch.cuda.synchronize()
                outputs[fmt] = y.float().clone()
            results.append({"format": fmt, "batch": batch, "layers": args.layers,
                            "step_us": step_us, "layer_us": step_us / args.layers,
                            "tokens_per_s": batch / (step_us * 1e-6)})
            del graph
        del model
        torch.cuda.empty_cache()

    base = {r["batch"]: r["step_us"] for r in results if r["format"] == "bf16"}
    for r in results:
        r["speedup_vs_bf16"] = base[r["batch"]] / r["step_us"] if r["batch"] in base else None
        if r["format"] in outputs and "bf16" in outputs and r["batch"] == args.batches[0]:
            ref = outputs["bf16"]
            r["rel_diff_vs_bf16"] = float((outputs[r["format"]] - ref).norm() / ref.norm())

    print(f"decode step, {args.layers} Llama-3-8B-shaped layers, one CUDA graph per step, "
          f"{torch.cuda.get_device_name(0)}, fused={not args.no_fuse}, "
          f"glue={'eager' if args.eager_glue else 'compiled'}")
    print(f"{'format':>6} {'batch':>5} {'step us':>9} {'layer us':>9} {'tokens/s':>10} {'vs bf16':>8}")
    for r in results:
        sp = f"{r['speedup_vs_bf16']:.2f}x" if r["speedup_vs_bf16"] else "-"
        print(f"{r['format']:>6} {r['batch']:>5} {r['step_us']:>9.1f} {r['layer_us']:>9.1f} "
              f"{r['tokens_per_s']:>10.0f} {sp:>8}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                       "fused": not args.no_fuse, "glue": "eager" if args.eager_glue else "compiled",
                       "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
