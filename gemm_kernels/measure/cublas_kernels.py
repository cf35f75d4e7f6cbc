"""Which kernels cuBLAS launches for one SGEMM call, at given shapes: each launch's name,
grid, block, registers and duration, from one Nsight Compute run.

The call is the one the timing harness times as "cublas" (`timing.cublas_call`,
cupy.matmul on float32). cuBLAS chooses its kernels itself; where a chapter's kernel is
faster or slower than cuBLAS at a shape, this says what cuBLAS ran there (one kernel or
several, a split of K and its reduction, how many blocks) instead of a guess.

    python -m gemm_kernels.measure.cublas_kernels 1024x1024x1024 3x4096x4096 ...

records one row per shape in this GPU's recording: {"kernel": KERNEL, "study": STUDY,
"launches": [{"name", "grid", "block", "registers", "time_us"}, ...]} (not "cublas":
the timings of cuBLAS keep that name, and a lookup of them never meets these rows).
"""
from __future__ import annotations

import sys

from gemm_kernels.measure import ncu

STUDY = "cublas_kernels"
KERNEL = "cublas_launches"
# A kernel that does nothing, launched between calls: the launches between two marks
# are one call's. Each shape is called twice and the second call kept (the first may
# include cuBLAS's one-time choices).
MARK = "cublas_kernels_mark"
METRICS = ["gpu__time_duration.sum", "launch__grid_size", "launch__block_size",
           "launch__registers_per_thread"]


def parse_shape(text: str) -> tuple[int, int, int]:
    try:
        M, N, K = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"{text!r} is not a shape MxNxK (e.g. 1024x1024x1024)") from None
    if min(M, N, K) < 1:
        raise ValueError(f"{text!r}: every size must be at least 1")
    return M, N, K


def target(shapes) -> None:
    """In the profiled child: mark, call, mark, call, ... for each shape, then a mark."""
    import cupy
    import numpy
    from gemm_kernels.measure.timing import cublas_call
    mark = cupy.RawKernel(f'extern "C" __global__ void {MARK}() {{}}', MARK)
    rng = numpy.random.default_rng(0)
    calls = []
    for M, N, K in shapes:     # host-made inputs: a copy, not a kernel, to the GPU
        A = cupy.asarray(rng.standard_normal((M, K), dtype=numpy.float32))
        B = cupy.asarray(rng.standard_normal((K, N), dtype=numpy.float32))
        calls.append(cublas_call(A, B, cupy.empty((M, N), numpy.float32)))
    cupy.cuda.runtime.deviceSynchronize()
    for call in calls:
        for _ in range(2):
            mark((1,), (1,), ())
            call()
    mark((1,), (1,), ())
    cupy.cuda.runtime.deviceSynchronize()


def calls(launches: list[dict], count: int) -> list[list[dict]]:
    """The launches of each kept call (the second of each shape's two), split at the
    marks; ValueError if the marks do not split them into 2 x `count` calls."""
    segments, current = [], None
    for launch in launches:
        if MARK in launch["kernel"]:
            if current is not None:
                segments.append(current)
            current = []
        elif current is None:
            raise ValueError(f"launch {launch['kernel']!r} before the first mark")
        else:
            current.append(launch)
    if len(segments) != 2 * count or not all(segments):
        raise ValueError(f"expected {2 * count} calls, each with launches; the marks gave "
                         f"{[len(s) for s in segments]}")
    return segments[1::2]


def launch_row(launch: dict) -> dict:
    m = launch["metrics"]
    return {"name": launch["kernel"], "grid": int(m["launch__grid_size"]),
            "block": int(m["launch__block_size"]),
            "registers": int(m["launch__registers_per_thread"]),
            "time_us": m["gpu__time_duration.sum"] / 1e3}


def run(shapes) -> list[dict]:
    """One row per shape, stamped with this process's run."""
    from gemm_kernels.measure.record import stamp
    shapes = [tuple(s) for s in shapes]
    argv = [sys.executable, "-m", "gemm_kernels.measure.cublas_kernels", "--target",
            *("x".join(map(str, s)) for s in shapes)]
    launches = ncu.profile(argv, METRICS, ".")
    return [stamp({"chapter": "12", "kernel": KERNEL, "params": {}, "shape": list(s),
                   "study": STUDY, "tool": ncu.version(),
                   "launches": [launch_row(l) for l in call]})
            for s, call in zip(shapes, calls(launches, len(shapes)))]


def recorded(shape, rec) -> list[dict] | None:
    """The launches of cuBLAS's call at `shape` in recording `rec`, or None."""
    rows = [r for r in rec.results if r.get("study") == STUDY and r.get("kernel") == KERNEL
            and tuple(r["shape"]) == tuple(shape)] if rec else []
    return rows[0]["launches"] if rows else None


def main(argv) -> None:
    if argv[:1] == ["--target"]:
        return target([parse_shape(a) for a in argv[1:]])
    from gemm_kernels.measure.record import merge
    rows = run([parse_shape(a) for a in argv])
    rec = merge(rows)
    for r in rows:
        print("x".join(map(str, r["shape"])) + ": " + "; ".join(
            f"{l['name'][:70]} grid {l['grid']} block {l['block']} {l['time_us']:.1f} us"
            for l in r["launches"]))
    print(f"{len(rows)} shapes merged into {rec.path}")


if __name__ == "__main__":
    main(sys.argv[1:])
