"""Bad input is refused with a clear ValueError before anything is launched."""
import pytest

from gemm_kernels.core.launch import launch
from gemm_kernels.measure.check import compare_gemm, guard_writes, guarded, random_normal

from gpu import needs_gpu

pytestmark = needs_gpu


@pytest.fixture
def abc():
    import cupy
    return (cupy.ones((8, 4), cupy.float32), cupy.ones((4, 6), cupy.float32),
            cupy.empty((8, 6), cupy.float32))


def test_wrong_dtype(abc):
    A, B, C = abc
    with pytest.raises(ValueError, match="dtype float64"):
        launch("naive", A.astype("float64"), B, C)


def test_non_contiguous(abc):
    import cupy
    A, B, C = abc
    At = cupy.ones((4, 8), cupy.float32).T
    with pytest.raises(ValueError, match="C-contiguous"):
        launch("naive", At, B, C)


def test_mismatched_inner_dimension(abc):
    import cupy
    A, _, C = abc
    with pytest.raises(ValueError, match="B needs 4 rows"):
        launch("naive", A, cupy.ones((5, 6), cupy.float32), C)


def test_wrong_output_shape(abc):
    import cupy
    A, B, _ = abc
    with pytest.raises(ValueError, match="must be 8x6"):
        launch("naive", A, B, cupy.empty((6, 8), cupy.float32))


def test_numpy_array_refused(abc):
    import numpy as np
    _, B, C = abc
    with pytest.raises(ValueError, match="cupy.ndarray"):
        launch("naive", np.ones((8, 4), np.float32), B, C)


def test_too_many_threads(abc):
    with pytest.raises(ValueError, match="BLOCK"):
        launch("naive", *abc, BLOCK=64)


def test_result_is_right_after_validation(abc):
    A, B, C = abc
    launch("coalesced", A, B, C, alpha=2.0)
    assert compare_gemm(C, A, B, alpha=2.0).ok


def test_offset_view_refused_by_vector_kernels():
    import cupy
    buf = cupy.ones(64 * 64 + 1, cupy.float32)
    A = buf[1:].reshape(64, 64)          # C-contiguous, but 4 bytes off alignment
    B = cupy.ones((64, 64), cupy.float32)
    C = cupy.empty((64, 64), cupy.float32)
    with pytest.raises(ValueError, match="16-byte boundary"):
        launch("capstone", A, B, C)
    launch("naive", A, B, C)             # scalar kernels take it
    assert compare_gemm(C, A, B).ok


def test_guarded_output_is_accepted_by_vector_kernels():
    """`check` launches into a view of a guarded buffer: it must pass validation
    (C-contiguous, 16-byte aligned) and leave the guard untouched."""
    import cupy
    rng = cupy.random.default_rng(7)
    A, B = random_normal((67, 45), "float32", rng), random_normal((45, 132), "float32", rng)
    buf, C = guarded((67, 132), "float32", cupy)
    launch("capstone", A, B, C)
    assert compare_gemm(C, A, B).ok and guard_writes(buf, C.size) == 0
