"""The course notes' published tile loads, emulated (gemm_kernels.memory.ch04_notes_tiles).

The published kernels exist only as the code chapter 04 quotes; the corrected loads are
bank_layout's, and are checked against cuda/04_bank_conflicts.cu. That the corrected
kernel computes A @ B is checked on a GPU (test_gpu_kernels.py)."""
import re

import numpy as np
import pytest

from gemm_kernels.core.kernels import get
from gemm_kernels.memory import ch04_notes_tiles as st


def test_published_tile_rows_repeat_one_element():
    src = st.tile_sources("published", 8, 8, 8, 4, block=(1, 1), k0=4)
    # every thread of a tile row copies A[i][k0]; every thread of a column B[k0][j]
    assert (src["A"] == np.array([[r * 8 + 4] * 4 for r in range(4, 8)])).all()
    assert (src["B"] == np.array([[4 * 8 + c for c in range(4, 8)]] * 4)).all()


def _kernel_loads(M, N, K, BLOCK, block, k0):
    """The flat indices bank_layout's threads copy from A and B at step k0, by the
    expressions written in cuda/04_bank_conflicts.cu (row, col, ka, kb and the loads)."""
    src = get("bank_layout").source_text()
    expr = {v: re.search(rf"const int {v} = ([^;]+);", src).group(1)
            for v in ("row", "col", "ka", "kb")}
    loads = {m: re.search(rf"\? {m}\[([^\]]+)\] : 0.f;", src).group(1) for m in ("A", "B")}

    def ev(e, **names):
        e = e.replace("blockIdx.", "b_")
        assert re.fullmatch(r"[\w\s()+*]+", e), e
        return eval(e, {}, names)

    out = {"A": np.zeros((BLOCK, BLOCK), int), "B": np.zeros((BLOCK, BLOCK), int)}
    for ty in range(BLOCK):
        for tx in range(BLOCK):
            names = dict(tx=tx, ty=ty, b_x=block[0], b_y=block[1], BLOCK=BLOCK, k0=k0,
                         M=M, N=N, K=K)
            names.update({v: ev(e, **names) for v, e in expr.items()})
            for m in ("A", "B"):
                out[m][ty, tx] = ev(loads[m], **names)
    return out


@pytest.mark.parametrize("block,k0", [((2, 1), 8), ((0, 0), 0), ((1, 2), 12)])
def test_corrected_tiles_are_what_the_kernel_loads(block, k0):
    M, N, K = 12, 12, 16
    src = st.tile_sources("corrected", M, N, K, 4, block=block, k0=k0)
    want = _kernel_loads(M, N, K, 4, block, k0)
    assert (src["A"] == want["A"]).all() and (src["B"] == want["B"]).all()
    assert st.label(src["A"], K, "A")[1][3] == f"A[{block[1] * 4 + 1}][{k0 + 3}]"


@pytest.mark.parametrize("layout", st.LAYOUTS)
def test_published_kernels_give_one_value_per_block(layout):
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((8, 8)), rng.standard_normal((8, 8))
    C = st.emulate(A, B, 4, "published", layout)
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
