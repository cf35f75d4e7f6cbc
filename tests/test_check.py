"""The checker on the CPU: planted bugs are caught at every shape of the check list, and
correct results rounded in other orders are not. NumPy arrays drive the same pure
functions (`compare_*`, `guarded`, `guard_writes`) that `check` applies to the GPU's output.

Every planted fault sits at an element chosen by a rule fixed in advance, on inputs from
one fixed seed (PLANT_SEED); no seed was searched for. The rules put each fault where its
bug class is visible above rounding: a 1% error can only be seen where the element is not
tiny, a missing k-term only where that term is not tiny. A fault below the rounding bound
of its element is a real limit of any tolerance-based check, not a test to be tuned away.
"""
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from gemm_kernels.measure.check import (RAGGED_SHAPES, SENTINEL_BITS, TRANSPOSE_SHAPES, UINT,
                                        compare_exact, compare_gemm, compare_within, gamma,
                                        gemm_bound, gemm_reference, guard_writes, guarded,
                                        random_normal, unit_roundoff)

ALPHA_BETA = [(1.0, 0.0), (1.5, -0.5)]
DTYPES = ["float32", "float64"]
PLANT_SEED = 1
EDGE = 32          # the transposed edge tile: the last min(EDGE, M, N) square of C


def _dims(shape):
    return "x".join(map(str, shape))


def _epilogue(acc, C0, alpha, beta):
    """alpha*acc + beta*C0 in the precision of acc, as a kernel's epilogue computes it."""
    t = acc.dtype.type
    return t(alpha) * acc + t(beta) * C0 if beta else t(alpha) * acc


def blas_order(A, B, C0, alpha, beta):
    """A correct result in the inputs' precision, summed in the order of NumPy's BLAS."""
    return _epilogue(A @ B, C0, alpha, beta)


def k_blocked(A, B, C0, alpha, beta, block=64):
    """A correct result in the inputs' precision, summed in another order: k-blocks of 64,
    the last block first, the running sum rounded after every block."""
    acc = np.zeros((A.shape[0], B.shape[1]), A.dtype)
    for k0 in reversed(range(0, A.shape[1], block)):
        acc += A[:, k0:k0 + block] @ B[k0:k0 + block]
    return _epilogue(acc, C0, alpha, beta)


def _inputs(shape, dtype, seed, beta):
    """Inputs drawn as `check` draws them (float64 standard normal, rounded)."""
    M, N, K = shape
    rng = np.random.default_rng(seed)
    A, B = random_normal((M, K), dtype, rng), random_normal((K, N), dtype, rng)
    return A, B, (random_normal((M, N), dtype, rng) if beta else None)


@lru_cache(maxsize=1)        # the cases are ordered so that one case's plants run together
def _case(shape, ab, dtype):
    alpha, beta = ab
    M, N, K = shape
    A, B, C0 = _inputs(shape, dtype, PLANT_SEED, beta)
    ref, scale = gemm_reference(A, B, C0, alpha, beta)
    return SimpleNamespace(A=A, B=B, C0=C0, alpha=alpha, beta=beta, ref=ref,
                           bound=gemm_bound(M, N, K, dtype) * scale,
                           correct=k_blocked(A, B, C0, alpha, beta))


def _output(case):
    """A guarded buffer as `check` prepares it (NaN-poisoned, or holding C0 when beta != 0),
    with the kernel's correct result written into C. Returns (buf, C, C before launch)."""
    buf, C = guarded(case.ref.shape, case.A.dtype, np)
    if case.beta:
        C[...] = case.C0
    before = C.copy()
    C[...] = case.correct
    return buf, C, before


# ---------------------------------------------------------------- planted GEMM faults
# Each plant changes C (or the buffer) in place and returns the rows and columns where
# the fault is, so the test also asserts that the verdict's worst element lies there.
def one_percent_off(case, buf, C, before):
    """(a) The element of largest |reference| 1% off (an element must be well above
    rounding for 1% of it to be visible; the largest one is a rule, not a search)."""
    i, j = np.unravel_index(np.argmax(np.abs(case.ref)), C.shape)
    C[i, j] *= C.dtype.type(1.01)
    return slice(i, i + 1), slice(j, j + 1)


def missing_last_k_term(case, buf, C, before):
    """(b) One element misses its last k-term alpha*a[i,K-1]*b[K-1,j]: the element whose
    last term is largest in magnitude (i, j maximise |a[i,K-1]| and |b[K-1,j]|). At K=1
    that term is the whole dot product."""
    K = case.A.shape[1]
    i, j = int(np.argmax(np.abs(case.A[:, K - 1]))), int(np.argmax(np.abs(case.B[K - 1])))
    alpha = C.dtype.type(case.alpha).item()
    C[i, j] = case.ref[i, j] - alpha * float(case.A[i, K - 1]) * float(case.B[K - 1, j])
    return slice(i, i + 1), slice(j, j + 1)


def corner_lost(case, buf, C, before):
    """(c) The bottom-right corner, where the last partial tiles in M and N meet, loses its
    dot product (accumulator left at zero) while the epilogue still runs: alpha*0 +
    beta*C0."""
    C[-1, -1] = C.dtype.type(case.beta) * case.C0[-1, -1] if case.beta else 0
    return slice(C.shape[0] - 1, None), slice(C.shape[1] - 1, None)


def last_row_unwritten(case, buf, C, before):
    """(d) The last row never written: it keeps what the buffer held, the NaN poison
    (beta == 0) or the old C (beta != 0). With M = 1 that is all of C."""
    C[-1, :] = before[-1, :]
    return slice(C.shape[0] - 1, None), slice(None)


def last_column_unwritten(case, buf, C, before):
    """(d) The last column never written, as above. With N = 1 that is all of C."""
    C[:, -1] = before[:, -1]
    return slice(None), slice(C.shape[1] - 1, None)


def edge_tile_transposed(case, buf, C, before):
    """(e) The last s x s block of C (s = min(EDGE, M, N), ending at the bottom-right
    corner) written transposed, as by threads with swapped row and column indices."""
    M, N = C.shape
    s = min(EDGE, M, N)
    C[M - s:, N - s:] = C[M - s:, N - s:].T.copy()
    return slice(M - s, None), slice(N - s, None)


def write_past_end(case, buf, C, before):
    """A value written one element past the end of C, into the guard (C itself is right:
    only the guard can see this)."""
    buf[C.size] = C[-1, -1]
    return None


GEMM_PLANTS = [one_percent_off, missing_last_k_term, corner_lost, last_row_unwritten,
               last_column_unwritten, edge_tile_transposed, write_past_end]

# Where a plant cannot be made, and why: there the test asserts that the plant leaves
# every bit unchanged (so nothing can be caught), instead of skipping.
# At 1x1x1 the corner, last-row and last-column plants all hit C's only element, and (a)
# and (b) hit it too: they are meaningful there, just not distinct.
MEANINGLESS = {
    "edge_tile_transposed": {
        (1, 1, 1): "C is 1x1: its only square block is its own transpose",
        (1, 516, 3): "C has one row: its only square blocks are 1x1, each its own transpose",
    },
}

GEMM_CASES = [(dtype, shape, ab, plant) for dtype in DTYPES for shape in RAGGED_SHAPES
              for ab in ALPHA_BETA for plant in GEMM_PLANTS]


@pytest.mark.parametrize(
    "dtype,shape,ab,plant", GEMM_CASES,
    ids=[f"{d}-{_dims(s)}-a{a}b{b}-{p.__name__}" for d, s, (a, b), p in GEMM_CASES])
def test_planted_gemm_fault_is_caught(dtype, shape, ab, plant):
    case = _case(shape, ab, dtype)
    buf, C, before = _output(case)
    good = compare_within(C, case.ref, case.bound)
    assert good.ok and guard_writes(buf, C.size) == 0, f"the correct result fails: {good}"
    unplanted = buf.copy()
    where = plant(case, buf, C, before)
    verdict = compare_within(C, case.ref, case.bound)
    writes = guard_writes(buf, C.size)
    why = MEANINGLESS.get(plant.__name__, {}).get(shape)
    if why:
        assert np.array_equal(buf.view(UINT[buf.itemsize]),
                              unplanted.view(UINT[buf.itemsize])), why
        assert verdict.ok and writes == 0
        return
    if where is None:                  # a write outside C: the guard sees it, C is right
        assert verdict.ok and writes == 1, (verdict, writes)
        return
    assert not verdict.ok, f"{plant.__name__} not caught: {verdict}"
    rows, cols = where
    i, j = verdict.worst
    assert i in range(C.shape[0])[rows] and j in range(C.shape[1])[cols], \
        f"the worst element {verdict.worst} is not where the fault is ({rows}, {cols})"
    if case.beta == 0 and plant in (last_row_unwritten, last_column_unwritten):
        assert verdict.nan == (C.shape[1] if plant is last_row_unwritten else C.shape[0])


# ---------------------------------------------------------------- planted copy faults
def one_ulp(out, buf):
    """The middle element one ulp up."""
    i, j = out.shape[0] // 2, out.shape[1] // 2
    out[i, j] = np.nextafter(out[i, j], out.dtype.type(np.inf))
    return i, j


def middle_unwritten(out, buf):
    """The middle element never written: it keeps the sentinel NaN."""
    i, j = out.shape[0] // 2, out.shape[1] // 2
    out.view(UINT[out.itemsize])[i, j] = SENTINEL_BITS[out.itemsize]
    return i, j


def copy_past_end(out, buf):
    """One element past the end written with a value of the data."""
    buf[out.size] = out[-1, -1]


def nan_past_end(out, buf):
    """One element past the end written with a computed (canonical) NaN: seen only
    because the sentinel is a NaN with another payload."""
    buf[out.size] = np.float64("nan")


COPY_PLANTS = [one_ulp, middle_unwritten, copy_past_end, nan_past_end]
COPY_CASES = [(dtype, op, shape, plant) for dtype in DTYPES for op in ("copy", "transpose")
              for shape in TRANSPOSE_SHAPES for plant in COPY_PLANTS]


@pytest.mark.parametrize(
    "dtype,op,shape,plant", COPY_CASES,
    ids=[f"{d}-{o}-{_dims(s)}-{p.__name__}" for d, o, s, p in COPY_CASES])
def test_planted_copy_fault_is_caught(dtype, op, shape, plant):
    src = random_normal(shape, dtype, np.random.default_rng(PLANT_SEED))
    ref = src.T if op == "transpose" else src
    buf, out = guarded(ref.shape, dtype, np)
    out[...] = ref
    assert compare_exact(out, ref).ok and guard_writes(buf, out.size) == 0
    where = plant(out, buf)
    verdict, writes = compare_exact(out, ref), guard_writes(buf, out.size)
    if where is None:
        assert verdict.ok and writes == 1, (verdict, writes)
    else:
        assert not verdict.ok and verdict.bad == 1 and verdict.worst == where, verdict
        assert verdict.nan == (plant is middle_unwritten)


# ---------------------------------------------------------------- no false alarms
# 20 seeds per shape in float32, the precision of every kernel but one, where the bound
# is the probabilistic one and so the one that could be too tight. 5 in float64: there
# the bound is the float64 reference's own worst case (gemm_bound), far from reach,
# and each seed at the large shapes costs a second of float64 matrix products.
SEEDS = {"float32": 20, "float64": 5}


@pytest.mark.parametrize("shape", RAGGED_SHAPES, ids=_dims)
@pytest.mark.parametrize("dtype", DTYPES)
def test_correct_results_pass(dtype, shape):
    """The float64 reference rounded to the kernel's precision, and results summed in the
    kernel's precision in other orders, pass at every seed; even seeds use (1, 0), odd
    ones (1.5, -0.5)."""
    M, N, K = shape
    for seed in range(SEEDS[dtype]):
        alpha, beta = ALPHA_BETA[seed % 2]
        A, B, C0 = _inputs(shape, dtype, seed, beta)
        ref, scale = gemm_reference(A, B, C0, alpha, beta)
        bound = gemm_bound(M, N, K, dtype) * scale
        results = [("reference rounded", ref.astype(dtype)),
                   ("k-blocked", k_blocked(A, B, C0, alpha, beta))]
        if dtype == "float32":     # in float64, NumPy's order is the reference's own
            results.append(("BLAS order", blas_order(A, B, C0, alpha, beta)))
        for name, C in results:
            v = compare_within(C, ref, bound)
            assert v.ok, f"seed {seed}, {name}: {v}"


# ---------------------------------------------------------------- the rules themselves
def test_compare_gemm_is_reference_bound_and_compare():
    A, B, C0 = _inputs((33, 65, 17), "float32", 3, beta=True)
    C = blas_order(A, B, C0, 1.5, -0.5)
    C[4, 5] += 1
    ref, scale = gemm_reference(A, B, C0, 1.5, -0.5)
    assert compare_gemm(C, A, B, C0, 1.5, -0.5) == \
        compare_within(C, ref, gemm_bound(33, 65, 17, "float32") * scale)
    assert compare_gemm(C, A, B, C0, 1.5, -0.5).worst == (4, 5)


def test_bound_is_the_stated_rule():
    u = unit_roundoff("float32")
    assert u == 2.0 ** -24 and unit_roundoff("float64") == 2.0 ** -53
    # probabilistic at K = 1000: lam = 9.18, 9.18 * sqrt(1002) * u = 1.73e-5 (docstring)
    assert gemm_bound(1000, 1000, 1000) == pytest.approx(1.732e-5, rel=1e-3)
    assert gemm_bound(1000, 1000, 1000) < gamma(1002, u) / 3
    # deterministic where it is the smaller: K = 1 gives gamma_3 (plus the reference's)
    assert gemm_bound(1, 1, 1) == pytest.approx(gamma(3, u), rel=1e-6)
    # float64 kernels: set by the float64 reference's own worst case, gamma_{K+2}(2^-53)
    assert gemm_bound(1000, 1000, 1000, "float64") == \
        pytest.approx(gamma(1002, 2.0 ** -53), rel=0.2)


def test_beta_zero_does_not_read_c0():
    A, B, _ = _inputs((7, 13, 5), "float32", 4, beta=False)
    poisoned = np.full((7, 13), np.nan, np.float32)
    assert compare_gemm(blas_order(A, B, None, 2.0, 0.0), A, B, poisoned, 2.0, 0.0).ok


def test_alpha_beta_are_taken_in_the_kernels_precision():
    """The launcher passes float32(alpha): a result computed with it passes even where
    the float64 alpha would differ by more than the bound (K = 1, bound ~ 2e-7)."""
    A, B, C0 = _inputs((1, 1, 1), "float32", 5, beta=True)
    C = blas_order(A, B, C0, 0.1, 0.3)
    assert compare_gemm(C, A, B, C0, 0.1, 0.3).ok


def test_nan_and_inf_in_inputs_must_reach_the_output():
    A, B, _ = _inputs((67, 45, 33), "float32", 6, beta=False)
    A[5, 7] = np.nan                 # row 5 of C: NaN
    B[3, 9] = np.inf                 # column 9 of C: +-Inf by the sign of A[:, 3]
    C = blas_order(A, B, None, 1.0, 0.0)
    assert compare_gemm(C, A, B).ok
    i = 0 if A[0, 3] > 0 else 1
    for wrong in (-C[i, 9], np.nan, np.float32(1.0)):     # Inf of the other sign, NaN, finite
        bad = C.copy()
        bad[i, 9] = wrong
        v = compare_gemm(bad, A, B)
        assert not v.ok and v.bad == 1 and v.worst == (i, 9), (wrong, v)
    bad = C.copy()
    bad[5, 0] = 0.0                  # finite where the reference is NaN
    assert compare_gemm(bad, A, B).worst == (5, 0)


def test_guarded_buffer_layout():
    buf, C = guarded((7, 13), "float32", np)
    assert C.flags.c_contiguous and C.base is buf and C.ctypes.data == buf.ctypes.data
    assert np.isnan(C).all() and guard_writes(buf, C.size) == 0
    assert buf.size - C.size >= 256 * 13       # a whole 256-row tile past the last row


def test_numpy_inputs_do_not_import_cupy():
    code = ("import sys, numpy as np\n"
            "from gemm_kernels.measure.check import compare_gemm, compare_exact, guarded\n"
            "A = np.ones((3, 2), np.float32); B = np.ones((2, 4), np.float32)\n"
            "assert compare_gemm(np.full((3, 4), 2, np.float32), A, B).ok\n"
            "assert compare_exact(A, A).ok and guarded((2, 2), 'float32', np)\n"
            "assert 'cupy' not in sys.modules, 'cupy imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True,
                   cwd=Path(__file__).resolve().parent.parent)


def test_a_wrong_element_of_an_exact_comparison_shows_no_infinite_ratio():
    from gemm_kernels.measure.check import Verdict
    exact = Verdict(False, 3, 0, (0, 1), -0.5, 0.25, float("inf"))
    assert "inf" not in str(exact) and "worst at (0, 1): -0.5 against 0.25" in str(exact)
    loose = Verdict(False, 3, 0, (0, 1), -0.5, 0.25, 7.0)
    assert "(|err|/bound 7)" in str(loose)


def test_a_wrong_element_is_shown_to_four_significant_digits():
    from gemm_kernels.measure.check import Verdict
    v = Verdict(False, 1, 0, (16, 41), -19.314054489135742, 17.77837647870183, 1.13e5)
    assert "worst at (16, 41): -19.31 against 17.78 (|err|/bound 113,000)" in str(v)


def test_counts_are_written_for_people():
    from gemm_kernels.measure.check import Verdict, count
    assert count(1, "element") == "1 element" and count(1536, "element") == "1,536 elements"
    v = Verdict(False, 1536, 1536, (0, 0), float("nan"), 2.865, float("inf"))
    assert str(v).startswith("1,536 elements wrong, 1,536 NaN;"), str(v)
    assert "element(s)" not in str(Verdict(False, 1, 0, (0, 0), 1.0, 2.0, 3.0))
