"""Chapters 12 and 13's exercises without a GPU: the matrix-vector kernel may sum its
lanes with either warp shuffle (xor or down), and the WMMA kernel's wrong answers get the
hint that names their cause."""
import re

import pytest

from gemm_kernels.exercises.grader import grade
from exercise_helpers import FAIL, PASS, solution, status


def test_gemv_sums_its_lanes_with_either_shuffle():
    src = solution("12_gemv")
    down = re.sub(r"__shfl_xor_sync\(([^,]+), sum, d\)", r"__shfl_down_sync(\1, sum, d)", src)
    assert down != src
    steps = status(grade("12_gemv", down, gpu=False))
    assert steps["static"][0] == PASS and steps["correct"][0] == PASS, steps


def _wmma_hint(src: str) -> tuple[str, str]:
    report = grade("13_wmma", src, gpu=False)
    step = next(s for s in report.steps if s.name == "correct")
    return step.status, step.hint or ""


# The gemv adds its slices in the same launch (split_k_finish, cuda/split_k.cuh); the
# CPU step runs that ending too. Negative controls: a kernel that never finishes its
# split, and one whose last block is misjudged, leave C unwritten (NaN-poisoned) where
# K is split.
def _with_finish(src: str, old: str, new: str) -> str:
    """The solution with split_k.cuh's text in place of its #include, edited."""
    from gemm_kernels.core.registry import CUDA_DIR
    header = (CUDA_DIR / "split_k.cuh").read_text().replace('#include "common.cuh"', "")
    assert old in header
    out = src.replace('#include "split_k.cuh"', header.replace(old, new))
    assert out != src
    return out


def test_the_solution_finishes_its_split_on_the_cpu_too():
    src = _with_finish(solution("12_gemv"), "#pragma once", "")
    steps = status(grade("12_gemv", src, gpu=False))
    assert steps["correct"][0] == PASS, steps


def test_a_split_never_finished_leaves_c_unwritten():
    src = solution("12_gemv")
    line = next(l for l in src.split("\n") if "split_k_finish(" in l)
    steps = status(grade("12_gemv", src.replace(line, ""), gpu=False))
    assert steps["correct"][0] == FAIL and "NaN" in steps["correct"][1], steps


def test_a_misjudged_last_block_leaves_c_unwritten():
    src = _with_finish(solution("12_gemv"), "== gridDim.z - 1", "== gridDim.z")
    steps = status(grade("12_gemv", src, gpu=False))
    assert steps["correct"][0] == FAIL, steps


def test_gemv_race_check_runs_where_several_warps_and_slices_work():
    from gemm_kernels.core.kernels import get
    from gemm_kernels.exercises.catalog import EXERCISES
    from gemm_kernels.exercises.cpu_step import racecheck_shape
    ex = EXERCISES["12_gemv"]
    k = get(ex.kernel)
    M, N, K = racecheck_shape(k, k.resolve(ex.params), True)
    assert max(M, N) > 8 and K > 128, (M, N, K)      # more than one warp's rows, > 1 slice
    src = solution("12_gemv")
    step = next(s for s in grade("12_gemv", src, gpu=False).steps if s.name == "correct")
    assert step.status == PASS and f"no data race at {M}x{N}x{K}" in step.detail, step.detail


WARP_MAP = "threadIdx.y / WN, warp_n = threadIdx.y % WN"
# (what the slip replaces, with what, whether the grader passes it, what its hint names)
WMMA_SLIPS = {
    "C read although beta == 0": ("    if (beta != 0.0f) {", "    if (true) {", FAIL, "beta == 0"),
    "every warp of a block on one tile": (
        "const int warp_m = threadIdx.y / WN, warp_n = threadIdx.y % WN;",
        "const int warp_m = 0, warp_n = 0;", FAIL, "every tile of C get a warp"),
    "B loaded with the stride of A": ("B + static_cast<size_t>(k) * N + col, N);",
                                      "B + static_cast<size_t>(k) * N + col, K);", FAIL,
                                      "N for B"),
    # the "fast path" slip: C = acc instead of alpha * acc when C is not read
    "alpha dropped where beta == 0": (
        "} else {\n        for (int i = 0; i < acc.num_elements; ++i) "
        "acc.x[i] = alpha * acc.x[i];\n    }", "}", FAIL, "alpha != 1 and beta == 0"),
    # identical to the right map at 2 x 2 warps: caught on a wider warp grid
    "WM and WN swapped in the warp index": (
        WARP_MAP, "threadIdx.y / WM, warp_n = threadIdx.y % WM", FAIL, "WM=2, WN=4"),
    # a different but right map (the solution's question): warps numbered down M first
    "warps numbered down M first": (
        WARP_MAP, "threadIdx.y % WM, warp_n = threadIdx.y / WM", PASS, ""),
}


@pytest.mark.parametrize("slip", WMMA_SLIPS)
def test_wmma_slips_get_the_verdict_and_hint_that_name_them(slip):
    old, new, verdict, named = WMMA_SLIPS[slip]
    src = solution("13_wmma")
    assert old in src
    status_, hint = _wmma_hint(src.replace(old, new))
    assert status_ == verdict and named in hint, (status_, hint)


def test_a_scalar_loop_over_all_of_k_is_refused_on_the_cpu():
    """The plain (non-VEC) path runs on the CPU at a shape whose K is not a multiple of 4
    and longer than one 128-element chunk, so that its K is split: a scalar loop bounded
    by K instead of the slice's KS reads past the slice there."""
    src = solution("12_gemv")
    old = "for (int k = lane; k < KS; k += 32)"
    assert old in src
    steps = status(grade("12_gemv", src.replace(old, "for (int k = lane; k < K; k += 32)"),
                         gpu=False))
    assert steps["correct"][0] == FAIL, steps
