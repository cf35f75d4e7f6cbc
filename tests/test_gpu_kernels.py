"""Every kernel, on the GPU: it runs on ragged shapes and every element it writes is right,
with nothing written outside its output. A rejection before launch passes only where the
kernel's own declared shape rule gives it; the registry says every other configuration
runs. Negative controls: deliberately buggy kernels are caught by the same comparison and
guard that `check` uses, and cuBLAS passes that comparison."""
import os
import warnings

import numpy as np
import pytest

from gemm_kernels.core.kernels import KERNELS
from gemm_kernels.core.launch import DTYPES, launch, problems
from gemm_kernels.measure.check import (RAGGED_SHAPES, TRANSPOSE_SHAPES, check, check_all,
                                        compare_exact, compare_gemm, guard_writes, guarded,
                                        random_normal)

from gpu import needs_gpu

pytestmark = needs_gpu

GEMM_OPS = tuple(DTYPES)
ALPHA_BETA = ((1.0, 0.0), (1.5, -0.5))
SEED = 20240611          # fixed: a failure reproduces; the seed is in every CheckResult
MIN_RUNS = 4             # shapes each kernel must actually run on


def _dims(shape):
    return "x".join(map(str, shape))


def _odd_and_large(shape):
    """Every dimension odd and above 256: a multiple of no tile (tile sizes are powers of
    two, at most 256) and larger than any, so whole and partial tiles both run."""
    return all(d % 2 and d > 256 for d in shape)


def _declared_rule(kernel, params, shape):
    """The kernel's own shape rule at this shape (None where it accepts the shape)."""
    return kernel.shape_rule(params, tuple(shape))


# gemv takes only M == 1 or N == 1 (its declared rule): test_gpu_plan.py checks it on
# matrix-vector shapes, ragged ones included. wmma_naive takes only multiples of 16,
# mma_sync and chapter 15's TMA kernels only K and N multiples of 8 (16-byte rows):
# test_gpu_wmma.py, test_gpu_mma.py and test_gpu_wgmma.py check them on the shapes they
# take, ragged ones included.
OWN_TESTS = ("gemv", "wmma_naive", "mma_sync", "wgmma_tma", "wgmma_ws", "wgmma_persistent",
             "wgmma_cluster")
CASES = [(name, ab) for name, k in KERNELS.items() for ab in ALPHA_BETA
         if (k.op in GEMM_OPS or ab == (1.0, 0.0)) and name not in OWN_TESTS]


@pytest.mark.parametrize("name,ab", CASES, ids=[f"{n}-a{a}b{b}" for n, (a, b) in CASES])
def test_runs_and_is_correct_on_ragged_shapes(name, ab):
    k = KERNELS[name]
    shapes = RAGGED_SHAPES if k.op in GEMM_OPS else TRANSPOSE_SHAPES
    ran, wrong, rejected = [], [], []
    for shape in shapes:
        r = check(k, shape, alpha=ab[0], beta=ab[1], seed=SEED)
        if r.ok is None:
            rule = _declared_rule(k, r.params, shape)
            assert rule and rule in r.message, \
                f"{r}: rejected, but not by {name}'s declared shape rule: the registry " \
                "says this configuration is valid, so it must run"
            rejected.append(f"{_dims(shape)} ({rule})")
            continue
        ran.append(shape)
        if not r.ok:
            wrong.append(str(r))
    assert not wrong, "\n".join(wrong)
    assert len(ran) >= MIN_RUNS and any(map(_odd_and_large, ran)), \
        f"{name} ran on {len(ran)} shapes, none odd and above 256 in every dimension " \
        f"or fewer than {MIN_RUNS}; rejected by its shape rule: {rejected}"
    if rejected:
        warnings.warn(f"{name} rejected by its declared shape rule at {', '.join(rejected)}")


@pytest.mark.parametrize("shape", RAGGED_SHAPES, ids=_dims)
def test_cublas_passes_over_20_seeds(shape):
    """The comparison is not too tight for a real kernel: cuBLAS SGEMM (true float32:
    gemm_kernels sets CUPY_TF32=0 before CuPy loads) passes at 20 seeds."""
    import cupy
    assert os.environ.get("CUPY_TF32") == "0"
    M, N, K = shape
    for seed in range(20):
        alpha, beta = ALPHA_BETA[seed % 2]
        rng = cupy.random.default_rng(seed)
        A, B = random_normal((M, K), "float32", rng), random_normal((K, N), "float32", rng)
        C0 = random_normal((M, N), "float32", rng) if beta else None
        C = (A @ B) * np.float32(alpha)          # the epilogue in float32, as a kernel's
        if beta:
            C += C0 * np.float32(beta)
        v = compare_gemm(C, A, B, C0, alpha, beta)
        assert v.ok, f"seed {seed}, alpha {alpha}, beta {beta}: {v}"


def _runnable_or_declared(name, shape):
    """Assert that `name` runs at `shape`, or skip naming the declared shape rule that
    rejects it (never a silent pass)."""
    k = KERNELS[name]
    bad = problems(k, None, shape)
    if bad:
        rule = _declared_rule(k, k.resolve(None), shape)
        assert rule and bad == [rule], f"{name} rejects {shape}: {bad}"
        pytest.skip(f"{name}: declared shape rule: {rule}")


def _nan_inf_inputs(M, N, K, last_nan=False):
    import cupy
    rng = cupy.random.default_rng(SEED)
    A, B = random_normal((M, K), "float32", rng), random_normal((K, N), "float32", rng)
    A[5, 7] = cupy.nan                  # row 5 of C: NaN
    B[3, 9] = cupy.inf                  # column 9 of C: +-Inf by the sign of A[:, 3]
    if last_nan:
        B[K - 1, N - 1] = cupy.nan      # in the last tile column / row: last column NaN
    return A, B


@pytest.mark.parametrize("name", [n for n, k in KERNELS.items() if k.op == "sgemm"])
def test_nan_and_inf_in_inputs_propagate(name):
    import cupy
    M, N, K = 67, 45, 33
    _runnable_or_declared(name, (M, N, K))
    A, B = _nan_inf_inputs(M, N, K)
    C = cupy.zeros((M, N), cupy.float32)
    launch(name, A, B, C)
    assert bool(cupy.isnan(C[5]).all()), "NaN in row 5 of A must reach all of row 5 of C"
    v = compare_gemm(C, A, B)           # NaN where NaN, the same Inf where Inf, the rest
    assert v.ok, v


# The capstone's HOIST path (K remainder first, advancing copy pointers, rows / columns
# beyond the matrix not zeroed): every ragged shape, and NaN / Inf propagation.
HOIST_VARIANTS = [{"HOIST": True}, {"HOIST": True, "BK": 16},
                  {"HOIST": True, "BK": 16, "WM": 32, "WN": 128},
                  {"HOIST": True, "BK": 16, "STAGES": 2}]
# Other paths through the capstone's source: grouped rasterisation, the register cap of
# MINB=2, the per-tile clamped copies (HOIST off), wider warp tiles, the 128 x 256 tile.
CAPSTONE_VARIANTS = [{"GROUP": 8}, {"MINB": 2, "WM": 64, "WN": 64}, {"HOIST": False},
                     {"HOIST": False, "BK": 8, "STAGES": 2}, {"WM": 64, "WN": 64},
                     {"BN": 256, "BK": 8, "WM": 32, "WN": 128}]


@pytest.mark.parametrize("params", CAPSTONE_VARIANTS, ids=str)
def test_capstone_variants_correct(params):
    assert not KERNELS["capstone"].problems(params), "the variant list must hold valid ones"
    bad = [str(r) for r in check_all("capstone", params) if not r.ok]
    assert not bad, bad


@pytest.mark.parametrize("params", HOIST_VARIANTS, ids=str)
def test_capstone_hoist_correct(params):
    results = check_all("capstone", params)
    bad = [str(r) for r in results if not r.ok]      # a rejection (ok None) counts as bad
    assert not bad, bad


@pytest.mark.parametrize("params", HOIST_VARIANTS, ids=str)
def test_capstone_hoist_nan_and_inf_propagate(params):
    import cupy
    for M, N, K in ((67, 45, 33), (130, 260, 21)):
        A, B = _nan_inf_inputs(M, N, K, last_nan=True)
        C = cupy.zeros((M, N), cupy.float32)
        launch("capstone", A, B, C, params=params)
        v = compare_gemm(C, A, B)
        assert v.ok, (M, N, K, v)


# ---------------------------------------------------------------- negative controls
# Tiny kernels with a planted bug, launched through cupy.RawKernel and judged by the
# same `guarded`, `compare_gemm` / `compare_exact` and `guard_writes` as `check`.
BUGGY_SOURCE = r"""
extern "C" __global__ void gemm_rows(int M, int N, int K, int rows,
                                     const float* A, const float* B, float* C) {
    // Writes rows 0..rows-1 of C: rows = M is right, M + 1 one row too many, M - 1
    // one too few. Rows past M read row M - 1, so only the write is out of bounds.
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= rows || j >= N) return;
    int r = i < M ? i : M - 1;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[r * K + k] * B[k * N + j];
    C[i * N + j] = acc;
}

extern "C" __global__ void copy_n(int size, int n, const float* in, float* out) {
    // Copies n elements: n = size is right, size + 1 writes one past the end.
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i < size ? i : size - 1];
}
"""


@pytest.mark.parametrize("extra_rows,caught_by", [(0, None), (1, "guard"), (-1, "comparison")],
                         ids=["right", "row-past-the-end", "last-row-skipped"])
def test_buggy_gemm_is_caught(extra_rows, caught_by):
    import cupy
    M, N, K = 33, 65, 17
    rng = cupy.random.default_rng(SEED)
    A, B = random_normal((M, K), "float32", rng), random_normal((K, N), "float32", rng)
    buf, C = guarded((M, N), "float32", cupy)
    kernel = cupy.RawKernel(BUGGY_SOURCE, "gemm_rows")
    rows = M + extra_rows
    kernel(((N + 15) // 16, (rows + 15) // 16), (16, 16),
           (np.int32(M), np.int32(N), np.int32(K), np.int32(rows), A, B, C))
    cupy.cuda.runtime.deviceSynchronize()
    v, writes = compare_gemm(C, A, B), guard_writes(buf, C.size)
    if caught_by is None:
        assert v.ok and writes == 0, (v, writes)
    elif caught_by == "guard":           # C is right; only the guard sees row M
        assert v.ok and writes == N, (v, writes)
    else:                                # row M - 1 still holds the NaN poison
        assert not v.ok and v.nan == N and v.worst[0] == M - 1 and writes == 0, (v, writes)


@pytest.mark.parametrize("extra", [0, 1], ids=["right", "one-past-the-end"])
def test_buggy_copy_is_caught(extra):
    import cupy
    shape = (33, 65)
    src = random_normal(shape, "float32", cupy.random.default_rng(SEED))
    buf, out = guarded(shape, "float32", cupy)
    n = src.size + extra
    cupy.RawKernel(BUGGY_SOURCE, "copy_n")(((n + 255) // 256,), (256,),
                                           (np.int32(src.size), np.int32(n), src, out))
    cupy.cuda.runtime.deviceSynchronize()
    assert compare_exact(out, src).ok
    assert guard_writes(buf, out.size) == extra
