"""Chapter 00's exercise, a copy kernel graded by its speed: the skeleton compiles and is
refused, the solution passes every step this machine can run, typical mistakes are refused
with the right message."""
import pytest

from exercise_helpers import (FAIL, PASS, assert_right_and_timed, grade, refused_as_wrong,
                              skeleton_cell, solution, static_verdict)
from gpu import needs_gpu

NAME = "00_copy"


def test_skeleton_compiles_and_is_refused_with_the_line_to_write():
    v = static_verdict(NAME, skeleton_cell(NAME))
    assert v["compile"][0] == PASS
    assert v["static"][0] == FAIL and "YOUR CODE HERE" in v["static"][1], v


# Typical wrong answers, refused on a GPU by the element-wise check or the guard.
WRONG = {
    "no bounds test": ("if (r < rows && c < cols)\n", ""),
    "the loop stops after ROWS rows": ("dy < TILE", "dy < ROWS"),
}


def columns_down_lanes(src: str) -> str:
    """Correct but slow: lanes on consecutive rows (threadIdx.x picks the row), so every
    warp instruction touches 32 sectors of 32 bytes to move 128 bytes."""
    old_c = "const int c = blockIdx.x * TILE + threadIdx.x;\n"
    old_r = "const int r = blockIdx.y * TILE + threadIdx.y + dy;"
    assert old_c in src and old_r in src
    return src.replace(old_c, "").replace(
        old_r, "const int r = blockIdx.y * TILE + threadIdx.x;\n"
               "        const int c = blockIdx.x * TILE + threadIdx.y + dy;")


def test_the_column_mapping_passes_the_static_steps():
    v = static_verdict(NAME, columns_down_lanes(solution(NAME)))
    assert v["compile"][0] == PASS and v["static"][0] == PASS, v


@needs_gpu
@pytest.mark.parametrize("what", WRONG)
def test_wrong_answers_are_refused_on_a_gpu(what):
    refused_as_wrong(NAME, *WRONG[what])


@needs_gpu
def test_a_copy_with_lanes_down_a_column_is_correct_and_only_its_speed_tells():
    """Right in every element: only the speed step can tell it apart (its verdict, a
    timing, is printed, not asserted)."""
    assert_right_and_timed(grade(NAME, columns_down_lanes(solution(NAME)), gpu=True))


