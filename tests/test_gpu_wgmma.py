"""Chapter 15 on the GPU: the TMA + wgmma kernels (one block of warpgroups doing
everything, the warp-specialised one, its persistent form and its clusters of 2 blocks
sharing B by multicast) are right on the shapes it takes (K and N
multiples of 8; M, N, K not multiples of the tile, one row, one 16-byte chunk), in every
configuration, refuses the others before launch, and propagates NaN and Inf. Hopper only:
elsewhere the kernel is refused, which tests/test_arch.py checks without a GPU."""
import pytest

from gemm_kernels import device
from gemm_kernels.core.kernels import get
from gemm_kernels.core.registry import runnable
from gemm_kernels.measure.check import check

from gpu import assert_nan_and_inf_propagate, needs_gpu

pytestmark = [needs_gpu, pytest.mark.skipif(
    device.is_live() and not runnable(get("wgmma_tma"))[0],
    reason="wgmma_tma runs on sm_90 (Hopper) only")]

SEED = 20261126
# 2200 rows: 18 tile rows of 128, two whole groups of 8 and a group of 2 (GROUP = 8)
SHAPES = [(1, 8, 8), (7, 16, 24), (33, 72, 40), (64, 128, 64), (127, 136, 264),
          (1000, 1000, 1000), (4097, 1024, 520), (300, 1032, 8), (264, 272, 200),
          (2200, 520, 72), (2200, 4104, 72)]
# the last: 18 x 17 tiles of 128 x 256 (35 x 17 of 64 x 256), more than one per SM, so
# every block of the persistent kernel walks several, the last column of tiles ragged;
# an odd number of tile rows (35, and 9 at 1000 rows) leaves a cluster's second block
# below the matrix


KERNELS = ("wgmma_tma", "wgmma_ws", "wgmma_persistent", "wgmma_cluster")
CONFIGS = [(name, p) for name in KERNELS for p in get(name).valid_configurations()]


@pytest.mark.parametrize("name,params", CONFIGS,
                         ids=lambda x: x if isinstance(x, str) else
                         "-".join(f"{k}{v}" for k, v in x.items()))
def test_every_configuration_is_right(name, params):
    for shape in SHAPES:
        for alpha, beta in ((1.0, 0.0), (1.5, -0.5)):
            r = check(name, shape, params, alpha, beta, seed=SEED)
            assert r.ok, str(r)


@pytest.mark.parametrize("name", KERNELS)
def test_shapes_without_16_byte_rows_are_refused(name):
    r = check(name, (33, 65, 17), seed=SEED)
    assert r.ok is None and "multiples of 8" in r.message and "N=65" in r.message


@pytest.mark.parametrize("name", KERNELS)
def test_nan_and_inf_propagate(name):
    assert_nan_and_inf_propagate(name, SEED)
