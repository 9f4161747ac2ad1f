mkdir -p $OUT/r
G=-DBQMM_GTEST_SOURCE_DIR=$PWD/.deps/googletest
cfg() { cmake -S . -B $1 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 $G "-DCMAKE_CUDA_FLAGS=$2" > $OUT/r/cfg_$1.log 2>&1; }
cfg bx0 "" ; cfg bxa "-DXP_MINB1"; cfg bxb "-DXP_MAXNREG=144"
( cmake --build bx0 -j 6 --target bqmm-profile > $OUT/r/b0.log 2>&1 ) &
( cmake --build bxa -j 5 --target bqmm-profile > $OUT/r/ba.log 2>&1 ) &
( cmake --build bxb -j 5 --target bqmm-profile > $OUT/r/bb.log 2>&1 ) &
wait
ls -la bx0/bqmm-profile bxa/bqmm-profile bxb/bqmm-profile || { tail -20 $OUT/r/b*.log; exit 1; }
J=$OUT/r/all.jsonl
run() { # tag variant ks carve args
  local tag=$1 v=$2 ks=$3 cv=$4; shift 4
  env ${ks:+BQMM_NBITS_GEMV_KSPLIT=$ks} ${cv:+XP_CARVE=$cv} XP_OCC=1 $v/bqmm-profile --op nbits --bits 4 "$@" --warmup 3 --repeat 50 --json $OUT/r/one.json > $OUT/r/one.txt 2>&1 || { echo "FAIL $tag $v $ks $*"; tail -3 $OUT/r/one.txt; }
  occ=$(grep -m1 XP_OCC $OUT/r/one.txt | sed 's/XP_OCC //')
  sed "s/^{/{\"tag\":\"$tag\",\"xp\":\"$v\",\"ks\":\"$ks\",\"carve\":\"$cv\",/" $OUT/r/one.json >> $J
  python3 -c "
import json,re,sys
for l in open('$OUT/r/one.json'):
    d=json.loads(l); print('$tag', '$v', 'ks', '${ks:--}', 'cv', '${cv:--}', d['m'], d['n'], d['k'], d['activation_dtype'], round(d['median_us'],2), d['passed'], re.search(r'k_split=\d+', d['plan']).group(0), '| $occ')
"
}
for args in "--m 1 --n 28672" "--m 2 --n 28672" "--m 1 --n 20480"; do
  run r1 bx0 "" "" $args --k 8192
  run r1 bx0 "" 100 $args --k 8192
  for v in bxa bxb; do for ks in 2 4; do run r1 $v $ks "" $args --k 8192; run r1 $v $ks 100 $args --k 8192; done; done
done 2>&1 | tee $OUT/r/summary.txt
cd $OUT && tar czf all.tgz r && rm -rf r
