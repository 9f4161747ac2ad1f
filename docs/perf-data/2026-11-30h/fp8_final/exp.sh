#!/bin/bash
# final: gpu_check build,test,sanitize; FP8 held-out A/B of default plans against ab-base (572da06)
mkdir -p $OUT/r
G=-DBQMM_GTEST_SOURCE_DIR=$PWD/.deps/googletest
( cmake -S ab-base -B build-ab -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 $G > $OUT/r/ab_build.log 2>&1 && cmake --build build-ab -j 6 --target bqmm-profile >> $OUT/r/ab_build.log 2>&1 ) &
OUT=$OUT/r bash scripts/gpu_check.sh build,test,sanitize > $OUT/r/gpu_check.txt 2>&1; tail -8 $OUT/r/gpu_check.txt
wait
ls build-ab/bqmm-profile build-gpu/bqmm-profile || { tail -20 $OUT/r/ab_build.log; exit 1; }
J=$OUT/r/heldout_fp8.jsonl
run() { # tag profiler env...
  local tag=$1 P=$2; shift 2
  env "$@" $P --op fp8 --activation-dtype $dt --m $m --n $n --k $k --warmup 5 --repeat 60 --json $OUT/r/one.json > $OUT/r/one.txt 2>&1 || { echo "FAIL $tag $dt $m $n $k"; tail -3 $OUT/r/one.txt; return; }
  sed "s/^{/{\"tree\":\"$tag\",/" $OUT/r/one.json >> $J
  python3 -c "
import json,re
for l in open('$OUT/r/one.json'):
    d=json.loads(l); print('$tag', 'fp8', '$dt', d['m'], d['n'], d['k'], round(d['median_us'],2), d['passed'], re.search(r'k_split=\d+', d['plan']).group(0), 'regs168' if 'regs=168' in d['plan'] else '')
"
}
for rep in 1 2; do
while read dt m n k; do
  [ -z "$dt" ] && continue
  run base build-ab/bqmm-profile X=1
  run head build-gpu/bqmm-profile X=1
done < cases_fp8_heldout.txt
done | tee $OUT/r/heldout_fp8.txt
cd $OUT && tar czf all.tgz r && rm -rf r
