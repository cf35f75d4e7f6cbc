"""Chapter 09's second exercise (one step of the capstone's cp.async pipeline): the
skeleton compiles and is refused, the solution passes every step this machine can run,
waits with the wrong count (or none) and a barrier before the wait are refused from the
source, a tile copied into the stage being computed and a ring that does not move are
refused on a GPU; and the wait-count check on its own."""
import pytest

from gemm_kernels.exercises.ch09_checks import pipeline_wait
from exercise_helpers import (FAIL, PASS, refused_as_wrong, solution, static_verdict)
from gpu import needs_gpu

NAME = "09_capstone_step"
WAIT = "cp_async_wait<STAGES - 2>();\n                __syncthreads();"
ISSUE = "if constexpr (HOIST) issue_next(ws);\n                    else                 " \
        "issue_tile(tile + STAGES - 1, ws);"
RING = "        rs = rs + 1 == STAGES ? 0 : rs + 1;\n        ws = ws + 1 == STAGES ? 0 : ws + 1;\n"


def with_wait(count: str) -> str:
    return solution(NAME).replace(WAIT, f"cp_async_wait<{count}>();\n                "
                                        "__syncthreads();")


def loop(step: str) -> str:
    return "for (int tile = 0; tile < tiles; ++tile) {\n" + step + "\n}\n"


def test_wait_for_everything_is_refused_without_a_gpu():
    """Right results, but every copy gets one step of compute to arrive in, not three."""
    src = with_wait("0")
    assert src != solution(NAME)
    v = static_verdict(NAME, src)
    assert v["compile"][0] == PASS
    assert v["static"][0] == FAIL and "the overlap the stages buy is lost" in v["static"][1] \
        and "1 step of compute" in v["static"][1], v


def test_one_group_too_many_in_flight_is_refused_as_a_race_without_a_gpu():
    v = static_verdict(NAME, with_wait("STAGES - 1"))
    assert v["compile"][0] == PASS
    assert v["static"][0] == FAIL and "(a race)" in v["static"][1] \
        and "at STAGES=4 waits until at most 3 groups" in v["static"][1], v


def test_no_wait_at_all_is_refused_without_a_gpu():
    """A race the element-wise check cannot be relied on to see: each copy has
    STAGES - 1 steps of compute to land in, and usually does."""
    v = static_verdict(NAME, solution(NAME).replace(WAIT, "__syncthreads();"))
    assert v["compile"][0] == PASS
    assert v["static"][0] == FAIL and "no 'cp_async_wait<count>();' in the K loop" \
        in v["static"][1], v


def test_the_wait_count_check():
    assert pipeline_wait(loop("cp_async_commit(); cp_async_wait<STAGES - 2>(); "
                              "__syncthreads();")) == []
    # a literal 2 is right at STAGES = 4 only: at STAGES = 3 it is a race
    problems = pipeline_wait(loop("cp_async_commit(); cp_async_wait<2>(); __syncthreads();"))
    assert len(problems) == 1 and "at STAGES=3" in problems[0] and "race" in problems[0]
    problems = pipeline_wait(loop("cp_async_commit(); cp_async_wait<STAGES - 3>(); "
                                  "__syncthreads();"))
    assert len(problems) == 1 and "2 steps of compute" in problems[0], problems
    assert "0 or more" in pipeline_wait(loop("cp_async_commit(); cp_async_wait<STAGES - 5>();"
                                             " __syncthreads();"))[0]


def test_the_order_and_form_of_the_step_are_checked():
    problems = pipeline_wait(loop("cp_async_commit(); __syncthreads(); "
                                  "cp_async_wait<STAGES - 2>();"))
    assert problems == [p for p in problems if "no __syncthreads() after the wait" in p] \
        and problems, problems
    problems = pipeline_wait(loop("cp_async_wait<STAGES - 2>(); __syncthreads();"))
    assert len(problems) == 1 and "no cp_async_commit()" in problems[0], problems
    # a wait in a comment, or outside the K loop, does not count
    problems = pipeline_wait("cp_async_wait<STAGES - 2>();\n" + loop(
        "cp_async_commit(); // cp_async_wait<STAGES - 2>();\n__syncthreads();"))
    assert len(problems) == 1 and "no 'cp_async_wait<count>();'" in problems[0], problems
    assert "cannot read the wait's count" in pipeline_wait(loop(
        "cp_async_commit(); cp_async_wait<min(STAGES, 2)>(); __syncthreads();"))[0]
    assert "is not there any more" in pipeline_wait("cp_async_wait<STAGES - 2>();")[0]


WRONG = {
    # the copies land in the stage the block is reading, and stage ws keeps an old tile
    # that is computed on STAGES - 1 steps later: wrong from the fourth tile (K > 48) on
    "next tile copied into the stage being computed": (ISSUE, ISSUE.replace("(ws)", "(rs)")
                                                       .replace(", ws)", ", rs)")),
    # every step computes on stage 0 and copies into stage STAGES - 1
    "the ring does not move": (RING, ""),
}


@needs_gpu
@pytest.mark.parametrize("what", WRONG)
def test_wrong_answers_are_refused_on_a_gpu(what):
    old, new = WRONG[what]
    assert static_verdict(NAME, solution(NAME).replace(old, new))["static"][0] == PASS
    refused_as_wrong(NAME, old, new)


