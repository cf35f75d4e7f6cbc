"""Seed 000's tile loads, emulated (gemm_kernels.seed_tiles)."""
import numpy as np
import pytest

from gemm_kernels.memory import ch04_notes_tiles as st


def test_seed_tile_rows_repeat_one_element():
    src = st.tile_sources("seed", 8, 8, 8, 4, block=(1, 1), k0=4)
    # every thread of a tile row copies A[i][k0]; every thread of a column B[k0][j]
    assert (src["A"] == np.array([[r * 8 + 4] * 4 for r in range(4, 8)])).all()
    assert (src["B"] == np.array([[4 * 8 + c for c in range(4, 8)]] * 4)).all()


def test_corrected_tiles_hold_the_block_of_a_and_b():
    M, N, K = 8, 12, 16
    src = st.tile_sources("corrected", M, N, K, 4, block=(2, 1), k0=8)
    assert src["A"][1][3] == (4 + 1) * K + 8 + 3
    assert src["B"][1][3] == (8 + 1) * N + 8 + 3
    assert st.label(src["A"], K, "A")[1][3] == "A[5][11]"


@pytest.mark.parametrize("layout", st.LAYOUTS)
def test_corrected_kernels_compute_the_product(layout):
    rng = np.random.default_rng(1)
    for M, N, K in [(8, 8, 8), (4, 12, 8), (12, 4, 16)]:
        A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N))
        assert np.allclose(st.emulate(A, B, 4, "corrected", layout), A @ B)


@pytest.mark.parametrize("layout", st.LAYOUTS)
def test_seed_kernels_give_one_value_per_block(layout):
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((8, 8)), rng.standard_normal((8, 8))
    C = st.emulate(A, B, 4, "seed", layout)
    assert not np.allclose(C, A @ B)
    for by in (0, 4):
        for bx in (0, 4):
            assert np.ptp(C[by:by + 4, bx:bx + 4]) == 0
    # the value: sum over steps and inner of A[r0 + inner][k0] * B[k0][c0 + inner]
    want = sum(A[inner, k0] * B[k0, inner] for k0 in (0, 4) for inner in range(4))
    assert np.isclose(C[0, 0], want)


def test_bad_arguments():
    with pytest.raises(ValueError, match="multiples"):
        st.emulate(np.ones((5, 4)), np.ones((4, 4)), 4)
    with pytest.raises(ValueError, match="version"):
        st.emulate(np.ones((4, 4)), np.ones((4, 4)), 4, "fixed")
