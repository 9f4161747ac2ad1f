#!/bin/bash
# EXPERIMENT: FP8 line-load tile with contiguous pair ranges per warp (XP_FP8_CONTIGUOUS)
mkdir -p $OUT/r
G=-DBQMM_GTEST_SOURCE_DIR=$PWD/.deps/googletest
cfg() { cmake -S . -B $1 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 $G "-DCMAKE_CUDA_FLAGS=$2" > $OUT/r/cfg_$1.log 2>&1; }
cfg b0 ""; cfg bx "-DXP_FP8_CONTIGUOUS"
( cmake --build b0 -j 8 --target bqmm-profile > $OUT/r/b_b0.log 2>&1 ) &
( cmake --build bx -j 8 --target bqmm-profile bqmm_gpu_tests > $OUT/r/b_bx.log 2>&1 ) &
wait
ls b0/bqmm-profile bx/bqmm-profile bx/tests/bqmm_gpu_tests || { tail -20 $OUT/r/b_*.log; exit 1; }
bx/tests/bqmm_gpu_tests --gtest_filter='Fp8Gemv*' --gtest_brief=1 > $OUT/r/gpu_tests_xp.txt 2>&1; echo "gpu tests xp rc=$?"; tail -2 $OUT/r/gpu_tests_xp.txt
compute-sanitizer --tool racecheck bx/tests/bqmm_gpu_tests --gtest_filter='Fp8GemvLines.Sanitize*:Fp8GemvMma.SanitizeEveryKSplit' --gtest_brief=1 > $OUT/r/racecheck.txt 2>&1; echo "racecheck rc=$?"; tail -1 $OUT/r/racecheck.txt
compute-sanitizer --tool memcheck bx/tests/bqmm_gpu_tests --gtest_filter='Fp8GemvLines.Sanitize*:Fp8GemvMma.SanitizeEveryKSplit' --gtest_brief=1 > $OUT/r/memcheck.txt 2>&1; echo "memcheck rc=$?"; tail -1 $OUT/r/memcheck.txt
for rep in 1 2; do for v in b0 bx; do
  $v/bqmm-profile --op fp8 --suite decode --json $OUT/r/fp8_${v}_$rep.jsonl > /dev/null 2>&1 || echo "FAIL $v $rep"
done; done
python3 - <<PY
import json
def load(f):
    d={}
    for l in open("$OUT/r/"+f):
        j=json.loads(l); d[(j['activation_dtype'],j['m'],j['n'],j['k'])]=j
    return d
B=[load(f"fp8_b0_{r}.jsonl") for r in (1,2)]; X=[load(f"fp8_bx_{r}.jsonl") for r in (1,2)]
print("dtype M N K | interleaved | contiguous | ratio | passed | plan")
for key in B[0]:
    pl=B[0][key]['plan']
    if 'lines=1' not in pl: continue
    b=min(D[key]['median_us'] for D in B); x=min(D[key]['median_us'] for D in X)
    print(*key, f"| {b:.1f} | {x:.1f} | {x/b:.3f} | {all(D[key]['passed'] for D in X)} | {pl[pl.find('k_split'):pl.find('; workspace')]}")
PY
