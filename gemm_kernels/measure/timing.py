"""The one timing harness: warm-up, CUDA events around each repeat, median/min/max.

`harness` is plain Python: it takes the callables to time and a clock (events, elapsed
time, synchronisation, L2 flush), so its logic is tested on a CPU with a fake clock.
`CudaClock` is the thin GPU side. `measure` builds one row in the record's format, so a
live measurement and a recorded one are the same thing to the notebooks and plots.

Defaults (chapter 00 states them):

- WARMUP = 3 calls of each callable before timing: the first call loads the module and
  may find the GPU at an idle clock; three more than cover the clock ramp.
- REPEATS = 20 timed calls of each callable, reported as median, min and max: the
  median ignores a stray slow repeat, min and max show the spread.
- FLUSH_L2 = True: before every timed call a scratch buffer of twice the L2 is written,
  outside the timed region, so every call starts from a cold L2. Without it a 1024^3
  SGEMM (12 MB of inputs) runs from the 50-60 MB L2 of an H100/H200 while 8192^3 cannot,
  and candidate and reference would see different cache states.
- INTERLEAVE = True: candidate and reference alternate (candidate, reference, candidate,
  ...), each between its own pair of events, so clock changes, heat and other work on
  the GPU during the measurement fall on both alike: their ratio is what the series
  reports.
"""
from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass

from gemm_kernels.core.kernels import KERNELS
from gemm_kernels.core.launch import DTYPES, kernel_of, launcher, operand_dtypes

REPEATS = 20
WARMUP = 3
FLUSH_L2 = True
INTERLEAVE = True
# Where a GPU does not report its L2 size: more than any current GPU's L2 (B200: 126 MB).
UNKNOWN_L2_BYTES = 128 << 20

# What each kind of kernel is compared with, measured in the same process beside it.
REFERENCES = {"sgemm": "cublas", "dgemm": "cublas_dgemm", "hgemm": "cublas_hgemm",
              "transpose": "device_copy", "copy": "device_copy", "read": "device_copy"}
# cuBLAS for each GEMM op: its op (the dtypes of its operands) and how it is called.
CUBLAS_OPS = {"cublas": "sgemm", "cublas_dgemm": "dgemm", "cublas_hgemm": "hgemm"}
# cuBLAS with BF16 inputs (FP32 accumulation and C), timed beside cuBLAS FP16: the other
# 16-bit format of the tensor cores. CuPy has no bfloat16 dtype of its own, so its
# operands travel as the uint16 bits of BF16 values, which cublasGemmEx reads as BF16.
CUBLAS_BF16 = "cublas_bf16"
REFERENCE_KERNELS = (*CUBLAS_OPS, CUBLAS_BF16, "device_copy")


@dataclass(frozen=True)
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float
    repeats: int


def check_counts(repeats, warmup) -> None:
    """ValueError unless repeats >= 1 and warmup >= 0 (whole numbers)."""
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a whole number >= 1 (a median needs at least "
                         f"one timed call), got {repeats!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be a whole number >= 0, got {warmup!r}")


def harness(fns: dict, clock, repeats: int = REPEATS, warmup: int = WARMUP,
            flush_l2: bool = FLUSH_L2, interleave: bool = INTERLEAVE) -> dict[str, Timing]:
    """Time each callable of `fns` ({name: fn}, candidate first): {name: Timing}.

    `clock` provides event() (record a point on the GPU's stream and return it),
    elapsed_ms(start, stop), synchronize() and flush() (evict the L2). Each timed call
    sits between its own pair of events; a flush comes before each one, outside them.
    """
    check_counts(repeats, warmup)
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    clock.synchronize()             # the warm-up must not overlap the first timed call
    if interleave:
        order = [name for _ in range(repeats) for name in fns]
    else:
        order = [name for name in fns for _ in range(repeats)]
    marks = {name: [] for name in fns}
    for name in order:
        if flush_l2:
            clock.flush()
        start = clock.event()
        fns[name]()
        marks[name].append((start, clock.event()))
    clock.synchronize()             # events can be read only once the GPU passed them
    out = {}
    for name, pairs in marks.items():
        ms = [clock.elapsed_ms(a, b) for a, b in pairs]
        out[name] = Timing(statistics.median(ms), min(ms), max(ms), len(ms))
    return out


def flush_bytes(l2_bytes: int | None) -> int:
    """Bytes to write to evict the L2: twice its size, so no line of the timed data
    survives whatever the replacement policy keeps."""
    return 2 * (l2_bytes or UNKNOWN_L2_BYTES)


class CudaClock:
    """CUDA events on the current stream; flush() writes a scratch buffer."""

    def __init__(self, l2_bytes: int | None):
        import cupy
        self._cupy = cupy
        self._scratch = cupy.empty(flush_bytes(l2_bytes), dtype=cupy.uint8)

    def flush(self):
        self._scratch.data.memset_async(0, self._scratch.nbytes)

    def event(self):
        e = self._cupy.cuda.Event()
        e.record()
        return e

    def elapsed_ms(self, start, stop) -> float:
        return self._cupy.cuda.get_elapsed_time(start, stop)

    def synchronize(self):
        self._cupy.cuda.runtime.deviceSynchronize()


@functools.lru_cache(maxsize=None)
def cuda_clock() -> CudaClock:
    """One clock (and one scratch buffer) per process."""
    from gemm_kernels.core import device
    return CudaClock(device.properties().get("l2_bytes"))


def time_gpu(fns: dict, repeats: int = REPEATS, warmup: int = WARMUP,
             flush_l2: bool = FLUSH_L2, interleave: bool = INTERLEAVE) -> dict[str, Timing]:
    """`harness` on the GPU. Kernel launches are asynchronous: only events recorded on
    the stream around the launch measure the GPU's time, not the host's."""
    return harness(fns, cuda_clock(), repeats, warmup, flush_l2, interleave)


# ------------------------------------------------------------------ rates and rows

def gflops(shape, ms: float) -> float:
    """GFLOP/s = 2*M*N*K / t."""
    M, N, K = shape
    return 2.0 * M * N * K / (ms * 1e-3) / 1e9


def gbps(nbytes: int, ms: float) -> float:
    """GB/s = (bytes read + bytes written) / t."""
    return nbytes / (ms * 1e-3) / 1e9


def spread(t: Timing, rate) -> dict:
    """{median, min, max} of a rate: the fastest time gives the highest rate."""
    return {"median": rate(t.median_ms), "min": rate(t.max_ms), "max": rate(t.min_ms)}


def times_ms(row: dict) -> dict:
    """{median, min, max} in milliseconds of a timed row (GFLOP/s or GB/s): `spread`
    undone, with the rate's own formula (the highest rate is the fastest call)."""
    unit, rate = unit_and_rate(row["kernel"], row["shape"], row["params"])
    work = rate(1.0)              # rate(ms) = work / ms
    r = row[unit]
    return {"median": work / r["median"], "min": work / r["max"], "max": work / r["min"]}


def reference_of(name: str) -> str | None:
    """The reference a kernel is measured beside (None for the references themselves,
    but cuBLAS BF16, timed beside cuBLAS FP16)."""
    if name == CUBLAS_BF16:
        return "cublas_hgemm"
    return None if name in REFERENCE_KERNELS else REFERENCES[kernel_of(name).op]


def input_bytes(name: str, shape, params: dict) -> int:
    """Bytes of a copy's or transpose's input. The device copy's shape is a float32
    matrix, or a byte count when it has one entry."""
    if name == "device_copy":
        return shape[0] if len(shape) == 1 else shape[0] * shape[1] * 4
    return shape[0] * shape[1] * {"float": 4, "double": 8}[params["T"]]


def unit_and_rate(name: str, shape, params: dict):
    """("gflops", ms -> GFLOP/s) for GEMMs, ("gbps", ms -> GB/s) for copies and
    transposes, whose bytes moved are their input read once and written once, and for
    a "read" kernel (l2_read), which reads its input PASSES times and writes it once."""
    if name in (*CUBLAS_OPS, CUBLAS_BF16) or (name != "device_copy"
                                               and kernel_of(name).op in DTYPES):
        return "gflops", lambda ms: gflops(shape, ms)
    reads = params["PASSES"] if name != "device_copy" and kernel_of(name).op == "read" else 1
    moved = (reads + 1) * input_bytes(name, shape, params)
    return "gbps", lambda ms: gbps(moved, ms)


def row(kernel, shape, params: dict, timings: dict, extra: dict) -> dict:
    """One record row from the harness's timings ("candidate", and "reference" for a
    kernel) and what was learnt after timing (`extra`: error_over_bound or exact, binary).
    `kernel`: a reference's or registry kernel's name, or a Kernel (a variant: a registry
    kernel around changed text), whose row carries its own name and its text's hash."""
    from gemm_kernels.measure import records
    unit, rate = unit_and_rate(kernel, shape, params)
    cand = timings["candidate"]
    k = None if kernel in REFERENCE_KERNELS else kernel_of(kernel)
    out = {"chapter": k.chapter if k else "00", "kernel": k.name if k else kernel,
           "params": params, "shape": list(shape), unit: spread(cand, rate), **extra,
           "repeats": cand.repeats, "time": records.utc_now()}
    if k:
        out["source"] = k.source_hash()
    ref = reference_of(kernel)
    if ref:
        out["reference"] = {"kernel": ref, unit: spread(timings["reference"], rate)}
    return out


def share(row: dict) -> float | None:
    """The row's rate in percent of its own reference (cuBLAS or the device copy,
    measured in the same process beside it); None when the row has none, as rows of
    schema-1 recordings: a reference from another process is never used."""
    ref = row.get("reference")
    unit = "gflops" if "gflops" in row else "gbps"
    try:
        ours, theirs = row[unit]["median"], ref[unit]["median"]
    except (KeyError, TypeError):
        return None
    return 100 * ours / theirs if theirs else None


def measure(kernel, shape, params: dict | None = None, repeats: int = REPEATS,
            warmup: int = WARMUP, flush_l2: bool = FLUSH_L2,
            interleave: bool = INTERLEAVE) -> dict:
    """One row: `kernel` at `shape`, timed with its reference interleaved (cuBLAS SGEMM
    or DGEMM for GEMMs, the device copy of the same bytes for copies and transposes);
    a reference kernel (cuBLAS for each op, "device_copy") is timed alone.
    `kernel`: a name, or a Kernel (a registry kernel or a variant of one)."""
    reference = isinstance(kernel, str) and kernel in REFERENCE_KERNELS
    if isinstance(kernel, str) and not reference:
        kernel = kernel_of(kernel)
    p = {} if reference else kernel.resolve(params)
    # registry kernels by name; a variant (not in the registry) as itself
    who = kernel if reference or kernel.name not in KERNELS else kernel.name
    fns, after = setup(who, tuple(shape), p)
    timings = harness(fns, cuda_clock(), repeats, warmup, flush_l2, interleave)
    return row(who, shape, p, timings, after())


# ------------------------------------------------------------------ GPU side

def setup(name, shape: tuple, p: dict):
    """({"candidate": fn[, "reference": fn]}, after): the callables to time on fresh
    random inputs, and a function giving the row's fields known only after timing.
    `name`: a reference's or registry kernel's name, or a Kernel (a variant)."""
    import cupy
    from gemm_kernels.core import compiler
    from gemm_kernels.measure.check import compare_gemm, random_normal
    rng = cupy.random.default_rng()
    if name == "device_copy":
        src = rng.standard_normal(input_bytes(name, shape, p) // 4, dtype=cupy.float32)
        return {"candidate": copy_call(src)}, lambda: {}
    if name in CUBLAS_OPS:
        A, B, C = _gemm_inputs(shape, CUBLAS_OPS[name], rng)
        return {"candidate": cublas_call(A, B, C)}, \
            lambda: {"error_over_bound": _error_over_bound(A, B, C)}
    if name == CUBLAS_BF16:
        M, N, K = shape
        A, B = (bf16_values(random_normal(s, "float32", rng)) for s in ((M, K), (K, N)))
        C = cupy.empty((M, N), cupy.float32)
        A16, B16, C16 = _gemm_inputs(shape, "hgemm", rng)      # cuBLAS FP16, beside it
        return {"candidate": cublas_call(bf16_bits(A), bf16_bits(B), C),
                "reference": cublas_call(A16, B16, C16)}, \
            lambda: {"error_over_bound": compare_gemm(C, A, B, inputs="bfloat16").ratio}
    k = kernel_of(name)
    binary = lambda: {"binary": compiler.binary_attributes(compiler.function(k, p, shape))}
    if k.op in DTYPES:
        # the launcher is built here, before timing: a kernel that reads A^T gets it
        # now (launch.operands), and each timed call runs the GEMM alone
        A, B, C = _gemm_inputs(shape, k.op, rng)
        C_ref = cupy.empty_like(C)      # cuBLAS must not overwrite what is checked
        return {"candidate": launcher(k, A, B, C, params=p),
                "reference": cublas_call(A, B, C_ref)}, \
            lambda: {"error_over_bound": _error_over_bound(A, B, C), **binary()}
    src = random_normal(shape, {"float": "float32", "double": "float64"}[p["T"]], rng)
    out = cupy.empty(shape[::-1] if k.op == "transpose" else shape, src.dtype)
    expect = src.T if k.op == "transpose" else src
    return {"candidate": launcher(k, src, out, params=p), "reference": copy_call(src)}, \
        lambda: {"exact": bool(cupy.array_equal(out, expect)), **binary()}


def copy_call(src):
    """A device-to-device copy of `src`'s bytes (cudaMemcpyAsync on the current stream)."""
    import cupy
    dst = cupy.empty_like(src)
    rt = cupy.cuda.runtime
    return lambda: rt.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes,
                                  rt.memcpyDeviceToDevice, cupy.cuda.get_current_stream().ptr)


def cublas_call(A, B, C):
    """C = A @ B by cuBLAS. Same dtypes: cupy.matmul (SGEMM, DGEMM; TF32 stays off unless
    CUPY_TF32 is set). FP16 A and B with an FP32 C: cublasGemmEx with FP32 computation,
    the tensor-core GEMM the chapters' kernels do (cupy.matmul on float16 arrays would
    also write C in FP16). cuBLAS is column-major: the row-major C = A @ B is its
    C^T = B^T @ A^T, so B goes first. uint16 A and B: the bits of BF16 values
    (`bf16_bits`), multiplied as BF16."""
    import cupy
    import numpy as np
    if A.dtype == C.dtype:
        return lambda: cupy.matmul(A, B, out=C)
    from cupy_backends.cuda.libs import cublas
    from cupy.cuda import device
    (M, K), N = A.shape, B.shape[1]
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    # the CUDA enums' values: FP16 (or uint16 holding BF16 bits) in, FP32 out and compute
    r16, r32f, compute_32f, default_algo = {"float16": 2, "uint16": 14}[str(A.dtype)], 0, 68, -1

    def call():
        cublas.setPointerMode(device.get_cublas_handle(), cublas.CUBLAS_POINTER_MODE_HOST)
        cublas.gemmEx(device.get_cublas_handle(), cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N,
                      N, M, K, one.ctypes.data, B.data.ptr, r16, N, A.data.ptr, r16, K,
                      zero.ctypes.data, C.data.ptr, r32f, N, compute_32f, default_algo)
    return call


def bf16_values(x):
    """float32 array `x` (NumPy or CuPy) rounded to the nearest BF16 value (ties to
    even), as float32: the low 16 bits of each value cleared."""
    bits = x.view("uint32")
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype("uint32").view("float32")


def bf16_bits(x):
    """The BF16 bits (uint16) of float32 array `x`, whose values are BF16 already."""
    return (x.view("uint32") >> 16).astype("uint16")


def _gemm_inputs(shape, op, rng):
    """Random A and B and an empty C of a GEMM op's dtypes."""
    import cupy
    from gemm_kernels.measure.check import random_normal
    M, N, K = shape
    a, b, c = operand_dtypes(op)
    return random_normal((M, K), a, rng), random_normal((K, N), b, rng), \
        cupy.empty((M, N), c)


def _error_over_bound(A, B, C) -> float:
    """The checker's verdict on what the timed calls computed: the largest error of an
    element over its own rounding bound (below 1 is correct; inf for a NaN)."""
    from gemm_kernels.measure.check import compare_gemm
    return compare_gemm(C, A, B).ratio


def measure_pitfalls(n: int = 4096) -> dict:
    """Two timing mistakes measured on cuBLAS at n^3: a host timer without a
    synchronisation, and zeros instead of random inputs."""
    import time
    import cupy
    from gemm_kernels.measure import records
    A, B, C = _gemm_inputs((n, n, n), "sgemm", cupy.random.default_rng())
    mm = lambda: cupy.matmul(A, B, out=C)
    random_ms = time_gpu({"cublas": mm})["cublas"].median_ms
    cupy.cuda.runtime.deviceSynchronize()
    t0 = time.perf_counter()
    mm()                                   # returns as soon as the launch is queued
    host_ms = (time.perf_counter() - t0) * 1e3
    cupy.cuda.runtime.deviceSynchronize()
    A.fill(0)
    B.fill(0)
    zeros_ms = time_gpu({"cublas": mm})["cublas"].median_ms
    return {"chapter": "00", "kernel": "timing_pitfalls", "params": {}, "shape": [n, n, n],
            "metrics": {"host_timer_without_sync_ms": host_ms, "events_random_ms": random_ms,
                        "events_zeros_ms": zeros_ms}, "time": records.utc_now()}
