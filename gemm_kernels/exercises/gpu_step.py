"""Steps 3-4 of the grader, run as `python -m gemm_kernels.exercises.gpu_step JOB.json`
in a child process: a kernel that hangs or faults ends this process, and the notebook
that started it reads the way it ended as the verdict.

Prints one JSON line per step: {"name", "status", "detail"}.
"""
from __future__ import annotations

import json
import sys

ALPHA_BETA = ((1.0, 0.0), (1.5, -0.5))


def _emit(name: str, status: str, detail: str) -> None:
    print(json.dumps({"name": name, "status": status, "detail": detail}), flush=True)


def main(job_path: str) -> None:
    from gemm_kernels.core.kernels import get as get_kernel
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.grader import FAIL, PASS, student_kernel
    from gemm_kernels.measure import timing
    from gemm_kernels.measure.check import check

    job = json.loads(open(job_path).read())
    ex = get(job["exercise"])
    k, ref = student_kernel(ex, job["source"]), get_kernel(ex.kernel)

    ran = 0
    gemm = k.op in ("sgemm", "dgemm")
    for shape in ex.shapes:
        for alpha, beta in (ALPHA_BETA if gemm else ((1.0, 0.0),)):
            r = check(k, shape, ex.params, alpha, beta)
            if r.ok is None:          # the registry refuses this shape for this kernel
                continue
            ran += 1
            if not r.ok:
                dims = "x".join(map(str, shape))
                _emit("correct", FAIL, f"wrong at {dims} with alpha={alpha}, beta={beta}: "
                                       f"{r.message}")
                return
    if not ran:
        _emit("correct", FAIL, "every shape was refused: " + r.message)
        return
    _emit("correct", PASS, f"every element right on {ran} checks (ragged shapes"
                           + (", alpha/beta 1/0 and 1.5/-0.5" if gemm else "")
                           + "), nothing written outside the output")

    fns, shape, unit_rate = _timed_calls(k, ref, ex)
    t = timing.time_gpu(fns)
    rate = {name: unit_rate(x.median_ms) for name, x in t.items()}
    unit = "GFLOP/s" if k.op in ("sgemm", "dgemm") else "GB/s"
    lib = "cuBLAS" if unit == "GFLOP/s" else "the device copy"
    share = rate["yours"] / rate["chapter"]
    dims = "x".join(map(str, shape))
    detail = (f"{rate['yours']:,.0f} {unit} at {dims}: {share:.0%} of the chapter's kernel "
              f"({rate['chapter']:,.0f}), {rate['yours'] / rate['library']:.0%} of {lib} "
              f"({rate['library']:,.0f}), timed together; asked: {ex.speed:.0%} of the "
              "chapter's kernel")
    _emit("speed", PASS if share >= ex.speed else FAIL, detail)


def _timed_calls(k, ref, ex):
    """({"yours", "chapter", "library"}: callables on shared random inputs, the shape,
    ms -> rate): the submission, the chapter's kernel and cuBLAS (or the device copy)."""
    import cupy
    from gemm_kernels.core.launch import DTYPES, launcher
    from gemm_kernels.measure import timing
    from gemm_kernels.measure.check import random_normal
    rng = cupy.random.default_rng()
    n = ex.time_size
    p = ref.resolve(ex.params)
    if k.op in DTYPES:
        shape, dtype = (n, n, n), DTYPES[k.op]
        A, B = random_normal((n, n), dtype, rng), random_normal((n, n), dtype, rng)
        C1, C2, C3 = (cupy.empty((n, n), dtype) for _ in range(3))
        fns = {"yours": launcher(k, A, B, C1, params=p),
               "chapter": launcher(ref, A, B, C2, params=p),
               "library": lambda: cupy.matmul(A, B, out=C3)}
    else:
        shape = (n, n)
        src = random_normal(shape, {"float": "float32", "double": "float64"}[p["T"]], rng)
        out1, out2 = cupy.empty_like(src), cupy.empty_like(src)
        fns = {"yours": launcher(k, src, out1, params=p),
               "chapter": launcher(ref, src, out2, params=p),
               "library": timing.copy_call(src)}
    return fns, shape, timing.unit_and_rate(ref.name, shape, p)[1]


if __name__ == "__main__":
    main(sys.argv[1])
