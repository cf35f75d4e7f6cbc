#!/usr/bin/env bash
# One batch on the offline GPU host: install the carried wheels, then check, sanitize,
# test and time. Logs go to $OUT. Usage: bash scripts/gpu_host.sh STAGE...
# The Jupyter stack travels as wheels in .whl/: `bash ../shared/gpu-host/fetch-wheels.sh pytest-xdist execnet`
# (xdist only for NBVAL_WORKERS), then `carry` .whl with the run.
# Stages: info smoke check sanitize tests gputests full nbval verify grade bench record sweeps variants ch12 ch12data ch13 ch14 ch15 ladder09 unpadded h200 downcol profile10 sanstudy latency probe
# profile studies (SWEEPS=name limits the sweeps stage to one kernel's entries; KERNELS="a b"
# limits check and sanitize to those kernels; STUDIES="a b" the studies and sanstudy stages; `verify` runs check,
# sanitize, tests and nbval side by side: none of them times anything it reports)
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl >/dev/null 2>&1 || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 MPLBACKEND=Agg
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# sanitize NAME TESTS K: compute-sanitizer's memcheck and racecheck over the tests of
# file TESTS that `-k K` selects, each log in $OUT/NAME-TOOL.log, a line of verdicts each
sanitize() {
  local san t
  san="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  for t in memcheck racecheck; do
    timeout 300 "$san" --tool $t --error-exitcode 3 python3 -m pytest -q -p no:cacheprovider \
        "$2" -k "$3" > "$OUT/$1-$t.log" 2>&1
    echo "$t exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/$1-$t.log" | tr '\n' ' ')"
  done
}
# sanitize_study STUDY: each configuration of STUDY checked on small ragged shapes under
# compute-sanitizer's memcheck and racecheck (nothing timed), logs in $OUT/STUDY-TOOL.log
sanitize_study() {
  local san t
  san="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  for t in memcheck racecheck; do
    timeout 300 "$san" --tool $t --error-exitcode 3 python3 -m gemm_kernels study "$1" \
        --check-only --shapes 33x65x17 127x129x255 > "$OUT/$1-$t.log" 2>&1
    echo "$1 $t exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|WRONG' "$OUT/$1-$t.log" | tr '\n' ' ')"
  done
}
# chapter 12's recorded data: the model's calibration recorded and fitted (rules.json),
# the benchmark, the exercise's candidates, chapter 12's profiles; one archive (with the
# logs, separate files would pass the 8 a call returns)
ch12_data() {
  python3 -m gemm_kernels.plan calibrate > "$OUT/ch12-calibrate.log" 2>&1; tail -2 "$OUT/ch12-calibrate.log"
  python3 -m gemm_kernels.plan fit > "$OUT/ch12-fit.log" 2>&1; head -60 "$OUT/ch12-fit.log"
  python3 -m gemm_kernels.plan bench 2>&1 | tee "$OUT/ch12-bench.log"
  python3 -m gemm_kernels.plan exercise > "$OUT/ch12-exercise.log" 2>&1
  python3 -m gemm_kernels study ch12_ragged_n ch12_gemv > "$OUT/ch12-studies.log" 2>&1
  grep -v "^  " "$OUT/ch12-studies.log" | tail -8
  tar czf "$OUT/ch12-data.tgz" figures/data/*.json gemm_kernels/plan/rules
}
for stage in "$@"; do
  echo "=== $stage $(date +%T)"
  case $stage in
    info)     nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,memory.total --format=csv
              python3 -c "from gemm_kernels import device; print(device.properties())" ;;
    smoke)    # every GPU path once, in a minute, before a long stage spends the lease
              python3 -m gemm_kernels check --kernels naive capstone dgemm_tiled transpose_padded \
                  --shapes 33x65x17 4097x1023x515 2>&1 | tee "$OUT/smoke.log" || exit 1
              python3 -m gemm_kernels bench --kernels capstone dgemm_tiled --sizes 1024 2>&1 \
                  | tee -a "$OUT/smoke.log" || exit 1
              python3 -m pytest -q -x tests/test_gpu_launch.py tests/test_gpu_kernels.py \
                  -k "buggy or cublas or guard" 2>&1 | tee -a "$OUT/smoke.log" | tail -3 || exit 1 ;;
    check)    python3 -m gemm_kernels check ${KERNELS:+--kernels $KERNELS} 2>&1 | tee "$OUT/check.log" | grep -v " ok$" ;;
    sanitize) python3 -m gemm_kernels check --sanitize ${KERNELS:+--kernels $KERNELS} 2>&1 | tee "$OUT/sanitize.log" ;;
    tests)    python3 -m pytest -q -x tests/ 2>&1 | tee "$OUT/tests.log" | tail -15 ;;
    nbval)    # NBVAL_WORKERS=4 runs notebooks side by side (pytest-xdist wheel, one notebook per
              # worker): a quarter of the time; the live numbers it prints are then not timings
              python3 -m pytest -q --nbval -p no:cacheprovider \
                  ${NBVAL_WORKERS:+-n $NBVAL_WORKERS --dist loadfile} notebooks/ 2>&1 \
                  | tee "$OUT/nbval.log" | tail -25 ;;
    gputests) # only the test files that hold GPU tests (the rest is what CI runs without a GPU)
              python3 -m pytest -q -p no:cacheprovider --durations=10 \
                  $(grep -l needs_gpu tests/test_*.py) 2>&1 | tee "$OUT/gputests.log" | tail -15 ;;
    full)     # the whole suite as CI runs it, in two passes that fit the 600 s a call may run:
              # tests/ spread over WORKERS processes (no test times anything), then the
              # notebooks NBVAL_WORKERS side by side (fewer: the solutions' speed steps time)
              python3 -m pytest -q -p no:cacheprovider -n ${WORKERS:-12} --dist loadfile tests/ 2>&1 \
                  | tee "$OUT/full-tests.log" | tail -15
              python3 -m pytest -q -p no:cacheprovider --nbval -n ${NBVAL_WORKERS:-4} --dist loadfile \
                  notebooks/ 2>&1 | tee "$OUT/full-nbval.log" | tail -15 ;;
    verify)   python3 -m gemm_kernels check > "$OUT/check.log" 2>&1 &
              python3 -m gemm_kernels check --sanitize > "$OUT/sanitize.log" 2>&1 &
              python3 -m pytest -q tests/ > "$OUT/tests.log" 2>&1 &
              python3 -m pytest -q --nbval -p no:cacheprovider notebooks/ > "$OUT/nbval.log" 2>&1 &
              wait
              for f in check sanitize tests nbval; do echo "--- $f"; tail -4 "$OUT/$f.log"; done ;;
    grade)    # every worked solution through the students' grader, all four steps, timed
              python3 -m gemm_kernels grade notebooks/solutions/*_solution.ipynb 2>&1 | tee "$OUT/grade.log" ;;
    bench)    python3 -m gemm_kernels bench --sizes 1024 2048 4096 --plot "$OUT/ladder.png" 2>&1 | tee "$OUT/bench.log" ;;
    record)   python3 -m gemm_kernels record ${CHAPTERS:+--chapters $CHAPTERS} > "$OUT/record.log" 2>&1
              tail -3 "$OUT/record.log"
              cp figures/data/*.json "$OUT/" ;;
    sweeps)   for a in "capstone --shape 4096x4096x4096" "transpose_fast --shape 8191x4097" \
                       "transpose_padded --shape 8191x4097" "coalesced --shape 4096x4096x4096" \
                       "smem_tiled --shape 4096x4096x4096" "l2_read --shape 2048x2048"; do
                [ -n "${SWEEPS:-}" ] && [[ "$a" != ${SWEEPS}* ]] && continue
                python3 -m gemm_kernels sweep $a 2>&1 | tee -a "$OUT/sweeps.log" | tail -1; done ;;
    variants) # the code variants the chapters time (controls, worked solutions), recorded
              python3 -m gemm_kernels.notebook.timed_variants 2>&1 | tee "$OUT/variants.log" | tail -60
              cp figures/data/*.json "$OUT/" ;;
    ch12)     # chapter 12: its kernels checked (and under both sanitizers), the model's
              # calibration recorded and fitted (rules.json), then the benchmark timed
              python3 -m pytest -q -p no:cacheprovider tests/test_gpu_plan.py 2>&1 \
                  | tee "$OUT/ch12-tests.log" | tail -5
              sanitize ch12 tests/test_gpu_plan.py "nan_and_inf or reproducible or finishes or counters or padded or (sgemm_is_right and (7x13 or 33x65 or 1x4096 or 4096x1 or 100x100 or 4097x1023))"
              ch12_data ;;
    ch12data) ch12_data ;;   # the recorded part of ch12 alone (a call may run 600 s)
    ch13)     # chapter 13: its kernels checked (and under both sanitizers), then recorded
              # beside cuBLAS FP16 (sizes and the widgets' sweeps)
              timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_wmma.py \
                  tests/test_ch13_wmma.py 2>&1 | tee "$OUT/ch13-tests.log" | tail -5
              sanitize ch13 tests/test_gpu_wmma.py "nan_and_inf or (naive_is_right and 2x2) or small_ragged"
              timeout 300 python3 -m gemm_kernels record --chapters 13 > "$OUT/ch13-record.log" 2>&1
              tail -3 "$OUT/ch13-record.log"; cp figures/data/*.json "$OUT/" ;;
    ch14)     # chapter 14: its kernel checked (and under both sanitizers), then recorded
              timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_mma.py \
                  2>&1 | tee "$OUT/ch14-tests.log" | tail -5
              sanitize ch14 tests/test_gpu_mma.py "nan_and_inf or sanitizers"
              timeout 300 python3 -m gemm_kernels record --chapters 14 > "$OUT/ch14-record.log" 2>&1
              tail -3 "$OUT/ch14-record.log"; cp figures/data/*.json "$OUT/" ;;
    ch15)     # chapter 15: the Hopper kernels checked (and under both sanitizers), the
              # exercise graded live, the chapter's notebooks under nbval
              timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_wgmma.py \
                  tests/test_exercise_ch15.py 2>&1 | tee "$OUT/ch15-tests.log" | tail -5
              sanitize ch15 tests/test_gpu_wgmma.py "nan_and_inf"
              timeout 400 python3 -m pytest -q -p no:cacheprovider --nbval notebooks/15_hopper.ipynb \
                  notebooks/solutions/15_solution.ipynb 2>&1 | tee "$OUT/ch15-nbval.log" | tail -8 ;;
    ladder09) # chapter 09's ladder re-timed in one process (one run): both builds, step 7
              # with its choices undone, and the worked solutions timed beside its kernels
              # (the study checks each configuration on the ragged shapes before timing it);
              # step 7's new configurations first under both sanitizers
              sanitize_study ch09_step7_choices
              python3 -m gemm_kernels study ch09_ladder ch09_ladder_minb2 ch09_step7_choices \
                  --variants "08_double_buffer: worked solution" "09_zorder: worked solution" \
                  "09_capstone_step: worked solution" 2>&1 | tee "$OUT/ladder09.log" | tail -75
              cp figures/data/*.json "$OUT/" ;;
    offsize)  # chapter 13's kernels and the FP32 capstone timed at 4112^3 (rows off a
              # multiple of 128 bytes) and chapter 01's x->row at BLOCK = 16 counted (H200)
              python3 -m gemm_kernels study ch13_size_4112 ch01_xrow_l1 2>&1 \
                  | tee "$OUT/offsize.log" | tail -12
              cp figures/data/*.json "$OUT/" ;;
    nooverlap) # chapter 13's tiled kernel with its next tile loaded after the mma: under
              # both sanitizers, then timed beside cuBLAS FP16 (H200, the chapter's GPU)
              sanitize_study ch13_no_overlap
              python3 -m gemm_kernels study ch13_no_overlap 2>&1 | tee "$OUT/nooverlap.log" | tail -6
              cp figures/data/*.json "$OUT/" ;;
    profile10) # chapter 10's worked solution (every load first) profiled beside the copy,
              # with the counters of the copy's latency argument (H200, the chapter's GPU)
              python3 -m gemm_kernels study ch10_solution_profile 2>&1 | tee "$OUT/profile10.log" | tail -6
              cp figures/data/*.json "$OUT/" ;;
    unpadded) # chapter 09's capstone with its A tile unpadded (LDA = BM): under both
              # sanitizers, then counted beside the capstone as built, then timed alone
              sanitize_study ch09_unpadded
              python3 -m gemm_kernels study ch09_unpadded ch09_unpadded_time 2>&1 \
                  | tee "$OUT/unpadded.log" | tail -8
              cp figures/data/*.json "$OUT/" ;;
    h200)     # the chapters whose numbers come from the H200: chapter 01's x->col counted
              # and timed off the lines, chapter 11's worked solution timed beside its kernel
              python3 -m gemm_kernels study ch01_xcol_l1 ch01_xcol_2047 2>&1 | tee "$OUT/h200.log" | tail -12
              python3 -m gemm_kernels.notebook.timed_variants "11_dgemm: worked solution" 2>&1 \
                  | tee -a "$OUT/h200.log" | tail -4
              cp figures/data/*.json "$OUT/" ;;
    sanstudy) for st in ${STUDIES:?name the studies}; do sanitize_study "$st"; done ;;
    downcol)  # chapter 05's exercise question: the tile with its threads down the column,
              # under both sanitizers, then counted and timed beside the kernel as written
              sanitize_study ch05_down_column
              python3 -m gemm_kernels study ch05_down_column --variants \
                  "tile_1d: threads down the column first" 2>&1 | tee "$OUT/downcol.log" | tail -8
              cp figures/data/*.json "$OUT/" ;;
    latency)  python3 -m gemm_kernels.notebook.widget_latency 2>&1 | tee "$OUT/latency.log" ;;
    probe)    python3 -m gemm_kernels.memory.probe --out "$OUT/bank_probe.json" 2>&1 | tee "$OUT/probe.log" | tail -40 ;;
    studies)  # the metric names this ncu knows, kept beside the counters chosen from them
              "$(python3 -c 'from gemm_kernels.measure import ncu; print(ncu.executable())')" \
                  --query-metrics --query-metrics-mode all > "$OUT/ncu_metrics.txt" 2>&1
              python3 -m gemm_kernels study ${STUDIES:---all} 2>&1 | tee "$OUT/studies.log" | grep -v "^  "
              cp figures/data/*.json "$OUT/" ;;
    profile)  # PROFILE_KERNELS="a b" limits it to those kernels
              python3 -m gemm_kernels profile 2>&1 | tee "$OUT/profile.log" | tail -40
              cp figures/data/*.json "$OUT/" ;;
  esac
done
