#!/bin/bash
OUT=$OUT/r BENCH_SUITES=decode bash scripts/gpu_check.sh build,test,sanitize,bench > $OUT/check_stdout.txt 2>&1
grep -A12 "gpu_check summary" $OUT/check_stdout.txt
