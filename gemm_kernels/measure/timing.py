"""The one timing harness: warm-up, CUDA events around each repeat, median/min/max.

Measurements come back as rows in the record's format, so a live measurement and a
recorded one are the same thing to the notebooks and plots.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from gemm_kernels.core.launch import DTYPES, kernel_of, launcher

REPEATS = 20
WARMUP = 3


@dataclass
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float
    repeats: int


def time_gpu(fn, repeats: int = REPEATS, warmup: int = WARMUP) -> Timing:
    """Time `fn()` on the GPU. Kernel launches are asynchronous: only events recorded
    on the stream around the launch measure the GPU's time, not the host's."""
    import cupy
    for _ in range(warmup):          # module load, first-touch, clocks ramping up
        fn()
    cupy.cuda.runtime.deviceSynchronize()
    events = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(repeats)]
    for start, stop in events:
        start.record()
        fn()
        stop.record()
    events[-1][1].synchronize()
    ms = [cupy.cuda.get_elapsed_time(a, b) for a, b in events]
    return Timing(statistics.median(ms), min(ms), max(ms), repeats)


def gflops(shape, ms: float) -> float:
    M, N, K = shape
    return 2.0 * M * N * K / (ms * 1e-3) / 1e9


def _spread(t: Timing, convert) -> dict:
    # The fastest time gives the highest rate: min and max swap.
    return {"median": convert(t.median_ms), "min": convert(t.max_ms), "max": convert(t.min_ms)}


def _inputs(shape, dtype):
    import cupy
    from gemm_kernels.measure.check import random_normal
    rng = cupy.random.default_rng()
    M, N, K = shape
    return random_normal((M, K), dtype, rng), random_normal((K, N), dtype, rng), \
        cupy.empty((M, N), dtype)


def _rel_error(A, B, C) -> float:
    import cupy
    ref = A.astype("float64") @ B.astype("float64")
    return float(cupy.linalg.norm(C.astype("float64") - ref) / cupy.linalg.norm(ref))


def measure_gemm(kernel, shape, params=None, repeats: int = REPEATS) -> dict:
    """GFLOP/s of one kernel configuration, and the relative error of what it computed."""
    k = kernel_of(kernel)
    p = k.resolve(params)
    A, B, C = _inputs(shape, DTYPES[k.op])
    run = launcher(k, A, B, C, params=p)
    t = time_gpu(run, repeats)
    return {"chapter": k.chapter, "kernel": k.name, "params": p, "shape": list(shape),
            "gflops": _spread(t, lambda ms: gflops(shape, ms)),
            "rel_error": _rel_error(A, B, C), "repeats": t.repeats,
            "source": k.source_hash()}


def measure_cublas(shape, dtype="float32", repeats: int = REPEATS) -> dict:
    """cuBLAS through cupy.matmul, in the same process (TF32 off: see __init__)."""
    import cupy
    A, B, C = _inputs(shape, dtype)
    t = time_gpu(lambda: cupy.matmul(A, B, out=C), repeats)
    name = "cublas" if dtype == "float32" else "cublas_dgemm"
    return {"chapter": "00", "kernel": name, "params": {}, "shape": list(shape),
            "gflops": _spread(t, lambda ms: gflops(shape, ms)),
            "rel_error": _rel_error(A, B, C), "repeats": t.repeats}


def measure_copy(shape, repeats: int = REPEATS) -> dict:
    """Device-to-device copy of a float32 matrix of `shape`, or of `shape[0]` bytes when
    the shape has one entry; GB/s counts bytes read plus bytes written."""
    import cupy
    nbytes = shape[0] if len(shape) == 1 else shape[0] * shape[1] * 4
    src = cupy.random.default_rng().standard_normal(nbytes // 4, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    n = src.nbytes
    t = time_gpu(lambda: cupy.cuda.runtime.memcpyAsync(
        dst.data.ptr, src.data.ptr, n, cupy.cuda.runtime.memcpyDeviceToDevice,
        cupy.cuda.get_current_stream().ptr), repeats)
    return {"chapter": "00", "kernel": "device_copy", "params": {}, "shape": list(shape),
            "gbps": _spread(t, lambda ms: 2 * n / (ms * 1e-3) / 1e9), "repeats": t.repeats}


def measure_transpose(kernel, shape, params=None, repeats: int = REPEATS) -> dict:
    """GB/s = (bytes read + bytes written) / time, for a transpose or copy kernel."""
    import cupy
    from gemm_kernels.measure.check import random_normal
    k = kernel_of(kernel)
    p = k.resolve(params)
    dtype = {"float": "float32", "double": "float64"}[p["T"]]
    src = random_normal(shape, dtype, cupy.random.default_rng())
    out = cupy.empty(shape[::-1] if k.op == "transpose" else shape, dtype)
    t = time_gpu(launcher(k, src, out, params=p), repeats)
    expect = src.T if k.op == "transpose" else src
    moved = 2 * src.nbytes
    return {"chapter": k.chapter, "kernel": k.name, "params": p, "shape": list(shape),
            "gbps": _spread(t, lambda ms: moved / (ms * 1e-3) / 1e9),
            "exact": bool(cupy.array_equal(out, expect)), "repeats": t.repeats,
            "source": k.source_hash()}


def measure_pitfalls(n: int = 4096) -> dict:
    """Two timing mistakes measured on cuBLAS at n^3: a host timer without a
    synchronisation, and zeros instead of random inputs."""
    import time
    import cupy
    A, B, C = _inputs((n, n, n), "float32")
    mm = lambda: cupy.matmul(A, B, out=C)
    random_ms = time_gpu(mm).median_ms
    cupy.cuda.runtime.deviceSynchronize()
    t0 = time.perf_counter()
    mm()                                   # returns as soon as the launch is queued
    host_ms = (time.perf_counter() - t0) * 1e3
    cupy.cuda.runtime.deviceSynchronize()
    A.fill(0)
    B.fill(0)
    zeros_ms = time_gpu(mm).median_ms
    return {"chapter": "00", "kernel": "timing_pitfalls", "params": {}, "shape": [n, n, n],
            "metrics": {"host_timer_without_sync_ms": host_ms, "events_random_ms": random_ms,
                        "events_zeros_ms": zeros_ms}}
