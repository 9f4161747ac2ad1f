#!/usr/bin/env python3
"""Time the bqmm ops from PyTorch and print one JSON object.

1. In a CUDA graph, back to back (the profiler's method, docs/PERF.md): M = 1,
   N = K = 8192, FP8 (fp16, block 128) and 4-bit (fp16, block 128, packed zero points),
   enough weight copies to exceed 4x the L2, rotated, `--repeat` calls in one graph and one
   event pair around the replay; the median over `--replays` replays, per call. With
   `--cpp-json FILE...` (bqmm-profile --json of the same cases) it adds the C++
   back-to-back time and the ratio (the target: within 3 %).
2. Eager host overhead: a small problem (M = 1, N = K = 256: the GPU is not the limit), the
   wall time per call of a loop of calls, for each op, for torch.nn.functional.linear of
   the same shape, and for at::empty of the output alone; the difference to F.linear is
   what the binding (argument parsing, validate, plan-cache lookup, workspace) adds.

  python python/benchmarks/op_overhead.py [--json out.json] [--cpp-json fp8.jsonl nbits.jsonl]
"""
import argparse
import json
import statistics
import sys
import time

import torch

import bqmm
from bqmm import quant
from graph_timing import graph_times_us, weight_copies


def make_case(op, n, k, dtype, copies):
    """A list of `copies` argument sets (same shape, separate weights) and the kwargs."""
    out = []
    for _ in range(copies):
        if op == "fp8":
            # Random codes over the finite E4M3 range, scales around 1/sqrt(K).
            codes = torch.randint(0, 254, (n, k), device="cuda", dtype=torch.uint8)
            codes = torch.where(codes >= 0x7F, codes + 1, codes)
            b = codes.view(torch.float8_e4m3fn)
            s = (0.5 + torch.rand(n, quant.ceil_div(k, 128), device="cuda")) / k ** 0.5
            out.append([b, s, None, None])
            kw = {"block_size": 128}
        else:
            kb = quant.ceil_div(k, 128)
            b = torch.randint(0, 256, (n, kb, 64), device="cuda", dtype=torch.uint8)
            s = ((0.5 + torch.rand(n, kb, device="cuda")) / k ** 0.5).to(dtype)
            z = torch.randint(0, 256, (n, quant.ceil_div(kb * 4, 8)), device="cuda",
                              dtype=torch.uint8)
            out.append([b, s, z, None, None])
            kw = dict(K=k, N=n, bits=4, block_size=128)
    return out, kw


def op_fn(op):
    return torch.ops.bqmm.fp8_matmul if op == "fp8" else torch.ops.bqmm.nbits_matmul


def graph_b2b_us(op, m, n, k, dtype, repeat, replays):
    per_copy = n * k if op == "fp8" else n * k // 2
    copies = weight_copies(per_copy)
    sets, kw = make_case(op, n, k, dtype, copies)
    x = torch.randn(m, k, device="cuda", dtype=dtype)
    fn = op_fn(op)
    # Warm-up (10 calls): handle, plans, cuBLAS.
    times = graph_times_us([lambda i=i: fn(x, *sets[i], **kw) for i in range(copies)], repeat, replays,
                           warmup=10)
    return {"op": op, "m": m, "n": n, "k": k, "dtype": str(dtype).replace("torch.", ""),
            "bits": 4 if op == "nbits" else None, "weight_copies": copies, "repeat": repeat,
            "replays": replays, "graph_b2b_us": statistics.median(times),
            "graph_b2b_us_min": min(times)}


def host_us_per_call(fn, iters):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) * 1e6 / iters


def eager_overhead(iters):
    n = k = 256
    dtype = torch.float16
    x = torch.randn(1, k, device="cuda", dtype=dtype)
    w = torch.randn(n, k, device="cuda", dtype=dtype)
    fp8 = bqmm.nn.Fp8Linear.from_float(w, None)
    nb = bqmm.nn.NBitsLinear.from_float(w, None, bits=4, block_size=128)
    f8, fn = torch.ops.bqmm.fp8_matmul, torch.ops.bqmm.nbits_matmul
    res = {
        "shape": {"m": 1, "n": n, "k": k, "dtype": "float16"}, "iters": iters,
        "bqmm_fp8_op_us": host_us_per_call(
            lambda: f8(x, fp8.weight, fp8.weight_scale, None, None, block_size=128), iters),
        "bqmm_nbits_op_us": host_us_per_call(
            lambda: fn(x, nb.qweight, nb.scales, nb.zero_points, None, None, K=k, N=n, bits=4,
                       block_size=128), iters),
        "bqmm_fp8_module_us": host_us_per_call(lambda: fp8(x), iters),
        "bqmm_nbits_module_us": host_us_per_call(lambda: nb(x), iters),
        "torch_linear_us": host_us_per_call(lambda: torch.nn.functional.linear(x, w), iters),
        "torch_empty_us": host_us_per_call(lambda: torch.empty(1, n, device="cuda", dtype=dtype),
                                           iters),
    }
    res["bqmm_fp8_minus_linear_us"] = res["bqmm_fp8_op_us"] - res["torch_linear_us"]
    res["bqmm_nbits_minus_linear_us"] = res["bqmm_nbits_op_us"] - res["torch_linear_us"]
    return res


def cpp_b2b(files, case):
    """b2b_us of the bqmm-profile JSON line that is this case, or None."""
    for path in files or []:
        try:
            lines = open(path).read().splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if (r.get("op") == case["op"] and r.get("m") == case["m"] and r.get("n") == case["n"]
                    and r.get("k") == case["k"] and r.get("b2b_us")
                    and (case["op"] == "fp8" or r.get("bits") == case["bits"])):
                return r["b2b_us"]
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--json", help="also write the JSON object to this file")
    p.add_argument("--cpp-json", nargs="*", help="bqmm-profile --json files of the same cases")
    p.add_argument("--n", type=int, default=8192)
    p.add_argument("--k", type=int, default=8192)
    p.add_argument("--repeat", type=int, default=100)
    p.add_argument("--replays", type=int, default=20)
    p.add_argument("--iters", type=int, default=2000)
    args = p.parse_args()
    if not torch.cuda.is_available() or not bqmm.extension_loaded():
        print(json.dumps({"skipped": "needs a CUDA device and the built extension"}))
        return 0
    torch.manual_seed(0)
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "graph": []}
    for op in ("fp8", "nbits"):
        case = graph_b2b_us(op, 1, args.n, args.k, torch.float16, args.repeat, args.replays)
        cpp = cpp_b2b(args.cpp_json, case)
        case["cpp_b2b_us"] = cpp
        case["ratio_to_cpp"] = case["graph_b2b_us"] / cpp if cpp else None
        case["within_3pct"] = (case["ratio_to_cpp"] <= 1.03) if cpp else None
        out["graph"].append(case)
    out["eager_overhead"] = eager_overhead(args.iters)
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
