"""Every kernel, on the GPU: correct on ragged shapes, or rejected before launch."""
import pytest

from gemm_kernels.measure.check import RAGGED_SHAPES, TRANSPOSE_SHAPES, check
from gemm_kernels.core.kernels import KERNELS

from gpu import needs_gpu

pytestmark = needs_gpu

CASES = [(name, shape, ab)
         for name, k in KERNELS.items()
         for shape in (RAGGED_SHAPES if k.op in ("sgemm", "dgemm") else TRANSPOSE_SHAPES)
         for ab in ((1.0, 0.0), (1.5, -0.5))
         if k.op in ("sgemm", "dgemm") or ab == (1.0, 0.0)]


@pytest.mark.parametrize("name,shape,ab", CASES,
                         ids=[f"{n}-{'x'.join(map(str, s))}-a{a}b{b}" for n, s, (a, b) in CASES])
def test_correct_or_rejected(name, shape, ab):
    r = check(name, shape, alpha=ab[0], beta=ab[1])
    if r.ok is None:          # rejected by validation: the reason must be given
        assert r.message, r
        return
    assert r.ok, str(r)


@pytest.mark.parametrize("name", [n for n, k in KERNELS.items() if k.op == "sgemm"])
def test_nan_and_inf_in_inputs_propagate(name):
    import cupy
    from gemm_kernels.core.launch import launch, problems
    M, N, K = 67, 45, 33
    if problems(name, None, (M, N, K)):
        pytest.skip("shape rejected by this kernel's shape rule")
    A = cupy.random.standard_normal((M, K), dtype=cupy.float32)
    B = cupy.random.standard_normal((K, N), dtype=cupy.float32)
    A[5, 7] = cupy.nan
    B[3, 9] = cupy.inf
    C = cupy.zeros((M, N), cupy.float32)
    launch(name, A, B, C)
    ref = A @ B
    assert bool(cupy.isnan(C[5]).all()), "NaN in row 5 of A must reach all of row 5 of C"
    assert cupy.array_equal(cupy.isnan(C), cupy.isnan(ref))
    assert cupy.array_equal(cupy.isinf(C), cupy.isinf(ref))


# The capstone's HOIST path (K remainder first, advancing copy pointers, rows / columns
# beyond the matrix not zeroed): every ragged shape, and NaN / Inf propagation.
HOIST_VARIANTS = [{"HOIST": True}, {"HOIST": True, "BK": 16},
                  {"HOIST": True, "BK": 16, "WM": 32, "WN": 128},
                  {"HOIST": True, "BK": 16, "STAGES": 2}]


@pytest.mark.parametrize("params", HOIST_VARIANTS, ids=str)
def test_capstone_hoist_correct(params):
    from gemm_kernels.measure.check import check_all
    bad = [str(r) for r in check_all("capstone", params) if not r.ok]
    assert not bad, bad


@pytest.mark.parametrize("params", HOIST_VARIANTS, ids=str)
def test_capstone_hoist_nan_and_inf_propagate(params):
    import cupy
    from gemm_kernels.core.launch import launch
    for M, N, K in ((67, 45, 33), (130, 260, 21)):
        A = cupy.random.standard_normal((M, K), dtype=cupy.float32)
        B = cupy.random.standard_normal((K, N), dtype=cupy.float32)
        A[5, 7] = cupy.nan
        B[3, 9] = cupy.inf
        B[K - 1, N - 1] = cupy.nan     # in the last tile column / row
        C = cupy.zeros((M, N), cupy.float32)
        launch("capstone", A, B, C, params=params)
        ref = A @ B
        assert cupy.array_equal(cupy.isnan(C), cupy.isnan(ref))
        assert cupy.array_equal(cupy.isinf(C), cupy.isinf(ref))
