#!/bin/bash
# real-model shapes the 168-register rule now takes: A/B of default plans against ab-base (572da06)
mkdir -p $OUT/r
G=-DBQMM_GTEST_SOURCE_DIR=$PWD/.deps/googletest
cfg() { cmake -S $1 -B $2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 $G > $OUT/r/cfg_$2.log 2>&1; }
cfg . bh; cfg ab-base ba
( cmake --build bh -j 8 --target bqmm-profile > $OUT/r/b_bh.log 2>&1 ) &
( cmake --build ba -j 8 --target bqmm-profile > $OUT/r/b_ba.log 2>&1 ) &
wait
ls bh/bqmm-profile ba/bqmm-profile || { tail -20 $OUT/r/b_*.log; exit 1; }
J=$OUT/r/models.jsonl
run() { # tag profiler
  local tag=$1 P=$2
  $P --op $op $bits --activation-dtype $dt --m $m --n $n --k $k --warmup 5 --repeat 50 --json $OUT/r/one.json > $OUT/r/one.txt 2>&1 || { echo "FAIL $tag $op $bits $dt $m $n $k"; tail -3 $OUT/r/one.txt; return; }
  sed "s/^{/{\"tree\":\"$tag\",/" $OUT/r/one.json >> $J
  python3 -c "
import json,re
for l in open('$OUT/r/one.json'):
    d=json.loads(l); print('$tag', '$op', d.get('bits','fp8'), '$dt', d['m'], d['n'], d['k'], round(d['median_us'],2), d['passed'], re.search(r'k_split=\d+', d['plan']).group(0), 'regs168' if 'regs=168' in d['plan'] else '')
"
}
for rep in 1 2; do
while read op b dt m n k; do
  [ -z "$op" ] && continue
  bits=""; [ "$b" != "-" ] && bits="--bits $b"
  run base ba/bqmm-profile
  run head bh/bqmm-profile
done < cases_models.txt
done | tee $OUT/r/models.txt
cd $OUT && tar czf all.tgz r && rm -rf r
