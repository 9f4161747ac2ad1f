set -x
mkdir -p $OUT/r
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DBQMM_GTEST_SOURCE_DIR=$PWD/.deps/googletest > $OUT/r/cmake.log 2>&1
cmake --build build-gpu -j 16 --target bqmm-profile > $OUT/r/build.log 2>&1 || { tail -30 $OUT/r/build.log; exit 1; }
P=build-gpu/bqmm-profile
J=$OUT/r/all.jsonl
run() { # tag xp ks tiles args...
  local tag=$1 xp=$2 ks=$3 tl=$4; shift 4
  env XP_DEEP=$xp ${ks:+BQMM_NBITS_GEMV_KSPLIT=$ks} ${tl:+BQMM_NBITS_GEMV_TILES=$tl} BQMM_PRINT_PLAN=1 $P --op nbits --bits 4 "$@" --json $OUT/r/one.json > $OUT/r/one.txt 2>&1 || { echo "FAIL $tag $xp $ks $*"; tail -5 $OUT/r/one.txt; }
  sed "s/^{/{\"tag\":\"$tag\",\"xp\":$xp,\"ks\":\"$ks\",/" $OUT/r/one.json >> $J
  python3 - "$OUT/r/one.json" "$tag" "$xp" "$ks" <<'PY'
import json,sys,re
for l in open(sys.argv[1]):
    d=json.loads(l); print(sys.argv[2], 'xp', sys.argv[3], 'ks', sys.argv[4] or '-', d.get('m'), d.get('n'), d.get('k'), d.get('activation_dtype'), round(d.get('median_us',0),2), d.get('passed'), re.search(r'k_split=\d+; tma=\d; window=\d; lines=\d; tiles=\d', d.get('plan','')).group(0) if 'k_split' in d.get('plan','') else d.get('plan','')[:60])
PY
}
# accuracy of the deep variant: partial tiles, bias, M = 3, zero points
for xp in 0 1; do
  run chk $xp 2 2 --m 3 --n 4250 --k 8192 --bias
  run chk $xp 2 2 --m 3 --n 28688 --k 8192 --bias --activation-dtype bf16
  run chk $xp 2 2 --m 5 --n 4250 --k 4096 --zero-points packed
  run chk $xp 1 2 --m 8 --n 1000 --k 2048 --bias
done
for rep in 1 2; do
for dt in fp16 bf16; do for m in 1 2 8; do
  [ $dt = bf16 ] && [ $m = 2 ] && continue
  run r$rep 0 "" "" --m $m --n 28672 --k 8192 --activation-dtype $dt
  for ks in 1 2 4; do run r$rep 1 $ks 2 --m $m --n 28672 --k 8192 --activation-dtype $dt; done
done; done
run r$rep 0 "" "" --m 1 --n 28672 --k 8192 --zero-points packed
for ks in 1 2; do run r$rep 1 $ks 2 --m 1 --n 28672 --k 8192 --zero-points packed; done
for sh in "8192 8192" "14336 4096" "33792 8192" "20480 8192"; do set -- $sh
  run r$rep 0 "" "" --m 1 --n $1 --k $2; run r$rep 0 "" 2 --m 1 --n $1 --k $2
  for ks in 1 2 4; do run r$rep 1 $ks 2 --m 1 --n $1 --k $2; done
done
done 2>&1 | grep -v "^+" | tee $OUT/r/summary.txt
