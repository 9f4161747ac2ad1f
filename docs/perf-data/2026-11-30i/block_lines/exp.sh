#!/bin/bash
# EXPERIMENT: block-shared line loads (BQMM_XP_BLOCK_LINES=1) in FP8's line-load tile
mkdir -p $OUT/r
G=-DBQMM_GTEST_SOURCE_DIR=$PWD/.deps/googletest
cmake -S . -B b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 $G > $OUT/r/cfg.log 2>&1
t0=$(date +%s)
cmake --build b -j 16 --target bqmm-profile bqmm_gpu_tests > $OUT/r/build.log 2>&1 || { tail -30 $OUT/r/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
export BQMM_XP_BLOCK_LINES=1
b/tests/bqmm_gpu_tests --gtest_filter='Fp8Gemv*' --gtest_brief=1 > $OUT/r/gpu_tests_xp.txt 2>&1; echo "gpu tests xp rc=$?"; tail -3 $OUT/r/gpu_tests_xp.txt
for tool in racecheck memcheck; do
  compute-sanitizer --tool $tool b/tests/bqmm_gpu_tests --gtest_filter='Fp8GemvLines.Sanitize*:Fp8GemvMma.SanitizeEveryKSplit' --gtest_brief=1 > $OUT/r/$tool.txt 2>&1; echo "$tool rc=$?"; tail -2 $OUT/r/$tool.txt
done
unset BQMM_XP_BLOCK_LINES
suite() { # tag env...
  local tag=$1; shift
  env "$@" b/bqmm-profile --op fp8 --suite decode --json $OUT/r/$tag.jsonl > $OUT/r/$tag.txt 2>&1 || echo "FAIL $tag"
}
suite base1 BQMM_XP_BLOCK_LINES=0
suite xp1 BQMM_XP_BLOCK_LINES=1
suite base2 BQMM_XP_BLOCK_LINES=0
suite xp2 BQMM_XP_BLOCK_LINES=1
suite xp_ks8 BQMM_XP_BLOCK_LINES=1 BQMM_FP8_GEMV_KSPLIT=8
suite base_ks8 BQMM_XP_BLOCK_LINES=0 BQMM_FP8_GEMV_KSPLIT=8
python3 - <<PY
import json
def load(t):
    d={}
    for l in open("$OUT/r/"+t+".jsonl"):
        j=json.loads(l); d[(j['activation_dtype'],j['m'],j['n'],j['k'])]=j
    return d
B1,B2,X1,X2,X8,B8=[load(t) for t in ("base1","base2","xp1","xp2","xp_ks8","base_ks8")]
print("dtype M N K | base | xp | xp/base | ks8 xp | ks8 base | passed | plan")
for key in B1:
    b=min(B1[key]['median_us'],B2[key]['median_us']); x=min(X1[key]['median_us'],X2[key]['median_us'])
    ok=all(D[key]['passed'] for D in (X1,X2,X8))
    pl=B1[key]['plan']; pl=pl[pl.find('path='):pl.find(' fp8')]+' '+pl[pl.find('k_split'):pl.find('; workspace')]
    print(*key, f"| {b:.1f} | {x:.1f} | {x/b:.3f} | {X8[key]['median_us']:.1f} | {B8[key]['median_us']:.1f} | {ok} | {pl}")
PY
