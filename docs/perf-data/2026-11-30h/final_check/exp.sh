#!/bin/bash
mkdir -p $OUT/r
OUT=$OUT/r bash scripts/gpu_check.sh build,test,sanitize > $OUT/r/gpu_check.txt 2>&1; tail -8 $OUT/r/gpu_check.txt
cd $OUT && tar czf all.tgz r && rm -rf r
