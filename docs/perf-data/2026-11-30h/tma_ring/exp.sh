#!/bin/bash
# EXPERIMENT: TMA ring for the two-tile window kernel (XP_TMA_LINES), depth 2 and 3, vs the tree
mkdir -p $OUT/r
G=-DBQMM_GTEST_SOURCE_DIR=$PWD/.deps/googletest
cfg() { cmake -S . -B $1 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 $G "-DCMAKE_CUDA_FLAGS=$2" > $OUT/r/cfg_$1.log 2>&1; }
cfg bx0 "" ; cfg bxt "-DXP_TMA_LINES" ; cfg bxt3 "-DXP_TMA_LINES -DXP_TMA_DEPTH=3"
for b in bx0 bxt bxt3; do ( cmake --build $b -j 6 --target bqmm-profile > $OUT/r/b_$b.log 2>&1 ) & done
wait
ls bx0/bqmm-profile bxt/bqmm-profile bxt3/bqmm-profile || { tail -30 $OUT/r/b_*.log; cd $OUT && tar czf all.tgz r; exit 1; }
J=$OUT/r/xp.jsonl
run() { # variant envs... -- args
  local v=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" $v/bqmm-profile --op nbits "$@" --warmup 3 --repeat 40 --json $OUT/r/one.json > $OUT/r/one.txt 2>&1 || { echo "FAIL $v $*"; tail -3 $OUT/r/one.txt; return; }
  sed "s/^{/{\"xp\":\"$v\",\"env\":\"${envs[*]}\",/" $OUT/r/one.json >> $J
  python3 -c "
import json,re
for l in open('$OUT/r/one.json'):
    d=json.loads(l); print('$v', '${envs[*]}', d['bits'], d['activation_dtype'], d['zero_points'], d['m'], d['n'], d['k'], round(d['median_us'],2), d['passed'], round(d['rel_err'],6), re.search(r'k_split=\d+', d['plan']).group(0), 'regs168' if 'regs=168' in d['plan'] else '')
"
}
{
for rep in 1 2; do
for v in bx0 bxt bxt3; do
  run $v X=1 -- --bits 4 --m 1 --n 28672 --k 8192
  run $v BQMM_NBITS_GEMV_KSPLIT=2 -- --bits 4 --m 1 --n 28672 --k 8192
  [ $rep = 1 ] || continue
  run $v X=1 -- --bits 4 --m 2 --n 28672 --k 8192
  run $v X=1 -- --bits 4 --m 8 --n 28672 --k 8192
  run $v X=1 -- --bits 4 --m 1 --n 28672 --k 8192 --activation-dtype bf16
  run $v X=1 -- --bits 4 --m 1 --n 28672 --k 8192 --zero-points packed
  run $v X=1 -- --bits 4 --m 1 --n 20480 --k 8192
  run $v BQMM_NBITS_GEMV_REGISTERS=128 -- --bits 4 --m 1 --n 20480 --k 8192
  run $v X=1 -- --bits 8 --m 2 --n 28672 --k 8192
  run $v X=1 -- --bits 4 --m 8 --n 8192 --k 8192
  run $v BQMM_NBITS_GEMV_TILES=2 BQMM_NBITS_GEMV_LINES=1 -- --bits 4 --m 3 --n 4250 --k 1280 --bias
  run $v BQMM_NBITS_GEMV_TILES=2 BQMM_NBITS_GEMV_LINES=1 BQMM_NBITS_GEMV_KSPLIT=8 -- --bits 4 --m 5 --n 4240 --k 1280 --zero-points packed
  run $v BQMM_NBITS_GEMV_TILES=2 BQMM_NBITS_GEMV_LINES=1 BQMM_NBITS_GEMV_FMA=0 -- --bits 8 --m 1 --n 4250 --k 2560 --activation-dtype bf16
done
done
} 2>&1 | tee $OUT/r/summary.txt
cd $OUT && tar czf all.tgz r && rm -rf r
