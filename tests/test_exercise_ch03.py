"""Chapter 03's exercise: the skeleton compiles and is refused, the solution passes every
step this machine can run, typical mistakes are refused with the right message: a
missing barrier already by the static check of the SASS (a race a run may not show),
wrong indices on a GPU."""
import pytest

from exercise_helpers import (FAIL, PASS, refused_as_wrong, solution, static_verdict)
from gpu import needs_gpu

NAME = "03_tile_loop"
FIRST = "__syncthreads();               // the tiles are complete"
SECOND = "__syncthreads();               // everyone has read the tiles before the next copy"
STORE_B = "Bs[ty][tx] = (kb < K && col < N) ? B[kb * N + col] : 0.f;"


def test_solution_passes_the_static_steps_with_its_barriers():
    v = static_verdict(NAME, solution(NAME))
    assert v["compile"][0] == PASS and v["static"][0] == PASS, v
    assert "BAR.SYNC present" in v["static"][1], v


def test_no_barrier_at_all_is_refused_by_the_sass_check():
    src = solution(NAME)
    assert FIRST in src and SECOND in src
    v = static_verdict(NAME, src.replace(FIRST, "").replace(SECOND, ""))
    assert v["compile"][0] == PASS
    assert v["static"][0] == FAIL and "no BAR.SYNC in the SASS" in v["static"][1], v


def test_the_skeleton_is_refused_for_its_stub_not_for_its_barriers():
    from exercise_helpers import skeleton_cell
    v = static_verdict(NAME, skeleton_cell(NAME))
    assert v["static"][0] == FAIL and "YOUR CODE HERE" in v["static"][1], v
    assert "__syncthreads() in the compiled loop" not in v["static"][1], v


@pytest.mark.parametrize("which, gone", [("first", FIRST), ("second", SECOND)])
def test_one_missing_barrier_is_refused_without_a_gpu(which, gone):
    """Only one __syncthreads() per step: the BAR.SYNC presence check alone passed it."""
    src = solution(NAME)
    v = static_verdict(NAME, src.replace(gone, ""))
    assert v["compile"][0] == PASS, v
    assert v["static"][0] == FAIL and "1 __syncthreads() in the compiled loop where a step " \
        "needs two" in v["static"][1], (which, v)


def test_the_barrier_order_is_read_from_the_sass():
    from gemm_kernels.exercises.ch03_checks import barrier_problems
    def sass(*ops):
        return "".join(f"        /*{16 * i:04x}*/                   {op} ;\n" for i, op in enumerate(ops))
    assert barrier_problems(sass("STS [R1], R2", "BAR.SYNC.DEFER_BLOCKING 0x0",
                                 "LDS.128 R4, [R3]", "BAR.SYNC.DEFER_BLOCKING 0x0")) == []
    assert "no shared store (STS) before" in barrier_problems(sass(
        "BAR.SYNC.DEFER_BLOCKING 0x0", "STS [R1], R2", "LDS R4, [R3]",
        "BAR.SYNC.DEFER_BLOCKING 0x0"))[0]
    assert "no shared load (LDS) between" in barrier_problems(sass(
        "STS [R1], R2", "BAR.SYNC.DEFER_BLOCKING 0x0", "BAR.SYNC.DEFER_BLOCKING 0x0",
        "LDS R4, [R3]"))[0]


# Typical wrong answers, refused on a GPU by the element-wise check.
WRONG = {
    "the B tile stored transposed": (STORE_B, STORE_B.replace("Bs[ty][tx]", "Bs[tx][ty]")),
    "the step's offset forgotten for B": ("const int kb = k0 + ty;", "const int kb = ty;"),
}


@needs_gpu
@pytest.mark.parametrize("what", WRONG)
def test_wrong_answers_are_refused_on_a_gpu(what):
    refused_as_wrong(NAME, *WRONG[what])


