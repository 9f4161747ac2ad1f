#!/bin/bash
# device experiment: FP8 two-tile kernel at 168 registers vs 128 (forced splits); gpu_check first
mkdir -p $OUT/r
OUT=$OUT/r bash scripts/gpu_check.sh build,test,sanitize > $OUT/r/gpu_check.txt 2>&1; tail -8 $OUT/r/gpu_check.txt
P=build-gpu/bqmm-profile
[ -x $P ] || { echo no profiler; exit 1; }
J=$OUT/r/sweep_fp8.jsonl
run() { # regs ks dtype m n k
  local regs=$1 ks=$2 dt=$3 m=$4 n=$5 k=$6
  env BQMM_FP8_GEMV_REGISTERS=$regs ${ks:+BQMM_FP8_GEMV_KSPLIT=$ks} $P --op fp8 --activation-dtype $dt --m $m --n $n --k $k --warmup 3 --repeat 40 --json $OUT/r/one.json > $OUT/r/one.txt 2>&1 || { echo "FAIL $*"; tail -3 $OUT/r/one.txt; return; }
  sed "s/^{/{\"regs\":$regs,\"ks\":\"$ks\",/" $OUT/r/one.json >> $J
  python3 -c "
import json,re
for l in open('$OUT/r/one.json'):
    d=json.loads(l); print('$regs', '${ks:--}', 'fp8', '$dt', d['m'], d['n'], d['k'], round(d['median_us'],2), d['passed'], re.search(r'k_split=\d+', d['plan']).group(0))
"
}
while read dt m n k; do
  [ -z "$dt" ] && continue
  run 128 "" $dt $m $n $k
  for ks in 1 2 4; do run 168 $ks $dt $m $n $k; done
done < cases_fp8.txt | tee $OUT/r/summary_fp8.txt
cd $OUT && tar czf all.tgz r && rm -rf r
