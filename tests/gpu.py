"""Marker for tests that need a GPU: skipped, with the reason, where CuPy sees none."""
import pytest

from gemm_kernels import device

needs_gpu = pytest.mark.skipif(not device.is_live(),
                               reason="needs a GPU that CuPy can use (recorded mode here)")


def assert_nan_and_inf_propagate(kernel: str, seed: int = 0):
    """An FP16 GEMM kernel run on inputs holding a NaN (A[5, 7]) and an Inf (B[3, 9]):
    row 5 of C must be all NaN, and the rest must match the float64 product (in which
    the Inf spreads as IEEE arithmetic says)."""
    import cupy
    from gemm_kernels.core.launch import launch
    from gemm_kernels.measure.check import compare_gemm, random_normal
    M, N, K = 64, 48, 32
    rng = cupy.random.default_rng(seed)
    A, B = random_normal((M, K), "float16", rng), random_normal((K, N), "float16", rng)
    A[5, 7] = cupy.nan
    B[3, 9] = cupy.inf
    C = cupy.zeros((M, N), cupy.float32)
    launch(kernel, A, B, C)
    assert bool(cupy.isnan(C[5]).all())
    v = compare_gemm(C, A, B)
    assert v.ok, v
