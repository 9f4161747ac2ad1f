#!/usr/bin/env bash
# The GPU machine's one script: build (for SM90 unless BQMM_CUDA_ARCH says), run the CPU
# and GPU test suites, run compute-sanitizer (memcheck on a short GPU subset, racecheck on
# the shared-memory kernels), run the benchmark suites, and print a short summary last.
# Logs and JSON go to $OUT (default ./out); the bench step also packs its JSON into
# $OUT/bench_jsonl.tgz. BQMM_CUDA_ARCH (default 90) is the build's architectures:
# BQMM_CUDA_ARCH=80 builds for Ampere alone, whose kernels an SM90 GPU runs from their PTX
# (the Ampere code paths, e4m3 decoded without SM89's conversion, tested on the H200; the
# tests of SM90-only kernels skip, saying so).
#
#   scripts/gpu_check.sh [steps]     steps: comma list of build,test,sanitize,bench,variants,ab,sweep,ncu,micro
#                                    (default: the first four); BENCH_SUITES="decode prefill"
#                                    (fp8); BENCH_ACT_QUANT="static dynamic" (fp8 prefill
#                                    with the activation quantized), BENCH_SCALE_ROWS="1 128"
#                                    (its weight scales per row / per 128 rows);
#                                    NBITS_BENCH_BITS="8 4" (NBitsMatMul decode suite),
#                                    NBITS_BENCH_ZERO_POINTS="none packed" (its zero points),
#                                    NBITS_BENCH_BLOCK_SIZES="128" (its block sizes); set
#                                    empty, a variable skips its group (the bench in two
#                                    runs: BENCH_ACT_QUANT= NBITS_BENCH_ZERO_POINTS= for
#                                    both operators' suites without W8A8 and N-bit decode,
#                                    then BENCH_SUITES= for those two; perf_report.py takes
#                                    both runs' bench_*.jsonl from one folder)
#   variants: the decode suites with each GEMV kernel and weight stream forced through the
#   internal plan override (BQMM_PLAN_OVERRIDE, docs/DESIGN.md): FP8 "fma=1" (CUDA cores),
#   "fma=0" (tensor cores at every M) with "tma=0,lines=0" (fragment register loads),
#   "lines=1,tiles=1|2" (line loads of one / two tiles per warp) or "tma=1" (TMA tiles); N-bit
#   register loads ("tma=0,window=0"), TMA ("tma=1"), line loads ("lines=1,fma=0,tiles=1|2")
#   and 8-bit's CUDA-core kernel ("fma=1"), each with the zero points of
#   NBITS_VARIANT_ZERO_POINTS (default "none"); and the N-bit K-loop sweep (M = 1,
#   8192 x 8192, float16, every block size, both widths): about 5 minutes.
#   ab: A/B against a baseline source tree AB_TREE (default ab-base/, made on the build
#   machine by scripts/ab_prepare.sh REV and carried to the GPU machine): builds its
#   profiler beside this tree's (build-ab/; with the build step, in the background while
#   test and sanitize run, and waited for before any timing step), runs each suite of
#   AB_SUITES (default "fp8 nbits8:none nbits4:none nbits4:packed"; an entry is
#   fp8[:decode|prefill] or
#   nbits<bits>[:none|packed|typed], at block AB_BLOCK_SIZE, default 128) for the base and
#   this tree in turn, AB_REPEATS times (default 2), into $OUT/ab/, and compares them
#   (scripts/ab_table.py: per case the fastest repeat's b2b_us, or with AB_STAT=median
#   the repeats' median, head / base). Needs this tree's build (the build step, or build-gpu/ from an earlier one). AB_CASES_FILE=F runs
#   single cases instead of the suites (the suites too if AB_SUITES is also set): one case
#   per line of F, `NAME [VAR=VALUE ...] PROFILER-ARGS` (VAR=VALUE words, such as
#   BQMM_PLAN_OVERRIDE=mixed=0, go to the profiler's environment and the case's label; #
#   starts a comment); the cases of one NAME make one table, a row per line (scripts/ab_cases/
#   has the sets used so far).
#   AB_TREE=. compares this tree with itself: no second build, and AB_BASE_ENV /
#   AB_HEAD_ENV ("VAR=VALUE ...", either side, also with another tree) go to that side's
#   profiler runs before a case's own words, e.g. AB_BASE_ENV=BQMM_PLAN_OVERRIDE=gemm=1 to
#   time a planner rule against the choice it replaces in one build.
#   test: the README's test command (every suite); with GPU_TEST_FILTER=F (a GoogleTest
#   filter, e.g. '*RowGroups*') only the GPU suite's tests F matches, from the build step's
#   binary, into gpu_tests.log: a short device window's check of one kernel family (a
#   crash: its signal and the test it happened in).
#   sanitize: memcheck, then racecheck, each stopped after SANITIZE_TIMEOUT seconds (default
#   180; both take under 30 s on the H200), so that a hang is reported as one ("timed out")
#   rather than taking the rest of the call.
#   sweep: each case of SWEEP_CASES (a file of bqmm-profile argument lines, one shape each)
#   under the planner and under each override of SWEEP_VARIANTS (";"-separated, e.g.
#   "window=1,lines=1,tiles=2;tma=1"), SWEEP_REPEATS times (default 2), in this tree's
#   build: scripts/sweep_overrides.py's table in $OUT/sweep.txt, marking each variant at
#   least 3 % faster than the planner. Where a planner rule may leave speed behind
#   (scripts/sweep_cases/ has the sets swept so far).
#   ncu: Nsight Compute on single cases, where a kernel's time goes: each line of NCU_CASES
#   (`NAME KERNEL-REGEX [VAR=VALUE ...] PROFILER-ARGS`, # starts a comment; keep --repeat
#   small, every run is profiled through) runs this tree's profiler under `ncu
#   --clock-control none`, which profiles one launch of the kernels whose name matches
#   KERNEL-REGEX, past the first NCU_SKIP (default 5: the accuracy check's and warm-up's),
#   with the sections of NCU_SECTIONS (default below; caches flushed before it, so cold).
#   Every case's report goes to $OUT/ncu.txt; the summary gives each case's duration,
#   throughputs, hit rates, occupancy and issue rate (scripts/ncu_cases/ has the sets
#   profiled so far). NCU_SOURCE=1 profiles the same launch a second time with warp-state
#   sampling per SASS instruction (ncu's source page, CSV in $OUT/ncu_source_NAME.csv):
#   scripts/ncu_stalls.py puts where the warps wait (the share by stall reason, the
#   NCU_SOURCE_TOP instructions with most samples, default 20) in ncu.txt and a line of it
#   in the summary.
#   micro: the standalone microbenches named in MICRO (default "wgmma_rate"; each a file
#   tools/microbench/NAME.cu), each built alone by nvcc for this GPU (sm_90a on SM90: the
#   wgmma and TMA ones need it) and run once, stopped after MICRO_TIMEOUT seconds (default
#   300); its build and output in $OUT/micro_NAME.txt, the summary its exit status. With
#   MICRO_AB=1 each is also built from AB_TREE (default ab-base/, scripts/ab_prepare.sh REV,
#   carried) against that tree's headers, and run base, this tree, base again into the
#   same file (a kernel change timed against its baseline on one machine state).
# PACK_OUT=1 leaves two files in $OUT: summary.txt and gpu_check.tgz, every other file the
# steps wrote (logs, JSON, sweep and A/B folders) packed into it.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
steps=${1:-build,test,sanitize,bench}
arch=${BQMM_CUDA_ARCH:-90}
build=build-gpu
summary=()
has() { [[ ",$steps," == *",$1,"* ]]; }
zp_suffix() { [ "$1" = none ] || echo "_zp_$1"; }  # file names: none keeps the old ones
stamp() { date +%s; }
# build_tree SRC DIR LOG [cmake --build args]: configures SRC into DIR for $arch (Release,
# Ninja; the carried GoogleTest sources where present) and builds it, output to LOG.
build_tree() {
  local src=$1 dir=$2 log=$3
  shift 3
  local extra=()
  [ -d .deps/googletest ] && extra+=(-DBQMM_GTEST_SOURCE_DIR="$PWD/.deps/googletest")
  # The CUTLASS headers of this checkout for every tree built (an A/B baseline exported by
  # ab_prepare.sh has none of its own and would build without the mixed-input GEMM).
  [ -f .deps/cutlass/include/cutlass/cutlass.h ] && extra+=(-DBQMM_CUTLASS_DIR="$PWD/.deps/cutlass/include")
  cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    "${extra[@]}" >"$log" 2>&1 &&
    cmake --build "$dir" -j "$(nproc)" "$@" >>"$log" 2>&1
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader \
  | tee "$OUT/gpu.txt"

if has build; then
  t0=$(stamp)
  if build_tree . "$build" "$OUT/build.log"; then
    summary+=("build: ok ($(( $(stamp) - t0 ))s, sm_$arch)")
  else
    tail -n 40 "$OUT/build.log"
    echo "gpu_check: build failed (see $OUT/build.log)"
    exit 1
  fi
  # Every kernel ptxas reports spilling, in spills.txt (docs/DESIGN.md, "Register spills",
  # says which spill and why their bounds stay); the summary counts them by family.
  spills=$(python3 scripts/spills.py "$OUT/build.log" "$OUT/spills.txt")
  [ -n "$spills" ] && summary+=("spills: $spills (see spills.txt)")
  # ptxas's advisories of a wgmma pipeline it serialized or waited early for: none expected.
  if ! python3 scripts/ptxas_advisories.py "$OUT/build.log" > "$OUT/ptxas_advisories.txt"; then
    summary+=("ptxas advisories: $(tail -n 1 "$OUT/ptxas_advisories.txt") (see ptxas_advisories.txt)")
  fi
fi

# With the build and ab steps and a baseline tree, the baseline's profiler builds in the
# background from here while the correctness steps (test, sanitize) run: about two
# minutes of device time less per A/B. Every timing step (bench, variants, ab, sweep, ncu,
# micro) first waits for it (wait_ab_build), so no compile shares the machine with a
# timed run.
ab_tree=${AB_TREE:-ab-base}
ab_build_pid=
ab_build_rc=
# build_ab: the baseline's profiler in build-ab/. A build-ab/ that an earlier call left for
# another baseline starts afresh: ab_prepare.sh's files carry their commit's time, older
# than that build's objects, so ninja would keep the other baseline's.
build_ab() {
  if [ "$(cat build-ab/AB_COMMIT 2>/dev/null)" != "$(cat "$ab_tree/AB_COMMIT" 2>/dev/null)" ]; then
    rm -rf build-ab
  fi
  mkdir -p build-ab
  [ -f "$ab_tree/AB_COMMIT" ] && cp "$ab_tree/AB_COMMIT" build-ab/AB_COMMIT
  build_tree "$ab_tree" build-ab "$OUT/build_ab.log" --target bqmm-profile
}
if has build && has ab && [ "$ab_tree" != . ] && [ -f "$ab_tree/CMakeLists.txt" ]; then
  ab_build_t0=$(stamp)
  build_ab &
  ab_build_pid=$!
fi
wait_ab_build() {
  [ -n "$ab_build_pid" ] || return 0
  wait "$ab_build_pid"
  ab_build_rc=$?
  ab_build_pid=
  summary+=("ab: the baseline built beside the steps before it (rc=$ab_build_rc, $(( $(stamp) - ab_build_t0 ))s)")
}
# ab_baseline_built: the baseline's profiler is built (in the background, or now).
ab_baseline_built() {
  [ -n "$ab_build_rc" ] && return "$ab_build_rc"
  build_ab
}

# The README's test command (scripts/test.sh: configure, build, CTest) on this tree's
# GPU build: the CPU suite, the GPU suite and the script tests, each GoogleTest test one
# CTest test. On a GPU machine no test may skip. With GPU_TEST_FILTER (a GoogleTest
# filter), for a short device window: the GPU suite's tests it matches alone, from the
# build step's binary.
if has test && [ -n "${GPU_TEST_FILTER:-}" ]; then
  t0=$(stamp)
  if [ ! -x "$build/tests/bqmm_gpu_tests" ]; then
    summary+=("gpu tests: no $build/tests/bqmm_gpu_tests (run the build step first)")
  else
    # Not brief: each test's RUN line names the one a crash (no summary) happened in.
    "$build/tests/bqmm_gpu_tests" --gtest_filter="$GPU_TEST_FILTER" >"$OUT/gpu_tests.log" 2>&1
    rc=$?
    passed=$(grep -oP '\[  PASSED  \] \K[0-9]+' "$OUT/gpu_tests.log" | tail -n 1)
    skipped=$(grep -oP '\[  SKIPPED \] \K[0-9]+' "$OUT/gpu_tests.log" | tail -n 1)
    summary+=("gpu tests ($GPU_TEST_FILTER): ${passed:-0} passed, ${skipped:-0} skipped, rc=$rc ($(( $(stamp) - t0 ))s)")
    if [ "$rc" -gt 128 ]; then
      last=$(grep -oP '^\[ RUN      \] \K\S+' "$OUT/gpu_tests.log" | tail -n 1)
      summary+=("gpu tests: killed by signal $((rc - 128)) (SIG$(kill -l $((rc - 128)))) in ${last:-no test yet}")
    fi
    [ "$rc" -eq 0 ] || grep -E '^\[  FAILED  \]' "$OUT/gpu_tests.log" | head -n 20
  fi
elif has test; then
  t0=$(stamp)
  gtest_arg=""
  [ -d .deps/googletest ] && gtest_arg="-DBQMM_GTEST_SOURCE_DIR=$PWD/.deps/googletest"
  BQMM_CMAKE_ARGS="-DCMAKE_CUDA_ARCHITECTURES=$arch $gtest_arg" bash scripts/test.sh "$build" \
    >"$OUT/ctest.log" 2>&1
  rc=$?
  total=$(grep -E '[0-9]+% tests passed' "$OUT/ctest.log" | tail -n 1)
  skipped=$(grep -cP '^\s+[0-9]+ - .* \(Skipped\)' "$OUT/ctest.log")
  summary+=("ctest (scripts/test.sh): ${total:-no result}, $skipped skipped, rc=$rc ($(( $(stamp) - t0 ))s)")
  [ "$rc" -eq 0 ] || grep -E '\*\*\*Failed|Not Run|Exception' "$OUT/ctest.log" | head -n 20
fi

if has sanitize; then
  # Small, fast tests only: the sanitizer slows kernels by 10-100x.
  memcheck_filter=${MEMCHECK_FILTER:-'Fp8DequantGemm.EveryOptionCombination:Fp8DequantGemm.NTiledScratch:Fp8DequantGemm.EmptyKGivesBias:Fp8DequantGemm.EmptyOutputs:Fp8DequantGemm.NanCodesPropagate:Fp8Kernels.*:Fp8RunContract.*:*Sanitize*'}
  racecheck_filter=${RACECHECK_FILTER:-'*Sanitize*'}
  for tool in memcheck racecheck; do
    filter=$memcheck_filter
    [ "$tool" = racecheck ] && filter=$racecheck_filter
    t0=$(stamp)
    timeout --kill-after=10 "${SANITIZE_TIMEOUT:-180}" compute-sanitizer --tool "$tool" --error-exitcode 86 \
      "$build/tests/bqmm_gpu_tests" --gtest_filter="$filter" --gtest_brief=1 >"$OUT/$tool.log" 2>&1
    rc=$?
    if [ "$rc" -eq 124 ]; then
      summary+=("$tool: timed out after ${SANITIZE_TIMEOUT:-180}s (SANITIZE_TIMEOUT; see $tool.log)")
      continue
    fi
    # memcheck ends with "ERROR SUMMARY: N errors", racecheck with
    # "RACECHECK SUMMARY: N hazards displayed (...)".
    errors=$(grep -oP '(ERROR|RACECHECK) SUMMARY: \K[0-9]+' "$OUT/$tool.log" | tail -n 1)
    ran=$(grep -oP '\[  PASSED  \] \K[0-9]+' "$OUT/$tool.log" | tail -n 1)
    summary+=("$tool: ${errors:-?} errors/hazards, ${ran:-0} tests passed under it, rc=$rc ($(( $(stamp) - t0 ))s)")
  done
fi

if has bench; then
  wait_ab_build
  for suite in ${BENCH_SUITES-decode prefill}; do
    t0=$(stamp)
    "$build/bqmm-profile" --op fp8 --suite "$suite" --json "$OUT/bench_$suite.jsonl" \
      >"$OUT/bench_$suite.log" 2>&1
    rc=$?
    summary+=("bench $suite: rc=$rc ($(( $(stamp) - t0 ))s), $(wc -l < "$OUT/bench_$suite.jsonl" 2>/dev/null || echo 0) cases")
  done
  # FP8 with the activation quantized (W8A8: static a_scale; dynamic per-row, per-block
  # scales) on the prefill suite, float16 (BENCH_ACT_QUANT, default "static dynamic"), with
  # per-row weight scales and with scales shared by 128-row blocks (b_scale_block_rows;
  # BENCH_SCALE_ROWS, default "1 128").
  for rows in ${BENCH_SCALE_ROWS-1 128}; do
    for mode in ${BENCH_ACT_QUANT-static dynamic}; do
      t0=$(stamp)
      name=w8a8_${mode}_prefill
      [ "$rows" = 1 ] || name=w8a8_${mode}_rows${rows}_prefill
      "$build/bqmm-profile" --op fp8 --suite prefill --act-quant "$mode" --activation-dtype fp16 \
        --b-scale-block-rows "$rows" --json "$OUT/bench_$name.jsonl" >"$OUT/bench_$name.log" 2>&1
      rc=$?
      summary+=("bench $name: rc=$rc ($(( $(stamp) - t0 ))s), $(wc -l < "$OUT/bench_$name.jsonl" 2>/dev/null || echo 0) cases")
    done
  done
  # NBitsMatMul at decode sizes, without a zero-point tensor and with packed zero points
  # (asymmetric checkpoints), at each block size of NBITS_BENCH_BLOCK_SIZES (default 128;
  # others add _bs<B> to names); its prefill suite (fused GEMM to 128 rows, then the
  # mixed-input GEMM on SM90, else dequant + cuBLAS) at block 128 without zero points, each
  # width.
  for bs in ${NBITS_BENCH_BLOCK_SIZES-128}; do
    for zp in ${NBITS_BENCH_ZERO_POINTS-none packed}; do
      for bits in ${NBITS_BENCH_BITS-8 4}; do
        t0=$(stamp)
        name=nbits${bits}_decode$(zp_suffix "$zp")
        [ "$bs" = 128 ] || name=${name}_bs$bs
        "$build/bqmm-profile" --op nbits --bits "$bits" --zero-points "$zp" --block-size "$bs" \
          --suite decode --json "$OUT/bench_$name.jsonl" >"$OUT/bench_$name.log" 2>&1
        rc=$?
        summary+=("bench $name: rc=$rc ($(( $(stamp) - t0 ))s), $(wc -l < "$OUT/bench_$name.jsonl" 2>/dev/null || echo 0) cases")
      done
    done
  done
  if [[ " ${BENCH_SUITES-decode prefill} " == *" prefill "* ]]; then
    for bits in ${NBITS_BENCH_BITS-8 4}; do
      t0=$(stamp)
      name=nbits${bits}_prefill
      "$build/bqmm-profile" --op nbits --bits "$bits" --zero-points none --block-size 128 \
        --suite prefill --json "$OUT/bench_$name.jsonl" >"$OUT/bench_$name.log" 2>&1
      rc=$?
      summary+=("bench $name: rc=$rc ($(( $(stamp) - t0 ))s), $(wc -l < "$OUT/bench_$name.jsonl" 2>/dev/null || echo 0) cases")
    done
  fi
  python3 scripts/bench_table.py "$OUT"/bench_*.jsonl > "$OUT/bench_table.txt" 2>&1 || true
  # Every suite's JSON in one file, for copying the results off a remote GPU machine.
  (cd "$OUT" && tar czf bench_jsonl.tgz bench_*.jsonl) 2>/dev/null || true
fi

if has variants; then
  wait_ab_build
  t0=$(stamp)
  for v in "fma fma=1" "mma_registers fma=0,tma=0,lines=0" "mma_lines fma=0,lines=1,tiles=1" \
           "mma_lines_x2 fma=0,lines=1,tiles=2" "mma_tma fma=0,tma=1"; do
    set -- $v
    name=$1
    BQMM_PLAN_OVERRIDE=$2 "$build/bqmm-profile" --op fp8 --suite decode --json "$OUT/variant_fp8_decode_$name.jsonl" \
      >"$OUT/variant_fp8_decode_$name.log" 2>&1
  done
  # The N-bit tensor-core GEMV with each weight stream forced, and the 8-bit CUDA-core GEMV
  # where it applies (M <= 2; larger M keep their plan), for each zero-point kind of
  # NBITS_VARIANT_ZERO_POINTS (default: none).
  for zp in ${NBITS_VARIANT_ZERO_POINTS:-none}; do
    for bits in 8 4; do
      for v in "registers tma=0,window=0" "tma tma=1" "lines lines=1,fma=0,tiles=1" \
               "lines_x2 lines=1,fma=0,tiles=2" "fma fma=1"; do
        set -- $v
        name=$1
        [ "$name" = fma ] && [ "$bits" != 8 ] && continue
        file=variant_nbits${bits}_decode$(zp_suffix "$zp")_$name
        BQMM_PLAN_OVERRIDE=$2 "$build/bqmm-profile" --op nbits --bits "$bits" --zero-points "$zp" --suite decode \
          --json "$OUT/$file.jsonl" >"$OUT/$file.log" 2>&1
      done
    done
  done
  for bits in 4 8; do
    for bs in 16 32 64 128 256; do
      "$build/bqmm-profile" --op nbits --bits "$bits" --block-size "$bs" --m 1 --n 8192 --k 8192 \
        --nbits-algo all --json "$OUT/variant_nbits_algo.jsonl.part" >>"$OUT/variant_nbits_algo.log" 2>&1
      cat "$OUT/variant_nbits_algo.jsonl.part" >>"$OUT/variant_nbits_algo.jsonl"
    done
  done
  rm -f "$OUT/variant_nbits_algo.jsonl.part"
  summary+=("variants: $(cat "$OUT"/variant_*.jsonl 2>/dev/null | wc -l) cases ($(( $(stamp) - t0 ))s)")
fi

# ab_cases FILE REP: each case of FILE (see `ab` above) for the base and this tree in turn,
# its JSON line appended to $OUT/ab/NAME.base|head.REP.jsonl; sets ab_failed on a failure.
# ab_side SIDE: the profiler (bin) and the extra environment (side_env) of an A/B side.
ab_side() {
  bin=$build/bqmm-profile
  [ "$1" = base ] && [ "$ab_tree" != . ] && bin=build-ab/bqmm-profile
  side_env=()
  if [ "$1" = base ]; then
    read -r -a side_env <<<"${AB_BASE_ENV:-}"
  else
    read -r -a side_env <<<"${AB_HEAD_ENV:-}"
  fi
}

ab_cases() {
  local file=$1 rep=$2 name rest side bin
  local -a words envs side_env
  while read -r name rest; do
    [ -z "$name" ] || [ "${name:0:1}" = "#" ] && continue
    read -r -a words <<<"$rest"
    envs=()
    while [ ${#words[@]} -gt 0 ] && [[ ${words[0]} != --* && ${words[0]} == *=* ]]; do
      envs+=("${words[0]}")
      words=("${words[@]:1}")
    done
    for side in base head; do
      ab_side "$side"
      rm -f "$OUT/ab/case.jsonl"
      if env "${side_env[@]}" "${envs[@]}" "$bin" "${words[@]}" --json "$OUT/ab/case.jsonl" </dev/null \
        >>"$OUT/ab/$name.$side.$rep.log" 2>&1; then
        # The line's environment words go into its JSON (case_env): ab_table.py keys cases
        # on them, so one shape under two overrides makes two rows, not one merged.
        python3 -c 'import json, sys
for line in open(sys.argv[2]):
    if line.strip():
        row = json.loads(line)
        if sys.argv[1]:
            row["case_env"] = sys.argv[1]
        print(json.dumps(row))' "${envs[*]}" "$OUT/ab/case.jsonl" </dev/null \
          >>"$OUT/ab/$name.$side.$rep.jsonl"
      else
        echo "gpu_check: ab case '$name ${rest}' failed on $side (see ab/$name.$side.$rep.log)"
        ab_failed=1
      fi
    done
  done <"$file"
  rm -f "$OUT/ab/case.jsonl"
}

if has ab; then
  wait_ab_build
  t0=$(stamp)
  if [ ! -f "$ab_tree/CMakeLists.txt" ]; then
    summary+=("ab: no baseline tree at $ab_tree (scripts/ab_prepare.sh REV, then carry it)")
  elif [ ! -x "$build/bqmm-profile" ]; then
    summary+=("ab: no $build/bqmm-profile (run the build step first)")
  elif [ "$ab_tree" != . ] && ! ab_baseline_built; then
    tail -n 20 "$OUT/build_ab.log"
    summary+=("ab: the baseline's build failed (see build_ab.log)")
  else
    mkdir -p "$OUT/ab"
    ab_bs=${AB_BLOCK_SIZE:-128}
    ab_failed=0
    ab_suites=${AB_SUITES-fp8 nbits8:none nbits4:none nbits4:packed}
    [ -n "${AB_CASES_FILE:-}" ] && [ -z "${AB_SUITES+set}" ] && ab_suites=
    if [ -n "${AB_CASES_FILE:-}" ] && [ ! -f "$AB_CASES_FILE" ]; then
      echo "gpu_check: AB_CASES_FILE '$AB_CASES_FILE' does not exist"
      ab_failed=1
    fi
    for rep in $(seq 1 "${AB_REPEATS:-2}"); do
      [ -f "${AB_CASES_FILE:-}" ] && ab_cases "$AB_CASES_FILE" "$rep"
      for entry in $ab_suites; do
        kind=${entry%%:*}
        arg=${entry#*:}
        [ "$arg" = "$entry" ] && arg=
        case $kind in
          fp8) name=fp8_${arg:-decode}
               args=(--op fp8 --suite "${arg:-decode}" --block-size "$ab_bs") ;;
          nbits4|nbits8)
               name=${kind}_decode$(zp_suffix "${arg:-none}")
               args=(--op nbits --bits "${kind#nbits}" --zero-points "${arg:-none}" --suite decode
                     --block-size "$ab_bs") ;;
          *) echo "gpu_check: AB_SUITES entry '$entry': expected fp8[:suite] or nbits<4|8>[:zero points]"
             ab_failed=1; continue ;;
        esac
        [ "$ab_bs" = 128 ] || name=${name}_bs$ab_bs
        for side in base head; do
          ab_side "$side"
          env "${side_env[@]}" "$bin" "${args[@]}" --json "$OUT/ab/$name.$side.$rep.jsonl" \
            >"$OUT/ab/$name.$side.$rep.log" 2>&1 || ab_failed=1
        done
      done
    done
    python3 scripts/ab_table.py --stat "${AB_STAT:-fastest}" "$OUT/ab" > "$OUT/ab_table.txt" 2>&1 || ab_failed=1
    if [ "$ab_tree" = . ]; then
      baseline="this tree"
    else
      baseline=$(cat "$ab_tree/AB_COMMIT" 2>/dev/null || echo "$ab_tree")
    fi
    [ -n "${AB_BASE_ENV:-}" ] && baseline+=" with $AB_BASE_ENV"
    [ -n "${AB_HEAD_ENV:-}" ] && baseline+=", head with $AB_HEAD_ENV"
    summary+=("ab: baseline $baseline, rc=$ab_failed ($(( $(stamp) - t0 ))s), table in ab_table.txt")
    while IFS= read -r line; do summary+=("$line"); done < <(grep -E '^ab ' "$OUT/ab_table.txt")
  fi
fi

if has sweep; then
  wait_ab_build
  t0=$(stamp)
  if [ -z "${SWEEP_CASES:-}" ] || [ -z "${SWEEP_VARIANTS:-}" ]; then
    summary+=("sweep: needs SWEEP_CASES (a case file) and SWEEP_VARIANTS (overrides, ';'-separated)")
  elif [ ! -x "$build/bqmm-profile" ]; then
    summary+=("sweep: no $build/bqmm-profile (run the build step first)")
  else
    python3 scripts/sweep_overrides.py "$build/bqmm-profile" "$SWEEP_CASES" "$SWEEP_VARIANTS" \
      --repeats "${SWEEP_REPEATS:-2}" --out "$OUT/sweep" >"$OUT/sweep.txt" 2>&1
    sweep_rc=$?
    summary+=("sweep: rc=$sweep_rc ($(( $(stamp) - t0 ))s), table in sweep.txt")
    summary+=("$(tail -n 1 "$OUT/sweep.txt")")
  fi
fi

if has ncu; then
  wait_ab_build
  t0=$(stamp)
  if [ -z "${NCU_CASES:-}" ]; then
    summary+=("ncu: needs NCU_CASES (a case file)")
  elif [ ! -x "$build/bqmm-profile" ]; then
    summary+=("ncu: no $build/bqmm-profile (run the build step first)")
  elif ! command -v ncu >/dev/null; then
    summary+=("ncu: no ncu on PATH")
  else
    sections=()
    for s in ${NCU_SECTIONS:-SpeedOfLight MemoryWorkloadAnalysis MemoryWorkloadAnalysis_Tables Occupancy SchedulerStats WarpStateStats SourceCounters}; do
      sections+=(--section "$s")
    done
    # The metrics of the summary line, as ncu's details page names them.
    picked='^ +(Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|L1/TEX Hit Rate|L2 Hit Rate|Achieved Occupancy|Issued Warp Per Scheduler|Eligible Warps Per Scheduler|Warp Cycles Per Issued Instruction) {2,}'
    : >"$OUT/ncu.txt"
    ncu_failed=0
    while read -r name kernel rest; do
      case_env=()
      case_args=()
      for word in $rest; do
        if [ ${#case_args[@]} -eq 0 ] && [[ $word == *=* && $word != -* ]]; then
          case_env+=("$word")
        else
          case_args+=("$word")
        fi
      done
      # One launch of the case's kernel, past the accuracy check's and warm-up's.
      launch=(--clock-control none --kernel-name "regex:$kernel" --launch-skip "${NCU_SKIP:-5}" --launch-count 1)
      report=$(env "${case_env[@]}" ncu "${launch[@]}" "${sections[@]}" \
        "$build/bqmm-profile" "${case_args[@]}" </dev/null 2>&1)
      rc=$?
      { echo "==== ncu $name: kernel ~ $kernel, ${case_env[*]} ${case_args[*]} (rc=$rc)"; echo "$report"; } >>"$OUT/ncu.txt"
      metrics=$(grep -E "$picked" <<<"$report" | sed -E 's/^ +//; s/ {2,}/ /g' | paste -sd ';' -)
      if [ "$rc" -ne 0 ] || [ -z "$metrics" ]; then
        ncu_failed=1
        summary+=("ncu $name: no report (rc=$rc; see ncu.txt)")
      else
        summary+=("ncu $name: ${metrics//;/; }")
      fi
      if [ "${NCU_SOURCE:-0}" = 1 ]; then
        csv="$OUT/ncu_source_$name.csv"
        env "${case_env[@]}" ncu "${launch[@]}" --section SourceCounters --section WarpStateStats \
          --metrics group:smsp__pcsamp_warp_stall_reasons --page source --print-source sass --csv \
          "$build/bqmm-profile" "${case_args[@]}" </dev/null >"$csv" 2>&1
        { echo "==== ncu $name: where the warps wait (ncu_source_$name.csv)";
          python3 scripts/ncu_stalls.py "$csv" --top "${NCU_SOURCE_TOP:-20}"; } >>"$OUT/ncu.txt" 2>&1
        if stalls=$(python3 scripts/ncu_stalls.py "$csv" --summary 2>&1); then
          summary+=("ncu $name stalls: $stalls")
        else
          ncu_failed=1
          summary+=("ncu $name stalls: none ($stalls)")
        fi
      fi
    done < <(grep -vE '^[[:space:]]*(#|$)' "$NCU_CASES")
    summary+=("ncu: rc=$ncu_failed ($(( $(stamp) - t0 ))s), reports in ncu.txt")
  fi
fi

if has micro; then
  wait_ab_build
  march=sm_$arch
  [ "$arch" = 90 ] && march=sm_90a
  bin_dir=$(mktemp -d)  # the binaries stay out of $OUT (it comes back from the GPU machine)
  for name in ${MICRO:-wgmma_rate}; do
    t0=$(stamp)
    src=tools/microbench/$name.cu
    log="$OUT/micro_$name.txt"
    if [ ! -f "$src" ]; then
      summary+=("micro $name: no $src")
      continue
    fi
    # Each side's microbench against its own tree's headers: this tree's, and with
    # MICRO_AB=1 the one of AB_TREE (default ab-base/, scripts/ab_prepare.sh REV), run base,
    # this tree, base again, so that a change is timed against its baseline in one run.
    sides=(head)
    if [ "${MICRO_AB:-0}" = 1 ]; then
      base_tree=${AB_TREE:-ab-base}
      if [ ! -f "$base_tree/$src" ]; then
        summary+=("micro $name: MICRO_AB=1 but no $base_tree/$src (scripts/ab_prepare.sh REV, carried)")
        continue
      fi
      sides=(base head base)
    fi
    : >"$log"
    built=1
    for side in $(printf '%s\n' "${sides[@]}" | sort -u); do
      prefix=
      [ "$side" = base ] && prefix=$base_tree/
      nvcc -O3 -std=c++17 --expt-relaxed-constexpr -arch="$march" -I"${prefix}include" -I"${prefix}src" \
        -o "$bin_dir/${name}_$side" "$prefix$src" >>"$log" 2>&1 || built=0
    done
    if [ "$built" = 1 ]; then
      rc=0
      for side in "${sides[@]}"; do
        if [ "${#sides[@]}" -gt 1 ]; then
          label="this tree"
          [ "$side" = base ] && label="$base_tree $(cat "$base_tree/AB_COMMIT" 2>/dev/null)"
          echo "== $side ($label)" >>"$log"
        fi
        timeout --kill-after=10 "${MICRO_TIMEOUT:-300}" "$bin_dir/${name}_$side" >>"$log" 2>&1 || rc=$?
      done
      what=
      [ "${#sides[@]}" -gt 1 ] && what=", ${sides[*]}"
      summary+=("micro $name: rc=$rc ($(( $(stamp) - t0 ))s$what), output in micro_$name.txt")
    else
      summary+=("micro $name: build failed ($(( $(stamp) - t0 ))s, see micro_$name.txt)")
    fi
  done
  rm -rf "$bin_dir"
fi

print_summary() {
  echo
  echo "================ gpu_check summary ($(date -u +%Y-%m-%dT%H:%MZ), $(head -n 1 "$OUT/gpu.txt"))"
  [ -s "$OUT/bench_table.txt" ] && cat "$OUT/bench_table.txt"
  printf '%s\n' "${summary[@]}"
}
print_summary
# PACK_OUT=1: everything the steps wrote under $OUT into $OUT/gpu_check.tgz beside
# summary.txt (the printed summary), the rest removed, for a GPU machine that sends back
# only a few files.
if [ "${PACK_OUT:-0}" = 1 ]; then
  print_summary >"$OUT/summary.txt"
  (cd "$OUT" && find . -mindepth 1 -maxdepth 1 ! -name summary.txt ! -name gpu_check.tgz -printf '%P\n' |
    tar czf gpu_check.tgz -T - --remove-files)
fi
