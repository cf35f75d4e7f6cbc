#!/usr/bin/env bash
# Chapter 12's recorded data only (no tests, no sanitizers: the `ch12` stage of
# gpu_host.sh runs those too): the calibration, the fit, the benchmark, the exercise's
# candidates and chapter 12's profiles, archived into $OUT/ch12-data.tgz. Run after
# `bash scripts/gpu_host.sh info` (which installs the carried wheels).
set -uo pipefail
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 MPLBACKEND=Agg
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m gemm_kernels.plan calibrate > "$OUT/ch12-calibrate.log" 2>&1; tail -2 "$OUT/ch12-calibrate.log"
python3 -m gemm_kernels.plan fit > "$OUT/ch12-fit.log" 2>&1; head -60 "$OUT/ch12-fit.log"
python3 -m gemm_kernels.plan bench 2>&1 | tee "$OUT/ch12-bench.log"
python3 -m gemm_kernels.plan exercise > "$OUT/ch12-exercise.log" 2>&1
python3 -m gemm_kernels study ${STUDIES:-ch12_ragged_n} > "$OUT/ch12-studies.log" 2>&1
grep -v "^  " "$OUT/ch12-studies.log" | tail -8
tar czf "$OUT/ch12-data.tgz" figures/data/*.json gemm_kernels/plan/rules
