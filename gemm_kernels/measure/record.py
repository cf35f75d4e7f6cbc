"""Recording on a GPU: the ladder, the sweeps the widgets browse, the baselines.

`python -m gemm_kernels record` runs the whole plan; `sweep KERNEL` measures one
kernel's valid space. Both merge into `figures/data/<device>.json`, replacing rows of
the same kernel, parameters and shape, so a chapter can be re-recorded on its own.
"""
from __future__ import annotations

import datetime
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor

from gemm_kernels.core import device

from gemm_kernels.measure import records

from gemm_kernels.measure import timing
from gemm_kernels.core.kernels import KERNELS, get
from gemm_kernels.measure.ladder import LADDER_SIZES

SWEEP_SIZE = 2048                  # the widgets' default size for GEMM kernels
TRANSPOSE_SHAPES = ((8192, 8192), (8191, 4097))
# Kernels so slow at 8192^3 that 20 repeats would take minutes: recorded up to 4096.
SLOW_AT_8192 = {"naive", "coalesced"}
# Configurations besides the defaults that the chapters follow across all ladder sizes:
# siboehm's kernel 4 tile (64x64x8, TM=8) and kernel 5 tile (128x128x8, 8x8 per thread).
K5 = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}
LADDER_CONFIGS = {"tile_1d": [{"BM": 64, "BN": 64, "BK": 8, "TM": 8}],
                  "tile_2d": [K5], "tile_2d_reg": [K5], "tile_2d_strided": [K5]}


def _key(row) -> tuple:
    return (row["kernel"], tuple(sorted(row["params"].items())), tuple(row["shape"]),
            "metrics" in row and "gflops" not in row and "gbps" not in row)


def merge(rows: list[dict], path=None) -> records.Record:
    """Add rows to this device's record, replacing rows with the same key."""
    props = device.properties()
    path = path or records.DATA_DIR / f"{records.slug(props['name'])}.json"
    old = records.load(path) if os.path.exists(path) else None
    # rows measured on older kernel sources no longer describe the kernels: drop them
    current = {k.name: k.source_hash() for k in KERNELS.values()}
    keep = {_key(r): r for r in (old.results if old else [])
            if r["kernel"] not in current or r.get("source") == current[r["kernel"]]}
    for r in rows:
        keep[_key(r)] = r
    rec = records.Record(props, datetime.datetime.now(datetime.timezone.utc)
                         .strftime("%Y-%m-%dT%H:%M:%SZ"), records.git_commit(), list(keep.values()))
    rec.path = records.save(rec, path)
    return rec


def _compile(args):
    from gemm_kernels.core import compiler
    name, params = args
    k = get(name)
    compiler.function(k, params)
    return name


def warm(configs: list[tuple[str, dict]], jobs: int | None = None):
    """Compile many configurations in parallel processes; CuPy's on-disk cache then
    hands them to this process without compiling again."""
    jobs = jobs or min(16, os.cpu_count() or 1)
    # "spawn": a forked child cannot use the CUDA context its parent already opened
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_compile, configs))


def sweep_rows(name: str, shape=None, log=print) -> list[dict]:
    k = get(name)
    configs = k.valid_configurations()
    warm([(name, c) for c in configs])
    rows = []
    for c in configs:
        if k.op in ("transpose", "copy"):
            for s in ([shape] if shape else TRANSPOSE_SHAPES[:1]):
                rows.append(timing.measure_transpose(k, s, c))
        else:
            s = shape or (SWEEP_SIZE,) * 3
            if k.op == "dgemm" or not _problems(k, c, s):
                rows.append(timing.measure_gemm(k, s, c))
        log(f"  {name} {c}: {_rate(rows[-1]) if rows else '-'}")
    return rows


def _problems(k, c, s):
    from gemm_kernels.core.launch import problems
    return problems(k, c, s)


def _rate(row):
    return f"{row['gflops']['median']:,.0f} GFLOP/s" if "gflops" in row \
        else f"{row['gbps']['median']:,.0f} GB/s"


def plan_rows(chapters=None, log=print) -> list[dict]:
    """The whole recording: baselines, the ladder, every chapter's sweep."""
    rows = []
    want = lambda ch: chapters is None or ch in chapters
    if want("00"):
        for n in LADDER_SIZES:
            rows.append(timing.measure_cublas((n, n, n)))
            log(f"cublas {n}: {_rate(rows[-1])}")
        rows.append(timing.measure_copy((1 << 30,)))
        for s in TRANSPOSE_SHAPES:
            rows.append(timing.measure_copy(s))
        log(f"device copy: {_rate(rows[-1])}")
        rows.append(timing.measure_pitfalls())
    for k in KERNELS.values():
        if not want(k.chapter):
            continue
        log(f"{k.name} (chapter {k.chapter})")
        if k.op == "sgemm":
            for c in [k.defaults()] + [c for c in LADDER_CONFIGS.get(k.name, [])
                                       if k.resolve(c) != k.defaults()]:
                for n in LADDER_SIZES:
                    if n == 8192 and k.name in SLOW_AT_8192:
                        continue
                    rows.append(timing.measure_gemm(k, (n, n, n), c))
                    log(f"  {c} {n}: {_rate(rows[-1])}")
        elif k.op == "dgemm":
            rows.append(timing.measure_gemm(k, (4096,) * 3))
            rows.append(timing.measure_cublas((4096,) * 3, "float64"))
        else:
            for s in TRANSPOSE_SHAPES:
                for t in ("float", "double"):
                    rows.append(timing.measure_transpose(k, s, {"T": t}))
                    log(f"  {s} {t}: {_rate(rows[-1])}")
        if len(k.valid_configurations()) > 1:
            rows += sweep_rows(k.name, log=log)
    return rows


def main_record(chapters=None):
    if not device.is_live():
        sys.exit("record needs a GPU: there is none here (recorded mode)")
    rec = merge(plan_rows(chapters))
    print(f"wrote {rec.path} ({len(rec.results)} rows, {records.source()})")
