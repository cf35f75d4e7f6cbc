"""Recording on a GPU: the ladder, the sweeps the widgets browse, the baselines.

`python -m gemm_kernels record` runs the whole plan; `sweep KERNEL` measures one
kernel's valid space. Both merge into `figures/data/<device>.json`, replacing rows of
the same kernel, parameters and shape, so a chapter can be re-recorded on its own.

Every row is stamped with the run of the process that measured it (`run()`: id, start,
command, commit, toolchain, timing settings, written to the record's "runs"), and every
kernel is timed with its reference interleaved (see `timing.measure`), so each ratio
the notebooks show comes from one process.
"""
from __future__ import annotations

import datetime
import functools
import multiprocessing
import os
import secrets
import shlex
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gemm_kernels.core import device
from gemm_kernels.core.kernels import KERNELS, L2_READ_SHAPE, get
from gemm_kernels.core.registry import runnable
from gemm_kernels.measure import records, timing

REPO = Path(__file__).resolve().parents[2]
LADDER_SIZES = (1024, 2048, 4096, 8192)   # square sizes of every ladder kernel
SWEEP_SIZE = 2048                  # the widgets' default size for GEMM kernels
TRANSPOSE_SHAPES = ((8192, 8192), (8191, 4097))
# Kernels so slow at 8192^3 that 20 repeats would take minutes: recorded up to 4096.
SLOW_AT_8192 = {"naive", "coalesced"}
# Configurations besides the defaults that the chapters follow across all ladder sizes:
# siboehm's kernel 4 tile (64x64x8, TM=8) and kernel 5 tile (128x128x8, 8x8 per thread);
# chapter 14's deeper stage (BK = 64 in 3 stages: 96 KiB of shared memory, more than a
# T4 gives a block, so it cannot be the default, which must run there).
K5 = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}
LADDER_CONFIGS = {"tile_1d": [{"BM": 64, "BN": 64, "BK": 8, "TM": 8}],
                  "tile_2d": [K5], "tile_2d_reg": [K5], "tile_2d_strided": [K5],
                  "mma_sync": [{"BK": 64, "STAGES": 3}],
                  "wgmma_ws": [{"STAGES": 3, "GROUP": 16}]}


# Chapters whose kernels are recorded by their own plan, at their own shapes: chapter
# 12's (gemm_kernels.plan: calibration sweeps and the benchmark shapes).
OWN_RECORDING = {"12"}

# ------------------------------------------------------------------ the run

@dataclass(frozen=True)
class Run:
    """One measuring process: its id, and the record's "runs" entry for it."""
    id: str
    info: dict


def run_id(started: datetime.datetime, suffix: str) -> str:
    """e.g. 20261123T150405Z-3fa2c1: when the process started, and a random suffix for
    two processes started in the same second."""
    return f"{started:%Y%m%dT%H%M%SZ}-{suffix}"


def command_line(argv: list[str], repo: Path = REPO) -> str:
    """The command that started this process, as typed: a script of this repository
    becomes `python -m <module>` (the CLI: `python -m gemm_kernels record ...`)."""
    rest = shlex.join(argv[1:])
    script = Path(argv[0]) if argv and argv[0] else None
    if script is not None and script.suffix == ".py" and script.resolve().is_relative_to(repo):
        parts = list(script.resolve().relative_to(repo).with_suffix("").parts)
        if parts[-1] == "__main__":
            parts.pop()
        return f"python -m {'.'.join(parts)} {rest}".strip()
    return f"python {shlex.join(argv[:1])} {rest}".strip()


def toolchain() -> dict:
    """The CUDA software this process measures with. Each part is asked for on its own:
    one that cannot be read is None rather than a failed recording."""
    import cupy

    def ask(fn):
        try:
            return fn()
        except Exception:
            return None

    def nvrtc():
        from cupy.cuda import nvrtc
        return ".".join(map(str, nvrtc.getVersion()))
    rt = cupy.cuda.runtime
    return {"cupy": cupy.__version__, "cuda_runtime": ask(rt.runtimeGetVersion),
            "nvrtc": ask(nvrtc), "driver": ask(rt.driverGetVersion)}


@functools.lru_cache(maxsize=None)
def run() -> Run:
    """This process's run, created once, on first use; every row it measures names it."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return Run(run_id(now, secrets.token_hex(3)), {
        "started": f"{now:{records.TIME_FORMAT}}", "command": command_line(sys.argv),
        "commit": records.git_commit(), "toolchain": toolchain(),
        "timing": {"flush_l2": timing.FLUSH_L2, "interleaved": timing.INTERLEAVE,
                   "warmup": timing.WARMUP, "repeats": timing.REPEATS}})


def stamp(row: dict) -> dict:
    """The row with this process's run id, and the time if it has none yet."""
    return {**row, "run": run().id, "time": row.get("time") or records.utc_now()}


def measure(kernel, shape, params: dict | None = None, **kw) -> dict:
    """`timing.measure` (the reference interleaved), stamped with this run."""
    return stamp(timing.measure(kernel, shape, params, **kw))


# ------------------------------------------------------------------ the record file

def _key(row) -> tuple:
    """Rows with the same key replace each other: a timing and a profile of the same
    configuration do not, nor do the profiles of two studies (different counters)."""
    return (row["kernel"], tuple(sorted(row["params"].items())), tuple(row["shape"]),
            "metrics" in row and "gflops" not in row and "gbps" not in row,
            row.get("study"))


def combine(old: records.Record | None, rows: list[dict], sources: dict,
            this_run: Run) -> tuple[list[dict], dict, int]:
    """(results, runs, dropped): the old rows that still describe the kernels (same
    source hash) and name a run, replaced by `rows` where the key is the same; the runs
    that some row names. `dropped`: old rows left out for having no run (schema 1)."""
    unnamed = [r for r in rows if "run" not in r]
    if unnamed:
        raise ValueError(f"{len(unnamed)} rows to merge have no run (use record.stamp), "
                         f"e.g. {unnamed[0]['kernel']} {unnamed[0]['params']}")
    old_rows = old.results if old else []
    dropped = sum(1 for r in old_rows if "run" not in r)
    keep = {_key(r): r for r in old_rows if "run" in r
            and (r["kernel"] not in sources or r.get("source") == sources[r["kernel"]])}
    for r in rows:
        keep[_key(r)] = r
    results = list(keep.values())
    named = {r["run"] for r in results}
    runs = {**(old.runs if old else {}), this_run.id: this_run.info}
    return results, {i: info for i, info in runs.items() if i in named}, dropped


def merge(rows: list[dict], path=None, log=print) -> records.Record:
    """Add this process's rows to this device's record, replacing rows with the same
    key; rows of older kernel sources and rows without provenance are dropped."""
    props = device.properties()
    path = Path(path or records.DATA_DIR / f"{records.slug(props['name'])}.json")
    old = records.load(path) if path.exists() else None
    sources = {k.name: k.source_hash() for k in KERNELS.values()}
    results, runs, dropped = combine(old, rows, sources, run())
    if dropped:
        log(f"dropped {dropped} rows of {path.name} that name no run (schema 1): "
            "re-record them")
    rec = records.Record(props, records.utc_now(), records.git_commit(), results, runs=runs)
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
                rows.append(measure(k, s, c))
        elif k.op == "read":            # l2_read: at a shape that fits in the L2
            rows.append(measure(k, shape or L2_READ_SHAPE, c))
        else:
            s = shape or (SWEEP_SIZE,) * 3
            if k.op == "dgemm" or not _problems(k, c, s):
                rows.append(measure(k, s, c))
        log(f"  {name} {c}: {rate_text(rows[-1]) if rows else '-'}")
    return rows


def _problems(k, c, s):
    from gemm_kernels.core.launch import problems
    return problems(k, c, s)


def rate_text(row):
    text = f"{row['gflops']['median']:,.0f} GFLOP/s" if "gflops" in row \
        else f"{row['gbps']['median']:,.0f} GB/s"
    pct = timing.share(row)
    return text if pct is None else f"{text} = {pct:.0f}% of {row['reference']['kernel']}"


def plan_rows(chapters=None, log=print) -> list[dict]:
    """The whole recording: baselines, the ladder, every chapter's sweep."""
    rows = []
    want = lambda ch: chapters is None or ch in chapters
    if want("13"):
        # the tensor-core chapters set FP16 beside FP32 in one run: cuBLAS in both, and
        # the FP32 series' fastest kernel (chapter 09's capstone, beside cuBLAS)
        for n in LADDER_SIZES:
            for name in ("cublas_hgemm", "cublas", "capstone"):
                if runnable(get(name))[0] if name in KERNELS else True:
                    rows.append(measure(name, (n, n, n)))
                    log(f"{name} {n}: {rate_text(rows[-1])}")
    if want("00"):
        for n in LADDER_SIZES:
            rows.append(measure("cublas", (n, n, n)))
            log(f"cublas {n}: {rate_text(rows[-1])}")
        rows.append(measure("device_copy", (1 << 30,)))
        for s in TRANSPOSE_SHAPES:
            rows.append(measure("device_copy", s))
        log(f"device copy: {rate_text(rows[-1])}")
        rows.append(stamp(timing.measure_pitfalls()))
    for k in KERNELS.values():
        if not want(k.chapter) or k.chapter in OWN_RECORDING:
            continue
        ok, why = runnable(k)
        if not ok:      # e.g. the capstone's cp.async on a T4: recorded as left out
            log(f"{k.name} (chapter {k.chapter}): left out: {why}")
            continue
        log(f"{k.name} (chapter {k.chapter})")
        if k.op in ("sgemm", "hgemm"):    # hgemm: the tensor-core chapters, beside cuBLAS FP16
            for c in [k.defaults()] + [c for c in LADDER_CONFIGS.get(k.name, [])
                                       if k.resolve(c) != k.defaults()
                                       and not _problems(k, k.resolve(c), (1024,) * 3)]:
                for n in LADDER_SIZES:
                    if n == 8192 and k.name in SLOW_AT_8192:
                        continue
                    rows.append(measure(k, (n, n, n), c))
                    log(f"  {c} {n}: {rate_text(rows[-1])}")
        elif k.op == "dgemm":
            rows.append(measure(k, (4096,) * 3))
            rows.append(measure("cublas_dgemm", (4096,) * 3))
        elif k.op in ("transpose", "copy"):
            for s in TRANSPOSE_SHAPES:
                for t in ("float", "double"):
                    rows.append(measure(k, s, {"T": t}))
                    log(f"  {s} {t}: {rate_text(rows[-1])}")
        if len(k.valid_configurations()) > 1:
            rows += sweep_rows(k.name, log=log)
    return rows


def main_record(chapters=None):
    if not device.is_live():
        sys.exit("record needs a GPU: there is none here (recorded mode)")
    rec = merge(plan_rows(chapters))
    print(f"wrote {rec.path} ({len(rec.results)} rows, {records.source()})")
