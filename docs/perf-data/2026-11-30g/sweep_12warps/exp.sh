mkdir -p $OUT/r
G=-DBQMM_GTEST_SOURCE_DIR=$PWD/.deps/googletest
cfg() { cmake -S . -B $1 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 $G "-DCMAKE_CUDA_FLAGS=$2" > $OUT/r/cfg_$1.log 2>&1; }
cfg bx0 "" ; cfg bxa "-DXP_MINB1"
( cmake --build bx0 -j 8 --target bqmm-profile > $OUT/r/b0.log 2>&1 ) &
( cmake --build bxa -j 8 --target bqmm-profile > $OUT/r/ba.log 2>&1 ) &
wait
ls bx0/bqmm-profile bxa/bqmm-profile || { tail -20 $OUT/r/b*.log; exit 1; }
J=$OUT/r/all.jsonl
run() { # variant ks args
  local v=$1 ks=$2; shift 2
  env ${ks:+BQMM_NBITS_GEMV_KSPLIT=$ks} BQMM_NBITS_GEMV_TILES=2 BQMM_NBITS_GEMV_LINES=1 $v/bqmm-profile --op nbits --bits 4 "$@" --warmup 3 --repeat 50 --json $OUT/r/one.json > $OUT/r/one.txt 2>&1 || { echo "FAIL $v $ks $*"; tail -3 $OUT/r/one.txt; }
  sed "s/^{/{\"xp\":\"$v\",\"ks\":\"$ks\",/" $OUT/r/one.json >> $J
  python3 -c "
import json,re
for l in open('$OUT/r/one.json'):
    d=json.loads(l); print('$v', 'ks', '${ks:--}', d['m'], d['n'], d['k'], d['activation_dtype'], round(d['median_us'],2), d['passed'], re.search(r'k_split=\d+', d['plan']).group(0))
"
}
{ for n in 12288 16384 20480 24576 28672 36864 45056 57344; do
  run bx0 "" --m 1 --n $n --k 8192
  for ks in 1 2 4; do run bxa $ks --m 1 --n $n --k 8192; done
done
for n in 12288 20480 36864 57344; do
  run bx0 "" --m 8 --n $n --k 8192
  for ks in 1 2 4; do run bxa $ks --m 8 --n $n --k 8192; done
done; } 2>&1 | tee $OUT/r/summary.txt
cd $OUT && tar czf all.tgz r && rm -rf r
