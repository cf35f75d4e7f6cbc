"""Chapter 03's exercise: the skeleton compiles and is refused, the solution passes every
step this machine can run, typical mistakes are refused with the right message (a
missing barrier on a GPU, where only a run can show the race)."""
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


# Typical wrong answers, refused on a GPU by the element-wise check.
WRONG = {
    "no barrier after the copies": (FIRST, ""),
    "no barrier after the products": (SECOND, ""),
    "the B tile stored transposed": (STORE_B, STORE_B.replace("Bs[ty][tx]", "Bs[tx][ty]")),
    "the step's offset forgotten for B": ("const int kb = k0 + ty;", "const int kb = ty;"),
}


@needs_gpu
@pytest.mark.parametrize("what", WRONG)
def test_wrong_answers_are_refused_on_a_gpu(what):
    refused_as_wrong(NAME, *WRONG[what])


