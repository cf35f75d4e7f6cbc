"""Chapter 12 on the GPU: every split-K and gemv configuration is right on ragged shapes
(the workspace and the reduction included), `sgemm` is right on every shape it plans
for, bit-reproducible with a split, propagates NaN and Inf, and refuses bad input with
the launcher's message; the gemv, which adds its slices in the same launch, is right on
every call of one launcher. Negative controls: a reduction that drops a plane, a gemv
that leaves its arrival counters set, and a padded B left unfilled, are caught."""
import dataclasses

import numpy as np
import pytest

from gemm_kernels.core.kernels import get
from gemm_kernels.core.launch import launch
from gemm_kernels.measure.check import check, compare_gemm, random_normal
from gemm_kernels.plan.choose import plan, sgemm

from gpu import needs_gpu

pytestmark = needs_gpu

SEED = 20261126
# K long enough that every split in SPLITS has work; edges in every dimension
SPLIT_SHAPES = [(1, 1, 1), (33, 65, 700), (127, 129, 1031), (300, 1028, 2051), (4097, 1023, 515)]
GEMV_SHAPES = [(1, 1, 1), (1, 13, 5), (7, 1, 13), (1, 516, 3), (1, 4097, 1025),
               (4097, 1, 1025), (1, 1, 3001), (1, 1028, 20003), (2049, 1, 20000)]
SGEMM_SHAPES = [(1, 1, 1), (7, 13, 5), (33, 65, 17), (127, 129, 255), (1000, 1000, 1000),
                (4097, 1023, 515), (1, 4096, 4096), (4096, 1, 4096), (256, 256, 65536),
                (3, 4096, 4096), (512, 512, 512), (100, 100, 100)]


def _configs(name):
    return get(name).valid_configurations()


@pytest.mark.parametrize("params", _configs("capstone_split"),
                         ids=lambda p: f"{p['BM']}x{p['BN']}-S{p['SPLIT']}"
                                       + ("-padB" if p["PAD_B"] else ""))
def test_every_split_configuration_is_right(params):
    for shape in SPLIT_SHAPES:
        for alpha, beta in ((1.0, 0.0), (1.5, -0.5)):
            r = check("capstone_split", shape, params, alpha, beta, seed=SEED)
            assert r.ok, str(r)


@pytest.mark.parametrize("params", _configs("gemv"), ids=lambda p: f"S{p['SPLIT']}-W{p['WARPS']}")
def test_every_gemv_configuration_is_right(params):
    for shape in GEMV_SHAPES:
        for alpha, beta in ((1.0, 0.0), (1.5, -0.5)):
            r = check("gemv", shape, params, alpha, beta, seed=SEED)
            assert r.ok, str(r)


def _inputs(shape, seed=SEED):
    import cupy
    M, N, K = shape
    rng = cupy.random.default_rng(seed)
    return random_normal((M, K), "float32", rng), random_normal((K, N), "float32", rng)


@pytest.mark.parametrize("shape", SGEMM_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_sgemm_is_right_with_and_without_c(shape):
    import cupy
    A, B = _inputs(shape)
    assert compare_gemm(sgemm(A, B), A, B).ok
    C0 = random_normal((shape[0], shape[1]), "float32", cupy.random.default_rng(1))
    C = C0.copy()
    out = sgemm(A, B, C, alpha=-0.75, beta=2.0)
    assert out is C
    v = compare_gemm(C, A, B, C0, -0.75, 2.0)
    assert v.ok, f"{shape} with {plan(shape, True)}: {v}"


def test_a_split_is_bit_reproducible_and_really_splits():
    import cupy
    shape = (256, 256, 65536)
    p = plan(shape)
    params = p.params if p.params.get("SPLIT", 1) > 1 else \
        get("capstone_split").resolve({"SPLIT": 16})
    A, B = _inputs(shape)
    C1, C2 = (cupy.full((256, 256), cupy.nan, cupy.float32) for _ in range(2))
    launch("capstone_split", A, B, C1, params=params)
    launch("capstone_split", A, B, C2, params=params)
    assert cupy.array_equal(C1, C2)
    assert compare_gemm(C1, A, B).ok


def test_nan_and_inf_reach_c_through_the_split_and_gemv():
    import cupy
    for shape, params in (((64, 96, 4096), {"SPLIT": 8}), ((1, 96, 4096), {"SPLIT": 8}),
                          ((96, 1, 4096), {"SPLIT": 8})):
        name = "gemv" if 1 in shape[:2] else "capstone_split"
        A, B = _inputs(shape)
        A[0, 7] = cupy.nan
        B[9, 0] = cupy.inf
        C = cupy.zeros(shape[:2], cupy.float32)
        launch(name, A, B, C, params=params)
        ref = cupy.asnumpy(A).astype(np.float64) @ cupy.asnumpy(B).astype(np.float64)
        got = cupy.asnumpy(C)
        assert np.array_equal(np.isnan(got), np.isnan(ref)), name
        assert np.array_equal(np.isinf(got), np.isinf(ref)), name


def test_a_padded_b_that_is_not_filled_is_caught(monkeypatch):
    """Negative control of the padded path: if the launcher skipped the copy of B into
    its padded rows, the kernel would read zeros, and the check must say so."""
    from gemm_kernels.core import launch as L
    real = L._padded_copy

    def unfilled(B, row):
        _, padded = real(B, row)
        return (lambda: None), padded
    params = {"BM": 64, "BN": 128, "PAD_B": True}
    assert check("capstone_split", (127, 129, 1031), params, seed=SEED).ok
    monkeypatch.setattr(L, "_padded_copy", unfilled)
    assert not check("capstone_split", (127, 129, 1031), params, seed=SEED).ok


def test_a_reduction_that_drops_a_plane_is_caught():
    import cupy
    k = get("capstone_split")
    broken = dataclasses.replace(k, splits=lambda p, s: max(1, k.splits(p, s) - 1))
    shape = (64, 64, 2048)
    A, B = _inputs(shape)
    C = cupy.zeros((64, 64), cupy.float32)
    launch(broken, A, B, C, params={"SPLIT": 4})
    assert not compare_gemm(C, A, B).ok


def _run_gemv_three_times(k, shape) -> list[bool]:
    """One launcher of `k` (a gemv) at `shape` with K in 8 slices, called with three
    (alpha, beta) pairs on a fresh copy of C: whether each result is right."""
    import cupy
    from gemm_kernels.core.launch import launcher
    A, B = _inputs(shape)
    C0 = random_normal(shape[:2], "float32", cupy.random.default_rng(2))
    C = C0.copy()
    run = launcher(k, A, B, C, params={"SPLIT": 8})
    ok = []
    for alpha, beta in ((1.0, 0.0), (-0.5, 2.0), (1.5, 0.0)):
        C[...] = C0
        run(alpha, beta)
        ok.append(compare_gemm(C, A, B, C0 if beta else None, alpha, beta).ok)
    return ok


@pytest.mark.parametrize("shape", [(1, 4097, 1025), (2049, 1, 20000)], ids=str)
def test_gemv_finishes_its_split_on_every_call_of_a_launcher(shape):
    """The blocks' arrival counters are back at zero after each launch."""
    assert _run_gemv_three_times("gemv", shape) == [True, True, True]


def test_a_gemv_that_leaves_its_counters_set_is_caught():
    from gemm_kernels.core.registry import CUDA_DIR
    k = get("gemv")
    header = (CUDA_DIR / "split_k.cuh").read_text()
    reset = "    if (threadIdx.x == 0) *arrived = 0;\n"
    assert reset in header
    code = k.source_text().replace('#include "split_k.cuh"',
                                   header.replace(reset, "").replace("#pragma once", ""))
    broken = k.with_code(code, "gemv_no_reset", "gemv without the reset")
    assert _run_gemv_three_times(broken, (1, 4097, 1025)) == [True, False, False]


def test_bad_input_gets_the_launchers_message():
    import cupy
    A, B = _inputs((8, 8, 8))
    with pytest.raises(ValueError, match="dtype float64"):
        sgemm(A.astype(cupy.float64), B)
    with pytest.raises(ValueError, match="B needs 8 rows"):
        sgemm(A, B[:7].copy())
    with pytest.raises(ValueError, match="beta"):
        sgemm(A, B, beta=1.0)
    with pytest.raises(ValueError, match="overlaps|is A"):
        sgemm(A, B, A)
