"""Correctness: fresh random inputs, NaN-poisoned output, float64 reference."""
from __future__ import annotations

import math
import secrets
from dataclasses import dataclass

from gemm_kernels.core.launch import DTYPES, kernel_of, launch, problems

# The shapes every kernel is checked on: tiny, prime-ish, ragged in every dimension.
RAGGED_SHAPES = [(1, 1, 1), (7, 13, 5), (33, 65, 17), (127, 129, 255),
                 (1000, 1000, 1000), (4097, 1023, 515),
                 # vector paths with ragged edges: N % 4 == 0 but K odd; a single row
                 (300, 1028, 515), (1, 516, 3)]
TRANSPOSE_SHAPES = [(1, 1), (7, 13), (33, 65), (127, 129), (1000, 999), (4097, 515)]


def error_bound(K: int, dtype="float32") -> float:
    """Relative Frobenius error allowed for a K-term dot product in `dtype`.

    Rounding in a K-term sum of random-signed products grows like eps*sqrt(K); the
    factor 8 leaves room for other summation orders. A wrong index or a missing tile
    gives errors near 1e-2 or more, far above this bound.
    """
    import numpy as np
    return float(np.finfo(dtype).eps) * (8 * math.sqrt(K) + 16)


@dataclass
class CheckResult:
    kernel: str
    shape: tuple
    params: dict
    alpha: float
    beta: float
    ok: bool | None          # None: rejected by validation before launch
    rel_error: float | None
    bound: float | None
    nan_count: int | None
    message: str
    seed: int

    def __str__(self):
        dims = "x".join(map(str, self.shape))
        if self.ok is None:
            return f"{self.kernel:<16} {dims:>16}  rejected: {self.message}"
        verdict = "ok" if self.ok else "WRONG"
        return (f"{self.kernel:<16} {dims:>16}  rel.err {self.rel_error:.2e} "
                f"(bound {self.bound:.1e}) {verdict}" + (f"  {self.message}" if self.message else ""))


def random_normal(shape, dtype, rng):
    import cupy
    return rng.standard_normal(shape, dtype=cupy.float64).astype(dtype)


def check(kernel, shape, params=None, alpha=1.0, beta=0.0, seed=None) -> CheckResult:
    """Run one kernel once on fresh random data and compare with a float64 reference."""
    import cupy
    k = kernel_of(kernel)
    p = k.resolve(params)
    seed = secrets.randbits(32) if seed is None else seed
    bad = problems(k, p, shape)
    if bad:
        return CheckResult(k.name, tuple(shape), p, alpha, beta, None, None, None, None,
                           "; ".join(bad), seed)
    rng = cupy.random.default_rng(seed)
    if k.op in DTYPES:
        dtype = DTYPES[k.op]
        M, N, K = shape
        A, B = random_normal((M, K), dtype, rng), random_normal((K, N), dtype, rng)
        # With beta == 0 C must not be read: poison it, so an unwritten or wrongly read
        # element shows up as NaN. With beta != 0 its old value is part of the answer.
        C0 = random_normal((M, N), dtype, rng) if beta else cupy.full((M, N), cupy.nan, dtype)
        C = C0.copy()
        launch(k, A, B, C, alpha=alpha, beta=beta, params=p)
        ref = alpha * (A.astype("float64") @ B.astype("float64"))
        if beta:
            ref += beta * C0.astype("float64")
        bound = error_bound(K, dtype)
    else:
        dtype = {"float": "float32", "double": "float64"}[p["T"]]
        src = random_normal(shape, dtype, rng)
        out_shape = shape[::-1] if k.op == "transpose" else shape
        C = cupy.full(out_shape, cupy.nan, dtype)
        launch(k, src, C, params=p)
        ref = (src.T if k.op == "transpose" else src).astype("float64")
        bound = 0.0      # a transpose or copy moves bits: it must be exact
    cupy.cuda.runtime.deviceSynchronize()
    nans = int(cupy.isnan(C).sum())
    diff = cupy.linalg.norm(C.astype("float64") - ref) / max(float(cupy.linalg.norm(ref)), 1e-300)
    rel = float(diff)
    ok = nans == 0 and rel <= bound
    msg = f"{nans} NaN in the output" if nans else ""
    return CheckResult(k.name, tuple(shape), p, alpha, beta, ok, rel, bound, nans, msg, seed)


def check_all(kernel, params=None, shapes=None, alphas_betas=((1.0, 0.0), (1.5, -0.5))):
    """Check a kernel over the ragged shapes, with plain and general alpha/beta."""
    k = kernel_of(kernel)
    shapes = shapes or (RAGGED_SHAPES if k.op in DTYPES else TRANSPOSE_SHAPES)
    if k.op not in DTYPES:
        alphas_betas = ((1.0, 0.0),)
    return [check(k, s, params, a, b) for s in shapes for a, b in alphas_betas]
