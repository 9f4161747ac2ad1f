#!/bin/bash
# device experiment: 168-register two-tile kernel vs 128, forced splits
mkdir -p $OUT/r
STEPS=${STEPS:-}
if [ -n "$STEPS" ]; then OUT=$OUT/r bash scripts/gpu_check.sh $STEPS > $OUT/r/gpu_check.txt 2>&1; tail -12 $OUT/r/gpu_check.txt; fi
P=build-gpu/bqmm-profile
[ -x $P ] || { echo no profiler; exit 1; }
J=$OUT/r/sweep.jsonl
run() { # regs ks bits dtype zp m n k
  local regs=$1 ks=$2 bits=$3 dt=$4 zp=$5 m=$6 n=$7 k=$8
  env BQMM_NBITS_GEMV_REGISTERS=$regs ${ks:+BQMM_NBITS_GEMV_KSPLIT=$ks} $P --op nbits --bits $bits --activation-dtype $dt --zero-points $zp --m $m --n $n --k $k --warmup 3 --repeat 40 --json $OUT/r/one.json > $OUT/r/one.txt 2>&1 || { echo "FAIL $*"; tail -3 $OUT/r/one.txt; return; }
  sed "s/^{/{\"regs\":$regs,\"ks\":\"$ks\",/" $OUT/r/one.json >> $J
  python3 -c "
import json,re
for l in open('$OUT/r/one.json'):
    d=json.loads(l); print('$regs', '${ks:--}', '$bits', '$dt', '$zp', d['m'], d['n'], d['k'], round(d['median_us'],2), d['passed'], re.search(r'k_split=\d+', d['plan']).group(0))
"
}
while read bits dt zp m n k; do
  [ -z "$bits" ] && continue
  run 128 "" $bits $dt $zp $m $n $k
  for ks in ${WIDE_KS:-1 2 4}; do run 168 $ks $bits $dt $zp $m $n $k; done
done < ${CASES:-cases.txt} | tee $OUT/r/summary.txt
cd $OUT && tar czf all.tgz r && rm -rf r
