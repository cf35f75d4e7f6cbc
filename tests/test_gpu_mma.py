"""Chapter 14 on the GPU: the mma.sync kernel is right in every configuration on the
shapes it takes (K and N multiples of 8; M, N, K not multiples of the tile, one row, one
16-byte column chunk), refuses the others before launch, propagates NaN and Inf, and its
swizzled and plain layouts give the same bits."""
import numpy as np
import pytest

from gemm_kernels.core.kernels import get
from gemm_kernels.core.launch import launch
from gemm_kernels.measure.check import check, random_normal

from gpu import assert_nan_and_inf_propagate, needs_gpu

pytestmark = needs_gpu

SEED = 20261126
SHAPES = [(1, 8, 8), (7, 16, 24), (33, 72, 40), (127, 136, 264), (1000, 1000, 1000),
          (4097, 1024, 520), (300, 1032, 8), (264, 272, 200), (256, 256, 128)]
ALPHA_BETA = ((1.0, 0.0), (1.5, -0.5))


def _id(p):
    return (f"{p['BM']}x{p['BN']}x{p['BK']}-w{p['WARPS_M']}x{p['WARPS_N']}-s{p['STAGES']}-"
            f"{'xor' if p['SWIZZLE'] else 'plain'}")


# Every configuration on a few shapes that cross every edge, and one (264 x 272 x 200)
# whose blocks are partly inside the matrix, with whole tiles along K and a ragged last
# one: the kernel copies those two kinds of tile by different code. The default on all.
FEW = [(7, 16, 24), (127, 136, 264), (300, 1032, 8), (264, 272, 200)]


@pytest.mark.parametrize("params", get("mma_sync").valid_configurations(), ids=_id)
def test_every_configuration_is_right(params):
    for shape in FEW:
        r = check("mma_sync", shape, params, 1.5, -0.5, seed=SEED)
        assert r.ok, str(r)


def test_the_default_is_right_on_every_shape():
    for shape in SHAPES:
        for alpha, beta in ALPHA_BETA:
            r = check("mma_sync", shape, None, alpha, beta, seed=SEED)
            assert r.ok, str(r)


@pytest.mark.parametrize("params", [{}, {"BM": 64, "BN": 64, "BK": 64, "STAGES": 2}],
                         ids=["default", "small"])
def test_small_shapes_for_the_sanitizers(params):
    for shape in [(7, 16, 24), (33, 72, 40), (130, 136, 72), (264, 272, 200)]:
        r = check("mma_sync", shape, params, 1.5, -0.5, seed=SEED)
        assert r.ok, str(r)


def test_shapes_without_whole_16_byte_rows_are_refused():
    r = check("mma_sync", (33, 65, 17), seed=SEED)
    assert r.ok is None and "multiples of 8" in r.message and "N=65" in r.message


def test_nan_and_inf_propagate():
    assert_nan_and_inf_propagate("mma_sync", SEED)


def test_the_swizzle_moves_bytes_not_results():
    import cupy
    rng = cupy.random.default_rng(SEED)
    A, B = random_normal((256, 512), "float16", rng), random_normal((512, 256), "float16", rng)
    out = []
    for swizzle in (False, True):
        C = cupy.empty((256, 256), cupy.float32)
        launch("mma_sync", A, B, C, SWIZZLE=swizzle)
        out.append(cupy.asnumpy(C))
    assert np.array_equal(*out)
