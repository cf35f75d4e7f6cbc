"""On a GPU: the calibration sweeps the model is fitted to, the fit, and the benchmark.

    python -m gemm_kernels.plan calibrate   time every tile (and some splits) at the
                                            calibration shapes; merge into the record
    python -m gemm_kernels.plan fit [FILE]  rules/<device>.json from the recorded calibration
                                            (of the live GPU, or of the recording FILE)
    python -m gemm_kernels.plan bench       time sgemm's plan for each benchmark shape
                                            (cuBLAS beside it, in the same process)
    python -m gemm_kernels.plan exercise    time every candidate at the exercise's shape

The calibration shapes are not the benchmark shapes: the rules are fitted on the first
and judged on the second, and the fit is written before the benchmark runs.
"""
from __future__ import annotations

import json
import sys

from gemm_kernels.core import device
from gemm_kernels.core.kernels import get
from gemm_kernels.core.launch import problems
from gemm_kernels.measure import records
from gemm_kernels.plan import model

CAL_SIDES = (384, 640, 1280, 2560, 4608)
CAL_DEPTHS = (128, 640, 2560, 10240)
# (the last two: N % 4 != 0, the scalar path of B and C, whose registers can differ;
# there each tile is timed also with B copied into padded rows first, PAD_B)
CAL_ODD = ((6000, 200, 3000), (200, 6000, 3000), (384, 384, 24576), (2000, 700, 5000),
           (3001, 999, 1500), (700, 2003, 700))
CAL_SPLITS = (2, 4, 8, 16)
CAL_GEMV = ((1, 3000, 3000), (1, 12000, 1500), (1, 500, 20000),
            (3000, 1, 3000), (12000, 1, 1500), (500, 1, 20000))
# The benchmark: squares, then shapes where tiles and splits decide (skinny, K-heavy,
# vector-like, ragged).
BENCH_SQUARES = (512, 768, 1000, 1024, 1536, 2048, 3000, 4096, 6144, 8192)
BENCH_ODD = ((4097, 1023, 515), (8192, 128, 8192), (128, 8192, 8192), (256, 256, 65536),
             (8192, 8192, 128), (1, 4096, 4096), (4096, 1, 4096), (2000, 3000, 1000))
BENCH_MORE = ((3, 4096, 4096), (1, 8192, 1024), (512, 8192, 512), (1500, 1500, 20000),
              (100, 100, 100), (777, 555, 333))
COPY_SHAPE = (1 << 30,)
# Chapter 12's "choose the plan" exercise: every candidate is timed there, so a student's
# choice is judged by a measurement, not only by the model.
EXERCISE_SHAPE = (256, 384, 16384)


def bench_shapes() -> list[tuple]:
    return [(n, n, n) for n in BENCH_SQUARES] + list(BENCH_ODD) + list(BENCH_MORE)


def calibration_runs() -> list[tuple[str, dict, tuple]]:
    """(kernel, params, shape) of every calibration measurement."""
    squares = [(m, m, k) for m in CAL_SIDES for k in CAL_DEPTHS] + list(CAL_ODD)
    out = [(model.SPLIT_KERNEL, {"BM": BM, "BN": BN, "SPLIT": 1}, s)
           for s in squares for BM, BN in model.TILES]
    out += [(model.SPLIT_KERNEL, {"BM": BM, "BN": BN, "SPLIT": 1, "PAD_B": True}, s)
            for s in squares if s[1] % 4 for BM, BN in model.TILES]
    few_tiles = [s for s in squares if s[0] * s[1] <= 1280 * 1280 and s[2] >= 640]
    out += [(model.SPLIT_KERNEL, {"BM": BM, "BN": BN, "SPLIT": z}, s)
            for s in few_tiles for BM, BN in ((128, 128), (64, 128)) for z in CAL_SPLITS]
    out += [(model.GEMV_KERNEL, p, s)
            for s in CAL_GEMV for p in get(model.GEMV_KERNEL).valid_configurations()]
    return [(n, p, s) for n, p, s in out if not problems(n, p, s)]


def _need_gpu():
    if not device.is_live():
        sys.exit("this needs a GPU: there is none here (recorded mode)")


def calibrate():
    from gemm_kernels.measure.record import measure, merge, rate_text
    _need_gpu()
    rows = []
    for n, p, s in calibration_runs():
        rows.append(measure(n, s, p))
        print(f"{n} {p} {s}: {rate_text(rows[-1])}", flush=True)
    rows.append(measure("device_copy", COPY_SHAPE))
    merge(rows)


def calibration_rows(rec) -> list[dict]:
    """The recording's row of each calibration run (the first, where several)."""
    rows = []
    for n, p, s in calibration_runs():
        rows += rec.find(n, s, get(n).resolve(p))[:1]
    return rows


def fit_rules(rec=None) -> dict:
    """Rules from the calibration rows of the recording (the live GPU's, or `rec`)."""
    rec = rec or records.current()
    rows = calibration_rows(rec)
    copy = rec.find("device_copy", COPY_SHAPE)
    if not rows or not copy:
        raise SystemExit("no calibration rows recorded for this device: run "
                         "`python -m gemm_kernels.plan calibrate` on it first")
    return model.fit(rows, rec.device, copy[0]["gbps"]["median"],
                     sorted({r["run"] for r in rows}))


def fit(path=None):
    """rules/<device>.json from the recording of the live GPU, or of the file `path`."""
    rec = records.load(path) if path else records.load(
        records.DATA_DIR / f"{records.slug(device.properties()['name'])}.json")
    rules = fit_rules(rec)
    out = model.rules_path(rules["device"])
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rules, indent=1) + "\n")
    model.load.cache_clear()
    print(f"wrote {out}")
    print(json.dumps(rules, indent=1))


def bench():
    from gemm_kernels.measure.record import measure, merge, rate_text
    from gemm_kernels.plan.choose import plan
    _need_gpu()
    rows = []
    for s in bench_shapes():
        p = plan(s)
        rows.append(measure(p.kernel, s, p.params))
        print(f"{'x'.join(map(str, s)):>16}  {str(p):<40} {rate_text(rows[-1])}", flush=True)
    merge(rows)


def exercise():
    """Time every candidate configuration at EXERCISE_SHAPE (cuBLAS beside each)."""
    from gemm_kernels.measure.record import measure, merge, rate_text
    from gemm_kernels.plan.choose import candidates
    _need_gpu()
    rows = []
    for BM, BN, z in candidates(EXERCISE_SHAPE):
        p = {"BM": BM, "BN": BN, "SPLIT": z}
        if problems(model.SPLIT_KERNEL, p, EXERCISE_SHAPE):
            continue
        rows.append(measure(model.SPLIT_KERNEL, EXERCISE_SHAPE, p))
        print(f"{p}: {rate_text(rows[-1])}", flush=True)
    merge(rows)


def main(argv=None):
    cmd, *rest = argv or sys.argv[1:] or ["?"]
    actions = {"calibrate": calibrate, "fit": fit, "bench": bench, "exercise": exercise}
    if cmd not in actions or (rest and cmd != "fit"):
        sys.exit(f"usage: python -m gemm_kernels.plan {{{','.join(actions)}}} (fit: [FILE])")
    actions[cmd](*rest)
