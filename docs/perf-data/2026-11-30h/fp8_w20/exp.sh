#!/bin/bash
# EXPERIMENT: FP8 one-tile line-load kernel at 20 warps per SM (<= 96 registers, XP_FP8_W20), k_split <= 4
mkdir -p $OUT/r
G=-DBQMM_GTEST_SOURCE_DIR=$PWD/.deps/googletest
cfg() { cmake -S . -B $1 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 $G "-DCMAKE_CUDA_FLAGS=$2" > $OUT/r/cfg_$1.log 2>&1; }
cfg bx0 ""; cfg bxw "-DXP_FP8_W20"
for b in bx0 bxw; do ( cmake --build $b -j 8 --target bqmm-profile > $OUT/r/b_$b.log 2>&1 ) & done
wait
ls bx0/bqmm-profile bxw/bqmm-profile || { tail -20 $OUT/r/b_*.log; exit 1; }
J=$OUT/r/w20.jsonl
run() { # variant ks dtype m n k
  local v=$1 ks=$2 dt=$3 m=$4 n=$5 k=$6
  env ${ks:+BQMM_FP8_GEMV_KSPLIT=$ks} $v/bqmm-profile --op fp8 --activation-dtype $dt --m $m --n $n --k $k --warmup 5 --repeat 50 --json $OUT/r/one.json > $OUT/r/one.txt 2>&1 || { echo "FAIL $*"; tail -3 $OUT/r/one.txt; return; }
  sed "s/^{/{\"xp\":\"$v\",\"ks\":\"$ks\",/" $OUT/r/one.json >> $J
  python3 -c "
import json,re
for l in open('$OUT/r/one.json'):
    d=json.loads(l); print('$v', '${ks:--}', '$dt', d['m'], d['n'], d['k'], round(d['median_us'],2), d['passed'], re.search(r'k_split=\d+', d['plan']).group(0))
"
}
while read dt m n k; do
  [ -z "$dt" ] && continue
  for v in bx0 bxw; do for ks in "" 4 2; do run $v "$ks" $dt $m $n $k; done; done
done < cases_w20.txt | tee $OUT/r/summary.txt
cd $OUT && tar czf all.tgz r && rm -rf r
