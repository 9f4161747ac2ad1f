"""The benchmarks' timing, as bqmm-profile's back-to-back method: calls captured in one CUDA
graph over rotating weight copies that together exceed 4x the L2 (every call reads its
weights from HBM), the graph replayed, each replay's time divided by its calls."""
import math

import torch


def weight_copies(bytes_per_copy, l2_bytes=None):
    """Copies of a weight of `bytes_per_copy` that together exceed 4x the L2 (at least 2)."""
    if l2_bytes is None:
        l2_bytes = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20)
    return max(2, math.ceil(4 * l2_bytes / bytes_per_copy) + 1)


def graph_times_us(calls, repeat, replays, warmup=5):
    """Per-call microseconds of `repeat` calls (calls[i % len(calls)]) captured in one
    graph, one value per replay, after `warmup` eager calls on a side stream (handles,
    plans, cuBLAS workspaces made before the capture)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(warmup):
            calls[i % len(calls)]()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(repeat):
            calls[i % len(calls)]()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3 / repeat)
    return times
