"""float4_at on the GPU: given the usual A, it computes alpha*A@B + beta*C on ragged
shapes, both code paths (its vector path needs M % 4 == 0 and N % 4 == 0, any K), every
element within its bound and nothing written outside C; it sums in float4's order, so
its C is float4's bit for bit; and the harness times it with A^T made beforehand."""
import pytest

from gemm_kernels.core.kernels import get
from gemm_kernels.core.launch import launch, launcher
from gemm_kernels.measure.check import RAGGED_SHAPES, check, compare_gemm, random_normal

from gpu import needs_gpu

pytestmark = needs_gpu

NAME = "float4_at"
SEED = 20240611
# besides the checker's shapes: the vector path with K not a multiple of 4 or of BK,
# single columns and rows of tiles, K = 1, and M a multiple of 4 with N not
EXTRA = [(4, 4, 1), (516, 260, 7), (132, 4, 1001), (128, 128, 9), (260, 516, 3),
         (4, 1028, 515), (1028, 4, 13), (516, 255, 64)]
SHAPES = RAGGED_SHAPES + EXTRA
ALPHA_BETA = ((1.0, 0.0), (1.5, -0.5))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("ab", ALPHA_BETA, ids=lambda ab: f"a{ab[0]}b{ab[1]}")
def test_correct_on_ragged_shapes(shape, ab):
    r = check(NAME, shape, alpha=ab[0], beta=ab[1], seed=SEED)
    assert r.ok, str(r)
    assert r.guard_writes == 0


def test_both_paths_are_checked():
    k = get(NAME)
    paths = {k.name_expression({}, s).endswith("true>") for s in SHAPES}
    assert paths == {True, False}
    # the vector path with a K that float4 would have to take scalar
    assert k.name_expression({}, (516, 260, 7)).endswith("true>")


@pytest.mark.parametrize("params", [c for c in get(NAME).valid_configurations()
                                    if not c["ONE_PER_SM"]],
                         ids=lambda p: "{BM}x{BN}x{BK}-{TM}x{TN}".format(**p))
def test_every_tile_is_correct(params):
    for shape in ((33, 65, 17), (300, 1028, 515)):
        r = check(NAME, shape, params, alpha=1.5, beta=-0.5, seed=SEED)
        assert r.ok, str(r)


@pytest.mark.parametrize("shape", [(7, 13, 5), (300, 1028, 515), (516, 260, 7),
                                   (1000, 1000, 1000)], ids=lambda s: "x".join(map(str, s)))
def test_same_bits_as_float4(shape):
    """The same tile contents, the same FFMA order: float4_at's C is float4's, bit for
    bit, whichever path each takes (beta = 0, so the epilogue is one multiplication)."""
    import cupy
    M, N, K = shape
    rng = cupy.random.default_rng(SEED)
    A, B = random_normal((M, K), "float32", rng), random_normal((K, N), "float32", rng)
    C1, C2 = cupy.full((M, N), cupy.nan, cupy.float32), cupy.full((M, N), cupy.nan, cupy.float32)
    launch("float4", A, B, C1, alpha=1.5)
    launch(NAME, A, B, C2, alpha=1.5)
    assert cupy.array_equal(C1.view(cupy.uint32), C2.view(cupy.uint32))


def test_launcher_transposes_once_and_launches_the_gemm_alone():
    """The launcher makes A^T when it is built: its launches run the GEMM on that copy
    (so a changed A needs a new launcher), and the caller's A is left as it was."""
    import cupy
    M, N, K = 260, 132, 67
    rng = cupy.random.default_rng(SEED)
    A, B = random_normal((M, K), "float32", rng), random_normal((K, N), "float32", rng)
    A0 = A.copy()
    C = cupy.empty((M, N), cupy.float32)
    run = launcher(NAME, A, B, C)
    A *= 2                                     # after the launcher was built
    run(1.0, 0.0)
    cupy.cuda.runtime.deviceSynchronize()
    assert compare_gemm(C, A0, B).ok
    launcher(NAME, A, B, C)(1.0, 0.0)
    assert compare_gemm(C, A, B).ok
    assert cupy.array_equal(A, 2 * A0)


def test_timed_row_is_checked():
    from gemm_kernels.measure import timing
    row = timing.measure(NAME, (512, 256, 260), repeats=3, warmup=1)
    assert row["error_over_bound"] < 1
    assert row["reference"]["kernel"] == "cublas" and row["gflops"]["median"] > 0
