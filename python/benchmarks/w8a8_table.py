#!/usr/bin/env python3
"""W8A8 against PyTorch's FP8 GEMMs, back to back in CUDA graphs (the profiler's method).

For each M in --m and (N, K) in the prefill suite's shapes, float16 or bfloat16 activations
(--dtype), block 128, one JSON line per case with the graph back-to-back time per call
(median over --replays replays of --repeat calls over rotating weight copies that exceed
4x the L2) of:
  bqmm_static    torch.ops.bqmm.fp8_matmul with a_scale (W8A8 static; quantize pass included)
  bqmm_dynamic   the same with dynamic_act_quant=True (per row and K block scales)
  torch_bf16     dense a @ w.T in bfloat16 (cuBLAS)
  scaled_tensor  torch._scaled_mm, per-tensor scales (activation already e4m3)
  scaled_1x128   torch._scaled_mm, 1x128 activation scales and 1x128 weight scales (the
                 operator's per-(row, K block) weight-scale layout; activation already e4m3)
  bqmm_static_r128 / bqmm_dynamic_r128
                 the two bqmm modes on weight scales shared by 128-row blocks (each block's
                 first row's, repeated) with b_scale_block_rows=128
  scaled_128x128 torch._scaled_mm, 1x128 activation scales and those 128 x 128 weight
                 blocks' scales (DeepSeek-V3's layout; activation already e4m3)
A variant this torch cannot run records its error instead of a time. TFLOP/s = 2MNK / t.

  python python/benchmarks/w8a8_table.py [--m 64 256 1024 4096] [--json out.jsonl] [--markdown]
"""
import argparse
import json
import statistics
import sys

import torch

import bqmm
from graph_timing import graph_times_us, weight_copies

SHAPES = [(8192, 8192), (14336, 4096), (4096, 14336), (28672, 8192)]
BLOCK = 128


def e4m3_weights(n, k, copies):
    """`copies` random e4m3 weights [N, K] (finite codes) with per-(row, block) scales."""
    out = []
    for _ in range(copies):
        codes = torch.randint(0, 254, (n, k), device="cuda", dtype=torch.uint8)
        codes = torch.where(codes >= 0x7F, codes + 1, codes)
        scales = (0.5 + torch.rand(n, (k + BLOCK - 1) // BLOCK, device="cuda")) / k ** 0.5
        out.append((codes.view(torch.float8_e4m3fn), scales))
    return out


def graph_us(calls, repeat, replays):
    """Median per-call time of `repeat` calls (calls[i % len]) captured in one graph."""
    return statistics.median(graph_times_us(calls, repeat, replays))


def variants(m, n, k, dtype, weights):
    """name -> list of zero-argument calls (one per weight copy)."""
    x = torch.randn(m, k, device="cuda", dtype=dtype)
    a_scale = (x.abs().amax().float() / 448).reshape(())
    kb = (k + BLOCK - 1) // BLOCK
    xq = (x.float() / a_scale).clamp(-448, 448).to(torch.float8_e4m3fn)
    # Activation 1x128 scales for _scaled_mm's blockwise form: [M, K / 128], outer-dim-major.
    xs = (x.float().reshape(m, kb, BLOCK).abs().amax(-1) / 448).clamp_min(1e-12)
    xq_blk = (x.float().reshape(m, kb, BLOCK) / xs[..., None]).to(torch.float8_e4m3fn).reshape(m, k)
    xs_t = xs.t().contiguous().t()
    one = torch.ones((), device="cuda")
    w_scales_t = [s.t().contiguous() for _, s in weights]
    # 128 x 128 weight blocks: each block's first row's scales, [ceil(N / 128), K / 128],
    # repeated over its rows for the operator (the b_scale_block_rows=128 promise).
    w_block_scales = [s[::128].contiguous() for _, s in weights]
    w_rows128 = [bs.repeat_interleave(128, 0)[:n].contiguous() for bs in w_block_scales]
    # _scaled_mm checks scale_b.t() as the 128 x 128 scales of b.t() = W [N, K]: row-major
    # [N / 128, K / 128], so scale_b is that tensor's transposed view.
    w_block_scales_t = [bs.t() for bs in w_block_scales]
    dense = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(len(weights))]
    xb = x.to(torch.bfloat16)
    out_dtype = dtype
    return {
        "bqmm_static": [lambda b=b, s=s: torch.ops.bqmm.fp8_matmul(x, b, s, a_scale, None, block_size=BLOCK)
                        for b, s in weights],
        "bqmm_dynamic": [lambda b=b, s=s: torch.ops.bqmm.fp8_matmul(x, b, s, None, None, block_size=BLOCK,
                                                                   dynamic_act_quant=True)
                         for b, s in weights],
        "torch_bf16": [lambda w=w: xb @ w.t() for w in dense],
        "scaled_tensor": [lambda b=b: torch._scaled_mm(xq, b.t(), scale_a=a_scale, scale_b=one,
                                                       out_dtype=out_dtype)
                          for b, _ in weights],
        # torch's blockwise 1x128 form: scale_a [M, K / 128] outer-dim-major (xs_t), scale_b
        # [K / 128, N] with N contiguous (the weight scales transposed once, before timing).
        "scaled_1x128": [lambda b=b, st=st: torch._scaled_mm(xq_blk, b.t(), scale_a=xs_t, scale_b=st,
                                                             out_dtype=out_dtype)
                         for (b, _), st in zip(weights, w_scales_t)],
        "bqmm_static_r128": [lambda b=b, s=s: torch.ops.bqmm.fp8_matmul(x, b, s, a_scale, None, block_size=BLOCK,
                                                                       b_scale_block_rows=128)
                             for (b, _), s in zip(weights, w_rows128)],
        "bqmm_dynamic_r128": [lambda b=b, s=s: torch.ops.bqmm.fp8_matmul(x, b, s, None, None, block_size=BLOCK,
                                                                        dynamic_act_quant=True,
                                                                        b_scale_block_rows=128)
                              for (b, _), s in zip(weights, w_rows128)],
        # torch's 128 x 128 form: scale_b [K / 128, N / 128], the view above.
        "scaled_128x128": [lambda b=b, bs=bs: torch._scaled_mm(xq_blk, b.t(), scale_a=xs_t, scale_b=bs,
                                                               out_dtype=out_dtype)
                           for (b, _), bs in zip(weights, w_block_scales_t)],
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--m", type=int, nargs="*", default=[64, 256, 1024, 4096])
    p.add_argument("--dtype", choices=["float16", "bfloat16"], default="bfloat16")
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("--replays", type=int, default=10)
    p.add_argument("--json", help="write the JSON lines to this file too")
    p.add_argument("--markdown", action="store_true", help="print a markdown table after the JSON")
    args = p.parse_args()
    if not torch.cuda.is_available() or not bqmm.extension_loaded():
        print(json.dumps({"skipped": "needs a CUDA device and the built extension"}))
        return 0
    torch.manual_seed(0)
    dtype = getattr(torch, args.dtype)
    rows = []
    for n, k in SHAPES:
        weights = e4m3_weights(n, k, weight_copies(n * k))
        for m in args.m:
            rec = {"m": m, "n": n, "k": k, "dtype": args.dtype, "block_size": BLOCK,
                   "device": torch.cuda.get_device_name(0), "torch": torch.__version__}
            for name, calls in variants(m, n, k, dtype, weights).items():
                try:
                    us = graph_us(calls, args.repeat, args.replays)
                    rec[name + "_us"] = us
                    rec[name + "_tflops"] = 2 * m * n * k / us / 1e6
                except Exception as e:  # noqa: BLE001  (a variant this torch lacks)
                    rec[name + "_error"] = f"{type(e).__name__}: {e}"[:300]
                torch.cuda.synchronize()
            print(json.dumps(rec), flush=True)
            rows.append(rec)
    if args.json:
        with open(args.json, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    if args.markdown:
        names = ["bqmm_static", "bqmm_dynamic", "torch_bf16", "scaled_tensor", "scaled_1x128",
                 "bqmm_static_r128", "bqmm_dynamic_r128", "scaled_128x128"]
        print("| N x K | M | " + " | ".join(n + " us (TFLOP/s)" for n in names) + " |")
        print("|---|---|" + "---|" * len(names))
        for r in rows:
            cells = [f"{r[n + '_us']:.1f} ({r[n + '_tflops']:.0f})" if n + "_us" in r else "-" for n in names]
            print(f"| {r['n']} x {r['k']} | {r['m']} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
