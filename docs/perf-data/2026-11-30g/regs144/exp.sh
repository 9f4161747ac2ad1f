mkdir -p $OUT/r
G=-DBQMM_GTEST_SOURCE_DIR=$PWD/.deps/googletest
cfg() { cmake -S . -B $1 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 $G "-DCMAKE_CUDA_FLAGS=$2" > $OUT/r/cfg_$1.log 2>&1; }
cfg bx0 "" ; cfg bxa "-DXP_MAXNREG=144"; cfg bxb "-DXP_MAXNREG=144 -DXP_PIN"
( cmake --build bx0 -j 6 --target bqmm-profile > $OUT/r/b0.log 2>&1 ) &
( cmake --build bxa -j 5 --target bqmm-profile > $OUT/r/ba.log 2>&1 ) &
( cmake --build bxb -j 5 --target bqmm-profile > $OUT/r/bb.log 2>&1 ) &
wait
ls -la bx0/bqmm-profile bxa/bqmm-profile bxb/bqmm-profile || { tail -20 $OUT/r/b*.log; exit 1; }
J=$OUT/r/all.jsonl
run() { # tag variant ks args
  local tag=$1 v=$2 ks=$3; shift 3
  env ${ks:+BQMM_NBITS_GEMV_KSPLIT=$ks} $v/bqmm-profile --op nbits --bits 4 "$@" --json $OUT/r/one.json > $OUT/r/one.txt 2>&1 || { echo "FAIL $tag $v $ks $*"; tail -3 $OUT/r/one.txt; }
  sed "s/^{/{\"tag\":\"$tag\",\"xp\":\"$v\",\"ks\":\"$ks\",/" $OUT/r/one.json >> $J
  python3 -c "
import json,re,sys
for l in open('$OUT/r/one.json'):
    d=json.loads(l); print('$tag', '$v', 'ks', '${ks:--}', d['m'], d['n'], d['k'], d['activation_dtype'], round(d['median_us'],2), d['passed'], re.search(r'k_split=\d+', d['plan']).group(0))
"
}
for v in bxa bxb; do run chk $v 2 --m 3 --n 28688 --k 8192 --bias --activation-dtype bf16; run chk $v 2 --m 8 --n 4250 --k 8192 --zero-points packed; done
for rep in 1 2; do
  for args in "--m 1 --n 28672" "--m 2 --n 28672" "--m 8 --n 28672" "--m 1 --n 28672 --activation-dtype bf16" "--m 1 --n 20480"; do
    run r$rep bx0 "" $args --k 8192
    for v in bxa bxb; do run r$rep $v "" $args --k 8192; run r$rep $v 2 $args --k 8192; done
  done
done 2>&1 | tee $OUT/r/summary.txt
cd $OUT && tar czf all.tgz r && rm -rf r
