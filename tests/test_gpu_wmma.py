"""Chapter 13 on the GPU: the WMMA kernels are right wherever the registry lets them run
(the naive one on multiples of 16, the tiled one on every ragged shape, every
configuration), NaN and Inf reach C, the FP16 reference (cuBLAS, cublasGemmEx with FP32
computation) passes the tensor-core bound over many seeds, and the launcher refuses
FP32 inputs. Negative controls: the course notes' two warp-level bugs, put back into
the naive kernel's text, are caught."""
import dataclasses

import numpy as np
import pytest

from gemm_kernels.core.kernels import get
from gemm_kernels.core.launch import launch
from gemm_kernels.measure.check import (RAGGED_SHAPES, check, compare_gemm,
                                        random_normal)
from gemm_kernels.measure.timing import cublas_call

from gpu import assert_nan_and_inf_propagate, needs_gpu

pytestmark = needs_gpu

SEED = 20261126
WHOLE_SHAPES = [(16, 16, 16), (48, 80, 32), (64, 16, 1024), (1024, 1024, 1024), (4096, 112, 528)]
ALPHA_BETA = ((1.0, 0.0), (1.5, -0.5))


@pytest.mark.parametrize("params", get("wmma_naive").valid_configurations(),
                         ids=lambda p: f"{p['WM']}x{p['WN']}")
def test_naive_is_right_on_whole_tiles(params):
    for shape in WHOLE_SHAPES:
        for alpha, beta in ALPHA_BETA:
            r = check("wmma_naive", shape, params, alpha, beta, seed=SEED)
            assert r.ok, str(r)


def test_naive_refuses_ragged_shapes_before_launch():
    r = check("wmma_naive", (33, 65, 17), seed=SEED)
    assert r.ok is None and "multiples of 16" in r.message


@pytest.mark.parametrize("params", get("wmma_tiled").valid_configurations(),
                         ids=lambda p: f"{p['BM']}x{p['BN']}x{p['BK']}-w{p['WARPS_M']}-p{p['PAD']}")
def test_every_tiled_configuration_is_right_on_ragged_shapes(params):
    for shape in RAGGED_SHAPES + [(4096, 1024, 520)]:
        for alpha, beta in ALPHA_BETA:
            r = check("wmma_tiled", shape, params, alpha, beta, seed=SEED)
            assert r.ok, str(r)


@pytest.mark.parametrize("params", [{}, {"BM": 64, "BN": 64, "BK": 16, "WARPS_M": 4, "PAD": 0}],
                         ids=["default", "small"])
def test_tiled_on_small_ragged_shapes(params):
    """A few small shapes, edges in every dimension, both load paths: quick enough to
    run under compute-sanitizer's memcheck and racecheck."""
    for shape in [(7, 13, 5), (33, 65, 17), (127, 129, 255), (130, 136, 72)]:
        r = check("wmma_tiled", shape, params, 1.5, -0.5, seed=SEED)
        assert r.ok, str(r)


def _half_inputs(M, N, K, seed=SEED):
    import cupy
    rng = cupy.random.default_rng(seed)
    return random_normal((M, K), "float16", rng), random_normal((K, N), "float16", rng)


@pytest.mark.parametrize("name", ["wmma_naive", "wmma_tiled"])
def test_nan_and_inf_propagate(name):
    assert_nan_and_inf_propagate(name, SEED)


@pytest.mark.parametrize("shape", RAGGED_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_cublas_fp16_passes_the_tensor_core_bound_over_20_seeds(shape):
    """The bound is not too tight for real tensor cores: cuBLAS's FP16 GEMM with FP32
    computation passes it at 20 seeds (beta applied in FP32 afterwards)."""
    import cupy
    M, N, K = shape
    for seed in range(20):
        alpha, beta = ALPHA_BETA[seed % 2]
        A, B = _half_inputs(M, N, K, seed)
        C = cupy.empty((M, N), cupy.float32)
        cublas_call(A, B, C)()
        C0 = random_normal((M, N), "float32", cupy.random.default_rng(seed)) if beta else None
        C *= np.float32(alpha)
        if beta:
            C += C0 * np.float32(beta)
        v = compare_gemm(C, A, B, C0, alpha, beta)
        assert v.ok, f"seed {seed}: {v}"


def test_fp32_inputs_are_refused_with_the_dtype_named():
    import cupy
    A = cupy.ones((16, 16), cupy.float32)
    with pytest.raises(ValueError, match="float16"):
        launch("wmma_tiled", A, A.copy(), cupy.empty((16, 16), cupy.float32))


# The course notes' warp bugs, as edits of the naive kernel's text.
NOTES_BUGS = {
    "warp index from threadIdx.y / 8":
        ("const int warp_m = threadIdx.y / WN, warp_n = threadIdx.y % WN;",
         "const int warp_m = threadIdx.y / 8, warp_n = threadIdx.x / 8;"),
    "B loaded as col_major":
        ("wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;",
         "wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;"),
}


@pytest.mark.parametrize("bug", NOTES_BUGS)
def test_the_notes_bugs_are_caught(bug):
    k = get("wmma_naive")
    old, new = NOTES_BUGS[bug]
    text = k.source_text()
    assert old in text
    buggy = k.with_code(text.replace(old, new), name=f"wmma_naive ({bug})", source="13_wmma.cu")
    r = check(buggy, (64, 64, 64), seed=SEED)
    assert r.ok is False, str(r)
