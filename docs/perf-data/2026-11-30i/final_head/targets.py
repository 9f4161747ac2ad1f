# Lists every decode case of this directory's gpu_check against the targets of #3 (FP8) and
# #4 (N-bit): python3 targets.py > targets.txt
import json


def load(f):
    return [json.loads(line) for line in open(f)]


def big(d):
    return d['n'] * d['k'] >= 64 * 2**20


def pct(d, target):
    ok = d['pct_of_copy_bw'] >= target
    print(f"  %copy {d['activation_dtype']} M={d['m']} {d['n']}x{d['k']}: {d['median_us']:.1f} us "
          f"{d['pct_of_copy_bw']:.1f} % (b2b {d['b2b_pct_of_copy_bw']:.1f} %) target {target} %: "
          f"{'met' if ok else 'NOT met'}")


def ratio(rows, target):
    miss = [d for d in rows if d['speedup_vs_cublas'] < target]
    b2b = sum(d['b2b_speedup_vs_cublas'] >= target for d in rows)
    print(f"  x cuBLAS >= {target}: {len(rows) - len(miss)} of {len(rows)} cases met; b2b {b2b} of {len(rows)}")
    for d in miss:
        print(f"    miss {d['activation_dtype']} M={d['m']} {d['n']}x{d['k']}: {d['median_us']:.1f} us, "
              f"{d['speedup_vs_cublas']:.2f}x (b2b {d['b2b_speedup_vs_cublas']:.2f}x), "
              f"cuBLAS {d['cublas_bf16_us']:.1f} us")


fp8 = load("bench_decode.jsonl")
n8 = load("bench_nbits8_decode.jsonl")
n4 = load("bench_nbits4_decode.jsonl")
print("Targets of #3 / #4 on the gpu_check of 2026-11-30T10:27Z (commit 1ed793d), block 128, "
      "cold L2, per-run events (b2b in brackets)")
for name, rows, target, ratio_target in [("#3 FP8: M=1 >= 85 %", fp8, 85, 1.7),
                                         ("#4 8-bit: M=1 >= 85 %", n8, 85, 1.7),
                                         ("#4 4-bit: M=1 >= 75 %", n4, 75, 2.8)]:
    print(f"\n== {name}")
    for d in rows:
        if d['m'] == 1 and big(d):
            pct(d, target)
    if rows is fp8:
        print("  (M=8 >= 75 %:)")
        for d in rows:
            if d['m'] == 8 and big(d):
                pct(d, 75)
    ratio(rows, ratio_target)
print("\ncopy bandwidth", fp8[0]['copy_bw_tbps'], "TB/s; dates", fp8[0]['date'], n4[-1]['date'])
